//! A chain's state: the starts plus the indexes kept between moves (lifetime sets, the step
//! profile of K and both caps, per-blob lifetime covers, the request cover), with the exact
//! incremental GPU union and cache byte-ns, and the feasible-start searches.
//!
//! The request cover is brought up to date lazily. A removed attempt stays in it as a
//! *ghost* until the cover must equal the placed attempts; a GPU query subtracts the ghosts'
//! exclusive parts instead ([`crate::cover::RequestCover::exclusive_parts`]), so an attempt
//! taken out and put back at the same start, most of the chains' reinsertions, never
//! touches the cover.
//!
//! The blob covers can be kept the same way (the GPU chain, which reads them only at a
//! tie-break and for the archive): a removed attempt stays in them until
//! [`StartState::sync_blobs`], so one put back where it was costs nothing there either; a
//! tie-break reads the covers around those ghosts
//! ([`StartState::cache_uncovered_around_ghosts`]).

use super::context::{BlobGroups, LnsContext};
use super::moves::MoveScratch;
use super::{ChainPoint, FEASIBLE_STEPS};
use crate::cover::{BlobCover, GapSet, RequestCover};
use crate::profile::{StepProfile, Use};
use schedule::evaluate::{GridInstance, Scratch, evaluate_starts};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The chain's state: starts plus indexes of the placed attempts, all kept between moves.
#[derive(Debug, Clone)]
pub(super) struct StartState {
    pub(super) starts: Vec<i64>,
    /// Placed lifetimes, (start, end, attempt). Between a move's removals and its last
    /// reinsertion a removed attempt stays here where it was (read only when every
    /// attempt is placed: see [`StartState::life_current`]), so one put back where it was
    /// costs nothing here.
    pub(super) life: BTreeSet<(i64, i64, u32)>,
    /// Placed (end, attempt), kept like `life`.
    pub(super) by_end: BTreeSet<(i64, u32)>,
    /// Per attempt, the start it has in `life` and `by_end` (`None`: not in them).
    life_at: Vec<Option<i64>>,
    /// Attempts removed and not placed again.
    removed: usize,
    /// Per blob group (`groups`), its placed users' lifetimes and the gaps of their union.
    pub(super) blobs: Vec<BlobCover>,
    /// The workload's blob groups (shared with the context).
    groups: Arc<BlobGroups>,
    /// The placed requests' cover (per-bucket counts and the gaps of their union).
    pub(super) cover: Option<RequestCover>,
    /// Running count, cores and memory over time.
    pub(super) profile: StepProfile,
    /// Whether each attempt is placed.
    pub(super) placed: Vec<bool>,
    /// Per attempt, the start its requests have in the cover (`None`: not in it).
    pub(super) cover_at: Vec<Option<i64>>,
    /// Attempts inserted or removed since the cover was last brought up to date.
    pub(super) stale: Vec<u32>,
    /// Whether each attempt is in `stale`.
    pub(super) is_stale: Vec<bool>,
    /// The parts of the cover only ghosts (removed attempts still in the cover) cover:
    /// gaps of the placed attempts' requests besides the cover's own gaps.
    pub(super) ghost_parts: Vec<(i64, i64)>,
    /// Whether `ghost_parts` is current (see [`StartState::prepare_gpu_query`]), inside
    /// `ghost_parts_window`.
    ghost_parts_current: bool,
    /// Where `ghost_parts` is exact, `[lo, hi)` (the whole line after a full preparation).
    ghost_parts_window: (i64, i64),
    /// The ghosts' request intervals (scratch of [`StartState::prepare_gpu_query`]).
    ghost_requests: Vec<(i64, i64)>,
    /// GPU union of the requests in the cover (that of the placed attempts after
    /// [`StartState::sync_cover`]).
    pub(super) gpu_union: i64,
    /// Whether the blob covers and `cache_byte_ns` follow the placed attempts only at
    /// [`StartState::sync_blobs`] (else at every insert and remove).
    lazy_blobs: bool,
    /// Per attempt, the start its lifetime has in the blob covers (`None`: not in them).
    blob_at: Vec<Option<i64>>,
    /// Attempts inserted or removed since the blob covers were last synced (lazy only).
    blob_stale: Vec<u32>,
    /// Reinsertions decided by the other objective so far.
    pub(super) tie_breaks: u64,
    /// Vectors reused by every reinsertion.
    pub(super) scratch: MoveScratch,
    pub(super) cache_byte_ns: u128,
}

