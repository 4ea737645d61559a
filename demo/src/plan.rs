//! The in-memory plan of a demo corpus: every attempt's identity, timing and result,
//! with the timing anomalies of docs/FORMAT.md ("Request intervals") injected in known numbers.

use crate::knobs::{CorpusKnobs, KnobStreams, WorkloadKnobs, default_quotas};
use crate::rng::Stream;
use crate::{Scale, WorkloadExpectation};
use model::{BlobRef, ExceptionInfo, Quota, ResultRecord, RunKind, WorkloadId};
use std::collections::BTreeMap;

/// Nanoseconds per second.
pub const NS: u64 = 1_000_000_000;
/// Exact binary grid (1/512 s) used where float equality must hold (touching requests).
pub const GRID_NS: u64 = 1_953_125;
/// Smallest gap between two ordinary requests; keeps accidental touches impossible.
const MIN_GAP_NS: u64 = 20_000_000;

/// One request as the archive will record it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRequest {
    /// Sequence number.
    pub seq: u64,
    /// Start (request-start file mtime), or `None` when the start file is absent.
    pub start_ns: Option<u64>,
    /// Elapsed time (timer line), or `None` when the timer is absent.
    pub elapsed_ns: Option<u64>,
}

/// One attempt as the archive will record it.
#[derive(Debug, Clone)]
pub struct PlannedAttempt {
    /// Workload.
    pub workload: WorkloadId,
    /// Run.
    pub run: RunKind,
    /// Task id.
    pub task_id: String,
    /// Attempt id.
    pub attempt_id: String,
    /// Quota.
    pub quota: Quota,
    /// Image layers.
    pub blobs: Vec<BlobRef>,
    /// Identity-file mtime (ns since epoch).
    pub gen_start_ns: u64,
    /// completed_utc (ns since epoch, whole microseconds) or `None`.
    pub completed_ns: Option<u64>,
    /// Requests in seq order.
    pub requests: Vec<PlannedRequest>,
    /// Result record.
    pub result: ResultRecord,
    /// Index of the archive this attempt goes to.
    pub archive: usize,
}

/// One original archive of the corpus.
#[derive(Debug, Clone)]
pub struct PlannedArchive {
    /// Archive id.
    pub archive_id: String,
    /// Workload.
    pub workload: WorkloadId,
    /// Compression.
    pub compression: Compression,
}

/// Compression of an original archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// gzip (RFC 1952).
    Gzip,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// File name suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::Gzip => "tar.gz",
            Compression::Zstd => "tar.zst",
        }
    }
}

/// The whole corpus plan.
#[derive(Debug, Clone)]
pub struct CorpusPlan {
    /// Archives, in manifest order.
    pub archives: Vec<PlannedArchive>,
    /// Attempts, in archive then write order.
    pub attempts: Vec<PlannedAttempt>,
    /// What an auditor must find, per workload.
    pub expected: BTreeMap<WorkloadId, WorkloadExpectation>,
}

/// Numbers that shape one workload at a scale.
struct Shape {
    tasks: usize,
    /// Attempts per task (tmax: a task usually has one trial).
    attempts_per_task: usize,
    /// Tasks run one extra time (every 21st task, up to this many).
    repeated_tasks: usize,
    exceptions: usize,
    infra_failures: usize,
    llm_query_errors: usize,
    pilot_tasks: usize,
    archives: usize,
    /// Archives the pilot is spread over (contiguous runs of its attempts), so that at
    /// larger scales archives grow in number, not in size.
    pilot_archives: usize,
    repos: usize,
    median_duration_s: f64,
    concurrency: f64,
    anomalies: Anomalies,
}

impl Shape {
    /// The pilot's archives: one per [`Shape::pilot_archives`], never more than its tasks.
    fn pilot_archive_count(&self) -> usize {
        self.pilot_archives.min(self.pilot_tasks).max(1)
    }
}

