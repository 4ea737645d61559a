//! A step profile of placed lifetimes (running count, cores, memory over time) kept between
//! moves of the start-time search, answering "where would one more attempt break K or a
//! cap" without rescanning the placed attempts.
//!
//! Time is cut into power-of-two buckets (a lifetime spans about eight of them). Each bucket
//! keeps its start and end events sorted (ends before starts at equal times), each with the
//! profile's value just after it less the bucket's `base` (the value just before the
//! bucket), and the component-wise maximum of those (`rmax`). Inserting or removing
//! `[s, e)` edits the events of two buckets and adds to the bases of the buckets in between,
//! so it costs O(its buckets + the two buckets' events). A query walks the buckets of its
//! window, skips those whose maximum cannot break a limit and compares the stored values of
//! the others' events (no event is re-added): forward from its start, backward from its
//! end. Everything is exact integer arithmetic.

/// Resource use of one attempt: count (1), nano-cores, nano-GiB.
pub type Use = [i64; 3];

/// One event of a placed lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Event {
    /// Time, ns.
    t: i64,
    /// The other end of the lifetime (the end for a start event, the start for an end).
    other: i64,
    /// The profile's value just after this event, less the bucket's `base`.
    rel: Use,
    /// The attempt.
    j: u32,
    /// 0 = end, 1 = start (ends sort first at equal times).
    kind: u8,
}

impl Event {
    #[inline]
    fn key(&self) -> (i64, u8, u32) {
        (self.t, self.kind, self.j)
    }
}

#[derive(Debug, Clone, Default)]
struct Bucket {
    /// Profile value just before the bucket's first instant.
    base: Use,
    /// Component-wise maximum of zero and of every event's `rel`: the profile inside the
    /// bucket never exceeds `base + rmax`.
    rmax: Use,
    /// Events in the bucket, sorted by (time, kind, attempt).
    events: Vec<Event>,
}

impl Bucket {
    fn recompute_max(&mut self) {
        let mut mx = [0i64; 3];
        for ev in &self.events {
            for (m, x) in mx.iter_mut().zip(ev.rel) {
                *m = (*m).max(x);
            }
        }
        self.rmax = mx;
    }

    /// `lim` relative to the bucket's base (a value `base + rel` is over `lim` exactly when
    /// `rel` is over this).
    #[inline]
    fn rel_limit(&self, lim: &Use) -> Use {
        [
            lim[0] - self.base[0],
            lim[1] - self.base[1],
            lim[2] - self.base[2],
        ]
    }

    /// Whether the profile could exceed `lim` somewhere in the bucket.
    #[inline]
    fn may_exceed(&self, lim: &Use) -> bool {
        over(&self.rmax, &self.rel_limit(lim))
    }

    /// Number of events at or before `t`.
    #[inline]
    fn upto(&self, t: i64) -> usize {
        self.events.partition_point(|ev| ev.t <= t)
    }

    /// The profile's value after the first `i` events.
    #[inline]
    fn value_after(&self, i: usize) -> Use {
        match i.checked_sub(1) {
            None => self.base,
            Some(k) => {
                let r = self.events[k].rel;
                [
                    self.base[0] + r[0],
                    self.base[1] + r[1],
                    self.base[2] + r[2],
                ]
            }
        }
    }

    /// Insert (`sign > 0`) or remove the event `ev` whose step is `effect`: the events after
    /// it move by the step.
    fn edit(&mut self, mut ev: Event, effect: Use, sign: i64) {
        let list = &mut self.events;
        let pos = list.partition_point(|x| x.key() < ev.key());
        let step = if sign > 0 {
            let prev = if pos > 0 { list[pos - 1].rel } else { [0; 3] };
            ev.rel = [
                prev[0] + effect[0],
                prev[1] + effect[1],
                prev[2] + effect[2],
            ];
            list.insert(pos, ev);
            effect
        } else if pos < list.len() && list[pos].key() == ev.key() {
            list.remove(pos);
            [-effect[0], -effect[1], -effect[2]]
        } else {
            return;
        };
        let from = if sign > 0 { pos + 1 } else { pos };
        for x in &mut list[from..] {
            for (r, d) in x.rel.iter_mut().zip(step) {
                *r += d;
            }
        }
    }
}

/// The most the others may use where an attempt using `u` runs: `caps` less `u`.
#[inline]
fn limit(u: Use, caps: Use) -> Use {
    [caps[0] - u[0], caps[1] - u[1], caps[2] - u[2]]
}

#[inline]
fn over(v: &Use, lim: &Use) -> bool {
    v[0] > lim[0] || v[1] > lim[1] || v[2] > lim[2]
}

