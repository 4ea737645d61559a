//! The `pipeline.yaml` contract: typed, strict (unknown keys refused), validated, with
//! errors that name the file, line and field.

use crate::domain::WorkloadId;
use crate::error::ConfigError;
use crate::manifest::{ArchiveSpec, ManifestRow, parse_manifest_csv, validate_rows};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The only `version` this build reads and writes.
pub const PIPELINE_CONFIG_VERSION: u32 = 1;

/// One whole run: where inputs come from, what each workload expects, how to replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Format version of this file; must be 1.
    pub version: u32,
    /// Directory (relative to this file) every stage reads and writes below.
    pub run_dir: String,
    /// Where the original archives come from.
    pub sources: Sources,
    /// Per-workload layout, expectations and replay capacity.
    pub workloads: Workloads,
    /// The seeded schedule search.
    pub search: SearchConfig,
    /// Fetching knobs.
    #[serde(default)]
    pub ingest: IngestConfig,
    /// Archive-reading limits.
    #[serde(default)]
    pub audit: AuditConfig,
}

/// Kinds of archive location.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LocationKind {
    /// A local file, relative to the manifest.
    File,
    /// A Google Cloud Storage object pinned to a generation.
    Gcs,
    /// A member of a Hugging Face raw shard pinned to a commit.
    Hf,
}

impl LocationKind {
    /// Lowercase name used in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            LocationKind::File => "file",
            LocationKind::Gcs => "gcs",
            LocationKind::Hf => "hf",
        }
    }
}

/// Where archives come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sources {
    /// Manifest CSV, relative to this file. Exactly one of `manifest` and `archives`.
    #[serde(default)]
    pub manifest: Option<String>,
    /// Inline manifest rows (same fields as the CSV columns).
    #[serde(default)]
    pub archives: Option<Vec<ManifestRow>>,
    /// Which kinds of location to fetch and verify.
    pub locations: Vec<LocationKind>,
    /// Google Cloud Storage endpoint and requester-pays project.
    #[serde(default)]
    pub gcs: GcsConfig,
    /// Hugging Face Hub endpoint.
    #[serde(default)]
    pub hf: EndpointConfig,
}

/// An endpoint override; null means the real service.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Base URL, or null for the real service. `HF_ENDPOINT` overrides it.
    #[serde(default)]
    pub endpoint: Option<String>,
}

/// How Google Cloud Storage is reached.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcsConfig {
    /// Base URL of an emulator, or null for the real service. `STORAGE_EMULATOR_HOST`
    /// overrides it.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The project billed for reading requester-pays buckets, sent as `x-goog-user-project`
    /// on every request (the credentials need `serviceusage.services.use` on it). Null: the
    /// credentials file's `quota_project_id`, if any. `GOOGLE_CLOUD_QUOTA_PROJECT` overrides
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_project: Option<String>,
}

/// The workloads of this run; at least one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workloads {
    /// The tmax workload.
    #[serde(default)]
    pub tmax: Option<WorkloadConfig>,
    /// The deepswe workload.
    #[serde(default)]
    pub deepswe: Option<WorkloadConfig>,
}

impl Workloads {
    /// The configured workloads in fixed (tmax, deepswe) order.
    pub fn iter(&self) -> impl Iterator<Item = (WorkloadId, &WorkloadConfig)> {
        WorkloadId::ALL
            .into_iter()
            .filter_map(|w| self.get(w).map(|c| (w, c)))
    }

    /// One workload's config.
    pub fn get(&self, w: WorkloadId) -> Option<&WorkloadConfig> {
        match w {
            WorkloadId::Tmax => self.tmax.as_ref(),
            WorkloadId::Deepswe => self.deepswe.as_ref(),
        }
    }
}

/// One workload's layout, cohort expectations and replay capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Attempt layout inside archives; each omitted key takes the workload's default.
    #[serde(default)]
    pub layout: LayoutOverride,
    /// Expected cohort counts; a mismatch fails the audit.
    pub expect: Expectations,
    /// Replay capacity.
    pub replay: ReplayCaps,
    /// Figures the rerun must reproduce (a published run's, with tolerances): checked
    /// after the replay; one out of tolerance fails the run, naming it.
    #[serde(default, skip_serializing_if = "PublishedFigures::is_empty")]
    pub published: PublishedFigures,
}

/// The published figures of one workload, per resource (`cpu`, `ram`, `gpu`, `cache`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishedFigures {
    /// CPU core-hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<ResourceFigures>,
    /// RAM GiB-hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<ResourceFigures>,
    /// GPU-hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<ResourceFigures>,
    /// Image-cache GiB-hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<ResourceFigures>,
}

impl PublishedFigures {
    /// No figure is given.
    pub fn is_empty(&self) -> bool {
        self.figures().is_empty()
    }

    /// Every figure given: (resource, figure name, figure), in resource then figure order.
    pub fn figures(&self) -> Vec<(&'static str, &'static str, &PublishedFigure)> {
        [
            ("cpu", &self.cpu),
            ("ram", &self.ram),
            ("gpu", &self.gpu),
            ("cache", &self.cache),
        ]
        .into_iter()
        .filter_map(|(r, f)| f.as_ref().map(|f| (r, f)))
        .flat_map(|(r, f)| f.figures().into_iter().map(move |(n, x)| (r, n, x)))
        .collect()
    }
}

/// The published figures of one resource (hours), as replay.json names them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceFigures {
    /// The FIFO replay's ideal hours (`fifo_ideal_h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo_ideal_h: Option<PublishedFigure>,
    /// The best schedule found (`best_found_h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_found_h: Option<PublishedFigure>,
    /// The best valid lower bound (`best_bounds_h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_bounds_h: Option<PublishedFigure>,
}

