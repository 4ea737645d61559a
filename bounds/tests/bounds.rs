//! Every lower bound (the study's and the stronger ones of docs/BOUNDS.md) is checked
//! against exact optima of tiny instances, found by exhaustive search over integer-second
//! start times up to the deadline D (a bound above an optimum is a bug), and against
//! hand-computed values where the stronger bound is tight.

use bounds::lp::{LpStatus, lp_bounds};
use bounds::pattern::{
    INTERIOR_POINTS, PatternStatus, Weighting, partner_overlap_caps, pattern_bound,
};
use bounds::strong::{blob_bound_parts, strong_bounds};
use model::WorkloadId;
use model::config::PatternBoundConfig;
use proptest::prelude::*;
use schedule::WorkloadInstance;
use schedule::evaluate::k_prime;
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use schedule::hand::*;
use schedule::reference::union_length;

const GIB: u64 = 1 << 30;
const NS: i64 = 1_000_000_000;

/// Calls `visit` with every integer-second start vector (ns) whose schedule respects K,
/// both caps (checked at every start instant) and D.
fn for_each_feasible(g: &GridInstance, deadline: i64, mut visit: impl FnMut(&[i64])) {
    let n = g.len();
    let mut starts = vec![0i64; n];
    let latest: Vec<i64> = (0..n).map(|j| (deadline - g.duration[j]) / NS).collect();
    loop {
        let s: Vec<i64> = starts.iter().map(|x| x * NS).collect();
        let feasible = (0..n).all(|i| {
            let t = s[i];
            let run: Vec<usize> = (0..n)
                .filter(|&j| s[j] <= t && t < s[j] + g.duration[j])
                .collect();
            run.len() as i64 <= g.concurrency
                && run.iter().map(|&j| g.cores[j]).sum::<i64>() <= g.cap_cores
                && run.iter().map(|&j| g.mem[j]).sum::<i64>() <= g.cap_mem
        });
        if feasible {
            visit(&s);
        }
        // Next start vector (odometer).
        let mut i = 0;
        loop {
            if i == n {
                return;
            }
            if starts[i] < latest[i] {
                starts[i] += 1;
                break;
            }
            starts[i] = 0;
            i += 1;
        }
    }
}

/// Attempt `j`'s requests shifted by `s` (the test's own).
fn shifted(g: &GridInstance, j: usize, s: i64) -> Vec<(i64, i64)> {
    (g.request_first[j]..g.request_first[j + 1])
        .map(|k| (s + g.request_start[k], s + g.request_end[k]))
        .collect()
}

/// Exact optima (GPU union ns, cache byte-ns) over every feasible integer-second schedule.
fn exhaustive_optima(g: &GridInstance, deadline: i64) -> (i64, u128) {
    let n = g.len();
    let (mut best_gpu, mut best_cache) = (i64::MAX, u128::MAX);
    for_each_feasible(g, deadline, |s| {
        let req: Vec<(i64, i64)> = (0..n).flat_map(|j| shifted(g, j, s[j])).collect();
        best_gpu = best_gpu.min(union_length(req));
        let mut cache = 0u128;
        for (b, &bytes) in g.blob_bytes.iter().enumerate() {
            let lives: Vec<(i64, i64)> = (0..n)
                .filter(|&j| g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]].contains(&(b as u32)))
                .map(|j| (s[j], s[j] + g.duration[j]))
                .collect();
            cache += u128::from(bytes) * union_length(lives) as u128;
        }
        best_cache = best_cache.min(cache);
    });
    (best_gpu, best_cache)
}

/// `sum_j w_j |R_i ∩ R_j|` of a schedule for attempt `i` (the test's own, pairwise).
fn partner_overlap(g: &GridInstance, s: &[i64], i: usize, w: &[f64]) -> f64 {
    let ri = shifted(g, i, s[i]);
    (0..g.len())
        .filter(|&j| j != i)
        .map(|j| {
            let rj = shifted(g, j, s[j]);
            let mut o = 0i64;
            for &(a, b) in &ri {
                for &(c, d) in &rj {
                    o += (b.min(d) - a.max(c)).max(0);
                }
            }
            w[j] * o as f64
        })
        .sum()
}

/// (duration s, cores, GiB, request cut points, blob mask)
type Spec = (u32, u32, u32, Vec<u32>, u8);