impl StartState {
    pub(super) fn empty(g: &GridInstance, ctx: &LnsContext, with_covers: bool) -> Self {
        StartState {
            starts: vec![0; g.len()],
            life: BTreeSet::new(),
            by_end: BTreeSet::new(),
            life_at: vec![None; g.len()],
            removed: 0,
            groups: Arc::clone(&ctx.groups),
            blobs: if with_covers {
                ctx.groups
                    .group_dmax
                    .iter()
                    .map(|&d| BlobCover::new(d))
                    .collect()
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
            profile: StepProfile::new(ctx.mean_duration),
            placed: vec![false; g.len()],
            cover_at: vec![None; g.len()],
            stale: Vec::new(),
            is_stale: vec![false; g.len()],
            ghost_parts: Vec::new(),
            ghost_parts_current: true,
            ghost_parts_window: (i64::MIN, i64::MAX),
            ghost_requests: Vec::new(),
            gpu_union: 0,
            lazy_blobs: false,
            blob_at: vec![None; g.len()],
            blob_stale: Vec::new(),
            tie_breaks: 0,
            scratch: MoveScratch::default(),
            cache_byte_ns: 0,
        }
    }

    /// The state of a whole schedule; its objective values come from the evaluator's sweeps
    /// (equal, exactly, to inserting the attempts one by one).
    pub(super) fn new(g: &GridInstance, ctx: &LnsContext, starts: &[i64]) -> Self {
        let mut st = StartState::empty(g, ctx, true);
        let mut lives: Vec<Vec<(i64, i64, u32)>> = vec![Vec::new(); ctx.groups.group_bytes.len()];
        let mut intervals: Vec<(i64, i64)> = Vec::with_capacity(g.request_count());
        for (j, &s) in starts.iter().enumerate() {
            let j32 = j as u32;
            st.place_profile(g, j32, s);
            let e = s + g.duration[j];
            for &k in ctx.groups.of(j32) {
                lives[k as usize].push((s, e, j32));
            }
            st.cover_at[j] = Some(s);
            st.blob_at[j] = Some(s);
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
            .zip(&ctx.groups.group_dmax)
            .map(|(l, &d)| BlobCover::from_lifetimes(l, d))
            .collect();
        let exact = evaluate_starts(g, starts, &mut Scratch::new());
        st.gpu_union = exact.gpu_union;
        st.cache_byte_ns = exact.cache_byte_ns;
        st
    }

    /// Keep the blob covers and the cache value lazily (see [`StartState::sync_blobs`]).
    pub(super) fn set_lazy_blobs(&mut self, lazy: bool) {
        self.lazy_blobs = lazy;
    }

    /// Whether the blob covers and `cache_byte_ns` are those of the placed attempts.
    pub(super) fn blobs_current(&self) -> bool {
        self.blob_stale.is_empty()
    }

    pub(super) fn use_of(g: &GridInstance, j: u32) -> Use {
        let j = j as usize;
        [1, g.cores[j], g.mem[j]]
    }

    pub(super) fn caps(g: &GridInstance) -> Use {
        [g.concurrency, g.cap_cores, g.cap_mem]
    }

    /// Length of `j`'s requests (offsets) inside `[lo, hi)` (offsets too).
    #[inline]
    pub(super) fn request_measure(
        g: &GridInstance,
        ctx: &LnsContext,
        j: usize,
        lo: i64,
        hi: i64,
    ) -> i64 {
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

    /// Byte-ns of `j`'s lifetime at start `s` not covered by the placed users of its blobs,
    /// or `None` as soon as it exceeds `bound`.
    pub(super) fn cache_uncovered_within(
        &self,
        g: &GridInstance,
        j: u32,
        s: i64,
        bound: u128,
    ) -> Option<u128> {
        let ju = j as usize;
        debug_assert!(self.blobs_current(), "sync_blobs first");
        let (x, y) = (s, s + g.duration[ju]);
        let mut total = 0u128;
        for &k in self.groups.of(j) {
            let unc = self.blobs[k as usize].uncovered(x, y);
            total += self.groups.group_bytes[k as usize] * unc as u128;
            if total > bound {
                return None;
            }
        }
        Some(total)
    }

    /// `j`'s blob groups with their bytes.
    pub(super) fn group_weights(&self, j: u32) -> impl Iterator<Item = (u32, u128)> + '_ {
        self.groups
            .of(j)
            .iter()
            .map(|&k| (k, self.groups.group_bytes[k as usize]))
    }

    /// Whether every attempt the blob covers are out of date for is a *ghost* (removed, its
    /// lifetime still in them) or back where it is in them: then
    /// [`StartState::cache_uncovered_around_ghosts`] answers without a sync.
    pub(super) fn blobs_hold_only_ghosts(&self) -> bool {
        self.blob_stale.iter().all(|&a| {
            let a = a as usize;
            if self.placed[a] {
                self.blob_at[a] == Some(self.starts[a])
            } else {
                self.blob_at[a].is_some()
            }
        })
    }

    /// Byte-ns of `j`'s lifetime at start `s` not covered by the placed users of its blobs,
    /// reading the covers around the ghosts they still hold (see
    /// [`StartState::blobs_hold_only_ghosts`]): a blob whose ghosts' lifetimes miss the
    /// query is read from its gaps, any other by a scan of its users without them.
    pub(super) fn cache_uncovered_around_ghosts(&self, g: &GridInstance, j: u32, s: i64) -> u128 {
        if self.blobs_current() {
            return self
                .cache_uncovered_within(g, j, s, u128::MAX)
                .unwrap_or(u128::MAX);
        }
        debug_assert!(self.blobs_hold_only_ghosts());
        let ju = j as usize;
        let (x, y) = (s, s + g.duration[ju]);
        let is_ghost = |a: u32| {
            let a = a as usize;
            !self.placed[a] && self.blob_at[a].is_some()
        };
        // Whether a ghost's lifetime (where the covers hold it) reaches the query.
        let ghost_near = self.blob_stale.iter().any(|&a| {
            is_ghost(a)
                && self.blob_at[a as usize]
                    .is_some_and(|at| at < y && at + g.duration[a as usize] > x)
        });
        let mut total = 0u128;
        for &k in self.groups.of(j) {
            let cover = &self.blobs[k as usize];
            let unc = if ghost_near {
                cover.uncovered_without(x, y, is_ghost)
            } else {
                cover.uncovered(x, y)
            };
            total += self.groups.group_bytes[k as usize] * unc as u128;
        }
        total
    }

    /// Add `j` at `s` to the lifetime sets and the profile.
    pub(super) fn place_profile(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        let e = s + g.duration[ju];
        self.starts[ju] = s;
        if !self.placed[ju] && self.life_at[ju].is_some() {
            self.removed -= 1;
        }
        self.placed[ju] = true;
        if self.life_at[ju] != Some(s) {
            if let Some(at) = self.life_at[ju] {
                let end = at + g.duration[ju];
                self.life.remove(&(at, end, j));
                self.by_end.remove(&(end, j));
            }
            self.life.insert((s, e, j));
            self.by_end.insert((e, j));
            self.life_at[ju] = Some(s);
        }
        if e > s {
            self.profile.insert(j, s, e, Self::use_of(g, j));
        }
    }

    /// Take `j` (placed at `self.starts[j]`) out of the profile (the lifetime sets keep it
    /// until it is placed again).
    pub(super) fn unplace_profile(&mut self, g: &GridInstance, j: u32) {
        let ju = j as usize;
        let s = self.starts[ju];
        let e = s + g.duration[ju];
        self.placed[ju] = false;
        self.removed += 1;
        if e > s {
            self.profile.remove(j, s, e, Self::use_of(g, j));
        }
    }

    /// Whether `life` and `by_end` hold exactly the placed attempts (no attempt is out).
    pub(super) fn life_current(&self) -> bool {
        self.removed == 0
    }

    /// Place `j` at `s`, adding its uncovered byte-ns to the cache value (and its requests
    /// to the cover at the next sync).
    pub(super) fn insert(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        // A ghost put back where its requests are in the cover: the ghosts' parts lose
        // what its requests cover, and stay current.
        let unghost = self.ghost_parts_current && self.cover_at[ju] == Some(s);
        self.place_profile(g, j, s);
        let e = s + g.duration[ju];
        self.mark_stale(j);
        if unghost {
            self.subtract_requests_from_ghost_parts(g, ju, s);
            self.ghost_parts_current = true;
        }
        if self.lazy_blobs {
            if self.blob_at[ju] != Some(s) {
                self.mark_blob_stale(j);
            }
            return;
        }
        self.blob_insert(j, s, e);
    }

    /// Note that the blob covers no longer hold `j` where it is placed (once per sync).
    fn mark_blob_stale(&mut self, j: u32) {
        if !self.blob_stale.contains(&j) {
            self.blob_stale.push(j);
        }
    }

    fn blob_insert(&mut self, j: u32, s: i64, e: i64) {
        let ju = j as usize;
        for &k in self.groups.of(j) {
            let unc = self.blobs[k as usize].insert(s, e, j);
            self.cache_byte_ns += self.groups.group_bytes[k as usize] * unc as u128;
        }
        self.blob_at[ju] = Some(s);
    }

    fn blob_remove(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        let e = s + g.duration[ju];
        for &k in self.groups.of(j) {
            let unc = self.blobs[k as usize].remove(s, e, j);
            self.cache_byte_ns -= self.groups.group_bytes[k as usize] * unc as u128;
        }
        self.blob_at[ju] = None;
    }

    /// Bring the blob covers and the cache value up to date with the placed attempts (a
    /// no-op unless they are kept lazily). The value is a function of the placed set, so
    /// the order of the updates does not change it.
    pub(super) fn sync_blobs(&mut self, g: &GridInstance) {
        let stale = std::mem::take(&mut self.blob_stale);
        for &j in &stale {
            let ju = j as usize;
            let want = self.placed[ju].then_some(self.starts[ju]);
            if self.blob_at[ju] == want {
                continue;
            }
            if let Some(at) = self.blob_at[ju] {
                self.blob_remove(g, j, at);
            }
            if let Some(s) = want {
                self.blob_insert(j, s, s + g.duration[ju]);
            }
        }
        self.blob_stale = stale;
        self.blob_stale.clear();
    }

    /// Take `j` out, subtracting the byte-ns only it covered (its requests stay in the
    /// cover as a ghost until the next sync; with lazy blob covers its lifetime stays in
    /// them too).
    pub(super) fn remove(&mut self, g: &GridInstance, j: u32) {
        let s = self.starts[j as usize];
        self.unplace_profile(g, j);
        self.mark_stale(j);
        if self.lazy_blobs {
            self.mark_blob_stale(j);
        } else {
            self.blob_remove(g, j, s);
        }
    }

    /// Put `j`'s requests at start `s` into the cover.
    pub(super) fn cover_insert(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        let cover = self.cover.as_mut().expect("covers");
        for k in g.request_first[ju]..g.request_first[ju + 1] {
            self.gpu_union += cover.insert(s + g.request_start[k], s + g.request_end[k], k as u32);
        }
        self.cover_at[ju] = Some(s);
    }

    /// Take `j`'s requests (at start `s`) out of the cover.
    pub(super) fn cover_remove(&mut self, g: &GridInstance, j: u32, s: i64) {
        let ju = j as usize;
        let cover = self.cover.as_mut().expect("covers");
        for k in g.request_first[ju]..g.request_first[ju + 1] {
            self.gpu_union -= cover.remove(s + g.request_start[k], s + g.request_end[k], k as u32);
        }
        self.cover_at[ju] = None;
    }

    pub(super) fn mark_stale(&mut self, j: u32) {
        self.ghost_parts_current = false;
        if !self.is_stale[j as usize] {
            self.is_stale[j as usize] = true;
            self.stale.push(j);
        }
    }

    /// Bring the cover up to date with the placed attempts, except that removed attempts
    /// stay in it as ghosts: an attempt placed at another start than its requests have in
    /// the cover moves there.
    fn sync_placed(&mut self, g: &GridInstance) {
        let mut stale = std::mem::take(&mut self.stale);
        stale.retain(|&j| {
            let ju = j as usize;
            if !self.placed[ju] && self.cover_at[ju].is_some() {
                return true;
            }
            if self.placed[ju] && self.cover_at[ju] != Some(self.starts[ju]) {
                if let Some(at) = self.cover_at[ju] {
                    self.cover_remove(g, j, at);
                }
                self.cover_insert(g, j, self.starts[ju]);
            }
            self.is_stale[ju] = false;
            false
        });
        self.stale = stale;
    }

    /// Bring the request cover and the GPU union up to date with the placed attempts. An
    /// attempt taken out and put back at the same start costs nothing (most reinsertions
    /// of both chains).
    pub(super) fn sync_cover(&mut self, g: &GridInstance) {
        self.sync_placed(g);
        let ghosts = std::mem::take(&mut self.stale);
        for &j in &ghosts {
            let ju = j as usize;
            if let Some(at) = self.cover_at[ju] {
                self.cover_remove(g, j, at);
            }
            self.is_stale[ju] = false;
        }
        self.stale = ghosts;
        self.stale.clear();
        self.ghost_parts.clear();
        self.ghost_parts_current = true;
        self.ghost_parts_window = (i64::MIN, i64::MAX);
    }

    /// Take the requests of `j` at start `s` out of the ghosts' parts.
    fn subtract_requests_from_ghost_parts(&mut self, g: &GridInstance, j: usize, s: i64) {
        let (first, last) = (g.request_first[j], g.request_first[j + 1]);
        let (starts, ends) = (&g.request_start[first..last], &g.request_end[first..last]);
        let mut kept = std::mem::take(&mut self.ghost_requests);
        kept.clear();
        for &(a, b) in &self.ghost_parts {
            let mut k = ends.partition_point(|&e| e <= a - s);
            let mut reach = a;
            while k < starts.len() && starts[k] < b - s && reach < b {
                let (x, y) = (s + starts[k], s + ends[k]);
                k += 1;
                if y <= x {
                    continue;
                }
                if x > reach {
                    kept.push((reach, x));
                }
                reach = reach.max(y);
            }
            if reach < b {
                kept.push((reach, b));
            }
        }
        self.ghost_requests = std::mem::replace(&mut self.ghost_parts, kept);
    }

    /// Make the GPU queries answer for the placed attempts: moved attempts move in the
    /// cover, and the parts only the ghosts cover are found (they are gaps of the placed
    /// attempts' requests). The queries are the returned [`GpuQuery`]'s: it borrows the
    /// state, so nothing can change the state while one is held.
    pub(super) fn prepare_gpu_query(&mut self, g: &GridInstance) -> GpuQuery<'_> {
        self.prepare_gpu_query_within(g, i64::MIN, i64::MAX)
    }

    /// [`StartState::prepare_gpu_query`] for queries inside `[lo, hi)` only: the ghosts'
    /// requests outside it are left out of the parts (they cannot cover anything in it).
    pub(super) fn prepare_gpu_query_within(
        &mut self,
        g: &GridInstance,
        lo: i64,
        hi: i64,
    ) -> GpuQuery<'_> {
        if !(self.ghost_parts_current
            && self.ghost_parts_window.0 <= lo
            && hi <= self.ghost_parts_window.1)
        {
            self.sync_placed(g);
            self.find_ghost_parts(g, lo, hi);
            self.ghost_parts_current = true;
            self.ghost_parts_window = (lo, hi);
        }
        GpuQuery {
            window: self.ghost_parts_window,
            st: self,
        }
    }

