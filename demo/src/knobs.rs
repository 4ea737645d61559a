//! Shape knobs of the demo generator (docs/ZOO.md): durations, request timing, quotas, blob
//! sharing, attempt counts and the replay caps written into `pipeline.yaml`. Every default
//! is today's demo shape, so [`CorpusKnobs::default`] plans the demo corpus byte for byte.
//!
//! A knob that departs from its default draws any new randomness from a stream of its own
//! ([`knob_stream`]), never from the workload's main stream, so the default corpus's draws
//! are untouched (a knob that changes how many main-stream draws follow, such as a duration
//! that changes a request count, still moves every later draw of that instance).

use crate::rng::Stream;
use model::WorkloadId;
use model::config::ReplayCaps;
use serde::{Deserialize, Serialize};

/// Knobs of a whole corpus: which workloads it has and each one's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CorpusKnobs {
    /// The workloads generated, in the fixed (tmax, deepswe) order; default both.
    pub workloads: Vec<WorkloadId>,
    /// tmax's shape.
    pub tmax: WorkloadKnobs,
    /// deepswe's shape.
    pub deepswe: WorkloadKnobs,
}

impl Default for CorpusKnobs {
    fn default() -> Self {
        CorpusKnobs {
            workloads: WorkloadId::ALL.to_vec(),
            tmax: WorkloadKnobs::default(),
            deepswe: WorkloadKnobs::default(),
        }
    }
}

impl CorpusKnobs {
    /// One workload's knobs.
    pub fn of(&self, w: WorkloadId) -> &WorkloadKnobs {
        match w {
            WorkloadId::Tmax => &self.tmax,
            WorkloadId::Deepswe => &self.deepswe,
        }
    }

    /// Whether the corpus has workload `w`.
    pub fn has(&self, w: WorkloadId) -> bool {
        self.workloads.contains(&w)
    }

    /// Refuse knobs the generator cannot honour; the message names the field.
    pub fn check(&self) -> Result<(), String> {
        if self.workloads.is_empty() {
            return Err("workloads: at least one".into());
        }
        for w in WorkloadId::ALL {
            self.of(w).check(w).map_err(|e| format!("{w}.{e}"))?;
        }
        Ok(())
    }
}

/// The shape of one workload. `None` and the documented defaults keep today's shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadKnobs {
    /// Census tasks (default: the scale's, tmax 255, deepswe 500 at full scale).
    pub tasks: Option<usize>,
    /// Attempts per task (default: tmax 1, every 21st of the first tasks twice; deepswe 4).
    pub attempts_per_task: Option<usize>,
    /// Attempt durations.
    pub duration: DurationKnobs,
    /// Request timing inside an attempt.
    pub requests: RequestKnobs,
    /// The `[cores, GiB]` quota menu (tmax: drawn per task; deepswe: one per repository,
    /// `menu[(r * 7 + 3) % len]`). Default: today's menus ([`default_quotas`]).
    pub quotas: Option<Vec<[f64; 2]>>,
    /// Image layers and their sharing.
    pub blobs: BlobKnobs,
    /// The replay caps written into `pipeline.yaml` (default: the study's).
    pub caps: CapKnobs,
}

