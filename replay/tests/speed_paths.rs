//! The fast paths of issue 13's speed work against plain oracles: the list schedule's sorted
//! running list (in place of a heap) against a plain admission loop, on random instances with
//! units of several attempts and tied ends; and the request cover's one-cache-line id lists
//! with their spill, under inserts and removes so dense that most buckets spill.

use model::WorkloadId;
use model::config::ReplayCaps;
use proptest::prelude::*;
use replay::cover::RequestCover;
use replay::evaluate::{GridInstance, Plan, Scratch, list_schedule};
use replay::synthetic::{SyntheticShape, synthetic_instance};

/// The admission rule, plainly: each unit at the earliest time not before the previous
/// unit's start at which it fits next to the attempts still running (ends are exclusive).
fn oracle_list_schedule(g: &GridInstance, plan: &Plan) -> Option<(Vec<i64>, i64)> {
    let mut starts = vec![0i64; g.len()];
    let mut running: Vec<usize> = Vec::new();
    let mut t = 0i64;
    for unit in &plan.units {
        loop {
            running.retain(|&j| starts[j] + g.duration[j] > t);
            let n = (running.len() + unit.len()) as i64;
            let c: i64 = running.iter().map(|&j| g.cores[j]).sum::<i64>()
                + unit.iter().map(|&j| g.cores[j as usize]).sum::<i64>();
            let m: i64 = running.iter().map(|&j| g.mem[j]).sum::<i64>()
                + unit.iter().map(|&j| g.mem[j as usize]).sum::<i64>();
            if n <= g.concurrency && c <= g.cap_cores && m <= g.cap_mem {
                break;
            }
            t = running.iter().map(|&j| starts[j] + g.duration[j]).min()?;
        }
        for &j in unit {
            starts[j as usize] = t;
            running.push(j as usize);
        }
    }
    let makespan = (0..g.len())
        .map(|j| starts[j] + g.duration[j])
        .max()
        .unwrap_or(0);
    Some((starts, makespan))
}

/// Length of `[a, b)` not covered by `placed`.
fn oracle_uncovered(placed: &[(i64, i64)], a: i64, b: i64) -> i64 {
    let mut v: Vec<(i64, i64)> = placed
        .iter()
        .map(|&(s, e)| (s.max(a), e.min(b)))
        .filter(|p| p.1 > p.0)
        .collect();
    v.sort_unstable();
    let (mut covered, mut reach) = (0i64, a);
    for (s, e) in v {
        if e > reach {
            covered += e - s.max(reach);
            reach = e;
        }
    }
    (b - a) - covered
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Random small instances (durations rounded to whole minutes, so many attempts end
    /// together) and plans of units of one to three attempts.
    #[test]
    fn list_schedule_equals_a_plain_admission_loop(
        tasks in 2usize..30,
        per_task in 1usize..4,
        k in 1u32..9,
        cpu in 4.0f64..40.0,
        ram in 16.0f64..120.0,
        seed in any::<u64>(),
        cuts in prop::collection::vec(any::<bool>(), 0..120),
        swaps in prop::collection::vec((any::<u32>(), any::<u32>()), 0..200),
    ) {
        let shape = SyntheticShape {
            workload: WorkloadId::Deepswe,
            tasks,
            attempts_per_task: per_task,
            requests_per_attempt: 3,
            repos: 2,
            median_duration_s: 120.0,
            caps: ReplayCaps { concurrency: k, cpu_cores: cpu, ram_gib: ram, gpus: 8 },
            seed,
        };
        let mut inst = synthetic_instance(&shape).unwrap();
        for a in &mut inst.attempts {
            a.duration_s = (a.duration_s / 60.0).ceil() * 60.0;
        }
        let g = GridInstance::new(&inst);
        let n = g.len() as u32;
        let mut order: Vec<u32> = (0..n).collect();
        for &(a, b) in &swaps {
            order.swap((a % n) as usize, (b % n) as usize);
        }
        // Units: consecutive attempts joined where `cuts` says so (at most three).
        let mut units: Vec<Vec<u32>> = Vec::new();
        for (i, &j) in order.iter().enumerate() {
            match units.last_mut() {
                Some(u) if u.len() < 3 && cuts.get(i).copied().unwrap_or(false) => u.push(j),
                _ => units.push(vec![j]),
            }
        }
        let plan = Plan { units };
        let got = list_schedule(&g, &plan, &mut Scratch::new());
        prop_assert_eq!(got, oracle_list_schedule(&g, &plan));
    }

    /// Many short requests over a few buckets (up to 200 placed over 4 to 32 buckets): most
    /// buckets hold more partial pieces than a line, so ids spill and come back.
    #[test]
    fn request_cover_spills_and_stays_exact(
        shift in 3u32..7,
        ops in prop::collection::vec((0i64..256, 1i64..40, 0u8..3), 1..400),
    ) {
        let n_buckets = (256usize >> shift) + 1;
        let mut cover = RequestCover::new(shift, n_buckets, ops.len());
        let horizon = cover.horizon();
        let mut placed: Vec<(i64, i64, u32)> = Vec::new();
        for (id, &(x, len, op)) in ops.iter().enumerate() {
            if op == 0 && !placed.is_empty() {
                let (a, b, k) = placed.swap_remove(x as usize % placed.len());
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                prop_assert_eq!(cover.remove(a, b, k), oracle_uncovered(&plain, a, b));
            } else {
                let y = (x + len).min(horizon);
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                prop_assert_eq!(cover.insert(x, y, id as u32), oracle_uncovered(&plain, x, y));
                placed.push((x, y, id as u32));
            }
            let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
            prop_assert_eq!(cover.gaps().overlap_len(0, horizon), oracle_uncovered(&plain, 0, horizon));
        }
    }
}
