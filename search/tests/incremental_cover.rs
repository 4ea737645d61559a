//! The start-time search's cover indexes against plain oracles: after random inserts and
//! removes, the request cover's gap set, every value it returns and every uncovered-length
//! query equal a full recomputation from the placed intervals, and so do the parts only a
//! taken set covers; likewise a blob's lifetime cover, its gaps, its sorted users (with
//! index access) and its uncovered lengths with some users left out, also with enough
//! users that its list spans many chunks.

use proptest::prelude::*;
use schedule::reference::{uncovered, union_gaps};
use search::cover::{BlobCover, GapSet, RequestCover, SortedChunks};

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
                let want = uncovered(&plain, a, b);
                prop_assert_eq!(cover.remove(a, b, k), want);
            } else {
                let y = (x + len).min(horizon);
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                let want = uncovered(&plain, x, y);
                prop_assert_eq!(cover.insert(x, y, id as u32), want);
                placed.push((x, y, id as u32));
            }
            let placed: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
            prop_assert_eq!(cover.gaps().as_slice(), &union_gaps(&placed, 0, horizon)[..]);
            for &(a, l) in &queries {
                prop_assert_eq!(cover.gaps().overlap_len(a, a + l), uncovered(&placed, a, a + l));
            }
        }
    }

    /// The parts only a taken set of placed requests covers, without removing them: equal
    /// to the gaps the removal would add (the placed union minus the others' union), for
    /// one attempt's disjoint requests and for overlapping ones; the cover is unchanged.
    #[test]
    fn exclusive_parts_equal_the_gaps_a_removal_adds(
        shift in 0u32..6,
        others in prop::collection::vec((0i64..300, 1i64..60), 0..60),
        cuts in prop::collection::vec((0i64..30, 1i64..40), 1..12),
        first in 0i64..200,
        extra in prop::collection::vec((0i64..300, 1i64..60), 0..6),
        probes in prop::collection::vec((0i64..300, 1i64..80), 1..8),
    ) {
        let n_buckets = (400usize >> shift) + 1;
        let n = others.len() + cuts.len() + extra.len();
        let mut cover = RequestCover::new(shift, n_buckets, n);
        let horizon = cover.horizon();
        let mut placed: Vec<(i64, i64, u32)> = Vec::new();
        let put = |cover: &mut RequestCover, placed: &mut Vec<(i64, i64, u32)>, x: i64, y: i64| {
            let (x, y) = (x.min(horizon - 1), y.min(horizon));
            let id = placed.len() as u32;
            cover.insert(x, y, id);
            placed.push((x, y, id));
        };
        for &(x, len) in &others {
            put(&mut cover, &mut placed, x, x + len);
        }
        // One attempt's requests: disjoint, in order.
        let one = placed.len() as u32;
        let mut t = first;
        for &(gap, len) in &cuts {
            t += gap;
            if t + len <= horizon {
                put(&mut cover, &mut placed, t, t + len);
            }
            t += len;
        }
        let disjoint_end = placed.len() as u32;
        for &(x, len) in &extra {
            put(&mut cover, &mut placed, x, x + len);
        }
        let all_end = placed.len() as u32;
        let before: Vec<(i64, i64)> = cover.gaps().as_slice().to_vec();
        for (range, disjoint) in [(one..disjoint_end, true), (one..all_end, false)] {
            let taken: Vec<(i64, i64)> = placed[range.start as usize..range.end as usize]
                .iter()
                .map(|p| (p.0, p.1))
                .collect();
            // The most taken requests covering one bucket whole (exactly, so that a check
            // against one cover fewer fails the test).
            let w = 1i64 << shift;
            let depth = if disjoint {
                1
            } else {
                (0..n_buckets as i64)
                    .map(|b| taken.iter().filter(|t| t.0 <= b * w && t.1 >= (b + 1) * w).count())
                    .max()
                    .unwrap_or(0)
                    .max(1) as u32
            };
            let rest: Vec<(i64, i64)> = placed
                .iter()
                .filter(|p| !range.contains(&p.2))
                .map(|p| (p.0, p.1))
                .collect();
            let all: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
            let mut got = Vec::new();
            cover.exclusive_parts(&taken, depth, |id| range.contains(&id), &mut got);
            // Sorted, disjoint, non-touching, inside the taken requests.
            prop_assert!(got.windows(2).all(|w| w[0].1 < w[1].0));
            prop_assert!(got.iter().all(|p| p.0 < p.1));
            for &(a, l) in &probes {
                let want = uncovered(&rest, a, a + l)
                    - uncovered(&all, a, a + l);
                prop_assert_eq!(GapSet::overlapping_in(&got, a, a + l).iter().map(|g| g.1.min(a + l) - g.0.max(a)).sum::<i64>(), want);
            }
            let total: i64 = got.iter().map(|g| g.1 - g.0).sum();
            prop_assert_eq!(total, uncovered(&rest, 0, horizon) - uncovered(&all, 0, horizon));
            prop_assert_eq!(cover.gaps().as_slice(), &before[..]);
        }
        // The counts were put back: removing everything still agrees with the oracle.
        while let Some((a, b, k)) = placed.pop() {
            let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
            prop_assert_eq!(cover.remove(a, b, k), uncovered(&plain, a, b));
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
                let want = if b > a { uncovered(&plain(&placed), a, b) } else { 0 };
                prop_assert_eq!(cover.remove(a, b, j), want);
            } else {
                let want = if len > 0 { uncovered(&plain(&placed), x, x + len) } else { 0 };
                prop_assert_eq!(cover.insert(x, x + len, i as u32), want);
                placed.push((x, x + len, i as u32));
            }
            let far = i64::MAX / 4;
            prop_assert_eq!(cover.gaps().as_slice(), &union_gaps(&plain(&placed), -far, far)[..]);
            let mut sorted = placed.clone();
            sorted.sort_unstable();
            prop_assert_eq!(cover.users().len(), sorted.len());
            prop_assert_eq!(cover.users().iter().collect::<Vec<_>>(), sorted.clone());
            for (k, p) in sorted.iter().enumerate() {
                prop_assert_eq!(cover.users().get(k), Some(*p));
            }
            for &(a, l) in &queries {
                let want = if l > 0 { uncovered(&plain(&placed), a, a + l) } else { 0 };
                prop_assert_eq!(cover.uncovered(a, a + l), want);
                // Left out: the users whose ids are multiples of three (a ghost set).
                let kept: Vec<_> = placed.iter().copied().filter(|p| p.2 % 3 != 0).collect();
                let want = if l > 0 { uncovered(&plain(&kept), a, a + l) } else { 0 };
                prop_assert_eq!(cover.uncovered_without(a, a + l, |u| u % 3 == 0), want);
                let from: Vec<_> = cover.users().iter_from(&(a, i64::MIN, 0)).collect();
                let want_from: Vec<_> = sorted.iter().copied().filter(|p| p.0 >= a).collect();
                prop_assert_eq!(from, want_from);
            }
        }
    }

    /// Enough users that the sorted list splits into chunks: the scans cross chunk
    /// boundaries (downward from a query's start, upward after it) and removals empty
    /// whole chunks (each order takes a chunk's users out in a row).
    #[test]
    fn blob_cover_across_chunks_matches_the_oracle(
        users in prop::collection::vec((0i64..2_000, 1i64..200), 300..500),
        order in 0u8..3,
        queries in prop::collection::vec((-100i64..2_200, 1i64..300), 4..8),
    ) {
        let dmax = 200;
        let plain = |p: &[(i64, i64, u32)]| p.iter().map(|q| (q.0, q.1)).collect::<Vec<_>>();
        let mut cover = BlobCover::new(dmax);
        let mut placed: Vec<(i64, i64, u32)> = Vec::new();
        for (i, &(x, len)) in users.iter().enumerate() {
            cover.insert(x, x + len, i as u32);
            placed.push((x, x + len, i as u32));
        }
        // Out in start order, in reverse start order, or from the middle outwards.
        placed.sort_unstable();
        let mut out_order = placed.clone();
        match order {
            0 => {}
            1 => out_order.reverse(),
            _ => {
                let mid = out_order.len() / 2;
                out_order.rotate_left(mid);
            }
        }
        for (k, &(a, b, j)) in out_order.iter().enumerate() {
            let at = placed.iter().position(|p| *p == (a, b, j)).expect("placed");
            placed.remove(at);
            prop_assert_eq!(cover.remove(a, b, j), uncovered(&plain(&placed), a, b));
            if k % 16 == 0 {
                let kept: Vec<_> = placed.iter().copied().filter(|p| p.2 % 3 != 0).collect();
                for &(x, l) in &queries {
                    prop_assert_eq!(cover.uncovered(x, x + l), uncovered(&plain(&placed), x, x + l));
                    prop_assert_eq!(
                        cover.uncovered_without(x, x + l, |u| u % 3 == 0),
                        uncovered(&plain(&kept), x, x + l)
                    );
                }
            }
        }
        prop_assert!(cover.users().is_empty());
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

/// Two overlapping taken requests are the only whole covers of one instant, every other
/// instant of theirs is covered by three more: the part only they cover is found (a
/// first check that let `depth` whole covers stand for one not taken would miss it).
#[test]
fn a_part_only_overlapping_taken_requests_cover_is_found() {
    let mut cover = RequestCover::new(0, 64, 8);
    let mut id = 0u32;
    let mut put = |cover: &mut RequestCover, x: i64, y: i64| {
        cover.insert(x, y, id);
        id += 1;
    };
    for _ in 0..3 {
        put(&mut cover, 0, 17);
        put(&mut cover, 18, 40);
    }
    put(&mut cover, 10, 20);
    put(&mut cover, 15, 25);
    let mut got = Vec::new();
    cover.exclusive_parts(&[(10, 20), (15, 25)], 2, |k| k >= 6, &mut got);
    assert_eq!(got, vec![(17, 18)]);
}

/// One attempt's disjoint requests where two other requests cover every bucket of their
/// span whole but one, at the span's first bucket, inside it or at its last: the part only
/// the attempt covers there is found.
#[test]
fn a_part_only_disjoint_taken_requests_cover_at_their_span_edge_is_found() {
    let taken = [(8, 14), (20, 30), (40, 48)];
    let cases = [
        (&[(12, 100)][..], (8, 12)),
        (&[(0, 22), (26, 100)][..], (22, 26)),
        (&[(0, 44)][..], (44, 48)),
    ];
    for (others, part) in cases {
        let mut cover = RequestCover::new(2, 64, 16);
        let mut id = 0u32;
        for _ in 0..2 {
            for &(x, y) in others {
                cover.insert(x, y, id);
                id += 1;
            }
        }
        let first = id;
        for &(x, y) in &taken {
            cover.insert(x, y, id);
            id += 1;
        }
        let mut got = Vec::new();
        cover.exclusive_parts(&taken, 1, |k| k >= first, &mut got);
        assert_eq!(got, vec![part], "others {others:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Many short requests over a few buckets (up to 200 placed over 4 to 32 buckets): most
    /// buckets hold more partial pieces than a line, so ids spill and come back.
    #[test]
    fn request_cover_spills_and_stays_exact(
        shift in 3u32..7,
        ops in prop::collection::vec((0i64..256, 1i64..40, 0u8..3), 1..400),
    ) {
        let n_buckets = (256usize >> shift) + 1;
        let mut cover = RequestCover::new(shift, n_buckets, ops.len());
        let horizon = cover.horizon();
        let mut placed: Vec<(i64, i64, u32)> = Vec::new();
        for (id, &(x, len, op)) in ops.iter().enumerate() {
            if op == 0 && !placed.is_empty() {
                let (a, b, k) = placed.swap_remove(x as usize % placed.len());
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                prop_assert_eq!(cover.remove(a, b, k), uncovered(&plain, a, b));
            } else {
                let y = (x + len).min(horizon);
                let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
                prop_assert_eq!(cover.insert(x, y, id as u32), uncovered(&plain, x, y));
                placed.push((x, y, id as u32));
            }
            let plain: Vec<(i64, i64)> = placed.iter().map(|p| (p.0, p.1)).collect();
            prop_assert_eq!(cover.gaps().overlap_len(0, horizon), uncovered(&plain, 0, horizon));
        }
    }
}