/// How many of each timing anomaly to inject into one workload.
#[derive(Debug, Clone, Copy)]
struct Anomalies {
    missing_timer: usize,
    orphan_timer: usize,
    before_start: usize,
    after_end: usize,
    outside: usize,
    overlap_pairs: usize,
    overlap_triples: usize,
    touching_pairs: usize,
}

impl Anomalies {
    fn scaled(self, k: usize) -> Anomalies {
        Anomalies {
            missing_timer: self.missing_timer * k,
            orphan_timer: self.orphan_timer * k,
            before_start: self.before_start * k,
            after_end: self.after_end * k,
            outside: self.outside * k,
            overlap_pairs: self.overlap_pairs * k,
            overlap_triples: self.overlap_triples * k,
            touching_pairs: self.touching_pairs * k,
        }
    }
    fn total(&self) -> usize {
        self.missing_timer
            + self.orphan_timer
            + self.before_start
            + self.after_end
            + self.outside
            + self.overlap_pairs
            + self.overlap_triples
            + self.touching_pairs
    }
}

impl Shape {
    /// Attempts of task `i`.
    fn attempts_of(&self, i: usize) -> usize {
        if i % 21 == 20 && i / 21 < self.repeated_tasks {
            self.attempts_per_task + 1
        } else {
            self.attempts_per_task
        }
    }
}

/// The scale's shape of a workload with the knobs' attempt counts, repositories and median.
fn shape_with(w: WorkloadId, scale: Scale, k: &WorkloadKnobs) -> Shape {
    let mut sh = shape(w, scale);
    if let Some(t) = k.tasks {
        sh.tasks = t;
        sh.pilot_tasks = sh.pilot_tasks.min(t);
    }
    if let Some(a) = k.attempts_per_task {
        sh.attempts_per_task = a;
    }
    if let Some(r) = k.blobs.repos {
        sh.repos = r;
    }
    if let Some(m) = k.duration.median_s {
        sh.median_duration_s = m;
    }
    sh
}

fn shape(w: WorkloadId, scale: Scale) -> Shape {
    let k = match scale {
        Scale::Small | Scale::Full => 1,
        Scale::X10 => 10,
        Scale::X100 => 100,
    };
    let study = model::study::study(w);
    match (w, scale) {
        (WorkloadId::Tmax, Scale::Small) => Shape {
            tasks: 23,
            attempts_per_task: 1,
            repeated_tasks: 1,
            exceptions: 2,
            infra_failures: 0,
            llm_query_errors: 0,
            pilot_tasks: 0,
            archives: 2,
            pilot_archives: 1,
            repos: 0,
            median_duration_s: study.median_duration_s,
            concurrency: 16.0,
            anomalies: Anomalies {
                missing_timer: 1,
                orphan_timer: 1,
                before_start: 1,
                after_end: 1,
                outside: 2,
                overlap_pairs: 1,
                overlap_triples: 1,
                touching_pairs: 1,
            },
        },
        (WorkloadId::Tmax, _) => Shape {
            // 255 tasks, 12 of them twice: 267 trials.
            tasks: study.tasks * k,
            attempts_per_task: study.attempts_per_task,
            repeated_tasks: study.repeated_tasks * k,
            exceptions: 14 * k,
            infra_failures: 0,
            llm_query_errors: 0,
            pilot_tasks: 0,
            archives: 3 * k,
            pilot_archives: k,
            repos: 0,
            median_duration_s: study.median_duration_s,
            concurrency: 16.0,
            anomalies: Anomalies {
                missing_timer: 3,
                orphan_timer: 2,
                before_start: 4,
                after_end: 3,
                outside: 2,
                overlap_pairs: 6,
                overlap_triples: 2,
                touching_pairs: 3,
            }
            .scaled(k),
        },
        (WorkloadId::Deepswe, Scale::Small) => Shape {
            tasks: 10,
            attempts_per_task: 4,
            repeated_tasks: 0,
            exceptions: 0,
            infra_failures: 2,
            llm_query_errors: 1,
            pilot_tasks: 2,
            archives: 2,
            pilot_archives: 1,
            repos: 3,
            median_duration_s: study.median_duration_s,
            concurrency: 32.0,
            anomalies: Anomalies {
                missing_timer: 1,
                orphan_timer: 1,
                before_start: 1,
                after_end: 1,
                outside: 2,
                overlap_pairs: 2,
                overlap_triples: 1,
                touching_pairs: 1,
            },
        },
        (WorkloadId::Deepswe, _) => Shape {
            tasks: study.tasks * k,
            attempts_per_task: study.attempts_per_task,
            repeated_tasks: 0,
            exceptions: 0,
            infra_failures: 2 * k,
            llm_query_errors: k,
            pilot_tasks: 25 * k,
            archives: 10 * k,
            pilot_archives: k,
            repos: study.repos,
            median_duration_s: study.median_duration_s,
            concurrency: 32.0,
            anomalies: Anomalies {
                missing_timer: 5,
                orphan_timer: 4,
                before_start: 6,
                after_end: 5,
                outside: 4,
                overlap_pairs: 12,
                overlap_triples: 3,
                touching_pairs: 5,
            }
            .scaled(k),
        },
    }
}

