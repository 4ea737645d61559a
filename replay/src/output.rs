//! Writing the stage's outputs below the run directory: Parquet frames (via `frames`, byte
//! stable), `joint_schedules.csv`, `replay.json` (deterministic) and `replay.run.json`
//! (the only file with wall-clock facts).

use crate::error::ReplayError;
use crate::input::{INPUT_FRAMES, ReplayInput};
use crate::schemas::{
    BLOB_BOUNDS, BOUNDS, JOINT_SCHEDULES, PARETO, SCHEDULES, SEARCH_TRACE, file_of,
};
use crate::{ReplayReport, RunTimings, SelectedSchedule};
use frames::FrameMeta;
use model::WorkloadId;
use model::run_dir::{FRAME_SCHEMA_VERSION, JSON_FORMAT_VERSION, RunDir};
use polars::prelude::*;
use schedule::ResourceHours;
use search::{AdaptiveRecord, FamilyStats, ReplayBudget, RngRecord};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::Digest;
use std::path::PathBuf;

/// How the best joint schedule is chosen (also written to `replay.json`).
pub const JOINT_OBJECTIVE: &str = "the point of the Pareto front (GPU vs cache, over every feasible candidate evaluated) that minimizes gpu_ideal_h / fifo_gpu_ideal_h + cache_ideal_h / fifo_cache_ideal_h (a term is 0 when its FIFO value is 0); ties (relative 1e-9) prefer the smaller makespan, then the earlier candidate";
/// The tie rule of every objective.
pub const TIE_RULE: &str = "values within relative 1e-9 tie; a tie prefers the smaller makespan, then the earlier found candidate";
/// The RNG, named.
pub const RNG_ALGORITHM: &str = "ChaCha8 (rand_chacha 0.9), shared stream = ChaCha8Rng::seed_from_u64(seed); per workload in order, one 32-byte seed per random family is drawn from it; candidate i of a family uses ChaCha8Rng::from_seed(family seed) on stream i";

fn polars_err(frame: &str) -> impl FnOnce(PolarsError) -> ReplayError + '_ {
    move |source| ReplayError::Polars {
        frame: frame.to_string(),
        source,
    }
}

fn meta(frame: &str, report: &ReplayReport) -> FrameMeta {
    FrameMeta::new(frame, FRAME_SCHEMA_VERSION)
        .with("agentrace.tool_version", model::TOOL_VERSION)
        .with("agentrace.seed", report.seed.to_string())
        .with(
            "agentrace.search_order",
            report
                .order
                .iter()
                .map(|w| w.as_str())
                .collect::<Vec<_>>()
                .join(","),
        )
}

/// Shortest round-trip decimal of a float (deterministic).
fn num(x: f64) -> String {
    format!("{x}")
}

