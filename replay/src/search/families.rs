//! The candidate families (the seed's and issue 7's), their fixed priority orders, their
//! per-family counts and the search budget (all counts).

use serde::Serialize;

/// Search budgets, all counts: `model::config::SearchBudget` plus replay-side knobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayBudget {
    /// List schedules under random duration perturbations, per workload.
    pub perturbations: u32,
    /// Relative spread of a perturbation factor (uniform in `[1-s, 1+s]`).
    pub perturbation_spread: f64,
    /// Local swap/move candidates per objective (GPU, cache) and workload.
    pub local_moves: u32,
    /// Partial simultaneous-start candidates per workload.
    pub group_starts: u32,
    /// Repeated-task grouping candidates per workload.
    pub task_groupings: u32,
    /// Local-move candidates generated from the same best plan (hill-climbing step).
    pub local_move_batch: u32,
    /// Duty-ordered list schedules per workload.
    pub duty_orders: u32,
    /// Blob-group-ordered list schedules per workload.
    pub blob_group_orders: u32,
    /// Start-time neighbourhood search: rounds per objective and workload.
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
    /// The budget of a config, with replay-side defaults for knobs it does not have.
    pub fn from_config(b: &model::config::SearchBudget) -> Self {
        ReplayBudget {
            perturbations: b.perturbations,
            perturbation_spread: b.perturbation_spread,
            local_moves: b.local_moves,
            group_starts: b.group_starts,
            task_groupings: b.task_groupings,
            local_move_batch: b.local_move_batch,
            duty_orders: b.duty_orders,
            blob_group_orders: b.blob_group_orders,
            lns_rounds: b.lns_rounds,
            lns_chains: b.lns_chains,
            lns_moves: b.lns_moves,
            lns_max_removed: b.lns_max_removed,
            lns_late_acceptance: b.lns_late_acceptance,
        }
    }
}

/// A candidate family of SPEC 2.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Fixed priority orders (FIFO, longest/shortest first, most/least request time first,
    /// grouped by task, grouped by blob set).
    PriorityOrder,
    /// Priority orders of randomly perturbed durations, evaluated with true durations.
    Perturbation,
    /// Orders that keep a task's repeated attempts together.
    TaskGrouping,
    /// Partial simultaneous starts of a task's attempts.
    GroupStart,
    /// Local swaps and moves from the best GPU schedule.
    LocalMoveGpu,
    /// Local swaps and moves from the best cache schedule.
    LocalMoveCache,
    /// The fixed priority orders placed first-fit (backfilling) instead of as list
    /// schedules.
    FirstFitOrder,
    /// List schedules ordered by request duty `req/d` (highest first, and variants).
    DutyOrder,
    /// List schedules of whole blob groups (repository, then task), the group order searched.
    BlobGroupOrder,
    /// Start-time neighbourhood search for the GPU objective.
    LnsGpu,
    /// Start-time neighbourhood search for the cache objective.
    LnsCache,
}

impl Family {
    /// Every family, in evaluation order.
    pub const ALL: [Family; 11] = [
        Family::PriorityOrder,
        Family::Perturbation,
        Family::TaskGrouping,
        Family::GroupStart,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
        Family::FirstFitOrder,
        Family::DutyOrder,
        Family::BlobGroupOrder,
        Family::LnsGpu,
        Family::LnsCache,
    ];

    /// The families of SPEC 2.3 (the seed's); the others are issue 7's.
    pub const SEED: [Family; 6] = [
        Family::PriorityOrder,
        Family::Perturbation,
        Family::TaskGrouping,
        Family::GroupStart,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
    ];

    /// Name used in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::PriorityOrder => "priority_order",
            Family::Perturbation => "perturbation",
            Family::TaskGrouping => "task_grouping",
            Family::GroupStart => "group_start",
            Family::LocalMoveGpu => "local_move_gpu",
            Family::LocalMoveCache => "local_move_cache",
            Family::FirstFitOrder => "first_fit_order",
            Family::DutyOrder => "duty_order",
            Family::BlobGroupOrder => "blob_group_order",
            Family::LnsGpu => "lns_gpu",
            Family::LnsCache => "lns_cache",
        }
    }
}

/// The fixed priority orders, in evaluation order (FIFO first).
pub const PRIORITY_ORDERS: [&str; 7] = [
    "fifo",
    "longest_first",
    "shortest_first",
    "most_request_first",
    "least_request_first",
    "grouped_by_task",
    "grouped_by_blob_set",
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
