//! The list schedule's sorted running list (in place of a heap) against the plain admission
//! loop of [`schedule::reference::list_schedule`], on random instances with units of
//! several attempts and tied ends.

use model::WorkloadId;
use model::config::ReplayCaps;
use proptest::prelude::*;
use schedule::evaluate::{GridInstance, Plan, Scratch, list_schedule};
use schedule::reference;
use schedule::synthetic::{SyntheticShape, synthetic_instance};

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
        prop_assert_eq!(got, reference::list_schedule(&g, &plan));
    }
}
