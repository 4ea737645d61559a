//! The search's exact evaluator: list schedules on an integer nanosecond grid with resource
//! sums in integer nano-units, and union lengths by a bucketed sorted sweep. No float
//! arithmetic touches a start time or a union length, so nothing drifts and every result is
//! the same on every machine.

use crate::input::{WorkloadInstance, quota_units};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

    /// Whether a set of attempts fits together in an empty system.
    pub fn fits_empty(&self, attempts: &[u32]) -> bool {
        let c: i64 = attempts.iter().map(|&j| self.cores[j as usize]).sum();
        let m: i64 = attempts.iter().map(|&j| self.mem[j as usize]).sum();
        attempts.len() as i64 <= self.concurrency && c <= self.cap_cores && m <= self.cap_mem
    }
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
    running: BinaryHeap<Reverse<(i64, u32)>>,
    start_order: Vec<u32>,
    bucket_count: Vec<u32>,
    sorted: Vec<(i64, i64)>,
    blob_open: Vec<(i64, i64)>,
    blob_total: Vec<i64>,
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
    let heap = &mut scratch.running;
    heap.clear();
    scratch.start_order.clear();
    let (mut count, mut cores, mut mem) = (0i64, 0i64, 0i64);
    let mut t = 0i64;
    let mut makespan = 0i64;
    for unit in &plan.units {
        let n_unit = unit.len() as i64;
        let unit_cores: i64 = unit.iter().map(|&j| g.cores[j as usize]).sum();
        let unit_mem: i64 = unit.iter().map(|&j| g.mem[j as usize]).sum();
        loop {
            while let Some(&Reverse((end, j))) = heap.peek() {
                if end > t {
                    break;
                }
                heap.pop();
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
            match heap.peek() {
                Some(&Reverse((end, _))) => t = end,
                None => return None,
            }
        }
        for &j in unit {
            let end = t + g.duration[j as usize];
            starts[j as usize] = t;
            heap.push(Reverse((end, j)));
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
    let gpu_union = gpu_union(g, &starts, makespan, scratch);
    let order = std::mem::take(&mut scratch.start_order);
    let cache_byte_ns = cache_byte_ns(g, &starts, &order, scratch);
    scratch.start_order = order;
    Some(Evaluation {
        starts,
        makespan,
        gpu_union,
        cache_byte_ns,
    })
}

/// Mean request intervals per bucket of the union sweep's counting sort.
const INTERVALS_PER_BUCKET: usize = 4;

/// Union length (ns) of every request shifted by its attempt's start: a counting sort of the
/// interval starts into monotone time buckets, then per bucket an exact insertion sort and
/// the merge sweep. `makespan` must be at least every end.
pub fn gpu_union(g: &GridInstance, starts: &[i64], makespan: i64, scratch: &mut Scratch) -> i64 {
    let total = g.request_count();
    if total == 0 {
        return 0;
    }
    // Buckets of 2^shift ns, with about INTERVALS_PER_BUCKET intervals each on average: a
    // shift is exactly monotone, so buckets in order hold the starts in order; exactness
    // comes from the sort inside each bucket.
    let target = total.div_ceil(INTERVALS_PER_BUCKET) as u64;
    let span = makespan.max(1) as u64;
    let mut shift = 0u32;
    while (span >> shift) > target {
        shift += 1;
    }
    let n_buckets = (span >> shift) as usize + 1;
    let bucket_of = |x: i64| (x >> shift) as usize;
    let counts = &mut scratch.bucket_count;
    counts.clear();
    counts.resize(n_buckets + 1, 0);
    for (j, &s) in starts.iter().enumerate() {
        for &r in &g.request_start[g.request_first[j]..g.request_first[j + 1]] {
            counts[bucket_of(s + r) + 1] += 1;
        }
    }
    for b in 1..=n_buckets {
        counts[b] += counts[b - 1];
    }
    let sorted = &mut scratch.sorted;
    if sorted.len() != total {
        sorted.clear();
        sorted.resize(total, (0, 0));
    }
    for (j, &s) in starts.iter().enumerate() {
        let range = g.request_first[j]..g.request_first[j + 1];
        for (&r0, &r1) in g.request_start[range.clone()]
            .iter()
            .zip(&g.request_end[range])
        {
            let b = bucket_of(s + r0);
            sorted[counts[b] as usize] = (s + r0, s + r1);
            counts[b] += 1;
        }
    }
    // After the scatter, counts[b] is the end of bucket b (and the start of bucket b + 1).
    let mut union = 0i64;
    let (mut cur_s, mut cur_e) = (i64::MIN, i64::MIN);
    let mut lo = 0usize;
    for &hi in counts.iter().take(n_buckets) {
        let hi = hi as usize;
        let bucket = &mut sorted[lo..hi];
        if bucket.len() <= 24 {
            for i in 1..bucket.len() {
                let x = bucket[i];
                let mut k = i;
                while k > 0 && bucket[k - 1].0 > x.0 {
                    bucket[k] = bucket[k - 1];
                    k -= 1;
                }
                bucket[k] = x;
            }
        } else {
            bucket.sort_unstable_by_key(|iv| iv.0);
        }
        for &(s, e) in bucket.iter() {
            if s > cur_e {
                if cur_e != i64::MIN {
                    union += cur_e - cur_s;
                }
                cur_s = s;
                cur_e = e;
            } else if e > cur_e {
                cur_e = e;
            }
        }
        lo = hi;
    }
    union + (cur_e - cur_s)
}

/// `sum_b bytes_b * u(lifetimes of the attempts using b)` in byte-ns, sweeping attempts in
/// the order they started (`start_order` must be nondecreasing in start).
pub fn cache_byte_ns(
    g: &GridInstance,
    starts: &[i64],
    start_order: &[u32],
    scratch: &mut Scratch,
) -> u128 {
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
    let mut sum = 0u128;
    for (b, &bytes) in g.blob_bytes.iter().enumerate() {
        let (s, e) = open[b];
        let len = total[b] + if s == i64::MIN { 0 } else { e - s };
        sum += u128::from(bytes) * len as u128;
    }
    sum
}

/// Attempts sorted by (start, index): the sweep order of [`cache_byte_ns`] for any starts.
pub fn start_order_of(starts: &[i64]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..starts.len() as u32).collect();
    order.sort_by_key(|&j| (starts[j as usize], j));
    order
}
