//! One move of a start-time chain: which attempts it removes (at random, by shared blob, by
//! time window, from the tail) and where each is reinserted (the best of a few candidate
//! starts, each pushed to the nearest feasible start).

use super::Objective;
use super::context::LnsContext;
use super::state::StartState;
use crate::evaluate::GridInstance;
use crate::seeded::below;
use rand_chacha::ChaCha8Rng;

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

/// Candidate starts of `j` in the current state (before feasibility adjustment).
fn candidate_starts(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &StartState,
    j: u32,
    old: i64,
    objective: Objective,
    rng: &mut ChaCha8Rng,
) -> Vec<(i64, Search)> {
    let ju = j as usize;
    let d = g.duration[ju];
    let latest = (ctx.deadline - d).max(0);
    let mut c = vec![(old, Search::Both), (0, Search::Both)];
    for _ in 0..3 {
        c.push((below(rng, latest as u64 + 1) as i64, Search::Forward));
    }
    let near = d.max(1) as u64;
    for _ in 0..2 {
        let off = below(rng, 2 * near + 1) as i64 - near as i64;
        c.push((old + off, Search::Both));
    }
    if objective == Objective::Cache {
        // Align with the other users of the most specific blobs.
        let mut blobs: Vec<u32> = g.blob_ids[g.blob_first[ju]..g.blob_first[ju + 1]].to_vec();
        blobs.sort_by_key(|&b| (ctx.blob_users[b as usize].len(), b));
        for &b in blobs.iter().take(3) {
            let list = st.blobs[b as usize].users();
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
                c.extend([(s_i, Search::Forward), (e_i - d, Search::Backward)]);
            }
        }
    }
    c
}

/// Reinsert `j` (removed) at its best feasible start; returns false if none exists.
pub(super) fn reinsert(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &mut StartState,
    j: u32,
    old: i64,
    objective: Objective,
    rng: &mut ChaCha8Rng,
) -> bool {
    match best_start(g, ctx, st, j, old, objective, rng) {
        Some(s) => {
            st.insert(g, j, s);
            true
        }
        None => false,
    }
}

/// The best feasible start of `j` (removed) among its candidate starts.
fn best_start(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &mut StartState,
    j: u32,
    old: i64,
    objective: Objective,
    rng: &mut ChaCha8Rng,
) -> Option<i64> {
    let latest = ctx.deadline - g.duration[j as usize];
    // Clamp to [0, latest] (the searches clamp too) and merge the directions asked of
    // equal starts, so no search runs twice.
    let mut cands: Vec<(i64, bool, bool)> = candidate_starts(g, ctx, st, j, old, objective, rng)
        .into_iter()
        .map(|(t, search)| {
            let t = t.clamp(0, latest.max(0));
            let (f, b) = match search {
                Search::Both => (true, true),
                Search::Forward => (true, false),
                Search::Backward => (false, true),
            };
            // From 0 a backward search can only return 0, from `latest` a forward one only
            // `latest`: the other direction checks the same start first.
            if f && b && t <= 0 {
                (t, true, false)
            } else if f && b && t >= latest {
                (t, false, true)
            } else {
                (t, f, b)
            }
        })
        .collect();
    cands.sort_unstable_by_key(|c| c.0);
    let mut merged: Vec<(i64, bool, bool)> = Vec::with_capacity(cands.len());
    for c in cands {
        match merged.last_mut() {
            Some(m) if m.0 == c.0 => {
                m.1 |= c.1;
                m.2 |= c.2;
            }
            _ => merged.push(c),
        }
    }
    let mut tried: Vec<i64> = Vec::with_capacity(merged.len() * 2);
    for (t, f, b) in merged {
        if f && b && (t <= 0 || t >= latest) {
            // Both directions check `t` first and the redundant one returns nothing else.
            if let Some(s) = st.feasible_start(g, ctx, j, t, t <= 0) {
                tried.push(s);
            }
            continue;
        }
        for (forward, wanted) in [(true, f), (false, b)] {
            if wanted && let Some(s) = st.feasible_start(g, ctx, j, t, forward) {
                tried.push(s);
            }
        }
    }
    tried.sort_unstable();
    tried.dedup();
    // Smallest (primary, secondary, end, start) wins; the end and start order as the start.
    // The primary objective is computed for every start (abandoned once above the best so
    // far), the secondary only for the starts that tie on the primary: the same winner as
    // computing both everywhere.
    if objective == Objective::Gpu {
        st.prepare_gpu_query(g);
    }
    let mut best_primary = u128::MAX;
    let mut ties: Vec<i64> = Vec::new();
    for &s in &tried {
        let p = match objective {
            Objective::Gpu => st
                .gpu_uncovered_within(
                    g,
                    ctx,
                    j,
                    s,
                    i64::try_from(best_primary).unwrap_or(i64::MAX),
                )
                .map(|v| v as u128),
            Objective::Cache => st.cache_uncovered_within(g, j, s, best_primary),
        };
        if let Some(p) = p {
            if p < best_primary {
                best_primary = p;
                ties.clear();
            }
            ties.push(s);
        }
    }
    if ties.len() <= 1 {
        return ties.first().copied();
    }
    st.tie_breaks += 1;
    if objective == Objective::Cache {
        // The GPU tie-break reads the request cover.
        st.prepare_gpu_query(g);
    }
    let st = &*st;
    ties.iter()
        .map(|&s| {
            let secondary = match objective {
                Objective::Gpu => st.cache_uncovered(g, j, s),
                Objective::Cache => st.gpu_uncovered(g, ctx, j, s) as u128,
            };
            (secondary, s)
        })
        .min()
        .map(|x| x.1)
}

