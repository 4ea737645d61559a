//! The extended profile's adaptive phase: after the seed profile's candidates,
//! `adaptive_batches` operator batches, alternately for the GPU objective (even batches)
//! and the cache objective (odd batches). Each batch applies one operator of that
//! objective, chosen by UCB1 over counts: an operator not yet tried goes first (in list
//! order); otherwise the one with the largest `wins / tries + sqrt(2 ln(batches) / tries)`,
//! where a win is a batch after which the objective's best changed, and `batches` counts
//! the objective's batches so far (ties: the earlier in list order). Decisions read
//! counts only, never time, and each batch is folded in candidate order, so 1 and N
//! threads give the same choices and outputs.
//!
//! Operators (GPU; cache): first-fit priority orders (once); duty orders (once); order
//! moves from the best order decoded serially, and the same decoded by backfilling (each
//! batch `local_move_batch` orders: 1..4 swaps or moves, a duration perturbation or one
//! task regrouped); one round of the start-time neighbourhood search (`lns_chains` chains
//! of `lns_moves` moves, at most `lns_rounds` rounds per objective, fewer when the
//! objective stalls and more when the other one does, see `lns_stall_rounds`); one restart
//! round (the same chains from the other families' bests, at most `lns_restart_rounds`);
//! simultaneous starts from the best plan (`local_move_batch` candidates, `group_starts` in all); blob-group
//! batches (cache only, `blob_group_orders` in all).

use crate::blob_groups::BlobGroupSearch;
use crate::decode::{BackfillScratch, Decoder};
use crate::families::{Family, PRIORITY_ORDERS, ReplayBudget};
use crate::lns::{ChainOutcome, ChainParams, LnsContext, run_chain};
use crate::orders::{Structure, perturbed_order, regroup_one_task, swaps_or_moves};
use crate::seeded::{below, candidate_rng};
use crate::state::{State, slot};
use crate::{FamilySeeds, fold_constructions, fold_orders, run_batch};
use rayon::prelude::*;
use schedule::Objective;
use schedule::evaluate::{Evaluation, GridInstance, Plan, Scratch, evaluate, evaluate_starts};
use serde::{Deserialize, Deserializer, Serialize};

/// One operator of the adaptive phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    FirstFitOrder,
    DutyOrder,
    OrderMove(Objective, Decoder),
    Lns(Objective),
    LnsRestart(Objective),
    GroupStart(Objective),
    BlobGroup,
}

impl Operator {
    fn name(self) -> &'static str {
        use Decoder::{Backfill, Serial};
        use Objective::{Cache, Gpu};
        match self {
            Operator::FirstFitOrder => "first_fit_order",
            Operator::DutyOrder => "duty_order",
            Operator::OrderMove(Gpu, Serial) => "order_move_gpu/serial",
            Operator::OrderMove(Gpu, Backfill) => "order_move_gpu/backfill",
            Operator::OrderMove(Cache, Serial) => "order_move_cache/serial",
            Operator::OrderMove(Cache, Backfill) => "order_move_cache/backfill",
            Operator::Lns(Gpu) => "lns_gpu",
            Operator::Lns(Cache) => "lns_cache",
            Operator::LnsRestart(Gpu) => "lns_restart_gpu",
            Operator::LnsRestart(Cache) => "lns_restart_cache",
            Operator::GroupStart(Gpu) => "group_start_gpu",
            Operator::GroupStart(Cache) => "group_start_cache",
            Operator::BlobGroup => "blob_group_order",
        }
    }
}

/// The GPU objective's operators, in list order.
const GPU_OPERATORS: [Operator; 7] = [
    Operator::FirstFitOrder,
    Operator::DutyOrder,
    Operator::OrderMove(Objective::Gpu, Decoder::Serial),
    Operator::OrderMove(Objective::Gpu, Decoder::Backfill),
    Operator::Lns(Objective::Gpu),
    Operator::LnsRestart(Objective::Gpu),
    Operator::GroupStart(Objective::Gpu),
];

/// The cache objective's operators, in list order.
const CACHE_OPERATORS: [Operator; 6] = [
    Operator::BlobGroup,
    Operator::OrderMove(Objective::Cache, Decoder::Serial),
    Operator::OrderMove(Objective::Cache, Decoder::Backfill),
    Operator::Lns(Objective::Cache),
    Operator::LnsRestart(Objective::Cache),
    Operator::GroupStart(Objective::Cache),
];