    /// Into `ghost_parts`, the parts only the ghosts cover inside `[lo, hi)` (after
    /// [`StartState::sync_placed`]: every attempt still stale is a ghost, removed with its
    /// requests in the cover).
    fn find_ghost_parts(&mut self, g: &GridInstance, lo: i64, hi: i64) {
        let ghosts = &self.stale;
        // Ghosts whose lifetimes (in the cover) do not overlap have disjoint requests
        // (a move removes a few attempts: every pair is checked).
        let life = |j: u32| {
            let at = self.cover_at[j as usize].expect("a ghost is in the cover");
            (at, at + g.duration[j as usize])
        };
        let disjoint = ghosts.iter().enumerate().all(|(i, &a)| {
            let (a0, a1) = life(a);
            ghosts[i + 1..].iter().all(|&b| {
                let (b0, b1) = life(b);
                a1 <= b0 || b1 <= a0
            })
        });
        // The ghosts' requests inside the window: an attempt's requests are sorted and
        // disjoint, so their ends ascend too. (The whole line, the GPU chain's every
        // preparation, needs no search.)
        let whole_line = (lo, hi) == (i64::MIN, i64::MAX);
        let in_window = |j: u32| {
            let ju = j as usize;
            let at = self.cover_at[ju].expect("a ghost is in the cover");
            let all = g.requests_of(ju);
            if whole_line {
                return (at, all);
            }
            let (first, last) = (all.start, all.end);
            let from = first + g.request_end[first..last].partition_point(|&y| at + y <= lo);
            let to = from + g.request_start[from..last].partition_point(|&x| at + x < hi);
            (at, from..to)
        };
        let cover = self.cover.as_mut().expect("covers");
        // Disjoint ghosts whose requests' spans other requests cover whole twice throughout
        // (most preparations) have no part of their own. (Checking overlapping ghosts here
        // request by request was measured to cost more than it saved.)
        if disjoint
            && ghosts.iter().all(|&j| {
                let (at, ks) = in_window(j);
                ks.is_empty() || {
                    let (x, y) = (
                        at + g.request_start[ks.start],
                        at + g.request_end[ks.end - 1],
                    );
                    x < y && cover.thick_over(x, y)
                }
            })
        {
            self.ghost_parts.clear();
            return;
        }
        let mut taken = std::mem::take(&mut self.ghost_requests);
        taken.clear();
        for &j in ghosts {
            let (at, ks) = in_window(j);
            taken.extend(g.shifted(ks, at));
        }
        let is_taken = |id: u32| {
            ghosts
                .iter()
                .any(|&j| g.requests_of(j as usize).contains(&(id as usize)))
        };
        // One ghost's requests are disjoint, so at most one of them covers a bucket whole.
        let depth = if disjoint { 1 } else { ghosts.len() as u32 };
        cover.exclusive_parts(&taken, depth, is_taken, &mut self.ghost_parts);
        self.ghost_requests = taken;
    }