/// Epoch seconds of the first tmax trial.
const TMAX_EPOCH: u64 = model::study::study(WorkloadId::Tmax).epoch_s;
/// Epoch seconds of the first deepswe census attempt.
const DEEPSWE_EPOCH: u64 = model::study::study(WorkloadId::Deepswe).epoch_s;
/// Epoch seconds of the first deepswe pilot attempt (2025-08-20T00:00:00Z).
const PILOT_EPOCH: u64 = 1_755_648_000;

fn digest(seed: u64, name: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(format!("agentrace-demo-blob:{seed}:{name}").as_bytes());
    format!("sha256:{}", hex::encode(h))
}

fn mib(x: f64) -> u64 {
    (x * 1_048_576.0) as u64
}

/// Build the plan for a scale and seed (the demo corpus).
pub fn plan_corpus(scale: Scale, seed: u64) -> CorpusPlan {
    plan_corpus_with(scale, seed, &CorpusKnobs::default())
}

/// Build the plan for a scale and seed with shape knobs (default knobs: [`plan_corpus`]).
pub fn plan_corpus_with(scale: Scale, seed: u64, knobs: &CorpusKnobs) -> CorpusPlan {
    let mut archives = Vec::new();
    let mut attempts = Vec::new();
    let mut expected = BTreeMap::new();
    for (wi, w) in WorkloadId::ALL.into_iter().enumerate() {
        if !knobs.has(w) {
            continue;
        }
        let k = knobs.of(w);
        let mut rng = Stream::new(seed, wi as u64 + 1);
        let sh = shape_with(w, scale, k);
        let mut ks = KnobStreams::new(seed, wi, false);
        let (mut census, exp) = plan_workload(w, &sh, k, seed, &mut rng, &mut ks, archives.len());
        for a in 0..sh.archives {
            archives.push(PlannedArchive {
                archive_id: format!("{w}-{a:03}"),
                workload: w,
                compression: if (a + wi) % 3 == 0 {
                    Compression::Gzip
                } else {
                    Compression::Zstd
                },
            });
        }
        if sh.pilot_tasks > 0 {
            let pilot_archive = archives.len();
            for p in 0..sh.pilot_archive_count() {
                archives.push(PlannedArchive {
                    archive_id: format!("{w}-pilot-{p:03}"),
                    workload: w,
                    compression: Compression::Zstd,
                });
            }
            let mut prng = Stream::new(seed, 100 + wi as u64);
            let mut pks = KnobStreams::new(seed, wi, true);
            census.extend(plan_pilot(
                w,
                &sh,
                k,
                seed,
                &mut prng,
                &mut pks,
                pilot_archive,
            ));
        }
        attempts.extend(census);
        expected.insert(w, exp);
    }
    CorpusPlan {
        archives,
        attempts,
        expected,
    }
}

