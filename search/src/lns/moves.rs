//! One move of a start-time chain: which attempts it removes (at random, by shared blob, by
//! time window, from the tail) and where each is reinserted (the best of a few candidate
//! starts, each pushed to the nearest feasible start).

use super::context::LnsContext;
use super::state::StartState;
use super::window::{WindowScratch, cache_best, gpu_best, window_of};
use crate::seeded::below;
use rand_chacha::ChaCha8Rng;
use schedule::Objective;
use schedule::evaluate::GridInstance;

/// Which ways a candidate start is pushed to the nearest feasible start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Search {
    /// Forward and backward.
    Both,
    /// Forward only (a start aligned with another attempt's start).
    Forward,
    /// Backward only (an end aligned with another attempt's end).
    Backward,
}

/// Reused vectors of one reinsertion (no allocation per move).
#[derive(Debug, Clone, Default)]
pub(super) struct MoveScratch {
    /// Candidate starts and the directions asked of each.
    cands: Vec<(i64, bool, bool)>,
    /// Feasible starts found.
    tried: Vec<i64>,
    /// Starts tied on the primary objective (in ascending order after a tie-break).
    pub(super) ties: Vec<i64>,
    /// The whole-window sweep's vectors.
    window: WindowScratch,
}

/// Candidate starts of `j` in the current state (before feasibility adjustment), into `c`
/// with the directions each asks (forward, backward).
#[allow(clippy::too_many_arguments)]
pub(super) fn candidate_starts(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &StartState,
    j: u32,
    old: i64,
    objective: Objective,
    rng: &mut ChaCha8Rng,
    c: &mut Vec<(i64, bool, bool)>,
) {
    let ju = j as usize;
    let d = g.duration[ju];
    let latest = (ctx.deadline - d).max(0);
    c.clear();
    // Clamped to [0, latest] as the searches clamp. Equal candidates are rare and kept
    // (merging them cost what the searches they repeat cost; a start found twice is kept
    // once).
    let mut push = |t: i64, search: Search| {
        let t = t.clamp(0, latest);
        let (f, b) = match search {
            Search::Both => (true, true),
            Search::Forward => (true, false),
            Search::Backward => (false, true),
        };
        c.push((t, f, b));
    };
    push(old, Search::Both);
    push(0, Search::Both);
    for _ in 0..3 {
        push(below(rng, latest as u64 + 1) as i64, Search::Forward);
    }
    let near = d.max(1) as u64;
    for _ in 0..2 {
        let off = below(rng, 2 * near + 1) as i64 - near as i64;
        push(old + off, Search::Both);
    }
    if objective == Objective::Cache {
        // Align with the other users of the most specific blobs.
        for &k in ctx.align_covers_of(j) {
            let list = st.blobs[k as usize].users();
            if list.is_empty() {
                continue;
            }
            let picks = list.len().min(2);
            for k in 0..picks {
                let idx = if list.len() <= 2 {
                    k
                } else {
                    below(rng, list.len() as u64) as usize
                };
                let (s_i, e_i, _) = list.get(idx).expect("index below len");
                // Start with that user (searched forward) or end with it (backward).
                push(s_i, Search::Forward);
                push(e_i - d, Search::Backward);
            }
        }
    }
}

/// Reinsert `j` (removed) at its best feasible start; returns false if none exists.
/// `wide`: also weigh every start of the window around `old` ([`super::window`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn reinsert(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &mut StartState,
    j: u32,
    old: i64,
    objective: Objective,
    wide: bool,
    rng: &mut ChaCha8Rng,
) -> bool {
    // The state lends its reused vectors for the search.
    let mut scratch = std::mem::take(&mut st.scratch);
    let best = best_start(g, ctx, st, j, old, objective, wide, rng, &mut scratch);
    st.scratch = scratch;
    match best {
        Some(s) => {
            st.insert(g, j, s);
            true
        }
        None => false,
    }
}