impl ResourceFigures {
    /// The figures given: (name, figure).
    pub fn figures(&self) -> Vec<(&'static str, &PublishedFigure)> {
        [
            ("fifo_ideal_h", &self.fifo_ideal_h),
            ("best_found_h", &self.best_found_h),
            ("best_bounds_h", &self.best_bounds_h),
        ]
        .into_iter()
        .filter_map(|(n, f)| f.as_ref().map(|f| (n, f)))
        .collect()
    }
}

/// One published figure and how close a rerun must come: `value` within
/// `atol + rtol * |value|` (numpy's `isclose` rule; both default to 0, so exactly), or at
/// most `max` and at least `min`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishedFigure {
    /// The published value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Relative tolerance around `value` (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// Absolute tolerance around `value`, hours (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    /// At most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// At least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
}

impl PublishedFigure {
    /// Whether a rerun's `x` reproduces the figure.
    pub fn accepts(&self, x: f64) -> bool {
        let close = self.value.is_none_or(|v| {
            (x - v).abs() <= self.atol.unwrap_or(0.0) + self.rtol.unwrap_or(0.0) * v.abs()
        });
        close && self.max.is_none_or(|m| x <= m) && self.min.is_none_or(|m| x >= m)
    }

    /// How the figure reads: `71.56`, `71.56 (rtol 0.001, atol 0.01)`, `at most 63`,
    /// `at least 4.8`, joined by `, `.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(v) = self.value {
            let tol: Vec<String> = [("rtol", self.rtol), ("atol", self.atol)]
                .into_iter()
                .filter_map(|(n, t)| t.map(|t| format!("{n} {t}")))
                .collect();
            parts.push(if tol.is_empty() {
                format!("{v}")
            } else {
                format!("{v} ({})", tol.join(", "))
            });
        }
        if let Some(m) = self.max {
            parts.push(format!("at most {m}"));
        }
        if let Some(m) = self.min {
            parts.push(format!("at least {m}"));
        }
        parts.join(", ")
    }

    /// The rerun's distance from the figure: from `value`, else from the limit it is
    /// measured against (`max`, else `min`).
    pub fn delta(&self, x: f64) -> f64 {
        x - self.value.or(self.max).or(self.min).unwrap_or(x)
    }

    /// What is wrong with the figure as written, if anything.
    fn problem(&self) -> Option<String> {
        if self.value.is_none() && self.max.is_none() && self.min.is_none() {
            return Some("give `value` (with `rtol`/`atol`), `max` or `min`".into());
        }
        if self.value.is_none() && (self.rtol.is_some() || self.atol.is_some()) {
            return Some("`rtol` and `atol` apply to a `value`; give one".into());
        }
        for (name, v) in [
            ("value", self.value),
            ("rtol", self.rtol),
            ("atol", self.atol),
            ("max", self.max),
            ("min", self.min),
        ] {
            if let Some(v) = v
                && !v.is_finite()
            {
                return Some(format!("`{name}` must be a finite number, got {v}"));
            }
        }
        for (name, t) in [("rtol", self.rtol), ("atol", self.atol)] {
            if let Some(t) = t
                && t < 0.0
            {
                return Some(format!("`{name}` must not be negative, got {t}"));
            }
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max)
            && lo > hi
        {
            return Some(format!("`min` {lo} is above `max` {hi}"));
        }
        None
    }
}

/// Path patterns of an attempt inside an archive. `{task_id}`, `{attempt_id}` and `{seq}`
/// are placeholders; file patterns are relative to the attempt directory.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LayoutOverride {
    /// Attempt directory, e.g. `deepswe/{task_id}/{attempt_id}/`.
    #[serde(default)]
    pub attempt_dir: Option<String>,
    /// Identity file, e.g. `identity.json`.
    #[serde(default)]
    pub identity: Option<String>,
    /// Request-start files, e.g. `requests/{seq}.start`.
    #[serde(default)]
    pub request_start: Option<String>,
    /// Timers file (JSON lines), e.g. `timers.jsonl`.
    #[serde(default)]
    pub timers: Option<String>,
    /// Result file, e.g. `result.json`.
    #[serde(default)]
    pub result: Option<String>,
}

/// A fully resolved attempt layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Attempt directory pattern (ends with `/`).
    pub attempt_dir: String,
    /// Identity file, relative to the attempt directory.
    pub identity: String,
    /// Request-start pattern with `{seq}`, relative to the attempt directory.
    pub request_start: String,
    /// Timers file, relative to the attempt directory.
    pub timers: String,
    /// Result file, relative to the attempt directory.
    pub result: String,
}

impl Layout {
    /// The default layout of a workload (docs/FORMAT.md, "Original archives").
    pub fn default_for(w: WorkloadId) -> Layout {
        match w {
            WorkloadId::Deepswe => Layout {
                attempt_dir: "deepswe/{task_id}/{attempt_id}/".into(),
                identity: "identity.json".into(),
                request_start: "requests/{seq}.start".into(),
                timers: "timers.jsonl".into(),
                result: "result.json".into(),
            },
            WorkloadId::Tmax => Layout {
                attempt_dir: "tmax/{attempt_id}/".into(),
                identity: "trial.json".into(),
                request_start: "agent/requests/{seq}.start".into(),
                timers: "agent/timers.jsonl".into(),
                result: "result.json".into(),
            },
        }
    }

    /// Apply an override on top of the workload default.
    pub fn resolve(w: WorkloadId, o: &LayoutOverride) -> Layout {
        let d = Layout::default_for(w);
        let mut attempt_dir = o.attempt_dir.clone().unwrap_or(d.attempt_dir);
        if !attempt_dir.ends_with('/') {
            attempt_dir.push('/');
        }
        Layout {
            attempt_dir,
            identity: o.identity.clone().unwrap_or(d.identity),
            request_start: o.request_start.clone().unwrap_or(d.request_start),
            timers: o.timers.clone().unwrap_or(d.timers),
            result: o.result.clone().unwrap_or(d.result),
        }
    }
}

