//! The whole-window reinsertion: the best feasible starts of one removed attempt among
//! *every* start of a window around its old start, found exactly by one sweep.
//!
//! The objective of a start `s` is piecewise linear in `s`. For the GPU chain it is the
//! attempt's request time the placed requests do not cover, `f(s) = sum_r |[s + a_r,
//! s + b_r) ∩ gaps|`, whose slope is `#{r: s + b_r in a gap} - #{r: s + a_r in a gap}`; for
//! the cache chain it is the uncovered byte-ns of its lifetime per blob group, `f(s) =
//! sum_k bytes_k |[s, s + d) ∩ gaps_k|`, with slope `sum_k bytes_k (in_k(s + d) -
//! in_k(s))`. The slope changes only where a request end (or the lifetime's end) meets a
//! gap's end, so the least value over an interval of feasible starts lies at one of those
//! kinks or at the interval's ends. The sweep walks them in order from `f(lo)` (read
//! exactly from the state) adding slope times distance: every value it reports is the
//! exact integer the state's own query returns at that start (checked by the tests), and
//! the caller scores the few it keeps again with the state's queries, so the chain stays
//! exact.
//!
//! Feasible starts come from [`crate::profile::StepProfile::over_parts`]: a start fits
//! when the lifetime meets none of the parts where one more attempt breaks K or a cap.

use super::context::LnsContext;
use super::state::{GpuQuery, StartState};
use crate::cover::GapSet;
use schedule::evaluate::GridInstance;

/// How many of the window's best starts a reinsertion scores again (the best values,
/// earliest first among equals).
pub(super) const WINDOW_KEPT: usize = 4;

/// Reused vectors of the window sweep.
#[derive(Debug, Clone, Default)]
pub(super) struct WindowScratch {
    /// Parts where the attempt would break a limit.
    over: Vec<(i64, i64)>,
    /// Closed intervals of feasible starts.
    pub(super) feasible: Vec<(i64, i64)>,
    /// The gaps the objective reads inside the window (sorted, disjoint).
    gaps: Vec<(i64, i64)>,
    /// Slope changes: (start, change).
    kinks: Vec<(i64, i128)>,
    /// The best starts found: (value, start), ascending.
    pub(super) best: Vec<(u128, i64)>,
}

/// The window of starts `[lo, hi]` of `j` around `old`: `half` on each side (by default
/// twice the workload's mean duration), inside `[0, D - d]` (empty, `lo > hi`, when the
/// attempt cannot end by D).
pub(super) fn window_of(
    g: &GridInstance,
    ctx: &LnsContext,
    j: u32,
    old: i64,
    half: Option<i64>,
) -> (i64, i64) {
    let half = half.unwrap_or(2 * ctx.mean_duration);
    let latest = ctx.deadline - g.duration[j as usize];
    ((old - half).max(0), (old + half).min(latest))
}

/// The closed intervals of starts in `[lo, hi]` at which `j` (removed) fits next to the
/// placed attempts, into `scratch.feasible`.
pub(super) fn feasible_starts(
    g: &GridInstance,
    st: &StartState,
    j: u32,
    lo: i64,
    hi: i64,
    scratch: &mut WindowScratch,
) {
    let d = g.duration[j as usize];
    scratch.feasible.clear();
    if lo > hi {
        return;
    }
    st.profile.over_parts(
        lo,
        hi + d.max(1),
        StartState::use_of(g, j),
        StartState::caps(g),
        &mut scratch.over,
    );
    let mut from = lo;
    for &(x, y) in &scratch.over {
        // Starts in [from, x - d] end by x; none in (x - d, y) fits.
        let to = (x - d).min(hi);
        if to >= from {
            scratch.feasible.push((from, to));
        }
        from = from.max(y);
        if from > hi {
            return;
        }
    }
    scratch.feasible.push((from, hi));
}

/// Keep `(value, s)` among the [`WINDOW_KEPT`] least (value, start).
fn keep_best(best: &mut Vec<(u128, i64)>, value: u128, s: i64) {
    if best.len() == WINDOW_KEPT && (value, s) >= best[WINDOW_KEPT - 1] {
        return;
    }
    if best.iter().any(|&(_, t)| t == s) {
        return;
    }
    let at = best.partition_point(|&p| p < (value, s));
    best.insert(at, (value, s));
    best.truncate(WINDOW_KEPT);
}

/// Walk the kinks and the feasible intervals in order from `f(lo) = value` (slope
/// `slope` just after `lo`), keeping the best feasible starts in `scratch.best`: each
/// interval's ends and the kinks inside it (the value is continuous, so it is read at a
/// kink before the slope changes there).
fn sweep(lo: i64, value: u128, slope: i128, scratch: &mut WindowScratch) {
    let WindowScratch {
        feasible,
        kinks,
        best,
        ..
    } = scratch;
    best.clear();
    kinks.sort_unstable();
    let (mut pos, mut val, mut slope) = (lo, value as i128, slope);
    let mut k = 0;
    for &(a, b) in feasible.iter() {
        // The kinks up to `a` change only the slope; `a`, those in (a, b] and `b` are read.
        while k < kinks.len() && kinks[k].0 <= a {
            val += slope * i128::from(kinks[k].0 - pos);
            pos = kinks[k].0;
            slope += kinks[k].1;
            k += 1;
        }
        val += slope * i128::from(a - pos);
        pos = a;
        keep_best(best, val as u128, a);
        loop {
            let t = kinks.get(k).map_or(b, |kink| kink.0.min(b));
            val += slope * i128::from(t - pos);
            pos = t;
            debug_assert!(val >= 0, "a negative uncovered value at {t}");
            keep_best(best, val as u128, t);
            if k < kinks.len() && kinks[k].0 == t {
                slope += kinks[k].1;
                k += 1;
            } else if t == b {
                break;
            }
        }
    }
}

