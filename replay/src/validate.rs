//! The independent schedule validator. It shares no code with the search's evaluator: its
//! own grid conversion, its own event sweep for concurrency and caps, its own union code
//! (plain sorts) for the four ideal values, and its own naive FIFO replay for the deadline.
//! Every selected schedule passes through it before anything is written as valid.

use crate::error::ReplayError;
use crate::input::WorkloadInstance;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

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

/// Length of the union of closed-open intervals, by sorting a copy.
fn union_length(mut intervals: Vec<(i64, i64)>) -> i64 {
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

/// Validate one schedule of a workload against SPEC 2.3: exact coverage, fixed durations,
/// interval ordering, nonnegative accounting, concurrency, both caps and the deadline; and,
/// when `claimed` is given, that the recomputed ideal values match it.
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

/// What `replay validate` found for one schedule of a file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileCheck {
    /// The workload.
    pub workload: String,
    /// The schedule's name.
    pub schedule: String,
    /// Rows checked.
    pub rows: usize,
    /// The deadline used (the validator's own FIFO makespan), seconds.
    pub deadline_s: f64,
    /// The recomputed values.
    pub values: CheckedValues,
}

/// Read a schedules file (`schedules.parquet`, or a CSV with the same columns).
pub fn read_schedules_file(path: &Path) -> Result<Vec<(String, String, ScheduleRow)>, ReplayError> {
    let bad = |message: String| ReplayError::SchedulesFile {
        path: path.to_path_buf(),
        message,
    };
    let mut out = Vec::new();
    if path.extension().is_some_and(|e| e == "csv") {
        let mut r = csv::Reader::from_path(path).map_err(|e| bad(e.to_string()))?;
        let headers = r.headers().map_err(|e| bad(e.to_string()))?.clone();
        let col = |name: &str| {
            headers
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| bad(format!("missing column `{name}`")))
        };
        // The CSV form carries the columns of `schedules.parquet` under the same names.
        use crate::schemas::SCHEDULES;
        let (cw, cs, ca, c0, c1) = (
            col(const { SCHEDULES.column("workload") })?,
            col(const { SCHEDULES.column("schedule") })?,
            col(const { SCHEDULES.column("attempt_id") })?,
            col(const { SCHEDULES.column("start_s") })?,
            col(const { SCHEDULES.column("end_s") })?,
        );
        for (line, rec) in r.records().enumerate() {
            let rec = rec.map_err(|e| bad(e.to_string()))?;
            let get = |c: usize| rec.get(c).unwrap_or("").to_string();
            let num = |c: usize, name: &str| {
                get(c).parse::<f64>().map_err(|_| {
                    bad(format!(
                        "line {}: column `{name}`: not a number: `{}`",
                        line + 2,
                        get(c)
                    ))
                })
            };
            out.push((
                get(cw),
                get(cs),
                ScheduleRow {
                    attempt_id: get(ca),
                    start_s: num(c0, "start_s")?,
                    end_s: num(c1, "end_s")?,
                },
            ));
        }
    } else {
        use crate::schemas::SCHEDULES;
        let df = frames::read_declared(path, &SCHEDULES, model::run_dir::FRAME_SCHEMA_VERSION)?;
        let col_str = |c| crate::input::col_str(&df, path, c);
        let col_f64 = |c| crate::input::col_f64(&df, path, c);
        let ws = col_str(const { SCHEDULES.column("workload") })?;
        let ss = col_str(const { SCHEDULES.column("schedule") })?;
        let ids = col_str(const { SCHEDULES.column("attempt_id") })?;
        let starts = col_f64(const { SCHEDULES.column("start_s") })?;
        let ends = col_f64(const { SCHEDULES.column("end_s") })?;
        for i in 0..df.height() {
            let (Some(w), Some(s), Some(a), Some(t0), Some(t1)) = (
                ws[i].clone(),
                ss[i].clone(),
                ids[i].clone(),
                starts[i],
                ends[i],
            ) else {
                return Err(bad(format!("row {i} has a null value")));
            };
            out.push((
                w,
                s,
                ScheduleRow {
                    attempt_id: a,
                    start_s: t0,
                    end_s: t1,
                },
            ));
        }
    }
    Ok(out)
}

/// What a schedules file must hold to pass `validate_schedules_file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileCoverage {
    /// Every selected schedule (`schemas::SCHEDULE_NAMES`) of every configured workload
    /// with included attempts: a file from a replay run.
    EverySelected,
    /// Whatever the file holds (at least one schedule): a hand-made or filtered file.
    AsGiven,
}

/// `replay validate --schedules FILE`: validate every (workload, schedule) of a file against
/// the audit frames of the config's run directory, with D = the validator's own FIFO
/// makespan. Refuses an empty file and, under `FileCoverage::EverySelected`, a file that lacks a
/// selected schedule of a configured workload. Fails with every failing schedule named.
pub fn validate_schedules_file(
    cfg: &model::LoadedConfig,
    path: &Path,
    coverage: FileCoverage,
) -> Result<Vec<FileCheck>, ReplayError> {
    let rows = read_schedules_file(path)?;
    if rows.is_empty() {
        return Err(ReplayError::SchedulesFile {
            path: path.to_path_buf(),
            message: "holds no schedule rows; nothing to validate".into(),
        });
    }
    let input = crate::input::load_input(cfg)?;
    let mut groups: Vec<((String, String), Vec<ScheduleRow>)> = Vec::new();
    for (w, s, r) in rows {
        match groups.iter_mut().find(|(k, _)| k.0 == w && k.1 == s) {
            Some((_, v)) => v.push(r),
            None => groups.push(((w, s), vec![r])),
        }
    }
    if coverage == FileCoverage::EverySelected {
        let missing: Vec<String> = input
            .workloads
            .iter()
            .flat_map(|inst| {
                crate::schemas::SCHEDULE_NAMES
                    .iter()
                    .map(move |name| (inst.workload.as_str(), *name))
            })
            .filter(|(w, name)| !groups.iter().any(|(k, _)| k.0 == *w && k.1 == *name))
            .map(|(w, name)| format!("{w}/{name}"))
            .collect();
        if !missing.is_empty() {
            return Err(ReplayError::SchedulesFile {
                path: path.to_path_buf(),
                message: format!(
                    "lacks {} selected schedule(s) of the config: {} (--partial validates only what the file holds)",
                    missing.len(),
                    missing.join(", ")
                ),
            });
        }
    }
    let mut checks = Vec::new();
    let mut failures = Vec::new();
    for ((w, s), rows) in groups {
        let Some(inst) = input.workloads.iter().find(|i| i.workload.as_str() == w) else {
            return Err(ReplayError::SchedulesFile {
                path: path.to_path_buf(),
                message: format!("workload `{w}` (schedule `{s}`) is not configured"),
            });
        };
        inst.check_quotas_fit()?;
        let (_, d) = independent_fifo(inst);
        let deadline_s = d as f64 / 1e9;
        match validate_schedule(inst, &s, &rows, deadline_s, None) {
            Ok(values) => checks.push(FileCheck {
                workload: w,
                schedule: s,
                rows: rows.len(),
                deadline_s,
                values,
            }),
            Err(f) => failures.push(f),
        }
    }
    if failures.is_empty() {
        Ok(checks)
    } else {
        Err(ReplayError::Validation { failures })
    }
}