/// Expected cohort counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    /// Attempts audited (census only; pilot attempts are not counted).
    pub audited: u64,
    /// Attempts in the cohort.
    pub included: u64,
    /// Pilot attempts superseded by the census (deepswe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pilot: Option<u64>,
    /// Census exclusions by reason (pilot attempts are counted by `pilot`). When given, the
    /// list is complete: a reason found but not listed is a difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<std::collections::BTreeMap<crate::ExclusionReason, u64>>,
    /// Included attempts kept but flagged, by kind (`llm_query_error`). When given, the
    /// list is complete: a kind found but not listed is a difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flagged: Option<std::collections::BTreeMap<String, u64>>,
}

/// Replay capacity of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayCaps {
    /// Most attempts running at once (K).
    #[schemars(range(min = 1))]
    pub concurrency: u32,
    /// CPU cap in cores.
    pub cpu_cores: f64,
    /// RAM cap in GiB.
    pub ram_gib: f64,
    /// GPUs of the shared inference service.
    #[schemars(range(min = 1, max = MAX_GPUS))]
    pub gpus: u32,
}

impl ReplayCaps {
    /// The study's caps of a workload (the demo corpus writes them into `pipeline.yaml`;
    /// the synthetic workloads of the replay's tests and benches use them).
    pub const fn study(w: WorkloadId) -> ReplayCaps {
        match w {
            WorkloadId::Tmax => ReplayCaps {
                concurrency: 16,
                cpu_cores: 27.0,
                ram_gib: 66.0,
                gpus: 8,
            },
            WorkloadId::Deepswe => ReplayCaps {
                concurrency: 32,
                cpu_cores: 64.0,
                ram_gib: 256.0,
                gpus: 8,
            },
        }
    }
}

/// The seeded schedule search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Seed of the one RNG stream of the whole replay.
    pub seed: u64,
    /// The order in which workloads consume the RNG stream.
    pub order: Vec<WorkloadId>,
    /// How much the search does: `quick`, `default`, `thorough`, or a factor; it scales
    /// the budget's repetition counts and keeps its step sizes (docs/CONFIG.md, "Search
    /// effort").
    #[serde(default)]
    pub effort: SearchEffort,
    /// Budget counts (never seconds) that override what `effort` gives.
    #[serde(default)]
    pub budget: BudgetKeys,
    /// The LP lower bounds solved with HiGHS (docs/BOUNDS.md), with their budgets (counts).
    #[serde(default)]
    pub lp_bounds: LpBoundsConfig,
    /// Which search runs: the study's own method (`seed`) or this project's (`extended`,
    /// the default, which runs the seed profile's candidates first, so it is never worse).
    #[serde(default)]
    pub profile: SearchProfile,
    /// The GPU pattern bound (docs/BOUNDS.md), with its budget (counts).
    #[serde(default)]
    pub pattern_bound: PatternBoundConfig,
}

/// The schedule search's profile (`search.profile` in `pipeline.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchProfile {
    /// Only the study's families: fixed priority orders, random orders, perturbations of
    /// the best order, random task-group orders and swaps/moves from the best order, each
    /// order decoded by both the serial (no overtaking) and the backfilling list schedule.
    Seed,
    /// The seed profile's candidates first (same candidates and random draws), then the
    /// rest of the budget spent adaptively over order moves, constructions and start-time
    /// neighbourhood search.
    #[default]
    Extended,
}

impl SearchProfile {
    /// The name `pipeline.yaml` gives it.
    pub fn name(self) -> &'static str {
        match self {
            SearchProfile::Seed => "seed",
            SearchProfile::Extended => "extended",
        }
    }
}

impl SearchConfig {
    /// The budget counts the search runs with: `effort`'s, overridden by `budget`'s keys.
    pub fn budget_counts(&self) -> SearchBudget {
        SearchBudget::resolve(self.effort, &self.budget)
    }
}

impl SearchProfile {
    /// Lowercase name used in `pipeline.yaml` and the outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchProfile::Seed => "seed",
            SearchProfile::Extended => "extended",
        }
    }
}

/// Budget of the GPU pattern bound (docs/BOUNDS.md, item 7): the exact
/// cross-correlations of request patterns it sweeps are counted, never timed. Attempts whose
/// partner sweeps do not fit the budget keep the request-time bound (still valid, weaker);
/// `enabled: false` skips it and the report says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PatternBoundConfig {
    /// Compute the pattern bound at all.
    pub enabled: bool,
    /// Most breakpoints (4 per pair of requests) swept over all attempt pairs, per workload.
    pub pair_events: u64,
    /// Multipliers `alpha = k / (2n)`, `k = 0..=n` (`n` = this), tried per attempt for its
    /// lifetime-overlap constraint (ns of request overlap charged per ns of shared life).
    pub alpha_steps: u32,
    /// When the budget reaches only some attempts (longest request time first), the sweep
    /// runs only if they hold at least this share of the workload's request time (what a
    /// partial sweep can tighten is confined to their terms); otherwise every attempt keeps
    /// the request-time cap and the status says `below_min_share`.
    pub min_swept_share: f64,
}

impl Default for PatternBoundConfig {
    fn default() -> Self {
        PatternBoundConfig {
            enabled: true,
            pair_events: 600_000_000,
            alpha_steps: 10,
            min_swept_share: 0.25,
        }
    }
}

