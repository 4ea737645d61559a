//! LP lower bounds solved with HiGHS (docs/BOUNDS.md, items 5 and 6): a configuration LP for the
//! GPU union and a fluid LP for the cache, both by column generation. Every round is certified by
//! an exact pricing step (Farley's bound for the GPU LP, the Lagrangian bound for the cache LP), so
//! the reported bound is valid whether or not the budget let column generation converge;
//! a bound is only ever the best certified value, never the restricted master's value.
//! The arguments are in docs/BOUNDS.md ("LP bounds").

use crate::strong::BlobBoundParts;
#[cfg(feature = "lp")]
use crate::strong::blob_users;
use model::config::LpBoundsConfig;
use schedule::GridInstance;
use serde::{Deserialize, Serialize};

/// How an LP bound ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LpStatus {
    /// Column generation converged: the bound is the LP optimum (up to solver tolerance).
    Converged,
    /// The round budget ran out first: the bound is the best certified round, still valid.
    BudgetExhausted,
    /// Not solved (disabled in `pipeline.yaml`, or built without the `lp` feature).
    Skipped,
}

impl LpStatus {
    /// The name written to `bounds.parquet` and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            LpStatus::Converged => "converged",
            LpStatus::BudgetExhausted => "budget_exhausted",
            LpStatus::Skipped => "skipped",
        }
    }
}

/// One LP bound and how it was reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LpBound {
    /// How it ended.
    pub status: LpStatus,
    /// Why it was skipped, when it was.
    pub detail: Option<String>,
    /// The certified lower bound, hours (`None` when skipped).
    pub bound_h: Option<f64>,
    /// The last restricted master LP's value, hours: an upper estimate of the LP optimum
    /// (not a bound; reported to show how far the certificate is from convergence).
    pub master_h: Option<f64>,
    /// Column-generation rounds run.
    pub rounds: u32,
    /// Columns in the final restricted master.
    pub columns: usize,
}

impl LpBound {
    /// A skipped bound with its reason.
    pub fn skipped(reason: &str) -> Self {
        LpBound {
            status: LpStatus::Skipped,
            detail: Some(reason.to_string()),
            bound_h: None,
            master_h: None,
            rounds: 0,
            columns: 0,
        }
    }
}

/// Both LP bounds of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LpBounds {
    /// Configuration LP on the GPU union.
    pub gpu: LpBound,
    /// Fluid LP on the cache (the whole cache objective: the LP's blobs plus the per-blob
    /// bounds of the others).
    pub cache: LpBound,
}

/// Relative safety margin taken off every certified bound for floating-point rounding in
/// the certificate's sums (the certificate itself does not depend on the solver's accuracy).
#[cfg(feature = "lp")]
const SAFETY: f64 = 1e-9;

/// The attempts with requests grouped by quota type `(cores, mem)`, in type order.
#[derive(Debug, Clone)]
struct QuotaTypes {
    /// `(cores, mem)` of each type, nano-units.
    quota: Vec<(i64, i64)>,
    /// The members of each type.
    members: Vec<Vec<u32>>,
}

impl QuotaTypes {
    fn of(g: &GridInstance, attempts: &[u32]) -> Self {
        let mut map: std::collections::BTreeMap<(i64, i64), Vec<u32>> = Default::default();
        for &j in attempts {
            map.entry((g.cores[j as usize], g.mem[j as usize]))
                .or_default()
                .push(j);
        }
        QuotaTypes {
            quota: map.keys().copied().collect(),
            members: map.into_values().collect(),
        }
    }
}

/// The best column of the GPU pricing problem: the count vector of a feasible set (K and
/// both caps) with the largest value.
#[derive(Debug, Clone, PartialEq)]
pub struct PricedSet {
    /// An upper bound on the largest dual sum of any feasible set (equal to `value` when
    /// the search finished).
    pub upper: f64,
    /// The dual sum of `counts`.
    pub value: f64,
    /// How many attempts of each quota type the best set takes (the highest duals first).
    pub counts: Vec<usize>,
}

