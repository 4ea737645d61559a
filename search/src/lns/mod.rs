//! Neighbourhood search on start times: from a feasible schedule, remove one to a
//! few attempts (at random, by shared blob, by time window, or from the tail), reinsert each
//! at its best feasible start, and accept by late acceptance. Schedules found this way need
//! not be list schedules; feasibility (K, both caps, D) is checked directly against a
//! profile of the other attempts, and the independent validator checks every selected one.
//!
//! Everything is exact integer arithmetic on the nanosecond grid. The GPU union and the
//! cache byte-ns are kept incrementally: removing or inserting an attempt changes them by
//! its uncovered request time (its requests are disjoint) and, per blob, by its uncovered
//! lifetime, both read from the gap sets of the others' covers ([`crate::cover`]).

mod context;
mod moves;
mod state;
mod window;

pub use context::LnsContext;

use crate::seeded::{beats_exact, below};
use moves::{Removal, cost, reinsert, removal_set};
use rand_chacha::ChaCha8Rng;
use schedule::Objective;
use schedule::evaluate::GridInstance;
use state::StartState;

/// Most jumps of a feasible-start search from one candidate start (a candidate whose
/// search needs more is dropped; the attempt's old start always remains a candidate).
pub(crate) const FEASIBLE_STEPS: usize = 4;

/// Knobs of one chain (counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainParams {
    /// Moves (each removes and reinserts a few attempts).
    pub moves: u32,
    /// Most attempts removed by one move.
    pub max_removed: u32,
    /// Late-acceptance history length.
    pub late_acceptance: u32,
    /// Every this many moves (0: never), the move's reinsertions also score every start of
    /// a window around the old start (the whole-window reinsertion, [`window`]).
    pub window_every: u32,
    /// After this many moves without a new best of the chain (0: never), the next move is a
    /// kick: it removes `kick_removed` attempts, reinserts them as any move does, and is
    /// accepted whatever its cost (the late-acceptance history restarts from it).
    pub kick_after: u32,
    /// Attempts a kick removes.
    pub kick_removed: u32,
}

/// A schedule the chain visited that no other visited schedule dominated (GPU, cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPoint {
    /// Starts, ns.
    pub starts: Vec<i64>,
    /// GPU union, ns (incremental; re-derived exactly by the caller).
    pub gpu_union: i64,
    /// Cache byte-ns (incremental).
    pub cache_byte_ns: u128,
    /// Latest end, ns.
    pub makespan: i64,
    /// The move after which it was visited (0 = the starting schedule).
    pub found_at_move: u64,
}

/// What one chain did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainOutcome {
    /// The schedules the chain offers the search, in the order they were visited: those no
    /// other visited schedule dominated on (GPU, cache), an equal pair kept only with a
    /// smaller makespan; then, if not among them, the fastest visited schedule and the
    /// best one on the chain's objective under the search's tie rule (values within a
    /// relative 1e-9 prefer the smaller makespan).
    pub archive: Vec<ChainPoint>,
    /// Moves tried.
    pub moves: u64,
    /// Moves with an attempt that found no feasible start by D (undone).
    pub infeasible: u64,
    /// Moves accepted.
    pub accepted: u64,
    /// Accepted moves that left some removed attempt at another start (the others put
    /// every attempt back where it was).
    pub moved: u64,
    /// Reinsertions decided by the other objective (several candidate starts tied on the
    /// chain's own).
    pub tie_breaks: u64,
    /// Kicks made (moves accepted whatever their cost after the chain stalled).
    pub kicks: u64,
    /// Kicks after which the chain found a new best before its next kick.
    pub kick_wins: u64,
}

/// Whether `b` makes `a` redundant, both as (GPU, cache, makespan): at least as good on
/// both objectives, and better on one or (equal on both) no slower. The chains' archives and
/// the search's Pareto front keep points by it.
pub(crate) fn dominated_by(a: (i64, u128, i64), b: (i64, u128, i64)) -> bool {
    b.0 <= a.0 && b.1 <= a.1 && (b.0 < a.0 || b.1 < a.1 || b.2 <= a.2)
}

/// A schedule the chain keeps aside (the fastest, the best on its objective): the archive
/// point visited after move `at` while the archive holds it, else its own copy.
#[derive(Debug)]
enum Kept {
    InArchive(u64),
    Owned(ChainPoint),
}

impl Kept {
    /// The state just visited after move `at`: a reference when the archive took it.
    fn of(st: &StartState, archive: &[ChainPoint], at: u64) -> Kept {
        if archive.last().is_some_and(|x| x.found_at_move == at) {
            Kept::InArchive(at)
        } else {
            Kept::Owned(st.point(at))
        }
    }
}

/// Add the current state to the archive unless a visited schedule makes it redundant; the
/// points it makes redundant leave, into `kept` when one of them is kept aside.
fn archive_add(archive: &mut Vec<ChainPoint>, st: &StartState, at: u64, kept: &mut [&mut Kept]) {
    let p = (st.gpu_union, st.cache_byte_ns, st.makespan());
    if archive
        .iter()
        .any(|x| dominated_by(p, (x.gpu_union, x.cache_byte_ns, x.makespan)))
    {
        return;
    }
    let mut i = 0;
    while i < archive.len() {
        let x = &archive[i];
        if dominated_by((x.gpu_union, x.cache_byte_ns, x.makespan), p) {
            let gone_at = x.found_at_move;
            let holds = |k: &Kept| matches!(k, Kept::InArchive(at) if *at == gone_at);
            // The point moves to the last of those that hold it, a copy to the others.
            let mut gone = Some(archive.remove(i));
            for h in 0..kept.len() {
                if holds(kept[h]) {
                    let point = if kept[h + 1..].iter().any(|k| holds(k)) {
                        gone.clone()
                    } else {
                        gone.take()
                    };
                    *kept[h] = Kept::Owned(point.expect("held by one"));
                }
            }
        } else {
            i += 1;
        }
    }
    archive.push(st.point(at));
}

