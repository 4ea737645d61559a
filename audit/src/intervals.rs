//! Request intervals of one attempt: build from start mtimes and timers, clip to the
//! generation lifetime, merge overlaps, and record every change as a `ClipRecord` (docs/FORMAT.md,
//! "Request intervals").

use model::{ClipReason, GenerationLifetime, RequestInterval};
use std::collections::BTreeMap;

/// One row of `clipping.parquet` (times absolute, epoch seconds).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClipRecord {
    /// Why.
    pub reason: ClipReason,
    /// Request sequence numbers concerned.
    pub seqs: Vec<u64>,
    /// Interval before the change (absent for an orphan timer).
    pub raw: Option<(f64, Option<f64>)>,
    /// Interval after the change (absent when dropped).
    pub kept: Option<(f64, f64)>,
    /// Seconds of request time removed by this change (0 for a pure touch or a missing
    /// timer).
    pub seconds_removed: f64,
}

/// One request before merging: its interval as recorded and after clipping (absolute epoch
/// seconds), for showing how each kept interval was built (`audit show`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RequestPiece {
    /// Sequence number.
    pub seq: u64,
    /// Start mtime and end (start + timer, or the generation end for a missing timer; no
    /// end when neither exists); absent for an orphan timer.
    pub raw: Option<(f64, Option<f64>)>,
    /// After clipping to the lifetime; absent when dropped.
    pub clipped: Option<(f64, f64)>,
}

/// The result of reconstructing one attempt's requests.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct RequestReconstruction {
    /// Merged, clipped, disjoint intervals in start order (absolute epoch seconds).
    pub intervals: Vec<RequestInterval>,
    /// Every clip, drop, merge and anomaly, in the order applied.
    pub records: Vec<ClipRecord>,
    /// Every request seq before merging, in seq order.
    pub pieces: Vec<RequestPiece>,
}

impl RequestReconstruction {
    /// Length of the union of the kept intervals (they are disjoint after merging).
    pub fn union_seconds(&self) -> f64 {
        // A fold from +0.0 (an empty f64 sum is -0.0).
        self.intervals
            .iter()
            .fold(0.0, |acc, i| acc + (i.end - i.start))
    }
}

