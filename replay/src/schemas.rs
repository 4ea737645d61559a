//! The column contracts of the replay's frames (declared with `frames::schema`, rendered
//! into `schemas/` by `pipeline schemas`, checked on write).

use frames::schema::{ColumnSpec, ColumnType::*, FrameSpec, TimeBase, col, col_in};
use model::run_dir::FRAME_SCHEMA_VERSION;

const WORKLOADS: &[&str] = &["tmax", "deepswe"];
/// Names of the selected schedules, in output order (from [`search::Selected::ALL`], the
/// one list).
pub const SCHEDULE_NAMES: &[&str] = &search::SELECTED_NAMES;
const RESOURCES: &[&str] = &["cpu", "ram", "gpu", "cache"];
const LP_STATUSES: &[&str] = &["converged", "budget_exhausted", "skipped"];
const OBJECTIVES: &[&str] = &["gpu", "cache", "makespan"];
/// The family names, from [`search::Family::ALL`] (the one list).
const FAMILY_NAMES: [&str; search::Family::ALL.len()] = {
    let mut names = [""; search::Family::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = search::Family::ALL[i].as_str();
        i += 1;
    }
    names
};
const FAMILIES: &[&str] = &FAMILY_NAMES;

/// `schedules.parquet`.
pub const SCHEDULES: FrameSpec = FrameSpec {
    name: "schedules",
    doc: "One row per (workload, selected schedule, included attempt): the attempt's interval in the replay, seconds from time 0 (all attempts ready at 0). Rows by workload (search.order), schedule, start, FIFO position.",
    columns: &[
        col_in("workload", WORKLOADS, "Workload."),
        col_in("schedule", SCHEDULE_NAMES, "Selected schedule."),
        col("attempt_id", Str, false, "Included attempt."),
        col(
            "start_s",
            F64,
            false,
            "Start, seconds (a whole number of nanoseconds).",
        )
        .time(TimeBase::AfterReplayStart),
        col(
            "end_s",
            F64,
            false,
            "End = start + fixed duration, seconds.",
        )
        .time(TimeBase::AfterReplayStart),
    ],
};

/// `bounds.parquet`.
pub const BOUNDS: FrameSpec = FrameSpec {
    name: "bounds",
    doc: "One row per (workload, resource): the study's lower bound (docs/FORMAT.md), FIFO holding, FIFO ideal and best found ideal value, in hours (core-, GiB-, GPU-, GiB-hours); then the best valid lower bound (the study's or the stronger bounds of docs/BOUNDS.md, whichever is larger) and the certified gap against it.",
    columns: &[
        col_in("workload", WORKLOADS, "Workload."),
        col_in("resource", RESOURCES, "Resource."),
        col(
            "lower_bound_h",
            F64,
            false,
            "The study's lower bound (docs/FORMAT.md), hours.",
        ),
        col("fifo_holding_h", F64, false, "FIFO holding value, hours."),
        col(
            "fifo_ideal_h",
            F64,
            false,
            "Ideal value of the FIFO schedule, hours.",
        ),
        col(
            "best_found_h",
            F64,
            false,
            "Smallest ideal value found by the search (CPU/RAM: the invariant ideal value), hours.",
        ),
        col(
            "seed_profile_best_h",
            F64,
            true,
            "GPU and cache: the best the seed profile (the study's method) finds, hours; in the default (extended) run it is the best after its seed phase, which runs exactly the seed profile's candidates first, so best_found_h is never larger. Null for CPU/RAM.",
        ),
        col(
            "gap_pct",
            F64,
            true,
            "(best_found_h / lower_bound_h - 1) * 100; null when the bound is 0.",
        ),
        col(
            "best_bound_h",
            F64,
            false,
            "Best valid lower bound, hours: max(lower_bound_h, the stronger bounds of docs/BOUNDS.md).",
        ),
        col(
            "certified_gap_pct",
            F64,
            true,
            "(best_found_h / best_bound_h - 1) * 100: how far above optimal the best found can be at most; null when the bound is 0.",
        ),
        col(
            "lp_bound_h",
            F64,
            true,
            "The certified LP bound of docs/BOUNDS.md (HiGHS: GPU configuration LP, cache fluid LP), hours; also counted in best_bound_h. Null for CPU/RAM and when the LP was skipped.",
        ),
        ColumnSpec {
            name: "lp_status",
            ty: Str,
            nullable: true,
            values: LP_STATUSES,
            doc: "How the LP bound ended: converged, budget_exhausted (still a valid bound, only weaker) or skipped (see replay.json for why). Null for CPU/RAM.",
            time: None,
        },
    ],
};

