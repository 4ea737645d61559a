//! The seeded schedule search: everything that looks for schedules, given a
//! [`schedule::GridInstance`] and its exact evaluator. Its design (the chain, the start
//! state's invariants and indexes, the call order) is on one page: `search/README.md`.
//!
//! What it owns:
//! - the search of one workload ([`search_workload`]) in two profiles (`search.profile`):
//!   `seed`, the study's method (fixed priority orders, random orders, task-group orders,
//!   perturbations of and swaps/moves from the best order, each order decoded by both
//!   [`decode::Decoder`]s), and `extended` (the default), which runs exactly the seed
//!   profile's candidates first and then spends `adaptive_batches` operator batches chosen
//!   by their measured success (the adaptive portfolio): order moves under either decoder,
//!   constructions (first-fit orders, duty orders, blob groups, simultaneous starts) and
//!   the start-time neighbourhood search;
//! - [`lns`]: the start-time neighbourhood search (chains of remove-and-reinsert moves
//!   under late acceptance) and its start state;
//! - [`cover`], [`profile`]: the interval indexes the chains keep between moves;
//! - [`group_fit`]: first-fit placement of a group of attempts released together;
//! - [`seeded`]: the seeded draws and the tie rule;
//! - [`names`]: names a record holds as one of a fixed list of static names.
//!
//! Every candidate is evaluated exactly, in parallel with results independent of the
//! thread count; the Pareto front of GPU vs cache gives the joint compromise.
//!
//! Reproducibility: one ChaCha8 stream (`ChaCha8Rng::seed_from_u64(search.seed)`) for the
//! whole replay. Each workload, in `search.order`, draws one 32-byte seed per random family
//! from it ([`Family::RANDOM`], both profiles alike); candidate `i` of a family uses ChaCha8
//! with that seed on stream `i` (`set_stream(i)`). Candidates are evaluated in parallel but
//! folded into the running bests in candidate order, and every adaptive decision reads
//! counts only, so the result never depends on the thread count.

mod adaptive;
mod blob_groups;
pub mod decode;
mod families;
mod orders;
mod seed_phase;
mod state;

pub mod cover;
pub mod group_fit;
pub mod lns;
pub mod names;
pub mod profile;
pub mod seeded;

pub use crate::seeded::{TIE_RELATIVE, beats};
pub use adaptive::{AdaptiveRecord, OperatorStats, StallRecord};
pub use families::{Family, FamilyStats, PRIORITY_ORDERS, ReplayBudget};
pub use state::{Found, TraceRow};

use crate::seeded::word_pos;
use decode::{BackfillScratch, Decoder, decode};
use model::config::SearchProfile;
use orders::Structure;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::RngCore;
use rayon::prelude::*;
use schedule::evaluate::{Evaluation, GridInstance, Plan, Scratch, evaluate};
use schedule::instance::WorkloadInstance;
use serde::{Deserialize, Serialize};
use state::State;

/// Why the search of a workload could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    /// The instance was refused (a quota over a cap).
    #[error(transparent)]
    Instance(#[from] schedule::InstanceError),
    /// The FIFO plan could not be scheduled (quotas were checked to fit, so never).
    #[error("{workload}: {detail}")]
    FifoUnscheduled {
        /// The workload.
        workload: String,
        /// What happened.
        detail: String,
    },
}

/// Most candidates evaluated in one parallel batch (bounds memory).
const MAX_BATCH: usize = 256;

/// How the workload consumed the shared RNG stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RngRecord {
    /// ChaCha8 word position of the shared stream before this workload.
    pub word_pos_before: u64,
    /// ... and after.
    pub word_pos_after: u64,
    /// The 32-byte family seeds drawn, hex, in draw order.
    pub family_seeds: Vec<(Family, String)>,
}

/// Everything the search of one workload found.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    /// The FIFO baseline (candidate 0).
    pub fifo: Found,
    /// Smallest makespan found (the CPU/RAM display schedule).
    pub fastest: Found,
    /// Smallest GPU ideal found.
    pub best_gpu: Found,
    /// Smallest cache ideal found.
    pub best_cache: Found,
    /// Smallest `gpu/fifo_gpu + cache/fifo_cache` on the Pareto front.
    pub best_joint: Found,
    /// The Pareto front of (GPU, cache) over every feasible candidate, by GPU ascending.
    pub front: Vec<Found>,
    /// Best GPU and cache hours of the seed profile: after its candidates (in an
    /// extended run, the seed phase that runs first; in a seed run, the best found).
    pub seed_best: (f64, f64),
    /// The seed profile's best GPU schedule (the one behind `seed_best.0`).
    pub seed_best_gpu: Found,
    /// The seed profile's best cache schedule (the one behind `seed_best.1`).
    pub seed_best_cache: Found,
    /// What the adaptive phase chose (empty for the seed profile).
    pub adaptive: AdaptiveRecord,
    /// Per-family counts, in [`Family::ALL`] order.
    pub stats: Vec<FamilyStats>,
    /// Best so far per objective after each batch.
    pub trace: Vec<TraceRow>,
    /// RNG consumption.
    pub rng: RngRecord,
    /// Candidates evaluated in total.
    pub evaluated: u64,
}

