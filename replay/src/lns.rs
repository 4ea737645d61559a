//! Neighbourhood search on start times (issue 7): from a feasible schedule, remove one to a
//! few attempts (at random, by shared blob, by time window, or from the tail), reinsert each
//! at its best feasible start, and accept by late acceptance. Schedules found this way need
//! not be list schedules; feasibility (K, both caps, D) is checked directly against a
//! profile of the other attempts, and the independent validator checks every selected one.
//!
//! Everything is exact integer arithmetic on the nanosecond grid. The GPU union and the
//! cache byte-ns are kept incrementally: removing or inserting an attempt changes them by
//! its uncovered request time (its requests are disjoint) and, per blob, by its uncovered
//! lifetime, both read from the gap sets of the others' covers ([`crate::cover`]).

use crate::cover::{BlobCover, RequestCover};
use crate::evaluate::{GridInstance, Scratch, evaluate_starts};
use crate::profile::{StepProfile, Use};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::RngCore;
use std::collections::BTreeSet;

/// Most jumps of a feasible-start search from one candidate start (a candidate whose
/// search needs more is dropped; the attempt's old start always remains a candidate).
const FEASIBLE_STEPS: usize = 4;

/// Which objective a chain minimizes (the other one breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// GPU union of all requests.
    Gpu,
    /// Cache byte-ns.
    Cache,
}

/// Knobs of one chain (counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainParams {
    /// Moves (each removes and reinserts a few attempts).
    pub moves: u32,
    /// Most attempts removed by one move.
    pub max_removed: u32,
    /// Late-acceptance history length.
    pub late_acceptance: u32,
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
}

/// Static structure shared by every chain of a workload.
#[derive(Debug, Clone)]
pub struct LnsContext {
    /// Users of each blob.
    blob_users: Vec<Vec<u32>>,
    /// Longest duration among a blob's users, ns.
    blob_dmax: Vec<i64>,
    /// Longest duration, ns.
    dmax: i64,
    /// The deadline D, ns.
    deadline: i64,
    /// Bucket width of the request cover index, as a shift.
    shift: u32,
    /// Prefix sums of the request lengths (aligned with `request_start`, one longer).
    request_prefix: Vec<i64>,
}

impl LnsContext {
    /// The deadline D, ns.
    pub fn deadline(&self) -> i64 {
        self.deadline
    }

    /// Structure of a workload with deadline `deadline`.
    pub fn new(g: &GridInstance, deadline: i64) -> Self {
        let mut blob_users = vec![Vec::new(); g.blob_bytes.len()];
        let mut blob_dmax = vec![0i64; g.blob_bytes.len()];
        for j in 0..g.len() {
            for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
                blob_users[b as usize].push(j as u32);
                blob_dmax[b as usize] = blob_dmax[b as usize].max(g.duration[j]);
            }
        }
        let target = (g.request_count() / 8).max(1) as u64;
        let span = deadline.max(1) as u64;
        let mut shift = 0u32;
        while (span >> shift) > target {
            shift += 1;
        }
        LnsContext {
            blob_users,
            blob_dmax,
            dmax: g.duration.iter().copied().max().unwrap_or(0),
            deadline,
            shift,
            request_prefix: std::iter::once(0)
                .chain(
                    g.request_start
                        .iter()
                        .zip(&g.request_end)
                        .scan(0i64, |acc, (s, e)| {
                            *acc += e - s;
                            Some(*acc)
                        }),
                )
                .collect(),
        }
    }
}

/// The chain's state: starts plus indexes of the placed attempts, all kept between moves.
#[derive(Debug, Clone)]
struct StartState {
    starts: Vec<i64>,
    /// Placed lifetimes, (start, end, attempt).
    life: BTreeSet<(i64, i64, u32)>,
    /// Placed (end, attempt).
    by_end: BTreeSet<(i64, u32)>,
    /// Per blob, its placed users' lifetimes and the gaps of their union.
    blobs: Vec<BlobCover>,
    /// The placed requests' cover (per-bucket counts and the gaps of their union).
    cover: Option<RequestCover>,
    /// Running count, cores and memory over time.
    profile: StepProfile,
    /// Whether each attempt is placed.
    placed: Vec<bool>,
    /// Whether the request cover follows every insert and remove at once (the GPU chain
    /// reads it at every candidate start), or only when [`StartState::sync_cover`] runs.
    eager_cover: bool,
    /// Per attempt, the start its requests have in the cover (`None`: not in it).
    cover_at: Vec<Option<i64>>,
    /// Attempts inserted or removed since the cover was last brought up to date.
    stale: Vec<u32>,
    /// Whether each attempt is in `stale`.
    is_stale: Vec<bool>,
    /// GPU union of the requests in the cover (current after a sync).
    gpu_union: i64,
    /// Reinsertions decided by the other objective so far.
    tie_breaks: u64,
    cache_byte_ns: u128,
}

