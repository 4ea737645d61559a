//! The HiGHS LP bounds of docs/BOUNDS.md on hand-made instances where they are strictly
//! stronger than every combinatorial bound and equal to the exhaustive optimum, their
//! budget and skip paths, and the exactness of the quota-type pricing search against brute
//! force.

use bounds::lp::{LpStatus, lp_bounds, price_by_quota_type};
use bounds::strong::{blob_bound_parts, strong_bounds};
use model::WorkloadId;
use model::config::LpBoundsConfig;
use proptest::prelude::*;
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use schedule::hand::*;

const GIB: u64 = 1 << 30;
const NS: i64 = 1_000_000_000;

/// LP values carry the solver's tolerance and the certificate's safety margin: a relative
/// 1e-6 is far below the gap to any other bound in these cases.
fn assert_near(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 1e-6 * expected.abs(),
        "{what}: {actual} vs {expected}"
    );
}

/// K = 2; blob x (1 GiB) used by one 4-s attempt, blob y (1 GiB) by four 2-s attempts,
/// with the given requests.
fn two_blobs(x_requests: &[(f64, f64)], y_requests: &[(f64, f64)]) -> schedule::WorkloadInstance {
    let mut attempts = vec![attempt("x1", 0.0, 4.0, x_requests, 1.0, 1.0, &[0])];
    for i in 0..4 {
        attempts.push(attempt(
            &format!("y{i}"),
            f64::from(i + 1),
            2.0,
            y_requests,
            1.0,
            1.0,
            &[1],
        ));
    }
    instance(
        WorkloadId::Tmax,
        caps(2, 100.0, 100.0, 8),
        attempts,
        vec![blob("x", GIB), blob("y", GIB)],
    )
}

/// The default budget, with every shared blob in the cache LP (the default needs 8 users).
fn small() -> LpBoundsConfig {
    LpBoundsConfig {
        min_users: 2,
        ..Default::default()
    }
}

fn fifo(g: &GridInstance) -> (Vec<i64>, i64) {
    let plan = Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>());
    let e = evaluate(g, &plan, &mut Scratch::new()).unwrap();
    (e.starts, e.makespan)
}

/// K = 2 and 3 cores: three 2-core attempts can never run together, a 1-core one can run
/// beside any of them. Each requests for its whole 1-s life, so the GPU optimum is 3 s. The
/// combinatorial bounds reach 7/3 s (CPU energy); the configuration LP reaches 3 s.
#[test]
fn configuration_lp_captures_k_and_the_caps_jointly() {
    let mut attempts: Vec<_> = (0..3)
        .map(|i| {
            attempt(
                &format!("a{i}"),
                f64::from(i),
                1.0,
                &[(0.0, 1.0)],
                2.0,
                1.0,
                &[],
            )
        })
        .collect();
    attempts.push(attempt("b", 3.0, 1.0, &[(0.0, 1.0)], 1.0, 1.0, &[]));
    let inst = instance(WorkloadId::Tmax, caps(2, 3.0, 100.0, 8), attempts, vec![]);
    let g = GridInstance::new(&inst);
    let (starts, d) = fifo(&g);
    let strong = strong_bounds(&g, 8, d);
    assert_close(
        strong.gpu.best,
        8.0 * (7.0 / 3.0) / 3600.0,
        "combinatorial GPU",
    );
    let lp = lp_bounds(&g, 8, d, &blob_bound_parts(&g, d), &starts, &small());
    assert_eq!(lp.gpu.status, LpStatus::Converged, "{:?}", lp.gpu);
    assert_near(lp.gpu.bound_h.unwrap(), 8.0 * 3.0 / 3600.0, "GPU LP");
}

/// K = 2; blob x (1 GiB) is used by one 4-s attempt, blob y (1 GiB) by four 2-s attempts.
/// FIFO gives D = 6 s, in which the 12 s of work leave no idle slot, so y's users must fill
/// the slot beside x's attempt: y stays open 6 s, x 4 s, optimum 10 GiB-s. The per-blob
/// bounds give 4 + 4; the fluid LP, with the deadline as a constraint, reaches 10.
#[test]
fn fluid_lp_charges_the_sharing_the_deadline_forces() {
    let inst = two_blobs(&[], &[]);
    let g = GridInstance::new(&inst);
    let (starts, d) = fifo(&g);
    assert_eq!(d, 6 * NS);
    let strong = strong_bounds(&g, 8, d);
    assert_close(strong.cache.best, 8.0 / 3600.0, "per-blob bounds");
    let lp = lp_bounds(&g, 8, d, &blob_bound_parts(&g, d), &starts, &small());
    assert_eq!(lp.cache.status, LpStatus::Converged, "{:?}", lp.cache);
    assert_near(lp.cache.bound_h.unwrap(), 10.0 / 3600.0, "cache LP");
}