/// The selected schedules of a workload, in output order: the one list their names, the
/// frames' allowed values and the stage's picks are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected {
    /// The FIFO baseline.
    Fifo,
    /// The fastest schedule (CPU and RAM ideal values are the same for every schedule).
    BestCpuRam,
    /// Smallest GPU ideal found.
    BestGpu,
    /// Smallest cache ideal found.
    BestCache,
    /// The joint compromise on the Pareto front.
    BestJoint,
    /// The seed profile's best GPU schedule.
    SeedBestGpu,
    /// The seed profile's best cache schedule.
    SeedBestCache,
}

impl Selected {
    /// Every selected schedule, in output order.
    pub const ALL: [Selected; 7] = [
        Selected::Fifo,
        Selected::BestCpuRam,
        Selected::BestGpu,
        Selected::BestCache,
        Selected::BestJoint,
        Selected::SeedBestGpu,
        Selected::SeedBestCache,
    ];

    /// The name written to the outputs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Selected::Fifo => "fifo",
            Selected::BestCpuRam => "best_cpu_ram",
            Selected::BestGpu => "best_gpu",
            Selected::BestCache => "best_cache",
            Selected::BestJoint => "best_joint",
            Selected::SeedBestGpu => "seed_best_gpu",
            Selected::SeedBestCache => "seed_best_cache",
        }
    }
}

/// Every selected schedule's name, in output order (from [`Selected::ALL`]).
pub const SELECTED_NAMES: [&str; Selected::ALL.len()] = {
    let mut names = [""; Selected::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = Selected::ALL[i].as_str();
        i += 1;
    }
    names
};

impl SearchOutcome {
    /// The schedule found for one of the selected slots.
    pub fn selected(&self, which: Selected) -> &Found {
        match which {
            Selected::Fifo => &self.fifo,
            Selected::BestCpuRam => &self.fastest,
            Selected::BestGpu => &self.best_gpu,
            Selected::BestCache => &self.best_cache,
            Selected::BestJoint => &self.best_joint,
            Selected::SeedBestGpu => &self.seed_best_gpu,
            Selected::SeedBestCache => &self.seed_best_cache,
        }
    }
}

/// Evaluate `count` candidates made by `make(i)` on the pool, in parallel, in index order.
fn run_batch<F>(
    pool: &rayon::ThreadPool,
    g: &GridInstance,
    range: std::ops::Range<u64>,
    make: F,
) -> Vec<(Plan, Option<Evaluation>)>
where
    F: Fn(u64) -> Plan + Sync,
{
    pool.install(|| {
        range
            .into_par_iter()
            .map_init(Scratch::new, |scratch, i| {
                let plan = make(i);
                let eval = evaluate(g, &plan, scratch);
                (plan, eval)
            })
            .collect()
    })
}

/// Decode every `(order, decoder)` pair in parallel; results in the pairs' order.
fn decode_all(
    pool: &rayon::ThreadPool,
    g: &GridInstance,
    deadline: i64,
    orders: &[Vec<u32>],
    pairs: &[(usize, Decoder)],
) -> Vec<Option<Evaluation>> {
    pool.install(|| {
        pairs
            .par_iter()
            .map_init(
                || (Scratch::new(), BackfillScratch::new()),
                |(scratch, backfill), &(k, decoder)| {
                    decode(g, &orders[k], decoder, deadline, scratch, backfill)
                },
            )
            .collect()
    })
}

/// Decode `orders` with each of `decoders` (order by order, decoders in the given order),
/// evaluate in parallel and fold in that order; candidate `first + k` of the family is
/// labelled `{family}#{first + k}/{decoder}`. A serial decoding that cannot place a unit
/// counts as `rejected_cap`, a backfilling one past D as `rejected_deadline`.
fn fold_orders(
    state: &mut State,
    pool: &rayon::ThreadPool,
    g: &GridInstance,
    family: Family,
    first: u64,
    orders: Vec<Vec<u32>>,
    decoders: &[Decoder],
) {
    let pairs: Vec<(usize, Decoder)> = (0..orders.len())
        .flat_map(|k| decoders.iter().map(move |&d| (k, d)))
        .collect();
    let evals = decode_all(pool, g, state.deadline, &orders, &pairs);
    for (&(k, decoder), eval) in pairs.iter().zip(evals) {
        let label = format!(
            "{}#{}/{}",
            family.as_str(),
            first + k as u64,
            decoder.as_str()
        );
        state.fold_decoded(family, &orders[k], decoder, eval, label);
    }
    state.record_trace(family);
}

