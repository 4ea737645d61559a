//! A step profile of placed lifetimes (running count, cores, memory over time) kept between
//! moves of the start-time search, answering "where would one more attempt break K or a
//! cap" without rescanning the placed attempts.
//!
//! Time is cut into power-of-two buckets (a lifetime spans about eight of them). Each bucket
//! keeps its start and end events sorted (ends before starts at equal times), the profile's
//! value just before it (`base`) and an upper bound of the profile inside it (`max`, per
//! component). Inserting or removing `[s, e)` edits the events of two buckets and adds to
//! the bases and maxima of the buckets in between, so it costs O(its buckets + the two
//! buckets' events). A query walks the buckets of its window and scans only those whose
//! maximum could break a limit. Everything is exact integer arithmetic.

/// Resource use of one attempt: count (1), nano-cores, nano-GiB.
pub type Use = [i64; 3];

/// One event of a placed lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Event {
    /// Time, ns.
    t: i64,
    /// 0 = end, 1 = start (ends sort first at equal times).
    kind: u8,
    /// The attempt.
    j: u32,
    /// The other end of the lifetime (the end for a start event, the start for an end).
    other: i64,
    /// Its use.
    u: Use,
}

impl Event {
    fn key(&self) -> (i64, u8, u32) {
        (self.t, self.kind, self.j)
    }
}

#[derive(Debug, Clone, Default)]
struct Bucket {
    /// Profile value just before the bucket's first instant.
    base: Use,
    /// Component-wise maximum of `base` and of the value after each event.
    max: Use,
    /// Events in the bucket, sorted by (time, kind, attempt).
    events: Vec<Event>,
}

impl Bucket {
    fn recompute_max(&mut self) {
        let mut v = self.base;
        let mut mx = v;
        for ev in &self.events {
            apply(&mut v, ev);
            for (m, x) in mx.iter_mut().zip(v) {
                *m = (*m).max(x);
            }
        }
        self.max = mx;
    }
}

#[inline]
fn apply(v: &mut Use, ev: &Event) {
    if ev.kind == 1 {
        for (x, u) in v.iter_mut().zip(ev.u) {
            *x += u;
        }
    } else {
        for (x, u) in v.iter_mut().zip(ev.u) {
            *x -= u;
        }
    }
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
}

