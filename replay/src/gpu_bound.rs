//! The GPU pattern bound (issue 19): a lower bound on the GPU union that sees how request
//! patterns can interleave, from the exact cross-correlations of every pair of attempts'
//! requests. Per attempt `i`, a Lagrangian relaxation of "at every instant of `i`'s life the
//! partners running beside it fit the capacity" caps the request overlap `i` can get from all
//! partners together (`X_i`); Jensen's inequality on `i`'s own requests then gives
//! `union >= sum_i w_i req_i^2 / (w_i req_i + X_i)`. The argument is docs/BOUNDS.md, item 7.
//!
//! Every multiplier gives a valid cap, so neither the grid of multipliers nor the budget can
//! make the bound invalid: an attempt whose partner sweeps do not fit the budget keeps the
//! request-time cap `X_i <= cap_i req_i`, with which the sum is the energy bound of item 3.

use crate::bounds::k_prime;
use crate::evaluate::GridInstance;
use model::config::PatternBoundConfig;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Relative safety margin taken off the bound for floating-point rounding in its sums.
const SAFETY: f64 = 1e-9;

/// How the pattern bound ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternStatus {
    /// Every attempt's partners were swept.
    Complete,
    /// The event budget ran out: some attempts keep the request-time cap (still valid).
    BudgetExhausted,
    /// The budget reached attempts holding less than `min_swept_share` of the request
    /// time: not swept, request-time caps for all (still valid).
    BelowMinShare,
    /// Not computed (`enabled: false`).
    Skipped,
}

/// How the attempts are weighted: `w_j` and the capacity the partners of one attempt share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    /// `w_j = 1`; partners of `i` at once: at most `K' - 1`.
    Count,
    /// `w_j = cores_j`; partners' cores: at most `min(C - cores_i, K' - 1 largest)`.
    Cores,
    /// `w_j = mem_j`; partners' GiB: at most `min(M - mem_i, K' - 1 largest)`.
    Mem,
}

impl Weighting {
    /// Every weighting, in report order.
    pub const ALL: [Weighting; 3] = [Weighting::Count, Weighting::Cores, Weighting::Mem];
}

/// The pattern bound of one workload and how it was reached (all counts deterministic).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternBound {
    /// How it ended.
    pub status: PatternStatus,
    /// The bound, GPU-hours (the largest over the weightings; 0 when skipped).
    pub bound_h: f64,
    /// The weighting that gave it.
    pub weighting: Weighting,
    /// The bound under each weighting of [`Weighting::ALL`], GPU-hours.
    pub by_weighting_h: [f64; 3],
    /// The same sum with every attempt at its request-time cap (the energy bounds of item
    /// 3), GPU-hours, best weighting: what the patterns add is `bound_h` over this.
    pub request_time_h: f64,
    /// Attempts with requests.
    pub attempts: usize,
    /// Attempts whose partners were swept exactly (the rest keep the request-time cap).
    pub attempts_swept: usize,
    /// Breakpoints swept.
    pub pair_events: u64,
    /// Share of the request time held by the attempts the budget reaches (1 when complete;
    /// compared with `min_swept_share` when partial).
    pub reachable_share: f64,
}

impl PatternBound {
    /// A skipped bound (`enabled: false`, or not computed).
    pub fn skipped() -> Self {
        PatternBound {
            status: PatternStatus::Skipped,
            bound_h: 0.0,
            weighting: Weighting::Count,
            by_weighting_h: [0.0; 3],
            request_time_h: 0.0,
            attempts: 0,
            attempts_swept: 0,
            pair_events: 0,
            reachable_share: 0.0,
        }
    }
}

/// Attempt `j`'s requests as `(start, end)` offsets, ns.
fn requests(g: &GridInstance, j: usize) -> impl Iterator<Item = (i64, i64)> + '_ {
    (g.request_first[j]..g.request_first[j + 1]).map(|k| (g.request_start[k], g.request_end[k]))
}