struct TaskSpec {
    task_id: String,
    quota: Quota,
    blobs: Vec<BlobRef>,
}

fn tasks_for(
    w: WorkloadId,
    sh: &Shape,
    k: &WorkloadKnobs,
    seed: u64,
    rng: &mut Stream,
    pilot: bool,
) -> Vec<TaskSpec> {
    let mut out = Vec::new();
    let quotas = k.quotas.clone().unwrap_or_else(|| default_quotas(w));
    let bl = &k.blobs;
    match w {
        WorkloadId::Tmax => {
            // Three base images; each task adds its own environment layers.
            let bases = [
                ("debian-bookworm", 29.1),
                ("python-3.11", 412.6),
                ("build-essential", 251.3),
            ];
            for t in 0..sh.tasks {
                let base = t % 7 % 3;
                let [cores, mem] = quotas[rng.below(quotas.len() as u64) as usize];
                let mut blobs = vec![BlobRef {
                    digest: digest(seed, &format!("tmax-base-{}", bases[base].0)),
                    compressed_bytes: mib(bases[base].1 * bl.base_scale),
                }];
                if base != 0 {
                    blobs.insert(
                        0,
                        BlobRef {
                            digest: digest(seed, "tmax-base-debian-bookworm"),
                            compressed_bytes: mib(29.1 * bl.base_scale),
                        },
                    );
                }
                let drawn_layers = 1 + rng.below(2) as usize;
                let n_layers = bl.task_layers.unwrap_or(drawn_layers);
                for l in 0..n_layers {
                    blobs.push(BlobRef {
                        digest: digest(seed, &format!("tmax-task-{t}-layer-{l}")),
                        compressed_bytes: mib(
                            (5.0 + rng.pareto(1.3, 8.0).min(900.0)) * bl.task_layer_scale
                        ),
                    });
                }
                out.push(TaskSpec {
                    task_id: format!("tmax-task-{t:04}"),
                    quota: Quota {
                        cores,
                        mem_gib: mem,
                    },
                    blobs,
                });
            }
        }
        WorkloadId::Deepswe => {
            let repos = sh.repos.max(1);
            let mut repo_quota = Vec::new();
            for r in 0..repos {
                let [cores, mem] = quotas[(r * 7 + 3) % quotas.len()];
                repo_quota.push((cores, mem, 180.0 + (r as f64 * 97.0) % 1300.0));
            }
            let n = if pilot { sh.pilot_tasks } else { sh.tasks };
            for t in 0..n {
                // Pilot tasks are a subset of the census tasks.
                let task_index = if pilot { (t * 17) % sh.tasks } else { t };
                let r = task_index % repos;
                let (cores, mem, env_mib) = repo_quota[r];
                let mut blobs = vec![
                    BlobRef {
                        digest: digest(seed, "deepswe-base-ubuntu-22.04"),
                        compressed_bytes: mib(29.5 * bl.base_scale),
                    },
                    BlobRef {
                        digest: digest(seed, "deepswe-base-python-runtime"),
                        compressed_bytes: mib(318.0 * bl.base_scale),
                    },
                ];
                // Layer 0 keeps the default digest names; further layers are numbered.
                let env_layer_mib = env_mib * bl.repo_layer_scale / bl.repo_layers as f64;
                for l in 0..bl.repo_layers {
                    let name = match l {
                        0 => format!("deepswe-repo-{r}-env"),
                        _ => format!("deepswe-repo-{r}-env-{l}"),
                    };
                    blobs.push(BlobRef {
                        digest: digest(seed, &name),
                        compressed_bytes: mib(env_layer_mib),
                    });
                }
                let task_mib = (2.0 + (task_index as f64 * 13.7) % 60.0) * bl.task_layer_scale;
                for l in 0..bl.task_layers.unwrap_or(1) {
                    let name = match l {
                        0 => format!("deepswe-task-{task_index}-layer"),
                        _ => format!("deepswe-task-{task_index}-layer-{l}"),
                    };
                    blobs.push(BlobRef {
                        digest: digest(seed, &name),
                        compressed_bytes: mib(task_mib),
                    });
                }
                let _ = rng.below(2);
                out.push(TaskSpec {
                    task_id: format!("repo{r:02}__issue-{task_index:05}"),
                    quota: Quota {
                        cores,
                        mem_gib: mem,
                    },
                    blobs,
                });
            }
        }
    }
    out
}

