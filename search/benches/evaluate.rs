//! Benchmark of the replay's hot paths on a synthetic deepswe-shaped workload (2,000
//! attempts, ~60 requests each, deterministic): FIFO replay plus all accounting, full
//! candidate evaluations per second on one core, the validator, and a whole default-budget
//! search on 1 thread and on all threads; moves per second of the start-time neighbourhood
//! search and the first-fit construction.
//!
//! Run: `cargo bench -p search --bench evaluate` (release profile, `harness = false`). The
//! `_cpu` lines count this thread's time on a CPU (Linux), which a shared machine inflates
//! less than wall time.

use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use schedule::synthetic::{SyntheticShape, synthetic_instance};
use search::{ReplayBudget, search_workload};
use std::time::Instant;

/// This thread's time on a CPU so far, seconds (Linux `/proc/thread-self/schedstat`; `None`
/// elsewhere). On a shared machine it leaves out the time the thread waited for a core.
fn cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let inst = synthetic_instance(&SyntheticShape::deepswe()).expect("synthetic instance");
    let g = GridInstance::new(&inst);
    println!(
        "instance: {} attempts, {} request intervals, {} blobs",
        g.len(),
        g.request_count(),
        inst.blobs.len()
    );
    let gpus = inst.caps.gpus;
    let mut scratch = Scratch::new();
    let fifo = Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>());

    // FIFO replay + all accounting (ideal, holding, bounds).
    let mut times = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let e = evaluate(&g, &fifo, &mut scratch).expect("fifo");
        let ideal = schedule::accounting::ideal_hours(&g, gpus, &e);
        let hold = schedule::accounting::holding_hours(&g, gpus, &e);
        let lb = bounds::lower_bounds(&g, gpus);
        std::hint::black_box((ideal, hold, lb));
        times.push(t.elapsed().as_secs_f64());
    }
    println!("fifo_plus_accounting_ms: median {:.3}", median(times) * 1e3);

    // Full candidate evaluations on one core: random orders (Fisher-Yates by an LCG).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut plans = Vec::new();
    for _ in 0..64 {
        let mut o: Vec<u32> = (0..g.len() as u32).collect();
        for i in (1..o.len()).rev() {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let k = ((state >> 33) % (i as u64 + 1)) as usize;
            o.swap(i, k);
        }
        plans.push(Plan::from_order(&o));
    }
    let rounds = 8;
    let cpu0 = cpu_s();
    let t = Instant::now();
    for _ in 0..rounds {
        for p in &plans {
            std::hint::black_box(evaluate(&g, p, &mut scratch));
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_s().zip(cpu0).map(|(b, a)| b - a);
    let n = (rounds * plans.len()) as f64;
    println!(
        "full_evaluations_per_s_one_core: {:.0} ({:.3} ms each)",
        n / secs,
        secs / n * 1e3
    );
    if let Some(cpu) = cpu {
        println!(
            "full_evaluations_per_cpu_s: {:.0} ({:.3} ms of CPU each; wall / CPU {:.2})",
            n / cpu,
            cpu / n * 1e3,
            secs / cpu
        );
    }

    // Breakdown of one evaluation: list schedule, GPU union, cache sweep.
    let (mut t_list, mut t_gpu, mut t_cache) = (0.0, 0.0, 0.0);
    for p in &plans {
        let t = Instant::now();
        let (starts, makespan) =
            schedule::evaluate::list_schedule(&g, p, &mut scratch).expect("fits");
        t_list += t.elapsed().as_secs_f64();
        let t = Instant::now();
        std::hint::black_box(schedule::evaluate::gpu_union(
            &g,
            &starts,
            makespan,
            &mut scratch,
        ));
        t_gpu += t.elapsed().as_secs_f64();
        let order = schedule::evaluate::start_order_of(&starts);
        let t = Instant::now();
        std::hint::black_box(schedule::evaluate::cache_byte_ns(
            &g,
            &starts,
            &order,
            &mut scratch,
        ));
        t_cache += t.elapsed().as_secs_f64();
    }
    let k = plans.len() as f64 / 1e3;
    println!(
        "breakdown_ms: list_schedule {:.3}, gpu_union {:.3}, cache {:.3}",
        t_list / k,
        t_gpu / k,
        t_cache / k
    );

    // Independent validator on one schedule.
    let e = evaluate(&g, &fifo, &mut scratch).expect("fifo");
    let rows = schedule::reference::schedule_rows(&inst, &g, &e.starts);
    let t = Instant::now();
    let r =
        schedule::reference::validate_schedule(&inst, "fifo", &rows, e.makespan as f64 / 1e9, None);
    println!(
        "validator_ms: {:.3} (ok: {})",
        t.elapsed().as_secs_f64() * 1e3,
        r.is_ok()
    );
    let t = Instant::now();
    std::hint::black_box(schedule::reference::independent_fifo(&inst));
    println!(
        "independent_fifo_ms: {:.3}",
        t.elapsed().as_secs_f64() * 1e3
    );

    // Start-time neighbourhood search: moves per second of one chain from FIFO, and the
    // first-fit (backfilling) construction.
    let ctx = search::lns::LnsContext::new(&g, e.makespan);
    for (name, objective) in [
        ("gpu", schedule::Objective::Gpu),
        ("cache", schedule::Objective::Cache),
    ] {
        let params = search::lns::ChainParams {
            moves: 2000,
            max_removed: 3,
            late_acceptance: 64,
            window_every: 0,
            kick_after: 0,
            kick_removed: 0,
        };
        // The chain's state build alone (a chain of no moves), and the chain itself, each
        // timed over ten runs of identical work (the CPU clock of a thread ticks in
        // milliseconds: one 2,000-move chain is a few tens of them); the smaller of two
        // such rounds, as the machine is shared.
        const RUNS: u32 = 10;
        let timed = |p: search::lns::ChainParams| {
            let (mut wall, mut cpu, mut out) = (f64::INFINITY, f64::INFINITY, None);
            for _round in 0..2 {
                let cpu0 = cpu_s();
                let t = Instant::now();
                for _ in 0..RUNS {
                    let mut rng = <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(1);
                    out = Some(search::lns::run_chain(
                        &g, &ctx, &e.starts, objective, p, &mut rng,
                    ));
                }
                wall = wall.min(t.elapsed().as_secs_f64() / f64::from(RUNS));
                if let Some(c) = cpu_s().zip(cpu0).map(|(b, a)| b - a) {
                    cpu = cpu.min(c / f64::from(RUNS));
                }
            }
            (wall, cpu, out.expect("ten runs"))
        };
        let (build, build_cpu, _) = timed(search::lns::ChainParams { moves: 0, ..params });
        let (secs, chain_cpu, out) = timed(params);
        println!(
            "lns_chain_{name}: {} moves in {:.3} s ({:.1} us per move incl. state build; mean of 10 runs, better of 2 rounds), {} accepted, {} infeasible",
            out.moves,
            secs,
            secs / out.moves as f64 * 1e6,
            out.accepted,
            out.infeasible
        );
        println!(
            "lns_chain_{name}_counts: {} of {} accepted moves left an attempt at another start; {} reinsertions tie-broken by the other objective",
            out.moved, out.accepted, out.tie_breaks
        );
        println!(
            "lns_move_{name}_us: {:.1} per move (state build {:.3} ms excluded)",
            (secs - build) / out.moves as f64 * 1e6,
            build * 1e3
        );
        if chain_cpu.is_finite() && build_cpu.is_finite() {
            println!(
                "lns_move_{name}_cpu_us: {:.1} of CPU per move (state build {:.3} ms excluded)",
                (chain_cpu - build_cpu) / out.moves as f64 * 1e6,
                build_cpu * 1e3
            );
        }
    }
    let order: Vec<u32> = (0..g.len() as u32).collect();
    let t = Instant::now();
    let ff = search::lns::first_fit_schedule(
        &g,
        &search::lns::LnsContext::new(&g, i64::MAX / 4),
        &order,
    );
    println!(
        "first_fit_fifo_order_ms: {:.3} (makespan {:.0} s vs list FIFO {:.0} s)",
        t.elapsed().as_secs_f64() * 1e3,
        ff.as_ref()
            .map(|s| s
                .iter()
                .zip(&g.duration)
                .map(|(a, d)| a + d)
                .max()
                .unwrap_or(0))
            .unwrap_or(0) as f64
            / 1e9,
        e.makespan as f64 / 1e9
    );

    // A whole search with the default budget (skipped when REPLAY_BENCH_SKIP_SEARCH is set).
    if std::env::var_os("REPLAY_BENCH_SKIP_SEARCH").is_some() {
        return;
    }
    let budget = ReplayBudget::from_config(&model::config::SearchConfig {
        seed: 20261129,
        order: vec![model::WorkloadId::Deepswe],
        budget: Default::default(),
        lp_bounds: Default::default(),
        profile: Default::default(),
        effort: Default::default(),
        pattern_bound: Default::default(),
    });
    let all = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for threads in [1, all] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        let mut rng =
            <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(
                20261129,
            );
        let t = Instant::now();
        let out = search_workload(&inst, &g, &budget, &mut rng, &pool).expect("search");
        let secs = t.elapsed().as_secs_f64();
        println!(
            "search_default_budget threads={threads}: {} candidates in {:.3} s ({:.0}/s); fifo gpu {:.3} h -> best {:.3} h; fifo cache {:.3} h -> best {:.3} h",
            out.evaluated,
            secs,
            out.evaluated as f64 / secs,
            out.fifo.gpu_h,
            out.best_gpu.gpu_h,
            out.fifo.cache_h,
            out.best_cache.cache_h
        );
    }
}
