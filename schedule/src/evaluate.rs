//! The search's exact evaluator: list schedules on an integer nanosecond grid with resource
//! sums in integer nano-units, and union lengths by a bucketed sorted sweep. No float
//! arithmetic touches a start time or a union length, so nothing drifts and every result is
//! the same on every machine.

use crate::instance::{WorkloadInstance, quota_units};

/// Nanoseconds per second.
pub const NS_PER_S: i64 = 1_000_000_000;

/// Seconds (f64) to the nanosecond grid.
pub fn to_ns(seconds: f64) -> i64 {
    (seconds * 1e9).round() as i64
}

/// The nanosecond grid back to seconds.
pub fn ns_to_s(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// A workload compiled for fast evaluation. Attempt `j` is the `j`-th attempt of the
/// instance (FIFO order).
#[derive(Debug, Clone)]
pub struct GridInstance {
    /// Concurrency K.
    pub concurrency: i64,
    /// CPU cap, nano-cores.
    pub cap_cores: i64,
    /// RAM cap, nano-GiB.
    pub cap_mem: i64,
    /// Durations, ns.
    pub duration: Vec<i64>,
    /// CPU quotas, nano-cores.
    pub cores: Vec<i64>,
    /// RAM quotas, nano-GiB.
    pub mem: Vec<i64>,
    /// Request starts (offsets, ns) of all attempts, attempt after attempt.
    pub request_start: Vec<i64>,
    /// Request ends (offsets, ns), aligned with `request_start`.
    pub request_end: Vec<i64>,
    /// Attempt `j`'s requests are `request_first[j]..request_first[j + 1]`.
    pub request_first: Vec<usize>,
    /// Per-attempt request union length `req_j`, ns.
    pub request_len: Vec<i64>,
    /// Blob indices of all attempts, attempt after attempt.
    pub blob_ids: Vec<u32>,
    /// Attempt `j`'s blobs are `blob_first[j]..blob_first[j + 1]`.
    pub blob_first: Vec<usize>,
    /// Blob sizes, bytes.
    pub blob_bytes: Vec<u64>,
    /// Longest duration, ns.
    pub max_duration: i64,
}

impl GridInstance {
    /// Compile an instance.
    pub fn new(inst: &WorkloadInstance) -> Self {
        let n = inst.attempts.len();
        let mut g = GridInstance {
            concurrency: i64::from(inst.caps.concurrency),
            cap_cores: quota_units(inst.caps.cpu_cores),
            cap_mem: quota_units(inst.caps.ram_gib),
            duration: Vec::with_capacity(n),
            cores: Vec::with_capacity(n),
            mem: Vec::with_capacity(n),
            request_start: Vec::new(),
            request_end: Vec::new(),
            request_first: Vec::with_capacity(n + 1),
            request_len: Vec::with_capacity(n),
            blob_ids: Vec::new(),
            blob_first: Vec::with_capacity(n + 1),
            blob_bytes: inst.blobs.iter().map(|b| b.compressed_bytes).collect(),
            max_duration: 0,
        };
        for a in &inst.attempts {
            let d = to_ns(a.duration_s);
            g.duration.push(d);
            g.cores.push(quota_units(a.cores));
            g.mem.push(quota_units(a.mem_gib));
            g.request_first.push(g.request_start.len());
            let mut len = 0;
            let mut last_end = 0;
            for &(s, e) in &a.requests {
                let s = to_ns(s).clamp(last_end, d);
                let e = to_ns(e).clamp(s, d);
                if e > s {
                    g.request_start.push(s);
                    g.request_end.push(e);
                    len += e - s;
                    last_end = e;
                }
            }
            g.request_len.push(len);
            g.blob_first.push(g.blob_ids.len());
            g.blob_ids.extend_from_slice(&a.blobs);
        }
        g.request_first.push(g.request_start.len());
        g.blob_first.push(g.blob_ids.len());
        g.max_duration = g.duration.iter().copied().max().unwrap_or(0);
        g
    }

    /// Number of attempts.
    pub fn len(&self) -> usize {
        self.duration.len()
    }

    /// True when the workload has no attempts.
    pub fn is_empty(&self) -> bool {
        self.duration.is_empty()
    }

    /// Total number of request intervals.
    pub fn request_count(&self) -> usize {
        self.request_start.len()
    }

    /// Attempt `j`'s requests, as indices into `request_start` and `request_end`.
    #[inline]
    pub fn requests_of(&self, j: usize) -> std::ops::Range<usize> {
        self.request_first[j]..self.request_first[j + 1]
    }

    /// Attempt `j`'s requests shifted to its start `s`, as `[x, y)` in ns.
    #[inline]
    pub fn shifted_requests(&self, j: usize, s: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.shifted(self.requests_of(j), s)
    }

    /// The requests `ks` (indices) shifted by `s`, as `[x, y)` in ns.
    #[inline]
    pub fn shifted(
        &self,
        ks: std::ops::Range<usize>,
        s: i64,
    ) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.request_start[ks.clone()]
            .iter()
            .zip(&self.request_end[ks])
            .map(move |(&r0, &r1)| (s + r0, s + r1))
    }

    /// Whether a set of attempts fits together in an empty system.
    pub fn fits_empty(&self, attempts: &[u32]) -> bool {
        let c: i64 = attempts.iter().map(|&j| self.cores[j as usize]).sum();
        let m: i64 = attempts.iter().map(|&j| self.mem[j as usize]).sum();
        attempts.len() as i64 <= self.concurrency && c <= self.cap_cores && m <= self.cap_mem
    }
}