/// Rebuild an attempt's request intervals.
///
/// `starts`: seq -> request-start mtime; `timers`: seq -> elapsed nanoseconds.
pub fn reconstruct(
    lifetime: GenerationLifetime,
    starts: &BTreeMap<u64, f64>,
    timers: &BTreeMap<u64, u64>,
) -> RequestReconstruction {
    let gs = lifetime.start;
    let ge = lifetime.end;
    let mut records = Vec::new();
    let mut kept: Vec<RequestInterval> = Vec::new();
    let mut pieces = Vec::new();
    let mut seqs: Vec<u64> = starts.keys().chain(timers.keys()).copied().collect();
    seqs.sort_unstable();
    seqs.dedup();
    for seq in seqs {
        let (start, end) = match (starts.get(&seq), timers.get(&seq)) {
            (None, Some(&elapsed)) => {
                records.push(ClipRecord {
                    reason: ClipReason::OrphanTimer,
                    seqs: vec![seq],
                    raw: None,
                    kept: None,
                    seconds_removed: elapsed as f64 / 1e9,
                });
                pieces.push(RequestPiece {
                    seq,
                    raw: None,
                    clipped: None,
                });
                continue;
            }
            (Some(&s), Some(&elapsed)) => (s, s + elapsed as f64 / 1e9),
            (Some(&s), None) => match ge {
                Some(e) => {
                    records.push(ClipRecord {
                        reason: ClipReason::MissingTimer,
                        seqs: vec![seq],
                        raw: Some((s, Some(e))),
                        kept: Some((s, e)),
                        seconds_removed: 0.0,
                    });
                    (s, e)
                }
                None => {
                    // No timer and no generation end: the request cannot be closed.
                    records.push(ClipRecord {
                        reason: ClipReason::MissingTimer,
                        seqs: vec![seq],
                        raw: Some((s, None)),
                        kept: None,
                        seconds_removed: 0.0,
                    });
                    pieces.push(RequestPiece {
                        seq,
                        raw: Some((s, None)),
                        clipped: None,
                    });
                    continue;
                }
            },
            (None, None) => unreachable!("seq comes from one of the maps"),
        };
        // Clip to the lifetime [gs, ge] (closed-open request intervals). An empty lifetime
        // (ge < gs: a malformed record) holds no request at all.
        let wholly_outside = end <= gs || ge.is_some_and(|e| start >= e || e < gs) || end < start;
        if wholly_outside {
            records.push(ClipRecord {
                reason: ClipReason::OutsideGeneration,
                seqs: vec![seq],
                raw: Some((start, Some(end))),
                kept: None,
                seconds_removed: (end - start).max(0.0),
            });
            pieces.push(RequestPiece {
                seq,
                raw: Some((start, Some(end))),
                clipped: None,
            });
            continue;
        }
        let ks = if start < gs { gs } else { start };
        let ke = match ge {
            Some(e) if end > e => e,
            _ => end,
        };
        if start < gs {
            records.push(ClipRecord {
                reason: ClipReason::BeforeGenerationStart,
                seqs: vec![seq],
                raw: Some((start, Some(end))),
                kept: Some((ks, ke)),
                seconds_removed: gs - start,
            });
        }
        if ke < end {
            records.push(ClipRecord {
                reason: ClipReason::AfterGenerationEnd,
                seqs: vec![seq],
                raw: Some((start, Some(end))),
                kept: Some((ks, ke)),
                seconds_removed: end - ke,
            });
        }
        pieces.push(RequestPiece {
            seq,
            raw: Some((start, Some(end))),
            clipped: Some((ks, ke)),
        });
        kept.push(RequestInterval {
            seqs: vec![seq],
            start: ks,
            end: ke,
        });
    }
    let intervals = merge(kept, &mut records);
    RequestReconstruction {
        intervals,
        records,
        pieces,
    }
}