impl WorkloadKnobs {
    fn check(&self, w: WorkloadId) -> Result<(), String> {
        if self.tasks == Some(0) {
            return Err("tasks: at least 1".into());
        }
        if self.attempts_per_task == Some(0) {
            return Err("attempts_per_task: at least 1".into());
        }
        let d = &self.duration;
        if !(d.min_s > 0.0 && d.min_s <= d.max_s && d.max_s <= d.tail_max_s) {
            return Err("duration: need 0 < min_s <= max_s <= tail_max_s".into());
        }
        if !(0.0..=1.0).contains(&d.tail_fraction) || d.tail_alpha <= 0.0 || d.sigma < 0.0 {
            return Err("duration: tail_fraction in [0, 1], tail_alpha > 0, sigma >= 0".into());
        }
        if d.median_s.is_some_and(|m| m <= 0.0) {
            return Err("duration.median_s: positive".into());
        }
        let r = &self.requests;
        if !(r.step_min_s > 0.0 && r.step_min_s <= r.step_max_s) {
            return Err("requests: need 0 < step_min_s <= step_max_s".into());
        }
        if r.length_alpha <= 0.0 || r.gap_mean <= 0.0 || r.gap_min < 0.0 {
            return Err("requests: length_alpha > 0, gap_mean > 0, gap_min >= 0".into());
        }
        let s = &r.setup;
        let shares_ok = 0.0 <= s.min_share && s.min_share <= s.max_share && s.max_share <= 0.8;
        if !((0.0..=1.0).contains(&s.fraction) && shares_ok) {
            return Err(
                "requests.setup: fraction in [0, 1], 0 <= min_share <= max_share <= 0.8".into(),
            );
        }
        let b = &r.burst;
        if b.mean_len < 0.0 || b.within_gap <= 0.0 || b.between_gap <= 0.0 {
            return Err("requests.burst: mean_len >= 0, gap factors > 0".into());
        }
        let e = &r.dense_end;
        if !(0.0..=1.0).contains(&e.share) || e.gap_factor <= 0.0 {
            return Err("requests.dense_end: share in [0, 1], gap_factor > 0".into());
        }
        if let Some(q) = &self.quotas
            && (q.is_empty() || q.iter().any(|[c, m]| *c <= 0.0 || *m <= 0.0))
        {
            return Err("quotas: a non-empty menu of positive [cores, GiB]".into());
        }
        let bl = &self.blobs;
        if w == WorkloadId::Tmax && (bl.repos.is_some() || bl.repo_layers != 1) {
            return Err(
                "blobs: tmax has no repositories (repos, repo_layers are deepswe's)".into(),
            );
        }
        if bl.repos == Some(0) || bl.repo_layers == 0 || bl.task_layers == Some(0) {
            return Err("blobs: repos, repo_layers and task_layers at least 1".into());
        }
        for (name, x) in [
            ("base_scale", bl.base_scale),
            ("repo_layer_scale", bl.repo_layer_scale),
            ("task_layer_scale", bl.task_layer_scale),
        ] {
            if x <= 0.0 {
                return Err(format!("blobs.{name}: positive"));
            }
        }
        let caps = self.caps.resolve(w);
        let menu = self.quotas.clone().unwrap_or_else(|| default_quotas(w));
        let (max_cores, max_mem) = menu
            .iter()
            .fold((0.0f64, 0.0f64), |(c, m), q| (c.max(q[0]), m.max(q[1])));
        if caps.concurrency == 0 || caps.cpu_cores < max_cores || caps.ram_gib < max_mem {
            return Err(format!(
                "caps: concurrency >= 1 and caps at least the largest quota ({max_cores} cores, {max_mem} GiB)"
            ));
        }
        Ok(())
    }
}

/// Attempt durations: a log-normal body around the median, clamped, plus an optional Pareto
/// tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DurationKnobs {
    /// Median duration, s (default: the workload's, tmax 900, deepswe 1,200). Also spaces
    /// the historical starts (one per median / historical concurrency).
    pub median_s: Option<f64>,
    /// Log-normal spread of the body: `median * exp(sigma * N(0, 1))` (default 0.55).
    pub sigma: f64,
    /// The body is clamped to `[min_s, max_s]` (default 150 and 3,600).
    pub min_s: f64,
    /// See `min_s`.
    pub max_s: f64,
    /// Share of attempts whose duration is drawn from the tail instead (default 0).
    pub tail_fraction: f64,
    /// Tail: `median * Pareto(tail_alpha, 1)`, clamped to `[min_s, tail_max_s]`.
    pub tail_alpha: f64,
    /// Longest tail duration, s (default 14,400).
    pub tail_max_s: f64,
}