/// Budgets of the LP lower bounds (counts, never seconds). A bound whose budget runs out
/// before column generation converges is still valid (each round's bound is certified by an
/// exact pricing step), only weaker; `enabled: false` skips both LPs and the report says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LpBoundsConfig {
    /// Solve the LP bounds at all.
    pub enabled: bool,
    /// Most column-generation rounds per LP and workload.
    pub rounds: u32,
    /// Most simplex iterations per solve of a restricted master LP.
    pub simplex_iterations: u32,
    /// Most branch-and-bound nodes per exact pricing MIP of the cache LP (a pricing step that
    /// hits it certifies with the MIP's dual bound).
    pub pricing_nodes: u32,
    /// Most shared blobs the cache LP models jointly (the heaviest first: GiB x per-blob
    /// bound); the others keep their per-blob bounds.
    pub max_blobs: u32,
    /// Fewest users a blob needs to enter the cache LP (a blob shared by a few attempts gains
    /// little from it and splits the LP's classes).
    pub min_users: u32,
}

impl Default for LpBoundsConfig {
    fn default() -> Self {
        LpBoundsConfig {
            enabled: true,
            rounds: 200,
            simplex_iterations: 200_000,
            pricing_nodes: 2_000,
            max_blobs: 64,
            min_users: 8,
        }
    }
}

/// Declares the search's budget once: [`SearchBudget`] (the counts the search reads) and
/// [`BudgetKeys`] (the `search.budget` keys of `pipeline.yaml`, each optional), with each
/// count's default and whether `search.effort` scales it (`scaled`: a repetition count;
/// `kept`: a step size, a shape or a switch).
macro_rules! search_budget {
    ($( $(#[$doc:meta])* $name:ident: $ty:ty = $default:expr, $scaling:ident; )*) => {
        /// Search budgets, all counts (never seconds): the resolved values the search reads.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct SearchBudget {
            $( $(#[$doc])* pub $name: $ty, )*
        }

        impl Default for SearchBudget {
            fn default() -> Self {
                SearchBudget { $( $name: $default, )* }
            }
        }

        /// `search.budget`: counts that override what `search.effort` gives (a key left out
        /// takes its default scaled by the effort; docs/CONFIG.md lists the counts of each
        /// named effort).
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields, default)]
        pub struct BudgetKeys {
            $(
                $(#[$doc])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $name: Option<$ty>,
            )*
        }

        impl SearchBudget {
            /// The counts of `effort` with `keys` overriding them: a scaled count is its
            /// default times the effort's factor, rounded, at least 1 (0 stays 0); a kept
            /// one is its default.
            pub fn resolve(effort: SearchEffort, keys: &BudgetKeys) -> SearchBudget {
                let d = SearchBudget::default();
                let f = effort.factor();
                SearchBudget {
                    $( $name: keys.$name.unwrap_or_else(|| search_budget!(@$scaling d.$name, f)), )*
                }
            }

            /// The names of the counts `search.effort` scales, in declaration order.
            pub fn scaled_keys() -> Vec<&'static str> {
                let mut out = Vec::new();
                $( if search_budget!(@is_scaled $scaling) { out.push(stringify!($name)); } )*
                out
            }
        }

        impl From<SearchBudget> for BudgetKeys {
            /// Every key set, to the given counts.
            fn from(b: SearchBudget) -> BudgetKeys {
                BudgetKeys { $( $name: Some(b.$name), )* }
            }
        }
    };
    (@scaled $v:expr, $f:expr) => { scale_count($v, $f) };
    (@kept $v:expr, $f:expr) => { $v };
    (@is_scaled scaled) => { true };
    (@is_scaled kept) => { false };
}

/// A repetition count times an effort factor: rounded, at least 1, and 0 stays 0.
fn scale_count(count: u32, factor: f64) -> u32 {
    if count == 0 {
        return 0;
    }
    ((f64::from(count) * factor).round() as u32).max(1)
}

search_budget! {
    /// Seed profile: uniformly random orders per workload (each decoded both ways).
    random_orders: u32 = 32, scaled;
    /// Seed profile: re-sequencings of the best order under random duration perturbations,
    /// per workload (each decoded both ways).
    perturbations: u32 = 64, scaled;
    /// Relative spread of a duration perturbation (uniform in `[1-s, 1+s]`).
    perturbation_spread: f64 = 0.25, kept;
    /// Seed profile: orders with one to four swaps or moves from the best order, per
    /// objective and workload (each decoded both ways).
    local_moves: u32 = 256, scaled;
    /// Extended profile: most partial simultaneous-start candidates per workload.
    group_starts: u32 = 32, scaled;
    /// Seed profile: task-group orders (a task's attempts kept adjacent) per workload.
    task_groupings: u32 = 16, scaled;
    /// Orders (or candidates) generated from the same best schedule before re-basing on the
    /// new best (the hill-climbing step, and the size of an adaptive batch; results depend
    /// on it, thread count does not).
    local_move_batch: u32 = 32, kept;
    /// Extended profile: schedules ordered by request duty `req/d` (and variants) per
    /// workload.
    duty_orders: u32 = 24, scaled;
    /// Extended profile: most schedules of whole blob groups (a repository's tasks together,
    /// a task's attempts together) per workload; after the first batch the group order is
    /// searched from the family's best.
    blob_group_orders: u32 = 1024, scaled;
    /// Extended profile: operator batches after the seed profile's candidates, per
    /// workload, alternately for GPU and cache, each operator chosen by its success so far.
    adaptive_batches: u32 = 48, scaled;
    /// Extended profile: most rounds of the start-time neighbourhood search per objective
    /// (GPU, cache) and workload; each round restarts its chains from the best so far.
    lns_rounds: u32 = 6, scaled;
    /// Independent chains per round (run in parallel, folded in chain order).
    lns_chains: u32 = 4, kept;
    /// Moves per chain and round (a move removes and reinserts a few attempts).
    lns_moves: u32 = 1000, kept;
    /// Most attempts one move removes.
    lns_max_removed: u32 = 3, kept;
    /// Late-acceptance history length of a chain.
    lns_late_acceptance: u32 = 64, kept;
    /// Every n-th move of a GPU chain also scores every feasible start within twice the
    /// workload's mean attempt duration of the removed attempt's old start, by an exact
    /// sweep of the objective (docs/SEARCH.md, "Whole-window reinsertion"); 0 = never.
    lns_window_every_gpu: u32 = 4, kept;
    /// The same for the cache chains (measured on the zoo, it helps them less than it
    /// costs); 0 = never.
    lns_window_every_cache: u32 = 0, kept;
    /// A chain that has not improved its best for this many moves makes a kick: one move
    /// that removes `lns_kick_removed` attempts and is accepted whatever its cost (docs/SEARCH.md,
    /// "Kicks and stalls"); 0 = never.
    lns_kick_after: u32 = 0, kept;
    /// Attempts a kick removes.
    lns_kick_removed: u32 = 12, kept;
    /// After this many neighbourhood-search rounds in a row that each improved an
    /// objective's best by less than one part in 10,000, that objective runs no more rounds
    /// and its rounds left go to the other objective; 0 = never.
    lns_stall_rounds: u32 = 0, kept;
    /// Most restart rounds per objective: a neighbourhood-search round whose chains start
    /// from the best schedules of the other families (chain c from the c-th best), chosen
    /// beside the other operators by its success; 0 = never.
    lns_restart_rounds: u32 = 0, kept;
}

/// Factor of [`SearchEffort::Quick`].
pub const EFFORT_QUICK: f64 = 0.25;
/// Factor of [`SearchEffort::Thorough`].
pub const EFFORT_THOROUGH: f64 = 4.0;
/// Largest effort factor accepted.
pub const MAX_EFFORT: f64 = 64.0;

/// How much the search does (`search.effort`): one knob that scales every repetition count
/// of the budget by a factor and keeps the step sizes; explicit `search.budget` keys win.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum SearchEffort {
    /// The default counts times [`EFFORT_QUICK`].
    Quick,
    /// The default counts.
    #[default]
    Default,
    /// The default counts times [`EFFORT_THOROUGH`].
    Thorough,
    /// The default counts times this factor (greater than 0, at most [`MAX_EFFORT`]).
    Factor(f64),
}