/// One operator's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorStats {
    /// Operator name (`lns_gpu`, `order_move_cache/backfill`, ...).
    #[serde(deserialize_with = "operator_named")]
    pub operator: crate::names::StaticName,
    /// `gpu` or `cache`.
    #[serde(deserialize_with = "objective_named")]
    pub objective: crate::names::StaticName,
    /// Batches it ran.
    pub batches: u64,
    /// Batches after which the objective's best changed.
    pub wins: u64,
}

/// What the adaptive phase did (empty for the seed profile).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdaptiveRecord {
    /// Candidates of the seed phase before it (the extended profile's first
    /// `seed_candidates` candidates are exactly the seed profile's).
    pub seed_candidates: u64,
    /// Candidates it evaluated (neighbourhood moves count one each).
    pub candidates: u64,
    /// Per operator, GPU's then cache's, in list order.
    pub operators: Vec<OperatorStats>,
    /// The operator chosen for each batch, in order.
    #[serde(deserialize_with = "operators_named")]
    pub choices: Vec<&'static str>,
    /// Each time an objective's neighbourhood search stalled and its rounds left moved to
    /// the other objective, in order.
    #[serde(default)]
    pub stalls: Vec<StallRecord>,
}

/// An objective's neighbourhood search declared stalled: `lns_stall_rounds` rounds in a
/// row each improved its best by less than one part in [`STALL_GAIN_PARTS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StallRecord {
    /// The objective that stalled (`gpu` or `cache`).
    #[serde(deserialize_with = "objective_named")]
    pub objective: crate::names::StaticName,
    /// The adaptive batch (0-based) of its last round.
    pub batch: u64,
    /// Its rounds run by then.
    pub rounds: u64,
    /// The rounds it had left (at least 1), given to the other objective (0 when that one
    /// had stalled too).
    pub rounds_moved: u64,
}

/// A neighbourhood-search round that improves its objective's best by less than one part
/// in this many counts as stalled.
pub(crate) const STALL_GAIN_PARTS: u128 = 10_000;

/// The objective names of [`OperatorStats::objective`].
const OBJECTIVE_NAMES: [&str; 2] = ["gpu", "cache"];

/// Every operator's name, GPU's list then cache's.
fn operator_names() -> impl Iterator<Item = &'static str> {
    GPU_OPERATORS
        .iter()
        .chain(CACHE_OPERATORS.iter())
        .map(|op| op.name())
}

/// Read an operator's name back as the static name it was written from.
fn operator_named<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::names::known_name(d, operator_names(), "operator")
}

/// Read a list of operator names back (see [`operator_named`]).
fn operators_named<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|name| crate::names::lookup_name(name, operator_names(), "operator"))
        .collect::<Result<_, _>>()
        .map_err(serde::de::Error::custom)
}

/// Read an objective's name back (`gpu` or `cache`).
fn objective_named<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::names::known_name(d, OBJECTIVE_NAMES, "objective")
}

/// Which operators can still run and where each family's streams stand.
struct Progress {
    first_fit_done: bool,
    duty_done: bool,
    group_starts: u64,
    lns_rounds: [u64; 2],
    /// Rounds received from the other objective when it stalled.
    lns_rounds_gained: [u64; 2],
    /// Stalled rounds in a row.
    lns_stalled: [u32; 2],
    /// Whether the objective's neighbourhood search stalled (it runs no more rounds).
    lns_retired: [bool; 2],
    /// Restart rounds run.
    lns_restarts: [u64; 2],
    order_moves: [u64; 2],
    blob: BlobGroupSearch,
}

impl Progress {
    /// Nothing run yet.
    fn new(blob: BlobGroupSearch) -> Self {
        Progress {
            first_fit_done: false,
            duty_done: false,
            group_starts: 0,
            lns_rounds: [0, 0],
            lns_rounds_gained: [0, 0],
            lns_stalled: [0, 0],
            lns_retired: [false, false],
            lns_restarts: [0, 0],
            order_moves: [0, 0],
            blob,
        }
    }