    /// First (`forward`) or last time in `[s, s + d)` at which `j` would break K or a cap
    /// next to the placed attempts, with the earliest end (forward) or latest start
    /// (backward) among the attempts running then (see [`StepProfile::violation`]).
    pub(super) fn violation(&self, g: &GridInstance, j: u32, s: i64, forward: bool) -> Option<i64> {
        let e = s + g.duration[j as usize];
        self.profile
            .violation(s, e, Self::use_of(g, j), Self::caps(g), forward)
    }

    /// First-fit placement of `j`: the earliest feasible start at or after `hint`, else
    /// right after every placed attempt has ended; `None` past D.
    pub(super) fn first_fit(
        &self,
        g: &GridInstance,
        ctx: &LnsContext,
        j: u32,
        hint: i64,
    ) -> Option<i64> {
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
        debug_assert!(self.life_current(), "an attempt is out");
        let after = self.by_end.last().map_or(0, |p| p.0).max(s);
        (after <= latest).then_some(after)
    }

    /// Earliest feasible start `>= s` (forward) or latest `<= s` (backward) within
    /// `[0, D - d]`, if one is found within a bounded number of steps. `useful`: the
    /// caller has no use for a start outside it, so the search stops (`None`) once it can
    /// no longer return one inside (it may still return the start outside it found).
    #[inline]
    pub(super) fn feasible_start(
        &self,
        g: &GridInstance,
        ctx: &LnsContext,
        j: u32,
        s: i64,
        forward: bool,
        useful: (i64, i64),
    ) -> Option<i64> {
        let d = g.duration[j as usize];
        let latest = ctx.deadline - d;
        if latest < 0 {
            return None;
        }
        let s = s.clamp(0, latest);
        let (u, caps) = (Self::use_of(g, j), Self::caps(g));
        let useful = (useful.0.max(0), useful.1.min(latest));
        self.profile
            .feasible_search(s, d, u, caps, useful, FEASIBLE_STEPS, forward)
    }