/// The 32-byte seeds of the random families of one workload.
struct FamilySeeds(Vec<(Family, [u8; 32])>);

impl FamilySeeds {
    fn of(&self, f: Family) -> [u8; 32] {
        self.0
            .iter()
            .find(|(x, _)| *x == f)
            .map(|(_, s)| *s)
            .unwrap_or([0u8; 32])
    }
}

/// Search one workload. `shared` is the replay's one RNG stream; this workload draws its
/// family seeds from it. The instance's quotas must already fit the caps.
pub fn search_workload(
    inst: &WorkloadInstance,
    g: &GridInstance,
    budget: &ReplayBudget,
    shared: &mut ChaCha8Rng,
    pool: &rayon::ThreadPool,
) -> Result<SearchOutcome, SearchError> {
    inst.check_quotas_fit()?;
    let word_pos_before = word_pos(shared);
    // Every random family's seed, in a fixed order, whatever the profile: the seed phase's
    // candidates are the same in both profiles and so is the next workload's draw.
    let mut seeds = Vec::new();
    for f in Family::RANDOM {
        let mut s = [0u8; 32];
        shared.fill_bytes(&mut s);
        seeds.push((f, s));
    }
    let seeds = FamilySeeds(seeds);
    let rng_record = RngRecord {
        word_pos_before,
        word_pos_after: word_pos(shared),
        family_seeds: seeds
            .0
            .iter()
            .map(|(f, s)| (*f, s.iter().map(|b| format!("{b:02x}")).collect()))
            .collect(),
    };

    let st = Structure::new(inst, g);
    let mut state = State::new(inst.caps.gpus);
    seed_phase::run(&mut state, &st, g, budget, &seeds, pool);
    let (seed_best_gpu, seed_best_cache) = (state.best_gpu.clone(), state.best_cache.clone());
    let adaptive = match budget.profile {
        SearchProfile::Seed => AdaptiveRecord::default(),
        SearchProfile::Extended => adaptive::run(&mut state, &st, g, budget, &seeds, pool),
    };

    let best_joint = state.best_joint();
    state.front.sort_by(|a, b| {
        a.eval
            .gpu_union
            .cmp(&b.eval.gpu_union)
            .then(a.candidate.cmp(&b.candidate))
    });
    match (
        state.fifo,
        state.fastest,
        state.best_gpu,
        state.best_cache,
        best_joint,
        seed_best_gpu,
        seed_best_cache,
    ) {
        (
            Some(fifo),
            Some(fastest),
            Some(best_gpu),
            Some(best_cache),
            Some(best_joint),
            Some(seed_best_gpu),
            Some(seed_best_cache),
        ) => Ok(SearchOutcome {
            fifo,
            fastest,
            best_gpu,
            best_cache,
            best_joint,
            front: state.front,
            seed_best: (seed_best_gpu.gpu_h, seed_best_cache.cache_h),
            seed_best_gpu,
            seed_best_cache,
            adaptive,
            stats: state.stats,
            trace: state.trace,
            rng: rng_record,
            evaluated: state.evaluated,
        }),
        // Quotas were checked to fit, so the FIFO plan always schedules.
        _ => Err(SearchError::FifoUnscheduled {
            workload: inst.workload.to_string(),
            detail: "the FIFO plan could not be scheduled".into(),
        }),
    }
}

/// Fold a batch of constructed candidates (list plans or first-fit start schedules) in
/// candidate order; `None` evaluations could not end by D.
fn fold_constructions(
    state: &mut State,
    family: Family,
    first: u64,
    batch: Vec<(Option<Plan>, Option<Evaluation>)>,
) {
    for (k, (plan, e)) in batch.into_iter().enumerate() {
        let candidate = state.evaluated;
        state.evaluated += 1;
        state.stat(family).evaluated += 1;
        let label = format!("{}#{}", family.as_str(), first + k as u64);
        match e {
            Some(e) => state.consider(family, plan, e, candidate, label),
            None => state.stat(family).rejected_deadline += 1,
        }
    }
    state.record_trace(family);
}