/// Write every deterministic output; returns the paths written.
pub fn write_outputs(
    cfg: &model::LoadedConfig,
    input: &ReplayInput,
    report: &ReplayReport,
) -> Result<Vec<PathBuf>, ReplayError> {
    let dir = RunDir::new(&cfg.run_dir);
    let mut written = Vec::new();

    // schedules.parquet: validated schedules only.
    let (mut w, mut s, mut a, mut st, mut en) = (vec![], vec![], vec![], vec![], vec![]);
    for (wr, inst) in report.workloads.iter().zip(&input.workloads) {
        let durations: Vec<i64> = inst
            .attempts
            .iter()
            .map(|x| schedule::evaluate::to_ns(x.duration_s))
            .collect();
        for sel in wr.selected.iter().filter(|x| x.validated) {
            let mut idx: Vec<usize> = (0..inst.attempts.len()).collect();
            idx.sort_by_key(|&j| (sel.starts_ns[j], j));
            for j in idx {
                w.push(wr.workload.as_str());
                s.push(sel.schedule);
                a.push(inst.attempts[j].attempt_id.as_str());
                st.push(schedule::evaluate::ns_to_s(sel.starts_ns[j]));
                en.push(schedule::evaluate::ns_to_s(sel.starts_ns[j] + durations[j]));
            }
        }
    }
    let mut df = df!(
        "workload" => w,
        "schedule" => s,
        "attempt_id" => a,
        "start_s" => st,
        "end_s" => en,
    )
    .map_err(polars_err(SCHEDULES.name))?;
    let p = dir.file(&file_of(&SCHEDULES));
    frames::write_declared(&p, &mut df, &SCHEDULES, &meta(SCHEDULES.name, report))?;
    written.push(p);

    // joint_schedules.csv (no field needs quoting: names and plain numbers).
    let p = dir.file(&file_of(&JOINT_SCHEDULES));
    let csv_err = |e: csv::Error| ReplayError::Io {
        path: p.clone(),
        source: e.into(),
    };
    let mut csv = csv::Writer::from_writer(Vec::new());
    csv.write_record(JOINT_SCHEDULES.columns.iter().map(|c| c.name))
        .map_err(csv_err)?;
    for wr in &report.workloads {
        for sel in &wr.selected {
            csv.write_record([
                wr.workload.to_string(),
                sel.schedule.to_string(),
                num(sel.makespan_s),
                num(wr.deadline_s),
                num(sel.ideal.cpu),
                num(sel.ideal.ram),
                num(sel.ideal.gpu),
                num(sel.ideal.cache),
                sel.validated.to_string(),
            ])
            .map_err(csv_err)?;
        }
    }
    let csv = csv.into_inner().map_err(|e| ReplayError::Io {
        path: p.clone(),
        source: e.into_error(),
    })?;
    frames::atomic_write(&p, &csv)?;
    written.push(p);

    // bounds.parquet.
    let (mut w, mut r, mut lb, mut hold, mut fi, mut best, mut gap) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut bb, mut cgap, mut seedb) = (vec![], vec![], vec![]);
    let (mut lpb, mut lps): (Vec<Option<f64>>, Vec<Option<&str>>) = (vec![], vec![]);
    for wr in &report.workloads {
        for res in schedule::Resource::ALL {
            let lp = match res {
                schedule::Resource::Gpu => Some(&wr.lp_bounds.gpu),
                schedule::Resource::Cache => Some(&wr.lp_bounds.cache),
                _ => None,
            };
            lpb.push(lp.and_then(|b| b.bound_h));
            lps.push(lp.map(|b| b.status.as_str()));
            let l = wr.lower_bounds.get(res);
            let b = wr.best_found.get(res);
            seedb.push(match res {
                schedule::Resource::Gpu => Some(wr.seed_profile_best.0),
                schedule::Resource::Cache => Some(wr.seed_profile_best.1),
                _ => None,
            });
            w.push(wr.workload.as_str());
            r.push(res.as_str());
            lb.push(l);
            hold.push(wr.fifo_holding.get(res));
            fi.push(wr.fifo_ideal.get(res));
            best.push(b);
            gap.push(if l > 0.0 {
                Some((b / l - 1.0) * 100.0)
            } else {
                None
            });
            let v = wr.best_bounds.get(res);
            bb.push(v);
            cgap.push(if v > 0.0 {
                Some((b / v - 1.0) * 100.0)
            } else {
                None
            });
        }
    }
    let mut df = df!(
        "workload" => w,
        "resource" => r,
        "lower_bound_h" => lb,
        "fifo_holding_h" => hold,
        "fifo_ideal_h" => fi,
        "best_found_h" => best,
        "seed_profile_best_h" => seedb,
        "gap_pct" => gap,
        "best_bound_h" => bb,
        "certified_gap_pct" => cgap,
        "lp_bound_h" => lpb,
        "lp_status" => lps,
    )
    .map_err(polars_err(BOUNDS.name))?;
    let p = dir.file(&file_of(&BOUNDS));
    frames::write_declared(&p, &mut df, &BOUNDS, &meta(BOUNDS.name, report))?;
    written.push(p);

    // search_trace.parquet.
    let (mut w, mut o, mut f, mut n, mut b, mut m) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for wr in &report.workloads {
        for t in &wr.trace {
            w.push(wr.workload.as_str());
            o.push(t.objective);
            f.push(t.family.as_str());
            n.push(t.candidates_evaluated);
            b.push(t.best_so_far_h);
            m.push(t.best_makespan_s);
        }
    }
    let mut df = df!(
        "workload" => w,
        "objective" => o,
        "family" => f,
        "candidates_evaluated" => n,
        "best_so_far_h" => b,
        "best_makespan_s" => m,
    )
    .map_err(polars_err(SEARCH_TRACE.name))?;
    let p = dir.file(&file_of(&SEARCH_TRACE));
    frames::write_declared(&p, &mut df, &SEARCH_TRACE, &meta(SEARCH_TRACE.name, report))?;
    written.push(p);

    // pareto.parquet.
    let (mut w, mut pt, mut fb, mut cand, mut mk, mut gp, mut ca, mut bj, mut va) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    for wr in &report.workloads {
        for p in &wr.pareto {
            w.push(wr.workload.as_str());
            pt.push(p.point);
            fb.push(p.found_by.as_str());
            cand.push(p.candidate);
            mk.push(p.makespan_s);
            gp.push(p.gpu_h);
            ca.push(p.cache_h);
            bj.push(p.best_joint);
            va.push(p.validated);
        }
    }
    let mut df = df!(
        "workload" => w,
        "point" => pt,
        "found_by" => fb,
        "candidate" => cand,
        "makespan_s" => mk,
        "gpu_ideal_h" => gp,
        "cache_ideal_h" => ca,
        "best_joint" => bj,
        "validated" => va,
    )
    .map_err(polars_err(PARETO.name))?;
    let p = dir.file(&file_of(&PARETO));
    frames::write_declared(&p, &mut df, &PARETO, &meta(PARETO.name, report))?;
    written.push(p);

    // blob_bounds.parquet.
    let (mut w, mut dg, mut gib, mut us, mut pb, mut lp, mut fi, mut bc) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    for wr in &report.workloads {
        for r in &wr.blob_bounds {
            w.push(wr.workload.as_str());
            dg.push(r.digest.as_str());
            gib.push(r.gib);
            us.push(r.users);
            pb.push(r.per_blob_bound_h);
            lp.push(r.lp_open_h);
            fi.push(r.fifo_h);
            bc.push(r.best_cache_h);
        }
    }
    let mut df = df!(
        "workload" => w,
        "digest" => dg,
        "gib" => gib,
        "users" => us,
        "per_blob_bound_h" => pb,
        "lp_open_h" => lp,
        "fifo_h" => fi,
        "best_cache_h" => bc,
    )
    .map_err(polars_err(BLOB_BOUNDS.name))?;
    let p = dir.file(&file_of(&BLOB_BOUNDS));
    frames::write_declared(&p, &mut df, &BLOB_BOUNDS, &meta(BLOB_BOUNDS.name, report))?;
    written.push(p);

    // replay.json.
    let mut inputs = Vec::new();
    for spec in INPUT_FRAMES {
        let file = spec.parquet_file();
        let path = dir.file(&file);
        let bytes = std::fs::read(&path).map_err(|source| ReplayError::Io {
            path: path.clone(),
            source,
        })?;
        inputs.push(InputRecord {
            frame: spec.name.to_string(),
            file,
            sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        });
    }
    let doc = ReplayDocument::new(cfg, inputs, report);
    written.push(write_replay_json(&dir, &doc)?);
    Ok(written)
}