    /// Where a start of `j` can have cache byte-ns at most `bound` (a superset): for each
    /// of its blob groups `b` (with `bytes_b` bytes in all), the uncovered part of the
    /// lifetime there is at most `c = bound / bytes_b`, so at least `d - c` of the lifetime
    /// lies between the first start and the last end of `b`'s placed users `[L, R]`; hence
    /// the start lies in `[L - c, R - d + c]`. Empty (`lo > hi`) when a group no one else
    /// uses costs more than `bound` alone. (Narrowing it to the stretches that can hold a
    /// whole lifetime when `c` is 0 was measured to cost more than it saved.)
    pub(super) fn cache_useful_starts(&self, g: &GridInstance, j: u32, bound: u128) -> (i64, i64) {
        debug_assert!(self.blobs_current(), "sync_blobs first");
        let ju = j as usize;
        let d = g.duration[ju];
        let (mut lo, mut hi) = (i64::MIN, i64::MAX);
        for &k in self.groups.of(j) {
            let bytes = self.groups.group_bytes[k as usize];
            // Uncovered ns this group may leave; past `d` it bounds nothing.
            let c = match bound.checked_div(bytes) {
                Some(c) if c < d as u128 => c as i64,
                _ => continue,
            };
            match self.blobs[k as usize].hull() {
                Some((first, last)) => {
                    lo = lo.max(first - c);
                    hi = hi.min(last - d + c);
                }
                // No placed user: all `d` uncovered, more than `c`.
                None => return (1, 0),
            }
        }
        (lo, hi)
    }
}