/// Requests of `j` (how many), for the event count of a pair.
fn request_count(g: &GridInstance, j: usize) -> u64 {
    (g.request_first[j + 1] - g.request_first[j]) as u64
}

/// The three pieces of the relative shift `tau = s_j - s_i` (partner `j` in `i`'s frame)
/// on which the lifetime overlap `L(tau)` is linear and the instants `0` and `d_i - 1 ns` of
/// `i`'s life are covered alike (docs/BOUNDS.md, item 7):
/// `[-d_j, h1]` (`j` covers `i`'s first instant, `L = tau + d_j`),
/// `[h1, h2]` (`L = min(d_i, d_j)`; when `d_j > d_i`, `j` covers both ends of `i`),
/// `[h2, d_i]` (`j` covers `i`'s last instant, `L = d_i - tau`);
/// `h1 = min(0, d_i - d_j)`, `h2 = max(0, d_i - d_j)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairPieces {
    /// Upper concave hull of the cross-correlation's vertices `(tau, c)` on the first piece.
    first: Vec<(i64, i64)>,
    /// Largest cross-correlation on the middle piece.
    middle: i64,
    /// Upper concave hull on the last piece.
    last: Vec<(i64, i64)>,
}

impl PairPieces {
    /// The upper concave hull of `(tau, c)` on the first piece, left to right.
    pub fn first(&self) -> &[(i64, i64)] {
        &self.first
    }

    /// The largest `c` on the middle piece.
    pub fn middle(&self) -> i64 {
        self.middle
    }

    /// The upper concave hull of `(tau, c)` on the last piece, left to right.
    pub fn last(&self) -> &[(i64, i64)] {
        &self.last
    }

    /// The same pair seen from the partner's frame (`tau -> -tau`: first and last pieces
    /// swap, each mirrored; the hull of a mirror image is the mirror image of the hull).
    pub fn mirrored(&self) -> PairPieces {
        let flip = |h: &[(i64, i64)]| h.iter().rev().map(|&(t, c)| (-t, c)).collect();
        PairPieces {
            first: flip(&self.last),
            middle: self.middle,
            last: flip(&self.first),
        }
    }
}

/// Push `(x, y)` onto an upper concave hull built left to right.
fn hull_push(h: &mut Vec<(i64, i64)>, p: (i64, i64)) {
    if let Some(&(x, y)) = h.last()
        && x == p.0
    {
        if p.1 > y {
            h.pop();
        } else {
            return;
        }
    }
    while h.len() >= 2 {
        let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
        // Drop b when it lies on or below the segment a-p.
        let cross = i128::from(b.0 - a.0) * i128::from(p.1 - a.1)
            - i128::from(b.1 - a.1) * i128::from(p.0 - a.0);
        if cross >= 0 {
            h.pop();
        } else {
            break;
        }
    }
    h.push(p);
}

/// Reusable buffers of [`pair_pieces_with`] (the breakpoint keys of one pair, the radix
/// sort's second buffer and its digit counts).
#[derive(Debug, Default)]
pub struct PairScratch {
    keys: Vec<i64>,
    buf: Vec<i64>,
    counts: Vec<u32>,
}