/// `replay.json`: what the replay read, how its RNG was consumed (the study says the seeds
/// must be preserved), its budget and rules, and per workload the bounds, the baselines and
/// the selected schedules. Written and read through this one type; keys are written in
/// alphabetical order at every level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayDocument {
    /// [`JSON_FORMAT_VERSION`], checked on read.
    pub format_version: u32,
    /// Always `replay`.
    pub stage: String,
    /// The tool version that wrote it.
    pub tool_version: String,
    /// SHA256 of the config bytes the run used.
    pub config_sha256: String,
    /// The audit frames read, with their SHA256.
    pub inputs: Vec<InputRecord>,
    /// The shared RNG stream.
    pub rng: RngDocument,
    /// The search budget, as the config gave it.
    pub budget: ReplayBudget,
    /// [`TIE_RULE`].
    pub tie_rule: String,
    /// [`JOINT_OBJECTIVE`].
    pub joint_objective: String,
    /// How times and quotas are represented.
    pub time_grid: String,
    /// One record per workload, in search order.
    pub workloads: Vec<WorkloadDocument>,
}

/// One input frame of the replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRecord {
    /// The frame's name.
    pub frame: String,
    /// Its file below the run directory.
    pub file: String,
    /// SHA256 of its bytes as read.
    pub sha256: String,
}

