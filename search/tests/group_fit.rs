//! The group-release first-fit placement of the cache search against a direct check: on
//! random instances every schedule it returns respects K, both caps and the deadline at
//! every start instant, and the release rule (a group's first attempt not before the
//! previous start, the group's others not before its first); and it refuses a deadline no
//! schedule can meet.

use model::WorkloadId;
use proptest::prelude::*;
use schedule::evaluate::GridInstance;
use schedule::hand::*;
use search::group_fit::first_fit_released;

fn feasible(g: &GridInstance, starts: &[i64], deadline: i64) -> bool {
    (0..g.len()).all(|i| {
        let t = starts[i];
        let run: Vec<usize> = (0..g.len())
            .filter(|&j| starts[j] <= t && t < starts[j] + g.duration[j])
            .collect();
        starts[i] >= 0
            && starts[i] + g.duration[i] <= deadline
            && run.len() as i64 <= g.concurrency
            && run.iter().map(|&j| g.cores[j]).sum::<i64>() <= g.cap_cores
            && run.iter().map(|&j| g.mem[j]).sum::<i64>() <= g.cap_mem
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn released_first_fit_is_feasible_and_keeps_its_releases(
        specs in prop::collection::vec((1u32..20, 1u32..4, 1u32..6, 0u32..3), 2..12),
        k in 1u32..5,
        slack in 0u32..4,
        seed in 0u64..1000,
    ) {
        let attempts = specs
            .iter()
            .enumerate()
            .map(|(i, &(d, c, m, _))| {
                attempt(&format!("a{i}"), i as f64, f64::from(d), &[], f64::from(c), f64::from(m), &[])
            })
            .collect();
        let inst = instance(WorkloadId::Tmax, caps(k, 3.0 + f64::from(slack), 5.0 + f64::from(slack), 8), attempts, vec![]);
        let g = GridInstance::new(&inst);
        let group: Vec<u32> = specs.iter().map(|s| s.3).collect();
        // An order: by a seeded rotation of the groups, then index.
        let mut order: Vec<u32> = (0..g.len() as u32).collect();
        order.sort_by_key(|&j| ((u64::from(group[j as usize]) + seed) % 3, j));
        // The sum of all durations: running the attempts one after another fits it, so the
        // placement must succeed.
        let deadline: i64 = g.duration.iter().sum();
        let starts = first_fit_released(&g, deadline, &order, &group);
        prop_assert!(starts.is_some(), "refused a deadline sequential placement meets");
        {
            let starts = starts.unwrap();
            prop_assert!(feasible(&g, &starts, deadline));
            let mut first: [Option<i64>; 3] = [None; 3];
            let mut prev = 0i64;
            for &j in &order {
                let (s, b) = (starts[j as usize], group[j as usize] as usize);
                match first[b] {
                    None => {
                        prop_assert!(s >= prev, "group {b} starts at {s} before the previous start {prev}");
                        first[b] = Some(s);
                    }
                    Some(f) => prop_assert!(s >= f, "attempt {j} at {s} before its group's first start {f}"),
                }
                prev = s;
            }
        }
    }
}

/// One attempt of 5 s cannot end by a 4-s deadline: refused.
#[test]
fn a_deadline_no_schedule_meets_is_refused() {
    let inst = instance(
        WorkloadId::Tmax,
        caps(1, 4.0, 4.0, 8),
        vec![attempt("a", 0.0, 5.0, &[], 1.0, 1.0, &[])],
        vec![],
    );
    let g = GridInstance::new(&inst);
    assert_eq!(first_fit_released(&g, 4_000_000_000, &[0], &[0]), None);
    assert_eq!(
        first_fit_released(&g, 5_000_000_000, &[0], &[0]),
        Some(vec![0])
    );
}