/// The best feasible start of `j` (removed) among its candidate starts.
///
/// For the cache objective the old start's candidate is searched first (most
/// reinsertions keep it): its score bounds where another start can still tie or win
/// ([`StartState::cache_useful_starts`]), and every other search stops as soon as no start
/// in that window is within its reach (one from too far away runs no query). Every start
/// dropped so scores worse than the old one, so the winner is the one an unpruned search
/// picks.
#[allow(clippy::too_many_arguments)]
pub(super) fn best_start(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &mut StartState,
    j: u32,
    old: i64,
    objective: Objective,
    wide: bool,
    rng: &mut ChaCha8Rng,
    scratch: &mut MoveScratch,
) -> Option<i64> {
    let latest = ctx.deadline - g.duration[j as usize];
    let MoveScratch {
        cands,
        tried,
        ties,
        window,
    } = scratch;
    // The old start comes first (the order of the others changes no result).
    candidate_starts(g, ctx, st, j, old, objective, rng, cands);
    let old = old.clamp(0, latest.max(0));
    debug_assert_eq!(cands.first().map(|c| c.0), Some(old));
    let mut useful = (i64::MIN, i64::MAX);
    // The old start's primary score, when the window was set from it (it is `tried[0]`).
    let mut old_score = None;
    tried.clear();
    // Each feasible start once (in the order found: the scores do not depend on it).
    let keep = |tried: &mut Vec<i64>, s: Option<i64>| {
        if let Some(s) = s
            && !tried.contains(&s)
        {
            tried.push(s);
        }
    };
    for (k, &(t, f, b)) in cands.iter().enumerate() {
        if f && b && (t <= 0 || t >= latest) {
            // From 0 a backward search can only return 0, from `latest` a forward one only
            // `latest`: both directions check `t` first, so one search answers for both.
            keep(tried, st.feasible_start(g, ctx, j, t, t <= 0, useful));
        } else {
            // Forward first: when `t` itself fits, the backward search would return it too.
            let forward = f
                .then(|| st.feasible_start(g, ctx, j, t, true, useful))
                .flatten();
            keep(tried, forward);
            if b && forward != Some(t) {
                keep(tried, st.feasible_start(g, ctx, j, t, false, useful));
            }
        }
        // The old start fits: the window where another can score no worse.
        if k == 0 && objective == Objective::Cache && tried.first() == Some(&old) {
            let p = st
                .cache_uncovered_within(g, j, old, u128::MAX)
                .expect("no bound to pass");
            useful = st.cache_useful_starts(g, j, p);
            old_score = Some(p);
        }
    }
    // The whole window's best starts (feasible, found exactly), scored again below with
    // the others.
    if wide {
        let range = window_of(g, ctx, j, old, None);
        match objective {
            Objective::Gpu => gpu_best(g, ctx, &st.prepare_gpu_query(g), j, range, window),
            Objective::Cache => cache_best(g, st, j, range, window),
        }
        for &(_, s) in &window.best {
            keep(tried, Some(s));
        }
    }
    // Smallest (primary, secondary, end, start) wins; the end and start order as the start.
    // The primary objective is computed for every start (abandoned once above the best so
    // far), the secondary only for the starts that tie on the primary: the same winner as
    // computing both everywhere.
    let mut best_primary = u128::MAX;
    ties.clear();
    let unscored = match old_score {
        Some(p) => {
            best_primary = p;
            ties.push(old);
            &tried[1..]
        }
        None => &tried[..],
    };
    match objective {
        Objective::Gpu => {
            let q = st.prepare_gpu_query(g);
            keep_least(unscored, &mut best_primary, ties, |s, bound| {
                q.uncovered_within(g, ctx, j, s, i64::try_from(bound).unwrap_or(i64::MAX))
                    .map(|v| v as u128)
            });
        }
        Objective::Cache => keep_least(unscored, &mut best_primary, ties, |s, bound| {
            st.cache_uncovered_within(g, j, s, bound)
        }),
    }
    if ties.len() <= 1 {
        return ties.first().copied();
    }
    st.tie_breaks += 1;
    // Smallest (secondary, start) wins: the tied starts are scored from the earliest on,
    // and a later one must score strictly less (each score is abandoned at the best so far
    // less one, and none can beat 0).
    ties.sort_unstable();
    let best = match objective {
        // The GPU tie-break reads the request cover, inside the tied starts' windows only.
        // (Preparing the earliest's window alone first was measured to cost more than it
        // saved.)
        Objective::Cache => {
            let last_end = ties[ties.len() - 1] + g.duration[j as usize];
            let q = st.prepare_gpu_query_within(g, ties[0], last_end);
            least_secondary(ties, |s, best| {
                let bound = i64::try_from(best).map_or(i64::MAX, |b| b - 1);
                q.uncovered_within(g, ctx, j, s, bound).map(|v| v as u128)
            })
        }
        // The cache tie-break reads the blob covers, where removed attempts may still be
        // (read around them when nothing else is out of date).
        Objective::Gpu => {
            if !st.blobs_hold_only_ghosts() {
                st.sync_blobs(g);
            }
            let st = &*st;
            least_secondary(ties, |s, _| Some(st.cache_uncovered_around_ghosts(g, j, s)))
        }
    };
    Some(best)
}