/// The shared RNG stream of the replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RngDocument {
    /// [`RNG_ALGORITHM`].
    pub algorithm: String,
    /// The config's seed.
    pub seed: u64,
    /// The workloads in the order they drew from the stream.
    pub order: Vec<WorkloadId>,
}

/// The seed profile's bests of one workload, hours.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedProfileBest {
    /// Best GPU ideal hours of the seed profile's candidates.
    pub gpu: f64,
    /// Best cache ideal hours of the seed profile's candidates.
    pub cache: f64,
}

/// One workload's record in `replay.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDocument {
    /// The workload.
    pub workload: WorkloadId,
    /// Included attempts replayed.
    pub attempts: usize,
    /// Request intervals.
    pub request_intervals: usize,
    /// Distinct image blobs.
    pub blobs: usize,
    /// The deadline D, seconds.
    pub deadline_s: f64,
    /// The simple lower bounds.
    pub lower_bounds_h: ResourceHours,
    /// The stronger bounds and their components.
    pub strong_bounds_h: bounds::StrongBounds,
    /// The LP bounds.
    pub lp_bounds_h: bounds::LpBounds,
    /// The best valid bound per resource.
    pub best_bounds_h: ResourceHours,
    /// FIFO holding hours.
    pub fifo_holding_h: ResourceHours,
    /// FIFO ideal hours.
    pub fifo_ideal_h: ResourceHours,
    /// Best found per resource.
    pub best_found_h: ResourceHours,
    /// The selected schedules.
    pub selected: Vec<SelectedSchedule>,
    /// Candidates evaluated.
    pub candidates_evaluated: u64,
    /// Per family counts.
    pub search_summary: Vec<FamilyStats>,
    /// The seed profile's bests.
    pub seed_profile_best_h: SeedProfileBest,
    /// What the adaptive phase did.
    pub adaptive: AdaptiveRecord,
    /// Points of the GPU-vs-cache Pareto front.
    pub pareto_points: usize,
    /// How the workload consumed the shared RNG stream.
    pub rng: RngRecord,
}

impl ReplayDocument {
    /// The document of a finished replay.
    pub fn new(cfg: &model::LoadedConfig, inputs: Vec<InputRecord>, report: &ReplayReport) -> Self {
        ReplayDocument {
            format_version: JSON_FORMAT_VERSION,
            stage: "replay".to_string(),
            tool_version: model::TOOL_VERSION.to_string(),
            config_sha256: cfg.sha256.clone(),
            inputs,
            rng: RngDocument {
                algorithm: RNG_ALGORITHM.to_string(),
                seed: report.seed,
                order: report.order.clone(),
            },
            budget: report.budget.clone(),
            tie_rule: TIE_RULE.to_string(),
            joint_objective: JOINT_OBJECTIVE.to_string(),
            time_grid: TIME_GRID.to_string(),
            workloads: report.workloads.iter().map(WorkloadDocument::of).collect(),
        }
    }
}

