//! The seeded schedule search for the GPU and cache objectives (and the fastest schedule for
//! CPU/RAM display): every candidate family of SPEC 2.3, then issue 7's (first-fit orders,
//! duty orders, blob-group lanes and the start-time neighbourhood search of `lns`),
//! evaluated exactly, in parallel with results independent of the thread count; and the
//! Pareto front of GPU vs cache with the joint compromise chosen from it.
//!
//! Reproducibility: one ChaCha8 stream (`ChaCha8Rng::seed_from_u64(search.seed)`) for the
//! whole replay. Each workload, in `search.order`, draws one 32-byte seed per random family
//! from it, in a fixed order; candidate `i` of a family uses ChaCha8 with that seed on
//! stream `i` (`set_stream(i)`). Candidates are evaluated in parallel but folded into the
//! running bests in candidate order, so the result never depends on the thread count.

mod blob_groups;
mod families;
mod orders;
mod state;

pub use crate::seeded::{TIE_RELATIVE, beats};
pub use families::{Family, FamilyStats, PRIORITY_ORDERS, ReplayBudget};
pub use state::{Found, TraceRow};

use crate::error::ReplayError;
use crate::evaluate::{Evaluation, GridInstance, Plan, Scratch, evaluate, evaluate_starts};
use crate::input::WorkloadInstance;
use crate::lns::{ChainParams, LnsContext, Objective, run_chain};
use crate::seeded::{candidate_rng, word_pos};
use blob_groups::blob_group_search;
use orders::{Structure, local_move};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::RngCore;
use rayon::prelude::*;
use serde::Serialize;
use state::State;

/// Most candidates evaluated in one parallel batch (bounds memory).
const MAX_BATCH: usize = 256;

/// How the workload consumed the shared RNG stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Best GPU and cache hours after the seed's families only.
    pub seed_best: (f64, f64),
    /// Per-family counts, in [`Family::ALL`] order.
    pub stats: Vec<FamilyStats>,
    /// Best so far per objective after each batch.
    pub trace: Vec<TraceRow>,
    /// RNG consumption.
    pub rng: RngRecord,
    /// Candidates evaluated in total.
    pub evaluated: u64,
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

