//! The replay stage's driver: read the audit frames, replay and search every workload,
//! validate every selected schedule, write the outputs; and the stage as the pipeline sees it.

use crate::error::ReplayError;
use crate::input::{ReplayInput, load_input};
use crate::output;
use crate::schemas::SCHEDULE_NAMES;
use model::WorkloadId;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use schedule::reference::{
    ClaimedValues, ScheduleFailure, independent_fifo, schedule_rows, validate_schedule,
};
use schedule::{GridInstance, ResourceHours, WorkloadInstance, accounting, evaluate};
use search::names::{StaticName, known_name};
use search::{AdaptiveRecord, FamilyStats, ReplayBudget, RngRecord, TraceRow};
use search::{Found, Selected, search_workload};
use serde::{Deserialize, Deserializer, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// How to run the stage (nothing here changes the results).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Threads of the local rayon pool; `None`: one per available core.
    pub threads: Option<usize>,
}

/// One selected schedule of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectedSchedule {
    /// One of [`SCHEDULE_NAMES`]: `fifo`, `best_cpu_ram`, `best_gpu`, `best_cache`,
    /// `best_joint`, or the seed profile's bests `seed_best_gpu` and `seed_best_cache`.
    #[serde(deserialize_with = "schedule_named")]
    pub schedule: StaticName,
    /// The candidate that produced it (`priority_order:fifo`, `local_move_gpu#17`, ...).
    pub found_by: String,
    /// Its index among the workload's candidates (0 = FIFO).
    pub candidate: u64,
    /// Latest end, seconds.
    pub makespan_s: f64,
    /// The four ideal values of this same schedule.
    pub ideal: ResourceHours,
    /// Whether the independent validator passed it.
    pub validated: bool,
    /// Start of each attempt (index = the workload instance's attempt order), ns.
    #[serde(skip)]
    pub starts_ns: Vec<i64>,
}

/// Read a schedule's name back as its entry of [`SCHEDULE_NAMES`].
fn schedule_named<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    known_name(d, SCHEDULE_NAMES.iter().copied(), "schedule")
}

/// One point of the Pareto front of GPU vs cache.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParetoPoint {
    /// Position on the front, by GPU ascending.
    pub point: u32,
    /// The candidate that produced it.
    pub found_by: String,
    /// Its index among the workload's candidates.
    pub candidate: u64,
    /// Latest end, seconds.
    pub makespan_s: f64,
    /// GPU ideal hours.
    pub gpu_h: f64,
    /// Cache ideal hours.
    pub cache_h: f64,
    /// Whether this point is the selected `best_joint`.
    pub best_joint: bool,
    /// Whether the independent validator passed it.
    pub validated: bool,
}

/// One blob's row of `blob_bounds.parquet` (hours are GiB-hours).
#[derive(Debug, Clone, PartialEq)]
pub struct BlobBoundRow {
    /// `sha256:<hex>`.
    pub digest: String,
    /// Compressed size, GiB.
    pub gib: f64,
    /// Included attempts that use it.
    pub users: u32,
    /// GiB x its own bound on its users' union.
    pub per_blob_bound_h: f64,
    /// GiB x its open time in the cache LP's last master, when it is one of the LP's blobs.
    pub lp_open_h: Option<f64>,
    /// GiB x its users' union in the FIFO schedule.
    pub fifo_h: f64,
    /// GiB x its users' union in the best_cache schedule.
    pub best_cache_h: f64,
}

/// Everything the stage computed for one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadReport {
    /// The workload.
    pub workload: WorkloadId,
    /// Included attempts replayed.
    pub attempts: usize,
    /// Request intervals (after grid conversion).
    pub request_intervals: usize,
    /// Distinct blobs.
    pub blobs: usize,
    /// Deadline D = FIFO makespan, seconds.
    pub deadline_s: f64,
    /// The study's lower bounds (docs/FORMAT.md, "The replay model").
    pub lower_bounds: ResourceHours,
    /// The stronger bounds of docs/BOUNDS.md with their components.
    pub strong_bounds: bounds::StrongBounds,
    /// The LP bounds (HiGHS), or why they were skipped.
    pub lp_bounds: bounds::LpBounds,
    /// Best valid lower bound per resource: the largest of the seed's, the stronger ones and
    /// the LP bounds.
    pub best_bounds: ResourceHours,
    /// FIFO holding values.
    pub fifo_holding: ResourceHours,
    /// Ideal values of the FIFO schedule.
    pub fifo_ideal: ResourceHours,
    /// Best ideal value found per resource (CPU/RAM: the invariant ideal value).
    pub best_found: ResourceHours,
    /// The selected schedules, in output order.
    pub selected: Vec<SelectedSchedule>,
    /// Candidates evaluated in total.
    pub candidates_evaluated: u64,
    /// Per-family counts (evaluated, rejected, improvements).
    pub families: Vec<FamilyStats>,
    /// Best GPU and cache hours of the seed profile (the study's method): in an extended
    /// run, after its seed phase (the same candidates); in a seed run, the best found.
    pub seed_profile_best: (f64, f64),
    /// What the extended profile's adaptive phase chose (empty for the seed profile).
    pub adaptive: AdaptiveRecord,
    /// The Pareto front of GPU vs cache over the feasible candidates, by GPU ascending.
    pub pareto: Vec<ParetoPoint>,
    /// Per used blob, where the cache objective sits (`blob_bounds.parquet`).
    #[serde(skip)]
    pub blob_bounds: Vec<BlobBoundRow>,
    /// Best so far per objective after each batch.
    pub trace: Vec<TraceRow>,
    /// How this workload consumed the shared RNG stream.
    pub rng: RngRecord,
}

