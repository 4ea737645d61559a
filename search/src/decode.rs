//! The two decoders that turn a priority order into a schedule: the serial admission of
//! docs/FORMAT.md's FIFO (no overtaking: [`schedule::evaluate::list_schedule`]) and the backfilling
//! list schedule (parallel schedule generation): at time 0 and at every end, start every waiting
//! attempt that fits K and both caps next to the running ones, scanning the waiting ones in
//! priority order, so a later attempt overtakes an earlier one that does not fit yet.
//!
//! The backfilling decoder is exact integer arithmetic on the nanosecond grid (ends before
//! starts at equal times, like the validator's sweep); a zero-duration attempt is admitted
//! only when it fits, like any other, and holds nothing after its instant. The next
//! fitting waiting attempt is found by a segment tree of the waiting attempts' smallest
//! cores and memory in priority order, so one decoding costs about `n log n`.

use schedule::evaluate::{Evaluation, GridInstance, Plan, Scratch, evaluate, evaluate_starts};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How an order becomes a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decoder {
    /// Serial admission, no overtaking (the FIFO rule applied to the order).
    Serial,
    /// Backfilling list schedule (at each event, every waiting attempt that fits starts, in
    /// priority order).
    Backfill,
}

impl Decoder {
    /// Both decoders, in the order every order is decoded.
    pub const BOTH: [Decoder; 2] = [Decoder::Serial, Decoder::Backfill];

    /// Name used in candidate labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Decoder::Serial => "serial",
            Decoder::Backfill => "backfill",
        }
    }
}

/// What a backfilling decoding needs of each attempt: duration and quotas, plus the limits.
#[derive(Debug, Clone, Copy)]
pub struct Jobs<'a> {
    /// Duration of each attempt, ns.
    pub duration: &'a [i64],
    /// Cores quota of each attempt, nano-cores.
    pub cores: &'a [i64],
    /// Memory quota of each attempt, nano-GiB.
    pub mem: &'a [i64],
    /// Concurrency limit K.
    pub concurrency: i64,
    /// CPU cap, nano-cores.
    pub cap_cores: i64,
    /// RAM cap, nano-GiB.
    pub cap_mem: i64,
}

impl<'a> Jobs<'a> {
    /// The attempts of a grid instance.
    pub fn of(g: &'a GridInstance) -> Self {
        Jobs {
            duration: &g.duration,
            cores: &g.cores,
            mem: &g.mem,
            concurrency: g.concurrency,
            cap_cores: g.cap_cores,
            cap_mem: g.cap_mem,
        }
    }
}

/// Reusable buffers of the backfilling decoder.
#[derive(Debug, Default)]
pub struct BackfillScratch {
    /// Per tree node, the smallest (cores, memory) of its waiting leaves (`i64::MAX`: none).
    tree: Vec<(i64, i64)>,
    running: BinaryHeap<Reverse<(i64, u32)>>,
}

impl BackfillScratch {
    /// Empty buffers.
    pub fn new() -> Self {
        BackfillScratch::default()
    }
}

const GONE: (i64, i64) = (i64::MAX, i64::MAX);

/// The first waiting position `>= from` whose quotas fit `(cores, mem)`, in the subtree
/// `node` covering `[lo, hi)`.
fn first_fitting(
    tree: &[(i64, i64)],
    node: usize,
    lo: usize,
    hi: usize,
    from: usize,
    cores: i64,
    mem: i64,
) -> Option<usize> {
    let (c, m) = tree[node];
    if hi <= from || c > cores || m > mem {
        return None;
    }
    if hi - lo == 1 {
        return Some(lo);
    }
    let mid = (lo + hi) / 2;
    first_fitting(tree, 2 * node, lo, mid, from, cores, mem)
        .or_else(|| first_fitting(tree, 2 * node + 1, mid, hi, from, cores, mem))
}