/// The step profile of a set of placed lifetimes `[s, e)` (half-open: an attempt ending at
/// `t` no longer runs at `t`).
#[derive(Debug, Clone)]
pub struct StepProfile {
    shift: u32,
    buckets: Vec<Bucket>,
    /// The longest lifetime ever placed (bounds a search's moves).
    longest: i64,
}

impl StepProfile {
    /// An empty profile with buckets of about an eighth of `mean_duration` (ns).
    pub fn new(mean_duration: i64) -> Self {
        let width = (mean_duration / 8).max(1) as u64;
        let shift = 63 - width.leading_zeros();
        StepProfile {
            shift,
            buckets: Vec::new(),
            longest: 0,
        }
    }

    #[inline]
    fn bucket(&self, t: i64) -> usize {
        (t.max(0) >> self.shift) as usize
    }

    fn grow(&mut self, b: usize) {
        if self.buckets.len() <= b {
            // Past every event the profile is zero (every lifetime has both events).
            self.buckets.resize_with(b + 1, Bucket::default);
        }
    }

    fn add(&mut self, j: u32, s: i64, e: i64, u: Use, sign: i64) {
        self.longest = self.longest.max(e - s);
        let (bs, be) = (self.bucket(s), self.bucket(e));
        self.grow(be);
        let start = Event {
            t: s,
            other: e,
            rel: [0; 3],
            j,
            kind: 1,
        };
        let end = Event {
            t: e,
            other: s,
            rel: [0; 3],
            j,
            kind: 0,
        };
        self.buckets[bs].edit(start, u, sign);
        self.buckets[be].edit(end, [-u[0], -u[1], -u[2]], sign);
        // The lifetime runs at the start of every later bucket up to its end's.
        let du = [u[0] * sign, u[1] * sign, u[2] * sign];
        for bucket in &mut self.buckets[bs + 1..=be] {
            for (x, d) in bucket.base.iter_mut().zip(du) {
                *x += d;
            }
        }
        self.buckets[bs].recompute_max();
        if be != bs {
            self.buckets[be].recompute_max();
        }
    }

    /// Place the lifetime `[s, e)` of attempt `j` with use `u` (`s < e`, `s >= 0`).
    pub fn insert(&mut self, j: u32, s: i64, e: i64, u: Use) {
        self.add(j, s, e, u, 1);
    }

    /// Remove a lifetime placed by [`StepProfile::insert`] with the same arguments.
    pub fn remove(&mut self, j: u32, s: i64, e: i64, u: Use) {
        self.add(j, s, e, u, -1);
    }

    /// Earliest end among the lifetimes running at `t` (`None` when none runs), read from
    /// event `i` of bucket `b` on (no earlier event ends after `t`).
    fn min_end_from(&self, t: i64, b: usize, i: usize) -> Option<i64> {
        let mut from = i;
        for bucket in self.buckets.get(b..).unwrap_or(&[]) {
            for ev in &bucket.events[from.min(bucket.events.len())..] {
                if ev.kind == 0 && ev.t > t && ev.other <= t {
                    return Some(ev.t);
                }
            }
            from = 0;
        }
        None
    }

    /// The first start event before `e`, from event `i` of bucket `b` on, after which the
    /// value is over `lim` (skipping buckets that cannot exceed it): its time and the
    /// position just after it.
    #[inline]
    fn first_over_start(
        &self,
        b: usize,
        i: usize,
        e: i64,
        lim: &Use,
    ) -> Option<(i64, usize, usize)> {
        let end = self.bucket(e - 1).min(self.buckets.len().saturating_sub(1));
        let mut bb = b;
        while bb <= end && bb < self.buckets.len() {
            let bucket = &self.buckets[bb];
            if bucket.may_exceed(lim) {
                let rl = bucket.rel_limit(lim);
                let from = if bb == b { i } else { 0 };
                for (k, ev) in bucket.events[from..].iter().enumerate() {
                    if ev.t >= e {
                        return None;
                    }
                    if ev.kind == 1 && over(&ev.rel, &rl) {
                        return Some((ev.t, bb, from + k + 1));
                    }
                }
            }
            bb += 1;
        }
        None
    }

    /// Latest start among the lifetimes running at `t` (`None` when none runs).
    fn max_start_running_at(&self, t: i64) -> Option<i64> {
        let last = self.bucket(t).min(self.buckets.len().saturating_sub(1));
        self.buckets
            .get(..=last)
            .unwrap_or(&[])
            .iter()
            .rev()
            .flat_map(|x| x.events.iter().rev())
            .find(|ev| ev.kind == 1 && ev.t <= t && ev.other > t)
            .map(|ev| ev.t)
    }