    fn available(&self, op: Operator, budget: &ReplayBudget) -> bool {
        match op {
            Operator::FirstFitOrder => !self.first_fit_done,
            Operator::DutyOrder => !self.duty_done && budget.duty_orders > 0,
            Operator::OrderMove(..) => true,
            Operator::Lns(o) => !self.lns_retired[slot(o)] && self.lns_rounds_left(o, budget) > 0,
            Operator::LnsRestart(o) => {
                self.lns_restarts[slot(o)] < u64::from(budget.lns_restart_rounds)
            }
            Operator::GroupStart(_) => self.group_starts < u64::from(budget.group_starts),
            Operator::BlobGroup => self.blob.left(budget) > 0,
        }
    }

    /// Rounds the objective's neighbourhood search may still run.
    fn lns_rounds_left(&self, o: Objective, budget: &ReplayBudget) -> u64 {
        let s = slot(o);
        (u64::from(budget.lns_rounds) + self.lns_rounds_gained[s])
            .saturating_sub(self.lns_rounds[s])
    }

    /// Count a finished round of `o` that took its best from `before` to `after` (exact
    /// values); on the `lns_stall_rounds`-th stalled round in a row, retire it and give its
    /// rounds left to the other objective.
    fn lns_round_done(
        &mut self,
        o: Objective,
        before: Option<u128>,
        after: Option<u128>,
        batch: u64,
        budget: &ReplayBudget,
    ) -> Option<StallRecord> {
        let s = slot(o);
        let stalled = match (before, after) {
            (Some(b), Some(a)) => b.saturating_sub(a) * STALL_GAIN_PARTS < b,
            _ => false,
        };
        self.lns_stalled[s] = if stalled { self.lns_stalled[s] + 1 } else { 0 };
        if budget.lns_stall_rounds == 0 || self.lns_stalled[s] < budget.lns_stall_rounds {
            return None;
        }
        let left = self.lns_rounds_left(o, budget);
        if left == 0 {
            return None;
        }
        self.lns_retired[s] = true;
        let other = 1 - s;
        let rounds_moved = if self.lns_retired[other] { 0 } else { left };
        self.lns_rounds_gained[other] += rounds_moved;
        Some(StallRecord {
            objective: OBJECTIVE_NAMES[s],
            batch,
            rounds: self.lns_rounds[s],
            rounds_moved,
        })
    }
}

/// UCB1 over counts: the first untried available operator, else the largest
/// `wins / tries + sqrt(2 ln(total) / tries)` (ties: the earlier).
fn choose(available: &[bool], tries: &[u64], wins: &[u64]) -> Option<usize> {
    let total: u64 = tries.iter().sum();
    let mut best: Option<(usize, f64)> = None;
    for (k, ((&open, &n), &w)) in available.iter().zip(tries).zip(wins).enumerate() {
        if !open {
            continue;
        }
        if n == 0 {
            return Some(k);
        }
        let n = n as f64;
        let score = w as f64 / n + (2.0 * (total.max(1) as f64).ln() / n).sqrt();
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((k, score));
        }
    }
    best.map(|(k, _)| k)
}

/// Run the adaptive phase into `state` (after the seed phase).
pub(super) fn run(
    state: &mut State,
    st: &Structure,
    g: &GridInstance,
    budget: &ReplayBudget,
    seeds: &FamilySeeds,
    pool: &rayon::ThreadPool,
) -> AdaptiveRecord {
    let ctx = LnsContext::new(g, state.deadline);
    let mut progress = Progress::new(BlobGroupSearch::new(seeds.of(Family::BlobGroupOrder)));
    let lists: [&[Operator]; 2] = [&GPU_OPERATORS, &CACHE_OPERATORS];
    let mut tries: [Vec<u64>; 2] = [vec![0; GPU_OPERATORS.len()], vec![0; CACHE_OPERATORS.len()]];
    let mut wins = tries.clone();
    let first_candidate = state.evaluated;
    let mut choices = Vec::new();
    let mut stalls = Vec::new();
    for b in 0..u64::from(budget.adaptive_batches) {
        let objective = if b % 2 == 0 {
            Objective::Gpu
        } else {
            Objective::Cache
        };
        let s = slot(objective);
        let ops = lists[s];
        let available: Vec<bool> = ops
            .iter()
            .map(|&op| progress.available(op, budget))
            .collect();
        let Some(k) = choose(&available, &tries[s], &wins[s]) else {
            continue;
        };
        let before = state.best(objective).map(|f| f.candidate);
        let value_before = state.best(objective).map(|f| f.exact(objective));
        apply(
            ops[k],
            state,
            st,
            g,
            &ctx,
            budget,
            seeds,
            pool,
            &mut progress,
        );
        tries[s][k] += 1;
        if state.best(objective).map(|f| f.candidate) != before {
            wins[s][k] += 1;
        }
        if let Operator::Lns(o) = ops[k] {
            let value_after = state.best(o).map(|f| f.exact(o));
            stalls.extend(progress.lns_round_done(o, value_before, value_after, b, budget));
        }
        choices.push(ops[k].name());
    }
    let mut operators = Vec::new();
    for (s, ops) in lists.iter().enumerate() {
        for (k, op) in ops.iter().enumerate() {
            operators.push(OperatorStats {
                operator: op.name(),
                objective: OBJECTIVE_NAMES[s],
                batches: tries[s][k],
                wins: wins[s][k],
            });
        }
    }
    AdaptiveRecord {
        seed_candidates: first_candidate,
        candidates: state.evaluated - first_candidate,
        operators,
        choices,
        stalls,
    }
}

