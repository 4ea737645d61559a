//! The candidate families (the seed profile's and the extended profile's), their fixed priority orders, their
//! per-family counts and the search budget (all counts).

use model::config::SearchProfile;
use serde::Serialize;

/// Search budgets, all counts: `model::config::SearchBudget` plus the profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayBudget {
    /// `seed` (the study's families only) or `extended` (the seed profile's candidates,
    /// then the adaptive operators).
    pub profile: SearchProfile,
    /// Seed profile: uniformly random orders per workload (each decoded both ways).
    pub random_orders: u32,
    /// Seed profile: random duration perturbations of the best order per workload.
    pub perturbations: u32,
    /// Relative spread of a perturbation factor (uniform in `[1-s, 1+s]`).
    pub perturbation_spread: f64,
    /// Seed profile: orders with 1..4 swaps or moves from the best order, per objective.
    pub local_moves: u32,
    /// Partial simultaneous-start candidates per workload (extended profile).
    pub group_starts: u32,
    /// Seed profile: task-group orders (a task's attempts together) per workload.
    pub task_groupings: u32,
    /// Orders generated from the same best order (a batch; the hill-climbing step).
    pub local_move_batch: u32,
    /// Duty-ordered schedules per workload (extended profile).
    pub duty_orders: u32,
    /// Most blob-group candidates per workload (extended profile).
    pub blob_group_orders: u32,
    /// Extended profile: operator batches after the seed profile's candidates.
    pub adaptive_batches: u32,
    /// Start-time neighbourhood search: most rounds per objective and workload.
    pub lns_rounds: u32,
    /// ... chains per round.
    pub lns_chains: u32,
    /// ... moves per chain and round.
    pub lns_moves: u32,
    /// ... most attempts removed by one move.
    pub lns_max_removed: u32,
    /// ... late-acceptance history length.
    pub lns_late_acceptance: u32,
}

impl ReplayBudget {
    /// The budget of a config's search section.
    pub fn from_config(search: &model::config::SearchConfig) -> Self {
        let b = &search.budget;
        ReplayBudget {
            profile: search.profile,
            random_orders: b.random_orders,
            perturbations: b.perturbations,
            perturbation_spread: b.perturbation_spread,
            local_moves: b.local_moves,
            group_starts: b.group_starts,
            task_groupings: b.task_groupings,
            local_move_batch: b.local_move_batch,
            duty_orders: b.duty_orders,
            blob_group_orders: b.blob_group_orders,
            adaptive_batches: b.adaptive_batches,
            lns_rounds: b.lns_rounds,
            lns_chains: b.lns_chains,
            lns_moves: b.lns_moves,
            lns_max_removed: b.lns_max_removed,
            lns_late_acceptance: b.lns_late_acceptance,
        }
    }
}

/// A candidate family: the seed profile's (the study's method) and the extended profile's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Fixed priority orders ([`PRIORITY_ORDERS`]), each decoded both ways.
    PriorityOrder,
    /// Uniformly random orders.
    RandomOrder,
    /// Orders that keep a task's repeated attempts together (fixed task orders, then
    /// random orders of the task groups).
    TaskGrouping,
    /// The best order so far re-sequenced under random duration perturbations (its
    /// backfilling schedule with perturbed durations, attempts by perturbed start),
    /// evaluated with true durations.
    Perturbation,
    /// One to four swaps or moves applied to the best GPU order so far.
    LocalMoveGpu,
    /// One to four swaps or moves applied to the best cache order so far.
    LocalMoveCache,
    /// Partial simultaneous starts of a task's attempts (extended).
    GroupStart,
    /// The fixed priority orders placed first-fit (extended).
    FirstFitOrder,
    /// Orders by request duty `req/d` (highest first, and variants; extended).
    DutyOrder,
    /// Whole blob groups (repository, then task) in lanes, the group order searched
    /// (extended).
    BlobGroupOrder,
    /// Adaptive order moves (swaps, moves, perturbations, regroupings) from the best GPU
    /// order (extended).
    OrderMoveGpu,
    /// The same from the best cache order (extended).
    OrderMoveCache,
    /// Start-time neighbourhood search for the GPU objective (extended).
    LnsGpu,
    /// Start-time neighbourhood search for the cache objective (extended).
    LnsCache,
}

impl Family {
    /// Every family, in the order the outputs list them.
    pub const ALL: [Family; 14] = [
        Family::PriorityOrder,
        Family::RandomOrder,
        Family::TaskGrouping,
        Family::Perturbation,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
        Family::GroupStart,
        Family::FirstFitOrder,
        Family::DutyOrder,
        Family::BlobGroupOrder,
        Family::OrderMoveGpu,
        Family::OrderMoveCache,
        Family::LnsGpu,
        Family::LnsCache,
    ];

    /// The seed profile's families (the study's method), in evaluation order; the
    /// extended profile runs exactly these candidates first.
    pub const SEED: [Family; 6] = [
        Family::PriorityOrder,
        Family::RandomOrder,
        Family::TaskGrouping,
        Family::Perturbation,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
    ];

    /// The families with a random stream, in the order their 32-byte seeds are drawn from
    /// the shared stream (both profiles draw all of them, so a workload's seeds do not
    /// depend on the profile).
    pub const RANDOM: [Family; 12] = [
        Family::RandomOrder,
        Family::TaskGrouping,
        Family::Perturbation,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
        Family::GroupStart,
        Family::DutyOrder,
        Family::BlobGroupOrder,
        Family::OrderMoveGpu,
        Family::OrderMoveCache,
        Family::LnsGpu,
        Family::LnsCache,
    ];

    /// Name used in outputs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Family::PriorityOrder => "priority_order",
            Family::RandomOrder => "random_order",
            Family::TaskGrouping => "task_grouping",
            Family::Perturbation => "perturbation",
            Family::LocalMoveGpu => "local_move_gpu",
            Family::LocalMoveCache => "local_move_cache",
            Family::GroupStart => "group_start",
            Family::FirstFitOrder => "first_fit_order",
            Family::DutyOrder => "duty_order",
            Family::BlobGroupOrder => "blob_group_order",
            Family::OrderMoveGpu => "order_move_gpu",
            Family::OrderMoveCache => "order_move_cache",
            Family::LnsGpu => "lns_gpu",
            Family::LnsCache => "lns_cache",
        }
    }
}

/// The fixed priority orders, in evaluation order (FIFO first).
pub const PRIORITY_ORDERS: [&str; 8] = [
    "fifo",
    "longest_first",
    "shortest_first",
    "most_request_first",
    "least_request_first",
    "grouped_by_task",
    "grouped_by_blob_set",
    "grouped_by_shared_layers",
];

/// Counts of one family's candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FamilyStats {
    /// The family.
    pub family: Family,
    /// Candidates evaluated.
    pub evaluated: u64,
    /// Rejected: the schedule ends after the deadline D (first-fit constructions: an
    /// attempt found no start ending by D; neighbourhood moves: a removed attempt found no
    /// feasible start ending by D, and the move was undone).
    pub rejected_deadline: u64,
    /// Rejected: a unit could never fit the caps (cannot happen for single attempts, which
    /// are checked up front).
    pub rejected_cap: u64,
    /// Candidates that became a new best for some objective or entered the Pareto front.
    pub improvements: u64,
}
