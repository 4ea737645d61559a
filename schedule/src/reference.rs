//! The plain, slow definitions: the union of intervals by sort and merge, the admission
//! rule as a loop, the validator of a schedule with its own event sweep and its own naive
//! FIFO replay. None shares code with the exact evaluator ([`crate::evaluate`]) or with
//! the search's indexes; the validator and every test oracle of the workspace call these,
//! so each definition is written once.
//!
//! Every selected schedule passes through [`validate_schedule`] before anything is written
//! as valid.

use crate::evaluate::{GridInstance, Plan, ns_to_s};
use crate::instance::WorkloadInstance;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Relative tolerance when comparing recomputed ideal values with the search's.
pub const VALUES_RELATIVE: f64 = 1e-9;
/// Problems listed in full per failing schedule (the rest are counted).
const PROBLEMS_SHOWN: usize = 8;

/// One row of a schedule: an attempt and its interval, seconds from the replay's time 0.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    /// The attempt.
    pub attempt_id: String,
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
}

/// The values the validator recomputed for a schedule that passed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CheckedValues {
    /// Latest end, seconds.
    pub makespan_s: f64,
    /// CPU ideal core-hours.
    pub cpu_h: f64,
    /// RAM ideal GiB-hours.
    pub ram_h: f64,
    /// GPU ideal GPU-hours.
    pub gpu_h: f64,
    /// Cache ideal GiB-hours.
    pub cache_h: f64,
}

/// A schedule that failed, with every problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleFailure {
    /// The workload.
    pub workload: String,
    /// The schedule's name.
    pub schedule: String,
    /// What is wrong, one sentence each.
    pub problems: Vec<String>,
}

impl fmt::Display for ScheduleFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}: ", self.workload, self.schedule)?;
        let shown: Vec<&str> = self
            .problems
            .iter()
            .take(PROBLEMS_SHOWN)
            .map(String::as_str)
            .collect();
        write!(f, "{}", shown.join("; "))?;
        if self.problems.len() > PROBLEMS_SHOWN {
            write!(f, "; and {} more", self.problems.len() - PROBLEMS_SHOWN)?;
        }
        Ok(())
    }
}

/// Seconds to integer nanoseconds (the validator's own conversion).
fn nanos(seconds: f64) -> i64 {
    (seconds * 1e9).round() as i64
}

/// Nanoseconds by which a row's `end_s - start_s`, read back onto the nanosecond grid, may
/// differ from the attempt's fixed duration because f64 seconds cannot hold every
/// nanosecond: none while the two values' f64 spacings sum to under half a nanosecond
/// (both times below 2^20 s, about 12 days: the round trip is exact), else twice that sum,
/// rounded up (4 ns at 2^22 s, 8 ns at 10^7 s).
pub fn duration_slack_ns(start_s: f64, end_s: f64) -> i64 {
    let spacing_ns = |x: f64| {
        let x = x.abs();
        (f64::from_bits(x.to_bits() + 1) - x) * 1e9
    };
    let spacing = spacing_ns(start_s) + spacing_ns(end_s);
    if spacing < 0.5 {
        0
    } else {
        (2.0 * spacing).ceil() as i64
    }
}

/// A quota in integer nano-units (the validator's own conversion).
fn nano_units(x: f64) -> i64 {
    (x * 1e9).round() as i64
}