/// Place attempts in `order` one by one at their first-fit start (a backfilling list
/// schedule: a later attempt may start before an earlier one where it fits). Each search
/// starts one longest duration before the previous attempt's start. `None` when an attempt
/// cannot end by D.
pub fn first_fit_schedule(g: &GridInstance, ctx: &LnsContext, order: &[u32]) -> Option<Vec<i64>> {
    let mut st = StartState::empty(g, ctx, false);
    let mut prev = 0i64;
    for &j in order {
        let s = st.first_fit(g, ctx, j, prev - ctx.dmax)?;
        st.place_profile(g, j, s);
        prev = s;
    }
    Some(st.starts)
}

/// Run one chain from the feasible schedule `start` (its starts must respect K, both caps
/// and D). Deterministic in `rng`.
pub fn run_chain(
    g: &GridInstance,
    ctx: &LnsContext,
    start: &[i64],
    objective: Objective,
    params: ChainParams,
    rng: &mut ChaCha8Rng,
) -> ChainOutcome {
    let mut st = StartState::new(g, ctx, start);
    // The GPU chain reads the blob covers only at tie-breaks and for the archive.
    st.set_lazy_blobs(objective == Objective::Gpu);
    let mut out = ChainOutcome {
        archive: Vec::new(),
        moves: 0,
        infeasible: 0,
        accepted: 0,
        moved: 0,
        tie_breaks: 0,
        kicks: 0,
        kick_wins: 0,
    };
    archive_add(&mut out.archive, &st, 0, &mut []);
    if g.is_empty() {
        return out;
    }
    // The fastest visited schedule and the best on the objective by the tie rule.
    let mut fastest = Kept::InArchive(0);
    let mut best = Kept::InArchive(0);
    let (mut fastest_mk, mut best_cost, mut best_mk) =
        (st.makespan(), cost(&st, objective), st.makespan());
    let late = params.late_acceptance.max(1) as usize;
    let mut history = vec![cost(&st, objective); late];
    // Reused by every move.
    let (mut set, mut pool, mut olds, mut order, mut placed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Moves since the chain's best last changed, and whether the last kick has paid off.
    let (mut since_best, mut kick_open) = (0u64, false);
    for m in 0..u64::from(params.moves) {
        out.moves += 1;
        let before = cost(&st, objective);
        let wide = params.window_every > 0 && m % u64::from(params.window_every) == 0;
        let kick = params.kick_after > 0 && since_best >= u64::from(params.kick_after);
        let removal = if kick {
            since_best = 0;
            Removal::Exactly(params.kick_removed)
        } else {
            since_best += 1;
            Removal::AtMost(params.max_removed)
        };
        removal_set(g, ctx, &st, removal, rng, &mut set, &mut pool);
        olds.clear();
        olds.extend(set.iter().map(|&j| st.starts[j as usize]));
        for &j in &set {
            st.remove(g, j);
        }
        order.clone_from(&set);
        for i in (1..order.len()).rev() {
            let k = below(rng, i as u64 + 1) as usize;
            order.swap(i, k);
        }
        placed.clear();
        let mut ok = true;
        for &j in &order {
            let old = olds[set.iter().position(|&x| x == j).unwrap_or(0)];
            if reinsert(g, ctx, &mut st, j, old, objective, wide, rng) {
                placed.push(j);
            } else {
                ok = false;
                break;
            }
        }
        if objective == Objective::Gpu {
            // The GPU value is that of the cover: bring it up to date.
            st.sync_cover(g);
        }
        let after = cost(&st, objective);
        let slot = (m as usize) % late;
        let accept = ok && (kick || after <= before || after <= history[slot]);
        if accept {
            out.accepted += 1;
            if kick {
                out.kicks += 1;
                kick_open = true;
                history.fill(after);
            }
            if set
                .iter()
                .zip(&olds)
                .any(|(&j, &s)| st.starts[j as usize] != s)
            {
                out.moved += 1;
            }
            // The archive reads both values: the GPU chain's cover is current already.
            if objective == Objective::Cache {
                st.sync_cover(g);
            }
            st.sync_blobs(g);
            archive_add(&mut out.archive, &st, m + 1, &mut [&mut fastest, &mut best]);
            let (mk, c) = (st.makespan(), cost(&st, objective));
            if mk < fastest_mk {
                fastest = Kept::of(&st, &out.archive, m + 1);
                fastest_mk = mk;
            }
            if beats_exact(c, mk, best_cost, best_mk) {
                best = Kept::of(&st, &out.archive, m + 1);
                (best_cost, best_mk) = (c, mk);
                since_best = 0;
                if kick_open {
                    out.kick_wins += 1;
                    kick_open = false;
                }
            }
        } else {
            if !ok {
                out.infeasible += 1;
            }
            for &j in &placed {
                st.remove(g, j);
            }
            for (&j, &s) in set.iter().zip(&olds) {
                st.insert(g, j, s);
            }
            if objective == Objective::Gpu {
                st.sync_cover(g);
            }
        }
        history[slot] = cost(&st, objective);
    }
    for k in [fastest, best] {
        if let Kept::Owned(p) = k
            && p.found_at_move > 0
            && !out
                .archive
                .iter()
                .any(|x| x.found_at_move == p.found_at_move)
        {
            out.archive.push(p);
        }
    }
    out.archive.sort_by_key(|p| p.found_at_move);
    out.tie_breaks = st.tie_breaks;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;
    use schedule::evaluate::{Plan, Scratch, cache_byte_ns, evaluate, gpu_union, start_order_of};
    use schedule::instance::{AttemptInput, BlobInput, WorkloadInstance};
    use schedule::synthetic::{SyntheticShape, synthetic_instance};

    #[test]
    fn equal_objectives_keep_the_faster_schedule_and_near_ties_prefer_it() {
        // (GPU, cache, makespan)
        assert!(dominated_by((5, 5, 10), (5, 5, 9)));
        assert!(!dominated_by((5, 5, 9), (5, 5, 10)));
        assert!(
            dominated_by((5, 5, 10), (5, 5, 10)),
            "the first of equals stays"
        );
        assert!(dominated_by((5, 6, 1), (5, 5, 100)));
        assert!(!dominated_by((4, 6, 1), (5, 5, 0)));
        // Within a relative 1e-9 the smaller makespan wins; beyond it the smaller value.
        let v = 1_000_000_000_000u128;
        assert!(beats_exact(v + 1, 9, v, 10));
        assert!(!beats_exact(v + 1, 10, v, 9));
        assert!(!beats_exact(v + 1, 10, v, 10));
        assert!(!beats_exact(v + 10_000, 1, v, 10));
        assert!(beats_exact(v - 10_000, 99, v, 10));
    }

    /// A small deepswe-shaped instance and its FIFO schedule.
    fn small_deepswe_fifo(
        tasks: usize,
        repos: usize,
        requests_per_attempt: usize,
    ) -> (GridInstance, schedule::evaluate::Evaluation) {
        let mut shape = SyntheticShape::deepswe();
        shape.tasks = tasks;
        shape.repos = repos;
        shape.requests_per_attempt = requests_per_attempt;
        let g = GridInstance::new(&synthetic_instance(&shape).unwrap());
        let order: Vec<u32> = (0..g.len() as u32).collect();
        let fifo = evaluate(&g, &Plan::from_order(&order), &mut Scratch::new()).unwrap();
        (g, fifo)
    }

    #[test]
    fn blobs_with_the_same_users_share_a_group_of_their_summed_bytes() {
        // The deepswe shape's two base layers are used by every attempt: one group.
        let (g, fifo) = small_deepswe_fifo(40, 3, 6);
        let ctx = LnsContext::new(&g, fifo.makespan);
        let groups = &ctx.groups;
        let n_blobs = g.blob_bytes.len();
        assert!(groups.group_bytes.len() < n_blobs, "no group was merged");
        for j in 0..g.len() {
            let mine = &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]];
            let of = groups.of(j as u32);
            let want: u128 = mine
                .iter()
                .map(|&b| u128::from(g.blob_bytes[b as usize]))
                .sum();
            let got: u128 = of.iter().map(|&k| groups.group_bytes[k as usize]).sum();
            assert_eq!(got, want, "attempt {j}");
            let mut once = of.to_vec();
            once.sort_unstable();
            once.dedup();
            assert_eq!(once.len(), of.len(), "attempt {j} lists a group twice");
            // One group per distinct set of users among its blobs.
            let mut user_sets: Vec<&[u32]> = mine
                .iter()
                .map(|&b| ctx.blob_users[b as usize].as_slice())
                .collect();
            user_sets.sort_unstable();
            user_sets.dedup();
            assert_eq!(of.len(), user_sets.len(), "attempt {j}");
        }
    }

    /// A tiny instance on a nanosecond scale (every start can be tried): `n` attempts of
    /// 20-79 ns, at most 3 running, four blobs shared by all, by thirds, by pairs and by
    /// none, and its FIFO schedule.
    fn tiny_fifo(n: usize, seed: u64) -> (GridInstance, schedule::evaluate::Evaluation) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let blobs = [40_000u64, 3_000, 700, 90]
            .iter()
            .enumerate()
            .map(|(k, &bytes)| BlobInput {
                digest: format!("sha256:{k}"),
                compressed_bytes: bytes,
            })
            .collect();
        let attempts = (0..n)
            .map(|a| {
                let d = 20 + below(&mut rng, 60) as i64;
                let r0 = below(&mut rng, (d / 2) as u64) as i64;
                let mut mine = vec![0u32, 1 + (a % 3 == 0) as u32];
                if a % 2 == 0 {
                    mine.push(2 + (a / 2 % 2) as u32);
                }
                mine.sort_unstable();
                mine.dedup();
                AttemptInput {
                    attempt_id: format!("a{a}"),
                    task_id: format!("t{}", a / 2),
                    gen_start: a as f64,
                    duration_s: d as f64 * 1e-9,
                    requests: vec![(r0 as f64 * 1e-9, (r0 + d / 3) as f64 * 1e-9)],
                    cores: 1.0,
                    mem_gib: 1.0,
                    blobs: mine,
                }
            })
            .collect();
        fifo_of(attempts, blobs, 3)
    }

    /// The instance of `attempts` and `blobs` with at most `concurrency` running (caps of
    /// cores and memory that never bind) and its FIFO schedule.
    fn fifo_of(
        attempts: Vec<AttemptInput>,
        blobs: Vec<BlobInput>,
        concurrency: u32,
    ) -> (GridInstance, schedule::evaluate::Evaluation) {
        let caps = model::config::ReplayCaps {
            concurrency,
            cpu_cores: 64.0,
            ram_gib: 256.0,
            gpus: 8,
        };
        let inst =
            WorkloadInstance::new(model::WorkloadId::Deepswe, caps, attempts, blobs, None).unwrap();
        let g = GridInstance::new(&inst);
        let order: Vec<u32> = (0..g.len() as u32).collect();
        let fifo = evaluate(&g, &Plan::from_order(&order), &mut Scratch::new()).unwrap();
        (g, fifo)
    }

    /// Every attempt of six tiny instances taken out of its FIFO schedule (with room
    /// after it), one at a time.
    fn each_tiny_removal(mut check: impl FnMut(&GridInstance, &LnsContext, &StartState, u32)) {
        for seed in 0..6u64 {
            let (g, fifo) = tiny_fifo(14, seed);
            let ctx = LnsContext::new(&g, fifo.makespan + 100);
            for j in 0..g.len() as u32 {
                let mut st = StartState::new(&g, &ctx, &fifo.starts);
                st.remove(&g, j);
                check(&g, &ctx, &st, j);
            }
        }
    }

    #[test]
    fn cache_windows_hold_every_start_that_scores_within_the_bound() {
        // Every start of a removed attempt, scored exactly, against the window its bound
        // gives: a start scoring no more than the bound lies inside. The test must reach
        // the windows' edges (a window one nanosecond narrower fails it) and windows that
        // leave starts out.
        let (mut at_edge, mut left_out) = (0, 0);
        each_tiny_removal(|g, ctx, st, j| {
            let latest = ctx.deadline - g.duration[j as usize];
            let scores: Vec<u128> = (0..=latest)
                .map(|s| st.cache_uncovered_within(g, j, s, u128::MAX).unwrap())
                .collect();
            let mut bounds = scores.clone();
            bounds.push(0);
            bounds.sort_unstable();
            bounds.dedup();
            for &bound in &bounds {
                let (lo, hi) = st.cache_useful_starts(g, j, bound);
                for (s, &score) in (0i64..).zip(&scores) {
                    if score <= bound {
                        assert!(
                            lo <= s && s <= hi,
                            "attempt {j} at {s} scores {score} <= {bound}, outside [{lo}, {hi}]"
                        );
                        at_edge += usize::from(s == lo || s == hi);
                    } else {
                        left_out += usize::from(s < lo || s > hi);
                    }
                }
            }
        });
        assert!(at_edge > 50, "{at_edge} starts at a window's edge");
        assert!(left_out > 1000, "{left_out} starts left out");
    }

    #[test]
    fn searches_bounded_by_a_window_return_what_they_return_unbounded_inside_it() {
        // From every start, both directions, against windows around the attempt's old
        // start: a bounded search returns the unbounded one's start when that lies in the
        // window, else nothing or that same start. The test must reach searches kept by a
        // window whose near edge lies more than the steps times `d` away (a reach that
        // leaves out the longest placed lifetime fails it).
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (mut moved, mut far_kept) = (0, 0);
        each_tiny_removal(|g, ctx, st, j| {
            let d = g.duration[j as usize];
            let latest = ctx.deadline - d;
            let old = st.starts[j as usize];
            for _ in 0..4 {
                let lo = old - below(&mut rng, 80) as i64;
                let window = (lo, lo + below(&mut rng, 120) as i64);
                for t in 0..=latest {
                    for forward in [true, false] {
                        let whole = st.feasible_start(g, ctx, j, t, forward, (i64::MIN, i64::MAX));
                        let inside = whole.filter(|s| (window.0..=window.1).contains(s));
                        let bounded = st.feasible_start(g, ctx, j, t, forward, window);
                        // Outside the window it may still return the same start.
                        assert!(
                            bounded == inside || (inside.is_none() && bounded == whole),
                            "attempt {j} from {t} (forward {forward}) in {window:?}: \
                         {bounded:?}, unbounded {whole:?}"
                        );
                        moved += usize::from(whole.is_some_and(|s| s != t));
                        // Kept though its window starts more than the steps times
                        // `d` away: a reach without the running lifetimes' `dmax`
                        // would drop it.
                        let far = if forward { window.0 - t } else { t - window.1 };
                        far_kept +=
                            usize::from(inside.is_some() && far > (FEASIBLE_STEPS as i64 - 1) * d);
                    }
                }
            }
        });
        assert!(moved > 1000, "{moved} searches moved their start");
        assert!(
            far_kept > 0,
            "{far_kept} searches kept from beyond the steps times d"
        );
    }

    #[test]
    fn cache_queries_around_ghosts_equal_those_after_a_sync() {
        let (g, fifo) = small_deepswe_fifo(40, 3, 6);
        let ctx = LnsContext::new(&g, fifo.makespan);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        // Queries where leaving the ghosts out changes the answer (the covers' gaps alone
        // would be wrong): the test must reach them.
        let mut ghost_mattered = 0;
        for round in 0..40u64 {
            let mut st = StartState::new(&g, &ctx, &fifo.starts);
            st.set_lazy_blobs(true);
            // Neighbours in FIFO order overlap in time (ghosts sharing the queries);
            // others are anywhere.
            let first = below(&mut rng, g.len() as u64 - 3) as u32;
            let removed: Vec<u32> = if round % 2 == 0 {
                vec![first, first + 1, first + 2]
            } else {
                let mut v: Vec<u32> = (0..3)
                    .map(|_| below(&mut rng, g.len() as u64) as u32)
                    .collect();
                v.dedup();
                v
            };
            for &j in &removed {
                if st.placed[j as usize] {
                    st.remove(&g, j);
                }
            }
            // One put back where it was keeps the covers current for it.
            st.insert(&g, removed[0], fifo.starts[removed[0] as usize]);
            assert!(st.blobs_hold_only_ghosts());
            let mut synced = st.clone();
            synced.sync_blobs(&g);
            for &j in &removed[1..] {
                let old = fifo.starts[j as usize];
                let d = g.duration[j as usize];
                for s in [
                    old,
                    old - d / 2,
                    old + d / 3,
                    0,
                    below(&mut rng, ctx.deadline as u64) as i64,
                ] {
                    let want = synced.cache_uncovered_within(&g, j, s, u128::MAX).unwrap();
                    assert_eq!(
                        st.cache_uncovered_around_ghosts(&g, j, s),
                        want,
                        "attempt {j} at {s}"
                    );
                    let ju = j as usize;
                    let gaps_only: u128 = ctx
                        .groups
                        .of(j)
                        .iter()
                        .map(|&k| {
                            let unc = st.blobs[k as usize].uncovered(s, s + g.duration[ju]);
                            ctx.groups.group_bytes[k as usize] * unc as u128
                        })
                        .sum();
                    ghost_mattered += usize::from(gaps_only != want);
                }
            }
        }
        assert!(
            ghost_mattered > 20,
            "{ghost_mattered} queries reached the ghosts"
        );
    }

    /// A tiny instance whose requests cover most of every lifetime (two or three to an
    /// attempt, a few ns apart), at most `concurrency` running: with more than a few
    /// running, its request cover has buckets covered whole by two or more requests, by
    /// one, and by none.
    fn dense_tiny_fifo(
        n: usize,
        seed: u64,
        concurrency: u32,
    ) -> (GridInstance, schedule::evaluate::Evaluation) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let attempts = (0..n)
            .map(|a| {
                let d = 40 + below(&mut rng, 60) as i64;
                let k = 2 + below(&mut rng, 2) as i64;
                let mut requests = Vec::new();
                let mut t = below(&mut rng, 3) as i64;
                for i in 0..k {
                    let end = (d * (i + 1) / k).min(d);
                    if end > t {
                        requests.push((t as f64 * 1e-9, end as f64 * 1e-9));
                    }
                    t = end + 1 + below(&mut rng, 3) as i64;
                }
                AttemptInput {
                    attempt_id: format!("a{a}"),
                    task_id: format!("t{a}"),
                    gen_start: a as f64,
                    duration_s: d as f64 * 1e-9,
                    requests,
                    cores: 1.0,
                    mem_gib: 1.0,
                    blobs: vec![0],
                }
            })
            .collect();
        let blobs = vec![BlobInput {
            digest: "sha256:0".to_string(),
            compressed_bytes: 1_000,
        }];
        fifo_of(attempts, blobs, concurrency)
    }

    #[test]
    fn ghost_parts_are_the_gaps_taking_the_ghosts_out_adds() {
        // One to three attempts taken out of dense tiny schedules (neighbours in FIFO order,
        // whose lifetimes overlap, and attempts far apart): the parts only they cover,
        // prepared for the whole line, equal the gaps the cover gains when they leave it.
        // The test must reach ghosts others cover twice throughout (the preparation's first
        // check), ghosts with parts of their own, and overlapping ghosts that cover a part
        // together and alone.
        let (mut covered, mut with_parts, mut overlapping_parts) = (0, 0, 0);
        for seed in 0..60u64 {
            let (g, fifo) = dense_tiny_fifo(60, seed, 4 + (seed % 8) as u32 * 3);
            let ctx = LnsContext::new(&g, fifo.makespan + 50);
            let n = g.len() as u32;
            for j in 0..n {
                for removed in [
                    vec![j],
                    vec![j, (j + 1) % n],
                    vec![j, (j + 1) % n, (j + 2) % n],
                    vec![j, (j + n / 2) % n],
                ] {
                    let mut st = StartState::new(&g, &ctx, &fifo.starts);
                    for &a in &removed {
                        st.remove(&g, a);
                    }
                    let mut prepared = st.clone();
                    prepared.prepare_gpu_query(&g);
                    let mut synced = st;
                    synced.sync_cover(&g);
                    let added = interval_difference(
                        synced.cover.as_ref().unwrap().gaps().as_slice(),
                        prepared.cover.as_ref().unwrap().gaps().as_slice(),
                    );
                    assert_eq!(
                        prepared.ghost_parts, added,
                        "seed {seed}, ghosts {removed:?}"
                    );
                    let overlap = removed.iter().any(|&a| {
                        removed.iter().any(|&b| {
                            let (sa, sb) = (fifo.starts[a as usize], fifo.starts[b as usize]);
                            a != b
                                && sa < sb + g.duration[b as usize]
                                && sb < sa + g.duration[a as usize]
                        })
                    });
                    covered += usize::from(added.is_empty());
                    with_parts += usize::from(!added.is_empty());
                    overlapping_parts += usize::from(overlap && !added.is_empty());
                }
            }
        }
        assert!(
            covered > 100,
            "{covered} ghost sets covered by others throughout"
        );
        assert!(
            with_parts > 100,
            "{with_parts} ghost sets with parts of their own"
        );
        assert!(
            overlapping_parts > 50,
            "{overlapping_parts} overlapping ghost sets with parts"
        );
    }

    /// The parts of the gap list `a` outside the gap list `b` (both sorted and disjoint).
    fn interval_difference(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
        let mut parts = crate::cover::GapSet::new();
        for &(x, y) in a {
            parts.add(x, y);
        }
        for &(x, y) in b {
            parts.subtract(x, y);
        }
        parts.as_slice().to_vec()
    }

    #[test]
    fn gpu_queries_prepared_for_a_window_equal_those_prepared_for_all() {
        let (g, fifo) = small_deepswe_fifo(40, 3, 40);
        let ctx = LnsContext::new(&g, fifo.makespan);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        // Queries whose answer differs from the cover's gaps alone (a ghost's exclusive
        // part reaches them), ghosts left out of a window, and windows holding parts only
        // ghosts cover: the test must reach all three (a window that drops the ghost
        // requests reaching past its edges fails the parts' check).
        let (mut ghost_mattered, mut left_out, mut parts_in_window) = (0, 0, 0);
        let mut no_parts = 0;
        for round in 0..200u64 {
            let mut st = StartState::new(&g, &ctx, &fifo.starts);
            // Neighbours in FIFO order overlap in time; others are anywhere.
            let first = below(&mut rng, g.len() as u64 - 3) as u32;
            let mut removed: Vec<u32> = if round % 2 == 0 {
                vec![first, first + 1, first + 2]
            } else {
                (0..3)
                    .map(|_| below(&mut rng, g.len() as u64) as u32)
                    .collect()
            };
            removed.dedup();
            for &j in &removed {
                if st.placed[j as usize] {
                    st.remove(&g, j);
                }
            }
            let mut full = st.clone();
            full.prepare_gpu_query(&g);
            // The parts only ghosts cover are the gaps taking them out adds.
            let mut synced = st.clone();
            synced.sync_cover(&g);
            let added = interval_difference(
                synced.cover.as_ref().unwrap().gaps().as_slice(),
                full.cover.as_ref().unwrap().gaps().as_slice(),
            );
            assert_eq!(full.ghost_parts, added, "ghosts {removed:?}");
            no_parts += usize::from(added.is_empty());
            let j = removed[0];
            let (old, d) = (fifo.starts[j as usize], g.duration[j as usize]);
            for (lo, hi) in [
                (old, old + d),
                (old - d / 2, old + d),
                (old + d / 3, old + 2 * d),
            ] {
                let mut windowed = st.clone();
                windowed.prepare_gpu_query_within(&g, lo, hi);
                // The parts only ghosts cover, inside the window, are those of the full
                // preparation.
                let clip = |parts: &[(i64, i64)]| -> Vec<(i64, i64)> {
                    parts
                        .iter()
                        .map(|&(a, b)| (a.max(lo), b.min(hi)))
                        .filter(|&(a, b)| a < b)
                        .collect()
                };
                let want_parts = clip(&full.ghost_parts);
                assert_eq!(
                    clip(&windowed.ghost_parts),
                    want_parts,
                    "window [{lo}, {hi})"
                );
                parts_in_window += usize::from(!want_parts.is_empty());
                left_out += usize::from(removed.iter().any(|&a| {
                    let at = fifo.starts[a as usize];
                    (g.request_first[a as usize]..g.request_first[a as usize + 1])
                        .any(|k| at + g.request_start[k] >= hi || at + g.request_end[k] <= lo)
                }));
                for s in [lo, lo + (hi - lo - d).max(0) / 2, hi - d] {
                    if s < lo || s + d > hi {
                        continue;
                    }
                    let want = full.prepare_gpu_query(&g).uncovered(&g, &ctx, j, s);
                    assert_eq!(
                        windowed
                            .prepare_gpu_query_within(&g, lo, hi)
                            .uncovered(&g, &ctx, j, s),
                        want,
                        "attempt {j} at {s}, window [{lo}, {hi})"
                    );
                    let gaps_only = full
                        .cover
                        .as_ref()
                        .unwrap()
                        .gaps()
                        .overlapping(s, s + d)
                        .iter()
                        .map(|&(a, b)| {
                            StartState::request_measure(
                                &g,
                                &ctx,
                                j as usize,
                                a.max(s) - s,
                                b.min(s + d) - s,
                            )
                        })
                        .sum::<i64>();
                    ghost_mattered += usize::from(gaps_only != want);
                }
            }
        }
        assert!(
            ghost_mattered > 20,
            "{ghost_mattered} queries reached the ghosts"
        );
        assert!(left_out > 10, "{left_out} windows left a ghost request out");
        assert!(
            no_parts > 10,
            "{no_parts} ghost sets covered by others throughout"
        );
        assert!(
            parts_in_window > 10,
            "{parts_in_window} windows held parts only ghosts cover"
        );
    }

    /// The start of `j` (removed) that an unpruned reinsertion picks: each candidate start
    /// searched in every direction it asks, with no window, and every feasible start found
    /// scored exactly on both objectives; the smallest (primary, secondary, start) wins. `rng` is a copy
    /// of the chain's, so the candidates are the chain's.
    fn unpruned_best_start(
        g: &GridInstance,
        ctx: &LnsContext,
        st: &StartState,
        j: u32,
        old: i64,
        objective: Objective,
        mut rng: ChaCha8Rng,
    ) -> Option<i64> {
        let mut cands = Vec::new();
        moves::candidate_starts(g, ctx, st, j, old, objective, &mut rng, &mut cands);
        let mut full = st.clone();
        full.sync_blobs(g);
        let q = full.prepare_gpu_query(g);
        let full = q.state();
        let mut scored: Vec<(u128, u128, i64)> = Vec::new();
        for &(t, forward, backward) in &cands {
            for (asked, way) in [(forward, true), (backward, false)] {
                let Some(s) = asked
                    .then(|| full.feasible_start(g, ctx, j, t, way, (i64::MIN, i64::MAX)))
                    .flatten()
                else {
                    continue;
                };
                let gpu = q.uncovered(g, ctx, j, s) as u128;
                let cache = full.cache_uncovered_within(g, j, s, u128::MAX).unwrap();
                scored.push(match objective {
                    Objective::Gpu => (gpu, cache, s),
                    Objective::Cache => (cache, gpu, s),
                });
            }
        }
        scored.into_iter().min().map(|x| x.2)
    }

    #[test]
    fn reinsertions_pick_the_start_an_unpruned_search_picks() {
        // Chains on tiny and small instances (every move kept when it fits, so the state
        // wanders), each reinsertion's start against the unpruned reinsertion's. The test
        // must reach tie-breaks on both objectives won by a later tied start (keeping the
        // earliest tied start fails it, as do a later start winning a tie on the secondary,
        // a bound one too tight and a stop at a secondary of 1 instead of 0).
        let (mut tie_breaks, mut later_won) = ([0u64; 2], [0u64; 2]);
        let instances = (0..4u64)
            .map(|seed| tiny_fifo(14, seed))
            .chain((0..2u64).map(|seed| dense_tiny_fifo(12, seed, 4)))
            .chain([small_deepswe_fifo(30, 4, 10)]);
        for (i, (g, fifo)) in instances.enumerate() {
            let ctx = LnsContext::new(&g, fifo.makespan + 100);
            for objective in [Objective::Gpu, Objective::Cache] {
                let mut st = StartState::new(&g, &ctx, &fifo.starts);
                st.set_lazy_blobs(objective == Objective::Gpu);
                let mut rng = ChaCha8Rng::seed_from_u64(i as u64);
                let mut scratch = moves::MoveScratch::default();
                let (mut set, mut pool) = (Vec::new(), Vec::new());
                for _ in 0..150 {
                    removal_set(
                        &g,
                        &ctx,
                        &st,
                        Removal::AtMost(3),
                        &mut rng,
                        &mut set,
                        &mut pool,
                    );
                    let olds: Vec<i64> = set.iter().map(|&j| st.starts[j as usize]).collect();
                    for &j in &set {
                        st.remove(&g, j);
                    }
                    let mut placed = Vec::new();
                    for (&j, &old) in set.iter().zip(&olds) {
                        let want =
                            unpruned_best_start(&g, &ctx, &st, j, old, objective, rng.clone());
                        let before = st.tie_breaks;
                        let got = moves::best_start(
                            &g,
                            &ctx,
                            &mut st,
                            j,
                            old,
                            objective,
                            false,
                            &mut rng,
                            &mut scratch,
                        );
                        assert_eq!(got, want, "instance {i}, {objective:?}, attempt {j}");
                        if st.tie_breaks > before {
                            let k = usize::from(objective == Objective::Cache);
                            tie_breaks[k] += 1;
                            later_won[k] += u64::from(got != scratch.ties.first().copied());
                        }
                        let Some(s) = got else { break };
                        st.insert(&g, j, s);
                        placed.push(j);
                    }
                    if placed.len() < set.len() {
                        for &j in &placed {
                            st.remove(&g, j);
                        }
                        for (&j, &s) in set.iter().zip(&olds) {
                            st.insert(&g, j, s);
                        }
                    }
                    st.sync_cover(&g);
                    st.sync_blobs(&g);
                }
            }
        }
        // (GPU chain, cache chain): [714, 922] tie-breaks, [153, 311] won by a later start.
        for k in 0..2 {
            assert!(tie_breaks[k] > 300, "{tie_breaks:?} tie-breaks");
            assert!(later_won[k] > 50, "{later_won:?} won by a later tied start");
        }
    }

    #[test]
    fn window_sweeps_find_the_least_value_among_every_feasible_start() {
        use window::{WindowScratch, cache_best, feasible_starts, gpu_best, window_of};
        let mut ws = WindowScratch::default();
        let (mut checked, mut infeasible, mut beat_old) = (0, 0, 0);
        for seed in 0..24u64 {
            let (g, fifo) = if seed % 2 == 0 {
                dense_tiny_fifo(40, seed, 3 + (seed % 5) as u32 * 2)
            } else {
                tiny_fifo(14, seed)
            };
            let ctx = LnsContext::new(&g, fifo.makespan + 60);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            for j in 0..g.len() as u32 {
                let mut st = StartState::new(&g, &ctx, &fifo.starts);
                // A second attempt out as well: the GPU sweep reads around its ghost.
                let other = (j + 1 + below(&mut rng, g.len() as u64 - 1) as u32) % g.len() as u32;
                st.remove(&g, j);
                st.remove(&g, other);
                st.insert(
                    &g,
                    other,
                    fifo.starts[other as usize] + below(&mut rng, 9) as i64,
                );
                let old = fifo.starts[j as usize];
                let half = 1 + below(&mut rng, 120) as i64;
                let (lo, hi) = window_of(&g, &ctx, j, old, Some(half));
                let fits = |st: &StartState, s: i64| st.violation(&g, j, s, true).is_none();
                feasible_starts(&g, &st, j, lo, hi, &mut ws);
                for s in lo..=hi {
                    let inside = ws.feasible.iter().any(|&(a, b)| a <= s && s <= b);
                    assert_eq!(inside, fits(&st, s), "seed {seed}, attempt {j} at {s}");
                    infeasible += usize::from(!inside);
                }
                for objective in [Objective::Gpu, Objective::Cache] {
                    let value = |st: &mut StartState, s: i64| -> u128 {
                        match objective {
                            Objective::Gpu => {
                                st.prepare_gpu_query(&g).uncovered(&g, &ctx, j, s) as u128
                            }
                            Objective::Cache => {
                                st.cache_uncovered_within(&g, j, s, u128::MAX).unwrap()
                            }
                        }
                    };
                    match objective {
                        Objective::Gpu => {
                            gpu_best(&g, &ctx, &st.prepare_gpu_query(&g), j, (lo, hi), &mut ws)
                        }
                        Objective::Cache => cache_best(&g, &st, j, (lo, hi), &mut ws),
                    }
                    let fitting: Vec<i64> = (lo..=hi).filter(|&s| fits(&st, s)).collect();
                    let brute = fitting.iter().map(|&s| (value(&mut st, s), s)).min();
                    assert_eq!(
                        ws.best.first().map(|b| b.0),
                        brute.map(|b| b.0),
                        "seed {seed}, {objective:?}, attempt {j} in [{lo}, {hi}]"
                    );
                    for &(v, s) in &ws.best.clone() {
                        assert!(fits(&st, s), "seed {seed}: {s} does not fit");
                        assert_eq!(
                            v,
                            value(&mut st, s),
                            "seed {seed}, {objective:?}, attempt {j} at {s}"
                        );
                    }
                    if let (Some(b), true) = (brute, fits(&st, old.clamp(lo, hi.max(lo)))) {
                        beat_old += usize::from(b.0 < value(&mut st, old.clamp(lo, hi.max(lo))));
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 500, "{checked} windows checked");
        assert!(infeasible > 1000, "{infeasible} infeasible starts");
        assert!(
            beat_old > 10,
            "{beat_old} windows with a start better than the old one"
        );
    }

    #[test]
    fn incremental_values_equal_a_full_recomputation_and_stay_feasible() {
        let (g, fifo) = small_deepswe_fifo(30, 4, 10);
        let mut scratch = Scratch::new();
        let ctx = LnsContext::new(&g, fifo.makespan);
        let st = StartState::new(&g, &ctx, &fifo.starts);
        assert_eq!(st.gpu_union, fifo.gpu_union);
        assert_eq!(st.cache_byte_ns, fifo.cache_byte_ns);
        for (objective, window_every, kick_after) in [Objective::Gpu, Objective::Cache]
            .into_iter()
            .flat_map(|o| [(o, 0, 0), (o, 3, 0), (o, 0, 20)])
        {
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let params = ChainParams {
                moves: 300,
                max_removed: 3,
                late_acceptance: 16,
                window_every,
                kick_after,
                kick_removed: 8,
            };
            let out = run_chain(&g, &ctx, &fifo.starts, objective, params, &mut rng);
            assert_eq!(out.moves, 300);
            assert!(out.accepted > 0);
            assert_eq!(
                out.kicks > 0,
                kick_after > 0,
                "{objective:?}: {} kicks",
                out.kicks
            );
            let best = out
                .archive
                .iter()
                .map(|p| match objective {
                    Objective::Gpu => p.gpu_union as u128,
                    Objective::Cache => p.cache_byte_ns,
                })
                .min()
                .unwrap();
            let fifo_value = match objective {
                Objective::Gpu => fifo.gpu_union as u128,
                Objective::Cache => fifo.cache_byte_ns,
            };
            assert!(best < fifo_value, "{objective:?}: {best} !< {fifo_value}");
            // Offered once each, in the order visited.
            assert!(
                out.archive
                    .windows(2)
                    .all(|w| w[0].found_at_move < w[1].found_at_move)
            );
            for p in &out.archive {
                let mk = p
                    .starts
                    .iter()
                    .zip(&g.duration)
                    .map(|(s, d)| s + d)
                    .max()
                    .unwrap();
                assert!(mk <= fifo.makespan);
                assert_eq!(p.makespan, mk);
                assert!(p.starts.iter().all(|&s| s >= 0));
                assert_eq!(p.gpu_union, gpu_union(&g, &p.starts, mk, &mut scratch));
                let order = start_order_of(&p.starts);
                assert_eq!(
                    p.cache_byte_ns,
                    cache_byte_ns(&g, &p.starts, &order, &mut scratch)
                );
                // Concurrency and both caps at every start instant.
                for &t in &p.starts {
                    let running: Vec<usize> = (0..g.len())
                        .filter(|&j| p.starts[j] <= t && t < p.starts[j] + g.duration[j])
                        .collect();
                    assert!(running.len() as i64 <= g.concurrency);
                    assert!(running.iter().map(|&j| g.cores[j]).sum::<i64>() <= g.cap_cores);
                    assert!(running.iter().map(|&j| g.mem[j]).sum::<i64>() <= g.cap_mem);
                }
            }
        }
    }
}