/// Exact pricing over quota types: a depth-first search over how many attempts of each
/// type (the ones with the highest duals) a set takes, pruned by the sum of the best
/// remaining duals. `duals[t]` are type `t`'s positive duals, highest first. Gives up after
/// `node_limit` nodes and then reports an upper bound that ignores the caps.
pub fn price_by_quota_type(
    quota: &[(i64, i64)],
    duals: &[Vec<f64>],
    k: i64,
    cap_cores: i64,
    cap_mem: i64,
    node_limit: u64,
) -> PricedSet {
    let t_count = quota.len();
    let prefix: Vec<Vec<f64>> = duals
        .iter()
        .map(|d| {
            let mut p = vec![0.0];
            for &x in d {
                p.push(p.last().copied().unwrap_or(0.0) + x);
            }
            p
        })
        .collect();
    // suffix[t][n]: sum of the n highest duals over types t.., any caps ignored.
    let mut suffix: Vec<Vec<f64>> = vec![vec![0.0]; t_count + 1];
    for t in (0..t_count).rev() {
        let mut all: Vec<f64> = duals[t..].iter().flatten().copied().collect();
        all.sort_by(|a, b| b.total_cmp(a));
        let mut p = vec![0.0];
        for x in all {
            p.push(p.last().copied().unwrap_or(0.0) + x);
        }
        suffix[t] = p;
    }
    let bound = |t: usize, k_left: i64| -> f64 {
        let s = &suffix[t];
        s[(k_left.max(0) as usize).min(s.len() - 1)]
    };
    struct Search<'a> {
        quota: &'a [(i64, i64)],
        prefix: &'a [Vec<f64>],
        k: i64,
        cap_cores: i64,
        cap_mem: i64,
        nodes: u64,
        limit: u64,
        best: f64,
        best_counts: Vec<usize>,
        counts: Vec<usize>,
    }
    fn dfs(
        s: &mut Search<'_>,
        bound: &dyn Fn(usize, i64) -> f64,
        t: usize,
        used: (i64, i64, i64),
        value: f64,
    ) {
        s.nodes += 1;
        if s.nodes > s.limit {
            return;
        }
        if t == s.quota.len() {
            if value > s.best {
                s.best = value;
                s.best_counts = s.counts.clone();
            }
            return;
        }
        if value + bound(t, s.k - used.0) <= s.best {
            return;
        }
        let (c, m) = s.quota[t];
        let avail = (s.prefix[t].len() - 1) as i64;
        let mut most = avail.min(s.k - used.0);
        if c > 0 {
            most = most.min((s.cap_cores - used.1) / c);
        }
        if m > 0 {
            most = most.min((s.cap_mem - used.2) / m);
        }
        for n in (0..=most.max(0)).rev() {
            s.counts[t] = n as usize;
            let v = value + s.prefix[t][n as usize];
            dfs(
                s,
                bound,
                t + 1,
                (used.0 + n, used.1 + n * c, used.2 + n * m),
                v,
            );
        }
        s.counts[t] = 0;
    }
    let mut s = Search {
        quota,
        prefix: &prefix,
        k,
        cap_cores,
        cap_mem,
        nodes: 0,
        limit: node_limit,
        best: 0.0,
        best_counts: vec![0; t_count],
        counts: vec![0; t_count],
    };
    dfs(&mut s, &bound, 0, (0, 0, 0), 0.0);
    let finished = s.nodes <= s.limit;
    PricedSet {
        upper: if finished {
            s.best
        } else {
            s.best.max(bound(0, k))
        },
        value: s.best,
        counts: s.best_counts,
    }
}

/// The rows of the GPU configuration LP, aggregated by quota type: for type `t` and
/// `k = 1..=k_max(t)`, the `k` longest request unions of type `t` must be covered by instants
/// each holding at most `min(n_t, k)` of them (`n_t`: attempts of type `t` with a pending
/// request). `k_max(t)` is the most attempts of type `t` a feasible set holds; its row
/// carries the type's total.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuLpRows {
    /// `(cores, mem)` of each type, nano-units.
    pub quota: Vec<(i64, i64)>,
    /// `rhs[t][k - 1]`: the sum of the `k` longest request unions of type `t` (the last one:
    /// all of them), seconds.
    pub rhs: Vec<Vec<f64>>,
}