/// Length of the union of closed-open intervals `[s, e)` (any order, empty ones ignored),
/// by sorting and merging.
pub fn union_length(mut intervals: Vec<(i64, i64)>) -> i64 {
    intervals.retain(|(s, e)| e > s);
    intervals.sort_unstable();
    let mut total = 0i64;
    let mut current: Option<(i64, i64)> = None;
    for (s, e) in intervals {
        current = match current {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
}

/// The gaps of the union of `placed` inside `[lo, hi)`, ascending, by sorting and merging.
pub fn union_gaps(placed: &[(i64, i64)], lo: i64, hi: i64) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = placed.iter().copied().filter(|p| p.1 > p.0).collect();
    v.sort_unstable();
    let mut gaps = Vec::new();
    let mut reach = lo;
    for (a, b) in v {
        if a > reach {
            gaps.push((reach, a.min(hi)));
        }
        reach = reach.max(b);
        if reach >= hi {
            break;
        }
    }
    if reach < hi {
        gaps.push((reach, hi));
    }
    gaps
}

/// Length of `[a, b)` that no interval of `placed` covers.
pub fn uncovered(placed: &[(i64, i64)], a: i64, b: i64) -> i64 {
    let clipped: Vec<(i64, i64)> = placed.iter().map(|&(s, e)| (s.max(a), e.min(b))).collect();
    (b - a) - union_length(clipped)
}

/// The GPU union of a compiled instance at `starts`: the union length (ns) of every request
/// shifted by its attempt's start.
pub fn gpu_union(g: &GridInstance, starts: &[i64]) -> i64 {
    let mut v: Vec<(i64, i64)> = Vec::with_capacity(g.request_count());
    for (j, &s) in starts.iter().enumerate() {
        v.extend(g.shifted_requests(j, s));
    }
    union_length(v)
}

/// The cache byte-ns of a compiled instance at `starts`: per blob, its bytes times the
/// union length of its users' lifetimes.
pub fn cache_byte_ns(g: &GridInstance, starts: &[i64]) -> u128 {
    let mut lives: Vec<Vec<(i64, i64)>> = vec![Vec::new(); g.blob_bytes.len()];
    for (j, &s) in starts.iter().enumerate() {
        for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
            lives[b as usize].push((s, s + g.duration[j]));
        }
    }
    lives
        .into_iter()
        .zip(&g.blob_bytes)
        .map(|(l, &bytes)| u128::from(bytes) * union_length(l) as u128)
        .sum()
}

/// The admission rule, plainly: each unit at the earliest time not before the previous
/// unit's start at which it fits next to the attempts still running (ends are exclusive).
/// The starts and the makespan, or `None` when a unit never fits.
pub fn list_schedule(g: &GridInstance, plan: &Plan) -> Option<(Vec<i64>, i64)> {
    let mut starts = vec![0i64; g.len()];
    let mut running: Vec<usize> = Vec::new();
    let mut t = 0i64;
    for unit in &plan.units {
        loop {
            running.retain(|&j| starts[j] + g.duration[j] > t);
            let n = (running.len() + unit.len()) as i64;
            let c: i64 = running.iter().map(|&j| g.cores[j]).sum::<i64>()
                + unit.iter().map(|&j| g.cores[j as usize]).sum::<i64>();
            let m: i64 = running.iter().map(|&j| g.mem[j]).sum::<i64>()
                + unit.iter().map(|&j| g.mem[j as usize]).sum::<i64>();
            if n <= g.concurrency && c <= g.cap_cores && m <= g.cap_mem {
                break;
            }
            t = running.iter().map(|&j| starts[j] + g.duration[j]).min()?;
        }
        for &j in unit {
            starts[j as usize] = t;
            running.push(j as usize);
        }
    }
    let makespan = (0..g.len())
        .map(|j| starts[j] + g.duration[j])
        .max()
        .unwrap_or(0);
    Some((starts, makespan))
}

