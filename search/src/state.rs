//! The search's running state: the bests per objective under the tie rule, the Pareto
//! front, per-family counts and the trace, folded in candidate order.

use crate::decode::Decoder;
use crate::families::{Family, FamilyStats};
use crate::seeded::beats;
use schedule::Objective;
use schedule::accounting::{cache_hours, gpu_hours};
use schedule::evaluate::{Evaluation, Plan, start_order_of};
use serde::Serialize;

/// A feasible candidate kept as a best.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The plan (priority order, with gangs for simultaneous starts) it was decoded from;
    /// `None` for a start-time schedule (first-fit placements, neighbourhood search).
    pub plan: Option<Plan>,
    /// Its exact evaluation.
    pub eval: Evaluation,
    /// GPU ideal hours.
    pub gpu_h: f64,
    /// Cache ideal hours.
    pub cache_h: f64,
    /// The family that produced it.
    pub family: Family,
    /// Its index among the workload's candidates (0 = FIFO).
    pub candidate: u64,
    /// A readable name (`priority_order:longest_first`, `local_move_gpu#17`, ...).
    pub label: String,
}

impl Found {
    /// Its value on `objective`, hours.
    pub(super) fn hours(&self, objective: Objective) -> f64 {
        match objective {
            Objective::Gpu => self.gpu_h,
            Objective::Cache => self.cache_h,
        }
    }

    /// Its exact value on `objective`: GPU union ns or cache byte-ns.
    pub(super) fn exact(&self, objective: Objective) -> u128 {
        match objective {
            Objective::Gpu => self.eval.gpu_union.max(0) as u128,
            Objective::Cache => self.eval.cache_byte_ns,
        }
    }
}

/// The position of an objective in per-objective pairs (GPU, cache).
pub(super) fn slot(objective: Objective) -> usize {
    match objective {
        Objective::Gpu => 0,
        Objective::Cache => 1,
    }
}

/// The position of a family in [`Family::ALL`].
fn family_index(f: Family) -> usize {
    Family::ALL.iter().position(|&x| x == f).unwrap_or(0)
}

/// One row of the search trace: the best so far of an objective after a batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceRow {
    /// `gpu`, `cache` or `makespan` (the CPU/RAM display criterion).
    pub objective: &'static str,
    /// The family of the batch just folded.
    pub family: Family,
    /// Candidates evaluated so far in this workload.
    pub candidates_evaluated: u64,
    /// Best value so far: hours (for `makespan`, the makespan in hours).
    pub best_so_far_h: f64,
    /// Makespan of that best schedule, seconds.
    pub best_makespan_s: f64,
}

/// Running bests and counts of one workload's search.
pub(super) struct State {
    pub(super) deadline: i64,
    pub(super) gpus: u32,
    pub(super) fifo_gpu_h: f64,
    pub(super) fifo_cache_h: f64,
    pub(super) evaluated: u64,
    pub(super) stats: Vec<FamilyStats>,
    pub(super) trace: Vec<TraceRow>,
    pub(super) fifo: Option<Found>,
    pub(super) fastest: Option<Found>,
    pub(super) best_gpu: Option<Found>,
    pub(super) best_cache: Option<Found>,
    /// Non-dominated (GPU union, cache byte-ns) candidates, in the order found.
    pub(super) front: Vec<Found>,
    /// Per family (in [`Family::ALL`] order), its best schedule on GPU and on cache.
    pub(super) family_best: Vec<[Option<Found>; 2]>,
}

fn joint_value(gpu_h: f64, cache_h: f64, fifo_gpu_h: f64, fifo_cache_h: f64) -> f64 {
    let part = |v: f64, base: f64| if base > 0.0 { v / base } else { 0.0 };
    part(gpu_h, fifo_gpu_h) + part(cache_h, fifo_cache_h)
}

impl State {
    /// An empty state (the first candidate folded, the FIFO, sets the FIFO values).
    pub(super) fn new(gpus: u32) -> Self {
        State {
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
            family_best: vec![[None, None]; Family::ALL.len()],
        }
    }

    /// The best schedule of an objective so far.
    pub(super) fn best(&self, objective: Objective) -> Option<&Found> {
        match objective {
            Objective::Gpu => self.best_gpu.as_ref(),
            Objective::Cache => self.best_cache.as_ref(),
        }
    }

    /// Restart points for `objective`: every family's best on it except the family of the
    /// overall best, best first (ties: family order). Empty before two families have any.
    pub(super) fn elites(&self, objective: Objective) -> Vec<&Found> {
        let Some(best) = self.best(objective) else {
            return Vec::new();
        };
        let mut out: Vec<&Found> = self
            .family_best
            .iter()
            .filter_map(|b| b[slot(objective)].as_ref())
            .filter(|f| f.family != best.family)
            .collect();
        out.sort_by(|a, b| a.hours(objective).total_cmp(&b.hours(objective)));
        out
    }

    /// The order of the best schedule of an objective: the priority order it was decoded
    /// from, else (a start-time schedule) its attempts by start.
    pub(super) fn best_order(&self, objective: Objective) -> Option<Vec<u32>> {
        self.best(objective).map(|b| match &b.plan {
            Some(p) => p.attempt_order(),
            None => start_order_of(&b.eval.starts),
        })
    }