/// Ordinary request timing inside `[start, end]` with positive gaps everywhere.
fn plan_requests(
    rng: &mut Stream,
    k: &WorkloadKnobs,
    ks: &mut KnobStreams,
    gen_start_ns: u64,
    gen_end_ns: u64,
) -> Vec<PlannedRequest> {
    let rk = &k.requests;
    let d = gen_end_ns - gen_start_ns;
    let mut lead = NS / 2 + rng.below(4 * NS);
    let setup = &rk.setup;
    if setup.fraction > 0.0 && ks.setup.uniform() < setup.fraction {
        let share = setup.min_share + ks.setup.uniform() * (setup.max_share - setup.min_share);
        lead = lead.max((d as f64 * share) as u64);
    }
    let tail = NS / 2 + rng.below(4 * NS);
    let window = d - lead - tail;
    // Tens to hundreds of requests: one agent step every ~8-30 s.
    let step = rk.step_min_s + rng.uniform() * (rk.step_max_s - rk.step_min_s);
    let n = ((window as f64 / 1e9) / step).round().clamp(12.0, 400.0) as usize;
    let mut req = Vec::with_capacity(n);
    let mut gap = Vec::with_capacity(n + 1);
    for _ in 0..n {
        // Heavy-tailed model time; tool time exponential.
        req.push(rng.pareto(rk.length_alpha, 1.0).min(400.0));
        gap.push(rk.gap_min + rng.exponential(rk.gap_mean));
    }
    let burst = &rk.burst;
    if burst.mean_len > 0.0 {
        for g in &mut gap {
            *g *= if ks.burst.uniform() * burst.mean_len < 1.0 {
                burst.between_gap
            } else {
                burst.within_gap
            };
        }
    }
    let dense = &rk.dense_end;
    if dense.share > 0.0 {
        let first = n - (n as f64 * dense.share).round() as usize;
        for g in &mut gap[first.saturating_sub(1)..] {
            *g *= dense.gap_factor;
        }
    }
    let total: f64 = req.iter().chain(gap.iter()).sum();
    let usable = window - MIN_GAP_NS * n as u64;
    let scale = usable as f64 / total;
    let mut t = gen_start_ns + lead;
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let r = ((req[k] * scale) as u64).max(1_000_000);
        let g = (gap[k] * scale) as u64 + MIN_GAP_NS;
        // A sub-microsecond jitter keeps mtimes off round numbers.
        let start = t + rng.below(1000);
        out.push(PlannedRequest {
            seq: k as u64 + 1,
            start_ns: Some(start),
            elapsed_ns: Some(r),
        });
        t = start + r + g;
    }
    debug_assert!(t <= gen_end_ns + MIN_GAP_NS * 2);
    out
}

fn duration_ns(rng: &mut Stream, median_s: f64, k: &WorkloadKnobs, ks: &mut KnobStreams) -> u64 {
    let dk = &k.duration;
    let mut d = (median_s * libm::exp(dk.sigma * rng.normal())).clamp(dk.min_s, dk.max_s);
    if dk.tail_fraction > 0.0 && ks.tail.uniform() < dk.tail_fraction {
        d = (median_s * ks.tail.pareto(dk.tail_alpha, 1.0)).clamp(dk.min_s, dk.tail_max_s);
    }
    (d * 1e9) as u64
}