/// Starts of the backfilling list schedule of `order` (a permutation of the attempts), or
/// `None` when some attempt would end after `deadline` or could never fit.
pub fn backfill_starts(
    jobs: Jobs<'_>,
    order: &[u32],
    deadline: i64,
    scratch: &mut BackfillScratch,
) -> Option<Vec<i64>> {
    let n = order.len();
    let mut starts = vec![0i64; jobs.duration.len()];
    if n == 0 {
        return Some(starts);
    }
    let size = n.next_power_of_two();
    let tree = &mut scratch.tree;
    tree.clear();
    tree.resize(2 * size, GONE);
    for (p, &j) in order.iter().enumerate() {
        tree[size + p] = (jobs.cores[j as usize], jobs.mem[j as usize]);
    }
    for v in (1..size).rev() {
        let (a, b) = (tree[2 * v], tree[2 * v + 1]);
        tree[v] = (a.0.min(b.0), a.1.min(b.1));
    }
    let running = &mut scratch.running;
    running.clear();
    let (mut count, mut cores, mut mem) = (0i64, 0i64, 0i64);
    let mut waiting = n;
    let mut t = 0i64;
    loop {
        while let Some(&Reverse((end, j))) = running.peek() {
            if end > t {
                break;
            }
            running.pop();
            count -= 1;
            cores -= jobs.cores[j as usize];
            mem -= jobs.mem[j as usize];
        }
        let mut from = 0usize;
        while count < jobs.concurrency {
            let Some(p) = first_fitting(
                tree,
                1,
                0,
                size,
                from,
                jobs.cap_cores - cores,
                jobs.cap_mem - mem,
            ) else {
                break;
            };
            let j = order[p];
            let ju = j as usize;
            let end = t + jobs.duration[ju];
            if end > deadline {
                return None;
            }
            starts[ju] = t;
            if end > t {
                running.push(Reverse((end, j)));
                count += 1;
                cores += jobs.cores[ju];
                mem += jobs.mem[ju];
            }
            let mut v = size + p;
            tree[v] = GONE;
            while v > 1 {
                v /= 2;
                let (a, b) = (tree[2 * v], tree[2 * v + 1]);
                tree[v] = (a.0.min(b.0), a.1.min(b.1));
            }
            waiting -= 1;
            from = p + 1;
        }
        if waiting == 0 {
            return Some(starts);
        }
        match running.peek() {
            Some(&Reverse((end, _))) => t = end,
            None => return None,
        }
    }
}