impl GpuLpRows {
    /// The rows of a workload (attempts without requests play no part).
    pub fn of(g: &GridInstance) -> Self {
        let attempts: Vec<u32> = (0..g.len() as u32)
            .filter(|&j| g.request_len[j as usize] > 0)
            .collect();
        let types = QuotaTypes::of(g, &attempts);
        let mut rhs = Vec::with_capacity(types.quota.len());
        for (&(c, m), members) in types.quota.iter().zip(&types.members) {
            let mut req: Vec<i64> = members.iter().map(|&j| g.request_len[j as usize]).collect();
            req.sort_unstable_by(|a, b| b.cmp(a));
            let mut k_max = (req.len() as i64).min(g.concurrency);
            if c > 0 {
                k_max = k_max.min(g.cap_cores / c);
            }
            if m > 0 {
                k_max = k_max.min(g.cap_mem / m);
            }
            let k_max = k_max.max(1) as usize;
            let mut rows = Vec::with_capacity(k_max);
            let mut sum = 0i64;
            for (i, &r) in req.iter().enumerate() {
                sum += r;
                if i + 1 < k_max {
                    rows.push(sum as f64 / 1e9);
                }
            }
            rows.push(sum as f64 / 1e9);
            rhs.push(rows);
        }
        GpuLpRows {
            quota: types.quota,
            rhs,
        }
    }

    /// Coefficient of a column holding `n` attempts of a type in that type's row `k`
    /// (0-based: the row of the `k + 1` longest), `min(n, k + 1)`.
    pub fn coefficient(&self, k: usize, n: usize) -> f64 {
        n.min(k + 1) as f64
    }
}

/// Farley's bound of the GPU configuration LP for duals `y[t][k]` (any nonnegative values):
/// `sum y * rhs / v*`, `v*` the largest dual value of a feasible column; `y / v*` is then
/// dual feasible. A column's value is concave in each `n_t`, so pricing takes the marginal
/// gains `sum_{k >= n} y[t][k]` as the per-type duals of [`price_by_quota_type`]. Returns
/// the bound (seconds of GPU union) and the priced column.
pub fn gpu_farley_bound(
    g: &GridInstance,
    rows: &GpuLpRows,
    y: &[Vec<f64>],
    node_limit: u64,
) -> (f64, PricedSet) {
    let gains: Vec<Vec<f64>> = y
        .iter()
        .map(|yt| {
            let mut gain = vec![0.0; yt.len()];
            let mut acc = 0.0;
            for k in (0..yt.len()).rev() {
                acc += yt[k].max(0.0);
                gain[k] = acc;
            }
            while gain.last().is_some_and(|&x| x <= 0.0) {
                gain.pop();
            }
            gain
        })
        .collect();
    let priced = price_by_quota_type(
        &rows.quota,
        &gains,
        g.concurrency,
        g.cap_cores,
        g.cap_mem,
        node_limit,
    );
    let num: f64 = rows
        .rhs
        .iter()
        .zip(y)
        .flat_map(|(r, yt)| r.iter().zip(yt).map(|(a, b)| a * b.max(0.0)))
        .sum();
    let lb = if priced.upper > 0.0 {
        num / priced.upper
    } else {
        0.0
    };
    (lb, priced)
}

#[cfg(feature = "lp")]
mod solve {
    //! The HiGHS side: restricted master LPs and the cache pricing MIP.
    use super::*;
    use highs::{ColProblem, HighsModelStatus, Model, Row, Sense};
    use std::collections::BTreeMap;
    use std::num::NonZeroU32;

    /// Exploration limit of the GPU pricing search (nodes; a fraction of a second). With
    /// many quota types a search that hits it certifies with the caps-free upper bound
    /// (valid, weaker) and its column is still added.
    const GPU_PRICING_NODES: u64 = 5_000_000;

    fn quiet(model: &mut Model, cfg: &LpBoundsConfig) {
        model.make_quiet();
        model.set_threads(NonZeroU32::MIN);
        model.set_option("random_seed", 0);
        model.set_option(
            "simplex_iteration_limit",
            cfg.simplex_iterations.min(i32::MAX as u32) as i32,
        );
    }

    /// Solve a restricted master; a solver failure or an unusable status skips the bound
    /// with the reason (an iteration limit still gives duals, which any certificate accepts).
    fn solve_master(model: Model, which: &str) -> Result<highs::SolvedModel, LpBound> {
        let solved = model
            .try_solve()
            .map_err(|e| LpBound::skipped(&format!("HiGHS failed on the {which} master: {e:?}")))?;
        if matches!(
            solved.status(),
            HighsModelStatus::Optimal | HighsModelStatus::ReachedIterationLimit
        ) {
            Ok(solved)
        } else {
            Err(LpBound::skipped(&format!(
                "HiGHS ended the {which} master with status {:?}",
                solved.status()
            )))
        }
    }