    /// Fold one decoded order (counted here as one candidate).
    pub(super) fn fold_decoded(
        &mut self,
        family: Family,
        order: &[u32],
        decoder: Decoder,
        eval: Option<Evaluation>,
        label: String,
    ) {
        let candidate = self.evaluated;
        self.evaluated += 1;
        self.stat(family).evaluated += 1;
        match (eval, decoder) {
            (Some(e), _) => {
                self.consider(family, Some(Plan::from_order(order)), e, candidate, label)
            }
            (None, Decoder::Serial) => self.stat(family).rejected_cap += 1,
            (None, Decoder::Backfill) => self.stat(family).rejected_deadline += 1,
        }
    }

    pub(super) fn stat(&mut self, f: Family) -> &mut FamilyStats {
        &mut self.stats[family_index(f)]
    }

    fn joint(&self, f: &Found) -> f64 {
        joint_value(f.gpu_h, f.cache_h, self.fifo_gpu_h, self.fifo_cache_h)
    }

    /// Fold one evaluated feasible-or-late candidate (already counted as evaluated).
    pub(super) fn consider(
        &mut self,
        family: Family,
        plan: Option<Plan>,
        eval: Evaluation,
        candidate: u64,
        label: String,
    ) {
        if eval.makespan > self.deadline {
            self.stat(family).rejected_deadline += 1;
            return;
        }
        let found = Found {
            gpu_h: gpu_hours(self.gpus, eval.gpu_union),
            cache_h: cache_hours(eval.cache_byte_ns),
            plan,
            eval,
            family,
            candidate,
            label,
        };
        if self.fifo.is_none() {
            self.fifo_gpu_h = found.gpu_h;
            self.fifo_cache_h = found.cache_h;
            self.fifo = Some(found.clone());
        }
        let mk = found.eval.makespan;
        for objective in [Objective::Gpu, Objective::Cache] {
            let best = &mut self.family_best[family_index(family)][slot(objective)];
            if best.as_ref().is_none_or(|b| {
                beats(
                    found.hours(objective),
                    mk,
                    b.hours(objective),
                    b.eval.makespan,
                )
            }) {
                *best = Some(found.clone());
            }
        }
        let mut improved = false;
        let new_fastest = self.fastest.as_ref().is_none_or(|b| mk < b.eval.makespan);
        let new_gpu = self
            .best_gpu
            .as_ref()
            .is_none_or(|b| beats(found.gpu_h, mk, b.gpu_h, b.eval.makespan));
        let new_cache = self
            .best_cache
            .as_ref()
            .is_none_or(|b| beats(found.cache_h, mk, b.cache_h, b.eval.makespan));
        if new_fastest {
            self.fastest = Some(found.clone());
            improved = true;
        }
        if new_gpu {
            self.best_gpu = Some(found.clone());
            improved = true;
        }
        if new_cache {
            self.best_cache = Some(found.clone());
            improved = true;
        }
        // Pareto front on the exact integers: a point dominated by one stays out, and so
        // does one equal in both to an earlier one unless it is faster (then it replaces
        // it: the joint pick's ties prefer the smaller makespan).
        let key = (
            found.eval.gpu_union,
            found.eval.cache_byte_ns,
            found.eval.makespan,
        );
        let of = |f: &Found| (f.eval.gpu_union, f.eval.cache_byte_ns, f.eval.makespan);
        if !self
            .front
            .iter()
            .any(|f| crate::lns::dominated_by(key, of(f)))
        {
            self.front.retain(|f| !crate::lns::dominated_by(of(f), key));
            self.front.push(found);
            improved = true;
        }
        if improved && candidate > 0 {
            self.stat(family).improvements += 1;
        }
    }

    /// The joint compromise: the front point with the smallest
    /// `gpu/fifo_gpu + cache/fifo_cache` (ties: smaller makespan, then earlier found).
    pub(super) fn best_joint(&self) -> Option<Found> {
        let mut by_candidate: Vec<&Found> = self.front.iter().collect();
        by_candidate.sort_by_key(|f| f.candidate);
        let mut best: Option<&Found> = None;
        for f in by_candidate {
            if best.is_none_or(|b| {
                beats(
                    self.joint(f),
                    f.eval.makespan,
                    self.joint(b),
                    b.eval.makespan,
                )
            }) {
                best = Some(f);
            }
        }
        best.cloned()
    }

    pub(super) fn record_trace(&mut self, family: Family) {
        let rows = [
            (
                "gpu",
                self.best_gpu.as_ref().map(|b| b.gpu_h),
                self.best_gpu.as_ref(),
            ),
            (
                "cache",
                self.best_cache.as_ref().map(|b| b.cache_h),
                self.best_cache.as_ref(),
            ),
            (
                "makespan",
                self.fastest
                    .as_ref()
                    .map(|b| b.eval.makespan as f64 / 3.6e12),
                self.fastest.as_ref(),
            ),
        ];
        let mut out = Vec::new();
        for (objective, value, best) in rows {
            if let (Some(v), Some(b)) = (value, best) {
                out.push(TraceRow {
                    objective,
                    family,
                    candidates_evaluated: self.evaluated,
                    best_so_far_h: v,
                    best_makespan_s: b.eval.makespan as f64 / 1e9,
                });
            }
        }
        self.trace.extend(out);
    }
}