/// What the stage did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The seed of the one RNG stream.
    pub seed: u64,
    /// The order in which workloads consumed it.
    pub order: Vec<WorkloadId>,
    /// The budgets used.
    pub budget: ReplayBudget,
    /// Per workload, in `order`.
    pub workloads: Vec<WorkloadReport>,
    /// Files written (empty for [`replay_input`]).
    pub outputs: Vec<PathBuf>,
}

/// Wall-clock facts of a run (only ever written to `replay.run.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunTimings {
    /// Threads of the pool.
    pub threads: usize,
    /// Seconds reading the audit frames.
    pub load_s: f64,
    /// Seconds per workload: search + accounting + validation.
    pub workloads_s: Vec<(WorkloadId, f64)>,
    /// Seconds writing outputs.
    pub write_s: f64,
}

fn build_pool(opts: &ReplayOptions) -> Result<rayon::ThreadPool, ReplayError> {
    let threads = opts.threads.unwrap_or(0);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|source| ReplayError::ThreadPool { threads, source })
}

/// Replay plain input (no I/O): per workload in order, FIFO, accounting, bounds, search and
/// validation. Returns the report and the schedules that failed validation (if any).
pub fn replay_input(
    input: &ReplayInput,
    search: &model::config::SearchConfig,
    opts: &ReplayOptions,
) -> Result<(ReplayReport, Vec<ScheduleFailure>), ReplayError> {
    let pool = build_pool(opts)?;
    let mut timings = RunTimings::default();
    replay_with_pool(input, search, &pool, &mut timings)
}

fn replay_with_pool(
    input: &ReplayInput,
    search: &model::config::SearchConfig,
    pool: &rayon::ThreadPool,
    timings: &mut RunTimings,
) -> Result<(ReplayReport, Vec<ScheduleFailure>), ReplayError> {
    timings.threads = pool.current_num_threads();
    let budget = ReplayBudget::from_config(search);
    let mut shared = ChaCha8Rng::seed_from_u64(search.seed);
    // Each workload's LP bounds need only its grid instance and its FIFO schedule, not the
    // search: they run as jobs on the pool (HiGHS single-threaded, budgets in counts),
    // spawned before any search, the largest workload's first, so a worker takes each at
    // once and the searches run on the other workers beside them (the largest workload's
    // cache LP is the stage's longest serial piece: it starts first and runs alone on its
    // worker; no more threads than the pool's compete for the cores). The results do not
    // depend on what runs beside them or on which worker.
    let prepared = input
        .workloads
        .iter()
        .map(PreparedWorkload::new)
        .collect::<Result<Vec<_>, _>>()?;
    let mut lp_order: Vec<usize> = (0..prepared.len()).collect();
    lp_order.sort_by_key(|&i| (std::cmp::Reverse(prepared[i].g.len()), i));
    let (workloads, failures) = pool.in_place_scope_fifo(|scope| {
        let mut lp_results: Vec<Option<LpResult>> = prepared.iter().map(|_| None).collect();
        for &i in &lp_order {
            let (tx, rx) = std::sync::mpsc::channel();
            let (p, cfg) = (&prepared[i], &search.lp_bounds);
            scope.spawn_fifo(move |_| {
                // The receiver waits for it unless the stage failed first.
                let _ = tx.send(p.lp_bounds(cfg));
            });
            lp_results[i] = Some(rx);
        }
        let mut workloads = Vec::new();
        let mut failures = Vec::new();
        for (p, lp_result) in prepared.iter().zip(lp_results) {
            let t0 = Instant::now();
            let (report, mut f) = replay_workload(
                p,
                &budget,
                lp_result.expect("one LP job per workload"),
                &search.pattern_bound,
                &mut shared,
                pool,
            )?;
            failures.append(&mut f);
            workloads.push(report);
            timings
                .workloads_s
                .push((p.inst.workload, t0.elapsed().as_secs_f64()));
        }
        Ok::<_, ReplayError>((workloads, failures))
    })?;
    Ok((
        ReplayReport {
            seed: search.seed,
            order: input.workloads.iter().map(|w| w.workload).collect(),
            budget,
            workloads,
            outputs: Vec::new(),
        },
        failures,
    ))
}