/// Whether `t` lies in one of the sorted disjoint `gaps`.
#[inline]
fn in_gaps(gaps: &[(i64, i64)], t: i64) -> bool {
    let i = gaps.partition_point(|g| g.1 <= t);
    i < gaps.len() && gaps[i].0 <= t
}

/// Add the kinks of the point at offset `off` from the start meeting the ends of `gaps`
/// while the start runs over `(lo, hi]`: the slope changes by `weight` where the point
/// enters a gap and back where it leaves.
fn point_kinks(
    gaps: &[(i64, i64)],
    off: i64,
    lo: i64,
    hi: i64,
    weight: i128,
    kinks: &mut Vec<(i64, i128)>,
) {
    let (from, to) = (lo + off, hi + off);
    let i = gaps.partition_point(|g| g.1 <= from);
    for &(p, q) in &gaps[i..] {
        if p > to {
            break;
        }
        if p > from {
            kinks.push((p - off, weight));
        }
        if q > from && q <= to {
            kinks.push((q - off, -weight));
        }
    }
}

/// Prepare a sweep of `j`'s starts in `[lo, hi]`: the feasible intervals, no kinks yet;
/// the first feasible start, `None` when none fits.
fn prepare(
    g: &GridInstance,
    st: &StartState,
    j: u32,
    (lo, hi): (i64, i64),
    scratch: &mut WindowScratch,
) -> Option<i64> {
    feasible_starts(g, st, j, lo, hi, scratch);
    scratch.best.clear();
    scratch.kinks.clear();
    scratch.feasible.first().map(|f| f.0)
}

/// Add the kinks of the part `[x, y)` (offsets from the start) uncovered in `gaps` with
/// weight `weight`, for starts over `(first, hi]`, and its slope just after `first` to
/// `slope`: the end inside a gap adds uncovered time as the start moves on, the start
/// inside one takes it away.
fn add_part(
    gaps: &[(i64, i64)],
    (x, y): (i64, i64),
    (first, hi): (i64, i64),
    weight: i128,
    slope: &mut i128,
    kinks: &mut Vec<(i64, i128)>,
) {
    *slope +=
        weight * (i128::from(in_gaps(gaps, first + y)) - i128::from(in_gaps(gaps, first + x)));
    point_kinks(gaps, y, first, hi, weight, kinks);
    point_kinks(gaps, x, first, hi, -weight, kinks);
}

/// The best feasible starts of `j` (removed) for the GPU chain in `[lo, hi]`, into
/// `scratch.best` with their exact uncovered request time.
pub(super) fn gpu_best(
    g: &GridInstance,
    ctx: &LnsContext,
    q: &GpuQuery<'_>,
    j: u32,
    range: (i64, i64),
    scratch: &mut WindowScratch,
) {
    let st = q.state();
    let Some(first) = prepare(g, st, j, range, scratch) else {
        return;
    };
    let hi = range.1;
    let ju = j as usize;
    // The gaps of the placed requests over every start's lifetime: the cover's and the
    // ghosts' parts (disjoint), in order.
    let (a, b) = (first, hi + g.duration[ju]);
    let cover = st.cover.as_ref().expect("covers");
    scratch.gaps.clear();
    scratch
        .gaps
        .extend_from_slice(cover.gaps().overlapping(a, b));
    scratch
        .gaps
        .extend_from_slice(GapSet::overlapping_in(&st.ghost_parts, a, b));
    scratch.gaps.sort_unstable();
    let mut slope = 0i128;
    for r in g.requests_of(ju) {
        let part = (g.request_start[r], g.request_end[r]);
        add_part(
            &scratch.gaps,
            part,
            (first, hi),
            1,
            &mut slope,
            &mut scratch.kinks,
        );
    }
    let value = q
        .uncovered_within(g, ctx, j, first, i64::MAX)
        .expect("no bound to pass");
    sweep(first, value as u128, slope, scratch);
}

/// The best feasible starts of `j` (removed) for the cache chain in `[lo, hi]`, into
/// `scratch.best` with their exact uncovered byte-ns (the blob covers must be current).
pub(super) fn cache_best(
    g: &GridInstance,
    st: &StartState,
    j: u32,
    range: (i64, i64),
    scratch: &mut WindowScratch,
) {
    let Some(first) = prepare(g, st, j, range, scratch) else {
        return;
    };
    let life = (0, g.duration[j as usize]);
    let mut slope = 0i128;
    for (k, bytes) in st.group_weights(j) {
        let gaps = st.blobs[k as usize].gaps().as_slice();
        add_part(
            gaps,
            life,
            (first, range.1),
            bytes as i128,
            &mut slope,
            &mut scratch.kinks,
        );
    }
    let value = st
        .cache_uncovered_within(g, j, first, u128::MAX)
        .expect("no bound to pass");
    sweep(first, value, slope, scratch);
}