/// Merge intervals that overlap or touch (`next.start <= current.end`, exact comparison),
/// adding one `merged_overlap` record per merged group.
fn merge(mut v: Vec<RequestInterval>, records: &mut Vec<ClipRecord>) -> Vec<RequestInterval> {
    v.sort_by(|a, b| {
        a.start
            .total_cmp(&b.start)
            .then(a.end.total_cmp(&b.end))
            .then(a.seqs.cmp(&b.seqs))
    });
    let mut out: Vec<RequestInterval> = Vec::with_capacity(v.len());
    let mut group_size = 0usize;
    let mut removed = 0.0f64;
    let flush = |out: &mut Vec<RequestInterval>,
                 records: &mut Vec<ClipRecord>,
                 group_size: usize,
                 removed: f64| {
        if group_size > 1 {
            let g = out.last_mut().expect("group exists");
            g.seqs.sort_unstable();
            records.push(ClipRecord {
                reason: ClipReason::MergedOverlap,
                seqs: g.seqs.clone(),
                raw: Some((g.start, Some(g.end))),
                kept: Some((g.start, g.end)),
                seconds_removed: removed,
            });
        }
    };
    for iv in v {
        if let Some(cur) = out.last_mut()
            && group_size > 0
            && iv.start <= cur.end
        {
            // Seconds this interval shares with the group so far: 0 for a pure touch.
            removed += (iv.end.min(cur.end) - iv.start).max(0.0);
            cur.end = cur.end.max(iv.end);
            cur.seqs.extend_from_slice(&iv.seqs);
            group_size += 1;
            continue;
        }
        flush(&mut out, records, group_size, removed);
        out.push(iv);
        group_size = 1;
        removed = 0.0;
    }
    flush(&mut out, records, group_size, removed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn life(s: f64, e: Option<f64>) -> GenerationLifetime {
        GenerationLifetime { start: s, end: e }
    }

    fn run(
        l: GenerationLifetime,
        starts: &[(u64, f64)],
        timers: &[(u64, u64)],
    ) -> RequestReconstruction {
        reconstruct(
            l,
            &starts.iter().copied().collect(),
            &timers.iter().copied().collect(),
        )
    }

    #[test]
    fn every_reason_by_hand() {
        // Lifetime [100, 200].
        let r = run(
            life(100.0, Some(200.0)),
            &[
                (1, 99.0),  // [99, 101): before start, 1 s removed
                (2, 110.0), // [110, 112)
                (3, 112.0), // [112, 113): touches 2
                (4, 120.0), // [120, 130)
                (5, 125.0), // [125, 127): inside 4, 2 s overlap
                (6, 190.0), // [190, 205): after end, 5 s removed
                (7, 10.0),  // [10, 12): wholly outside, 2 s removed
                (8, 195.5), // no timer: [195.5, 200] -> merges with 6
            ],
            &[
                (1, 2_000_000_000),
                (2, 2_000_000_000),
                (3, 1_000_000_000),
                (4, 10_000_000_000),
                (5, 2_000_000_000),
                (6, 15_000_000_000),
                (7, 2_000_000_000),
                (9, 3_500_000_000), // orphan
            ],
        );
        let reasons: Vec<(ClipReason, Vec<u64>, f64)> = r
            .records
            .iter()
            .map(|c| (c.reason, c.seqs.clone(), c.seconds_removed))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (ClipReason::BeforeGenerationStart, vec![1], 1.0),
                (ClipReason::AfterGenerationEnd, vec![6], 5.0),
                (ClipReason::OutsideGeneration, vec![7], 2.0),
                (ClipReason::MissingTimer, vec![8], 0.0),
                (ClipReason::OrphanTimer, vec![9], 3.5),
                (ClipReason::MergedOverlap, vec![2, 3], 0.0),
                (ClipReason::MergedOverlap, vec![4, 5], 2.0),
                (ClipReason::MergedOverlap, vec![6, 8], 4.5),
            ]
        );
        let iv: Vec<(f64, f64)> = r.intervals.iter().map(|i| (i.start, i.end)).collect();
        assert_eq!(
            iv,
            vec![
                (100.0, 101.0),
                (110.0, 113.0),
                (120.0, 130.0),
                (190.0, 200.0)
            ]
        );
        assert_eq!(r.union_seconds(), 1.0 + 3.0 + 10.0 + 10.0);
    }

    #[test]
    fn both_sides_clipped_gives_two_rows_and_no_end_means_start_only() {
        let r = run(life(10.0, Some(20.0)), &[(1, 5.0)], &[(1, 30_000_000_000)]);
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[0].kept, Some((10.0, 20.0)));
        assert_eq!(r.records[1].seconds_removed, 15.0);
        let r = run(
            life(10.0, None),
            &[(1, 5.0), (2, 50.0)],
            &[(1, 30_000_000_000), (2, 1_000_000_000)],
        );
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.records[0].reason, ClipReason::BeforeGenerationStart);
        assert_eq!(r.intervals.len(), 2);
        assert_eq!((r.intervals[1].start, r.intervals[1].end), (50.0, 51.0));
        // Missing timer without a generation end: recorded, no interval.
        let r = run(life(10.0, None), &[(1, 12.0)], &[]);
        assert_eq!(r.records[0].reason, ClipReason::MissingTimer);
        assert_eq!(r.records[0].raw, Some((12.0, None)));
        assert!(r.intervals.is_empty());
    }

    #[test]
    fn interval_ending_exactly_at_start_is_outside() {
        let r = run(
            life(10.0, Some(20.0)),
            &[(1, 8.0), (2, 20.0)],
            &[(1, 2_000_000_000), (2, 1)],
        );
        assert!(r.intervals.is_empty());
        assert!(
            r.records
                .iter()
                .all(|c| c.reason == ClipReason::OutsideGeneration)
        );
    }

    #[test]
    fn an_empty_lifetime_drops_every_request_whole() {
        // completed_utc 10 s before the identity mtime: [100, 90].
        let r = run(
            life(100.0, Some(90.0)),
            &[(1, 80.0), (2, 95.0), (3, 120.0), (4, 85.0)],
            &[(1, 30_000_000_000), (2, 1_000_000_000), (3, 1_000_000_000)],
        );
        assert!(r.intervals.is_empty());
        type Row = (ClipReason, Vec<u64>, Option<(f64, f64)>, f64);
        let rows: Vec<Row> = r
            .records
            .iter()
            .map(|c| (c.reason, c.seqs.clone(), c.kept, c.seconds_removed))
            .collect();
        assert_eq!(
            rows,
            vec![
                // [80, 110) spans the whole (empty) lifetime: dropped, its raw 30 s removed.
                (ClipReason::OutsideGeneration, vec![1], None, 30.0),
                (ClipReason::OutsideGeneration, vec![2], None, 1.0),
                (ClipReason::OutsideGeneration, vec![3], None, 1.0),
                // No timer: [85, 90] as the missing-timer row says, then dropped whole.
                (ClipReason::MissingTimer, vec![4], Some((85.0, 90.0)), 0.0),
                (ClipReason::OutsideGeneration, vec![4], None, 5.0),
            ]
        );
    }

    /// Oracle: union length of closed-open intervals on a fine integer grid.
    fn grid_union(iv: &[(i64, i64)]) -> i64 {
        let mut pts: Vec<(i64, i64)> = iv.iter().copied().filter(|(a, b)| b > a).collect();
        pts.sort();
        let mut total = 0;
        let mut cur: Option<(i64, i64)> = None;
        for (a, b) in pts {
            match cur {
                Some((cs, ce)) if a <= ce => cur = Some((cs, ce.max(b))),
                Some((cs, ce)) => {
                    total += ce - cs;
                    cur = Some((a, b));
                }
                None => cur = Some((a, b)),
            }
        }
        if let Some((cs, ce)) = cur {
            total += ce - cs;
        }
        total
    }

    proptest! {
        #[test]
        fn clip_and_merge_against_oracle(
            gs in 0i64..200,
            len in 1i64..400,
            has_end in any::<bool>(),
            reqs in proptest::collection::vec((0i64..700, 0i64..120, any::<bool>(), any::<bool>()), 0..25),
        ) {
            // Integer seconds keep float arithmetic exact, so the oracle is exact too.
            let ge = has_end.then_some(gs + len);
            let mut starts = BTreeMap::new();
            let mut timers = BTreeMap::new();
            for (i, (s, l, has_start, has_timer)) in reqs.iter().enumerate() {
                let seq = i as u64 + 1;
                if *has_start || !*has_timer { starts.insert(seq, *s as f64); }
                if *has_timer { timers.insert(seq, (*l as u64) * 1_000_000_000); }
            }
            let r = reconstruct(life(gs as f64, ge.map(|e| e as f64)), &starts, &timers);
            // Every kept interval lies inside the lifetime, sorted and disjoint (not touching).
            for w in r.intervals.windows(2) {
                prop_assert!(w[0].end < w[1].start);
            }
            for iv in &r.intervals {
                prop_assert!(iv.start >= gs as f64 && iv.start <= iv.end);
                if let Some(e) = ge { prop_assert!(iv.end <= e as f64); }
            }
            // Oracle: clip each raw interval, union them.
            let mut raw_total = 0i64;
            let mut clipped = Vec::new();
            for (seq, s) in &starts {
                let e = match (timers.get(seq), ge) {
                    (Some(t), _) => *s as i64 + (*t / 1_000_000_000) as i64,
                    (None, Some(e)) => e,
                    (None, None) => continue,
                };
                let s = *s as i64;
                raw_total += (e - s).max(0);
                let cs = s.max(gs);
                let ce = ge.map_or(e, |g| e.min(g));
                if ce > cs { clipped.push((cs, ce)); }
            }
            let orphan_total: i64 = timers.iter().filter(|(k, _)| !starts.contains_key(k)).map(|(_, t)| (*t / 1_000_000_000) as i64).sum();
            let union = grid_union(&clipped);
            prop_assert_eq!(r.union_seconds(), union as f64);
            // Every removed second is accounted for: raw + orphan = union + removed.
            let removed: f64 = r.records.iter().map(|c| c.seconds_removed).sum();
            prop_assert_eq!((raw_total + orphan_total) as f64, union as f64 + removed);
        }
    }
}