impl WorkloadDocument {
    fn of(wr: &crate::WorkloadReport) -> Self {
        WorkloadDocument {
            workload: wr.workload,
            attempts: wr.attempts,
            request_intervals: wr.request_intervals,
            blobs: wr.blobs,
            deadline_s: wr.deadline_s,
            lower_bounds_h: wr.lower_bounds,
            strong_bounds_h: wr.strong_bounds,
            lp_bounds_h: wr.lp_bounds.clone(),
            best_bounds_h: wr.best_bounds,
            fifo_holding_h: wr.fifo_holding,
            fifo_ideal_h: wr.fifo_ideal,
            best_found_h: wr.best_found,
            selected: wr.selected.clone(),
            candidates_evaluated: wr.candidates_evaluated,
            search_summary: wr.families.clone(),
            seed_profile_best_h: SeedProfileBest {
                gpu: wr.seed_profile_best.0,
                cache: wr.seed_profile_best.1,
            },
            adaptive: wr.adaptive.clone(),
            pareto_points: wr.pareto.len(),
            rng: wr.rng.clone(),
        }
    }
}

/// How times and quotas are represented (written to `replay.json`).
pub const TIME_GRID: &str = "integer nanoseconds; quotas and caps in integer nano-units";

/// Write `replay.json` (keys sorted at every level, two-space indent, final newline).
pub fn write_replay_json(dir: &RunDir, doc: &ReplayDocument) -> Result<PathBuf, ReplayError> {
    let p = dir.file(REPLAY_JSON_FILE);
    // Through `Value`, whose maps are sorted: the bytes do not depend on field order.
    let value = serde_json::to_value(doc).map_err(|e| {
        ReplayError::Document(model::run_dir::DocumentError::Invalid {
            path: p.clone(),
            detail: e.to_string(),
        })
    })?;
    let text = serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
    frames::atomic_write(&p, text.as_bytes())?;
    Ok(p)
}

/// Read `replay.json` through its type: the format version is checked first (a document of
/// another version is refused, naming both), then every field (an unknown or missing field,
/// or a schedule or operator name this build does not know, is refused, naming it).
pub fn read_replay_json(path: &std::path::Path) -> Result<ReplayDocument, ReplayError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    model::run_dir::check_json_version(path, &text, JSON_FORMAT_VERSION)
        .map_err(ReplayError::Document)?;
    serde_json::from_str(&text).map_err(|e| {
        ReplayError::Document(model::run_dir::DocumentError::Invalid {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
    })
}

/// The replay's summary document below the run directory.
pub const REPLAY_JSON_FILE: &str = "replay.json";

/// The stage's outputs below the run directory, every one deterministic: the frames of
/// [`crate::schemas::FRAMES`], then `replay.json` (the RNG record and the family seeds).
pub fn output_files() -> Vec<String> {
    crate::schemas::FRAMES
        .iter()
        .map(file_of)
        .chain(std::iter::once(REPLAY_JSON_FILE.to_string()))
        .collect()
}
/// The replay's wall-clock facts below the run directory.
pub const RUN_JSON_FILE: &str = "replay.run.json";

/// Write `replay.run.json`: wall-clock facts of this run (never compared across runs).
pub fn write_run_json(cfg: &model::LoadedConfig, t: &RunTimings) -> Result<PathBuf, ReplayError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let doc = json!({
        "format_version": JSON_FORMAT_VERSION,
        "stage": "replay",
        "tool_version": model::TOOL_VERSION,
        "finished_epoch_s": now,
        "threads": t.threads,
        "available_parallelism": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "load_s": t.load_s,
        "workloads_s": t.workloads_s,
        "write_s": t.write_s,
    });
    let p = RunDir::new(&cfg.run_dir).file(RUN_JSON_FILE);
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    frames::atomic_write(&p, text.as_bytes())?;
    Ok(p)
}
