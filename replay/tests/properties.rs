//! Property tests on random small instances: every schedule the search selects passes the
//! independent validator; best GPU/cache values lie between their lower bounds and FIFO's
//! ideal values; CPU/RAM ideal values are the same for every schedule; and any plan
//! (including simultaneous starts) evaluates to a feasible schedule whose values the
//! validator recomputes identically.

mod common;

use common::*;
use model::WorkloadId;
use proptest::prelude::*;
use replay::ReplayOptions;
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use schedule::reference::{ClaimedValues, validate_schedule};
use schedule::{AttemptInput, WorkloadInstance};

const GIB: u64 = 1 << 30;

/// (duration in quarter seconds, cores in halves, GiB, request cut points, blob mask, task)
type AttemptSpec = (u32, u32, u32, Vec<u32>, u8, u8);

fn attempt_spec() -> impl Strategy<Value = AttemptSpec> {
    (
        1u32..80,
        1u32..8,
        1u32..9,
        prop::collection::vec(0u32..1000, 0..7),
        1u8..16,
        0u8..3,
    )
}

fn build(specs: &[AttemptSpec], k: u32, cap_slack: (u32, u32)) -> WorkloadInstance {
    let attempts: Vec<AttemptInput> = specs
        .iter()
        .enumerate()
        .map(|(i, (dq, ch, gib, cuts, mask, task))| {
            let d = f64::from(*dq) * 0.25;
            // Cut points (per mille of d), sorted and deduplicated, paired into intervals.
            let mut pts: Vec<u32> = cuts.clone();
            pts.sort_unstable();
            pts.dedup();
            let requests: Vec<(f64, f64)> = pts
                .chunks_exact(2)
                .map(|p| (d * f64::from(p[0]) / 1000.0, d * f64::from(p[1]) / 1000.0))
                .filter(|(s, e)| e > s)
                .collect();
            let blobs: Vec<u32> = (0..4).filter(|b| mask & (1 << b) != 0).collect();
            let mut a = attempt(
                &format!("a{i:02}"),
                f64::from((i * 7 % 5) as u32),
                d,
                &requests,
                f64::from(*ch) * 0.5,
                f64::from(*gib),
                &blobs,
            );
            a.task_id = format!("t{}", (i / 2) * 3 + usize::from(*task));
            a
        })
        .collect();
    let max_cores = attempts.iter().map(|a| a.cores).fold(0.0, f64::max);
    let max_mem = attempts.iter().map(|a| a.mem_gib).fold(0.0, f64::max);
    instance(
        WorkloadId::Deepswe,
        caps(
            k,
            max_cores + f64::from(cap_slack.0) * 0.5,
            max_mem + f64::from(cap_slack.1),
            8,
        ),
        attempts,
        vec![
            blob("b0", GIB),
            blob("b1", GIB / 3),
            blob("b2", 5 * GIB / 2),
            blob("b3", 12_345_678),
        ],
    )
}

