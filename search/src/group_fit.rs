//! First-fit placement of a group plan with group releases (cache search): a
//! group's (a repository's block's) first attempt starts no earlier than the previous
//! attempt, and every other attempt of the group no earlier than that first one, so groups
//! cannot backfill into early holes and stretch their blob windows.

use crate::profile::{StepProfile, Use};
use schedule::evaluate::GridInstance;

/// Most forward jumps of one placement before the candidate is dropped.
const MAX_JUMPS: usize = 4096;

/// Place `order` first-fit within K, both caps and `deadline`: attempt `j` of group
/// `group[j]` starts at the earliest feasible time at or after the previous start when it
/// is its group's first, else at or after `max(previous start - dmax, the group's first
/// start)` (`dmax`: the longest duration). `None` when some attempt cannot end by the
/// deadline.
pub fn first_fit_released(
    g: &GridInstance,
    deadline: i64,
    order: &[u32],
    group: &[u32],
) -> Option<Vec<i64>> {
    let n = g.len();
    let dmax = g.duration.iter().copied().max().unwrap_or(0);
    let mean = if n == 0 {
        1
    } else {
        (g.duration.iter().sum::<i64>() / n as i64).max(1)
    };
    let mut profile = StepProfile::new(mean);
    let caps: Use = [g.concurrency, g.cap_cores, g.cap_mem];
    let groups = group.iter().copied().max().map_or(0, |m| m as usize + 1);
    let mut release: Vec<Option<i64>> = vec![None; groups];
    let mut starts = vec![0i64; n];
    let mut prev = 0i64;
    for &j in order {
        let ju = j as usize;
        let d = g.duration[ju];
        let u: Use = [1, g.cores[ju], g.mem[ju]];
        let b = group[ju] as usize;
        // A group's first attempt starts no earlier than the previous start; the others no
        // earlier than their group's first start (and one longest duration before the
        // previous start).
        let mut s = match release[b] {
            Some(r) => (prev - dmax).max(r),
            None => prev,
        }
        .max(0);
        let latest = deadline - d;
        let mut placed = false;
        for _ in 0..MAX_JUMPS {
            if s > latest {
                return None;
            }
            match profile.violation(s, s + d, u, caps, true) {
                None => {
                    placed = true;
                    break;
                }
                Some(next) => s = next.max(s + 1),
            }
        }
        if !placed {
            return None;
        }
        profile.insert(j, s, s + d, u);
        starts[ju] = s;
        release[b].get_or_insert(s);
        prev = s;
    }
    Some(starts)
}