/// `K'` of a set of attempts: the most of them that can run at once, `min(K, n_cpu, n_ram)`
/// where `n_x` is the largest `n` whose `n` smallest quotas of `x` fit the cap.
pub fn k_prime(g: &GridInstance, set: &[u32]) -> i64 {
    let fit = |mut q: Vec<i64>, cap: i64| -> i64 {
        q.sort_unstable();
        let mut sum = 0i64;
        let mut n = 0i64;
        for x in q {
            sum += x;
            if sum > cap {
                break;
            }
            n += 1;
        }
        n
    };
    let cores: Vec<i64> = set.iter().map(|&j| g.cores[j as usize]).collect();
    let mem: Vec<i64> = set.iter().map(|&j| g.mem[j as usize]).collect();
    g.concurrency
        .min(fit(cores, g.cap_cores))
        .min(fit(mem, g.cap_mem))
        .min(set.len() as i64)
}

/// A priority plan: units admitted in order, each at the earliest time not before the
/// previous unit's start at which it fits. A unit of several attempts starts them
/// simultaneously (a partial simultaneous start of a task's attempts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The units in admission order.
    pub units: Vec<Vec<u32>>,
}

impl Plan {
    /// A plan of single-attempt units in the given order.
    pub fn from_order(order: &[u32]) -> Self {
        Plan {
            units: order.iter().map(|&j| vec![j]).collect(),
        }
    }

    /// The attempts in admission order.
    pub fn attempt_order(&self) -> Vec<u32> {
        self.units.iter().flatten().copied().collect()
    }
}

/// What evaluating a plan yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// Start of each attempt (index = attempt), ns.
    pub starts: Vec<i64>,
    /// Latest end, ns (all attempts are ready at 0).
    pub makespan: i64,
    /// Union length of all shifted requests, ns.
    pub gpu_union: i64,
    /// `sum_b bytes_b * u(lifetimes of the attempts using b)`, byte-ns.
    pub cache_byte_ns: u128,
}

/// Reusable buffers of one evaluating thread.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Running attempts as `(end, attempt)`, sorted descending (the next to end is last):
    /// at most K of them, so a sorted insert moves a few cache lines at most.
    running: Vec<(i64, u32)>,
    start_order: Vec<u32>,
    ring: RingScratch,
    order: Vec<u32>,
    blob_open: Vec<(i64, i64)>,
    blob_total: Vec<i64>,
    /// Per bucket, 1 when some request covers it whole.
    cover_count: Vec<i32>,
    /// Per bucket, the furthest end bucket of the requests whose whole-bucket run starts
    /// there.
    cover_reach: Vec<u32>,
    pieces: Vec<(i64, i64)>,
    /// Starts in sweep order (binary-searched for the attempts around an open run).
    sorted_starts: Vec<i64>,
    /// Runs of buckets not covered whole, as `[first, end)` bucket indices.
    open_runs: Vec<(usize, usize)>,
}

