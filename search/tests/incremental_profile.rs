//! The start-time search's step profile against a plain oracle: after random inserts and
//! removes, every violation query (forward and backward) and every profile value equals the
//! one computed by sweeping the placed lifetimes from scratch (the search's former code),
//! and the one-pass forward and backward searches equal iterated queries.

use proptest::prelude::*;
use search::profile::{StepProfile, Use};

/// The former sweep over the placed lifetimes overlapping `[s, e)`.
fn oracle(placed: &[(i64, i64, Use)], s: i64, e: i64, u: Use, caps: Use, fwd: bool) -> Option<i64> {
    if e <= s {
        return None;
    }
    let over = |v: &Use| v[0] > caps[0] || v[1] > caps[1] || v[2] > caps[2];
    let value = |t: i64| {
        let mut v = u;
        for &(a, b, w) in placed {
            if a <= t && t < b {
                for k in 0..3 {
                    v[k] += w[k];
                }
            }
        }
        v
    };
    let mut checks: Vec<i64> = placed
        .iter()
        .map(|p| p.0)
        .filter(|&t| t > s && t < e)
        .collect();
    checks.push(s);
    checks.sort_unstable();
    checks.dedup();
    let running = |t: i64| placed.iter().filter(move |p| p.0 <= t && t < p.1);
    if fwd {
        let t = *checks.iter().find(|&&t| over(&value(t)))?;
        Some(running(t).map(|p| p.1).min().unwrap_or(e))
    } else {
        let t = *checks.iter().rev().find(|&&t| over(&value(t)))?;
        if t > s {
            Some(t)
        } else {
            Some(running(s).map(|p| p.0).max().unwrap_or(s))
        }
    }
}

/// The feasible-start search as separate violation queries: from `s`, at most `steps`
/// queries for `[s, s + d)`, each failing one moving `s` to the time it returns (forward)
/// or to that time less `d` (backward, the window's end moves there); `Some(s)` at the
/// first that fits, `None` when the steps run out.
fn iterated(
    prof: &StepProfile,
    mut s: i64,
    d: i64,
    u: Use,
    caps: Use,
    steps: usize,
    forward: bool,
) -> Option<i64> {
    for _ in 0..steps {
        let Some(next) = prof.violation(s, s + d, u, caps, forward) else {
            return Some(s);
        };
        s = if forward { next } else { next - d };
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn profile_matches_the_oracle(
        ops in prop::collection::vec((0i64..400, 1i64..120, 1i64..4, 1i64..5, any::<bool>()), 1..60),
        queries in prop::collection::vec((0i64..500, 1i64..150, 1i64..4, 1i64..5), 1..30),
        k in 1i64..6,
        width in 4i64..80,
    ) {
        let caps: Use = [k, 8, 10];
        let mut prof = StepProfile::new(width);
        let mut placed: Vec<(u32, i64, i64, Use)> = Vec::new();
        for (i, &(s, d, c, m, remove)) in ops.iter().enumerate() {
            if remove && !placed.is_empty() {
                let (j, a, b, w) = placed.remove(s as usize % placed.len());
                prof.remove(j, a, b, w);
            } else {
                let w: Use = [1, c, m];
                prof.insert(i as u32, s, s + d, w);
                placed.push((i as u32, s, s + d, w));
            }
            let plain: Vec<(i64, i64, Use)> = placed.iter().map(|p| (p.1, p.2, p.3)).collect();
            for &(qs, qd, qc, qm) in &queries {
                let u: Use = [1, qc, qm];
                for fwd in [true, false] {
                    prop_assert_eq!(
                        prof.violation(qs, qs + qd, u, caps, fwd),
                        oracle(&plain, qs, qs + qd, u, caps, fwd),
                        "query ({}, {}) fwd {}", qs, qs + qd, fwd
                    );
                }
                // The one-pass searches equal iterated queries; bounded to the starts of
                // use, they return the same start when it is of use, else it or nothing.
                for steps in [1usize, 3, 8] {
                    for forward in [true, false] {
                        let whole = iterated(&prof, qs, qd, u, caps, steps, forward);
                        let search =
                            |useful| prof.feasible_search(qs, qd, u, caps, useful, steps, forward);
                        prop_assert_eq!(
                            search((i64::MIN, i64::MAX)),
                            whole,
                            "search from {} ({} steps, forward {})", qs, steps, forward
                        );
                        for useful in [
                            (0, 450),
                            (qs / 2, qs + qd),
                            (qs + 2 * qd, qs + 4 * qd),
                            (qs - 4 * qd, qs - 2 * qd),
                            (qs + 3 * qd, qs + 3 * qd),
                        ] {
                            let got = search(useful);
                            let of_use = whole.is_some_and(|x| useful.0 <= x && x <= useful.1);
                            prop_assert!(
                                got == whole || (!of_use && got.is_none()),
                                "search from {} ({} steps, forward {}) for {:?}: {:?}, unbounded {:?}",
                                qs, steps, forward, useful, got, whole
                            );
                        }
                    }
                }
                let mut v = [0i64; 3];
                for &(a, b, w) in &plain {
                    if a <= qs && qs < b {
                        for x in 0..3 {
                            v[x] += w[x];
                        }
                    }
                }
                prop_assert_eq!(prof.value_at(qs), v);
            }
        }
    }
}