fn plan_workload(
    w: WorkloadId,
    sh: &Shape,
    k: &WorkloadKnobs,
    seed: u64,
    rng: &mut Stream,
    ks: &mut KnobStreams,
    first_archive: usize,
) -> (Vec<PlannedAttempt>, WorkloadExpectation) {
    let tasks = tasks_for(w, sh, k, seed, rng, false);
    let epoch = match w {
        WorkloadId::Tmax => TMAX_EPOCH,
        WorkloadId::Deepswe => DEEPSWE_EPOCH,
    };
    let mut attempts = Vec::new();
    let mut t_ns = epoch * NS + rng.below(NS);
    for (ti, task) in tasks.iter().enumerate() {
        for a in 0..sh.attempts_of(ti) {
            let d = duration_ns(rng, sh.median_duration_s, k, ks);
            let gen_start_ns = t_ns;
            // Historical starts: about one attempt per (mean duration / concurrency).
            t_ns += ((sh.median_duration_s / sh.concurrency) * (0.3 + 1.4 * rng.uniform()) * 1e9)
                as u64;
            let completed_ns = (gen_start_ns + d).div_ceil(1000) * 1000;
            let requests = plan_requests(rng, k, ks, gen_start_ns, completed_ns);
            let attempt_id = match w {
                WorkloadId::Tmax => format!("{}.trial-{}", task.task_id, a + 1),
                WorkloadId::Deepswe => format!("{}__a{}", task.task_id, a),
            };
            let result = match w {
                WorkloadId::Tmax => ResultRecord {
                    completed_utc: None,
                    exception_info: None,
                    reward: Some(if rng.uniform() < 0.38 { 0.0 } else { 1.0 }),
                    ..Default::default()
                },
                WorkloadId::Deepswe => ResultRecord {
                    completed_utc: None,
                    termination: Some(
                        if rng.uniform() < 0.18 {
                            "max_steps"
                        } else {
                            "submitted"
                        }
                        .into(),
                    ),
                    infra_error: None,
                    ..Default::default()
                },
            };
            attempts.push(PlannedAttempt {
                workload: w,
                run: RunKind::Census,
                task_id: task.task_id.clone(),
                attempt_id,
                quota: task.quota,
                blobs: task.blobs.clone(),
                gen_start_ns,
                completed_ns: Some(completed_ns),
                requests,
                result,
                archive: 0,
            });
        }
    }
    // Cohort outcomes at spread, deterministic positions.
    let n = attempts.len();
    let mut exp = WorkloadExpectation {
        audited: n as u64,
        ..Default::default()
    };
    let pick = |i: usize, count: usize, offset: usize| (i * n / count.max(1) + offset) % n;
    let mut taken = vec![false; n];
    for i in 0..sh.exceptions {
        let j = pick(i, sh.exceptions, 5);
        taken[j] = true;
        let a = &mut attempts[j];
        let kinds = [
            ("AgentTimeoutError", "agent exceeded its wall-clock budget"),
            ("DockerContainerError", "container exited with status 137"),
            (
                "RuntimeError",
                "tool call returned malformed JSON three times",
            ),
        ];
        let (kind, message) = kinds[i % kinds.len()];
        a.result.exception_info = Some(ExceptionInfo {
            kind: kind.into(),
            message: message.into(),
        });
        a.result.reward = None;
        *exp.excluded
            .entry("execution_exception".into())
            .or_default() += 1;
    }
    for i in 0..sh.infra_failures {
        let j = pick(i, sh.infra_failures, 11);
        taken[j] = true;
        let a = &mut attempts[j];
        if i % 2 == 0 {
            // Generation never completed: no completed_utc.
            a.completed_ns = None;
            a.result.termination = None;
            a.result.infra_error = Some("sandbox lost: node preempted".into());
        } else {
            a.result.termination = Some("submitted".into());
            a.result.infra_error = Some("result upload failed after retries".into());
        }
        *exp.excluded
            .entry("infrastructure_failure".into())
            .or_default() += 1;
    }
    for i in 0..sh.llm_query_errors {
        let j = pick(i, sh.llm_query_errors, 23);
        assert!(
            !taken[j],
            "llm_query_error must land on a generation-complete attempt"
        );
        taken[j] = true;
        attempts[j].result.termination = Some("llm_query_error".into());
        exp.flagged.push(attempts[j].attempt_id.clone());
    }
    for a in &attempts {
        if a.workload == WorkloadId::Tmax
            && a.result.exception_info.is_none()
            && a.result.reward == Some(0.0)
        {
            exp.wrong_answers += 1;
        }
    }
    // Timing anomalies, one per attempt, on included attempts only.
    let an = sh.anomalies;
    let eligible: Vec<usize> = (0..n).filter(|&j| !taken[j]).collect();
    assert!(
        eligible.len() >= an.total(),
        "not enough attempts for anomalies"
    );
    let stride = eligible.len() / an.total().max(1);
    let mut slots = (0..an.total()).map(|i| eligible[i * stride + stride / 2]);
    let mut inject = |count: usize, f: &mut dyn FnMut(&mut PlannedAttempt, usize)| {
        for i in 0..count {
            let j = slots.next().expect("slot");
            f(&mut attempts[j], i);
        }
    };
    let clip = &mut exp.clipping;
    inject(an.missing_timer, &mut |a, _| {
        // The last request lost its timer: it runs to the generation end.
        a.requests.last_mut().expect("requests").elapsed_ns = None;
        *clip.entry("missing_timer".into()).or_default() += 1;
    });
    inject(an.orphan_timer, &mut |a, _| {
        // A middle request lost its start file; its timer is orphaned.
        let m = a.requests.len() / 2;
        a.requests[m].start_ns = None;
        *clip.entry("orphan_timer".into()).or_default() += 1;
    });
    inject(an.before_start, &mut |a, i| {
        let gs = a.gen_start_ns;
        let r = &mut a.requests[0];
        let end = r.start_ns.expect("start") + r.elapsed_ns.expect("timer");
        let early = 200_000_000 + (i as u64 % 5) * 150_000_000;
        r.start_ns = Some(gs - early);
        r.elapsed_ns = Some(end - (gs - early));
        *clip.entry("before_generation_start".into()).or_default() += 1;
    });
    inject(an.after_end, &mut |a, i| {
        let ge = a.completed_ns.expect("completed");
        let r = a.requests.last_mut().expect("requests");
        let late = 300_000_000 + (i as u64 % 4) * 700_000_000;
        r.elapsed_ns = Some(ge + late - r.start_ns.expect("start"));
        *clip.entry("after_generation_end".into()).or_default() += 1;
    });
    inject(an.outside, &mut |a, i| {
        let seq = a.requests.len() as u64 + 1;
        let (start, elapsed) = if i % 2 == 0 {
            (a.gen_start_ns - 9 * NS, 2 * NS + 123_456_789)
        } else {
            (
                a.completed_ns.expect("completed") + 3 * NS,
                NS + 987_654_321,
            )
        };
        a.requests.push(PlannedRequest {
            seq,
            start_ns: Some(start),
            elapsed_ns: Some(elapsed),
        });
        *clip.entry("outside_generation".into()).or_default() += 1;
    });
    inject(an.overlap_pairs, &mut |a, _| {
        overlap_chain(a, 2);
        *clip.entry("merged_overlap".into()).or_default() += 1;
    });
    let mut triples = 0;
    inject(an.overlap_triples, &mut |a, _| {
        overlap_chain(a, 3);
        triples += 1;
    });
    *clip.entry("merged_overlap".into()).or_default() += triples;
    let mut touching = 0;
    inject(an.touching_pairs, &mut |a, _| {
        let m = a.requests.len() / 3;
        let r0 = a.requests[m].clone();
        let s0 = r0.start_ns.expect("start") / GRID_NS * GRID_NS;
        let e0 = r0.start_ns.expect("start") + r0.elapsed_ns.expect("timer");
        let el0 = (e0 - s0) / GRID_NS * GRID_NS;
        a.requests[m].start_ns = Some(s0);
        a.requests[m].elapsed_ns = Some(el0);
        let r1 = &mut a.requests[m + 1];
        let e1 = r1.start_ns.expect("start") + r1.elapsed_ns.expect("timer");
        r1.start_ns = Some(s0 + el0);
        r1.elapsed_ns = Some(e1 - (s0 + el0));
        touching += 1;
    });
    *clip.entry("merged_overlap".into()).or_default() += touching;
    exp.merged_touching = touching;
    for r in [
        "missing_timer",
        "orphan_timer",
        "before_generation_start",
        "after_generation_end",
        "outside_generation",
        "merged_overlap",
    ] {
        clip.entry(r.into()).or_default();
    }
    exp.included = exp.audited - exp.excluded.values().sum::<u64>();
    for a in &attempts {
        exp.start_files += a.requests.iter().filter(|r| r.start_ns.is_some()).count() as u64;
    }
    // Distribute attempts over archives in contiguous runs.
    let per = n.div_ceil(sh.archives);
    for (i, a) in attempts.iter_mut().enumerate() {
        a.archive = first_archive + i / per;
    }
    (attempts, exp)
}