/// The union sweep's ring of time buckets.
#[derive(Debug, Default)]
struct RingScratch {
    /// `SLOT` intervals per ring slot.
    slots: Vec<(i64, i64)>,
    /// Intervals held in each slot.
    fill: Vec<u32>,
    /// A slot's intervals beyond `SLOT`.
    spill: Vec<Vec<(i64, i64)>>,
    /// A spilled bucket, gathered for sorting.
    merged: Vec<(i64, i64)>,
}

impl Scratch {
    /// Empty buffers.
    pub fn new() -> Self {
        Scratch::default()
    }
}

/// Run the admission rule on a plan: each unit starts at the earliest time not before the
/// previous unit's start at which it fits (concurrency and both caps). Returns the starts
/// and the makespan, or `None` when some unit can never fit (more attempts than K or
/// quotas over a cap even in an empty system). Leaves the start order in `scratch`.
pub fn list_schedule(
    g: &GridInstance,
    plan: &Plan,
    scratch: &mut Scratch,
) -> Option<(Vec<i64>, i64)> {
    let mut starts = vec![0i64; g.len()];
    let running = &mut scratch.running;
    running.clear();
    scratch.start_order.clear();
    let (mut count, mut cores, mut mem) = (0i64, 0i64, 0i64);
    let mut t = 0i64;
    let mut makespan = 0i64;
    for unit in &plan.units {
        let n_unit = unit.len() as i64;
        let unit_cores: i64 = unit.iter().map(|&j| g.cores[j as usize]).sum();
        let unit_mem: i64 = unit.iter().map(|&j| g.mem[j as usize]).sum();
        loop {
            while let Some(&(end, j)) = running.last() {
                if end > t {
                    break;
                }
                running.pop();
                count -= 1;
                cores -= g.cores[j as usize];
                mem -= g.mem[j as usize];
            }
            if count + n_unit <= g.concurrency
                && cores + unit_cores <= g.cap_cores
                && mem + unit_mem <= g.cap_mem
            {
                break;
            }
            match running.last() {
                Some(&(end, _)) => t = end,
                None => return None,
            }
        }
        for &j in unit {
            let end = t + g.duration[j as usize];
            starts[j as usize] = t;
            // Descending by (end, attempt): the same order a min-heap pops them in.
            let at = running.partition_point(|&x| x > (end, j));
            running.insert(at, (end, j));
            count += 1;
            cores += g.cores[j as usize];
            mem += g.mem[j as usize];
            makespan = makespan.max(end);
            scratch.start_order.push(j);
        }
    }
    Some((starts, makespan))
}

/// Evaluate a plan exactly: its schedule, makespan, GPU union and cache byte-ns.
pub fn evaluate(g: &GridInstance, plan: &Plan, scratch: &mut Scratch) -> Option<Evaluation> {
    let (starts, makespan) = list_schedule(g, plan, scratch)?;
    let order = std::mem::take(&mut scratch.start_order);
    let gpu_union = gpu_union_in_order(g, &starts, &order, makespan, scratch);
    let cache_byte_ns = cache_byte_ns(g, &starts, &order, scratch);
    scratch.start_order = order;
    Some(Evaluation {
        starts,
        makespan,
        gpu_union,
        cache_byte_ns,
    })
}

/// Time buckets per request interval of the union sweep (mean occupancy 1/this).
const BUCKETS_PER_INTERVAL: usize = 1;

/// An interval that adds nothing to a [`UnionSweep`] (fills unused ring places).
const SENTINEL: (i64, i64) = (i64::MAX / 4, i64::MIN / 4);

/// The merge sweep of the union, branch-free: intervals arrive in start order, and each adds
/// the part of it beyond the furthest end so far (`reach`). That is exact: every earlier
/// interval starts no later, so their union beyond this start is `[start, reach)`.
#[derive(Debug)]
struct UnionSweep {
    union: i64,
    reach: i64,
}

impl Default for UnionSweep {
    fn default() -> Self {
        UnionSweep {
            union: 0,
            reach: i64::MIN / 4,
        }
    }
}

impl UnionSweep {
    /// Merge the next interval (its start is the smallest not yet merged).
    #[inline(always)]
    fn add(&mut self, (s, e): (i64, i64)) {
        self.union += (e - s.max(self.reach)).max(0);
        self.reach = self.reach.max(e);
    }

