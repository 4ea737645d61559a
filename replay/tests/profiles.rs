//! The two search profiles on several synthetic shapes (not only the demo's): the default
//! (extended) profile's best never exceeds the seed profile's, for GPU and cache; its seed
//! phase is exactly the seed profile's run (same best values); every selected schedule
//! and Pareto point of both profiles passes the independent validator; and each profile
//! gives the same report with 1 and 3 threads.

use model::WorkloadId;
use model::config::{ReplayCaps, SearchBudget, SearchConfig, SearchProfile};
use replay::{ReplayInput, ReplayOptions, ReplayReport};
use schedule::synthetic::{SyntheticShape, synthetic_instance};

/// Small shapes that differ in what binds: the study's two, tight CPU, tight RAM,
/// concurrency only, few long tasks with many attempts.
fn shapes() -> Vec<SyntheticShape> {
    let mut out = Vec::new();
    let mut tmax = SyntheticShape::tmax();
    tmax.tasks = 36;
    tmax.requests_per_attempt = 10;
    out.push(tmax.clone());
    let mut deepswe = SyntheticShape::deepswe();
    deepswe.tasks = 14;
    deepswe.repos = 4;
    deepswe.requests_per_attempt = 10;
    out.push(deepswe.clone());
    let mut cpu = deepswe.clone();
    cpu.caps.cpu_cores = 10.0;
    cpu.seed = 3;
    out.push(cpu);
    let mut ram = tmax.clone();
    ram.caps.ram_gib = 30.0;
    ram.seed = 5;
    out.push(ram);
    let mut k_only = deepswe.clone();
    k_only.caps = ReplayCaps {
        concurrency: 6,
        cpu_cores: 1000.0,
        ram_gib: 10_000.0,
        gpus: 8,
    };
    k_only.seed = 9;
    out.push(k_only);
    let mut long = deepswe;
    long.tasks = 6;
    long.attempts_per_task = 8;
    long.median_duration_s = 2400.0;
    long.seed = 13;
    out.push(long);
    out
}

fn config(profile: SearchProfile, workload: WorkloadId) -> SearchConfig {
    SearchConfig {
        seed: 20261129,
        order: vec![workload],
        budget: SearchBudget {
            random_orders: 8,
            perturbations: 8,
            local_moves: 24,
            task_groupings: 8,
            local_move_batch: 8,
            group_starts: 8,
            duty_orders: 6,
            blob_group_orders: 24,
            adaptive_batches: 12,
            lns_rounds: 2,
            lns_chains: 2,
            lns_moves: 50,
            ..Default::default()
        }
        .into(),
        lp_bounds: model::config::LpBoundsConfig {
            enabled: false,
            ..Default::default()
        },
        profile,
        effort: Default::default(),
        // The pattern bound is not what these tests compare; it stays off for speed.
        pattern_bound: model::config::PatternBoundConfig {
            enabled: false,
            ..Default::default()
        },
    }
}

fn run(shape: &SyntheticShape, profile: SearchProfile, threads: usize) -> ReplayReport {
    let inst = synthetic_instance(shape).unwrap();
    let input = ReplayInput {
        workloads: vec![inst],
    };
    let (report, failures) = replay::replay_input(
        &input,
        &config(profile, shape.workload),
        &ReplayOptions {
            threads: Some(threads),
        },
    )
    .unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    report
}

#[test]
fn the_default_is_never_worse_than_the_seed_profile_and_both_validate() {
    for shape in shapes() {
        let seed = run(&shape, SearchProfile::Seed, 2);
        let ext = run(&shape, SearchProfile::Extended, 2);
        let (s, e) = (&seed.workloads[0], &ext.workloads[0]);
        // The seed phase of the default run is the seed profile's run.
        assert_eq!(s.seed_profile_best, (s.best_found.gpu, s.best_found.cache));
        assert_eq!(e.seed_profile_best, s.seed_profile_best, "{shape:?}");
        assert_eq!(e.adaptive.seed_candidates, s.candidates_evaluated);
        assert!(s.adaptive.choices.is_empty());
        assert_eq!(e.adaptive.choices.len(), 12);
        // Never worse, on either objective.
        assert!(e.best_found.gpu <= s.best_found.gpu, "{shape:?}");
        assert!(e.best_found.cache <= s.best_found.cache, "{shape:?}");
        for w in [s, e] {
            assert!(w.selected.iter().all(|x| x.validated));
            assert!(w.pareto.iter().all(|x| x.validated));
            assert!(w.selected.iter().all(|x| x.makespan_s <= w.deadline_s));
        }
    }
}

#[test]
fn both_profiles_give_the_same_report_with_1_and_3_threads() {
    let shape = &shapes()[1];
    for profile in [SearchProfile::Seed, SearchProfile::Extended] {
        let one = run(shape, profile, 1);
        let three = run(shape, profile, 3);
        assert_eq!(one, three, "{profile:?}");
    }
}