    /// Whether an attempt with use `u` placed at `[s, e)` would break a limit (`caps` =
    /// K, cores cap, memory cap) at some instant, and where. The instants checked are `s`
    /// and every start of a placed lifetime inside `(s, e)` (the profile only rises there).
    /// `forward`: at the first such instant `t`, returns the earliest end among the
    /// lifetimes running at `t` (or `e` if none). Backward: at the last one, returns it,
    /// or, when that is `s` itself, the latest start among the lifetimes running at `s` (or
    /// `s`). `None` when it fits throughout (or `e <= s`).
    pub fn violation(&self, s: i64, e: i64, u: Use, caps: Use, forward: bool) -> Option<i64> {
        if e <= s {
            return None;
        }
        let lim = limit(u, caps);
        let bs = self.bucket(s);
        if forward {
            if bs >= self.buckets.len() {
                // Nothing placed at or after s.
                return over(&[0, 0, 0], &lim).then_some(e);
            }
            let first = &self.buckets[bs];
            // The value at s, and the first event later than s.
            let idx = first.upto(s);
            if over(&first.value_after(idx), &lim) {
                return Some(self.min_end_from(s, bs, idx).unwrap_or(e));
            }
            // The first start event in (s, e) after which the value is over.
            return self
                .first_over_start(bs, idx, e, &lim)
                .map(|(t, b, i)| self.min_end_from(t, b, i).unwrap_or(e));
        }
        self.backward_violation(s, e, &lim, None).map(|(t, _)| t)
    }

    /// The backward [`StepProfile::violation`] for `[s, e)` (`s < e`) against `lim` (the
    /// caps less the attempt's use), with where it was found: the place (bucket, index) of
    /// the first event at or after the returned time when that time is a start event inside
    /// `(s, e)`, `None` when the value at `s` decided. `end`: that place for `e`, when
    /// known (the next query of a backward search ends at the time this one returned).
    fn backward_violation(
        &self,
        s: i64,
        e: i64,
        lim: &Use,
        end: Option<(usize, usize)>,
    ) -> Option<(i64, Option<(usize, usize)>)> {
        let bs = self.bucket(s);
        if bs >= self.buckets.len() {
            // Nothing placed at or after s.
            return over(&[0, 0, 0], lim).then_some((s, None));
        }
        let (be, to_be) = match end {
            Some(place) => place,
            None => {
                let be = self.bucket(e - 1).min(self.buckets.len() - 1);
                let to = self.buckets[be].events.partition_point(|ev| ev.t < e);
                (be, to)
            }
        };
        // The last start event in (s, e) after which the value is over; buckets from the
        // last one down, each read from its end.
        for b in (bs..=be).rev() {
            let bucket = &self.buckets[b];
            if !bucket.may_exceed(lim) {
                continue;
            }
            let rl = bucket.rel_limit(lim);
            let to = if b == be { to_be } else { bucket.events.len() };
            if let Some(k) = bucket.events[..to]
                .iter()
                .rev()
                .take_while(|ev| ev.t > s)
                .position(|ev| ev.kind == 1 && over(&ev.rel, &rl))
            {
                let mut at = to - 1 - k;
                let t = bucket.events[at].t;
                while at > 0 && bucket.events[at - 1].t >= t {
                    at -= 1;
                }
                return Some((t, Some((b, at))));
            }
        }
        // None inside: the value at s decides.
        let first = &self.buckets[bs];
        if over(&first.value_after(first.upto(s)), lim) {
            return Some((self.max_start_running_at(s).unwrap_or(s), None));
        }
        None
    }

    /// Whether a search with `left` queries to run after the one at `s` can still return a
    /// start in `useful` (`forward`: its starts rise; else they fall). A failing query
    /// moves the start by less than `d` plus the longest placed lifetime (to an end of a
    /// lifetime running inside the window, or to a start of one less `d`), so the starts
    /// it can still return lie within `left` such moves of `s`.
    #[inline]
    fn can_still_return(
        &self,
        s: i64,
        d: i64,
        left: usize,
        (lo, hi): (i64, i64),
        forward: bool,
    ) -> bool {
        let reach = || (left as i64).saturating_mul(d + self.longest);
        if forward {
            s <= hi && (s >= lo || s.saturating_add(reach()) >= lo)
        } else {
            s >= lo && (s <= hi || s.saturating_sub(reach()) <= hi)
        }
    }