/// With one round the bound is still reported (valid, possibly weaker) and says so;
/// disabled, both are skipped with the reason.
#[test]
fn budget_and_skip_are_reported() {
    let inst = two_blobs(&[(0.0, 4.0)], &[(0.0, 1.0)]);
    let g = GridInstance::new(&inst);
    let (starts, d) = fifo(&g);
    let parts = blob_bound_parts(&g, d);
    let full = lp_bounds(&g, 8, d, &parts, &starts, &small());
    let one = LpBoundsConfig {
        rounds: 1,
        ..small()
    };
    let short = lp_bounds(&g, 8, d, &parts, &starts, &one);
    for (a, b) in [(&short.gpu, &full.gpu), (&short.cache, &full.cache)] {
        assert_eq!(a.rounds, 1);
        assert_eq!(b.status, LpStatus::Converged, "{b:?}");
        // One round converges exactly when the full run needed only one; otherwise the
        // budget ran out and the status says so.
        let want = if b.rounds == 1 {
            LpStatus::Converged
        } else {
            LpStatus::BudgetExhausted
        };
        assert_eq!(a.status, want, "one round: {a:?}; unbounded: {b:?}");
        assert!(a.bound_h.unwrap() <= b.bound_h.unwrap() * (1.0 + 1e-12));
    }
    // The instance needs more than one round for at least one bound, so the budget status
    // is exercised.
    assert!(
        full.gpu.rounds > 1 || full.cache.rounds > 1,
        "{:?} {:?}",
        full.gpu,
        full.cache
    );
    let off = LpBoundsConfig {
        enabled: false,
        ..Default::default()
    };
    let skipped = lp_bounds(&g, 8, d, &parts, &starts, &off);
    assert_eq!(skipped.gpu.status, LpStatus::Skipped);
    assert_eq!(skipped.gpu.bound_h, None);
    assert_eq!(
        skipped.cache.detail.as_deref(),
        Some("disabled by search.lp_bounds.enabled")
    );
}

/// Brute force over every subset: the largest dual sum of a set within K and both caps.
fn brute_force(quota: &[(i64, i64)], duals: &[Vec<f64>], k: i64, c: i64, m: i64) -> f64 {
    let items: Vec<(i64, i64, f64)> = quota
        .iter()
        .zip(duals)
        .flat_map(|(&(qc, qm), d)| d.iter().map(move |&y| (qc, qm, y)))
        .collect();
    let mut best = 0.0f64;
    for mask in 0u32..(1 << items.len()) {
        let (mut n, mut sc, mut sm, mut v) = (0i64, 0i64, 0i64, 0.0);
        for (i, it) in items.iter().enumerate() {
            if mask & (1 << i) != 0 {
                n += 1;
                sc += it.0;
                sm += it.1;
                v += it.2;
            }
        }
        if n <= k && sc <= c && sm <= m {
            best = best.max(v);
        }
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The pricing search over quota types equals brute force over subsets.
    #[test]
    fn pricing_by_quota_type_is_exact(
        types in prop::collection::vec(
            ((1i64..5, 1i64..5), prop::collection::vec(1u32..100, 0..4)),
            1..5,
        ),
        k in 1i64..6,
        c in 1i64..12,
        m in 1i64..12,
    ) {
        prop_assume!(types.iter().map(|t| t.1.len()).sum::<usize>() <= 14);
        let quota: Vec<(i64, i64)> = types.iter().map(|t| t.0).collect();
        let duals: Vec<Vec<f64>> = types
            .iter()
            .map(|t| {
                let mut d: Vec<f64> = t.1.iter().map(|&x| f64::from(x) / 7.0).collect();
                d.sort_by(|a, b| b.total_cmp(a));
                d
            })
            .collect();
        let priced = price_by_quota_type(&quota, &duals, k, c, m, u64::MAX);
        let brute = brute_force(&quota, &duals, k, c, m);
        prop_assert!((priced.value - brute).abs() <= 1e-9 * (1.0 + brute), "{} vs {}", priced.value, brute);
        prop_assert_eq!(priced.upper, priced.value);
        // The counts it reports realise its value within K and both caps.
        let n: i64 = priced.counts.iter().map(|&x| x as i64).sum();
        let sc: i64 = priced.counts.iter().zip(&quota).map(|(&x, q)| x as i64 * q.0).sum();
        let sm: i64 = priced.counts.iter().zip(&quota).map(|(&x, q)| x as i64 * q.1).sum();
        prop_assert!(n <= k && sc <= c && sm <= m);
        // A node limit of 1 still gives an upper bound.
        let cut = price_by_quota_type(&quota, &duals, k, c, m, 1);
        prop_assert!(cut.upper >= brute - 1e-9);
    }
}

/// A workload without blobs (and without requests) has LP bounds of exactly +0, not the
/// `-0.0` of an empty float sum.
#[test]
fn empty_objectives_give_positive_zero() {
    let inst = instance(
        WorkloadId::Tmax,
        caps(2, 100.0, 100.0, 8),
        vec![
            attempt("a", 0.0, 4.0, &[], 1.0, 1.0, &[]),
            attempt("b", 1.0, 2.0, &[], 1.0, 1.0, &[]),
        ],
        vec![],
    );
    let g = GridInstance::new(&inst);
    let (starts, d) = fifo(&g);
    let lp = lp_bounds(&g, 8, d, &blob_bound_parts(&g, d), &starts, &small());
    for (what, v) in [("cache", lp.cache.bound_h), ("gpu", lp.gpu.bound_h)] {
        let v = v.unwrap_or_else(|| panic!("{what} bound skipped"));
        assert!(v == 0.0 && v.is_sign_positive(), "{what}: {v:?}");
    }
}