/// Where a workload's LP bounds job sends its result.
type LpResult = std::sync::mpsc::Receiver<(bounds::LpBounds, Vec<(u32, f64)>)>;

/// What a workload's replay needs before its search: the grid instance, the independent
/// FIFO (the deadline) and the per-blob bound parts.
struct PreparedWorkload<'a> {
    inst: &'a WorkloadInstance,
    g: GridInstance,
    /// The validator's independent FIFO starts, ns, in attempt order.
    fifo_starts: Vec<i64>,
    /// Its makespan: the deadline D, ns.
    deadline_ns: i64,
    per_blob: Vec<bounds::strong::BlobBoundParts>,
}

impl<'a> PreparedWorkload<'a> {
    fn new(inst: &'a WorkloadInstance) -> Result<Self, ReplayError> {
        inst.check_quotas_fit()?;
        let g = GridInstance::new(inst);
        let (fifo_starts, deadline_ns) = independent_fifo(inst);
        let per_blob = bounds::blob_bound_parts(&g, deadline_ns);
        Ok(Self {
            inst,
            g,
            fifo_starts,
            deadline_ns,
            per_blob,
        })
    }

    /// The LP bounds and the cache LP's open seconds per LP blob.
    fn lp_bounds(
        &self,
        cfg: &model::config::LpBoundsConfig,
    ) -> (bounds::LpBounds, Vec<(u32, f64)>) {
        bounds::lp_bounds_with_shares(
            &self.g,
            self.inst.caps.gpus,
            self.deadline_ns,
            &self.per_blob,
            &self.fifo_starts,
            cfg,
        )
    }
}

