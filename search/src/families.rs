//! The candidate families (the seed profile's and the extended profile's), their fixed priority orders, their
//! per-family counts and the search budget (all counts).

use model::config::{SearchBudget, SearchEffort, SearchProfile};
use serde::{Deserialize, Serialize};

/// The search's budget: the config's profile and its [`SearchBudget`] counts, held as they
/// are (one type, so no count can drift from the config's). The counts read through
/// `Deref` (`budget.local_moves`); `replay.json` writes them flattened next to `profile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayBudget {
    /// `seed` (the study's families only) or `extended` (the seed profile's candidates,
    /// then the adaptive operators).
    pub profile: SearchProfile,
    /// `search.effort`, which scaled the counts that `search.budget` does not set.
    pub effort: SearchEffort,
    /// The counts the search ran with.
    #[serde(flatten)]
    pub counts: SearchBudget,
}

impl ReplayBudget {
    /// The budget of a config's search section.
    pub fn from_config(search: &model::config::SearchConfig) -> Self {
        ReplayBudget {
            profile: search.profile,
            effort: search.effort,
            counts: search.budget_counts(),
        }
    }
}

impl std::ops::Deref for ReplayBudget {
    type Target = SearchBudget;

    fn deref(&self) -> &SearchBudget {
        &self.counts
    }
}

/// A candidate family: the seed profile's (the study's method) and the extended profile's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