pub(super) fn cost(st: &StartState, objective: Objective) -> u128 {
    match objective {
        Objective::Gpu => st.gpu_union as u128,
        Objective::Cache => st.cache_byte_ns,
    }
}

/// Which attempts one move removes.
pub(super) fn removal_set(
    g: &GridInstance,
    ctx: &LnsContext,
    st: &StartState,
    max_removed: u32,
    rng: &mut ChaCha8Rng,
) -> Vec<u32> {
    let n = g.len() as u64;
    // Small removals are likelier: 1 with probability 1/2, 2 with 1/4, ...
    let mut k = 1usize;
    while (k as u32) < max_removed.max(1) && below(rng, 2) == 0 {
        k += 1;
    }
    let mut set: Vec<u32> = Vec::with_capacity(k);
    let a = below(rng, n) as u32;
    set.push(a);
    let owned: Vec<u32>;
    let pool: &[u32] = match below(rng, 4) {
        0 => &[],
        1 => {
            // By blob: users of one of a's blobs with at least two users.
            let au = a as usize;
            let blobs: Vec<u32> = g.blob_ids[g.blob_first[au]..g.blob_first[au + 1]]
                .iter()
                .copied()
                .filter(|&b| ctx.blob_users[b as usize].len() >= 2)
                .collect();
            if blobs.is_empty() {
                &[]
            } else {
                let b = blobs[below(rng, blobs.len() as u64) as usize];
                &ctx.blob_users[b as usize]
            }
        }
        2 => {
            // By time window: attempts overlapping a's lifetime.
            let (s, e) = (
                st.starts[a as usize],
                st.starts[a as usize] + g.duration[a as usize],
            );
            owned = st
                .life
                .range((s - ctx.dmax, i64::MIN, 0)..)
                .take_while(|p| p.0 < e)
                .filter(|p| p.1 > s)
                .map(|p| p.2)
                .collect();
            &owned
        }
        _ => {
            // From the tail: the latest-ending attempts.
            let tail = (2 * g.concurrency.max(1) as usize).min(st.life.len());
            let pick: Vec<u32> = st.by_end.iter().rev().take(tail).map(|x| x.1).collect();
            set[0] = pick[below(rng, pick.len() as u64) as usize];
            owned = pick;
            &owned
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
    set
}
