//! The GPU pattern bound (docs/BOUNDS.md, item 7): a lower bound on the GPU union that sees how
//! request patterns can interleave, from the exact cross-correlations of every pair of attempts'
//! requests. Per attempt `i`, a Lagrangian relaxation of "at every instant of `i`'s life the
//! partners running beside it fit the capacity" caps the request overlap `i` can get from all
//! partners together (`X_i`); Jensen's inequality on `i`'s own requests then gives
//! `union >= sum_i w_i req_i^2 / (w_i req_i + X_i)`. The argument is docs/BOUNDS.md, item 7;
//! step 3 there adds the capacity constraints at a few interior instants of `i`'s life (the
//! midpoints of its longest requests) to those at its two ends.
//!
//! Every multiplier gives a valid cap, so neither the grid of multipliers nor the budget can
//! make the bound invalid: an attempt whose partner sweeps do not fit the budget keeps the
//! request-time cap `X_i <= cap_i req_i`, with which the sum is the energy bound of item 3.

use model::config::PatternBoundConfig;
use rayon::prelude::*;
use schedule::GridInstance;
use schedule::evaluate::k_prime;
use serde::{Deserialize, Serialize};

/// Relative safety margin taken off the bound for floating-point rounding in its sums.
const SAFETY: f64 = 1e-9;

/// Interior instants per attempt whose capacity constraints the caps use (the midpoints of
/// its longest requests; docs/BOUNDS.md, item 7, step 3).
pub const INTERIOR_POINTS: u32 = 4;

/// How many of the best multipliers `alpha` of the ends-only stage are tried again with the
/// interior instants (any choice is valid; more costs time).
const STAGE2_ALPHAS: usize = 3;

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
    /// The same sum with the caps of the lifetime integral and the two ends only (without
    /// the interior instants), GPU-hours, best weighting: what the interior instants add is
    /// `bound_h` over this.
    pub ends_only_h: f64,
    /// Interior instants per attempt whose capacity constraints the caps use.
    pub interior_points: u32,
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
            ends_only_h: 0.0,
            interior_points: 0,
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

/// The cross-correlation of one pair of attempts summarised on **segments** of the
/// relative shift `tau = s_j - s_i` (partner `j` in `i`'s frame, `tau` in `[-d_j, d_i]`).
/// The segments split the three pieces on which the lifetime overlap `L(tau)` is linear
/// (docs/BOUNDS.md, item 7): `[-d_j, h1]` (`L = tau + d_j`), `[h1, h2]`
/// (`L = min(d_i, d_j)`), `[h2, d_i]` (`L = d_i - tau`), `h1 = min(0, d_i - d_j)`,
/// `h2 = max(0, d_i - d_j)`, further at the **cuts**: the shifts where `j` starts or stops
/// covering one of the instants whose capacity constraint the cap uses (item 7, step 3), so
/// that on each segment the set of such instants `j` covers is the same at every interior
/// shift. Each segment keeps the upper concave hull of the correlation's vertices
/// `(tau, c)` on its closure (its ends included), so `max c(tau) + a tau` over the segment is
/// the maximum over its hull. A boundary vertex belongs to both segments it ends.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairPieces {
    /// Segment boundaries, nondecreasing: segment `k` is `[bounds[k], bounds[k + 1]]`.
    bounds: Vec<i64>,
    /// Start of segment `k`'s hull in `hull` (one more entry than segments).
    hull_start: Vec<u32>,
    /// The segments' hulls, left to right, concatenated.
    hull: Vec<(i64, i64)>,
}

impl PairPieces {
    /// Segments.
    pub fn segments(&self) -> usize {
        self.bounds.len().saturating_sub(1)
    }

    /// Segment `k`'s closed range of shifts.
    pub fn range(&self, k: usize) -> (i64, i64) {
        (self.bounds[k], self.bounds[k + 1])
    }

    /// Segment `k`'s upper concave hull of `(tau, c)`, left to right.
    pub fn hull(&self, k: usize) -> &[(i64, i64)] {
        &self.hull[self.hull_start[k] as usize..self.hull_start[k + 1] as usize]
    }