/// Run one batch of `op`.
#[allow(clippy::too_many_arguments)]
fn apply(
    op: Operator,
    state: &mut State,
    st: &Structure,
    g: &GridInstance,
    ctx: &LnsContext,
    budget: &ReplayBudget,
    seeds: &FamilySeeds,
    pool: &rayon::ThreadPool,
    progress: &mut Progress,
) {
    let batch = u64::from(budget.local_move_batch.max(1));
    match op {
        Operator::FirstFitOrder => {
            progress.first_fit_done = true;
            // The fixed priority orders placed first-fit.
            let e: Vec<(Option<Plan>, Option<Evaluation>)> = pool.install(|| {
                PRIORITY_ORDERS
                    .par_iter()
                    .map_init(Scratch::new, |scratch, name| {
                        let order = st.priority_order(name);
                        let e = crate::lns::first_fit_schedule(g, ctx, &order)
                            .map(|starts| evaluate_starts(g, &starts, scratch));
                        (None, e)
                    })
                    .collect()
            });
            fold_constructions(state, Family::FirstFitOrder, 0, e);
        }
        Operator::DutyOrder => {
            progress.duty_done = true;
            // Even candidates are list schedules, odd ones the same order placed first-fit.
            let dseed = seeds.of(Family::DutyOrder);
            let kp =
                schedule::evaluate::k_prime(g, &(0..g.len() as u32).collect::<Vec<_>>()).max(1);
            let spread = budget.perturbation_spread;
            let total = u64::from(budget.duty_orders);
            let e: Vec<(Option<Plan>, Option<Evaluation>)> = pool.install(|| {
                (0..total)
                    .into_par_iter()
                    .map_init(Scratch::new, |scratch, i| {
                        let mut r = candidate_rng(&dseed, i / 2);
                        let order = st.duty_order(i / 2, kp as usize, spread, &mut r);
                        if i % 2 == 0 {
                            let plan = Plan::from_order(&order);
                            let e = evaluate(g, &plan, scratch);
                            (Some(plan), e)
                        } else {
                            let e = crate::lns::first_fit_schedule(g, ctx, &order)
                                .map(|starts| evaluate_starts(g, &starts, scratch));
                            (None, e)
                        }
                    })
                    .collect()
            });
            fold_constructions(state, Family::DutyOrder, 0, e);
        }
        Operator::OrderMove(objective, decoder) => {
            let family = match objective {
                Objective::Gpu => Family::OrderMoveGpu,
                Objective::Cache => Family::OrderMoveCache,
            };
            let Some(base) = state.best_order(objective) else {
                return;
            };
            let seed = seeds.of(family);
            let spread = budget.perturbation_spread;
            let start = progress.order_moves[slot(objective)];
            progress.order_moves[slot(objective)] = start + batch;
            let orders: Vec<Vec<u32>> = pool.install(|| {
                (start..start + batch)
                    .into_par_iter()
                    .map_init(BackfillScratch::new, |bf, i| {
                        let mut r = candidate_rng(&seed, i);
                        match below(&mut r, 8) {
                            0..=4 => swaps_or_moves(&base, &mut r),
                            5 | 6 => perturbed_order(g, &base, spread, &mut r, bf),
                            _ => regroup_one_task(st, &base, &mut r),
                        }
                    })
                    .collect()
            });
            fold_orders(state, pool, g, family, start, orders, &[decoder]);
        }
        Operator::Lns(objective) => {
            let round = progress.lns_rounds[slot(objective)];
            progress.lns_rounds[slot(objective)] += 1;
            let Some(base) = state.best(objective).map(|b| b.eval.starts.clone()) else {
                return;
            };
            let chains = u64::from(budget.lns_chains);
            let from = LnsRound {
                bases: vec![base],
                first_stream: round * chains,
                tag: format!("r{round}"),
            };
            lns_round(state, g, ctx, budget, seeds, pool, objective, from);
        }
        Operator::LnsRestart(objective) => {
            let restart = progress.lns_restarts[slot(objective)];
            progress.lns_restarts[slot(objective)] += 1;
            let bases: Vec<Vec<i64>> = state
                .elites(objective)
                .iter()
                .map(|f| f.eval.starts.clone())
                .collect();
            if bases.is_empty() {
                return;
            }
            let chains = u64::from(budget.lns_chains);
            let from = LnsRound {
                bases,
                first_stream: RESTART_STREAMS + restart * chains,
                tag: format!("x{restart}"),
            };
            lns_round(state, g, ctx, budget, seeds, pool, objective, from);
        }
        Operator::GroupStart(objective) => {
            let gseed = seeds.of(Family::GroupStart);
            let start = progress.group_starts;
            let end = (start + batch).min(u64::from(budget.group_starts));
            progress.group_starts = end;
            let fallback = Plan::from_order(&st.priority_order("grouped_by_task"));
            let base = state
                .best(objective)
                .and_then(|b| b.plan.clone())
                .unwrap_or(fallback);
            let e = run_batch(pool, g, start..end, |i| {
                st.group_starts(g, &base, i, &mut candidate_rng(&gseed, i))
            });
            fold_constructions(
                state,
                Family::GroupStart,
                start,
                e.into_iter().map(|(p, e)| (Some(p), e)).collect(),
            );
        }
        Operator::BlobGroup => progress.blob.batch(state, st, g, ctx, budget, pool),
    }
}