    /// Merge four intervals in any order (a branch-free sorting network on the starts).
    #[inline(always)]
    fn add_four(&mut self, v: &[(i64, i64); 4]) {
        #[inline(always)]
        fn cas(a: (i64, i64), b: (i64, i64)) -> ((i64, i64), (i64, i64)) {
            let swap = a.0 > b.0;
            (
                (if swap { b.0 } else { a.0 }, if swap { b.1 } else { a.1 }),
                (if swap { a.0 } else { b.0 }, if swap { a.1 } else { b.1 }),
            )
        }
        let (a, b) = cas(v[0], v[1]);
        let (c, d) = cas(v[2], v[3]);
        let (a, c) = cas(a, c);
        let (b, d) = cas(b, d);
        let (b, c) = cas(b, c);
        self.add(a);
        self.add(b);
        self.add(c);
        self.add(d);
    }

    /// The union length of everything merged.
    fn total(&self) -> i64 {
        self.union
    }
}

/// Intervals a ring slot of the union sweep holds in place.
const SLOT: usize = 4;

/// Union length (ns) of every request shifted by its attempt's start, for any starts (sorts
/// the attempts by start, then [`gpu_union_in_order`]). `makespan` must be at least every
/// end.
pub fn gpu_union(g: &GridInstance, starts: &[i64], makespan: i64, scratch: &mut Scratch) -> i64 {
    let mut order = std::mem::take(&mut scratch.order);
    order.clear();
    order.extend(0..starts.len() as u32);
    order.sort_unstable_by_key(|&j| (starts[j as usize], j));
    let u = gpu_union_in_order(g, starts, &order, makespan, scratch);
    scratch.order = order;
    u
}

/// Union length (ns) of every request shifted by its attempt's start, sweeping attempts in
/// `start_order` (nondecreasing start; every attempt once). `makespan` must be at least every
/// end.
///
/// First by bucket coverage ([`covered_bucket_union`]); when too many buckets are
/// not covered whole by a single request (sparse requests), by the ring-bucket merge sweep
/// ([`ring_union_in_order`]). Both are exact.
pub(crate) fn gpu_union_in_order(
    g: &GridInstance,
    starts: &[i64],
    start_order: &[u32],
    makespan: i64,
    scratch: &mut Scratch,
) -> i64 {
    match covered_bucket_union(g, starts, start_order, makespan, scratch) {
        Some(u) => u,
        None => ring_union_in_order(g, starts, start_order, makespan, scratch),
    }
}

/// Requests per time bucket of [`covered_bucket_union`] (buckets of about a few requests'
/// length: most are still covered whole by one request, and the prefix pass over the
/// buckets costs a fraction of the pass over the requests).
pub(crate) const REQUESTS_PER_COVER_BUCKET: u64 = 4;

/// What examining one candidate attempt of an open run costs, in requests scanned.
pub(crate) const RUN_CANDIDATE_COST: usize = 16;

/// How [`covered_bucket_union`] finds the request pieces in the buckets nobody covers whole.
// Only the unit tests choose a way; the evaluator runs `Auto`.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenPieces {
    /// [`OpenPieces::Runs`] when its candidate attempts times [`RUN_CANDIDATE_COST`] are
    /// fewer than the requests, else [`OpenPieces::Scan`] (same result, the cheaper way).
    Auto,
    /// A second sweep over every request, keeping the parts in open buckets.
    Scan,
    /// Per run of open buckets, the attempts that can reach it (started at most one longest
    /// duration before it, found by binary search in the sorted starts) and, in each, the
    /// requests that overlap it (binary search in its request ends).
    Runs,
}

/// Union length by bucket coverage on power-of-two time buckets (about one per request):
/// the first sweep records, per bucket, the furthest end bucket of the requests whose run of whole
/// buckets starts there; a bucket covered whole by some request (the running maximum lies
/// beyond it) adds its width. Then the pieces of the requests in
/// the other buckets (clipped to them) are collected, sorted and merged: usually from the
/// few attempts around each run of such buckets ([`OpenPieces::Auto`]). `None` (nothing
/// computed) when more than an eighth of the buckets up to the makespan are not covered
/// whole, where the ring sweep is faster.
pub(crate) fn covered_bucket_union(
    g: &GridInstance,
    starts: &[i64],
    start_order: &[u32],
    makespan: i64,
    scratch: &mut Scratch,
) -> Option<i64> {
    covered_bucket_union_with(g, starts, start_order, makespan, OpenPieces::Auto, scratch)
}