    /// Without cuts: the upper concave hull of `(tau, c)` on the first piece.
    pub fn first(&self) -> &[(i64, i64)] {
        self.hull(0)
    }

    /// Without cuts: the largest `c` on the middle piece.
    pub fn middle(&self) -> i64 {
        self.hull(1).iter().map(|p| p.1).max().unwrap_or(0)
    }

    /// Without cuts: the upper concave hull of `(tau, c)` on the last piece.
    pub fn last(&self) -> &[(i64, i64)] {
        self.hull(self.segments() - 1)
    }

    /// The same pair seen from the partner's frame (`tau -> -tau`: the segments in reverse
    /// order, each mirrored; the hull of a mirror image is the mirror image of the hull).
    pub fn mirrored(&self) -> PairPieces {
        let n = self.segments();
        let mut out = PairPieces {
            bounds: self.bounds.iter().rev().map(|&t| -t).collect(),
            hull_start: Vec::with_capacity(n + 1),
            hull: Vec::with_capacity(self.hull.len()),
        };
        out.hull_start.push(0);
        for k in (0..n).rev() {
            out.hull
                .extend(self.hull(k).iter().rev().map(|&(t, c)| (-t, c)));
            out.hull_start.push(out.hull.len() as u32);
        }
        out
    }
}