/// Search one workload. `shared` is the replay's one RNG stream; this workload draws its
/// family seeds from it. The instance's quotas must already fit the caps.
pub fn search_workload(
    inst: &WorkloadInstance,
    g: &GridInstance,
    budget: &ReplayBudget,
    shared: &mut ChaCha8Rng,
    pool: &rayon::ThreadPool,
) -> Result<SearchOutcome, ReplayError> {
    inst.check_quotas_fit()?;
    let word_pos_before = word_pos(shared);
    // The seed's families draw first (in SPEC order), then issue 7's.
    let random_families = [
        Family::Perturbation,
        Family::TaskGrouping,
        Family::GroupStart,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
        Family::DutyOrder,
        Family::BlobGroupOrder,
        Family::LnsGpu,
        Family::LnsCache,
    ];
    let mut seeds = Vec::new();
    for f in random_families {
        let mut s = [0u8; 32];
        shared.fill_bytes(&mut s);
        seeds.push((f, s));
    }
    let seed_of = |f: Family| {
        seeds
            .iter()
            .find(|(x, _)| *x == f)
            .map(|(_, s)| *s)
            .unwrap_or([0u8; 32])
    };
    let rng_record = RngRecord {
        word_pos_before,
        word_pos_after: word_pos(shared),
        family_seeds: seeds
            .iter()
            .map(|(f, s)| (*f, s.iter().map(|b| format!("{b:02x}")).collect()))
            .collect(),
    };

    let st = Structure::new(inst, g);
    let gpus = inst.caps.gpus;
    let mut state = State {
        deadline: i64::MAX,
        gpus,
        fifo_gpu_h: 0.0,
        fifo_cache_h: 0.0,
        evaluated: 0,
        stats: Family::ALL
            .iter()
            .map(|&family| FamilyStats {
                family,
                evaluated: 0,
                rejected_deadline: 0,
                rejected_cap: 0,
                improvements: 0,
            })
            .collect(),
        trace: Vec::new(),
        fifo: None,
        fastest: None,
        best_gpu: None,
        best_cache: None,
        front: Vec::new(),
    };

    // Priority orders; FIFO first, which sets the deadline.
    let mut scratch = Scratch::new();
    let fifo_plan = Plan::from_order(&st.priority_order("fifo"));
    let fifo_eval = evaluate(g, &fifo_plan, &mut scratch);
    state.deadline = fifo_eval.as_ref().map_or(0, |e| e.makespan);
    let others: Vec<&str> = PRIORITY_ORDERS[1..].to_vec();
    let mut batch = vec![(fifo_plan, fifo_eval)];
    batch.extend(run_batch(pool, g, 0..others.len() as u64, |i| {
        Plan::from_order(&st.priority_order(others[i as usize]))
    }));
    let labels = PRIORITY_ORDERS
        .iter()
        .map(|o| format!("priority_order:{o}"))
        .collect();
    state.absorb(Family::PriorityOrder, labels, batch);

    // Fixed-count families from independent per-candidate streams.
    let chunked =
        |state: &mut State, family: Family, count: u32, make: &(dyn Fn(u64) -> Plan + Sync)| {
            let mut start = 0u64;
            while start < u64::from(count) {
                let end = (start + MAX_BATCH as u64).min(u64::from(count));
                let batch = run_batch(pool, g, start..end, make);
                let labels = (start..end)
                    .map(|i| format!("{}#{i}", family.as_str()))
                    .collect();
                state.absorb(family, labels, batch);
                start = end;
            }
        };
    let pseed = seed_of(Family::Perturbation);
    let spread = budget.perturbation_spread;
    chunked(
        &mut state,
        Family::Perturbation,
        budget.perturbations,
        &|i| {
            let mut r = candidate_rng(&pseed, i);
            Plan::from_order(&st.perturbed(i, &mut r, spread))
        },
    );
    let tseed = seed_of(Family::TaskGrouping);
    chunked(
        &mut state,
        Family::TaskGrouping,
        budget.task_groupings,
        &|i| {
            let mut r = candidate_rng(&tseed, i);
            Plan::from_order(&st.task_grouping(i, &mut r))
        },
    );
    let gseed = seed_of(Family::GroupStart);
    let base_cache = state.best_cache.as_ref().and_then(|b| b.plan.clone());
    let base_gpu = state.best_gpu.as_ref().and_then(|b| b.plan.clone());
    let fallback = Plan::from_order(&st.priority_order("grouped_by_task"));
    chunked(&mut state, Family::GroupStart, budget.group_starts, &|i| {
        let mut r = candidate_rng(&gseed, i);
        let base = if i % 2 == 0 { &base_cache } else { &base_gpu };
        st.group_starts(g, base.as_ref().unwrap_or(&fallback), i, &mut r)
    });

    // Local moves: hill climbing in batches from the current best of each objective.
    let window = (2 * g.concurrency.max(1)) as usize;
    for (family, objective_is_gpu) in [
        (Family::LocalMoveGpu, true),
        (Family::LocalMoveCache, false),
    ] {
        let seed = seed_of(family);
        let batch_size = u64::from(budget.local_move_batch.max(1));
        let mut start = 0u64;
        while start < u64::from(budget.local_moves) {
            let end = (start + batch_size).min(u64::from(budget.local_moves));
            let best = if objective_is_gpu {
                &state.best_gpu
            } else {
                &state.best_cache
            };
            let base = best
                .as_ref()
                .and_then(|b| b.plan.clone())
                .unwrap_or_else(|| fallback.clone());
            let batch = run_batch(pool, g, start..end, |i| {
                let mut r = candidate_rng(&seed, i);
                local_move(&base, window, &mut r)
            });
            let labels = (start..end)
                .map(|i| format!("{}#{i}", family.as_str()))
                .collect();
            state.absorb(family, labels, batch);
            start = end;
        }
    }

    let seed_best = (
        state.best_gpu.as_ref().map_or(0.0, |b| b.gpu_h),
        state.best_cache.as_ref().map_or(0.0, |b| b.cache_h),
    );

    // The fixed priority orders placed first-fit (backfilling): far shorter makespans than
    // their list schedules, hence smaller GPU unions.
    let ctx = LnsContext::new(g, state.deadline);
    let batch: Vec<(Option<Plan>, Option<Evaluation>)> = pool.install(|| {
        PRIORITY_ORDERS
            .par_iter()
            .map_init(Scratch::new, |scratch, name| {
                let order = st.priority_order(name);
                let e = crate::lns::first_fit_schedule(g, &ctx, &order)
                    .map(|starts| evaluate_starts(g, &starts, scratch));
                (None, e)
            })
            .collect()
    });
    fold_constructions(&mut state, Family::FirstFitOrder, 0, batch);

    // Duty orders (GPU): attempts of similar request duty run together; even candidates
    // are list schedules, odd ones the same order placed first-fit (backfilling).
    let dseed = seed_of(Family::DutyOrder);
    let kp = crate::bounds::k_prime(g, &(0..g.len() as u32).collect::<Vec<_>>()).max(1);
    let mut start = 0u64;
    let total = u64::from(budget.duty_orders);
    while start < total {
        let end = (start + MAX_BATCH as u64).min(total);
        let batch: Vec<(Option<Plan>, Option<Evaluation>)> = pool.install(|| {
            (start..end)
                .into_par_iter()
                .map_init(Scratch::new, |scratch, i| {
                    let mut r = candidate_rng(&dseed, i / 2);
                    let order = st.duty_order(i / 2, kp as usize, spread, &mut r);
                    if i % 2 == 0 {
                        let plan = Plan::from_order(&order);
                        let e = evaluate(g, &plan, scratch);
                        (Some(plan), e)
                    } else {
                        let e = crate::lns::first_fit_schedule(g, &ctx, &order)
                            .map(|starts| evaluate_starts(g, &starts, scratch));
                        (None, e)
                    }
                })
                .collect()
        });
        fold_constructions(&mut state, Family::DutyOrder, start, batch);
        start = end;
    }

    // Blob group orders (cache): first batch fixed and random group orders, then the group
    // order is searched from the family's best.
    blob_group_search(
        &mut state,
        &st,
        g,
        &ctx,
        budget,
        seed_of(Family::BlobGroupOrder),
        pool,
    );

    // Start-time neighbourhood search from the best of each objective.
    for (family, objective) in [
        (Family::LnsGpu, Objective::Gpu),
        (Family::LnsCache, Objective::Cache),
    ] {
        let seed = seed_of(family);
        let params = ChainParams {
            moves: budget.lns_moves,
            max_removed: budget.lns_max_removed,
            late_acceptance: budget.lns_late_acceptance,
        };
        for round in 0..u64::from(budget.lns_rounds) {
            let best = match objective {
                Objective::Gpu => state.best_gpu.as_ref(),
                Objective::Cache => state.best_cache.as_ref(),
            };
            let Some(base) = best.map(|b| b.eval.starts.clone()) else {
                break;
            };
            let chains = u64::from(budget.lns_chains);
            let outcomes: Vec<crate::lns::ChainOutcome> = pool.install(|| {
                (0..chains)
                    .into_par_iter()
                    .map(|c| {
                        let mut r = candidate_rng(&seed, round * chains + c);
                        run_chain(g, &ctx, &base, objective, params, &mut r)
                    })
                    .collect()
            });
            let first = state.evaluated;
            let mut points = Vec::new();
            for (c, o) in outcomes.iter().enumerate() {
                let offset = first + c as u64 * u64::from(params.moves);
                for p in &o.archive {
                    // found_at_move 0 is the round's starting schedule, already known.
                    if p.found_at_move == 0 {
                        continue;
                    }
                    points.push((
                        offset + p.found_at_move - 1,
                        format!("{}#r{round}c{c}m{}", family.as_str(), p.found_at_move),
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
    }

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
    ) {
        (Some(fifo), Some(fastest), Some(best_gpu), Some(best_cache), Some(best_joint)) => {
            Ok(SearchOutcome {
                fifo,
                fastest,
                best_gpu,
                best_cache,
                best_joint,
                front: state.front,
                seed_best,
                stats: state.stats,
                trace: state.trace,
                rng: rng_record,
                evaluated: state.evaluated,
            })
        }
        // Quotas were checked to fit, so the FIFO plan always schedules.
        _ => Err(ReplayError::FifoMismatch {
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