/// [`covered_bucket_union`] with the way open pieces are found chosen (for the unit
/// tests; every choice gives the same union).
pub(crate) fn covered_bucket_union_with(
    g: &GridInstance,
    starts: &[i64],
    start_order: &[u32],
    makespan: i64,
    open_pieces: OpenPieces,
    scratch: &mut Scratch,
) -> Option<i64> {
    let total = g.request_count();
    if total == 0 {
        return Some(0);
    }
    let target = (total as u64 / REQUESTS_PER_COVER_BUCKET).max(1);
    let span = makespan.max(1) as u64;
    let mut shift = 0u32;
    while (span >> shift) > target {
        shift += 1;
    }
    let width = 1i64 << shift;
    let n_buckets = (span >> shift) as usize + 2;
    // First sweep: per bucket, the furthest end bucket of the requests whose whole-bucket run
    // starts there (`reach[fb] = max lb`); a bucket is covered whole by some request iff
    // the running maximum over the buckets up to it lies beyond it. One read-modify-write
    // per request (a difference array of counts needs two). The maximum does not depend
    // on the order: attempts in index order read the request arrays front to back (one
    // stream, no miss per attempt).
    let reach = &mut scratch.cover_reach;
    reach.clear();
    reach.resize(n_buckets + 1, 0);
    let reach = &mut reach[..];
    for (j, &s) in starts.iter().enumerate() {
        let range = g.request_first[j]..g.request_first[j + 1];
        let (rs, re) = (&g.request_start[range.clone()], &g.request_end[range]);
        for (&r0, &r1) in rs.iter().zip(re) {
            let (x, y) = (s + r0, s + r1);
            // Buckets [fb, lb) lie inside [x, y); none when fb >= lb (then `lb` is no
            // further than `fb` and the maximum cannot cover a bucket: no branch).
            let fb = ((x + width - 1) >> shift) as usize;
            let lb = (y >> shift) as u32;
            let r = &mut reach[fb];
            *r = (*r).max(lb);
        }
    }
    let mut far = 0u32;
    let mut whole = 0i64;
    let runs = &mut scratch.open_runs;
    runs.clear();
    let mut prev_open = false;
    let mut run_start = 0usize;
    for (b, &r) in reach[..n_buckets].iter().enumerate() {
        far = far.max(r);
        let is_open = far as usize <= b;
        whole += i64::from(!is_open);
        // Open runs begin and end rarely: the branch is nearly always not taken.
        if is_open != prev_open {
            if is_open {
                run_start = b;
            } else {
                runs.push((run_start, b));
            }
            prev_open = is_open;
        }
    }
    if prev_open {
        runs.push((run_start, n_buckets));
    }
    let open = n_buckets + 1 - whole as usize;
    // Buckets past the makespan hold nothing; the last two are always open.
    if open > n_buckets / 8 + 3 {
        return None;
    }
    let pieces = &mut scratch.pieces;
    pieces.clear();
    let sorted = &mut scratch.sorted_starts;
    sorted.clear();
    sorted.extend(start_order.iter().map(|&j| starts[j as usize]));
    let use_runs = match open_pieces {
        OpenPieces::Scan => false,
        OpenPieces::Runs => true,
        OpenPieces::Auto => {
            let mut candidates = 0usize;
            for &(b0, b1) in runs.iter() {
                let (t0, t1) = ((b0 as i64) << shift, (b1 as i64) << shift);
                let lo = sorted.partition_point(|&x| x < t0 - g.max_duration);
                let hi = sorted.partition_point(|&x| x < t1);
                candidates += hi - lo;
            }
            candidates * RUN_CANDIDATE_COST < total
        }
    };
    if use_runs {
        for &(b0, b1) in runs.iter() {
            let (t0, t1) = ((b0 as i64) << shift, (b1 as i64) << shift);
            // Attempts that started before t0 - longest duration have ended by t0.
            let lo = sorted.partition_point(|&x| x < t0 - g.max_duration);
            let hi = sorted.partition_point(|&x| x < t1);
            for &j in &start_order[lo..hi] {
                let j = j as usize;
                let s = starts[j];
                if s + g.duration[j] <= t0 {
                    continue;
                }
                let range = g.request_first[j]..g.request_first[j + 1];
                let (rs, re) = (&g.request_start[range.clone()], &g.request_end[range]);
                // Requests are sorted and disjoint: the first ending after t0 onwards.
                let mut k = re.partition_point(|&e| s + e <= t0);
                while k < rs.len() && s + rs[k] < t1 {
                    pieces.push(((s + rs[k]).max(t0), (s + re[k]).min(t1)));
                    k += 1;
                }
            }
        }
    } else {
        // Per bucket, 1 when some request covers it whole (the running maximum again).
        let cov = &mut scratch.cover_count;
        cov.clear();
        cov.resize(n_buckets + 1, 0);
        let mut far = 0u32;
        for (b, (c, &r)) in cov[..n_buckets].iter_mut().zip(reach.iter()).enumerate() {
            far = far.max(r);
            *c = i32::from(far as usize > b);
        }
        for &j in start_order {
            let j = j as usize;
            let s = starts[j];
            for (x, y) in g.shifted_requests(j, s) {
                let fb = (x + width - 1) >> shift;
                let lb = y >> shift;
                let first = (x >> shift) as usize;
                if x < fb << shift && cov[first] == 0 {
                    pieces.push((x, y.min(fb << shift)));
                }
                if lb >= fb && y > lb << shift && cov[lb as usize] == 0 {
                    pieces.push((lb << shift, y));
                }
            }
        }
    }
    pieces.sort_unstable_by_key(|p| p.0);
    let mut acc = UnionSweep::default();
    for &p in pieces.iter() {
        acc.add(p);
    }
    Some(whole * width + acc.total())
}