fn build(specs: &[Spec], k: u32, cpu_slack: u32, ram_slack: u32) -> WorkloadInstance {
    let attempts = specs
        .iter()
        .enumerate()
        .map(|(i, (d, c, m, cuts, mask))| {
            let mut pts: Vec<u32> = cuts.iter().map(|x| x % (d + 1)).collect();
            pts.sort_unstable();
            pts.dedup();
            let req: Vec<(f64, f64)> = pts
                .chunks_exact(2)
                .map(|p| (f64::from(p[0]), f64::from(p[1])))
                .filter(|r| r.1 > r.0)
                .collect();
            let blobs: Vec<u32> = (0..3).filter(|b| mask & (1 << b) != 0).collect();
            attempt(
                &format!("a{i}"),
                i as f64,
                f64::from(*d),
                &req,
                f64::from(*c),
                f64::from(*m),
                &blobs,
            )
        })
        .collect::<Vec<_>>();
    let max_c = specs.iter().map(|s| s.1).max().unwrap_or(1);
    let max_m = specs.iter().map(|s| s.2).max().unwrap_or(1);
    instance(
        WorkloadId::Tmax,
        caps(
            k,
            f64::from(max_c + cpu_slack),
            f64::from(max_m + ram_slack),
            8,
        ),
        attempts,
        vec![blob("x", GIB), blob("y", GIB / 2), blob("z", 3 * GIB)],
    )
}

fn fifo_deadline(g: &GridInstance) -> i64 {
    fifo(g).1
}

/// FIFO starts and makespan.
fn fifo(g: &GridInstance) -> (Vec<i64>, i64) {
    let plan = Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>());
    let e = evaluate(g, &plan, &mut Scratch::new()).unwrap();
    (e.starts, e.makespan)
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1u32..4,
        1u32..5,
        1u32..5,
        prop::collection::vec(0u32..5, 0..5),
        1u8..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_bound_is_at_most_the_exhaustive_optimum(
        specs in prop::collection::vec(spec(), 3..6),
        k in 1u32..4,
        cpu_slack in 0u32..6,
        ram_slack in 0u32..6,
    ) {
        let inst = build(&specs, k, cpu_slack, ram_slack);
        let g = GridInstance::new(&inst);
        let d = fifo_deadline(&g);
        let combos: f64 = (0..g.len())
            .map(|j| ((d - g.duration[j]) / NS + 1) as f64)
            .product();
        prop_assume!(combos <= 150_000.0);
        let (opt_gpu, opt_cache) = exhaustive_optima(&g, d);
        let gpu_opt_h = 8.0 * opt_gpu as f64 / 3.6e12;
        let cache_opt_h = opt_cache as f64 / (GIB as f64 * 3.6e12);
        let ok = |bound: f64, opt: f64| bound <= opt * (1.0 + 1e-9) + 1e-15;
        let strong = strong_bounds(&g, 8, d);
        let seed = bounds::lower_bounds(&g, 8);
        for (name, v) in [
            ("seed", seed.gpu),
            ("machine", strong.gpu.machine),
            ("cpu_energy", strong.gpu.cpu_energy),
            ("ram_energy", strong.gpu.ram_energy),
            ("compulsory", strong.gpu.compulsory),
            ("best", strong.gpu.best),
        ] {
            prop_assert!(ok(v, gpu_opt_h), "GPU {name} bound {v} > optimum {gpu_opt_h}");
        }
        for (name, v) in [
            ("seed", seed.cache),
            ("machine", strong.cache.machine),
            ("cpu_energy", strong.cache.cpu_energy),
            ("ram_energy", strong.cache.ram_energy),
            ("compulsory", strong.cache.compulsory),
            ("best", strong.cache.best),
        ] {
            prop_assert!(ok(v, cache_opt_h), "cache {name} bound {v} > optimum {cache_opt_h}");
        }
        // The LP bounds (HiGHS, default budget) converge on these and stay below the optima.
        let (fifo_starts, _) = fifo(&g);
        let lp_cfg = model::config::LpBoundsConfig { min_users: 2, ..Default::default() };
        let lp = lp_bounds(&g, 8, d, &blob_bound_parts(&g, d), &fifo_starts, &lp_cfg);
        for (name, b, opt) in [("GPU", &lp.gpu, gpu_opt_h), ("cache", &lp.cache, cache_opt_h)] {
            prop_assert_eq!(b.status, LpStatus::Converged, "{} LP: {:?}", name, b);
            let v = b.bound_h.unwrap();
            prop_assert!(ok(v, opt), "{name} LP bound {v} > optimum {opt}");
        }
        // The pattern bound (full budget) stays below the GPU optimum.
        let pattern = pattern_bound(&g, 8, &PatternBoundConfig::default());
        prop_assert_eq!(pattern.status, PatternStatus::Complete);
        prop_assert!(ok(pattern.bound_h, gpu_opt_h), "GPU pattern bound {} > optimum {gpu_opt_h}", pattern.bound_h);
        let with = strong.with_gpu_pattern(pattern);
        prop_assert!(ok(with.gpu.best, gpu_opt_h));
        // The stronger bound never falls below the seed's.
        prop_assert!(strong.gpu.best >= seed.gpu * (1.0 - 1e-12));
        prop_assert!(strong.cache.best >= seed.cache * (1.0 - 1e-12));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The heart of the pattern bound: on every feasible schedule of a tiny instance, the
    /// request overlap each attempt gets from its partners is at most its cap, under every
    /// weighting (a cap below an overlap some schedule reaches is a bug).
    #[test]
    fn partner_overlap_caps_hold_on_every_feasible_schedule(
        specs in prop::collection::vec(spec(), 3..6),
        k in 1u32..4,
        cpu_slack in 0u32..6,
        ram_slack in 0u32..6,
    ) {
        let inst = build(&specs, k, cpu_slack, ram_slack);
        let g = GridInstance::new(&inst);
        let d = fifo_deadline(&g);
        let combos: f64 = (0..g.len())
            .map(|j| ((d - g.duration[j]) / NS + 1) as f64)
            .product();
        prop_assume!(combos <= 50_000.0);
        let caps = partner_overlap_caps(&g, &vec![true; g.len()], 10, INTERIOR_POINTS);
        let weights: Vec<Vec<f64>> = Weighting::ALL
            .iter()
            .map(|w| match w {
                Weighting::Count => vec![1.0; g.len()],
                Weighting::Cores => g.cores.iter().map(|&c| c as f64).collect(),
                Weighting::Mem => g.mem.iter().map(|&m| m as f64).collect(),
            })
            .collect();
        let mut worst: Option<String> = None;
        for_each_feasible(&g, d, |s| {
            for (x, w) in weights.iter().enumerate() {
                for (i, &cap) in caps[x].iter().enumerate().take(g.len()) {
                    let o = partner_overlap(&g, s, i, w);
                    if o > cap * (1.0 + 1e-9) + 1e-6 && worst.is_none() {
                        worst = Some(format!("{:?}: attempt {i} overlap {o} > cap {cap} at {s:?}", Weighting::ALL[x]));
                    }
                }
            }
        });
        prop_assert!(worst.is_none(), "{}", worst.unwrap_or_default());
    }
}