    /// The feasible-start search of the start-time search, in one pass: from `s`, at most
    /// `steps` [`StepProfile::violation`] queries (forward or backward, for `[s, s + d)`),
    /// each failing one moving `s` to the time it returns (forward) or moving the window's
    /// end there (backward); `Some(s)` at the first query that finds no violation, `None`
    /// when the steps run out. Exactly the result of those queries, but each query starts
    /// its scan where the last one left off. `useful`: the starts the caller can use; the
    /// search returns `None` as soon as it can no longer return one of them (it may still
    /// return a start outside, found by the query it was running).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn feasible_search(
        &self,
        s: i64,
        d: i64,
        u: Use,
        caps: Use,
        useful: (i64, i64),
        steps: usize,
        forward: bool,
    ) -> Option<i64> {
        if steps == 0 {
            return None;
        }
        if d <= 0 {
            return Some(s);
        }
        let lim = limit(u, caps);
        if forward {
            self.forward_scan(s, d, &lim, useful, steps)
        } else {
            self.backward_scan(s, d, &lim, useful, steps)
        }
    }

    /// The queries of one search, from `s`: before each, whether a start of use can still
    /// be returned ([`StepProfile::can_still_return`]); `query(s)` gives the start after a
    /// failing query at `s`, `None` when `s` fits.
    #[inline(always)]
    fn walk(
        &self,
        mut s: i64,
        d: i64,
        useful: (i64, i64),
        steps: usize,
        forward: bool,
        mut query: impl FnMut(i64) -> Option<i64>,
    ) -> Option<i64> {
        for k in 0..steps {
            if !self.can_still_return(s, d, steps - 1 - k, useful, forward) {
                return None;
            }
            match query(s) {
                None => return Some(s),
                Some(next) => s = next,
            }
        }
        None
    }

    /// The backward [`StepProfile::feasible_search`] (`d > 0`, `lim` the caps less the
    /// attempt's use): a query that ends where the last found its violation starts its
    /// scan at that event.
    fn backward_scan(
        &self,
        s: i64,
        d: i64,
        lim: &Use,
        useful: (i64, i64),
        steps: usize,
    ) -> Option<i64> {
        let mut end = None;
        self.walk(s, d, useful, steps, false, |s| {
            let (t, place) = self.backward_violation(s, s + d, lim, end)?;
            end = place;
            Some(t - d)
        })
    }

    /// The forward [`StepProfile::feasible_search`] (`d > 0`): the scan position is carried
    /// from one query to the next (each `s` is later than the last).
    fn forward_scan(
        &self,
        s: i64,
        d: i64,
        lim: &Use,
        useful: (i64, i64),
        steps: usize,
    ) -> Option<i64> {
        // Cursor: bucket `b`, index `i` of the first event later than `s`.
        let (mut b, mut i) = (usize::MAX, 0usize);
        self.walk(s, d, useful, steps, true, |s| {
            let e = s + d;
            // Move the cursor to s.
            let bs = self.bucket(s);
            if bs != b {
                b = bs;
                i = 0;
            }
            let v = match self.buckets.get(b) {
                Some(bucket) => {
                    while i < bucket.events.len() && bucket.events[i].t <= s {
                        i += 1;
                    }
                    bucket.value_after(i)
                }
                None => [0, 0, 0],
            };
            Some(if over(&v, lim) {
                self.min_end_from(s, b, i).unwrap_or(e)
            } else {
                // The first start event in (s, e) after which the value is over.
                let (t, fb, fi) = self.first_over_start(b, i, e, lim)?;
                self.min_end_from(t, fb, fi).unwrap_or(e)
            })
        })
    }

    /// The maximal parts of `[lo, hi)` (`0 <= lo`) where one more attempt using `u` would
    /// break a limit (`caps`) next to the placed lifetimes, into `out` (sorted; two parts
    /// may touch). The value holds from an event to the next, so the parts begin at `lo` or
    /// at a start event: an attempt fits at `[s, s + d)` exactly when it meets no part,
    /// which is what [`StepProfile::violation`] checks instant by instant.
    pub fn over_parts(&self, lo: i64, hi: i64, u: Use, caps: Use, out: &mut Vec<(i64, i64)>) {
        out.clear();
        if hi <= lo {
            return;
        }
        let lim = limit(u, caps);
        let mut is_over = over(&self.value_at(lo), &lim);
        let mut since = lo;
        let first = self.bucket(lo);
        let last = self
            .bucket(hi - 1)
            .min(self.buckets.len().saturating_sub(1));
        for b in first..=last {
            let Some(bucket) = self.buckets.get(b) else {
                break;
            };
            let from = if b == first { bucket.upto(lo) } else { 0 };
            for (i, ev) in bucket.events.iter().enumerate().skip(from) {
                if ev.t >= hi {
                    break;
                }
                let v = bucket.value_after(i + 1);
                let now = over(&v, &lim);
                if now != is_over {
                    if is_over {
                        out.push((since, ev.t));
                    } else {
                        since = ev.t;
                    }
                    is_over = now;
                }
            }
        }
        if is_over {
            out.push((since, hi));
        }
    }

    /// The profile's value at `t` (after every event at `t`), for tests.
    pub fn value_at(&self, t: i64) -> Use {
        match self.buckets.get(self.bucket(t)) {
            Some(bucket) => bucket.value_after(bucket.upto(t)),
            None => [0, 0, 0],
        }
    }
}