impl StartState {
    fn empty(g: &GridInstance, ctx: &LnsContext, with_covers: bool) -> Self {
        let mean = if g.is_empty() {
            1
        } else {
            g.duration.iter().sum::<i64>() / g.len() as i64
        };
        StartState {
            starts: vec![0; g.len()],
            life: BTreeSet::new(),
            by_end: BTreeSet::new(),
            blobs: if with_covers {
                ctx.blob_dmax.iter().map(|&d| BlobCover::new(d)).collect()
            } else {
                Vec::new()
            },
            cover: with_covers.then(|| {
                RequestCover::new(
                    ctx.shift,
                    (ctx.deadline.max(0) >> ctx.shift) as usize + 1,
                    g.request_count(),
                )
            }),
            profile: StepProfile::new(mean),
            placed: vec![false; g.len()],
            eager_cover: true,
            cover_at: vec![None; g.len()],
            stale: Vec::new(),
            is_stale: vec![false; g.len()],
            gpu_union: 0,
            tie_breaks: 0,
            cache_byte_ns: 0,
        }
    }

    /// The state of a whole schedule; its objective values come from the evaluator's sweeps
    /// (equal, exactly, to inserting the attempts one by one).
    fn new(g: &GridInstance, ctx: &LnsContext, starts: &[i64]) -> Self {
        let mut st = StartState::empty(g, ctx, true);
        let mut lives: Vec<Vec<(i64, i64, u32)>> = vec![Vec::new(); g.blob_bytes.len()];
        let mut intervals: Vec<(i64, i64)> = Vec::with_capacity(g.request_count());
        for (j, &s) in starts.iter().enumerate() {
            let j32 = j as u32;
            st.place_profile(g, j32, s);
            let e = s + g.duration[j];
            for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
                lives[b as usize].push((s, e, j32));
            }
            st.cover_at[j] = Some(s);
            let cover = st.cover.as_mut().expect("covers");
            for k in g.request_first[j]..g.request_first[j + 1] {
                let (x, y) = (s + g.request_start[k], s + g.request_end[k]);
                cover.insert_unindexed(x, y, k as u32);
                intervals.push((x, y));
            }
        }
        st.cover
            .as_mut()
            .expect("covers")
            .rebuild_gaps(&mut intervals);
        st.blobs = lives
            .into_iter()
            .zip(&ctx.blob_dmax)
            .map(|(l, &d)| BlobCover::from_lifetimes(l, d))
            .collect();
        let exact = evaluate_starts(g, starts, &mut Scratch::new());
        st.gpu_union = exact.gpu_union;
        st.cache_byte_ns = exact.cache_byte_ns;
        st
    }

    fn use_of(g: &GridInstance, j: u32) -> Use {
        let j = j as usize;
        [1, g.cores[j], g.mem[j]]
    }

    fn caps(g: &GridInstance) -> Use {
        [g.concurrency, g.cap_cores, g.cap_mem]
    }

    /// Length of `j`'s requests (offsets) inside `[lo, hi)` (offsets too).
    #[inline]
    fn request_measure(g: &GridInstance, ctx: &LnsContext, j: usize, lo: i64, hi: i64) -> i64 {
        let (first, last) = (g.request_first[j], g.request_first[j + 1]);
        let starts = &g.request_start[first..last];
        let ends = &g.request_end[first..last];
        let i = ends.partition_point(|&e| e <= lo);
        let k = i + starts[i..].partition_point(|&s| s < hi);
        if i >= k {
            return 0;
        }
        ctx.request_prefix[first + k]
            - ctx.request_prefix[first + i]
            - (lo - starts[i]).max(0)
            - (ends[k - 1] - hi).max(0)
    }

    /// Request time of `j` at start `s` not covered by the placed attempts' requests, or
    /// `None` as soon as it exceeds `bound`: the overlap of its requests with the gaps of
    /// the placed requests' union.
    fn gpu_uncovered_within(
        &self,
        g: &GridInstance,
        ctx: &LnsContext,
        j: u32,
        s: i64,
        bound: i64,
    ) -> Option<i64> {
        let ju = j as usize;
        let e = s + g.duration[ju];
        let cover = self.cover.as_ref().expect("covers");
        let mut unc = 0i64;
        for &(a, b) in cover.gaps().overlapping(s, e) {
            unc += Self::request_measure(g, ctx, ju, a.max(s) - s, b.min(e) - s);
            if unc > bound {
                return None;
            }
        }
        Some(unc)
    }

    /// Request time of `j` at start `s` not covered by the placed attempts' requests.
    fn gpu_uncovered(&self, g: &GridInstance, ctx: &LnsContext, j: u32, s: i64) -> i64 {
        self.gpu_uncovered_within(g, ctx, j, s, i64::MAX)
            .unwrap_or(i64::MAX)
    }

    /// Byte-ns of `j`'s lifetime at start `s` not covered by the placed users of its blobs,
    /// or `None` as soon as it exceeds `bound`.
    fn cache_uncovered_within(
        &self,
        g: &GridInstance,
        j: u32,
        s: i64,
        bound: u128,
    ) -> Option<u128> {
        let ju = j as usize;
        let (x, y) = (s, s + g.duration[ju]);
        let mut total = 0u128;
        for &b in &g.blob_ids[g.blob_first[ju]..g.blob_first[ju + 1]] {
            let unc = self.blobs[b as usize].uncovered(x, y);
            total += u128::from(g.blob_bytes[b as usize]) * unc as u128;
            if total > bound {
                return None;
            }
        }
        Some(total)
    }

    /// Byte-ns of `j`'s lifetime at start `s` not covered by the placed users of its blobs.
    fn cache_uncovered(&self, g: &GridInstance, j: u32, s: i64) -> u128 {
        self.cache_uncovered_within(g, j, s, u128::MAX)
            .unwrap_or(u128::MAX)
    }

    /// Add `j` at `s` to the lifetime sets and the profile.
    fn place_profile(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        let e = s + g.duration[ju];
        self.starts[ju] = s;
        self.placed[ju] = true;
        self.life.insert((s, e, j));
        self.by_end.insert((e, j));
        if e > s {
            self.profile.insert(j, s, e, Self::use_of(g, j));
        }
    }

    /// Take `j` (placed at `self.starts[j]`) out of the lifetime sets and the profile.
    fn unplace_profile(&mut self, g: &GridInstance, j: u32) {
        let ju = j as usize;
        let s = self.starts[ju];
        let e = s + g.duration[ju];
        self.placed[ju] = false;
        self.life.remove(&(s, e, j));
        self.by_end.remove(&(e, j));
        if e > s {
            self.profile.remove(j, s, e, Self::use_of(g, j));
        }
    }

    /// Place `j` at `s`, adding its uncovered request time and byte-ns to the values.
    fn insert(&mut self, g: &GridInstance, j: u32, s: i64) {
        self.place_profile(g, j, s);
        let ju = j as usize;
        let e = s + g.duration[ju];
        if self.eager_cover {
            self.cover_insert(g, j, s);
        } else {
            self.mark_stale(j);
        }
        for &b in &g.blob_ids[g.blob_first[ju]..g.blob_first[ju + 1]] {
            let unc = self.blobs[b as usize].insert(s, e, j);
            self.cache_byte_ns += u128::from(g.blob_bytes[b as usize]) * unc as u128;
        }
    }

    /// Take `j` out, subtracting the request time and byte-ns only it covered.
    fn remove(&mut self, g: &GridInstance, j: u32) {
        let ju = j as usize;
        let s = self.starts[ju];
        let e = s + g.duration[ju];
        self.unplace_profile(g, j);
        if self.eager_cover {
            self.cover_remove(g, j, s);
        } else {
            self.mark_stale(j);
        }
        for &b in &g.blob_ids[g.blob_first[ju]..g.blob_first[ju + 1]] {
            let unc = self.blobs[b as usize].remove(s, e, j);
            self.cache_byte_ns -= u128::from(g.blob_bytes[b as usize]) * unc as u128;
        }
    }

    /// Put `j`'s requests at start `s` into the cover.
    fn cover_insert(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        let cover = self.cover.as_mut().expect("covers");
        for k in g.request_first[ju]..g.request_first[ju + 1] {
            self.gpu_union += cover.insert(s + g.request_start[k], s + g.request_end[k], k as u32);
        }
        self.cover_at[ju] = Some(s);
    }

    /// Take `j`'s requests (at start `s`) out of the cover.
    fn cover_remove(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        let cover = self.cover.as_mut().expect("covers");
        for k in g.request_first[ju]..g.request_first[ju + 1] {
            self.gpu_union -= cover.remove(s + g.request_start[k], s + g.request_end[k], k as u32);
        }
        self.cover_at[ju] = None;
    }

    fn mark_stale(&mut self, j: u32) {
        if !self.is_stale[j as usize] {
            self.is_stale[j as usize] = true;
            self.stale.push(j);
        }
    }

    /// Bring the request cover and the GPU union up to date with the placed attempts. An
    /// attempt taken out and put back at the same start costs nothing (the cache chain's
    /// rejected moves and most of its accepted ones).
    fn sync_cover(&mut self, g: &GridInstance) {
        let stale = std::mem::take(&mut self.stale);
        // Removals first, then insertions: the union's value does not depend on the order,
        // and the cover's state does not either (its gaps are those of the union).
        for &j in &stale {
            let ju = j as usize;
            let want = self.placed[ju].then_some(self.starts[ju]);
            if let Some(at) = self.cover_at[ju]
                && want != Some(at)
            {
                self.cover_remove(g, j, at);
            }
        }
        for &j in &stale {
            let ju = j as usize;
            self.is_stale[ju] = false;
            let want = self.placed[ju].then_some(self.starts[ju]);
            if let Some(s) = want
                && self.cover_at[ju].is_none()
            {
                self.cover_insert(g, j, s);
            }
        }
        self.stale = stale;
        self.stale.clear();
    }

    /// First (`forward`) or last time in `[s, s + d)` at which `j` would break K or a cap
    /// next to the placed attempts, with the earliest end (forward) or latest start
    /// (backward) among the attempts running then (see [`StepProfile::violation`]).
    fn violation(&self, g: &GridInstance, j: u32, s: i64, forward: bool) -> Option<i64> {
        let e = s + g.duration[j as usize];
        self.profile
            .violation(s, e, Self::use_of(g, j), Self::caps(g), forward)
    }

    /// First-fit placement of `j`: the earliest feasible start at or after `hint`, else
    /// right after every placed attempt has ended; `None` past D.
    fn first_fit(&self, g: &GridInstance, ctx: &LnsContext, j: u32, hint: i64) -> Option<i64> {
        let d = g.duration[j as usize];
        let latest = ctx.deadline - d;
        let mut s = hint.max(0);
        for _ in 0..256 {
            if s > latest {
                return None;
            }
            match self.violation(g, j, s, true) {
                None => return Some(s),
                Some(next) => s = next,
            }
        }
        let after = self.by_end.last().map_or(0, |p| p.0).max(s);
        (after <= latest).then_some(after)
    }

    /// Earliest feasible start `>= s` (forward) or latest `<= s` (backward) within
    /// `[0, D - d]`, if one is found within a bounded number of steps.
    fn feasible_start(
        &self,
        g: &GridInstance,
        ctx: &LnsContext,
        j: u32,
        s: i64,
        forward: bool,
    ) -> Option<i64> {
        let d = g.duration[j as usize];
        let latest = ctx.deadline - d;
        if latest < 0 {
            return None;
        }
        let mut s = s.clamp(0, latest);
        if forward {
            // The same queries as below, in one pass.
            return self.profile.forward_search(
                s,
                d,
                Self::use_of(g, j),
                Self::caps(g),
                latest,
                FEASIBLE_STEPS,
            );
        }
        for _ in 0..FEASIBLE_STEPS {
            match self.violation(g, j, s, false) {
                None => return Some(s),
                Some(next) => {
                    s = next - d;
                    if s < 0 || s > latest {
                        return None;
                    }
                }
            }
        }
        None
    }
}

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