impl SearchEffort {
    /// Every named effort, in increasing order, with its name.
    pub const NAMED: [(SearchEffort, &'static str); 3] = [
        (SearchEffort::Quick, "quick"),
        (SearchEffort::Default, "default"),
        (SearchEffort::Thorough, "thorough"),
    ];

    /// The factor it multiplies the scaled counts by.
    pub fn factor(self) -> f64 {
        match self {
            SearchEffort::Quick => EFFORT_QUICK,
            SearchEffort::Default => 1.0,
            SearchEffort::Thorough => EFFORT_THOROUGH,
            SearchEffort::Factor(f) => f,
        }
    }

    /// The name of a named effort, `None` for a factor.
    pub fn name(self) -> Option<&'static str> {
        SearchEffort::NAMED
            .iter()
            .find(|(e, _)| *e == self)
            .map(|(_, n)| *n)
    }
}

impl Serialize for SearchEffort {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self, self.name()) {
            (_, Some(name)) => s.serialize_str(name),
            (e, None) => s.serialize_f64(e.factor()),
        }
    }
}

impl<'de> Deserialize<'de> for SearchEffort {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = SearchEffort;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(
                    f,
                    "`quick`, `default`, `thorough`, or a factor greater than 0 and at most {MAX_EFFORT}"
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SearchEffort, E> {
                SearchEffort::NAMED
                    .iter()
                    .find(|(_, n)| *n == v)
                    .map(|(e, _)| *e)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<SearchEffort, E> {
                if v.is_finite() && v > 0.0 && v <= MAX_EFFORT {
                    Ok(SearchEffort::Factor(v))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<SearchEffort, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<SearchEffort, E> {
                self.visit_f64(v as f64)
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl JsonSchema for SearchEffort {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SearchEffort".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = SearchEffort::NAMED.iter().map(|(_, n)| *n).collect();
        schemars::json_schema!({
            "oneOf": [
                { "type": "string", "enum": names },
                { "type": "number", "exclusiveMinimum": 0.0, "maximum": MAX_EFFORT }
            ]
        })
    }
}

/// Fetching knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// Archives fetched at once.
    #[schemars(range(min = 1, max = crate::threads::MAX_THREADS))]
    pub parallel: u32,
    /// Retries of a transient fault (connection reset, 5xx, 429) per location; also the most
    /// times one Hub fetch re-resolves an expired (401/403) content URL.
    #[schemars(range(max = MAX_RETRIES))]
    pub retries: u32,
    /// Whole-transfer bound in seconds of one request (one archive download, or one resumed
    /// part of it): it must cover the largest archive's transfer.
    #[schemars(range(min = 1, max = MAX_WAIT_S))]
    pub request_timeout_s: u64,
    /// Longest wait in seconds to connect to an endpoint.
    #[schemars(range(min = 1, max = MAX_WAIT_S))]
    pub connect_timeout_s: u64,
    /// Longest wait in seconds for the next bytes of an answer (its head included). A
    /// timed-out location is not retried, so an endpoint that accepts and never answers
    /// fails after about this long, with an error naming it.
    #[schemars(range(min = 1, max = MAX_WAIT_S))]
    pub read_timeout_s: u64,
    /// Longest one Hub request waits in total, in seconds, while the Hub answers 429 (it
    /// limits requests per 5-minute window and says when the window resets, in its
    /// `RateLimit` header): past it the fetch fails. Rate-limit waits do not use up
    /// `retries`.
    #[schemars(range(max = MAX_WAIT_S))]
    pub rate_limit_patience_s: u64,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            parallel: 4,
            retries: 5,
            request_timeout_s: 3600,
            connect_timeout_s: 30,
            read_timeout_s: 120,
            rate_limit_patience_s: 600,
        }
    }
}

/// Archive-reading limits: how far one archive may expand before it is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Most uncompressed bytes one archive may expand to.
    #[schemars(range(min = 1, max = MAX_ARCHIVE_BYTES))]
    pub max_uncompressed_bytes: u64,
    /// Most tar members one archive may hold.
    #[schemars(range(min = 1, max = MAX_ARCHIVE_BYTES))]
    pub max_members: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            max_uncompressed_bytes: 64 * (1 << 30),
            max_members: 5_000_000,
        }
    }
}