/// Sort `keys` by least-significant-digit radix passes through `buf`: 11-bit digits of
/// `key - min`, as many passes as the range needs, a pass skipped when one digit value holds
/// every key. The sorted order of integers is unique, so this is exactly `sort_unstable`'s
/// result (a few linear passes instead of `log2(len)` levels of comparisons).
fn radix_sort(keys: &mut Vec<i64>, buf: &mut Vec<i64>, counts: &mut Vec<u32>) {
    const BITS: u32 = 11;
    const BUCKETS: usize = 1 << BITS;
    let n = keys.len();
    if n < 64 {
        keys.sort_unstable();
        return;
    }
    let (lo, hi) = keys
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), &k| (a.min(k), b.max(k)));
    let digits = |k: i64| k.wrapping_sub(lo) as u64;
    let bits = 64 - digits(hi).leading_zeros();
    let passes = bits.div_ceil(BITS) as usize;
    counts.clear();
    counts.resize(passes * BUCKETS, 0);
    for &k in keys.iter() {
        let x = digits(k);
        for p in 0..passes {
            counts[p * BUCKETS + ((x >> (p as u32 * BITS)) as usize & (BUCKETS - 1))] += 1;
        }
    }
    buf.clear();
    buf.resize(n, 0);
    let mut in_keys = true;
    for p in 0..passes {
        let c = &mut counts[p * BUCKETS..(p + 1) * BUCKETS];
        if c.iter().any(|&x| x as usize == n) {
            continue;
        }
        let mut sum = 0u32;
        for x in c.iter_mut() {
            let v = *x;
            *x = sum;
            sum += v;
        }
        let (src, dst) = if in_keys {
            (&keys[..], &mut buf[..])
        } else {
            (&buf[..], &mut keys[..])
        };
        let shift = p as u32 * BITS;
        for &k in src {
            let d = (digits(k) >> shift) as usize & (BUCKETS - 1);
            dst[c[d] as usize] = k;
            c[d] += 1;
        }
        in_keys = !in_keys;
    }
    if !in_keys {
        std::mem::swap(keys, buf);
    }
}

/// The exact cross-correlation `c(tau) = |R_i ∩ (R_j + tau)|` of two attempts' requests
/// (sorted, disjoint; in ns), summarised on the three pieces of [`PairPieces`]. `c` is
/// piecewise linear: each pair of requests adds a trapezoid with 4 breakpoints, so its
/// maximum of `c(tau) + a tau` over a piece lies at a breakpoint or a piece end.
pub fn pair_pieces(ri: &[(i64, i64)], di: i64, rj: &[(i64, i64)], dj: i64) -> PairPieces {
    pair_pieces_with(&mut PairScratch::default(), ri, di, rj, dj)
}

/// [`pair_pieces`] with reusable buffers. The trapezoid of requests `(p, q)` and `(u, v)`
/// has slope `+1` from `p - v` and from `q - u`, `-1` from `p - u` and from `q - v` (the
/// middle two of the four, in either order). Each breakpoint is one key `2 t + s` (`s = 1`
/// for a `-1`), so one array holds both kinds and, radix-sorted, groups them by `t` (the
/// keys are integers: their sorted order is the one any sort gives).
pub fn pair_pieces_with(
    scratch: &mut PairScratch,
    ri: &[(i64, i64)],
    di: i64,
    rj: &[(i64, i64)],
    dj: i64,
) -> PairPieces {
    let keys = &mut scratch.keys;
    keys.clear();
    keys.reserve(4 * ri.len() * rj.len());
    for &(p, q) in ri {
        for &(u, v) in rj {
            keys.extend([2 * (p - v), 2 * (q - u), 2 * (p - u) + 1, 2 * (q - v) + 1]);
        }
    }
    radix_sort(keys, &mut scratch.buf, &mut scratch.counts);
    let keys = &scratch.keys;
    let h1 = 0.min(di - dj);
    let h2 = 0.max(di - dj);
    // The piece ends are vertices too (zero slope change).
    let ends = [-dj, h1, h2, di];
    let mut out = PairPieces::default();
    let (mut k, mut e) = (0usize, 0usize);
    let (mut slope, mut val, mut last_t) = (0i64, 0i64, -dj);
    loop {
        // Next breakpoint (`>> 1` floors, so it recovers `t` of negative keys too).
        let mut t = if k < keys.len() {
            keys[k] >> 1
        } else {
            i64::MAX
        };
        if e < ends.len() {
            t = t.min(ends[e]);
        }
        if t == i64::MAX {
            break;
        }
        val += slope * (t - last_t);
        last_t = t;
        while k < keys.len() && keys[k] >> 1 == t {
            slope += 1 - 2 * (keys[k] & 1);
            k += 1;
        }
        while e < ends.len() && ends[e] == t {
            e += 1;
        }
        if t <= h1 {
            hull_push(&mut out.first, (t, val));
        }
        if (h1..=h2).contains(&t) {
            out.middle = out.middle.max(val);
        }
        if t >= h2 {
            hull_push(&mut out.last, (t, val));
        }
    }
    out
}