/// K = 2: `a` requests `[0, 1)` and `[2, 3)` of its 3 s, `b` requests its whole 2 s, and `c`
/// (3 s, no requests) stretches D to 5 s so that no request has a compulsory part. Whatever
/// the shift, `b` overlaps at most 1 s of `a`'s requests, so the union is at least 3 s (the
/// optimum). The request-time bounds give 2 s (they let the requests line
/// up); the pattern bound caps each attempt's overlap at 1 s and gives
/// `2^2 / (2 + 1) + 2^2 / (2 + 1) = 8/3` s.
#[test]
fn pattern_bound_sees_that_requests_cannot_line_up() {
    let inst = instance(
        WorkloadId::Tmax,
        caps(2, 10.0, 10.0, 8),
        vec![
            attempt("a", 0.0, 3.0, &[(0.0, 1.0), (2.0, 3.0)], 1.0, 1.0, &[]),
            attempt("b", 1.0, 2.0, &[(0.0, 2.0)], 1.0, 1.0, &[]),
            attempt("c", 2.0, 3.0, &[], 1.0, 1.0, &[]),
        ],
        vec![],
    );
    let g = GridInstance::new(&inst);
    let d = fifo_deadline(&g);
    assert_eq!(d, 5 * NS);
    let (opt_gpu, _) = exhaustive_optima(&g, d);
    assert_eq!(opt_gpu, 3 * NS);
    let strong = strong_bounds(&g, 8, d);
    assert_close(strong.gpu.best, 8.0 * 2.0 / 3600.0, "request-time bounds");
    let p = pattern_bound(&g, 8, &PatternBoundConfig::default());
    assert_eq!(p.status, PatternStatus::Complete);
    assert_eq!(p.attempts_swept, 2);
    // 1e-9 is the bound's own safety margin.
    assert_close(
        p.bound_h,
        8.0 * (8.0 / 3.0) / 3600.0 * (1.0 - 1e-9),
        "pattern bound",
    );
    let with = strong.with_gpu_pattern(p);
    assert_eq!(with.gpu.best, p.bound_h);
    // A budget of no events sweeps nothing: the request-time caps give the energy bound.
    let none = pattern_bound(
        &g,
        8,
        &PatternBoundConfig {
            pair_events: 0,
            min_swept_share: 0.0,
            ..Default::default()
        },
    );
    assert_eq!(none.status, PatternStatus::BudgetExhausted);
    assert_eq!(none.attempts_swept, 0);
    assert_close(none.bound_h, none.request_time_h, "unswept bound");
    assert!(none.bound_h < p.bound_h);
    // With the default minimum share, a sweep that reaches nothing is not started.
    let not_worth = pattern_bound(
        &g,
        8,
        &PatternBoundConfig {
            pair_events: 0,
            ..Default::default()
        },
    );
    assert_eq!(not_worth.status, PatternStatus::BelowMinShare);
    assert_eq!((not_worth.attempts_swept, not_worth.pair_events), (0, 0));
    assert_eq!(not_worth.bound_h, none.bound_h);
    let off = pattern_bound(
        &g,
        8,
        &PatternBoundConfig {
            enabled: false,
            ..Default::default()
        },
    );
    assert_eq!(off.status, PatternStatus::Skipped);
    assert_eq!(off.bound_h, 0.0);
}