/// A validated config with its resolved paths and archives.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The file it came from.
    pub path: PathBuf,
    /// The exact config text the run was loaded from (the file's, or the embedded run's):
    /// the run keeps this, never a later re-read of `path`, as its snapshot.
    pub text: String,
    /// The raw text's SHA256 (provenance).
    pub sha256: String,
    /// The parsed config.
    pub config: PipelineConfig,
    /// `run_dir`, resolved against the file's directory.
    pub run_dir: PathBuf,
    /// Every archive, validated.
    pub archives: Vec<ArchiveSpec>,
}

impl LoadedConfig {
    /// The resolved layout of a workload.
    pub fn layout(&self, w: WorkloadId) -> Option<Layout> {
        self.config
            .workloads
            .get(w)
            .map(|c| Layout::resolve(w, &c.layout))
    }
}

/// Read, parse and validate a `pipeline.yaml` (and the manifest it names).
pub fn load_config(path: &Path) -> Result<LoadedConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    load_config_str(path, &text)
}

/// Parse and validate config text; `path` names the file in errors and anchors relative paths.
pub fn load_config_str(path: &Path, text: &str) -> Result<LoadedConfig, ConfigError> {
    let config = parse_config(path, text)?;
    validate_config(path, text, &config)?;
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let archives = match (&config.sources.manifest, &config.sources.archives) {
        (Some(m), None) => {
            let mpath = base.join(m);
            let mtext = std::fs::read_to_string(&mpath).map_err(|source| ConfigError::Io {
                path: mpath.clone(),
                source,
            })?;
            parse_manifest_csv(&mpath, &mtext)?
        }
        (None, Some(rows)) => {
            let lines: Vec<usize> = (0..rows.len())
                .map(|i| {
                    line_of(text, &["sources", "archives"])
                        .map(|l| l + i)
                        .unwrap_or(0)
                })
                .collect();
            validate_rows(path, rows, &lines, &base, "sources.archives")?
        }
        _ => unreachable!("validate_config checks exactly one source"),
    };
    let configured: Vec<WorkloadId> = config.workloads.iter().map(|(w, _)| w).collect();
    for a in &archives {
        if !configured.contains(&a.workload) {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: line_of(text, &["workloads"]),
                field: "workloads".into(),
                message: format!(
                    "archive `{}` belongs to workload `{}`, which is not configured",
                    a.archive_id, a.workload
                ),
            });
        }
    }
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    sha2::Digest::update(&mut hasher, text.as_bytes());
    Ok(LoadedConfig {
        path: path.to_path_buf(),
        text: text.to_string(),
        sha256: hex::encode(sha2::Digest::finalize(hasher)),
        run_dir: base.join(&config.run_dir),
        config,
        archives,
    })
}

fn parse_config(path: &Path, text: &str) -> Result<PipelineConfig, ConfigError> {
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let line = inner.location().map(|l| l.line());
        let mut message = inner.to_string();
        // serde_yaml appends " at line L column C"; the line is reported separately.
        if let Some(i) = message.find(" at line ") {
            message.truncate(i);
        }
        // and may prefix the (partial) path it knows; keep the message itself.
        if let Some((prefix, rest)) = message.split_once(": ")
            && !prefix.contains(' ')
            && field.starts_with(prefix)
        {
            message = rest.to_string();
        }
        ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line.or_else(|| {
                let parts: Vec<&str> = field.split('.').collect();
                line_of(text, &parts)
            }),
            field: if field == "." {
                "(top level)".into()
            } else {
                field
            },
            message,
        }
    })
}

/// Largest accepted wait of any `ingest.*_s` value: one week, in seconds.
pub const MAX_WAIT_S: u64 = 7 * 24 * 3600;
/// Most retries of one location.
pub const MAX_RETRIES: u64 = 100;
/// Most GPUs of a workload's inference service.
pub const MAX_GPUS: u64 = 1 << 20;
/// Largest byte (or member) count an archive may be allowed to expand to: 1 PiB.
pub const MAX_ARCHIVE_BYTES: u64 = 1 << 50;

