//! The start-time search's cover indexes against plain oracles: after random inserts and
//! removes, the request cover's gap set, every value it returns and every uncovered-length
//! query equal a full recomputation from the placed intervals; likewise a blob's lifetime
//! cover, its gaps and its sorted users (with index access).

mod common;

use proptest::prelude::*;
use replay::cover::{BlobCover, GapSet, RequestCover, SortedChunks};

/// Gaps of the union of `placed` within `[lo, hi)`, by sorting and merging.
fn oracle_gaps(placed: &[(i64, i64)], lo: i64, hi: i64) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = placed.iter().copied().filter(|p| p.1 > p.0).collect();
    v.sort_unstable();
    let mut gaps = Vec::new();
    let mut reach = lo;
    for (a, b) in v {
        if a > reach {
            gaps.push((reach, a));
        }
        reach = reach.max(b);
    }
    if reach < hi {
        gaps.push((reach, hi));
    }
    gaps
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn request_cover_matches_the_oracle(
        shift in 0u32..5,
        ops in prop::collection::vec((0i64..300, 1i64..60, any::<bool>()), 1..80),
        queries in prop::collection::vec((0i64..300, 1i64..80), 1..12),
    ) {
        let n_buckets = (400usize >> shift) + 1;
        let mut cover = RequestCover::new(shift, n_buckets, ops.len());
        let horizon = cover.horizon();
        let mut placed: Vec<(i64, i64, u32)> = Vec::new();
        for (id, &(x, len, remove)) in ops.iter().enumerate() {
            if remove && !placed.is_empty() {
                let (a, b, k) = placed.remove(x as usize % placed.len());
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                let want = common::oracle_uncovered(&plain, a, b);
                prop_assert_eq!(cover.remove(a, b, k), want);
            } else {
                let y = (x + len).min(horizon);
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                let want = common::oracle_uncovered(&plain, x, y);
                prop_assert_eq!(cover.insert(x, y, id as u32), want);
                placed.push((x, y, id as u32));
            }
            let placed: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
            prop_assert_eq!(cover.gaps().as_slice(), &oracle_gaps(&placed, 0, horizon)[..]);
            for &(a, l) in &queries {
                prop_assert_eq!(cover.gaps().overlap_len(a, a + l), common::oracle_uncovered(&placed, a, a + l));
            }
        }
    }

    #[test]
    fn blob_cover_matches_the_oracle(
        ops in prop::collection::vec((-50i64..300, 0i64..60, any::<bool>()), 1..80),
        queries in prop::collection::vec((-80i64..350, 0i64..80), 1..12),
    ) {
        let dmax = 60;
        let mut cover = BlobCover::new(dmax);
        let mut placed: Vec<(i64, i64, u32)> = Vec::new();
        for (i, &(x, len, remove)) in ops.iter().enumerate() {
            let plain = |p: &[(i64, i64, u32)]| p.iter().map(|q| (q.0, q.1)).collect::<Vec<_>>();
            if remove && !placed.is_empty() {
                let (a, b, j) = placed.remove(x.unsigned_abs() as usize % placed.len());
                let want = if b > a { common::oracle_uncovered(&plain(&placed), a, b) } else { 0 };
                prop_assert_eq!(cover.remove(a, b, j), want);
            } else {
                let want = if len > 0 { common::oracle_uncovered(&plain(&placed), x, x + len) } else { 0 };
                prop_assert_eq!(cover.insert(x, x + len, i as u32), want);
                placed.push((x, x + len, i as u32));
            }
            let far = i64::MAX / 4;
            prop_assert_eq!(cover.gaps().as_slice(), &oracle_gaps(&plain(&placed), -far, far)[..]);
            let mut sorted = placed.clone();
            sorted.sort_unstable();
            prop_assert_eq!(cover.users().len(), sorted.len());
            prop_assert_eq!(cover.users().iter().collect::<Vec<_>>(), sorted.clone());
            for (k, p) in sorted.iter().enumerate() {
                prop_assert_eq!(cover.users().get(k), Some(*p));
            }
            for &(a, l) in &queries {
                let want = if l > 0 { common::oracle_uncovered(&plain(&placed), a, a + l) } else { 0 };
                prop_assert_eq!(cover.uncovered(a, a + l), want);
                let from: Vec<_> = cover.users().iter_from(&(a, i64::MIN, 0)).collect();
                let want_from: Vec<_> = sorted.iter().copied().filter(|p| p.0 >= a).collect();
                prop_assert_eq!(from, want_from);
            }
        }
    }

    #[test]
    fn sorted_chunks_split_and_merge_like_a_sorted_vec(
        ops in prop::collection::vec((0u32..400, any::<bool>()), 1..700),
    ) {
        let mut chunks: SortedChunks<u32> = SortedChunks::from_sorted(&[]);
        let mut plain: Vec<u32> = Vec::new();
        for &(x, remove) in &ops {
            if remove {
                let had = plain.iter().position(|&p| p == x);
                if let Some(pos) = had {
                    plain.remove(pos);
                }
                prop_assert_eq!(chunks.remove(&x), had.is_some());
            } else {
                let pos = plain.partition_point(|&p| p < x);
                plain.insert(pos, x);
                chunks.insert(x);
            }
        }
        prop_assert_eq!(chunks.iter().collect::<Vec<_>>(), plain.clone());
        prop_assert_eq!(chunks.len(), plain.len());
        for (k, &p) in plain.iter().enumerate() {
            prop_assert_eq!(chunks.get(k), Some(p));
        }
        prop_assert_eq!(chunks.get(plain.len()), None);
    }

    #[test]
    fn gap_set_add_and_subtract_match_a_bitmap(
        ops in prop::collection::vec((0i64..120, 0i64..30, any::<bool>()), 1..60),
    ) {
        let mut set = GapSet::new();
        let mut bits = [false; 160];
        for &(a, l, add) in &ops {
            if add {
                set.add(a, a + l);
            } else {
                set.subtract(a, a + l);
            }
            for b in bits.iter_mut().skip(a as usize).take(l as usize) {
                *b = add;
            }
            // The same runs of set bits, as maximal intervals.
            let mut want = Vec::new();
            let mut t = 0usize;
            while t < bits.len() {
                if bits[t] {
                    let s = t;
                    while t < bits.len() && bits[t] {
                        t += 1;
                    }
                    want.push((s as i64, t as i64));
                } else {
                    t += 1;
                }
            }
            prop_assert_eq!(set.as_slice(), &want[..]);
            prop_assert_eq!(set.len(), want.len());
        }
    }
}