/// `pareto.parquet`.
pub const PARETO: FrameSpec = FrameSpec {
    name: "pareto",
    doc: "One row per (workload, point of the Pareto front): the feasible candidates whose (GPU, cache) ideal values no other candidate found matches or beats in both, by GPU ascending; each validated independently. best_joint is the point with the smallest gpu/fifo_gpu + cache/fifo_cache.",
    columns: &[
        col_in("workload", WORKLOADS, "Workload."),
        col(
            "point",
            U32,
            false,
            "Position on the front, by GPU ascending.",
        ),
        col(
            "found_by",
            Str,
            false,
            "The candidate that produced it (family#index).",
        ),
        col(
            "candidate",
            U64,
            false,
            "Its index among the workload's candidates (0 = FIFO).",
        ),
        col("makespan_s", F64, false, "Latest end, seconds."),
        col("gpu_ideal_h", F64, false, "GPU ideal GPU-hours."),
        col("cache_ideal_h", F64, false, "Image-cache ideal GiB-hours."),
        col(
            "best_joint",
            Bool,
            false,
            "This point is the selected best_joint schedule.",
        ),
        col(
            "validated",
            Bool,
            false,
            "The independent validator passed this schedule.",
        ),
    ],
};

/// `search_trace.parquet`.
pub const SEARCH_TRACE: FrameSpec = FrameSpec {
    name: "search_trace",
    doc: "Best so far per objective after each evaluated batch of a family. `makespan` is the CPU/RAM display criterion (the fastest feasible schedule), in hours.",
    columns: &[
        col_in("workload", WORKLOADS, "Workload."),
        col_in("objective", OBJECTIVES, "Objective."),
        col_in("family", FAMILIES, "Family of the batch just evaluated."),
        col(
            "candidates_evaluated",
            U64,
            false,
            "Candidates evaluated so far in this workload (all families, rejected ones included).",
        ),
        col("best_so_far_h", F64, false, "Best value so far, hours."),
        col(
            "best_makespan_s",
            F64,
            false,
            "Makespan of that best schedule, seconds.",
        ),
    ],
};

/// `joint_schedules.csv`.
pub const JOINT_SCHEDULES: FrameSpec = FrameSpec {
    name: "joint_schedules",
    doc: "One row per (workload, selected schedule): its makespan, the deadline and the four ideal values of that same schedule (values that coexist), and whether the independent validator passed it.",
    columns: &[
        col_in("workload", WORKLOADS, "Workload."),
        col_in("schedule", SCHEDULE_NAMES, "Selected schedule."),
        col("makespan_s", F64, false, "Latest end, seconds."),
        col(
            "deadline_s",
            F64,
            false,
            "Deadline D = FIFO makespan, seconds.",
        ),
        col("cpu_ideal_h", F64, false, "CPU ideal core-hours."),
        col("ram_ideal_h", F64, false, "RAM ideal GiB-hours."),
        col("gpu_ideal_h", F64, false, "GPU ideal GPU-hours."),
        col("cache_ideal_h", F64, false, "Image-cache ideal GiB-hours."),
        col(
            "validated",
            Bool,
            false,
            "The independent validator passed this schedule.",
        ),
    ],
};

/// `blob_bounds.parquet`.
pub const BLOB_BOUNDS: FrameSpec = FrameSpec {
    name: "blob_bounds",
    doc: "One row per (workload, image layer some included attempt uses): where the cache objective sits blob by blob. best_cache_h over a workload's rows sums to its best found cache value, fifo_h to its FIFO ideal value, per_blob_bound_h to a valid lower bound (each blob relaxed on its own). Rows by workload (search.order), then blob in the order the replay first met it.",
    columns: &[
        col_in("workload", WORKLOADS, "Workload."),
        col("digest", Str, false, "sha256:<hex> of the layer."),
        col("gib", F64, false, "Compressed size, GiB (2^30 bytes)."),
        col("users", U32, false, "Included attempts that use it."),
        col(
            "per_blob_bound_h",
            F64,
            false,
            "GiB x the blob's own lower bound on the union of its users' lifetimes (the largest of its machine bound with K'_b, CPU and RAM energy bounds and compulsory parts; docs/BOUNDS.md), hours.",
        ),
        col(
            "lp_open_h",
            F64,
            true,
            "GiB x the time the blob is open in the cache fluid LP's last restricted master solution, hours: the LP's share of the blob (with the other blobs' per_blob_bound_h these sum to the LP's master value, not its certified bound). Null when the blob is not among the LP's blobs or the LP was skipped.",
        ),
        col(
            "fifo_h",
            F64,
            false,
            "GiB x the union of its users' lifetimes in the FIFO schedule, hours.",
        ),
        col(
            "best_cache_h",
            F64,
            false,
            "GiB x the union of its users' lifetimes in the best_cache schedule, hours.",
        ),
    ],
};

/// Every frame (and CSV table) the replay writes.
pub const FRAMES: [FrameSpec; 6] = [
    SCHEDULES,
    JOINT_SCHEDULES,
    BOUNDS,
    SEARCH_TRACE,
    PARETO,
    BLOB_BOUNDS,
];

/// The file a frame is written to below the run directory.
pub fn file_of(spec: &FrameSpec) -> String {
    if spec.name == JOINT_SCHEDULES.name {
        format!("{}.csv", spec.name)
    } else {
        spec.parquet_file()
    }
}

/// `(file name, JSON schema text)` of every replay frame, for `schemas/`.
pub fn frame_schemas() -> Vec<(String, String)> {
    FRAMES
        .iter()
        .map(|f| {
            (
                format!("{}.schema.json", f.name),
                f.json_schema_text(FRAME_SCHEMA_VERSION),
            )
        })
        .collect()
}