/// Make `len` consecutive middle requests overlap in a chain (each starts halfway through
/// the previous one, keeping its own end).
fn overlap_chain(a: &mut PlannedAttempt, len: usize) {
    let m = a.requests.len() / 2 - 1;
    for k in m + 1..m + len {
        let prev = a.requests[k - 1].clone();
        let ps = prev.start_ns.expect("start");
        let pe = ps + prev.elapsed_ns.expect("timer");
        let r = &mut a.requests[k];
        let e = r.start_ns.expect("start") + r.elapsed_ns.expect("timer");
        let s = ps + (pe - ps) / 2 + 1;
        r.start_ns = Some(s);
        r.elapsed_ns = Some(e - s);
    }
}

fn plan_pilot(
    w: WorkloadId,
    sh: &Shape,
    k: &WorkloadKnobs,
    seed: u64,
    rng: &mut Stream,
    ks: &mut KnobStreams,
    first_archive: usize,
) -> Vec<PlannedAttempt> {
    let tasks = tasks_for(w, sh, k, seed, rng, true);
    // Four attempts per task; the tasks in contiguous runs over the pilot's archives.
    let tasks_per_archive = tasks.len().div_ceil(sh.pilot_archive_count()).max(1);
    let mut out = Vec::new();
    let mut t_ns = PILOT_EPOCH * NS + rng.below(NS);
    for (ti, task) in tasks.iter().enumerate() {
        let archive = first_archive + ti / tasks_per_archive;
        for a in 0..4 {
            let d = duration_ns(rng, sh.median_duration_s, k, ks);
            let gen_start_ns = t_ns;
            t_ns += ((sh.median_duration_s / 8.0) * (0.3 + 1.4 * rng.uniform()) * 1e9) as u64;
            let completed_ns = (gen_start_ns + d).div_ceil(1000) * 1000;
            out.push(PlannedAttempt {
                workload: w,
                run: RunKind::Pilot,
                task_id: task.task_id.clone(),
                attempt_id: format!("{}__pilot{}", task.task_id, a),
                quota: task.quota,
                blobs: task.blobs.clone(),
                gen_start_ns,
                completed_ns: Some(completed_ns),
                requests: plan_requests(rng, k, ks, gen_start_ns, completed_ns),
                result: ResultRecord {
                    completed_utc: None,
                    termination: Some("submitted".into()),
                    infra_error: None,
                    ..Default::default()
                },
                archive,
            });
        }
    }
    out
}