/// `max over the hull of c + a tau`.
fn hull_max(h: &[(i64, i64)], a: f64) -> f64 {
    h.iter()
        .map(|&(t, c)| c as f64 + a * t as f64)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// One partner's terms for multiplier `alpha`: `sup (c - alpha L)` on each piece, ns.
#[derive(Debug, Clone, Copy)]
struct Terms {
    first: f64,
    middle: f64,
    last: f64,
    /// `d_j > d_i`: on the middle piece `j` covers both ends of `i`'s life.
    longer: bool,
    w: f64,
}

impl Terms {
    fn of(p: &PairPieces, di: i64, dj: i64, alpha: f64, w: f64) -> Self {
        Terms {
            first: hull_max(&p.first, -alpha) - alpha * dj as f64,
            middle: p.middle as f64 - alpha * di.min(dj) as f64,
            last: hull_max(&p.last, alpha) - alpha * di as f64,
            longer: dj > di,
            w,
        }
    }

    /// The partner's term with point multipliers `g0` (first instant) and `g1` (last).
    fn value(&self, g0: f64, g1: f64) -> f64 {
        let mid = if self.longer {
            self.middle - g0 - g1
        } else {
            self.middle
        };
        0f64.max(self.first - g0).max(mid).max(self.last - g1)
    }
}

/// The smallest `g >= 0` with `sum of w over {diff > g} <= cap`: the minimiser of
/// `cap g + sum w max(diff - g, 0)` (convex, piecewise linear).
fn weighted_threshold(mut items: Vec<(f64, f64)>, cap: f64) -> f64 {
    items.sort_unstable_by(|x, y| y.0.total_cmp(&x.0));
    let mut acc = 0.0;
    for (d, w) in items {
        if d <= 0.0 {
            return 0.0;
        }
        acc += w;
        if acc > cap {
            return d;
        }
    }
    0.0
}

/// `min over (g0, g1) >= 0` (a few exact coordinate steps from 0) of the Lagrangian cap
/// `cap (alpha d_i + g0 + g1) + sum_j w_j term_j(g0, g1)`. Any `(g0, g1)` gives a valid
/// cap, so stopping early only weakens it.
fn lagrangian_cap(terms: &[Terms], cap: f64, alpha: f64, di: i64) -> f64 {
    let total = |g0: f64, g1: f64| -> f64 {
        cap * (alpha * di as f64 + g0 + g1)
            + terms.iter().map(|t| t.w * t.value(g0, g1)).sum::<f64>()
    };
    let (mut g0, mut g1) = (0.0f64, 0.0f64);
    let mut best = total(g0, g1);
    // One end's multiplier with the other's fixed (`first`: g0 for the first piece, else g1
    // for the last; the two are mirror images): term = max(A - g, B).
    let side = |g_other: f64, first: bool| -> f64 {
        let items: Vec<(f64, f64)> = terms
            .iter()
            .map(|t| {
                let (near, far) = if first {
                    (t.first, t.last)
                } else {
                    (t.last, t.first)
                };
                let (a, b) = if t.longer {
                    (near.max(t.middle - g_other), 0f64.max(far - g_other))
                } else {
                    (near, 0f64.max(t.middle).max(far - g_other))
                };
                (a - b, t.w)
            })
            .collect();
        weighted_threshold(items, cap)
    };
    for _ in 0..2 {
        g0 = side(g1, true);
        g1 = side(g0, false);
        best = best.min(total(g0, g1));
    }
    best
}

/// Weights and per-attempt partner capacities of a weighting (`cap[i]`: the most weight the
/// other attempts running at one instant of `i`'s life can have).
fn weights(g: &GridInstance, weighting: Weighting, k_prime: i64) -> (Vec<f64>, Vec<f64>) {
    let n = g.len();
    let (w, cap_total): (Vec<i64>, Option<i64>) = match weighting {
        Weighting::Count => (vec![1; n], None),
        Weighting::Cores => (g.cores.clone(), Some(g.cap_cores)),
        Weighting::Mem => (g.mem.clone(), Some(g.cap_mem)),
    };
    let mut sorted = w.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let others = (k_prime - 1).max(0) as usize;
    let cap = (0..n)
        .map(|i| {
            // The K' - 1 largest weights other than i's own.
            let mut top: i128 = sorted.iter().take(others + 1).map(|&x| i128::from(x)).sum();
            if sorted.len() > others {
                // Drop i's own weight if it is among them, else the (K')-th largest.
                let kth = sorted[others];
                top -= i128::from(if w[i] >= kth { w[i] } else { kth });
            } else {
                top -= i128::from(w[i]);
            }
            let mut c = top as f64;
            if let Some(total) = cap_total {
                c = c.min((total - w[i]).max(0) as f64);
            }
            c
        })
        .collect();
    (w.iter().map(|&x| x as f64).collect(), cap)
}

/// Per attempt, the caps on the request overlap it can get from all its partners together,
/// `X_i <= cap[i]` (weighted: `sum_j w_j |R_i ∩ R_j|` in weight x ns), for every weighting
/// of [`Weighting::ALL`], for the attempts of `swept` (every other attempt: `cap_i req_i`).
pub fn partner_overlap_caps(g: &GridInstance, swept: &[bool], alpha_steps: u32) -> [Vec<f64>; 3] {
    let n = g.len();
    let kp = k_prime(g, &(0..n as u32).collect::<Vec<_>>());
    let ws: Vec<(Vec<f64>, Vec<f64>)> = Weighting::ALL
        .iter()
        .map(|&wt| weights(g, wt, kp))
        .collect();
    let reqs: Vec<Vec<(i64, i64)>> = (0..n).map(|j| requests(g, j).collect()).collect();
    let alphas: Vec<f64> = (0..=alpha_steps)
        .map(|k| 0.5 * f64::from(k) / f64::from(alpha_steps.max(1)))
        .collect();
    // Each unordered pair is swept once: by the lower-indexed attempt when both are swept,
    // else by the swept one; the other frame is its mirror image.
    let own: Vec<Vec<(usize, PairPieces)>> = (0..n)
        .into_par_iter()
        .map(|i| {
            if !swept[i] || g.request_len[i] == 0 {
                return Vec::new();
            }
            let mut scratch = PairScratch::default();
            (0..n)
                .filter(|&j| j != i && g.request_len[j] > 0 && !(swept[j] && j < i))
                .map(|j| {
                    let p = pair_pieces_with(
                        &mut scratch,
                        &reqs[i],
                        g.duration[i],
                        &reqs[j],
                        g.duration[j],
                    );
                    (j, p)
                })
                .collect()
        })
        .collect();
    let rows: Vec<[f64; 3]> = (0..n)
        .into_par_iter()
        .map(|i| {
            let trivial = |x: usize| ws[x].1[i] * g.request_len[i] as f64;
            let mut caps = [trivial(0), trivial(1), trivial(2)];
            if !swept[i] || g.request_len[i] == 0 {
                return caps;
            }
            let di = g.duration[i];
            let mirrored: Vec<(usize, PairPieces)> = (0..i)
                .filter(|&j| swept[j] && g.request_len[j] > 0)
                .filter_map(|j| {
                    let row = &own[j];
                    row.binary_search_by_key(&i, |x| x.0)
                        .ok()
                        .map(|k| (j, row[k].1.mirrored()))
                })
                .collect();
            let partners: Vec<(usize, &PairPieces)> = mirrored
                .iter()
                .chain(own[i].iter())
                .map(|(j, p)| (*j, p))
                .collect();
            for &alpha in &alphas {
                for (x, (w, cap)) in ws.iter().enumerate() {
                    let terms: Vec<Terms> = partners
                        .iter()
                        .map(|(j, p)| Terms::of(p, di, g.duration[*j], alpha, w[*j]))
                        .collect();
                    caps[x] = caps[x].min(lagrangian_cap(&terms, cap[i], alpha, di));
                }
            }
            caps
        })
        .collect();
    let mut out: [Vec<f64>; 3] = Default::default();
    for r in rows {
        for x in 0..3 {
            out[x].push(r[x]);
        }
    }
    out
}

/// `sum_i w_i req_i^2 / (w_i req_i + X_i)`, ns (attempts with `w_i = 0` or no requests add 0).
fn jensen_sum(g: &GridInstance, w: &[f64], caps: &[f64]) -> f64 {
    (0..g.len())
        .map(|i| {
            let r = g.request_len[i] as f64;
            let den = w[i] * r + caps[i];
            if w[i] > 0.0 && r > 0.0 && den > 0.0 {
                w[i] * r * r / den
            } else {
                0.0
            }
        })
        .sum()
}

/// The pattern bound of a workload (GPU-hours) within the configured budget. Attempts are
/// swept in order of request time (longest first, then index) while the running count of
/// breakpoints (`4 x` requests of `i` x requests of each partner) stays within the budget.
pub fn pattern_bound(g: &GridInstance, gpus: u32, cfg: &PatternBoundConfig) -> PatternBound {
    if !cfg.enabled {
        return PatternBound::skipped();
    }
    let n = g.len();
    let with_req: Vec<usize> = (0..n).filter(|&j| g.request_len[j] > 0).collect();
    let total_req: u64 = with_req.iter().map(|&j| request_count(g, j)).sum();
    let mut order = with_req.clone();
    order.sort_by_key(|&j| (std::cmp::Reverse(g.request_len[j]), j));
    let mut swept = vec![false; n];
    let mut events = 0u64;
    let mut status = PatternStatus::Complete;
    // Requests of the attempts swept so far: their pairs with `i` are already counted.
    let mut swept_req = 0u64;
    for &i in &order {
        let row = 4 * request_count(g, i) * (total_req - request_count(g, i) - swept_req);
        if events + row > cfg.pair_events {
            status = PatternStatus::BudgetExhausted;
            continue;
        }
        events += row;
        swept_req += request_count(g, i);
        swept[i] = true;
    }
    let kp = k_prime(g, &(0..n as u32).collect::<Vec<_>>());
    let h = |ns: f64| f64::from(gpus) * ns * (1.0 - SAFETY) / 3.6e12;
    let total: i64 = g.request_len.iter().sum();
    let reached: i64 = (0..n).filter(|&i| swept[i]).map(|i| g.request_len[i]).sum();
    let reachable_share = if total > 0 {
        reached as f64 / total as f64
    } else {
        1.0
    };
    if status == PatternStatus::BudgetExhausted && reachable_share < cfg.min_swept_share {
        swept.iter_mut().for_each(|s| *s = false);
        events = 0;
        status = PatternStatus::BelowMinShare;
    }
    let caps = partner_overlap_caps(g, &swept, cfg.alpha_steps);
    let mut by = [0.0f64; 3];
    let mut trivial = 0.0f64;
    for (x, &wt) in Weighting::ALL.iter().enumerate() {
        let (w, cap) = weights(g, wt, kp);
        by[x] = h(jensen_sum(g, &w, &caps[x]));
        let triv: Vec<f64> = (0..n).map(|i| cap[i] * g.request_len[i] as f64).collect();
        trivial = trivial.max(h(jensen_sum(g, &w, &triv)));
    }
    let best = (0..3).max_by(|&a, &b| by[a].total_cmp(&by[b])).unwrap_or(0);
    PatternBound {
        status,
        bound_h: by[best],
        weighting: Weighting::ALL[best],
        by_weighting_h: by,
        request_time_h: trivial,
        attempts: with_req.len(),
        attempts_swept: swept.iter().filter(|&&s| s).count(),
        pair_events: events,
        reachable_share,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cross-correlation at `tau` by brute force.
    fn corr(ri: &[(i64, i64)], rj: &[(i64, i64)], tau: i64) -> i64 {
        let mut s = 0;
        for &(p, q) in ri {
            for &(u, v) in rj {
                s += (q.min(v + tau) - p.max(u + tau)).max(0);
            }
        }
        s
    }

    #[test]
    fn pieces_hold_the_exact_maxima() {
        let ri = [(1, 3), (5, 9), (12, 13)];
        let rj = [(0, 2), (4, 5), (6, 11)];
        let (di, dj) = (14, 12);
        let p = pair_pieces(&ri, di, &rj, dj);
        let (h1, h2) = (0.min(di - dj), 0.max(di - dj));
        for a in [-0.3f64, 0.0, 0.2, 0.5] {
            let brute = |lo: i64, hi: i64, a: f64| -> f64 {
                (lo..=hi)
                    .map(|t| corr(&ri, &rj, t) as f64 + a * t as f64)
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            assert!((hull_max(&p.first, a) - brute(-dj, h1, a)).abs() < 1e-9);
            assert!((hull_max(&p.last, a) - brute(h2, di, a)).abs() < 1e-9);
        }
        let mid = (h1..=h2).map(|t| corr(&ri, &rj, t)).max().unwrap();
        assert_eq!(p.middle, mid);
    }

    #[test]
    fn the_partner_frame_is_the_mirror_image() {
        let ri = [(1, 3), (5, 9), (12, 13)];
        let rj = [(0, 2), (4, 5), (6, 11), (15, 19)];
        for (di, dj) in [(14, 20), (14, 12), (14, 14)] {
            assert_eq!(
                pair_pieces(&ri, di, &rj, dj),
                pair_pieces(&rj, dj, &ri, di).mirrored()
            );
        }
    }

    proptest::proptest! {
        /// The radix sort against `sort_unstable`: short (the comparison-sort fallback) and
        /// long arrays, narrow ranges (passes skipped) and the whole `i64` range (6 passes,
        /// `key - min` wrapping).
        #[test]
        fn radix_sort_equals_a_comparison_sort(
            keys in proptest::collection::vec(proptest::num::i64::ANY, 0..400),
            shift in 0u32..64,
            base in -1_000_000i64..1_000_000,
        ) {
            let mut keys: Vec<i64> = keys.iter().map(|&k| base.wrapping_add(k >> shift)).collect();
            let mut want = keys.clone();
            want.sort_unstable();
            let (mut buf, mut counts) = (Vec::new(), Vec::new());
            radix_sort(&mut keys, &mut buf, &mut counts);
            proptest::prop_assert_eq!(keys, want);
        }
    }

    #[test]
    fn threshold_is_the_weighted_quantile() {
        // Weights 1 each, cap 2: the third largest difference.
        assert_eq!(
            weighted_threshold(vec![(5.0, 1.0), (3.0, 1.0), (4.0, 1.0), (1.0, 1.0)], 2.0),
            3.0
        );
        assert_eq!(weighted_threshold(vec![(5.0, 1.0)], 2.0), 0.0);
        assert_eq!(weighted_threshold(vec![(-1.0, 5.0)], 2.0), 0.0);
    }
}