fn below(r: &mut ChaCha8Rng, n: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX % n) - 1;
    loop {
        let x = r.next_u64();
        if x <= zone {
            return x % n;
        }
    }
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
fn reinsert(
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
        st.sync_cover(g);
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

fn cost(st: &StartState, objective: Objective) -> u128 {
    match objective {
        Objective::Gpu => st.gpu_union as u128,
        Objective::Cache => st.cache_byte_ns,
    }
}

/// Which attempts one move removes.
fn removal_set(
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

/// Whether `b` makes `a` redundant, both as (GPU, cache, makespan): at least as good on
/// both objectives, and better on one or (equal on both) no slower. The chains' archives and
/// the search's Pareto front keep points by it.
pub(crate) fn dominated_by(a: (i64, u128, i64), b: (i64, u128, i64)) -> bool {
    b.0 <= a.0 && b.1 <= a.1 && (b.0 < a.0 || b.1 < a.1 || b.2 <= a.2)
}

impl StartState {
    /// Latest end of the placed attempts, ns.
    fn makespan(&self) -> i64 {
        self.by_end.last().map_or(0, |p| p.0)
    }

    fn point(&self, at: u64) -> ChainPoint {
        ChainPoint {
            starts: self.starts.clone(),
            gpu_union: self.gpu_union,
            cache_byte_ns: self.cache_byte_ns,
            makespan: self.makespan(),
            found_at_move: at,
        }
    }
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
            let gone = archive.remove(i);
            for k in kept.iter_mut() {
                if matches!(**k, Kept::InArchive(at) if at == gone.found_at_move) {
                    **k = Kept::Owned(gone.clone());
                }
            }
        } else {
            i += 1;
        }
    }
    archive.push(st.point(at));
}