/// A schedule as rows (attempt, start, end in seconds), in the instance's attempt order.
pub fn schedule_rows(
    inst: &WorkloadInstance,
    g: &GridInstance,
    starts_ns: &[i64],
) -> Vec<ScheduleRow> {
    inst.attempts
        .iter()
        .enumerate()
        .map(|(j, a)| ScheduleRow {
            attempt_id: a.attempt_id.clone(),
            start_s: ns_to_s(starts_ns[j]),
            end_s: ns_to_s(starts_ns[j] + g.duration[j]),
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= VALUES_RELATIVE * a.abs().max(b.abs()) || (a - b).abs() <= 1e-12
}

/// The search's claimed ideal values of a schedule, to be matched by the recomputation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClaimedValues {
    /// CPU ideal hours.
    pub cpu_h: f64,
    /// RAM ideal hours.
    pub ram_h: f64,
    /// GPU ideal hours.
    pub gpu_h: f64,
    /// Cache ideal hours.
    pub cache_h: f64,
}

/// Validate one schedule of a workload against the replay model of docs/FORMAT.md: exact coverage,
/// fixed durations, interval ordering, nonnegative accounting, concurrency, both caps and the
/// deadline; and, when `claimed` is given, that the recomputed ideal values match it.
pub fn validate_schedule(
    inst: &WorkloadInstance,
    schedule: &str,
    rows: &[ScheduleRow],
    deadline_s: f64,
    claimed: Option<ClaimedValues>,
) -> Result<CheckedValues, ScheduleFailure> {
    let w = inst.workload.as_str();
    let mut problems: Vec<String> = Vec::new();
    let index: BTreeMap<&str, usize> = inst
        .attempts
        .iter()
        .enumerate()
        .map(|(i, a)| (a.attempt_id.as_str(), i))
        .collect();

    // Coverage: every included attempt exactly once, nothing else.
    let mut seen = vec![0usize; inst.attempts.len()];
    let mut placed: Vec<(usize, i64, i64, i64)> = Vec::new();
    for r in rows {
        match index.get(r.attempt_id.as_str()) {
            Some(&i) => {
                seen[i] += 1;
                if seen[i] == 1 {
                    placed.push((
                        i,
                        nanos(r.start_s),
                        nanos(r.end_s),
                        duration_slack_ns(r.start_s, r.end_s),
                    ));
                }
            }
            None => problems.push(format!(
                "attempt `{}` is not an included attempt of {w}",
                r.attempt_id
            )),
        }
    }
    for (i, &n) in seen.iter().enumerate() {
        let id = &inst.attempts[i].attempt_id;
        if n == 0 {
            problems.push(format!("attempt `{id}` is missing from the schedule"));
        } else if n > 1 {
            problems.push(format!(
                "attempt `{id}` appears {n} times (expected exactly once)"
            ));
        }
    }

    // Interval ordering and fixed durations.
    for r in rows {
        if !(r.start_s.is_finite() && r.end_s.is_finite()) {
            problems.push(format!(
                "attempt `{}` has a non-finite interval [{}, {})",
                r.attempt_id, r.start_s, r.end_s
            ));
        } else if r.start_s < 0.0 {
            problems.push(format!(
                "attempt `{}` starts at {} s, before time 0",
                r.attempt_id, r.start_s
            ));
        } else if r.end_s < r.start_s {
            problems.push(format!(
                "attempt `{}` ends at {} s, before it starts at {} s",
                r.attempt_id, r.end_s, r.start_s
            ));
        }
    }
    for &(i, s, e, slack) in &placed {
        let a = &inst.attempts[i];
        let d = nanos(a.duration_s);
        if (e - s - d).abs() > slack {
            problems.push(format!(
                "attempt `{}` runs {:.9} s (from {} s to {} s) but its fixed duration is {:.9} s",
                a.attempt_id,
                (e - s) as f64 / 1e9,
                s as f64 / 1e9,
                e as f64 / 1e9,
                d as f64 / 1e9
            ));
        }
        let mut last_end = 0i64;
        for (k, &(rs, re)) in a.requests.iter().enumerate() {
            let (rs, re) = (nanos(rs), nanos(re));
            if rs < last_end || re < rs || re > d {
                problems.push(format!(
                    "attempt `{}`: request {k} [{rs} ns, {re} ns) is out of order or outside [0, d)",
                    a.attempt_id
                ));
                break;
            }
            last_end = re;
        }
    }
    if !problems.is_empty() {
        return Err(ScheduleFailure {
            workload: w.to_string(),
            schedule: schedule.to_string(),
            problems,
        });
    }

    // Concurrency and both caps: an event sweep, ends before starts at equal times.
    let caps = &inst.caps;
    let cap_cores = nano_units(caps.cpu_cores);
    let cap_mem = nano_units(caps.ram_gib);
    let mut events: Vec<(i64, u8, usize)> = Vec::with_capacity(placed.len() * 2);
    for &(i, s, e, _) in &placed {
        if e > s {
            events.push((s, 1, i));
            events.push((e, 0, i));
        }
    }
    events.sort_unstable();
    let (mut running, mut cores, mut mem) = (0i64, 0i64, 0i64);
    let mut active: std::collections::BTreeSet<usize> = Default::default();
    let (mut k_bad, mut c_bad, mut m_bad) = (false, false, false);
    for &(t, kind, i) in &events {
        let a = &inst.attempts[i];
        if kind == 0 {
            running -= 1;
            cores -= nano_units(a.cores);
            mem -= nano_units(a.mem_gib);
            active.remove(&i);
            continue;
        }
        running += 1;
        cores += nano_units(a.cores);
        mem += nano_units(a.mem_gib);
        active.insert(i);
        let names = || {
            active
                .iter()
                .take(6)
                .map(|&x| format!("`{}`", inst.attempts[x].attempt_id))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !k_bad && running > i64::from(caps.concurrency) {
            k_bad = true;
            problems.push(format!(
                "concurrency exceeded at t={} s: {running} attempts run > K={} ({}...)",
                t as f64 / 1e9,
                caps.concurrency,
                names()
            ));
        }
        if !c_bad && cores > cap_cores {
            c_bad = true;
            problems.push(format!(
                "CPU cap exceeded at t={} s: running attempts hold {} cores > cap {} ({})",
                t as f64 / 1e9,
                cores as f64 / 1e9,
                caps.cpu_cores,
                names()
            ));
        }
        if !m_bad && mem > cap_mem {
            m_bad = true;
            problems.push(format!(
                "RAM cap exceeded at t={} s: running attempts hold {} GiB > cap {} GiB ({})",
                t as f64 / 1e9,
                mem as f64 / 1e9,
                caps.ram_gib,
                names()
            ));
        }
    }

    // Deadline.
    let deadline = nanos(deadline_s);
    let mut makespan = 0i64;
    for &(i, _, e, _) in &placed {
        makespan = makespan.max(e);
        if e > deadline {
            problems.push(format!(
                "attempt `{}` ends at {} s, after the deadline D={} s",
                inst.attempts[i].attempt_id,
                e as f64 / 1e9,
                deadline_s
            ));
        }
    }

    // Recompute the four ideal values with plain sorts.
    let mut cpu_h = 0.0f64;
    let mut ram_h = 0.0f64;
    let mut all_requests: Vec<(i64, i64)> = Vec::new();
    let mut lifetimes: Vec<Vec<(i64, i64)>> = vec![Vec::new(); inst.blobs.len()];
    for &(i, s, e, _) in &placed {
        let a = &inst.attempts[i];
        let offsets: Vec<(i64, i64)> = a
            .requests
            .iter()
            .map(|&(rs, re)| (nanos(rs), nanos(re)))
            .collect();
        let req = union_length(offsets.clone());
        let free = nanos(a.duration_s) - req;
        if free < 0 {
            problems.push(format!(
                "attempt `{}`: request time {} s exceeds its duration",
                a.attempt_id,
                req as f64 / 1e9
            ));
        }
        let free_h = free as f64 / 1e9 / 3600.0;
        cpu_h += a.cores * free_h;
        ram_h += a.mem_gib * free_h;
        all_requests.extend(offsets.iter().map(|&(rs, re)| (s + rs, s + re)));
        for &b in &a.blobs {
            lifetimes[b as usize].push((s, e));
        }
    }
    let gpu_h = f64::from(caps.gpus) * union_length(all_requests) as f64 / 1e9 / 3600.0;
    let mut cache_h = 0.0f64;
    for (b, l) in lifetimes.into_iter().enumerate() {
        cache_h += inst.blobs[b].gib() * union_length(l) as f64 / 1e9 / 3600.0;
    }
    let values = CheckedValues {
        makespan_s: makespan as f64 / 1e9,
        cpu_h,
        ram_h,
        gpu_h,
        cache_h,
    };
    for (name, v) in [
        ("CPU", cpu_h),
        ("RAM", ram_h),
        ("GPU", gpu_h),
        ("cache", cache_h),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            problems.push(format!("{name} ideal value {v} is negative or not finite"));
        }
    }
    if let Some(c) = claimed {
        for (name, mine, theirs) in [
            ("CPU", cpu_h, c.cpu_h),
            ("RAM", ram_h, c.ram_h),
            ("GPU", gpu_h, c.gpu_h),
            ("cache", cache_h, c.cache_h),
        ] {
            if !close(mine, theirs) {
                problems.push(format!(
                    "{name} ideal value: the search claims {theirs} h, the validator computes {mine} h"
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(values)
    } else {
        Err(ScheduleFailure {
            workload: w.to_string(),
            schedule: schedule.to_string(),
            problems,
        })
    }
}

/// The validator's own FIFO replay (naive): starts in ns, indexed like `inst.attempts`, and
/// the makespan in ns. Attempts must fit the caps individually.
pub fn independent_fifo(inst: &WorkloadInstance) -> (Vec<i64>, i64) {
    let mut order: Vec<usize> = (0..inst.attempts.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&inst.attempts[a], &inst.attempts[b]);
        x.gen_start
            .partial_cmp(&y.gen_start)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| x.attempt_id.cmp(&y.attempt_id))
    });
    let k = i64::from(inst.caps.concurrency);
    let cap_cores = nano_units(inst.caps.cpu_cores);
    let cap_mem = nano_units(inst.caps.ram_gib);
    // (end, cores, mem) of attempts that may still run at or after `previous`.
    let mut active: Vec<(i64, i64, i64)> = Vec::new();
    let mut starts = vec![0i64; inst.attempts.len()];
    let mut previous = 0i64;
    let mut makespan = 0i64;
    for j in order {
        let a = &inst.attempts[j];
        let (d, c, m) = (
            nanos(a.duration_s),
            nano_units(a.cores),
            nano_units(a.mem_gib),
        );
        active.retain(|x| x.0 > previous);
        let mut times: Vec<i64> = vec![previous];
        times.extend(active.iter().map(|x| x.0));
        times.sort_unstable();
        times.dedup();
        let mut chosen = *times.last().unwrap_or(&previous);
        for &t in &times {
            let still: Vec<&(i64, i64, i64)> = active.iter().filter(|x| x.0 > t).collect();
            let n = still.len() as i64;
            let sc: i64 = still.iter().map(|x| x.1).sum();
            let sm: i64 = still.iter().map(|x| x.2).sum();
            if n < k && sc + c <= cap_cores && sm + m <= cap_mem {
                chosen = t;
                break;
            }
        }
        starts[j] = chosen;
        previous = chosen;
        makespan = makespan.max(chosen + d);
        active.push((chosen + d, c, m));
    }
    (starts, makespan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_length_merges_touching_intervals() {
        assert_eq!(
            union_length(vec![(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]),
            7
        );
    }

    #[test]
    fn gaps_and_uncovered_agree_with_the_union() {
        let placed = [(2, 5), (4, 8), (10, 12), (20, 30)];
        assert_eq!(union_gaps(&placed, 0, 25), vec![(0, 2), (8, 10), (12, 20)]);
        assert_eq!(uncovered(&placed, 0, 25), 2 + 2 + 8);
        assert_eq!(uncovered(&placed, 3, 7), 0);
    }
}
