//! `replay validate`: a schedules file (`schedules.parquet`, or a CSV with its columns)
//! checked against the audit frames of a run directory by the independent validator of
//! [`schedule::reference`].

use crate::error::ReplayError;
use schedule::reference::{CheckedValues, ScheduleRow, independent_fifo, validate_schedule};
use serde::Serialize;
use std::path::Path;

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