/// Union length (ns) of every request shifted by its attempt's start, sweeping attempts in
/// `start_order` (nondecreasing start; every attempt once). Requests go into power-of-two
/// time buckets (a shift is exactly monotone) held in a ring that spans one longest
/// duration: once the sweep reaches an attempt starting at `s`, no later request can start
/// before `s`, so every bucket before `s` is final and is sorted (exactly, in place) and
/// merged into the running union, then reused. One pass over the requests, in a working set
/// the size of the ring. `makespan` must be at least every end.
pub(crate) fn ring_union_in_order(
    g: &GridInstance,
    starts: &[i64],
    start_order: &[u32],
    makespan: i64,
    scratch: &mut Scratch,
) -> i64 {
    let total = g.request_count();
    if total == 0 {
        return 0;
    }
    // Buckets of 2^shift ns, with about INTERVALS_PER_BUCKET intervals each on average.
    let target = (total * BUCKETS_PER_INTERVAL) as u64;
    let span = makespan.max(1) as u64;
    let mut shift = 0u32;
    while (span >> shift) > target {
        shift += 1;
    }
    // Live buckets lie in [s >> shift, (s + dmax) >> shift]: at most dmax >> shift, plus 2.
    // Each ring slot holds SLOT intervals in place (unused places hold a sentinel that adds
    // nothing); a bucket with more also uses its spill vector.
    let ring_len = ((g.max_duration.max(0) >> shift) as usize + 2).next_power_of_two();
    let mask = ring_len - 1;
    let RingScratch {
        slots,
        fill,
        spill,
        merged,
    } = &mut scratch.ring;
    slots.clear();
    slots.resize(ring_len * SLOT, SENTINEL);
    fill.clear();
    fill.resize(ring_len, 0);
    if spill.len() < ring_len {
        spill.resize_with(ring_len, Vec::new);
    }
    for v in spill.iter_mut() {
        v.clear();
    }
    let mut acc = UnionSweep::default();
    // Next bucket to flush (every bucket before it is merged).
    let mut next = 0usize;
    let flush_upto = |limit: usize,
                      next: &mut usize,
                      acc: &mut UnionSweep,
                      slots: &mut [(i64, i64)],
                      fill: &mut [u32],
                      spill: &mut [Vec<(i64, i64)>],
                      merged: &mut Vec<(i64, i64)>| {
        while *next < limit {
            let slot = *next & mask;
            *next += 1;
            let own: &mut [(i64, i64); SLOT] = (&mut slots[slot * SLOT..slot * SLOT + SLOT])
                .try_into()
                .expect("slot");
            let n = fill[slot] as usize;
            if n <= 1 {
                acc.add(own[0]);
                own[0] = SENTINEL;
            } else if n <= SLOT {
                acc.add_four(own);
                *own = [SENTINEL; SLOT];
            } else {
                merged.clear();
                merged.extend_from_slice(own);
                merged.append(&mut spill[slot]);
                merged.sort_unstable_by_key(|iv| iv.0);
                for &iv in merged.iter() {
                    acc.add(iv);
                }
                *own = [SENTINEL; SLOT];
            }
            fill[slot] = 0;
        }
    };
    for &j in start_order {
        let j = j as usize;
        let s = starts[j];
        flush_upto(
            (s >> shift) as usize,
            &mut next,
            &mut acc,
            slots,
            fill,
            spill,
            merged,
        );
        for (x, y) in g.shifted_requests(j, s) {
            let slot = (x >> shift) as usize & mask;
            let n = fill[slot] as usize;
            fill[slot] += 1;
            if n < SLOT {
                slots[slot * SLOT + n] = (x, y);
            } else {
                spill[slot].push((x, y));
            }
        }
    }
    let last = (span >> shift) as usize + 2;
    flush_upto(last, &mut next, &mut acc, slots, fill, spill, merged);
    acc.total()
}

