//! The evaluator's GPU unions (bucket coverage counts with either way of finding the pieces
//! in open buckets, and the one-pass ring-bucket sweep it falls back to) against a plain
//! sort-and-merge of every shifted request, on random small instances and random starts,
//! sparse and dense.

use crate::evaluate::{
    GridInstance, OpenPieces, Plan, Scratch, covered_bucket_union, covered_bucket_union_with,
    gpu_union, gpu_union_in_order, list_schedule, ring_union_in_order, start_order_of,
};
use crate::synthetic::{SyntheticShape, synthetic_instance};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn ring_union_equals_a_plain_sort(
        tasks in 2usize..30,
        requests in 1usize..40,
        seed in any::<u64>(),
        spread in 1i64..2_000_000_000_000,
        shifts in prop::collection::vec(any::<u64>(), 200),
    ) {
        let mut shape = SyntheticShape::deepswe();
        shape.tasks = tasks;
        shape.repos = 3;
        shape.requests_per_attempt = requests;
        shape.seed = seed;
        let inst = synthetic_instance(&shape).unwrap();
        let g = GridInstance::new(&inst);
        let starts: Vec<i64> = (0..g.len())
            .map(|j| (shifts[j % shifts.len()] % spread as u64) as i64)
            .collect();
        let makespan = starts.iter().zip(&g.duration).map(|(s, d)| s + d).max().unwrap();
        let mut scratch = Scratch::new();
        let want = crate::reference::gpu_union(&g, &starts);
        prop_assert_eq!(gpu_union(&g, &starts, makespan, &mut scratch), want);
        let order = start_order_of(&starts);
        prop_assert_eq!(gpu_union_in_order(&g, &starts, &order, makespan, &mut scratch), want);
        prop_assert_eq!(ring_union_in_order(&g, &starts, &order, makespan, &mut scratch), want);
        if let Some(u) = covered_bucket_union(&g, &starts, &order, makespan, &mut scratch) {
            prop_assert_eq!(u, want);
        }
        for way in [OpenPieces::Scan, OpenPieces::Runs] {
            let u = covered_bucket_union_with(&g, &starts, &order, makespan, way, &mut scratch);
            if let Some(u) = u {
                prop_assert_eq!(u, want, "{:?}", way);
            }
        }
    }

    #[test]
    fn coverage_count_union_equals_a_plain_sort_on_dense_schedules(
        tasks in 2usize..40,
        requests in 1usize..60,
        seed in any::<u64>(),
        shifts in prop::collection::vec(any::<u64>(), 200),
        spread_pct in 1u64..60,
    ) {
        let mut shape = SyntheticShape::deepswe();
        shape.tasks = tasks;
        shape.repos = 3;
        shape.requests_per_attempt = requests;
        shape.seed = seed;
        let inst = synthetic_instance(&shape).unwrap();
        let g = GridInstance::new(&inst);
        // Starts within a fraction of the shortest duration: many requests overlap.
        let dmin = g.duration.iter().copied().min().unwrap().max(1) as u64;
        let spread = (dmin * spread_pct / 100).max(1);
        let starts: Vec<i64> = (0..g.len())
            .map(|j| (shifts[j % shifts.len()] % spread) as i64)
            .collect();
        let makespan = starts.iter().zip(&g.duration).map(|(s, d)| s + d).max().unwrap();
        let mut scratch = Scratch::new();
        let want = crate::reference::gpu_union(&g, &starts);
        let order = start_order_of(&starts);
        if let Some(u) = covered_bucket_union(&g, &starts, &order, makespan, &mut scratch) {
            prop_assert_eq!(u, want);
        }
        for way in [OpenPieces::Scan, OpenPieces::Runs] {
            let u = covered_bucket_union_with(&g, &starts, &order, makespan, way, &mut scratch);
            if let Some(u) = u {
                prop_assert_eq!(u, want, "{:?}", way);
            }
        }
        prop_assert_eq!(gpu_union_in_order(&g, &starts, &order, makespan, &mut scratch), want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// List schedules of random orders on a deepswe-shaped instance (the bench's shape,
    /// smaller): when the coverage-count union answers (not too many open buckets) it is the
    /// plain sort's union, whichever way it finds the open pieces.
    #[test]
    fn coverage_count_union_on_list_schedules_equals_a_plain_sort(
        tasks in 20usize..80,
        seed in any::<u64>(),
        swaps in prop::collection::vec((any::<u32>(), any::<u32>()), 0..400),
    ) {
        let mut shape = SyntheticShape::deepswe();
        shape.tasks = tasks;
        shape.repos = 5;
        shape.seed = seed;
        let inst = synthetic_instance(&shape).unwrap();
        let g = GridInstance::new(&inst);
        let n = g.len() as u32;
        let mut order: Vec<u32> = (0..n).collect();
        for &(a, b) in &swaps {
            order.swap((a % n) as usize, (b % n) as usize);
        }
        let mut scratch = Scratch::new();
        let (starts, makespan) =
            list_schedule(&g, &Plan::from_order(&order), &mut scratch).unwrap();
        let want = crate::reference::gpu_union(&g, &starts);
        let by_start = start_order_of(&starts);
        let auto = covered_bucket_union_with(
            &g, &starts, &by_start, makespan, OpenPieces::Auto, &mut scratch,
        );
        if let Some(u) = auto {
            prop_assert_eq!(u, want);
        }
        for way in [OpenPieces::Scan, OpenPieces::Runs] {
            let u = covered_bucket_union_with(&g, &starts, &by_start, makespan, way, &mut scratch);
            prop_assert_eq!(u, auto.map(|_| want), "{:?}", way);
        }
        prop_assert_eq!(gpu_union(&g, &starts, makespan, &mut scratch), want);
    }
}

/// On the bench's instance (deepswe shape, 2,000 attempts) the coverage-count union
/// answers for FIFO and for random orders (no fallback), equal to the plain sort both ways.
#[test]
fn coverage_count_union_answers_on_the_bench_instance() {
    let inst = synthetic_instance(&SyntheticShape::deepswe()).unwrap();
    let g = GridInstance::new(&inst);
    let n = g.len() as u32;
    let mut scratch = Scratch::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..4 {
        let mut order: Vec<u32> = (0..n).collect();
        if round > 0 {
            for i in (1..order.len()).rev() {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                order.swap(i, ((state >> 33) % (i as u64 + 1)) as usize);
            }
        }
        let (starts, makespan) =
            list_schedule(&g, &Plan::from_order(&order), &mut scratch).unwrap();
        let want = crate::reference::gpu_union(&g, &starts);
        let by_start = start_order_of(&starts);
        for way in [OpenPieces::Auto, OpenPieces::Scan, OpenPieces::Runs] {
            let u = covered_bucket_union_with(&g, &starts, &by_start, makespan, way, &mut scratch);
            assert_eq!(u, Some(want), "round {round}, {way:?}");
        }
    }
}
