//! The request cover of the GPU objective: the placed requests by time bucket, and the gap
//! set of their union.

use super::GapSet;

/// The placed requests of the start-time search: per time bucket (`2^shift` ns) the count
/// of placed requests covering all of it and the ids of those covering part of it, and the
/// gap set of their union within `[0, horizon)`.
///
/// A request covers its middle buckets whole, so it has at most two partial pieces (in its
/// first and last bucket), and an id is at most once in a bucket's list. The lists hold ids
/// only (the placed interval of an id is kept aside and read only when a removal leaves a
/// bucket without a whole cover, which is rare on these workloads): each bucket's list sits
/// in one cache line of [`LINE_IDS`] ids, a longer one continues in a spill vector.
#[derive(Debug, Clone)]
pub struct RequestCover {
    shift: u32,
    full: Vec<u32>,
    /// Per bucket, a bit set while at most one placed request covers it whole (`full` at
    /// most 1: the buckets [`RequestCover::exclusive_parts`] cannot skip), 64 to a word.
    thin: Vec<u64>,
    /// Per bucket, the ids of the requests with a partial piece there (the first
    /// [`LINE_IDS`]; the rest in `spill`).
    lines: Vec<IdLine>,
    /// Per bucket, the ids beyond its line's capacity (usually empty).
    spill: Vec<Vec<u32>>,
    /// Per id, its placed interval (only read for the pieces of an uncovered bucket).
    placed: Vec<(i64, i64)>,
    gaps: GapSet,
    scratch: Vec<(i64, i64)>,
    pieces: Vec<(i64, i64)>,
}

/// Ids a bucket's line holds in place.
const LINE_IDS: usize = 15;

/// One bucket's partial-piece ids: a length and up to [`LINE_IDS`] ids, one cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct IdLine {
    len: u32,
    ids: [u32; LINE_IDS],
}

impl RequestCover {
    /// An empty cover of `[0, n_buckets << shift)` for requests with ids below `n_ids`.
    pub fn new(shift: u32, n_buckets: usize, n_ids: usize) -> Self {
        RequestCover {
            shift,
            full: vec![0; n_buckets],
            thin: vec![u64::MAX; n_buckets.div_ceil(64)],
            lines: vec![IdLine::default(); n_buckets],
            spill: vec![Vec::new(); n_buckets],
            placed: vec![(0, 0); n_ids],
            gaps: GapSet::whole(0, (n_buckets as i64) << shift),
            scratch: Vec::new(),
            pieces: Vec::new(),
        }
    }

    /// The end of the covered range.
    pub fn horizon(&self) -> i64 {
        (self.full.len() as i64) << self.shift
    }

    /// The gaps of the placed requests' union within `[0, horizon)`.
    pub fn gaps(&self) -> &GapSet {
        &self.gaps
    }

