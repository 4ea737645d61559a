//! The GPU pattern bound's pair summary (radix-sorted breakpoint keys) against a
//! brute-force sweep and a plain hull.

use proptest::prelude::*;

/// Sorted disjoint requests from random gaps and lengths (`scale` ns per unit), and a
/// duration at or past the last end.
fn requests_of(cuts: &[(u8, u8)], tail: u8, scale: i64) -> (Vec<(i64, i64)>, i64) {
    let mut t = 0i64;
    let mut out = Vec::new();
    for &(gap, len) in cuts {
        t += i64::from(gap) * scale;
        let end = t + (i64::from(len) + 1) * scale;
        out.push((t, end));
        t = end;
    }
    (out, t + i64::from(tail) * scale)
}

/// `c(tau) = |R_i ∩ (R_j + tau)|` by brute force.
fn oracle_corr(ri: &[(i64, i64)], rj: &[(i64, i64)], tau: i64) -> i64 {
    let mut s = 0;
    for &(p, q) in ri {
        for &(u, v) in rj {
            s += (q.min(v + tau) - p.max(u + tau)).max(0);
        }
    }
    s
}

/// The upper concave hull of points with distinct, ascending `x` (points on a segment
/// between two others dropped).
fn oracle_hull(points: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut h: Vec<(i64, i64)> = Vec::new();
    for &p in points {
        while h.len() >= 2 {
            let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
            let cross = i128::from(b.0 - a.0) * i128::from(p.1 - a.1)
                - i128::from(b.1 - a.1) * i128::from(p.0 - a.0);
            if cross >= 0 {
                h.pop();
            } else {
                break;
            }
        }
        h.push(p);
    }
    h
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The pattern bound's pair summary (breakpoints as radix-sorted keys `2 t + s`)
    /// against every breakpoint's value by brute force and a plain hull, with ns values
    /// large enough for several radix passes and negative keys far from zero.
    #[test]
    fn pair_pieces_equal_a_brute_force_sweep(
        ci in prop::collection::vec((0u8..6, 0u8..5), 1..9),
        cj in prop::collection::vec((0u8..6, 0u8..5), 1..9),
        tail_i in 0u8..8,
        tail_j in 0u8..8,
        big in any::<bool>(),
    ) {
        let scale = if big { 1_000_000_007 } else { 1 };
        let (ri, di) = requests_of(&ci, tail_i, scale);
        let (rj, dj) = requests_of(&cj, tail_j, scale);
        let (h1, h2) = (0.min(di - dj), 0.max(di - dj));
        let mut ts: Vec<i64> = vec![-dj, h1, h2, di];
        for &(p, q) in &ri {
            for &(u, v) in &rj {
                ts.extend([p - v, q - u, p - u, q - v]);
            }
        }
        ts.sort_unstable();
        ts.dedup();
        let pts: Vec<(i64, i64)> = ts.iter().map(|&t| (t, oracle_corr(&ri, &rj, t))).collect();
        let first: Vec<(i64, i64)> = pts.iter().copied().filter(|p| p.0 <= h1).collect();
        let last: Vec<(i64, i64)> = pts.iter().copied().filter(|p| p.0 >= h2).collect();
        let middle = pts.iter().filter(|p| (h1..=h2).contains(&p.0)).map(|p| p.1).max().unwrap_or(0);
        let got = bounds::pattern::pair_pieces(&ri, di, &rj, dj);
        prop_assert_eq!(got.first(), &oracle_hull(&first)[..]);
        prop_assert_eq!(got.middle(), middle.max(0));
        prop_assert_eq!(got.last(), &oracle_hull(&last)[..]);
        // One scratch reused across calls of different shapes gives the same.
        let mut scratch = bounds::pattern::PairScratch::default();
        let _ = bounds::pattern::pair_pieces_with(&mut scratch, &rj, dj, &ri, di);
        prop_assert_eq!(bounds::pattern::pair_pieces_with(&mut scratch, &ri, di, &rj, dj), got);
    }
}