/// Push `(x, y)` onto an upper concave hull built left to right.
fn hull_push(h: &mut Vec<(i64, i64)>, base: usize, p: (i64, i64)) {
    if h.len() > base
        && let Some(&(x, y)) = h.last()
        && x == p.0
    {
        if p.1 > y {
            h.pop();
        } else {
            return;
        }
    }
    while h.len() >= base + 2 {
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
/// (sorted, disjoint; in ns), summarised on the three pieces of [`PairPieces`] (no cuts).
/// `c` is piecewise linear: each pair of requests adds a trapezoid with 4 breakpoints, so
/// its maximum of `c(tau) + a tau` over a piece lies at a breakpoint or a piece end.
pub fn pair_pieces(ri: &[(i64, i64)], di: i64, rj: &[(i64, i64)], dj: i64) -> PairPieces {
    pair_pieces_with(&mut PairScratch::default(), ri, di, rj, dj)
}

/// [`pair_pieces`] with reusable buffers.
pub fn pair_pieces_with(
    scratch: &mut PairScratch,
    ri: &[(i64, i64)],
    di: i64,
    rj: &[(i64, i64)],
    dj: i64,
) -> PairPieces {
    pair_segments_with(scratch, ri, di, rj, dj, &[])
}

/// The pair's summary on segments: the three pieces split further at `cuts` (shifts,
/// sorted; those outside `(-d_j, d_i)` or on a piece end are ignored). The trapezoid of
/// requests `(p, q)` and `(u, v)` has slope `+1` from `p - v` and from `q - u`, `-1` from
/// `p - u` and from `q - v` (the middle two of the four, in either order). Each breakpoint
/// is one key `2 t + s` (`s = 1` for a `-1`), so one array holds both kinds and,
/// radix-sorted, groups them by `t` (the keys are integers: their sorted order is the one
/// any sort gives).
pub fn pair_segments_with(
    scratch: &mut PairScratch,
    ri: &[(i64, i64)],
    di: i64,
    rj: &[(i64, i64)],
    dj: i64,
    cuts: &[i64],
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
    // Segment ends (vertices too, with zero slope change): the piece ends and the cuts.
    let mut bounds = vec![-dj, h1, h2, di];
    bounds.extend(
        cuts.iter()
            .copied()
            .filter(|&c| c > -dj && c < di && c != h1 && c != h2),
    );
    bounds.sort_unstable();
    {
        // Drop repeated cuts, keeping the piece ends (a degenerate middle piece stays).
        let mut kept: Vec<i64> = Vec::with_capacity(bounds.len());
        let mut base = [-dj, h1, h2, di].into_iter().peekable();
        for b in bounds {
            if base.peek() == Some(&b) {
                base.next();
                kept.push(b);
            } else if kept.last() != Some(&b) {
                kept.push(b);
            }
        }
        bounds = kept;
    }
    let nseg = bounds.len() - 1;
    let mut out = PairPieces {
        bounds,
        hull_start: Vec::with_capacity(nseg + 1),
        hull: Vec::new(),
    };
    out.hull_start.push(0);
    let (mut k, mut e, mut cur, mut base) = (0usize, 0usize, 0usize, 0usize);
    let (mut slope, mut val, mut last_t) = (0i64, 0i64, -dj);
    loop {
        // Next breakpoint (`>> 1` floors, so it recovers `t` of negative keys too).
        let mut t = if k < keys.len() {
            keys[k] >> 1
        } else {
            i64::MAX
        };
        if e < out.bounds.len() {
            t = t.min(out.bounds[e]);
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
        while e < out.bounds.len() && out.bounds[e] == t {
            e += 1;
        }
        if cur < nseg {
            hull_push(&mut out.hull, base, (t, val));
        }
        // A segment ending here is closed; the next one starts with this vertex.
        while cur < nseg && out.bounds[cur + 1] == t {
            out.hull_start.push(out.hull.len() as u32);
            cur += 1;
            if cur < nseg {
                base = out.hull.len();
                hull_push(&mut out.hull, base, (t, val));
            }
        }
    }
    // Kept for every pair until the caps are computed: no spare capacity.
    out.hull.shrink_to_fit();
    out
}

/// `max over the hull of c + a tau`.
fn hull_max(h: &[(i64, i64)], a: f64) -> f64 {
    h.iter()
        .map(|&(t, c)| c as f64 + a * t as f64)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// One segment of a partner in `i`'s frame: the instants of `i` whose capacity constraint it
/// is charged (`mask`: bit 0 = `i`'s first instant, bit 1 = its last, bit `2 + k` = interior
/// instant `k`), and `L = a + b tau` on it.
#[derive(Debug, Clone, Copy)]
struct SegmentCharge {
    mask: u64,
    a: f64,
    b: f64,
}

/// The charges of every segment of `p` (partner of duration `dj` in the frame of `i`, of
/// duration `di`, interior instants `points`). An instant `phi` of `i` is covered by the
/// partner at shift `tau` iff `tau <= phi < tau + d_j`, i.e. `tau` in `(phi - d_j, phi]`;
/// a segment is charged `phi` when every interior shift of it covers `phi`
/// (`lo >= phi - d_j` and `hi <= phi`). The two ends of `i`'s life use the pieces' rule
/// (docs/BOUNDS.md, item 7): the first instant on `hi <= 0`, the last on `lo >= d_i - d_j`
/// (the shift `d_i` itself, where the rule is loose, has no overlap at all: value 0).
fn segment_charges(p: &PairPieces, di: i64, dj: i64, points: &[i64]) -> Vec<SegmentCharge> {
    let (h1, h2) = (0.min(di - dj), 0.max(di - dj));
    (0..p.segments())
        .map(|k| {
            let (lo, hi) = p.range(k);
            let (a, b) = if hi <= h1 {
                (dj, 1)
            } else if lo >= h2 {
                (di, -1)
            } else {
                (di.min(dj), 0)
            };
            let mut mask = 0u64;
            if hi <= 0 {
                mask |= 1;
            }
            if lo >= di - dj {
                mask |= 2;
            }
            for (x, &phi) in points.iter().enumerate() {
                if lo >= phi - dj && hi <= phi {
                    mask |= 4 << x;
                }
            }
            SegmentCharge {
                mask,
                a: a as f64,
                b: b as f64,
            }
        })
        .collect()
}

/// The interior instants of attempt `i`'s life whose capacity constraints the cap uses:
/// the midpoints of its `count` longest requests (ns offsets, strictly inside its life,
/// ascending, distinct). Any choice is valid; these are where partners' requests would
/// stack.
pub fn interior_points(req: &[(i64, i64)], d: i64, count: usize) -> Vec<i64> {
    let mut by_len: Vec<(i64, i64)> = req.to_vec();
    by_len.sort_by_key(|&(p, q)| (std::cmp::Reverse(q - p), p));
    let mut pts: Vec<i64> = by_len
        .iter()
        .take(count)
        .map(|&(p, q)| p + (q - p) / 2)
        .filter(|&m| m >= 1 && m <= d - 2)
        .collect();
    pts.sort_unstable();
    pts.dedup();
    pts
}

/// The shifts `tau` (in `i`'s frame) where the pair's segments must be split: where `j`
/// starts or stops covering one of `i`'s interior instants (`phi - d_j`, `phi`), and where
/// `i` starts or stops covering one of `j`'s (`-psi`, `d_i - psi`: the mirror image of `j`'s
/// own cuts, so that the same summary serves `j`'s frame). Sorted, distinct.
fn pair_cuts(pi: &[i64], di: i64, pj: &[i64], dj: i64) -> Vec<i64> {
    let mut cuts: Vec<i64> = Vec::with_capacity(2 * (pi.len() + pj.len()));
    for &phi in pi {
        cuts.extend([phi - dj, phi]);
    }
    for &psi in pj {
        cuts.extend([-psi, di - psi]);
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
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

/// `min over gamma >= 0` (a few rounds of exact coordinate steps from 0) of the Lagrangian
/// cap `cap (alpha d_i + sum gamma) + sum_j w_j max(0, max_S (v_S - gamma . mask_S))`,
/// where `vals[ranges[j]]` are partner `j`'s segments `(mask, v_S = sup (c - alpha L))`.
/// Any `gamma >= 0` gives a valid cap, so stopping early only weakens it.
fn lagrangian_cap(
    vals: &[(u64, f64)],
    ranges: &[(usize, usize, f64)],
    cap: f64,
    alpha: f64,
    di: i64,
    coords: usize,
) -> f64 {
    let mut gamma = vec![0.0f64; coords];
    let pen = |mask: u64, gamma: &[f64]| -> f64 {
        let (mut m, mut p) = (mask, 0.0);
        while m != 0 {
            p += gamma[m.trailing_zeros() as usize];
            m &= m - 1;
        }
        p
    };
    let total = |gamma: &[f64]| -> f64 {
        cap * (alpha * di as f64 + gamma.iter().sum::<f64>())
            + ranges
                .iter()
                .map(|&(lo, hi, w)| {
                    w * vals[lo..hi]
                        .iter()
                        .map(|&(m, v)| v - pen(m, gamma))
                        .fold(0.0f64, f64::max)
                })
                .sum::<f64>()
    };
    let mut best = total(&gamma);
    let mut items: Vec<(f64, f64)> = Vec::with_capacity(ranges.len());
    for _ in 0..2 {
        for k in 0..coords {
            // Partner j's term as a function of gamma_k alone: max(A - gamma_k, B).
            let bit = 1u64 << k;
            items.clear();
            items.extend(ranges.iter().map(|&(lo, hi, w)| {
                let (mut a, mut b) = (f64::NEG_INFINITY, 0.0f64);
                for &(m, v) in &vals[lo..hi] {
                    if m & bit != 0 {
                        a = a.max(v - pen(m & !bit, &gamma));
                    } else {
                        b = b.max(v - pen(m, &gamma));
                    }
                }
                (a - b, w)
            }));
            gamma[k] = weighted_threshold(std::mem::take(&mut items), cap);
            items = Vec::with_capacity(ranges.len());
        }
        best = best.min(total(&gamma));
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
/// of [`Weighting::ALL`], for the attempts of `swept` (every other attempt: `cap_i req_i`),
/// with the capacity constraints of `i`'s two ends and of `points` interior instants
/// ([`interior_points`]) besides the lifetime integral.
pub fn partner_overlap_caps(
    g: &GridInstance,
    swept: &[bool],
    alpha_steps: u32,
    points: u32,
) -> [Vec<f64>; 3] {
    overlap_caps_by_stage(g, swept, alpha_steps, points).1
}

/// [`partner_overlap_caps`] after its first stage (the two ends only) and after both.
fn overlap_caps_by_stage(
    g: &GridInstance,
    swept: &[bool],
    alpha_steps: u32,
    points: u32,
) -> ([Vec<f64>; 3], [Vec<f64>; 3]) {
    let n = g.len();
    let kp = k_prime(g, &(0..n as u32).collect::<Vec<_>>());
    let ws: Vec<(Vec<f64>, Vec<f64>)> = Weighting::ALL
        .iter()
        .map(|&wt| weights(g, wt, kp))
        .collect();
    let reqs: Vec<Vec<(i64, i64)>> = (0..n).map(|j| requests(g, j).collect()).collect();
    let pts: Vec<Vec<i64>> = (0..n)
        .map(|j| interior_points(&reqs[j], g.duration[j], points as usize))
        .collect();
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
                    let (di, dj) = (g.duration[i], g.duration[j]);
                    let cuts = pair_cuts(&pts[i], di, &pts[j], dj);
                    let p = pair_segments_with(&mut scratch, &reqs[i], di, &reqs[j], dj, &cuts);
                    (j, p)
                })
                .collect()
        })
        .collect();
    let rows: Vec<[[f64; 3]; 2]> = (0..n)
        .into_par_iter()
        .map(|i| {
            let trivial = |x: usize| ws[x].1[i] * g.request_len[i] as f64;
            let mut caps = [trivial(0), trivial(1), trivial(2)];
            if !swept[i] || g.request_len[i] == 0 {
                return [caps, caps];
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
            let partners: Vec<(usize, &PairPieces, Vec<SegmentCharge>)> = mirrored
                .iter()
                .chain(own[i].iter())
                .map(|(j, p)| (*j, p, segment_charges(p, di, g.duration[*j], &pts[i])))
                .collect();
            let coords = 2 + pts[i].len();
            // Each partner's segment values `(mask, sup (c - alpha L))` at one alpha.
            let segment_values = |alpha: f64, vals: &mut Vec<(u64, f64)>| -> Vec<(usize, usize)> {
                vals.clear();
                partners
                    .iter()
                    .map(|(_, p, charges)| {
                        let lo = vals.len();
                        for (k, ch) in charges.iter().enumerate() {
                            let v = hull_max(p.hull(k), -alpha * ch.b) - alpha * ch.a;
                            // Segments charged alike (split only for the partner's own
                            // instants) count once, with their best value.
                            match vals[lo..].iter_mut().find(|e| e.0 == ch.mask) {
                                Some(e) => e.1 = e.1.max(v),
                                None => vals.push((ch.mask, v)),
                            }
                        }
                        (lo, vals.len())
                    })
                    .collect()
            };
            let ranges_of = |bounds: &[(usize, usize)], w: &[f64]| -> Vec<(usize, usize, f64)> {
                partners
                    .iter()
                    .zip(bounds)
                    .map(|((j, _, _), &(lo, hi))| (lo, hi, w[*j]))
                    .collect()
            };
            // Stage 1, every alpha of the grid: the two ends only. A partner's segments
            // collapse to the best value per charge of the ends (at most 4).
            let mut vals: Vec<(u64, f64)> = Vec::new();
            let mut ends: Vec<(u64, f64)> = Vec::new();
            let mut stage1: [Vec<(f64, f64)>; 3] = Default::default();
            for &alpha in &alphas {
                let bounds = segment_values(alpha, &mut vals);
                ends.clear();
                let end_bounds: Vec<(usize, usize)> = bounds
                    .iter()
                    .map(|&(lo, hi)| {
                        let start = ends.len();
                        let mut by = [f64::NEG_INFINITY; 4];
                        for &(m, v) in &vals[lo..hi] {
                            let c = (m & 3) as usize;
                            by[c] = by[c].max(v);
                        }
                        for (c, &v) in by.iter().enumerate() {
                            if v > f64::NEG_INFINITY {
                                ends.push((c as u64, v));
                            }
                        }
                        (start, ends.len())
                    })
                    .collect();
                for (x, (w, cap)) in ws.iter().enumerate() {
                    let ranges = ranges_of(&end_bounds, w);
                    let v = lagrangian_cap(&ends, &ranges, cap[i], alpha, di, 2);
                    stage1[x].push((v, alpha));
                    caps[x] = caps[x].min(v);
                }
            }
            let ends_only = caps;
            // Stage 2, at each weighting's STAGE2_ALPHAS best alphas of stage 1: the interior
            // instants too.
            if coords > 2 {
                for (x, (w, cap)) in ws.iter().enumerate() {
                    stage1[x].sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
                    for &(_, alpha) in stage1[x].iter().take(STAGE2_ALPHAS) {
                        let bounds = segment_values(alpha, &mut vals);
                        let ranges = ranges_of(&bounds, w);
                        let v = lagrangian_cap(&vals, &ranges, cap[i], alpha, di, coords);
                        caps[x] = caps[x].min(v);
                    }
                }
            }
            [ends_only, caps]
        })
        .collect();
    let mut out: [[Vec<f64>; 3]; 2] = Default::default();
    for r in rows {
        for (o, r) in out.iter_mut().zip(r) {
            for x in 0..3 {
                o[x].push(r[x]);
            }
        }
    }
    let [a, b] = out;
    (a, b)
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
    let (ends_caps, caps) = overlap_caps_by_stage(g, &swept, cfg.alpha_steps, INTERIOR_POINTS);
    let mut by = [0.0f64; 3];
    let mut trivial = 0.0f64;
    let mut ends_only = 0.0f64;
    for (x, &wt) in Weighting::ALL.iter().enumerate() {
        let (w, cap) = weights(g, wt, kp);
        by[x] = h(jensen_sum(g, &w, &caps[x]));
        ends_only = ends_only.max(h(jensen_sum(g, &w, &ends_caps[x])));
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
        ends_only_h: ends_only,
        interior_points: INTERIOR_POINTS,
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
            assert!((hull_max(p.first(), a) - brute(-dj, h1, a)).abs() < 1e-9);
            assert!((hull_max(p.last(), a) - brute(h2, di, a)).abs() < 1e-9);
        }
        let mid = (h1..=h2).map(|t| corr(&ri, &rj, t)).max().unwrap();
        assert_eq!(p.middle(), mid);
    }

    #[test]
    fn segments_hold_the_exact_maxima_and_their_charges_are_covered() {
        let ri = [(1, 3), (5, 9), (12, 13)];
        let rj = [(0, 2), (4, 5), (6, 11)];
        for (di, dj) in [(14, 12), (14, 20), (14, 14)] {
            let (pi, pj) = (interior_points(&ri, di, 2), interior_points(&rj, dj, 2));
            let cuts = pair_cuts(&pi, di, &pj, dj);
            let p = pair_segments_with(&mut PairScratch::default(), &ri, di, &rj, dj, &cuts);
            assert_eq!(p.range(0).0, -dj);
            assert_eq!(p.range(p.segments() - 1).1, di);
            let charges = segment_charges(&p, di, dj, &pi);
            assert_eq!(charges.len(), p.segments());
            for (k, charge) in charges.iter().enumerate() {
                let (lo, hi) = p.range(k);
                for a in [-1.0f64, -0.3, 0.0, 0.4, 1.0] {
                    let brute = (lo..=hi)
                        .map(|t| corr(&ri, &rj, t) as f64 + a * t as f64)
                        .fold(f64::NEG_INFINITY, f64::max);
                    assert!((hull_max(p.hull(k), a) - brute).abs() < 1e-9, "{k} {a}");
                }
                // Every shift strictly inside a segment covers each instant it is charged.
                let mut phis = vec![0, di - 1];
                phis.extend(&pi);
                for (x, &phi) in phis.iter().enumerate() {
                    if charge.mask & (1 << x) != 0 {
                        for t in lo + 1..hi {
                            assert!(t <= phi && phi < t + dj, "segment {k} charged {phi} at {t}");
                        }
                    }
                }
            }
            // The mirror image is the partner's own summary with the same cuts.
            let back = pair_cuts(&pj, dj, &pi, di);
            assert_eq!(
                p.mirrored(),
                pair_segments_with(&mut PairScratch::default(), &rj, dj, &ri, di, &back)
            );
        }
    }

    #[test]
    fn the_partner_frame_is_the_mirror_image() {
        let ri = [(1, 3), (5, 9), (12, 13)];
        let rj = [(0, 2), (4, 5), (6, 11), (15, 19)];
        // Requests lie inside their attempt's life (the grid instance's invariant).
        for (di, dj) in [(14, 20), (22, 20), (20, 20)] {
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