/// Where a neighbourhood-search round starts its chains.
struct LnsRound {
    /// Chain `c` starts from `bases[c % len]`.
    bases: Vec<Vec<i64>>,
    /// Chain `c` runs on stream `first_stream + c` of the family seed.
    first_stream: u64,
    /// The round's part of its candidates' labels (`r3`: round 3 from the best; `x1`:
    /// restart round 1).
    tag: String,
}

/// The first stream of the restart rounds (far above any round's `round * chains`).
const RESTART_STREAMS: u64 = 1 << 40;

/// One round of the start-time neighbourhood search: `lns_chains` chains in parallel from
/// `from`'s starting schedules, folded in chain order.
#[allow(clippy::too_many_arguments)]
fn lns_round(
    state: &mut State,
    g: &GridInstance,
    ctx: &LnsContext,
    budget: &ReplayBudget,
    seeds: &FamilySeeds,
    pool: &rayon::ThreadPool,
    objective: Objective,
    from: LnsRound,
) {
    let family = match objective {
        Objective::Gpu => Family::LnsGpu,
        Objective::Cache => Family::LnsCache,
    };
    let seed = seeds.of(family);
    let params = ChainParams {
        moves: budget.lns_moves,
        max_removed: budget.lns_max_removed,
        late_acceptance: budget.lns_late_acceptance,
        window_every: match objective {
            Objective::Gpu => budget.lns_window_every_gpu,
            Objective::Cache => budget.lns_window_every_cache,
        },
        kick_after: budget.lns_kick_after,
        kick_removed: budget.lns_kick_removed,
    };
    let chains = u64::from(budget.lns_chains);
    let bases = &from.bases;
    let outcomes: Vec<ChainOutcome> = pool.install(|| {
        (0..chains)
            .into_par_iter()
            .map(|c| {
                let mut r = candidate_rng(&seed, from.first_stream + c);
                let base = &bases[c as usize % bases.len()];
                run_chain(g, ctx, base, objective, params, &mut r)
            })
            .collect()
    });
    let first = state.evaluated;
    let mut points = Vec::new();
    for (c, o) in outcomes.iter().enumerate() {
        let offset = first + c as u64 * u64::from(params.moves);
        for p in &o.archive {
            // found_at_move 0 is the chain's starting schedule, already known.
            if p.found_at_move == 0 {
                continue;
            }
            points.push((
                offset + p.found_at_move - 1,
                format!("{}#{}c{c}m{}", family.as_str(), from.tag, p.found_at_move),
                &p.starts,
            ));
        }
    }
    // Exact values of every point, recomputed from scratch in parallel.
    let evals: Vec<Evaluation> = pool.install(|| {
        points
            .par_iter()
            .map_init(Scratch::new, |scratch, (_, _, starts)| {
                evaluate_starts(g, starts, scratch)
            })
            .collect()
    });
    for o in &outcomes {
        state.evaluated += o.moves;
        state.stat(family).evaluated += o.moves;
        state.stat(family).rejected_deadline += o.infeasible;
    }
    for ((candidate, label, _), eval) in points.into_iter().zip(evals) {
        state.consider(family, None, eval, candidate, label);
    }
    state.record_trace(family);
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::config::{SearchBudget, SearchEffort, SearchProfile};

    fn budget(lns_rounds: u32, lns_stall_rounds: u32) -> ReplayBudget {
        ReplayBudget {
            profile: SearchProfile::Extended,
            effort: SearchEffort::Default,
            counts: SearchBudget {
                lns_rounds,
                lns_stall_rounds,
                ..SearchBudget::default()
            },
        }
    }

    fn progress() -> Progress {
        Progress::new(BlobGroupSearch::new([0; 32]))
    }

    /// Run one round of `o` in `p` that takes the best from `before` to `after`.
    fn round(
        p: &mut Progress,
        b: &ReplayBudget,
        o: Objective,
        before: u128,
        after: u128,
        batch: u64,
    ) -> Option<StallRecord> {
        p.lns_rounds[slot(o)] += 1;
        p.lns_round_done(o, Some(before), Some(after), batch, b)
    }

    #[test]
    fn a_stalled_objective_hands_its_rounds_left_to_the_other() {
        let b = budget(6, 2);
        let mut p = progress();
        let lns = |o| Operator::Lns(o);
        // A gain of one part in 10,000 is not a stall; less is.
        assert_eq!(round(&mut p, &b, Objective::Cache, 10_000, 9_999, 1), None);
        assert_eq!(p.lns_stalled[1], 0);
        assert_eq!(round(&mut p, &b, Objective::Cache, 10_000, 10_000, 3), None);
        assert_eq!(p.lns_stalled[1], 1);
        // A gaining round resets the count.
        assert_eq!(round(&mut p, &b, Objective::Cache, 10_000, 5_000, 5), None);
        assert_eq!(round(&mut p, &b, Objective::Cache, 5_000, 5_000, 7), None);
        let stall = round(&mut p, &b, Objective::Cache, 5_000, 5_000, 9).unwrap();
        assert_eq!(
            stall,
            StallRecord {
                objective: "cache",
                batch: 9,
                rounds: 5,
                rounds_moved: 1,
            }
        );
        assert!(!p.available(lns(Objective::Cache), &b));
        assert_eq!(p.lns_rounds_left(Objective::Gpu, &b), 7);
        // The GPU's own stall after that moves nothing back.
        assert_eq!(round(&mut p, &b, Objective::Gpu, 100, 99, 10), None);
        assert_eq!(round(&mut p, &b, Objective::Gpu, 99, 99, 12), None);
        let stall = round(&mut p, &b, Objective::Gpu, 99, 99, 14).unwrap();
        assert_eq!(
            (stall.objective, stall.rounds, stall.rounds_moved),
            ("gpu", 3, 0)
        );
        assert!(!p.available(lns(Objective::Gpu), &b));
    }

    #[test]
    fn without_a_stall_count_every_round_stays_with_its_objective() {
        let b = budget(3, 0);
        let mut p = progress();
        for k in 0..3 {
            assert_eq!(round(&mut p, &b, Objective::Gpu, 100, 100, k), None);
        }
        assert!(!p.available(Operator::Lns(Objective::Gpu), &b));
        assert_eq!(p.lns_rounds_left(Objective::Cache, &b), 3);
    }
}