fn search_config(seed: u64) -> model::config::SearchConfig {
    model::config::SearchConfig {
        seed,
        order: vec![WorkloadId::Deepswe],
        budget: model::config::SearchBudget {
            perturbations: 6,
            perturbation_spread: 0.4,
            local_moves: 24,
            group_starts: 6,
            duty_orders: 6,
            blob_group_orders: 8,
            lns_rounds: 2,
            lns_chains: 2,
            lns_moves: 40,
            ..Default::default()
        }
        .into(),
        lp_bounds: Default::default(),
        profile: Default::default(),
        effort: Default::default(),
        pattern_bound: Default::default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn selected_schedules_validate_and_respect_bounds(
        specs in prop::collection::vec(attempt_spec(), 3..12),
        k in 1u32..5,
        slack in (0u32..8, 0u32..12),
        seed in any::<u64>(),
    ) {
        let inst = build(&specs, k, slack);
        let input = replay::ReplayInput { workloads: vec![inst] };
        let (report, failures) =
            replay::replay_input(&input, &search_config(seed), &ReplayOptions { threads: Some(2) })
                .unwrap();
        prop_assert!(failures.is_empty(), "{:?}", failures);
        let w = &report.workloads[0];
        let rel = |x: f64| x.abs() * 1e-9;
        for s in &w.selected {
            prop_assert!(s.validated);
            prop_assert!(s.makespan_s <= w.deadline_s);
            // CPU/RAM ideal values do not depend on the schedule.
            prop_assert_eq!(s.ideal.cpu, w.fifo_ideal.cpu);
            prop_assert_eq!(s.ideal.ram, w.fifo_ideal.ram);
            prop_assert!(s.ideal.gpu >= w.lower_bounds.gpu - rel(w.lower_bounds.gpu));
            prop_assert!(s.ideal.cache >= w.lower_bounds.cache - rel(w.lower_bounds.cache));
        }
        let b = &w.best_found;
        prop_assert!(b.gpu >= w.lower_bounds.gpu - rel(w.lower_bounds.gpu));
        prop_assert!(b.gpu <= w.fifo_ideal.gpu + rel(w.fifo_ideal.gpu));
        prop_assert!(b.cache >= w.lower_bounds.cache - rel(w.lower_bounds.cache));
        prop_assert!(b.cache <= w.fifo_ideal.cache + rel(w.fifo_ideal.cache));
        // The stronger bounds of docs/BOUNDS.md hold for every schedule found too.
        prop_assert!(b.gpu >= w.best_bounds.gpu - rel(w.best_bounds.gpu));
        prop_assert!(b.cache >= w.best_bounds.cache - rel(w.best_bounds.cache));
        for p in &w.pareto {
            prop_assert!(p.validated);
            prop_assert!(p.gpu_h >= w.best_bounds.gpu - rel(w.best_bounds.gpu));
            prop_assert!(p.cache_h >= w.best_bounds.cache - rel(w.best_bounds.cache));
        }
        prop_assert_eq!(b.cpu, w.lower_bounds.cpu);
        prop_assert_eq!(b.ram, w.lower_bounds.ram);
        // The fastest schedule is never slower than FIFO, which sets the deadline.
        prop_assert!(w.selected[1].makespan_s <= w.selected[0].makespan_s);
        // FIFO holding is never below FIFO ideal.
        prop_assert!(w.fifo_holding.gpu >= w.fifo_ideal.gpu - rel(w.fifo_ideal.gpu));
        prop_assert!(w.fifo_holding.cache >= w.fifo_ideal.cache - rel(w.fifo_ideal.cache));
        prop_assert!(w.fifo_holding.cpu >= w.fifo_ideal.cpu);
    }

    #[test]
    fn any_plan_is_feasible_and_its_values_match_the_validator(
        specs in prop::collection::vec(attempt_spec(), 3..12),
        k in 1u32..5,
        slack in (0u32..8, 0u32..12),
        keys in prop::collection::vec(any::<u32>(), 12),
        gang_every in 2usize..5,
    ) {
        let inst = build(&specs, k, slack);
        let g = GridInstance::new(&inst);
        let n = inst.attempts.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&j| (keys[j as usize], j));
        // Some consecutive attempts start simultaneously, when they fit together.
        let mut units: Vec<Vec<u32>> = Vec::new();
        for (i, &j) in order.iter().enumerate() {
            match units.last_mut() {
                Some(u) if i % gang_every != 0 && g.fits_empty(&[u.as_slice(), &[j]].concat()) => u.push(j),
                _ => units.push(vec![j]),
            }
        }
        let plan = Plan { units };
        let e = evaluate(&g, &plan, &mut Scratch::new()).expect("every unit fits an empty system");
        let ideal = schedule::accounting::ideal_hours(&g, 8, &e);
        let rows = schedule::reference::schedule_rows(&inst, &g, &e.starts);
        let claimed = ClaimedValues { cpu_h: ideal.cpu, ram_h: ideal.ram, gpu_h: ideal.gpu, cache_h: ideal.cache };
        let checked = validate_schedule(&inst, "random", &rows, e.makespan as f64 / 1e9, Some(claimed));
        prop_assert!(checked.is_ok(), "{:?}", checked.err());
        // Simultaneous units really start together.
        for u in &plan.units {
            prop_assert!(u.iter().all(|&j| e.starts[j as usize] == e.starts[u[0] as usize]));
        }
        // Starts are nondecreasing in plan order (no overtaking).
        let flat = plan.attempt_order();
        prop_assert!(flat.windows(2).all(|w| e.starts[w[0] as usize] <= e.starts[w[1] as usize]));
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count(
        specs in prop::collection::vec(attempt_spec(), 3..12),
        k in 1u32..5,
        slack in (0u32..8, 0u32..12),
        seed in any::<u64>(),
    ) {
        let input = replay::ReplayInput { workloads: vec![build(&specs, k, slack)] };
        let one = replay::replay_input(&input, &search_config(seed), &ReplayOptions { threads: Some(1) }).unwrap();
        let three = replay::replay_input(&input, &search_config(seed), &ReplayOptions { threads: Some(3) }).unwrap();
        prop_assert_eq!(one, three);
    }
}