impl Default for DurationKnobs {
    fn default() -> Self {
        DurationKnobs {
            median_s: None,
            sigma: 0.55,
            min_s: 150.0,
            max_s: 3600.0,
            tail_fraction: 0.0,
            tail_alpha: 1.5,
            tail_max_s: 14_400.0,
        }
    }
}

/// Request timing inside an attempt. Requests fill the attempt between a short lead-in and
/// lead-out (0.5-4.5 s each); their lengths and the gaps between them are drawn in relative
/// units and scaled together to fill that window, so only ratios matter: the request duty
/// is about `E[length] / (E[length] + E[gap])`, 36% by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequestKnobs {
    /// One request per `U[step_min_s, step_max_s]` seconds of window (default 8-30 s),
    /// 12 to 400 requests.
    pub step_min_s: f64,
    /// See `step_min_s`.
    pub step_max_s: f64,
    /// Request length: `Pareto(length_alpha, 1)`, at most 400 (default 1.7: heavy-tailed).
    pub length_alpha: f64,
    /// Gap: `gap_min + Exp(gap_mean)` (defaults 0.3 and 4.0).
    pub gap_min: f64,
    /// See `gap_min`. Smaller: higher duty.
    pub gap_mean: f64,
    /// Long request-free setup phases at the start.
    pub setup: SetupKnobs,
    /// Requests in bursts separated by long quiet gaps.
    pub burst: BurstKnobs,
    /// Request-dense endings.
    pub dense_end: DenseEndKnobs,
}

impl Default for RequestKnobs {
    fn default() -> Self {
        RequestKnobs {
            step_min_s: 8.0,
            step_max_s: 30.0,
            length_alpha: 1.7,
            gap_min: 0.3,
            gap_mean: 4.0,
            setup: SetupKnobs::default(),
            burst: BurstKnobs::default(),
            dense_end: DenseEndKnobs::default(),
        }
    }
}

/// A request-free setup phase: with probability `fraction` an attempt's first request
/// waits `U[min_share, max_share]` of its duration (default: never).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SetupKnobs {
    /// Share of attempts with a setup phase (default 0: off).
    pub fraction: f64,
    /// Shortest setup phase, as a share of the duration (default 0.3).
    pub min_share: f64,
    /// Longest setup phase, as a share of the duration (default 0.6, at most 0.8).
    pub max_share: f64,
}

impl Default for SetupKnobs {
    fn default() -> Self {
        SetupKnobs {
            fraction: 0.0,
            min_share: 0.3,
            max_share: 0.6,
        }
    }
}

/// Bursts: after each request a burst ends with probability `1 / mean_len`; gaps inside a
/// burst are multiplied by `within_gap`, gaps between bursts by `between_gap`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BurstKnobs {
    /// Mean requests per burst (default 0: off).
    pub mean_len: f64,
    /// Gap factor inside a burst (default 0.1).
    pub within_gap: f64,
    /// Gap factor between bursts (default 10).
    pub between_gap: f64,
}

impl Default for BurstKnobs {
    fn default() -> Self {
        BurstKnobs {
            mean_len: 0.0,
            within_gap: 0.1,
            between_gap: 10.0,
        }
    }
}

/// A request-dense ending: the last `share` of an attempt's requests have their gaps
/// multiplied by `gap_factor`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DenseEndKnobs {
    /// Share of the requests in the dense ending (default 0: off).
    pub share: f64,
    /// Gap factor there (default 0.05).
    pub gap_factor: f64,
}

impl Default for DenseEndKnobs {
    fn default() -> Self {
        DenseEndKnobs {
            share: 0.0,
            gap_factor: 0.05,
        }
    }
}