impl StepProfile {
    /// An empty profile with buckets of about an eighth of `mean_duration` (ns).
    pub fn new(mean_duration: i64) -> Self {
        let width = (mean_duration / 8).max(1) as u64;
        let shift = 63 - width.leading_zeros();
        StepProfile {
            shift,
            buckets: Vec::new(),
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
        let (bs, be) = (self.bucket(s), self.bucket(e));
        self.grow(be);
        let du = [u[0] * sign, u[1] * sign, u[2] * sign];
        for (t, kind, other, b) in [(s, 1u8, e, bs), (e, 0u8, s, be)] {
            let ev = Event {
                t,
                kind,
                j,
                other,
                u,
            };
            let list = &mut self.buckets[b].events;
            let pos = list.partition_point(|x| x.key() < ev.key());
            if sign > 0 {
                list.insert(pos, ev);
            } else if pos < list.len() && list[pos].key() == ev.key() {
                list.remove(pos);
            }
        }
        for b in bs + 1..=be {
            let bucket = &mut self.buckets[b];
            for (x, d) in bucket.base.iter_mut().zip(du) {
                *x += d;
            }
            if b < be {
                for (x, d) in bucket.max.iter_mut().zip(du) {
                    *x += d;
                }
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

    /// Events from bucket `b` on, in time order.
    fn events_from(&self, b: usize) -> impl Iterator<Item = &Event> {
        self.buckets
            .get(b..)
            .unwrap_or(&[])
            .iter()
            .flat_map(|x| &x.events)
    }

    /// Earliest end among the lifetimes running at `t` (`None` when none runs).
    fn min_end_running_at(&self, t: i64) -> Option<i64> {
        self.events_from(self.bucket(t))
            .find(|ev| ev.kind == 0 && ev.t > t && ev.other <= t)
            .map(|ev| ev.t)
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
        let lim = [caps[0] - u[0], caps[1] - u[1], caps[2] - u[2]];
        let bs = self.bucket(s);
        if bs >= self.buckets.len() {
            // Nothing placed at or after s.
            return over(&[0, 0, 0], &lim).then_some(if forward { e } else { s });
        }
        let be = self.bucket(e - 1).min(self.buckets.len() - 1);
        // The value at s.
        let first = &self.buckets[bs];
        let mut v = first.base;
        let mut idx = 0usize;
        while idx < first.events.len() && first.events[idx].t <= s {
            apply(&mut v, &first.events[idx]);
            idx += 1;
        }
        let at_s = over(&v, &lim);
        if forward {
            if at_s {
                return Some(self.min_end_running_at(s).unwrap_or(e));
            }
            // Scan checkpoints in time order, skipping buckets that cannot break a limit.
            let mut b = bs;
            loop {
                let bucket = &self.buckets[b];
                if b != bs {
                    if !over(&bucket.max, &lim) {
                        b += 1;
                        if b > be {
                            return None;
                        }
                        continue;
                    }
                    v = bucket.base;
                    idx = 0;
                } else if !over(&bucket.max, &lim) {
                    b += 1;
                    if b > be {
                        return None;
                    }
                    continue;
                }
                while idx < bucket.events.len() {
                    let ev = &bucket.events[idx];
                    if ev.t >= e {
                        return None;
                    }
                    apply(&mut v, ev);
                    if ev.kind == 1 && over(&v, &lim) {
                        return Some(self.min_end_running_at(ev.t).unwrap_or(e));
                    }
                    idx += 1;
                }
                b += 1;
                if b > be {
                    return None;
                }
            }
        }
        // Backward: the last over checkpoint; buckets from the last one down.
        let mut b = be;
        loop {
            let bucket = &self.buckets[b];
            if over(&bucket.max, &lim) {
                let (mut w, mut i) = if b == bs {
                    (v, idx)
                } else {
                    (bucket.base, 0usize)
                };
                let mut last: Option<i64> = None;
                while i < bucket.events.len() {
                    let ev = &bucket.events[i];
                    if ev.t >= e {
                        break;
                    }
                    apply(&mut w, ev);
                    if ev.kind == 1 && ev.t > s && over(&w, &lim) {
                        last = Some(ev.t);
                    }
                    i += 1;
                }
                if last.is_some() {
                    return last;
                }
            }
            if b == bs {
                break;
            }
            b -= 1;
        }
        if at_s {
            return Some(self.max_start_running_at(s).unwrap_or(s));
        }
        None
    }

    /// The forward feasible-start search of the start-time search, in one pass: from `s`
    /// (in `[0, latest]`), at most `steps` [`StepProfile::violation`] queries (forward, for
    /// `[s, s + d)`), each failing one moving `s` to the time it returns; `Some(s)` at the
    /// first query that finds no violation, `None` when `s` passes `latest` or the steps
    /// run out. Exactly the result of those queries, but the value at `s` and the scan
    /// position are carried from one query to the next (each `s` is later than the last).
    pub fn forward_search(
        &self,
        mut s: i64,
        d: i64,
        u: Use,
        caps: Use,
        latest: i64,
        steps: usize,
    ) -> Option<i64> {
        if steps == 0 {
            return None;
        }
        if d <= 0 {
            return Some(s);
        }
        let lim = [caps[0] - u[0], caps[1] - u[1], caps[2] - u[2]];
        let n = self.buckets.len();
        // Cursor: bucket `b`, index `i` of the first event later than `s`; `v` = value at s.
        let (mut b, mut i, mut v) = (usize::MAX, 0usize, [0i64; 3]);
        for _ in 0..steps {
            let e = s + d;
            // Move the cursor to s.
            let bs = self.bucket(s);
            if bs != b {
                b = bs;
                i = 0;
                v = self.buckets.get(b).map_or([0, 0, 0], |x| x.base);
            }
            if let Some(bucket) = self.buckets.get(b) {
                while i < bucket.events.len() && bucket.events[i].t <= s {
                    apply(&mut v, &bucket.events[i]);
                    i += 1;
                }
            }
            // Earliest end after `t` of a lifetime running at `t`, scanning from (bb, ii).
            let min_end = |t: i64, mut bb: usize, mut ii: usize| -> Option<i64> {
                while bb < n {
                    let evs = &self.buckets[bb].events;
                    while ii < evs.len() {
                        let ev = &evs[ii];
                        if ev.kind == 0 && ev.t > t && ev.other <= t {
                            return Some(ev.t);
                        }
                        ii += 1;
                    }
                    bb += 1;
                    ii = 0;
                }
                None
            };
            let next = if over(&v, &lim) {
                min_end(s, b, i).unwrap_or(e)
            } else {
                // The first start event in (s, e) after which the value is over.
                let mut found = None;
                let mut bb = b;
                let mut w = v;
                let mut ii = i;
                let be = self.bucket(e - 1).min(n.saturating_sub(1));
                'scan: while bb <= be && bb < n {
                    let bucket = &self.buckets[bb];
                    if bb != b {
                        if !over(&bucket.max, &lim) {
                            bb += 1;
                            continue;
                        }
                        w = bucket.base;
                        ii = 0;
                    } else if !over(&bucket.max, &lim) {
                        bb += 1;
                        continue;
                    }
                    while ii < bucket.events.len() {
                        let ev = &bucket.events[ii];
                        if ev.t >= e {
                            break 'scan;
                        }
                        apply(&mut w, ev);
                        if ev.kind == 1 && over(&w, &lim) {
                            found = Some((ev.t, bb, ii + 1));
                            break 'scan;
                        }
                        ii += 1;
                    }
                    bb += 1;
                }
                match found {
                    None => return Some(s),
                    Some((t, fb, fi)) => min_end(t, fb, fi).unwrap_or(e),
                }
            };
            s = next;
            if s < 0 || s > latest {
                return None;
            }
        }
        None
    }

    /// The profile's value at `t` (after every event at `t`), for tests.
    pub fn value_at(&self, t: i64) -> Use {
        let b = self.bucket(t);
        let Some(bucket) = self.buckets.get(b) else {
            return [0, 0, 0];
        };
        let mut v = bucket.base;
        for ev in bucket.events.iter().take_while(|ev| ev.t <= t) {
            apply(&mut v, ev);
        }
        v
    }
}
