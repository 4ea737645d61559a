//! Seed profile vs default (extended) profile on generated shapes (not the demo corpus):
//! prints, per shape and objective, FIFO ideal, the seed profile's best, the default's best
//! and the default's gain, with the candidates each evaluated. The budget is the default
//! one unless `SCALE` (a divisor of every count, e.g. `SCALE=4`) is set.
//!
//! `cargo run --release -p replay --example profile_compare`

use model::WorkloadId;
use model::config::{LpBoundsConfig, ReplayCaps, SearchBudget, SearchConfig, SearchProfile};
use replay::{ReplayInput, ReplayOptions};
use schedule::synthetic::{SyntheticShape, synthetic_instance};

fn shapes() -> Vec<(&'static str, SyntheticShape)> {
    let tmax = SyntheticShape::tmax();
    let mut deepswe = SyntheticShape::deepswe();
    deepswe.tasks = 150;
    deepswe.repos = 15;
    let mut out = vec![("tmax", tmax.clone()), ("deepswe-600", deepswe.clone())];
    let mut s = tmax.clone();
    s.seed = 101;
    out.push(("tmax-seed101", s));
    let mut s = deepswe.clone();
    s.caps.cpu_cores = 24.0;
    s.seed = 3;
    out.push(("deepswe-tight-cpu", s));
    let mut s = tmax.clone();
    s.caps.ram_gib = 40.0;
    s.seed = 5;
    out.push(("tmax-tight-ram", s));
    let mut s = deepswe.clone();
    s.caps = ReplayCaps {
        concurrency: 24,
        cpu_cores: 10_000.0,
        ram_gib: 100_000.0,
        gpus: 8,
    };
    s.seed = 9;
    out.push(("deepswe-k-only", s));
    let mut s = deepswe;
    s.tasks = 40;
    s.attempts_per_task = 10;
    s.median_duration_s = 2400.0;
    s.seed = 13;
    out.push(("deepswe-long-many-attempts", s));
    out
}

fn main() {
    let scale: u32 = std::env::var("SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let d = SearchBudget::default();
    let budget = SearchBudget {
        random_orders: d.random_orders / scale,
        perturbations: d.perturbations / scale,
        local_moves: d.local_moves / scale,
        task_groupings: d.task_groupings / scale,
        adaptive_batches: d.adaptive_batches / scale,
        lns_moves: d.lns_moves / scale,
        ..d
    };
    println!(
        "| shape | attempts | objective | FIFO ideal | seed profile | default | gain % | candidates seed / default |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, shape) in shapes() {
        let inst = synthetic_instance(&shape).expect("shape");
        let n = inst.attempts.len();
        let input = ReplayInput {
            workloads: vec![inst],
        };
        let run = |profile| {
            let cfg = SearchConfig {
                seed: 20261129,
                order: vec![WorkloadId::Deepswe, WorkloadId::Tmax]
                    .into_iter()
                    .filter(|w| *w == shape.workload)
                    .collect(),
                budget: budget.clone().into(),
                effort: Default::default(),
                lp_bounds: LpBoundsConfig {
                    enabled: false,
                    ..Default::default()
                },
                profile,
                pattern_bound: model::config::PatternBoundConfig {
                    enabled: false,
                    ..Default::default()
                },
            };
            let (r, failures) =
                replay::replay_input(&input, &cfg, &ReplayOptions::default()).expect("replay");
            assert!(failures.is_empty(), "{failures:?}");
            r.workloads.into_iter().next().expect("one workload")
        };
        let seed = run(SearchProfile::Seed);
        let ext = run(SearchProfile::Extended);
        for (objective, fifo, s, e) in [
            (
                "gpu",
                seed.fifo_ideal.gpu,
                seed.best_found.gpu,
                ext.best_found.gpu,
            ),
            (
                "cache",
                seed.fifo_ideal.cache,
                seed.best_found.cache,
                ext.best_found.cache,
            ),
        ] {
            println!(
                "| {name} | {n} | {objective} | {fifo:.2} | {s:.2} | {e:.2} | {:.2} | {} / {} |",
                (1.0 - e / s) * 100.0,
                seed.candidates_evaluated,
                ext.candidates_evaluated
            );
        }
        eprintln!("{name}: adaptive choices {:?}", ext.adaptive.operators);
    }
}