/// The search's tie rule on exact values: `(v, mk)` beats `(best, best_mk)` when `v` is
/// lower by more than a relative 1e-9, or within it with a smaller makespan.
fn beats(v: u128, mk: i64, best: u128, best_mk: i64) -> bool {
    let (a, b) = (v as f64, best as f64);
    let tol = 1e-9 * a.abs().max(b.abs());
    if (a - b).abs() <= tol {
        mk < best_mk
    } else {
        a < b
    }
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
    // The cache chain brings the request cover up to date only where it is read: at a GPU
    // tie-break and for the archive after an accepted move.
    st.eager_cover = objective == Objective::Gpu;
    let mut out = ChainOutcome {
        archive: Vec::new(),
        moves: 0,
        infeasible: 0,
        accepted: 0,
        moved: 0,
        tie_breaks: 0,
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
    for m in 0..u64::from(params.moves) {
        out.moves += 1;
        let before = cost(&st, objective);
        let set = removal_set(g, ctx, &st, params.max_removed, rng);
        let olds: Vec<i64> = set.iter().map(|&j| st.starts[j as usize]).collect();
        for &j in &set {
            st.remove(g, j);
        }
        let mut order = set.clone();
        for i in (1..order.len()).rev() {
            let k = below(rng, i as u64 + 1) as usize;
            order.swap(i, k);
        }
        let mut placed: Vec<u32> = Vec::new();
        let mut ok = true;
        for &j in &order {
            let old = olds[set.iter().position(|&x| x == j).unwrap_or(0)];
            if reinsert(g, ctx, &mut st, j, old, objective, rng) {
                placed.push(j);
            } else {
                ok = false;
                break;
            }
        }
        let after = cost(&st, objective);
        let slot = (m as usize) % late;
        let accept = ok && (after <= before || after <= history[slot]);
        if accept {
            out.accepted += 1;
            if set
                .iter()
                .zip(&olds)
                .any(|(&j, &s)| st.starts[j as usize] != s)
            {
                out.moved += 1;
            }
            st.sync_cover(g);
            archive_add(&mut out.archive, &st, m + 1, &mut [&mut fastest, &mut best]);
            let (mk, c) = (st.makespan(), cost(&st, objective));
            if mk < fastest_mk {
                fastest = Kept::of(&st, &out.archive, m + 1);
                fastest_mk = mk;
            }
            if beats(c, mk, best_cost, best_mk) {
                best = Kept::of(&st, &out.archive, m + 1);
                (best_cost, best_mk) = (c, mk);
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
    use crate::evaluate::{Plan, cache_byte_ns, evaluate, gpu_union, start_order_of};
    use crate::synthetic::{SyntheticShape, synthetic_instance};
    use rand_chacha::rand_core::SeedableRng;

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
        assert!(beats(v + 1, 9, v, 10));
        assert!(!beats(v + 1, 10, v, 9));
        assert!(!beats(v + 1, 10, v, 10));
        assert!(!beats(v + 10_000, 1, v, 10));
        assert!(beats(v - 10_000, 99, v, 10));
    }

    #[test]
    fn incremental_values_equal_a_full_recomputation_and_stay_feasible() {
        let mut shape = SyntheticShape::deepswe();
        shape.tasks = 30;
        shape.repos = 4;
        shape.requests_per_attempt = 10;
        let inst = synthetic_instance(&shape).unwrap();
        let g = GridInstance::new(&inst);
        let mut scratch = Scratch::new();
        let fifo = evaluate(
            &g,
            &Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>()),
            &mut scratch,
        )
        .unwrap();
        let ctx = LnsContext::new(&g, fifo.makespan);
        let st = StartState::new(&g, &ctx, &fifo.starts);
        assert_eq!(st.gpu_union, fifo.gpu_union);
        assert_eq!(st.cache_byte_ns, fifo.cache_byte_ns);
        for objective in [Objective::Gpu, Objective::Cache] {
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let params = ChainParams {
                moves: 300,
                max_removed: 3,
                late_acceptance: 16,
            };
            let out = run_chain(&g, &ctx, &fifo.starts, objective, params, &mut rng);
            assert_eq!(out.moves, 300);
            assert!(out.accepted > 0);
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