/// Decode `order` with `decoder` and evaluate it exactly; `None` when the serial schedule
/// cannot place a unit or the backfilling one would end after `deadline` (a serial schedule
/// that ends after it is returned, and the search rejects it).
pub fn decode(
    g: &GridInstance,
    order: &[u32],
    decoder: Decoder,
    deadline: i64,
    scratch: &mut Scratch,
    backfill: &mut BackfillScratch,
) -> Option<Evaluation> {
    match decoder {
        Decoder::Serial => evaluate(g, &Plan::from_order(order), scratch),
        Decoder::Backfill => backfill_starts(Jobs::of(g), order, deadline, backfill)
            .map(|starts| evaluate_starts(g, &starts, scratch)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The backfilling rule written plainly: at each event time (0 and every end), scan
    /// all attempts in priority order and start each waiting one that fits; `None` past the
    /// deadline or when nothing can ever start.
    fn naive(jobs: Jobs<'_>, order: &[u32], deadline: i64) -> Option<Vec<i64>> {
        let n = order.len();
        let mut start: Vec<Option<i64>> = vec![None; jobs.duration.len()];
        let mut t = 0i64;
        let mut left = n;
        while left > 0 {
            for &j in order {
                let ju = j as usize;
                if start[ju].is_some() {
                    continue;
                }
                // Attempts running at t (ends before starts: an end at t frees its place).
                let running: Vec<usize> = (0..jobs.duration.len())
                    .filter(|&k| start[k].is_some_and(|s| s <= t && t < s + jobs.duration[k]))
                    .collect();
                let c: i64 = running.iter().map(|&k| jobs.cores[k]).sum();
                let m: i64 = running.iter().map(|&k| jobs.mem[k]).sum();
                if (running.len() as i64) < jobs.concurrency
                    && c + jobs.cores[ju] <= jobs.cap_cores
                    && m + jobs.mem[ju] <= jobs.cap_mem
                {
                    if t + jobs.duration[ju] > deadline {
                        return None;
                    }
                    start[ju] = Some(t);
                    left -= 1;
                }
            }
            if left == 0 {
                break;
            }
            let next = (0..jobs.duration.len())
                .filter_map(|k| start[k].map(|s| s + jobs.duration[k]))
                .filter(|&e| e > t)
                .min()?;
            t = next;
        }
        Some(start.into_iter().map(|s| s.unwrap_or(0)).collect())
    }

    /// Attempts (duration, cores, mem), K, CPU cap, RAM cap, order, deadline.
    type Instance = (Vec<(i64, i64, i64)>, i64, i64, i64, Vec<u32>, i64);

    fn instance() -> impl Strategy<Value = Instance> {
        (1usize..24)
            .prop_flat_map(|n| {
                (
                    prop::collection::vec((0i64..6, 1i64..5, 1i64..5), n),
                    1i64..5,
                    4i64..10,
                    4i64..10,
                    Just((0..n as u32).collect::<Vec<u32>>()).prop_shuffle(),
                    prop_oneof![Just(i64::MAX), 5i64..40],
                )
            })
            .prop_map(|(a, k, cc, cm, o, d)| (a, k, cc, cm, o, d))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn backfilling_equals_the_plain_rule((attempts, k, cap_c, cap_m, order, deadline) in instance()) {
            let duration: Vec<i64> = attempts.iter().map(|a| a.0).collect();
            let cores: Vec<i64> = attempts.iter().map(|a| a.1).collect();
            let mem: Vec<i64> = attempts.iter().map(|a| a.2).collect();
            let jobs = Jobs { duration: &duration, cores: &cores, mem: &mem, concurrency: k, cap_cores: cap_c, cap_mem: cap_m };
            let fast = backfill_starts(jobs, &order, deadline, &mut BackfillScratch::new());
            prop_assert_eq!(&fast, &naive(jobs, &order, deadline));
            if let Some(s) = fast {
                // Feasible at every start instant (the only instants where load rises).
                for &t in &s {
                    let run: Vec<usize> = (0..s.len()).filter(|&j| s[j] <= t && t < s[j] + duration[j]).collect();
                    prop_assert!(run.len() as i64 <= k);
                    prop_assert!(run.iter().map(|&j| cores[j]).sum::<i64>() <= cap_c);
                    prop_assert!(run.iter().map(|&j| mem[j]).sum::<i64>() <= cap_m);
                }
            }
        }
    }

    #[test]
    fn a_later_attempt_overtakes_one_that_does_not_fit() {
        // Caps 4 cores: attempt 0 (3 cores) runs, attempt 1 (2 cores) waits, attempt 2
        // (1 core) starts beside 0 at time 0; the serial rule would hold it behind 1.
        let (duration, cores, mem) = (vec![10, 5, 7], vec![3, 2, 1], vec![1, 1, 1]);
        let jobs = Jobs {
            duration: &duration,
            cores: &cores,
            mem: &mem,
            concurrency: 3,
            cap_cores: 4,
            cap_mem: 9,
        };
        let s = backfill_starts(jobs, &[0, 1, 2], i64::MAX, &mut BackfillScratch::new());
        assert_eq!(s, Some(vec![0, 10, 0]));
        assert_eq!(
            backfill_starts(jobs, &[0, 1, 2], 14, &mut BackfillScratch::new()),
            None
        );
    }
}