    /// The GPU configuration LP: minimise the total length of instants, each holding a
    /// feasible set of attempts with pending requests, such that every attempt's request
    /// seconds are covered (aggregated by quota type, see [`GpuLpRows`]).
    pub(super) fn gpu_config_lp(g: &GridInstance, gpus: u32, cfg: &LpBoundsConfig) -> LpBound {
        let lp_rows = GpuLpRows::of(g);
        // `+ 0.0` writes an empty sum (`-0.0` in Rust) as 0.
        let h = |s: f64| f64::from(gpus) * s / 3600.0 + 0.0;
        if lp_rows.quota.is_empty() {
            return LpBound {
                status: LpStatus::Converged,
                detail: None,
                bound_h: Some(0.0),
                master_h: Some(0.0),
                rounds: 0,
                columns: 0,
            };
        }
        let mut pb = ColProblem::default();
        let rows: Vec<Vec<Row>> = lp_rows
            .rhs
            .iter()
            .map(|r| r.iter().map(|&v| pb.add_row(v..)).collect())
            .collect();
        let factors = |counts: &[usize]| -> Vec<(Row, f64)> {
            let mut f = Vec::new();
            for (t, &n) in counts.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                for (k, &r) in rows[t].iter().enumerate() {
                    f.push((r, lp_rows.coefficient(k, n)));
                }
            }
            f
        };
        // Start with each type alone at its most.
        let mut columns = 0usize;
        for (t, r) in lp_rows.rhs.iter().enumerate() {
            let mut counts = vec![0usize; lp_rows.quota.len()];
            counts[t] = r.len();
            pb.add_column(1.0, 0.., factors(&counts));
            columns += 1;
        }
        let mut model = pb.optimise(Sense::Minimise);
        quiet(&mut model, cfg);
        let mut best_lb = 0.0f64;
        let mut master: Option<f64>;
        let mut rounds = 0u32;
        let mut status = LpStatus::BudgetExhausted;
        loop {
            let solved = match solve_master(model, "GPU") {
                Ok(s) => s,
                Err(skipped) => return skipped,
            };
            master = Some(solved.objective_value());
            let duals = solved.get_solution().dual_rows().to_vec();
            let mut y: Vec<Vec<f64>> = Vec::with_capacity(rows.len());
            let mut at = 0usize;
            for r in &rows {
                y.push(duals[at..at + r.len()].iter().map(|v| v.max(0.0)).collect());
                at += r.len();
            }
            let (lb, priced) = gpu_farley_bound(g, &lp_rows, &y, GPU_PRICING_NODES);
            best_lb = best_lb.max(lb);
            rounds += 1;
            tracing::debug!(
                rounds,
                lb_s = lb,
                master_s = solved.objective_value(),
                v = priced.upper,
                columns,
                "GPU configuration LP round"
            );
            if priced.value <= 1.0 + 1e-9 && priced.upper <= 1.0 + 1e-9 {
                status = LpStatus::Converged;
                break;
            }
            if rounds >= cfg.rounds {
                break;
            }
            let mut next: Model = solved.into();
            next.add_col(1.0, 0.., factors(&priced.counts));
            columns += 1;
            model = next;
        }
        LpBound {
            status,
            detail: None,
            bound_h: Some(h(best_lb * (1.0 - SAFETY))),
            master_h: master.map(h),
            rounds,
            columns,
        }
    }

    /// A cache LP column: the open LP blobs and the running count per class.
    type FluidColumnKey = (Vec<usize>, Vec<(usize, u32)>);

    /// Attempts grouped by (the LP's blobs they use, cores, mem).
    struct FluidClass {
        blobs: Vec<usize>,
        cores: i64,
        mem: i64,
        members: Vec<u32>,
        work_s: f64,
    }

    /// The cache fluid LP over the heaviest shared blobs (see docs/BOUNDS.md), plus the
    /// per-blob bounds of every other blob. `fifo_starts` seeds the master with the FIFO
    /// schedule's segments. Into `blob_open_s`: per LP blob (blob index, ascending), its
    /// open seconds in the last restricted master's solution (left empty when no master
    /// was solved).
    pub(super) fn cache_fluid_lp(
        g: &GridInstance,
        deadline: i64,
        per_blob: &[BlobBoundParts],
        fifo_starts: &[i64],
        cfg: &LpBoundsConfig,
        blob_open_s: &mut Vec<(u32, f64)>,
    ) -> LpBound {
        let users = blob_users(g);
        let gib = |b: usize| g.blob_bytes[b] as f64 / model::GIB;
        let pb_s = |b: usize| per_blob[b].best() / 1e9;
        // The LP's blobs: those with at least `min_users` users, heaviest (GiB x per-blob
        // bound) first.
        let min_users = (cfg.min_users as usize).max(2);
        let mut shared: Vec<usize> = (0..users.len())
            .filter(|&b| users[b].len() >= min_users)
            .collect();
        shared.sort_by(|&a, &b| {
            (gib(b) * pb_s(b))
                .total_cmp(&(gib(a) * pb_s(a)))
                .then(a.cmp(&b))
        });
        shared.truncate(cfg.max_blobs as usize);
        shared.sort_unstable();
        let in_lp: std::collections::HashMap<usize, usize> =
            shared.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let outside: f64 = (0..users.len())
            .filter(|b| !in_lp.contains_key(b))
            .map(|b| gib(b) * pb_s(b))
            .sum();
        let inside_per_blob: f64 = shared.iter().map(|&b| gib(b) * pb_s(b)).sum();
        // `+ 0.0` writes an empty sum (`-0.0` in Rust) as 0.
        let h = |gib_s: f64| gib_s / 3600.0 + 0.0;
        if shared.is_empty() {
            return LpBound {
                status: LpStatus::Converged,
                detail: None,
                bound_h: Some(h(outside * (1.0 - SAFETY))),
                master_h: Some(h(outside)),
                rounds: 0,
                columns: 0,
            };
        }
        // Classes.
        let mut class_of: BTreeMap<(Vec<usize>, i64, i64), usize> = BTreeMap::new();
        let mut classes: Vec<FluidClass> = Vec::new();
        let mut attempt_class = Vec::with_capacity(g.len());
        for j in 0..g.len() {
            let mut bl: Vec<usize> = g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]]
                .iter()
                .filter_map(|&b| in_lp.get(&(b as usize)).copied())
                .collect();
            bl.sort_unstable();
            bl.dedup();
            let key = (bl.clone(), g.cores[j], g.mem[j]);
            let q = *class_of.entry(key).or_insert_with(|| {
                classes.push(FluidClass {
                    blobs: bl,
                    cores: g.cores[j],
                    mem: g.mem[j],
                    members: Vec::new(),
                    work_s: 0.0,
                });
                classes.len() - 1
            });
            classes[q].members.push(j as u32);
            classes[q].work_s += g.duration[j] as f64 / 1e9;
            attempt_class.push(q);
        }
        let d_s = deadline as f64 / 1e9;
        let total_gib: f64 = shared.iter().map(|&b| gib(b)).sum();
        let big = 4.0 * total_gib + 1.0;

        let mut pb = ColProblem::default();
        let cov: Vec<Row> = classes.iter().map(|c| pb.add_row(c.work_s..)).collect();
        let open: Vec<Row> = shared.iter().map(|&b| pb.add_row(pb_s(b)..)).collect();
        let horizon = pb.add_row(..=d_s);
        let mut columns = 0usize;
        // Artificial columns keep every master feasible; they are not part of the problem
        // and play no role in the certificate.
        // The LP blobs (positions in `shared`) of each column, artificial ones empty.
        let mut column_blobs: Vec<Vec<usize>> = Vec::new();
        for r in cov.iter().chain(&open) {
            pb.add_column(big, 0.., [(*r, 1.0)]);
            columns += 1;
            column_blobs.push(Vec::new());
        }
        // The FIFO schedule's segments: (open LP blobs, running count per class).
        let mut segs: BTreeMap<FluidColumnKey, f64> = BTreeMap::new();
        {
            let mut events: Vec<(i64, bool, usize)> = Vec::new();
            for (j, (&s, &d)) in fifo_starts.iter().zip(&g.duration).enumerate() {
                events.push((s, true, j));
                events.push((s + d, false, j));
            }
            events.sort_unstable_by_key(|e| (e.0, e.1, e.2));
            let mut running: BTreeMap<usize, u32> = BTreeMap::new();
            let mut last = 0i64;
            let mut i = 0;
            while i < events.len() {
                let t = events[i].0;
                if t > last && !running.is_empty() {
                    let mut blobs: Vec<usize> = running
                        .keys()
                        .flat_map(|&q| classes[q].blobs.iter().copied())
                        .collect();
                    blobs.sort_unstable();
                    blobs.dedup();
                    let r: Vec<(usize, u32)> = running.iter().map(|(&q, &n)| (q, n)).collect();
                    *segs.entry((blobs, r)).or_insert(0.0) += (t - last) as f64 / 1e9;
                }
                while i < events.len() && events[i].0 == t {
                    let (_, is_start, j) = events[i];
                    let q = attempt_class[j];
                    if is_start {
                        *running.entry(q).or_insert(0) += 1;
                    } else if let Some(n) = running.get_mut(&q) {
                        *n -= 1;
                        if *n == 0 {
                            running.remove(&q);
                        }
                    }
                    i += 1;
                }
                last = t;
            }
        }
        let column_of = |blobs: &[usize], r: &[(usize, u32)]| {
            let cost: f64 = blobs.iter().map(|&i| gib(shared[i])).sum();
            let mut f: Vec<(Row, f64)> = r.iter().map(|&(q, n)| (cov[q], f64::from(n))).collect();
            f.extend(blobs.iter().map(|&i| (open[i], 1.0)));
            f.push((horizon, 1.0));
            (cost, f)
        };
        for (blobs, r) in segs.keys() {
            let (cost, f) = column_of(blobs, r);
            pb.add_column(cost, 0.., f);
            columns += 1;
            column_blobs.push(blobs.clone());
        }
        let mut model = pb.optimise(Sense::Minimise);
        quiet(&mut model, cfg);
        let mut best_lb = f64::NEG_INFINITY;
        let mut best_duals: Option<(Vec<f64>, Vec<f64>)> = None;
        let mut master: Option<f64>;
        let mut open_s = vec![0.0f64; shared.len()];
        let mut rounds = 0u32;
        let mut status = LpStatus::BudgetExhausted;
        loop {
            let solved = match solve_master(model, "cache") {
                Ok(s) => s,
                Err(skipped) => return skipped,
            };
            master = Some(solved.objective_value());
            let solution = solved.get_solution();
            open_s.iter_mut().for_each(|v| *v = 0.0);
            for (x, blobs) in solution.columns().iter().zip(&column_blobs) {
                for &i in blobs {
                    open_s[i] += x.max(0.0);
                }
            }
            let duals = solution.dual_rows().to_vec();
            let pi: Vec<f64> = duals[..classes.len()].iter().map(|v| v.max(0.0)).collect();
            let sigma: Vec<f64> = duals[classes.len()..classes.len() + shared.len()]
                .iter()
                .map(|v| v.max(0.0))
                .collect();
            let mu = (-duals[classes.len() + shared.len()]).max(0.0);
            // Lagrangian certificate at any pi, sigma >= 0: mu' = the exact pricing bound.
            let certify = |pi: &[f64], sigma: &[f64]| -> Option<(f64, FluidColumn)> {
                let priced = price_fluid(g, &classes, &shared, pi, sigma, &gib, cfg)?;
                let lb = classes
                    .iter()
                    .zip(pi)
                    .map(|(c, p)| c.work_s * p)
                    .sum::<f64>()
                    + shared
                        .iter()
                        .zip(sigma)
                        .map(|(&b, s)| pb_s(b) * s)
                        .sum::<f64>()
                    - d_s * priced.upper.max(0.0);
                Some((lb, priced))
            };
            // Reduced profit of a column at the master's own duals.
            let profit = |col: &FluidColumn| -> f64 {
                col.counts
                    .iter()
                    .map(|&(q, n)| pi[q] * f64::from(n))
                    .sum::<f64>()
                    + col
                        .blobs
                        .iter()
                        .map(|&i| sigma[i] - gib(shared[i]))
                        .sum::<f64>()
            };
            let tol = 1e-7 * (1.0 + mu.abs());
            rounds += 1;
            // Dual smoothing (Wentges): price first halfway between the best-certified duals
            // and the master's; its column is kept when it also improves the master.
            let mut priced = None;
            if let Some((bp, bs)) = &best_duals {
                let sp: Vec<f64> = pi.iter().zip(bp).map(|(a, b)| 0.5 * (a + b)).collect();
                let ss: Vec<f64> = sigma.iter().zip(bs).map(|(a, b)| 0.5 * (a + b)).collect();
                let Some((lb, col)) = certify(&sp, &ss) else {
                    return LpBound::skipped("HiGHS failed on a cache pricing MIP");
                };
                if lb > best_lb {
                    best_lb = lb;
                    best_duals = Some((sp, ss));
                }
                if profit(&col) > mu + tol {
                    priced = Some(col);
                }
            }
            let priced = match priced {
                Some(col) => col,
                None => {
                    let Some((lb, col)) = certify(&pi, &sigma) else {
                        return LpBound::skipped("HiGHS failed on a cache pricing MIP");
                    };
                    if lb > best_lb || best_duals.is_none() {
                        best_lb = best_lb.max(lb);
                        best_duals = Some((pi.clone(), sigma.clone()));
                    }
                    if col.value <= mu + tol && col.upper <= mu + tol {
                        status = LpStatus::Converged;
                        break;
                    }
                    col
                }
            };
            tracing::debug!(
                rounds,
                best_lb_gib_s = best_lb,
                master = solved.objective_value(),
                mu,
                columns,
                "cache fluid LP round"
            );
            if rounds >= cfg.rounds {
                break;
            }
            let mut next: Model = solved.into();
            let (cost, f) = column_of(&priced.blobs, &priced.counts);
            next.add_col(cost, 0.., f);
            columns += 1;
            column_blobs.push(priced.blobs.clone());
            model = next;
        }
        blob_open_s.clear();
        blob_open_s.extend(shared.iter().zip(&open_s).map(|(&b, &t)| (b as u32, t)));
        let lp_part = best_lb.max(inside_per_blob);
        LpBound {
            status,
            detail: None,
            bound_h: Some(h((outside + lp_part) * (1.0 - SAFETY))),
            master_h: master.map(|m| h(outside + m)),
            rounds,
            columns,
        }
    }

    /// The best column of the cache pricing problem.
    struct FluidColumn {
        /// Upper bound on the best reduced profit (the MIP's dual bound).
        upper: f64,
        /// The profit of the column found.
        value: f64,
        /// Open LP blobs (indices into the LP's blob list).
        blobs: Vec<usize>,
        /// Running count per class.
        counts: Vec<(usize, u32)>,
    }

    /// Exact pricing by a MIP: choose open blobs `y_b` and integer running counts `r_q`
    /// (a class runs only when all its blobs are open) within K and both caps, maximising
    /// `sum_q pi_q r_q + sum_b (sigma_b - GiB_b) y_b`.
    fn price_fluid(
        g: &GridInstance,
        classes: &[FluidClass],
        shared: &[usize],
        pi: &[f64],
        sigma: &[f64],
        gib: &dyn Fn(usize) -> f64,
        cfg: &LpBoundsConfig,
    ) -> Option<FluidColumn> {
        let mut pb = ColProblem::default();
        let k_row = pb.add_row(..=g.concurrency as f64);
        // Caps in quota units of 1e-9 are scaled to whole units for the MIP's numerics.
        let c_row = pb.add_row(..=g.cap_cores as f64 / 1e9);
        let m_row = pb.add_row(..=g.cap_mem as f64 / 1e9);
        let active: Vec<usize> = (0..classes.len()).filter(|&q| pi[q] > 0.0).collect();
        let mut link_rows: Vec<Vec<Row>> = Vec::with_capacity(active.len());
        for &q in &active {
            let rows: Vec<Row> = classes[q]
                .blobs
                .iter()
                .map(|_| pb.add_row(..=0.0))
                .collect();
            link_rows.push(rows);
        }
        for (a, &q) in active.iter().enumerate() {
            let c = &classes[q];
            let n = c.members.len() as f64;
            let mut f = vec![
                (k_row, 1.0),
                (c_row, c.cores as f64 / 1e9),
                (m_row, c.mem as f64 / 1e9),
            ];
            f.extend(link_rows[a].iter().map(|&r| (r, 1.0)));
            pb.add_integer_column(pi[q], 0.0..=n, f);
        }
        // Link rows: r_q - n_q y_i <= 0 for every LP blob i of class q.
        let mut y_factors: Vec<Vec<(Row, f64)>> = vec![Vec::new(); shared.len()];
        for (a, &q) in active.iter().enumerate() {
            let n = classes[q].members.len() as f64;
            for (&i, &r) in classes[q].blobs.iter().zip(&link_rows[a]) {
                y_factors[i].push((r, -n));
            }
        }
        for i in 0..shared.len() {
            pb.add_integer_column(sigma[i] - gib(shared[i]), 0.0..=1.0, y_factors[i].clone());
        }
        let mut model = pb.optimise(Sense::Maximise);
        model.make_quiet();
        model.set_threads(NonZeroU32::MIN);
        model.set_option("random_seed", 0);
        model.set_option("mip_rel_gap", 0.0);
        model.set_option("mip_abs_gap", 0.0);
        model.set_option("mip_heuristic_run_feasibility_jump", false);
        model.set_option(
            "mip_max_nodes",
            cfg.pricing_nodes.min(i32::MAX as u32) as i32,
        );
        let solved = model.try_solve().ok()?;
        let sol = solved.get_solution();
        let cols = sol.columns();
        let value_of = |x: &[f64]| -> f64 {
            let mut v = 0.0;
            for (a, &q) in active.iter().enumerate() {
                v += pi[q] * x[a].round();
            }
            for i in 0..shared.len() {
                v += (sigma[i] - gib(shared[i])) * x[active.len() + i].round();
            }
            v
        };
        let (value, blobs, counts) = if cols.len() == active.len() + shared.len() {
            let blobs: Vec<usize> = (0..shared.len())
                .filter(|&i| cols[active.len() + i] > 0.5)
                .collect();
            let counts: Vec<(usize, u32)> = active
                .iter()
                .enumerate()
                .filter(|(a, _)| cols[*a] > 0.5)
                .map(|(a, &q)| (q, cols[a].round() as u32))
                .collect();
            (value_of(cols), blobs, counts)
        } else {
            (0.0, Vec::new(), Vec::new())
        };
        let dual_bound = match solved.status() {
            HighsModelStatus::Optimal => solved
                .double_info_value(c"mip_dual_bound")
                .unwrap_or(solved.objective_value()),
            _ => solved.double_info_value(c"mip_dual_bound").ok()?,
        };
        if !dual_bound.is_finite() {
            return None;
        }
        let upper = dual_bound.max(value) + 1e-9 * (1.0 + dual_bound.abs());
        Some(FluidColumn {
            upper,
            value,
            blobs,
            counts,
        })
    }
}