/// Image layers. tmax: three base images (debian 29.1 MiB alone or under python 412.6 /
/// build-essential 251.3 MiB), plus one or two task layers of `5 + Pareto(1.3, 8)` MiB.
/// deepswe: two shared bases (29.5 and 318 MiB), per repository an environment
/// (`180 + 97 r mod 1300` MiB) and per task one layer (`2 + 13.7 t mod 60` MiB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BlobKnobs {
    /// deepswe repositories (default: the scale's, 40 at full scale, 3 small). Each has
    /// its own quota and environment layers; task `t` belongs to repository `t mod repos`.
    pub repos: Option<usize>,
    /// deepswe environment layers per repository, splitting its size (default 1).
    pub repo_layers: usize,
    /// Layers per task (default: deepswe 1; tmax 1 or 2 at random).
    pub task_layers: Option<usize>,
    /// Size factor of the base layers (default 1).
    pub base_scale: f64,
    /// Size factor of a repository's environment (default 1).
    pub repo_layer_scale: f64,
    /// Size factor of the task layers (default 1).
    pub task_layer_scale: f64,
}

impl Default for BlobKnobs {
    fn default() -> Self {
        BlobKnobs {
            repos: None,
            repo_layers: 1,
            task_layers: None,
            base_scale: 1.0,
            repo_layer_scale: 1.0,
            task_layer_scale: 1.0,
        }
    }
}

/// Replay caps written into `pipeline.yaml`; unset ones keep the study's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CapKnobs {
    /// Concurrency K.
    pub concurrency: Option<u32>,
    /// CPU cap, cores.
    pub cpu_cores: Option<f64>,
    /// RAM cap, GiB.
    pub ram_gib: Option<f64>,
}

impl CapKnobs {
    /// The caps after the overrides.
    pub fn resolve(&self, w: WorkloadId) -> ReplayCaps {
        let s = ReplayCaps::study(w);
        ReplayCaps {
            concurrency: self.concurrency.unwrap_or(s.concurrency),
            cpu_cores: self.cpu_cores.unwrap_or(s.cpu_cores),
            ram_gib: self.ram_gib.unwrap_or(s.ram_gib),
            gpus: s.gpus,
        }
    }
}

/// Today's `[cores, GiB]` quota menus. tmax's mix averages above 27/16 cores and 66/16 GiB,
/// so both caps bind at 16 concurrent.
pub fn default_quotas(w: WorkloadId) -> Vec<[f64; 2]> {
    match w {
        WorkloadId::Tmax => vec![
            [1.0, 2.0],
            [2.0, 4.0],
            [2.0, 8.0],
            [4.0, 8.0],
            [1.0, 4.0],
            [4.0, 16.0],
        ],
        WorkloadId::Deepswe => vec![[1.0, 4.0], [2.0, 8.0], [2.0, 12.0], [4.0, 16.0], [2.0, 6.0]],
    }
}

/// Knobs that draw randomness of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobStream {
    /// Which attempts take a tail duration, and the tail draws.
    DurationTail = 0,
    /// Which attempts have a setup phase, and its length.
    Setup = 1,
    /// Where bursts end.
    Burst = 2,
}

/// The stream of a knob for one workload (index in `WorkloadId::ALL`) and run (census or
/// pilot): ids from 1,000 up, apart from the main streams (1, 2) and the pilots' (100, 101).
pub fn knob_stream(seed: u64, knob: KnobStream, workload_index: usize, pilot: bool) -> Stream {
    Stream::new(
        seed,
        1_000 + 100 * knob as u64 + 10 * workload_index as u64 + pilot as u64,
    )
}

/// The knob streams of one workload's run.
#[derive(Debug, Clone)]
pub struct KnobStreams {
    /// See [`KnobStream::DurationTail`].
    pub tail: Stream,
    /// See [`KnobStream::Setup`].
    pub setup: Stream,
    /// See [`KnobStream::Burst`].
    pub burst: Stream,
}

impl KnobStreams {
    /// The streams of workload `workload_index`'s census or pilot.
    pub fn new(seed: u64, workload_index: usize, pilot: bool) -> Self {
        KnobStreams {
            tail: knob_stream(seed, KnobStream::DurationTail, workload_index, pilot),
            setup: knob_stream(seed, KnobStream::Setup, workload_index, pilot),
            burst: knob_stream(seed, KnobStream::Burst, workload_index, pilot),
        }
    }
}