fn replay_workload(
    p: &PreparedWorkload<'_>,
    budget: &ReplayBudget,
    lp_result: LpResult,
    pattern_config: &model::config::PatternBoundConfig,
    shared: &mut ChaCha8Rng,
    pool: &rayon::ThreadPool,
) -> Result<(WorkloadReport, Vec<ScheduleFailure>), ReplayError> {
    let (inst, g) = (p.inst, &p.g);
    let gpus = inst.caps.gpus;
    let outcome = search_workload(inst, g, budget, shared, pool)?;

    // The evaluator's FIFO must equal the validator's independent FIFO, start by start.
    let independent = &p.fifo_starts;
    if let Some(j) =
        (0..inst.attempts.len()).find(|&j| independent[j] != outcome.fifo.eval.starts[j])
    {
        return Err(ReplayError::FifoMismatch {
            workload: inst.workload.to_string(),
            detail: format!(
                "attempt `{}` starts at {} ns (evaluator) vs {} ns (validator)",
                inst.attempts[j].attempt_id, outcome.fifo.eval.starts[j], independent[j]
            ),
        });
    }
    if p.deadline_ns != outcome.fifo.eval.makespan {
        return Err(ReplayError::FifoMismatch {
            workload: inst.workload.to_string(),
            detail: format!(
                "makespan {} ns (evaluator) vs {} ns (validator)",
                outcome.fifo.eval.makespan, p.deadline_ns
            ),
        });
    }
    let deadline_ns = p.deadline_ns;
    let deadline_s = evaluate::ns_to_s(deadline_ns);
    let lower_bounds = bounds::lower_bounds(g, gpus);
    let pattern = pool.install(|| bounds::pattern_bound(g, gpus, pattern_config));
    let strong_bounds =
        bounds::strong_bounds_from(g, gpus, deadline_ns, &p.per_blob).with_gpu_pattern(pattern);
    // A job that panicked drops its sender; the pool's scope resumes that panic once this
    // one has unwound.
    let (lp_bounds, lp_blob_open_s) = lp_result
        .recv()
        .expect("the LP bounds job ended without a result");
    let best_bounds = ResourceHours {
        cpu: lower_bounds.cpu,
        ram: lower_bounds.ram,
        gpu: lower_bounds
            .gpu
            .max(strong_bounds.gpu.best)
            .max(lp_bounds.gpu.bound_h.unwrap_or(0.0)),
        cache: lower_bounds
            .cache
            .max(strong_bounds.cache.best)
            .max(lp_bounds.cache.bound_h.unwrap_or(0.0)),
    };
    let fifo_holding = accounting::holding_hours(g, gpus, &outcome.fifo.eval);
    let fifo_ideal = accounting::ideal_hours(g, gpus, &outcome.fifo.eval);

    let picks = selected_picks(&outcome);
    let mut selected = Vec::new();
    let mut failures = Vec::new();
    for (name, found) in picks {
        let ideal = accounting::ideal_hours(g, gpus, &found.eval);
        let rows = schedule_rows(inst, g, &found.eval.starts);
        let claimed = ClaimedValues {
            cpu_h: ideal.cpu,
            ram_h: ideal.ram,
            gpu_h: ideal.gpu,
            cache_h: ideal.cache,
        };
        let validated = match validate_schedule(inst, name, &rows, deadline_s, Some(claimed)) {
            Ok(_) => true,
            Err(f) => {
                failures.push(f);
                false
            }
        };
        selected.push(SelectedSchedule {
            schedule: name,
            found_by: found.label.clone(),
            candidate: found.candidate,
            makespan_s: evaluate::ns_to_s(found.eval.makespan),
            ideal,
            validated,
            starts_ns: found.eval.starts.clone(),
        });
    }
    // Every point of the Pareto front is validated too.
    let mut pareto = Vec::new();
    for (i, found) in outcome.front.iter().enumerate() {
        let ideal = accounting::ideal_hours(g, gpus, &found.eval);
        let rows = schedule_rows(inst, g, &found.eval.starts);
        let claimed = ClaimedValues {
            cpu_h: ideal.cpu,
            ram_h: ideal.ram,
            gpu_h: ideal.gpu,
            cache_h: ideal.cache,
        };
        let name = format!("pareto#{i}");
        let validated = match validate_schedule(inst, &name, &rows, deadline_s, Some(claimed)) {
            Ok(_) => true,
            Err(f) => {
                failures.push(f);
                false
            }
        };
        pareto.push(ParetoPoint {
            point: i as u32,
            found_by: found.label.clone(),
            candidate: found.candidate,
            makespan_s: evaluate::ns_to_s(found.eval.makespan),
            gpu_h: ideal.gpu,
            cache_h: ideal.cache,
            best_joint: found.candidate == outcome.best_joint.candidate,
            validated,
        });
    }
    let blob_bounds = blob_bound_rows(p, &lp_blob_open_s, &outcome);
    let best_found = ResourceHours {
        cpu: fifo_ideal.cpu,
        ram: fifo_ideal.ram,
        gpu: outcome.best_gpu.gpu_h,
        cache: outcome.best_cache.cache_h,
    };
    Ok((
        WorkloadReport {
            workload: inst.workload,
            attempts: inst.attempts.len(),
            request_intervals: g.request_count(),
            blobs: inst.blobs.len(),
            deadline_s,
            lower_bounds,
            strong_bounds,
            lp_bounds,
            best_bounds,
            fifo_holding,
            fifo_ideal,
            best_found,
            selected,
            candidates_evaluated: outcome.evaluated,
            families: outcome.stats,
            seed_profile_best: outcome.seed_best,
            adaptive: outcome.adaptive,
            pareto,
            blob_bounds,
            trace: outcome.trace,
            rng: outcome.rng,
        },
        failures,
    ))
}

/// The rows of `blob_bounds.parquet` for one workload: every blob some attempt uses, in
/// blob index order.
fn blob_bound_rows(
    p: &PreparedWorkload<'_>,
    lp_blob_open_s: &[(u32, f64)],
    outcome: &search::SearchOutcome,
) -> Vec<BlobBoundRow> {
    let g = &p.g;
    let users = bounds::strong::blob_users(g);
    let fifo = evaluate::blob_unions_ns(g, &outcome.fifo.eval.starts);
    let best = evaluate::blob_unions_ns(g, &outcome.best_cache.eval.starts);
    let lp_open: std::collections::HashMap<u32, f64> = lp_blob_open_s.iter().copied().collect();
    let ns_h = |ns: f64| ns / 3.6e12;
    p.inst
        .blobs
        .iter()
        .enumerate()
        .filter(|(b, _)| !users[*b].is_empty())
        .map(|(b, blob)| {
            let gib = blob.gib();
            BlobBoundRow {
                digest: blob.digest.clone(),
                gib,
                users: users[b].len() as u32,
                per_blob_bound_h: gib * ns_h(p.per_blob[b].best()),
                lp_open_h: lp_open.get(&(b as u32)).map(|s| gib * s / 3600.0),
                fifo_h: gib * ns_h(fifo[b] as f64),
                best_cache_h: gib * ns_h(best[b] as f64),
            }
        })
        .collect()
}