/// Score each start of `starts` on the primary objective (`score(s, bound)`: `None` once
/// above `bound`, the best so far) and keep in `ties` those with the least score.
fn keep_least(
    starts: &[i64],
    best_primary: &mut u128,
    ties: &mut Vec<i64>,
    score: impl Fn(i64, u128) -> Option<u128>,
) {
    for &s in starts {
        if let Some(p) = score(s, *best_primary) {
            if p < *best_primary {
                *best_primary = p;
                ties.clear();
            }
            ties.push(s);
        }
    }
}

/// The start of `ties` (ascending) with the least secondary score (`score(s, best)`: `None`
/// once it cannot beat `best`); the earliest among equals.
fn least_secondary(ties: &[i64], score: impl Fn(i64, u128) -> Option<u128>) -> i64 {
    let mut best = (u128::MAX, i64::MAX);
    for &s in ties {
        if let Some(v) = score(s, best.0)
            && v < best.0
        {
            best = (v, s);
        }
        if best.0 == 0 {
            break;
        }
    }
    best.1
}

pub(super) fn cost(st: &StartState, objective: Objective) -> u128 {
    match objective {
        Objective::Gpu => st.gpu_union as u128,
        Objective::Cache => st.cache_byte_ns,
    }
}

/// How many attempts a move removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Removal {
    /// One to this many, small removals likelier (1 with probability 1/2, 2 with 1/4, ...).
    AtMost(u32),
    /// This many (fewer when the instance, or the blob's users or time window the move
    /// draws from, has fewer attempts).
    Exactly(u32),
}

/// Which attempts one move removes, into `set` (`pool` is scratch).
pub(super) fn removal_set(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &StartState,
    removal: Removal,
    rng: &mut ChaCha8Rng,
    set: &mut Vec<u32>,
    pool: &mut Vec<u32>,
) {
    debug_assert!(st.life_current(), "an attempt is out");
    let n = g.len() as u64;
    let k = match removal {
        Removal::AtMost(max_removed) => {
            let mut k = 1usize;
            while (k as u32) < max_removed.max(1) && below(rng, 2) == 0 {
                k += 1;
            }
            k
        }
        Removal::Exactly(k) => (k.max(1) as usize).min(g.len()),
    };
    set.clear();
    pool.clear();
    let a = below(rng, n) as u32;
    set.push(a);
    let pool: &[u32] = match below(rng, 4) {
        0 => &[],
        1 => {
            // By blob: users of one of a's blobs with at least two users.
            let au = a as usize;
            pool.extend(
                g.blob_ids[g.blob_first[au]..g.blob_first[au + 1]]
                    .iter()
                    .copied()
                    .filter(|&b| ctx.blob_users[b as usize].len() >= 2),
            );
            if pool.is_empty() {
                &[]
            } else {
                let b = pool[below(rng, pool.len() as u64) as usize];
                &ctx.blob_users[b as usize]
            }
        }
        // A removal of one attempt draws nothing from this pool.
        2 if k == 1 => &[],
        2 => {
            // By time window: attempts overlapping a's lifetime.
            let (s, e) = (
                st.starts[a as usize],
                st.starts[a as usize] + g.duration[a as usize],
            );
            pool.extend(
                st.life
                    .range((s - ctx.dmax, i64::MIN, 0)..)
                    .take_while(|p| p.0 < e)
                    .filter(|p| p.1 > s)
                    .map(|p| p.2),
            );
            pool
        }
        _ => {
            // From the tail: the latest-ending attempts.
            let tail = (2 * g.concurrency.max(1) as usize).min(st.life.len());
            pool.extend(st.by_end.iter().rev().take(tail).map(|x| x.1));
            set[0] = pool[below(rng, pool.len() as u64) as usize];
            pool
        }
    };
    let mut guard = 0;
    while set.len() < k && guard < 8 * k {
        guard += 1;
        let x = if pool.is_empty() {
            below(rng, n) as u32
        } else {
            pool[below(rng, pool.len() as u64) as usize]
        };
        if !set.contains(&x) {
            set.push(x);
        }
    }
}