impl StartState {
    /// Latest end of the placed attempts, ns.
    pub(super) fn makespan(&self) -> i64 {
        debug_assert!(self.life_current(), "an attempt is out");
        self.by_end.last().map_or(0, |p| p.0)
    }

    pub(super) fn point(&self, at: u64) -> ChainPoint {
        debug_assert!(self.blobs_current(), "sync_blobs first");
        ChainPoint {
            starts: self.starts.clone(),
            gpu_union: self.gpu_union,
            cache_byte_ns: self.cache_byte_ns,
            makespan: self.makespan(),
            found_at_move: at,
        }
    }
}

/// The GPU queries of a start state whose request cover and ghosts' parts are prepared
/// for a window. Only [`StartState::prepare_gpu_query`] and
/// [`StartState::prepare_gpu_query_within`] make one, and it borrows the state: a query
/// can neither run before the preparation nor after a later insert or remove.
#[derive(Debug, Clone, Copy)]
pub(super) struct GpuQuery<'a> {
    st: &'a StartState,
    /// Where the ghosts' parts are exact, `[lo, hi)`.
    window: (i64, i64),
}

impl<'a> GpuQuery<'a> {
    /// The prepared state (to read it beside the queries).
    pub(super) fn state(&self) -> &'a StartState {
        self.st
    }

    /// Request time of `j` at start `s` not covered by the placed attempts' requests, or
    /// `None` as soon as it exceeds `bound`: the overlap of its requests with the gaps of
    /// the placed requests' union (the cover's gaps and the ghosts' parts, disjoint).
    /// `[s, s + d_j)` must lie inside the prepared window.
    pub(super) fn uncovered_within(
        &self,
        g: &GridInstance,
        ctx: &LnsContext,
        j: u32,
        s: i64,
        bound: i64,
    ) -> Option<i64> {
        let ju = j as usize;
        let e = s + g.duration[ju];
        debug_assert!(
            self.window.0 <= s && e <= self.window.1,
            "prepared for [{}, {}), queried for [{s}, {e})",
            self.window.0,
            self.window.1
        );
        let st = self.st;
        let cover = st.cover.as_ref().expect("covers");
        let ghost_parts = GapSet::overlapping_in(&st.ghost_parts, s, e);
        let mut unc = 0i64;
        for &(a, b) in cover.gaps().overlapping(s, e).iter().chain(ghost_parts) {
            unc += StartState::request_measure(g, ctx, ju, a.max(s) - s, b.min(e) - s);
            if unc > bound {
                return None;
            }
        }
        Some(unc)
    }

    /// Request time of `j` at start `s` not covered by the placed attempts' requests.
    #[cfg(test)]
    pub(super) fn uncovered(&self, g: &GridInstance, ctx: &LnsContext, j: u32, s: i64) -> i64 {
        self.uncovered_within(g, ctx, j, s, i64::MAX)
            .unwrap_or(i64::MAX)
    }
}