fn validate_config(path: &Path, text: &str, c: &PipelineConfig) -> Result<(), ConfigError> {
    let err = |field: &str, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        line: {
            let parts: Vec<&str> = field.split('.').collect();
            line_of(text, &parts)
        },
        field: field.to_string(),
        message,
    };
    if c.version != PIPELINE_CONFIG_VERSION {
        return Err(err(
            "version",
            format!(
                "unsupported version {}, this build reads version {PIPELINE_CONFIG_VERSION}",
                c.version
            ),
        ));
    }
    if c.run_dir.trim().is_empty() {
        return Err(err("run_dir", "must not be empty".into()));
    }
    match (&c.sources.manifest, &c.sources.archives) {
        (Some(_), Some(_)) => {
            return Err(err(
                "sources",
                "give either `manifest` or `archives`, not both".into(),
            ));
        }
        (None, None) => {
            return Err(err(
                "sources",
                "missing `manifest` (a CSV path) or `archives` (inline rows)".into(),
            ));
        }
        _ => {}
    }
    if c.sources.locations.is_empty() {
        return Err(err(
            "sources.locations",
            "list at least one of file, gcs, hf".into(),
        ));
    }
    let mut seen = Vec::new();
    for l in &c.sources.locations {
        if seen.contains(l) {
            return Err(err(
                "sources.locations",
                format!("`{}` is listed twice", l.as_str()),
            ));
        }
        seen.push(*l);
    }
    let configured: Vec<WorkloadId> = c.workloads.iter().map(|(w, _)| w).collect();
    if configured.is_empty() {
        return Err(err("workloads", "configure at least one workload".into()));
    }
    for (w, wc) in c.workloads.iter() {
        let f = |k: &str| format!("workloads.{w}.{k}");
        let r = &wc.replay;
        if r.concurrency == 0 {
            return Err(err(&f("replay.concurrency"), "must be at least 1".into()));
        }
        if !(r.cpu_cores.is_finite() && r.cpu_cores > 0.0) {
            return Err(err(
                &f("replay.cpu_cores"),
                format!("must be a positive number, got {}", r.cpu_cores),
            ));
        }
        if !(r.ram_gib.is_finite() && r.ram_gib > 0.0) {
            return Err(err(
                &f("replay.ram_gib"),
                format!("must be a positive number, got {}", r.ram_gib),
            ));
        }
        for (resource, name, figure) in wc.published.figures() {
            if let Some(problem) = figure.problem() {
                return Err(err(&f(&format!("published.{resource}.{name}")), problem));
            }
        }
        if wc.expect.included > wc.expect.audited {
            return Err(err(
                &f("expect.included"),
                format!(
                    "{} included cannot exceed {} audited",
                    wc.expect.included, wc.expect.audited
                ),
            ));
        }
        let layout = Layout::resolve(w, &wc.layout);
        if !layout.attempt_dir.contains("{attempt_id}") {
            return Err(err(
                &f("layout.attempt_dir"),
                format!(
                    "`{}` must contain the placeholder {{attempt_id}}",
                    layout.attempt_dir
                ),
            ));
        }
        // The matcher reads one placeholder per path segment (literal text may surround
        // it): two in one segment, or one named twice, could never be matched unambiguously.
        for seg in layout.attempt_dir.split('/') {
            let n = seg.matches("{task_id}").count() + seg.matches("{attempt_id}").count();
            if n > 1 {
                return Err(err(
                    &f("layout.attempt_dir"),
                    format!(
                        "workload `{w}`: `{}` puts {n} placeholders in the path segment `{seg}`; give each placeholder its own path segment",
                        layout.attempt_dir
                    ),
                ));
            }
        }
        for (k, pattern, ph) in [
            ("attempt_dir", &layout.attempt_dir, "{attempt_id}"),
            ("attempt_dir", &layout.attempt_dir, "{task_id}"),
            ("request_start", &layout.request_start, "{seq}"),
        ] {
            if pattern.matches(ph).count() > 1 {
                return Err(err(
                    &f(&format!("layout.{k}")),
                    format!(
                        "workload `{w}`: `{pattern}` names the placeholder {ph} more than once"
                    ),
                ));
            }
        }
        if !layout.request_start.contains("{seq}") {
            return Err(err(
                &f("layout.request_start"),
                format!(
                    "`{}` must contain the placeholder {{seq}}",
                    layout.request_start
                ),
            ));
        }
        for (k, v) in [
            ("identity", &layout.identity),
            ("timers", &layout.timers),
            ("result", &layout.result),
            ("request_start", &layout.request_start),
        ] {
            if v.starts_with('/') || v.split('/').any(|p| p == "..") || v.is_empty() {
                return Err(err(
                    &f(&format!("layout.{k}")),
                    format!("`{v}` must be a relative path inside the attempt directory"),
                ));
            }
        }
    }
    let mut order = Vec::new();
    for w in &c.search.order {
        if order.contains(w) {
            return Err(err(
                "search.order",
                format!("workload `{w}` is listed twice"),
            ));
        }
        if !configured.contains(w) {
            return Err(err(
                "search.order",
                format!("workload `{w}` is not configured under `workloads`"),
            ));
        }
        order.push(*w);
    }
    for w in &configured {
        if !order.contains(w) {
            return Err(err(
                "search.order",
                format!("workload `{w}` is configured but missing from the order"),
            ));
        }
    }
    let b = c.search.budget_counts();
    if !(b.perturbation_spread.is_finite() && (0.0..1.0).contains(&b.perturbation_spread)) {
        return Err(err(
            "search.budget.perturbation_spread",
            format!("must be in [0, 1), got {}", b.perturbation_spread),
        ));
    }
    if b.local_move_batch == 0 {
        return Err(err(
            "search.budget.local_move_batch",
            "must be at least 1".into(),
        ));
    }
    if b.lns_max_removed == 0 {
        return Err(err(
            "search.budget.lns_max_removed",
            "must be at least 1".into(),
        ));
    }
    if b.lns_late_acceptance == 0 {
        return Err(err(
            "search.budget.lns_late_acceptance",
            "must be at least 1".into(),
        ));
    }
    if c.ingest.parallel == 0 || c.ingest.parallel as usize > crate::threads::MAX_THREADS {
        return Err(err(
            "ingest.parallel",
            format!("must be 1 to {}", crate::threads::MAX_THREADS),
        ));
    }
    if let Some(p) = &c.sources.gcs.user_project
        && (p.trim().is_empty() || p.chars().any(|ch| ch.is_whitespace() || ch.is_control()))
    {
        return Err(err(
            "sources.gcs.user_project",
            format!("must be a project id (no blanks), got {p:?}"),
        ));
    }
    // Values the code adds to clocks or multiplies into sizes are bounded, so a typo cannot
    // overflow an instant or a byte count at run time.
    if let Some(r) = out_of_range(c) {
        let message = match r.max {
            Some(max) => format!("must be {} to {max}, got {}", r.min, r.value),
            None => format!("must be at least {}, got {}", r.min, r.value),
        };
        return Err(err(&r.field, message));
    }
    Ok(())
}