/// Both LP bounds of a workload (skipped with a reason when disabled or not built).
pub fn lp_bounds(
    g: &GridInstance,
    gpus: u32,
    deadline: i64,
    per_blob: &[BlobBoundParts],
    fifo_starts: &[i64],
    cfg: &LpBoundsConfig,
) -> LpBounds {
    lp_bounds_with_shares(g, gpus, deadline, per_blob, fifo_starts, cfg).0
}

/// [`lp_bounds`], and the cache LP's share of each of its blobs: (blob index, seconds the
/// blob is open in the last restricted master's solution), by blob index; with the other
/// blobs' per-blob bounds they add up to the cache LP's `master_h` (empty when skipped).
pub fn lp_bounds_with_shares(
    g: &GridInstance,
    gpus: u32,
    deadline: i64,
    per_blob: &[BlobBoundParts],
    fifo_starts: &[i64],
    cfg: &LpBoundsConfig,
) -> (LpBounds, Vec<(u32, f64)>) {
    let mut shares = Vec::new();
    if !cfg.enabled {
        let why = "disabled by search.lp_bounds.enabled";
        let bounds = LpBounds {
            gpu: LpBound::skipped(why),
            cache: LpBound::skipped(why),
        };
        return (bounds, shares);
    }
    #[cfg(feature = "lp")]
    let bounds = LpBounds {
        gpu: solve::gpu_config_lp(g, gpus, cfg),
        cache: solve::cache_fluid_lp(g, deadline, per_blob, fifo_starts, cfg, &mut shares),
    };
    #[cfg(not(feature = "lp"))]
    let bounds = {
        let _ = (g, gpus, deadline, per_blob, fifo_starts, &mut shares);
        let why = "built without the `lp` feature (HiGHS)";
        LpBounds {
            gpu: LpBound::skipped(why),
            cache: LpBound::skipped(why),
        }
    };
    (bounds, shares)
}