/// K = 4, but 4 GiB of RAM lets only one 3-GiB attempt run at a time: K' = 1. Three
/// attempts of 2 s, each requesting for its whole life and using blob x (1 GiB): every
/// feasible schedule runs them one after another, so the optimum GPU union and blob
/// lifetime union are 6 s, which the stronger bounds reach while the seed's give 2 s.
#[test]
fn k_prime_makes_the_bounds_tight_when_ram_binds() {
    let attempts = (0..3)
        .map(|i| {
            attempt(
                &format!("a{i}"),
                f64::from(i),
                2.0,
                &[(0.0, 2.0)],
                1.0,
                3.0,
                &[0],
            )
        })
        .collect();
    let inst = instance(
        WorkloadId::Tmax,
        caps(4, 100.0, 4.0, 8),
        attempts,
        vec![blob("x", GIB)],
    );
    let g = GridInstance::new(&inst);
    assert_eq!(k_prime(&g, &[0, 1, 2]), 1);
    let d = fifo_deadline(&g);
    assert_eq!(d, 6 * NS);
    let (opt_gpu, opt_cache) = exhaustive_optima(&g, d);
    assert_eq!(opt_gpu, 6 * NS);
    assert_eq!(opt_cache, u128::from(GIB) * 6 * NS as u128);
    let strong = strong_bounds(&g, 8, d);
    let seed = bounds::lower_bounds(&g, 8);
    assert_close(seed.gpu, 8.0 * 2.0 / 3600.0, "seed gpu");
    assert_close(strong.gpu.best, 8.0 * 6.0 / 3600.0, "strong gpu");
    assert_close(seed.cache, 2.0 / 3600.0, "seed cache");
    assert_close(strong.cache.best, 6.0 / 3600.0, "strong cache");
    // The compulsory parts of [0, 6] are empty here (slack 4 s > 2 s).
    assert_eq!(strong.cache.compulsory, 0.0);
}

/// One 5-s attempt with D = 6 s (set by a second attempt that must follow it): it surely
/// runs during [1, 5), so blob y's lifetime union is at least 4 s, and its request [0, 5)
/// surely covers [1, 5).
#[test]
fn compulsory_parts_inside_the_deadline_window() {
    let inst = instance(
        WorkloadId::Tmax,
        caps(1, 10.0, 10.0, 8),
        vec![
            attempt("a", 0.0, 5.0, &[(0.0, 5.0)], 1.0, 1.0, &[1]),
            attempt("b", 1.0, 1.0, &[], 1.0, 1.0, &[]),
        ],
        vec![blob("x", GIB), blob("y", GIB)],
    );
    let g = GridInstance::new(&inst);
    let d = fifo_deadline(&g);
    assert_eq!(d, 6 * NS);
    let strong = strong_bounds(&g, 8, d);
    assert_close(strong.cache.compulsory, 4.0 / 3600.0, "cache compulsory");
    assert_close(strong.gpu.compulsory, 8.0 * 4.0 / 3600.0, "gpu compulsory");
    // The machine bound (d_max = 5 s) is stronger still, and the optimum is 5 s.
    assert_close(strong.cache.best, 5.0 / 3600.0, "cache best");
}