/// An integer of the config outside its declared range.
struct OutOfRange {
    field: String,
    value: u64,
    min: u64,
    max: Option<u64>,
}

/// The first integer of `c` outside its range. The ranges are stated once, by the fields'
/// `#[schemars(range(...))]` attributes: this reads them from the generated JSON schema
/// (its `minimum` / `maximum`), which docs/CONFIG.md shows too.
fn out_of_range(c: &PipelineConfig) -> Option<OutOfRange> {
    use serde_json::Value;
    fn walk(root: &Value, schema: &Value, value: &Value, path: &str) -> Option<OutOfRange> {
        let schema = match schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            Some(name) => root.get("$defs")?.get(name)?,
            None => schema,
        };
        if let Some(alternatives) = schema.get("anyOf").and_then(Value::as_array) {
            return alternatives
                .iter()
                .find_map(|alt| walk(root, alt, value, path));
        }
        let below = |key: &str| {
            if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            }
        };
        match value {
            Value::Object(fields) => fields.iter().find_map(|(k, v)| {
                let field_schema = schema.get("properties")?.get(k)?;
                walk(root, field_schema, v, &below(k))
            }),
            Value::Array(items) => {
                let item_schema = schema.get("items")?;
                items
                    .iter()
                    .enumerate()
                    .find_map(|(i, v)| walk(root, item_schema, v, &format!("{path}[{i}]")))
            }
            Value::Number(n) => {
                let value = n.as_u64()?;
                let min = schema.get("minimum").and_then(Value::as_u64).unwrap_or(0);
                let max = schema.get("maximum").and_then(Value::as_u64);
                (value < min || max.is_some_and(|m| value > m)).then(|| OutOfRange {
                    field: path.to_string(),
                    value,
                    min,
                    max,
                })
            }
            _ => None,
        }
    }
    let schema = serde_json::to_value(schemars::schema_for!(PipelineConfig)).ok()?;
    let value = serde_json::to_value(c).ok()?;
    walk(&schema, &schema, &value, "")
}

/// The effective GCS endpoint: `STORAGE_EMULATOR_HOST` (as `host:port` or a URL) wins
/// over the config; `None` means the real service.
pub fn gcs_endpoint(configured: Option<&str>, env_value: Option<&str>) -> Option<String> {
    let pick = env_value
        .filter(|v| !v.trim().is_empty())
        .or(configured.filter(|v| !v.trim().is_empty()))?;
    let v = pick.trim().trim_end_matches('/');
    if v.starts_with("http://") || v.starts_with("https://") {
        Some(v.to_string())
    } else {
        Some(format!("http://{v}"))
    }
}

/// The effective Hub endpoint: `HF_ENDPOINT` wins over the config; default the real Hub.
pub fn hf_endpoint(configured: Option<&str>, env_value: Option<&str>) -> String {
    env_value
        .filter(|v| !v.trim().is_empty())
        .or(configured.filter(|v| !v.trim().is_empty()))
        .unwrap_or("https://huggingface.co")
        .trim()
        .trim_end_matches('/')
        .to_string()
}

/// Best-effort 1-based line of a dotted key path in block-style YAML (for errors from
/// validation that runs after parsing). Returns the deepest key found.
pub fn line_of(text: &str, path: &[&str]) -> Option<usize> {
    let mut found = None;
    let mut min_indent: isize = -1;
    let mut depth = 0;
    for (i, raw) in text.lines().enumerate() {
        if depth >= path.len() {
            break;
        }
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = (raw.len() - trimmed.len()) as isize;
        if found.is_some() && indent <= min_indent {
            // left the block of the last key found
            break;
        }
        let key = path[depth];
        let key = key.split('[').next().unwrap_or(key);
        if let Some(rest) = trimmed.strip_prefix(key)
            && rest.trim_start().starts_with(':')
        {
            found = Some(i + 1);
            min_indent = indent;
            depth += 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulator_host_forms() {
        assert_eq!(
            gcs_endpoint(None, Some("127.0.0.1:4443")).as_deref(),
            Some("http://127.0.0.1:4443")
        );
        assert_eq!(
            gcs_endpoint(Some("http://a:1/"), Some("http://127.0.0.1:9/")).as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(
            gcs_endpoint(Some("http://a:1"), None).as_deref(),
            Some("http://a:1")
        );
        assert_eq!(gcs_endpoint(None, Some("")), None);
        assert_eq!(hf_endpoint(None, None), "https://huggingface.co");
        assert_eq!(
            hf_endpoint(Some("http://x"), Some("http://127.0.0.1:8/")),
            "http://127.0.0.1:8"
        );
    }

    #[test]
    fn line_of_nested_keys() {
        let t = "version: 1\nworkloads:\n  tmax:\n    replay:\n      gpus: 8\n  deepswe:\n    replay:\n      gpus: 8\n";
        assert_eq!(line_of(t, &["workloads", "deepswe", "replay"]), Some(7));
        assert_eq!(
            line_of(t, &["workloads", "tmax", "replay", "gpus"]),
            Some(5)
        );
        assert_eq!(line_of(t, &["version"]), Some(1));
    }
}