    /// The ids with a partial piece in bucket `b`.
    #[inline]
    fn ids(&self, b: usize) -> impl Iterator<Item = u32> + '_ {
        let line = &self.lines[b];
        line.ids[..(line.len as usize).min(LINE_IDS)]
            .iter()
            .chain(&self.spill[b])
            .copied()
    }

    fn push_id(&mut self, b: usize, id: u32) {
        let line = &mut self.lines[b];
        let n = line.len as usize;
        if n < LINE_IDS {
            line.ids[n] = id;
        } else {
            self.spill[b].push(id);
        }
        line.len += 1;
    }

    /// Take `id` out of bucket `b`'s list (it is there once): the last id takes its place.
    fn remove_id(&mut self, b: usize, id: u32) {
        let line = &mut self.lines[b];
        let n = line.len as usize;
        debug_assert!(n > 0);
        let last = if n > LINE_IDS {
            self.spill[b].pop().expect("spilled ids")
        } else {
            line.ids[n - 1]
        };
        line.len -= 1;
        if last == id {
            return;
        }
        if let Some(at) = line.ids[..(n - 1).min(LINE_IDS)]
            .iter()
            .position(|&x| x == id)
        {
            line.ids[at] = last;
        } else {
            let spill = &mut self.spill[b];
            let at = spill
                .iter()
                .position(|&x| x == id)
                .expect("id in its bucket");
            spill[at] = last;
        }
    }

    fn place(&mut self, x: i64, y: i64, id: u32) {
        self.placed[id as usize] = (x, y);
        let Some(p) = EdgePieces::of(x, y, self.shift) else {
            return;
        };
        if p.first_whole {
            self.add_whole(p.first);
        } else {
            self.push_id(p.first, id);
        }
        if p.first == p.last {
            return;
        }
        for b in p.first + 1..p.last {
            self.add_whole(b);
        }
        if p.last_whole {
            self.add_whole(p.last);
        } else {
            self.push_id(p.last, id);
        }
    }

    /// One more request covers bucket `b` whole.
    #[inline]
    fn add_whole(&mut self, b: usize) {
        self.full[b] += 1;
        if self.full[b] == 2 {
            self.thin[b / 64] &= !(1u64 << (b % 64));
        }
    }

    /// Whether two or more placed requests cover whole every bucket `[x, y)` reaches
    /// (`0 <= x < y <= horizon`): then no one request is alone anywhere in it.
    #[inline]
    pub fn thick_over(&self, x: i64, y: i64) -> bool {
        debug_assert!(0 <= x && x < y && y <= self.horizon());
        self.all_thick((x >> self.shift) as usize, ((y - 1) >> self.shift) as usize)
    }

    /// Whether two or more placed requests cover every bucket of `first..=last` whole.
    #[inline]
    fn all_thick(&self, first: usize, last: usize) -> bool {
        let (wf, wl) = (first / 64, last / 64);
        let head = u64::MAX << (first % 64);
        let tail = u64::MAX >> (63 - last % 64);
        let thick = if wf == wl {
            self.thin[wf] & head & tail == 0
        } else {
            self.thin[wf] & head == 0
                && self.thin[wf + 1..wl].iter().all(|&w| w == 0)
                && self.thin[wl] & tail == 0
        };
        debug_assert_eq!(thick, self.full[first..=last].iter().all(|&c| c > 1));
        thick
    }

    /// Insert the request `[x, y)` with id `id` (`0 <= x < y <= horizon`); returns its
    /// length not covered before.
    pub fn insert(&mut self, x: i64, y: i64, id: u32) -> i64 {
        debug_assert!(0 <= x && x < y && y <= self.horizon());
        let unc = self.gaps.overlap_len(x, y);
        if unc > 0 {
            self.gaps.subtract(x, y);
        }
        self.place(x, y, id);
        unc
    }

    /// Insert many requests without maintaining the gaps (then call
    /// [`RequestCover::rebuild_gaps`]).
    pub fn insert_unindexed(&mut self, x: i64, y: i64, id: u32) {
        self.place(x, y, id);
    }

    /// Recompute the gaps from the union of `intervals` (every placed request).
    pub fn rebuild_gaps(&mut self, intervals: &mut [(i64, i64)]) {
        intervals.sort_unstable();
        let mut gaps = Vec::new();
        let mut reach = 0i64;
        for &(s, e) in intervals.iter() {
            if s > reach {
                gaps.push((reach, s));
            }
            reach = reach.max(e);
        }
        if reach < self.horizon() {
            gaps.push((reach, self.horizon()));
        }
        self.gaps = GapSet { gaps };
    }

    /// Take the piece in bucket `b` of request `(x, y, id)` out (`whole`: it covers `b`
    /// whole); when no request then covers `b` whole, push the parts of `[x, y)` in it the
    /// remaining partial pieces leave uncovered (none when one covers it alone).
    #[inline]
    fn leave_bucket(
        &mut self,
        b: usize,
        whole: bool,
        (x, y, id): (i64, i64, u32),
        sorted: &mut Vec<(i64, i64)>,
        new_gaps: &mut Vec<(i64, i64)>,
    ) {
        if whole {
            self.full[b] -= 1;
            if self.full[b] == 1 {
                self.thin[b / 64] |= 1u64 << (b % 64);
            }
        } else {
            self.remove_id(b, id);
        }
        if self.full[b] == 0 {
            self.uncovered_piece(b, x, y, &|_| false, sorted, new_gaps);
        }
    }

    /// Remove the request `[x, y)` inserted with id `id`; returns its length no other
    /// placed request covers (now gaps).
    pub fn remove(&mut self, x: i64, y: i64, id: u32) -> i64 {
        debug_assert_eq!(self.placed[id as usize], (x, y));
        let mut new_gaps = std::mem::take(&mut self.scratch);
        new_gaps.clear();
        let mut sorted = std::mem::take(&mut self.pieces);
        if let Some(p) = EdgePieces::of(x, y, self.shift) {
            self.leave_bucket(
                p.first,
                p.first_whole,
                (x, y, id),
                &mut sorted,
                &mut new_gaps,
            );
            for m in p.first + 1..p.last {
                self.leave_bucket(m, true, (x, y, id), &mut sorted, &mut new_gaps);
            }
            if p.last != p.first {
                self.leave_bucket(p.last, p.last_whole, (x, y, id), &mut sorted, &mut new_gaps);
            }
        }
        self.pieces = sorted;
        let unc = new_gaps.iter().map(|&(a, c)| c - a).sum();
        for &(a, c) in &new_gaps {
            self.gaps.add(a, c);
        }
        self.scratch = new_gaps;
        unc
    }

    /// The parts of the placed requests `taken` (each at its placed interval) that no other
    /// placed request covers: what removing all of them would add to the gaps, without
    /// removing them. `is_taken(id)` tells the ids of `taken`; `depth` bounds how many of
    /// them cover any one bucket whole: 1 when no two overlap (the requests of one attempt,
    /// or of attempts with disjoint lives), which spares two passes, else at most the
    /// number of attempts they come from (one attempt's requests are disjoint). The parts go
    /// into `out` sorted, disjoint and non-touching; the cover is left as it was.
    // Out of line (as is `uncovered_piece`): inlined into the chain's query preparation it
    // cost about 8% more instructions per move (callgrind, the lns_chain bench).
    #[inline(never)]
    pub fn exclusive_parts(
        &mut self,
        taken: &[(i64, i64)],
        depth: u32,
        is_taken: impl Fn(u32) -> bool,
        out: &mut Vec<(i64, i64)>,
    ) {
        out.clear();
        let disjoint = depth <= 1;
        let shift = self.shift;
        // Overlapping taken requests: most calls find nothing, every bucket of every taken
        // request being covered whole by more requests than `depth`, so by one not taken.
        // Checked first, without taking their counts out. (Disjoint ones get the same
        // test, request by request, in the loop below.)
        if !disjoint
            && taken.iter().all(|&(x, y)| {
                y <= x
                    || self.full[(x >> shift) as usize..=((y - 1) >> shift) as usize]
                        .iter()
                        .all(|&c| c > depth)
            })
        {
            return;
        }
        // Overlapping taken requests may both cover a bucket whole: take their whole
        // pieces out of the counts for the query and put them back after it.
        if !disjoint {
            for &(x, y) in taken {
                for c in &mut self.full[whole_buckets(x, y, self.shift)] {
                    *c -= 1;
                }
            }
        }
        let mut sorted = std::mem::take(&mut self.pieces);
        // A taken request's own whole piece counts in `full` when the taken requests are
        // disjoint (else it was taken out above).
        let others = u32::from(disjoint);
        for &(x, y) in taken {
            // Most requests have every bucket covered whole by two or more others: skip
            // them after one pass over the counts. (Their edge pieces are worked out only
            // for the rest: computing `EdgePieces` first cost the GPU chain about 1.3k
            // instructions per move, callgrind, the lns_chain bench.)
            if y <= x {
                continue;
            }
            let (first, last) = ((x >> shift) as usize, ((y - 1) >> shift) as usize);
            // (The bits follow `full` except while overlapping taken requests are out.)
            let thick = if disjoint {
                self.all_thick(first, last)
            } else {
                self.full[first..=last].iter().all(|&c| c > 1)
            };
            if thick {
                continue;
            }
            let Some(p) = EdgePieces::of(x, y, shift) else {
                continue;
            };
            if self.full[first] <= others & u32::from(p.first_whole) {
                self.uncovered_piece(first, x, y, &is_taken, &mut sorted, out);
            }
            if first == last {
                continue;
            }
            // The middle buckets are the request's whole pieces: scan their counts for one
            // no other request covers whole (rare).
            let mut b = first + 1;
            while b < last {
                match self.full[b..last].iter().position(|&c| c <= others) {
                    Some(i) => {
                        b += i;
                        self.uncovered_piece(b, x, y, &is_taken, &mut sorted, out);
                        b += 1;
                    }
                    None => break,
                }
            }
            if self.full[last] <= others & u32::from(p.last_whole) {
                self.uncovered_piece(last, x, y, &is_taken, &mut sorted, out);
            }
        }
        self.pieces = sorted;
        if !disjoint {
            for &(x, y) in taken {
                for c in &mut self.full[whole_buckets(x, y, self.shift)] {
                    *c += 1;
                }
            }
        }
        // Merge into sorted, disjoint, non-touching parts.
        out.sort_unstable();
        let mut n = 0usize;
        for i in 0..out.len() {
            let (a, c) = out[i];
            if n > 0 && a <= out[n - 1].1 {
                out[n - 1].1 = out[n - 1].1.max(c);
            } else {
                out[n] = (a, c);
                n += 1;
            }
        }
        out.truncate(n);
    }

    /// Push into `out` the parts of request `[x, y)` inside bucket `b` that the partial
    /// pieces there of requests not `is_taken` leave uncovered (`sorted` is scratch).
    #[inline(never)]
    fn uncovered_piece(
        &self,
        b: usize,
        x: i64,
        y: i64,
        is_taken: &impl Fn(u32) -> bool,
        sorted: &mut Vec<(i64, i64)>,
        out: &mut Vec<(i64, i64)>,
    ) {
        let (lo, hi) = ((b as i64) << self.shift, ((b as i64) + 1) << self.shift);
        let (cx, cy) = (x.max(lo), y.min(hi));
        sorted.clear();
        for k in self.ids(b) {
            if is_taken(k) {
                continue;
            }
            let (px, py) = self.placed[k as usize];
            let (ps, pe) = (px.max(lo), py.min(hi));
            if ps <= cx && pe >= cy {
                return;
            }
            if ps < cy && pe > cx {
                sorted.push((ps, pe));
            }
        }
        sorted.sort_unstable();
        let mut reach = cx;
        for &(ps, pe) in sorted.iter() {
            if ps > reach {
                out.push((reach, ps));
            }
            reach = reach.max(pe);
            if reach >= cy {
                break;
            }
        }
        if reach < cy {
            out.push((reach, cy));
        }
    }
}

/// The buckets of `2^shift` ns that `[x, y)` covers whole (`0 <= x`).
#[inline]
fn whole_buckets(x: i64, y: i64, shift: u32) -> std::ops::Range<usize> {
    let first = ((x + (1 << shift) - 1) >> shift) as usize;
    let end = (y >> shift).max(0) as usize;
    first..end.max(first)
}

/// The two edge buckets of a request `[x, y)` (`x < y`) in the request cover (the same one
/// when it fits in one) and whether it covers each whole; the buckets between are covered
/// whole.
struct EdgePieces {
    first: usize,
    last: usize,
    first_whole: bool,
    last_whole: bool,
}

impl EdgePieces {
    #[inline]
    fn of(x: i64, y: i64, shift: u32) -> Option<Self> {
        if y <= x {
            return None;
        }
        let mask = (1i64 << shift) - 1;
        let (first, last) = ((x >> shift) as usize, ((y - 1) >> shift) as usize);
        let (x_edge, y_edge) = (x & mask == 0, y & mask == 0);
        Some(EdgePieces {
            first,
            last,
            first_whole: x_edge && (first < last || y_edge),
            last_whole: y_edge,
        })
    }
}