/// `sum_b bytes_b * u(lifetimes of the attempts using b)` in byte-ns, sweeping attempts in
/// the order they started (`start_order` must be nondecreasing in start).
pub fn cache_byte_ns(
    g: &GridInstance,
    starts: &[i64],
    start_order: &[u32],
    scratch: &mut Scratch,
) -> u128 {
    blob_union_lengths(g, starts, start_order, scratch);
    g.blob_bytes
        .iter()
        .zip(&scratch.blob_total)
        .map(|(&bytes, &len)| u128::from(bytes) * len as u128)
        .sum()
}

/// Per blob, the union of its users' lifetimes, ns (by blob index; 0 for an unused blob).
pub fn blob_unions_ns(g: &GridInstance, starts: &[i64]) -> Vec<i64> {
    let mut scratch = Scratch::new();
    blob_union_lengths(g, starts, &start_order_of(starts), &mut scratch);
    scratch.blob_total
}

/// Per blob, the union of its users' lifetimes into `scratch.blob_total`, sweeping attempts
/// in the order they started (`start_order` must be nondecreasing in start).
fn blob_union_lengths(
    g: &GridInstance,
    starts: &[i64],
    start_order: &[u32],
    scratch: &mut Scratch,
) {
    let open = &mut scratch.blob_open;
    open.clear();
    open.resize(g.blob_bytes.len(), (i64::MIN, i64::MIN));
    let total = &mut scratch.blob_total;
    total.clear();
    total.resize(g.blob_bytes.len(), 0);
    for &j in start_order {
        let j = j as usize;
        let (s, e) = (starts[j], starts[j] + g.duration[j]);
        for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
            let cur = &mut open[b as usize];
            if cur.0 == i64::MIN {
                *cur = (s, e);
            } else if s > cur.1 {
                total[b as usize] += cur.1 - cur.0;
                *cur = (s, e);
            } else if e > cur.1 {
                cur.1 = e;
            }
        }
    }
    for (len, &(s, e)) in total.iter_mut().zip(open.iter()) {
        if s != i64::MIN {
            *len += e - s;
        }
    }
}

/// The exact evaluation of arbitrary starts (not necessarily a list schedule): makespan,
/// GPU union and cache byte-ns from scratch with the evaluator's sweeps.
pub fn evaluate_starts(g: &GridInstance, starts: &[i64], scratch: &mut Scratch) -> Evaluation {
    let makespan = starts
        .iter()
        .zip(&g.duration)
        .map(|(s, d)| s + d)
        .max()
        .unwrap_or(0);
    let gpu_union = gpu_union(g, starts, makespan, scratch);
    let order = start_order_of(starts);
    let cache_byte_ns = cache_byte_ns(g, starts, &order, scratch);
    Evaluation {
        starts: starts.to_vec(),
        makespan,
        gpu_union,
        cache_byte_ns,
    }
}

/// Attempts sorted by (start, index): the sweep order of [`cache_byte_ns`] for any starts.
pub fn start_order_of(starts: &[i64]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..starts.len() as u32).collect();
    order.sort_by_key(|&j| (starts[j as usize], j));
    order
}