/// The selected schedules of a search outcome, named and ordered by [`Selected::ALL`] (the
/// list [`SCHEDULE_NAMES`] is read from).
fn selected_picks(outcome: &search::SearchOutcome) -> [(&'static str, &Found); 7] {
    Selected::ALL.map(|s| (s.as_str(), outcome.selected(s)))
}

/// The stage: read the included attempts from the audit frames in the config's run
/// directory, replay and search every workload in `search.order`, validate every selected
/// schedule, and write `schedules.parquet`, `joint_schedules.csv`, `bounds.parquet`,
/// `search_trace.parquet`, `replay.json` (all byte-identical for the same inputs and
/// config) and `replay.run.json` (wall-clock facts). Fails if any schedule fails validation
/// (after writing what passed, with `validated = false` rows for the rest).
pub fn run(cfg: &model::LoadedConfig, opts: &ReplayOptions) -> Result<ReplayReport, ReplayError> {
    let pool = build_pool(opts)?;
    let _lock = model::RunLock::acquire(&cfg.run_dir, "replay")?;
    // Temporary files of a killed earlier write (their process is gone) are removed.
    frames::temp::remove_stale_temp_files(&cfg.run_dir, frames::temp::temp_name_pid).map_err(
        |source| ReplayError::Io {
            path: cfg.run_dir.clone(),
            source,
        },
    )?;
    let mut timings = RunTimings::default();
    let t0 = Instant::now();
    let input = load_input(cfg)?;
    timings.load_s = t0.elapsed().as_secs_f64();
    let (mut report, failures) = replay_with_pool(&input, &cfg.config.search, &pool, &mut timings)?;
    let t1 = Instant::now();
    report.outputs = output::write_outputs(cfg, &input, &report)?;
    timings.write_s = t1.elapsed().as_secs_f64();
    let run_json = output::write_run_json(cfg, &timings)?;
    report.outputs.push(run_json);
    if failures.is_empty() {
        Ok(report)
    } else {
        Err(ReplayError::Validation { failures })
    }
}

/// The stage's name.
pub const STAGE_NAME: &str = "replay";

/// The replay stage as the pipeline sees it: it reads the audit frames of
/// [`crate::input::INPUT_FRAMES`] and writes the frames of [`crate::schemas::FRAMES`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplayStage;

impl model::Stage for ReplayStage {
    fn name(&self) -> &'static str {
        STAGE_NAME
    }
    fn about(&self) -> &'static str {
        "FIFO admission replay, resource-hour accounting, lower bounds, seeded schedule search, independent validation of every selected schedule"
    }
    fn config_keys(&self) -> Vec<&'static str> {
        vec!["workloads.*.replay", "search"]
    }
    fn inputs(&self, _cfg: &model::LoadedConfig) -> Vec<model::StageInput> {
        crate::input::INPUT_FRAMES
            .iter()
            .map(|spec| model::StageInput::File(spec.parquet_file()))
            .collect()
    }
    /// The frames of [`crate::schemas::FRAMES`], then `replay.json` (the RNG record and the
    /// family seeds: deterministic, so hashed and re-derived like the frames).
    fn outputs(&self, _cfg: &model::LoadedConfig) -> Vec<String> {
        output::output_files()
    }
    fn run_facts(&self) -> Vec<&'static str> {
        vec![output::RUN_JSON_FILE]
    }
    fn run(
        &self,
        cfg: &model::LoadedConfig,
        ctx: &model::StageContext,
    ) -> Result<String, model::StageError> {
        let r = run(
            cfg,
            &ReplayOptions {
                threads: ctx.threads,
            },
        )
        .map_err(|e| {
            model::StageError::new(STAGE_NAME, model::exit::Classify::failure_kind(&e), e)
        })?;
        let parts: Vec<String> = r
            .workloads
            .iter()
            .map(|w| {
                format!(
                    "{} D={:.0}s, {} candidates, {} schedules validated",
                    w.workload,
                    w.deadline_s,
                    w.candidates_evaluated,
                    w.selected.iter().filter(|s| s.validated).count()
                )
            })
            .collect();
        Ok(parts.join("; "))
    }
}
