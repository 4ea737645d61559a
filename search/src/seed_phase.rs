//! The seed profile: the study's method, and the first phase of the extended profile (the
//! same candidates, the same random draws, so the extended profile's best can never be
//! worse). Every order is decoded by both decoders, serial first, then backfilling:
//!
//! 1. the fixed priority orders ([`PRIORITY_ORDERS`]; FIFO serial is candidate 0 and sets
//!    the deadline D);
//! 2. `random_orders` uniformly random orders;
//! 3. `task_groupings` task-group orders (five fixed ones, then random orders of the task
//!    groups);
//! 4. `perturbations` re-sequencings of the best order under random duration perturbations
//!    (even ones from the best GPU order, odd ones from the best cache order);
//! 5. `local_moves` orders with one to four swaps or moves of the best GPU order, then as
//!    many from the best cache order.
//!
//! Steps 4 and 5 run in batches of `local_move_batch` orders, each batch generated from the
//! bests as they stand before it (hill climbing).

use crate::decode::{BackfillScratch, Decoder};
use crate::families::{Family, PRIORITY_ORDERS, ReplayBudget};
use crate::orders::{Structure, perturbed_order, random_order, swaps_or_moves};
use crate::seeded::candidate_rng;
use crate::state::State;
use crate::{FamilySeeds, MAX_BATCH, fold_orders};
use schedule::Objective;
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};

/// Run the seed profile's candidates into `state` (empty on entry).
pub(super) fn run(
    state: &mut State,
    st: &Structure,
    g: &GridInstance,
    budget: &ReplayBudget,
    seeds: &FamilySeeds,
    pool: &rayon::ThreadPool,
) {
    // 1. Priority orders; FIFO serial first, which sets the deadline.
    let orders: Vec<Vec<u32>> = PRIORITY_ORDERS
        .iter()
        .map(|name| st.priority_order(name))
        .collect();
    let fifo = evaluate(g, &Plan::from_order(&orders[0]), &mut Scratch::new());
    state.deadline = fifo.as_ref().map_or(0, |e| e.makespan);
    let pairs: Vec<(usize, Decoder)> = (0..orders.len())
        .flat_map(|k| Decoder::BOTH.iter().map(move |&d| (k, d)))
        .skip(1)
        .collect();
    let rest = crate::decode_all(pool, g, state.deadline, &orders, &pairs);
    let family = Family::PriorityOrder;
    state.fold_decoded(
        family,
        &orders[0],
        Decoder::Serial,
        fifo,
        format!("{}:{}/serial", family.as_str(), PRIORITY_ORDERS[0]),
    );
    for (&(k, decoder), eval) in pairs.iter().zip(rest) {
        let label = format!(
            "{}:{}/{}",
            family.as_str(),
            PRIORITY_ORDERS[k],
            decoder.as_str()
        );
        state.fold_decoded(family, &orders[k], decoder, eval, label);
    }
    state.record_trace(family);

    // 2, 3. Random orders and task-group orders, from per-candidate streams.
    let n = g.len();
    let fixed_count =
        |state: &mut State, family: Family, count: u32, make: &dyn Fn(u64) -> Vec<u32>| {
            let mut start = 0u64;
            while start < u64::from(count) {
                let end = (start + MAX_BATCH as u64 / 2).min(u64::from(count));
                let orders: Vec<Vec<u32>> = (start..end).map(make).collect();
                fold_orders(state, pool, g, family, start, orders, &Decoder::BOTH);
                start = end;
            }
        };
    let rseed = seeds.of(Family::RandomOrder);
    fixed_count(state, Family::RandomOrder, budget.random_orders, &|i| {
        random_order(n, &mut candidate_rng(&rseed, i))
    });
    let tseed = seeds.of(Family::TaskGrouping);
    fixed_count(state, Family::TaskGrouping, budget.task_groupings, &|i| {
        st.task_grouping(i, &mut candidate_rng(&tseed, i))
    });

    // 4. Perturbations of the best orders, batch by batch.
    let batch = u64::from(budget.local_move_batch.max(1));
    let pseed = seeds.of(Family::Perturbation);
    let spread = budget.perturbation_spread;
    let mut start = 0u64;
    let total = u64::from(budget.perturbations);
    while start < total {
        let end = (start + batch).min(total);
        let (Some(gpu), Some(cache)) = (
            state.best_order(Objective::Gpu),
            state.best_order(Objective::Cache),
        ) else {
            break;
        };
        let mut bf = BackfillScratch::new();
        let orders: Vec<Vec<u32>> = (start..end)
            .map(|i| {
                let base = if i % 2 == 0 { &gpu } else { &cache };
                perturbed_order(g, base, spread, &mut candidate_rng(&pseed, i), &mut bf)
            })
            .collect();
        fold_orders(
            state,
            pool,
            g,
            Family::Perturbation,
            start,
            orders,
            &Decoder::BOTH,
        );
        start = end;
    }

    // 5. One to four swaps or moves from the best order of each objective.
    for (family, objective) in [
        (Family::LocalMoveGpu, Objective::Gpu),
        (Family::LocalMoveCache, Objective::Cache),
    ] {
        let seed = seeds.of(family);
        let total = u64::from(budget.local_moves);
        let mut start = 0u64;
        while start < total {
            let end = (start + batch).min(total);
            let Some(base) = state.best_order(objective) else {
                break;
            };
            let orders: Vec<Vec<u32>> = (start..end)
                .map(|i| swaps_or_moves(&base, &mut candidate_rng(&seed, i)))
                .collect();
            fold_orders(state, pool, g, family, start, orders, &Decoder::BOTH);
            start = end;
        }
    }
}
