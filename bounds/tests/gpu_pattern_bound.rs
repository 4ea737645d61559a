//! The GPU pattern bound (docs/BOUNDS.md, item 7) on generated workloads of many shapes: it never
//! exceeds the GPU union of any schedule (FIFO and random list schedules), each attempt's cap on
//! the request overlap from its partners holds on every one of those schedules, and the
//! bound does not depend on the thread count.

use bounds::pattern::{
    INTERIOR_POINTS, PatternStatus, Weighting, partner_overlap_caps, pattern_bound,
};
use model::WorkloadId;
use model::config::{PatternBoundConfig, ReplayCaps};
use proptest::prelude::*;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use schedule::synthetic::{SyntheticShape, synthetic_instance};

/// `sum_j w_j |R_i ∩ R_j|` of a schedule for attempt `i` (the test's own, pairwise).
fn partner_overlap(g: &GridInstance, s: &[i64], i: usize, w: &[f64]) -> f64 {
    let req = |j: usize| -> Vec<(i64, i64)> {
        (g.request_first[j]..g.request_first[j + 1])
            .map(|k| (s[j] + g.request_start[k], s[j] + g.request_end[k]))
            .collect()
    };
    let ri = req(i);
    (0..g.len())
        .filter(|&j| j != i)
        .map(|j| {
            let mut o = 0i64;
            for &(a, b) in &ri {
                for (c, d) in req(j) {
                    o += (b.min(d) - a.max(c)).max(0);
                }
            }
            w[j] * o as f64
        })
        .sum()
}

fn shape() -> impl Strategy<Value = SyntheticShape> {
    (
        (2usize..9, 1usize..4, 2usize..16, 1usize..4),
        (60.0f64..900.0, 2u32..9, 4.0f64..20.0, 16.0f64..80.0),
        any::<u64>(),
    )
        .prop_map(
            |((tasks, per_task, reqs, repos), (median, k, cpu, ram), seed)| SyntheticShape {
                workload: WorkloadId::Deepswe,
                tasks,
                attempts_per_task: per_task,
                requests_per_attempt: reqs,
                repos,
                median_duration_s: median,
                caps: ReplayCaps {
                    concurrency: k,
                    cpu_cores: cpu,
                    ram_gib: ram,
                    gpus: 8,
                },
                seed,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pattern_bound_is_below_every_schedule_of_generated_shapes(shape in shape(), order_seed in any::<u64>()) {
        let inst = synthetic_instance(&shape).unwrap();
        prop_assume!(inst.check_quotas_fit().is_ok());
        let g = GridInstance::new(&inst);
        let bound = pattern_bound(&g, 8, &PatternBoundConfig::default());
        prop_assert_eq!(bound.status, PatternStatus::Complete);
        prop_assert!(bound.bound_h >= bound.request_time_h * (1.0 - 1e-12));
        let caps = partner_overlap_caps(&g, &vec![true; g.len()], 10, INTERIOR_POINTS);
        let weights: Vec<Vec<f64>> = Weighting::ALL
            .iter()
            .map(|w| match w {
                Weighting::Count => vec![1.0; g.len()],
                Weighting::Cores => g.cores.iter().map(|&c| c as f64).collect(),
                Weighting::Mem => g.mem.iter().map(|&m| m as f64).collect(),
            })
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(order_seed);
        let mut scratch = Scratch::new();
        for round in 0..6 {
            let mut order: Vec<u32> = (0..g.len() as u32).collect();
            if round > 0 {
                for i in (1..order.len()).rev() {
                    order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
                }
            }
            let e = evaluate(&g, &Plan::from_order(&order), &mut scratch).unwrap();
            let gpu_h = 8.0 * e.gpu_union as f64 / 3.6e12;
            prop_assert!(bound.bound_h <= gpu_h * (1.0 + 1e-9), "bound {} > schedule {gpu_h}", bound.bound_h);
            for (x, w) in weights.iter().enumerate() {
                for (i, &cap) in caps[x].iter().enumerate().take(g.len()) {
                    let o = partner_overlap(&g, &e.starts, i, w);
                    prop_assert!(o <= cap * (1.0 + 1e-9) + 1e-6,
                        "{:?}: attempt {} overlap {} > cap {}", Weighting::ALL[x], i, o, cap);
                }
            }
        }
    }
}

/// The same bound with one and with two threads, and a budget that sweeps only some
/// attempts lies between the request-time bound and the full one.
#[test]
fn pattern_bound_is_deterministic_and_monotone_in_its_budget() {
    let shape = SyntheticShape {
        tasks: 12,
        attempts_per_task: 2,
        requests_per_attempt: 12,
        repos: 3,
        median_duration_s: 300.0,
        caps: ReplayCaps {
            concurrency: 6,
            cpu_cores: 12.0,
            ram_gib: 40.0,
            gpus: 8,
        },
        ..SyntheticShape::tmax()
    };
    let g = GridInstance::new(&synthetic_instance(&shape).unwrap());
    let cfg = PatternBoundConfig::default();
    let run = |threads: usize, cfg: &PatternBoundConfig| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| pattern_bound(&g, 8, cfg))
    };
    let one = run(1, &cfg);
    let two = run(2, &cfg);
    assert_eq!(one, two);
    assert_eq!(one.status, PatternStatus::Complete);
    assert!(one.bound_h > one.request_time_h, "{one:?}");
    let half = run(
        2,
        &PatternBoundConfig {
            pair_events: one.pair_events / 2,
            min_swept_share: 0.0,
            ..cfg
        },
    );
    assert_eq!(half.status, PatternStatus::BudgetExhausted);
    assert!(half.attempts_swept > 0 && half.attempts_swept < one.attempts_swept);
    assert!(half.bound_h >= half.request_time_h && half.bound_h <= one.bound_h);
    // A partial sweep runs only when the attempts it reaches hold `min_swept_share` of the
    // request time: all of it (1.0) skips it, exactly its own share keeps it.
    assert!(half.reachable_share > 0.0 && half.reachable_share < 1.0);
    assert_eq!(one.reachable_share, 1.0);
    let skipped = run(
        2,
        &PatternBoundConfig {
            pair_events: one.pair_events / 2,
            min_swept_share: 1.0,
            ..cfg
        },
    );
    assert_eq!(skipped.status, PatternStatus::BelowMinShare);
    assert_eq!((skipped.attempts_swept, skipped.pair_events), (0, 0));
    assert!((skipped.bound_h - half.request_time_h).abs() <= 1e-12 * half.request_time_h);
    let kept = run(
        2,
        &PatternBoundConfig {
            pair_events: one.pair_events / 2,
            min_swept_share: half.reachable_share,
            ..cfg
        },
    );
    assert_eq!(kept, half, "a share the sweep reaches must not skip it");
}
