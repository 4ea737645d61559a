//! The fast paths of issue 13's speed work against plain oracles: the list schedule's sorted
//! running list (in place of a heap) against a plain admission loop, on random instances with
//! units of several attempts and tied ends; and the request cover's one-cache-line id lists
//! with their spill, under inserts and removes so dense that most buckets spill; and the GPU
//! pattern bound's pair summary (radix-sorted breakpoint keys) against a brute-force sweep.

mod common;

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
                prop_assert_eq!(cover.remove(a, b, k), common::oracle_uncovered(&plain, a, b));
            } else {
                let y = (x + len).min(horizon);
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                prop_assert_eq!(cover.insert(x, y, id as u32), common::oracle_uncovered(&plain, x, y));
                placed.push((x, y, id as u32));
            }
            let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
            prop_assert_eq!(cover.gaps().overlap_len(0, horizon), common::oracle_uncovered(&plain, 0, horizon));
        }
    }
}

/// Sorted disjoint requests from random gaps and lengths (`scale` ns per unit), and a
/// duration at or past the last end.
fn requests_of(cuts: &[(u8, u8)], tail: u8, scale: i64) -> (Vec<(i64, i64)>, i64) {
    let mut t = 0i64;
    let mut out = Vec::new();
    for &(gap, len) in cuts {
        t += i64::from(gap) * scale;
        let end = t + (i64::from(len) + 1) * scale;
        out.push((t, end));
        t = end;
    }
    (out, t + i64::from(tail) * scale)
}

/// `c(tau) = |R_i ∩ (R_j + tau)|` by brute force.
fn oracle_corr(ri: &[(i64, i64)], rj: &[(i64, i64)], tau: i64) -> i64 {
    let mut s = 0;
    for &(p, q) in ri {
        for &(u, v) in rj {
            s += (q.min(v + tau) - p.max(u + tau)).max(0);
        }
    }
    s
}

/// The upper concave hull of points with distinct, ascending `x` (points on a segment
/// between two others dropped).
fn oracle_hull(points: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut h: Vec<(i64, i64)> = Vec::new();
    for &p in points {
        while h.len() >= 2 {
            let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
            let cross = i128::from(b.0 - a.0) * i128::from(p.1 - a.1)
                - i128::from(b.1 - a.1) * i128::from(p.0 - a.0);
            if cross >= 0 {
                h.pop();
            } else {
                break;
            }
        }
        h.push(p);
    }
    h
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The pattern bound's pair summary (breakpoints as radix-sorted keys `2 t + s`)
    /// against every breakpoint's value by brute force and a plain hull, with ns values
    /// large enough for several radix passes and negative keys far from zero.
    #[test]
    fn pair_pieces_equal_a_brute_force_sweep(
        ci in prop::collection::vec((0u8..6, 0u8..5), 1..9),
        cj in prop::collection::vec((0u8..6, 0u8..5), 1..9),
        tail_i in 0u8..8,
        tail_j in 0u8..8,
        big in any::<bool>(),
    ) {
        let scale = if big { 1_000_000_007 } else { 1 };
        let (ri, di) = requests_of(&ci, tail_i, scale);
        let (rj, dj) = requests_of(&cj, tail_j, scale);
        let (h1, h2) = (0.min(di - dj), 0.max(di - dj));
        let mut ts: Vec<i64> = vec![-dj, h1, h2, di];
        for &(p, q) in &ri {
            for &(u, v) in &rj {
                ts.extend([p - v, q - u, p - u, q - v]);
            }
        }
        ts.sort_unstable();
        ts.dedup();
        let pts: Vec<(i64, i64)> = ts.iter().map(|&t| (t, oracle_corr(&ri, &rj, t))).collect();
        let first: Vec<(i64, i64)> = pts.iter().copied().filter(|p| p.0 <= h1).collect();
        let last: Vec<(i64, i64)> = pts.iter().copied().filter(|p| p.0 >= h2).collect();
        let middle = pts.iter().filter(|p| (h1..=h2).contains(&p.0)).map(|p| p.1).max().unwrap_or(0);
        let got = replay::gpu_bound::pair_pieces(&ri, di, &rj, dj);
        prop_assert_eq!(got.first(), &oracle_hull(&first)[..]);
        prop_assert_eq!(got.middle(), middle.max(0));
        prop_assert_eq!(got.last(), &oracle_hull(&last)[..]);
        // One scratch reused across calls of different shapes gives the same.
        let mut scratch = replay::gpu_bound::PairScratch::default();
        let _ = replay::gpu_bound::pair_pieces_with(&mut scratch, &rj, dj, &ri, di);
        prop_assert_eq!(replay::gpu_bound::pair_pieces_with(&mut scratch, &ri, di, &rj, dj), got);
    }
}
