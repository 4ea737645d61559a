//! Loading the run directory's outputs (the frames, `audit.json`, `joint_schedules.csv`, the
//! optional ledger and Pareto front) and the rows and series the sections and charts show.

use crate::ReportError;
use audit::schema::{ATTEMPT_BLOBS, BLOBS, EXCLUSIONS, REQUESTS};
use frames::schema::FrameSpec;
use ingest::ledger::LEDGER;
use model::run_dir::{FRAME_SCHEMA_VERSION, RunDir};
use polars::prelude::DataFrame;
use replay::schemas::{BOUNDS, PARETO, SCHEDULES, SEARCH_TRACE};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A frame read from the run directory, with the path its errors name.
pub(crate) struct Frame {
    path: PathBuf,
    df: DataFrame,
}

impl Frame {
    /// Read `NAME.parquet` under its producer's declaration: the frame's name, schema
    /// version, columns and types (`frames::read_declared`).
    fn read(run: &RunDir, spec: &FrameSpec) -> Result<Self, ReportError> {
        let path = run.file(&spec.parquet_file());
        let df = frames::read_declared(&path, spec, FRAME_SCHEMA_VERSION)?;
        Ok(Self { path, df })
    }

    /// Like [`Frame::read`], but `None` when the file does not exist.
    fn read_optional(run: &RunDir, spec: &FrameSpec) -> Result<Option<Self>, ReportError> {
        if run.file(&spec.parquet_file()).exists() {
            Self::read(run, spec).map(Some)
        } else {
            Ok(None)
        }
    }

    /// String values (null as empty).
    pub(crate) fn strs(&self, c: &str) -> Result<Vec<String>, ReportError> {
        Ok(self
            .opt_strs(c)?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect())
    }

    /// String values.
    pub(crate) fn opt_strs(&self, c: &str) -> Result<Vec<Option<String>>, ReportError> {
        Ok(frames::str_values(&self.df, &self.path, c)?)
    }

    /// f64 values.
    pub(crate) fn f64s(&self, c: &str) -> Result<Vec<Option<f64>>, ReportError> {
        Ok(frames::f64_values(&self.df, &self.path, c)?)
    }

    /// u64 values.
    pub(crate) fn u64s(&self, c: &str) -> Result<Vec<Option<u64>>, ReportError> {
        Ok(frames::u64_values(&self.df, &self.path, c)?)
    }
}

/// A CSV file with a header: its path, header and rows (the reader refuses a row whose
/// length differs from the header's).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    /// The file, named by errors.
    pub(crate) path: PathBuf,
    /// The header's cells.
    pub(crate) header: Vec<String>,
    /// Each row's cells.
    pub(crate) rows: Vec<Vec<String>>,
}

impl Table {
    /// Read a CSV file.
    fn read(path: &Path) -> Result<Self, ReportError> {
        let csv_err = |source| ReportError::Csv {
            path: path.to_path_buf(),
            source,
        };
        let mut r = csv::Reader::from_path(path).map_err(csv_err)?;
        let header = r
            .headers()
            .map_err(csv_err)?
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows = Vec::new();
        for record in r.records() {
            rows.push(
                record
                    .map_err(csv_err)?
                    .iter()
                    .map(str::to_string)
                    .collect(),
            );
        }
        Ok(Self {
            path: path.to_path_buf(),
            header,
            rows,
        })
    }

    /// The index of a column; the error names the file and the column.
    pub(crate) fn column(&self, name: &str) -> Result<usize, ReportError> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| ReportError::MissingColumn {
                path: self.path.clone(),
                column: name.to_string(),
            })
    }
}

/// Everything the report reads from the run directory.
pub(crate) struct RunData {
    ledger: Option<Frame>,
    /// `audit.json`, read through its type.
    pub(crate) audit: audit::output::AuditDocument,
    exclusions: Frame,
    bounds: Frame,
    schedules: Frame,
    trace: Frame,
    requests: Frame,
    blobs: Frame,
    attempt_blobs: Frame,
    pareto: Option<Frame>,
    /// joint_schedules.csv.
    pub(crate) joint: Table,
}

/// Read the run directory's outputs. The ledger is absent when the run had no ingest stage,
/// the Pareto front in runs written before it existed; a file that is there must be readable.
pub(crate) fn load(run: &RunDir) -> Result<RunData, ReportError> {
    Ok(RunData {
        ledger: Frame::read_optional(run, &LEDGER)?,
        audit: audit::output::read_audit_json(&run.file(audit::output::AUDIT_JSON_FILE))?,
        exclusions: Frame::read(run, &EXCLUSIONS)?,
        bounds: Frame::read(run, &BOUNDS)?,
        schedules: Frame::read(run, &SCHEDULES)?,
        trace: Frame::read(run, &SEARCH_TRACE)?,
        requests: Frame::read(run, &REQUESTS)?,
        blobs: Frame::read(run, &BLOBS)?,
        attempt_blobs: Frame::read(run, &ATTEMPT_BLOBS)?,
        pareto: Frame::read_optional(run, &PARETO)?,
        joint: Table::read(&run.file("joint_schedules.csv"))?,
    })
}

/// The ledger, counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LedgerSummary {
    /// Distinct archive ids.
    pub(crate) archives: usize,
    /// (archive, location) rows.
    pub(crate) rows: usize,
    /// (location kind, verdict) -> rows.
    pub(crate) by_verdict: BTreeMap<(String, String), usize>,
}

/// One excluded attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exclusion {
    /// Workload.
    pub(crate) workload: String,
    /// Attempt id.
    pub(crate) attempt_id: String,
    /// Exclusion reason (`superseded_by_census` for the pilot).
    pub(crate) reason: String,
    /// Free-text detail.
    pub(crate) detail: String,
}

/// One row of `bounds.parquet` (hours, or percent for the gaps).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct BoundRow {
    /// Workload.
    pub(crate) workload: String,
    /// Resource (cpu, ram, gpu, cache).
    pub(crate) resource: String,
    /// FIFO holding value.
    pub(crate) fifo_holding: Option<f64>,
    /// FIFO ideal value.
    pub(crate) fifo_ideal: Option<f64>,
    /// The seed profile's best (absent in runs written before the seed profile existed).
    pub(crate) seed_profile_best: Option<f64>,
    /// Best found.
    pub(crate) best_found: Option<f64>,
    /// The study's lower bound (docs/FORMAT.md, "The replay model").
    pub(crate) lower_bound: Option<f64>,
    /// The study's gap, percent.
    pub(crate) gap_pct: Option<f64>,
    /// The best valid bound.
    pub(crate) best_bound: Option<f64>,
    /// The certified gap, percent.
    pub(crate) certified_gap_pct: Option<f64>,
    /// The LP bound's certified value.
    pub(crate) lp_bound: Option<f64>,
    /// How the LP ended (`converged`, `budget_exhausted`, `skipped`, ...).
    pub(crate) lp_status: Option<String>,
}

/// A blob's digest, its GiB and the segments of its lifetime union.
pub(crate) type BlobSegments = (String, f64, Vec<(f64, f64)>);

/// A named line of (x, y) points.
pub(crate) type Line = (String, Vec<(f64, f64)>);

/// One schedule of one workload: attempt -> seconds (start or end).
pub(crate) type Times = BTreeMap<String, f64>;

impl RunData {
    /// The ledger counted by (location, verdict), if the run has one.
    pub(crate) fn ledger_summary(&self) -> Result<Option<LedgerSummary>, ReportError> {
        let Some(l) = &self.ledger else {
            return Ok(None);
        };
        let ids = l.strs(const { LEDGER.column("archive_id") })?;
        let kinds = l.strs(const { LEDGER.column("location_kind") })?;
        let verdicts = l.strs(const { LEDGER.column("verdict") })?;
        let mut by_verdict = BTreeMap::new();
        for (k, v) in kinds.into_iter().zip(verdicts) {
            *by_verdict.entry((k, v)).or_default() += 1;
        }
        Ok(Some(LedgerSummary {
            archives: ids.iter().collect::<BTreeSet<_>>().len(),
            rows: ids.len(),
            by_verdict,
        }))
    }

    /// Every excluded attempt, in the frame's order.
    pub(crate) fn exclusions(&self) -> Result<Vec<Exclusion>, ReportError> {
        let e = &self.exclusions;
        let (w, a, r, d) = (
            e.strs(const { EXCLUSIONS.column("workload") })?,
            e.strs(const { EXCLUSIONS.column("attempt_id") })?,
            e.strs(const { EXCLUSIONS.column("reason") })?,
            e.strs(const { EXCLUSIONS.column("detail") })?,
        );
        Ok(w.into_iter()
            .zip(a)
            .zip(r)
            .zip(d)
            .map(|(((workload, attempt_id), reason), detail)| Exclusion {
                workload,
                attempt_id,
                reason,
                detail,
            })
            .collect())
    }

    /// Every row of `bounds.parquet`, in the frame's order.
    pub(crate) fn bounds(&self) -> Result<Vec<BoundRow>, ReportError> {
        let b = &self.bounds;
        let workload = b.strs(const { BOUNDS.column("workload") })?;
        let resource = b.strs(const { BOUNDS.column("resource") })?;
        let fh = b.f64s(const { BOUNDS.column("fifo_holding_h") })?;
        let fi = b.f64s(const { BOUNDS.column("fifo_ideal_h") })?;
        let sb = b.f64s(const { BOUNDS.column("seed_profile_best_h") })?;
        let bf = b.f64s(const { BOUNDS.column("best_found_h") })?;
        let lb = b.f64s(const { BOUNDS.column("lower_bound_h") })?;
        let gp = b.f64s(const { BOUNDS.column("gap_pct") })?;
        let vb = b.f64s(const { BOUNDS.column("best_bound_h") })?;
        let cg = b.f64s(const { BOUNDS.column("certified_gap_pct") })?;
        let lp = b.f64s(const { BOUNDS.column("lp_bound_h") })?;
        let ls = b.opt_strs(const { BOUNDS.column("lp_status") })?;
        Ok((0..workload.len())
            .map(|i| BoundRow {
                workload: workload[i].clone(),
                resource: resource[i].clone(),
                fifo_holding: fh[i],
                fifo_ideal: fi[i],
                seed_profile_best: sb[i],
                best_found: bf[i],
                lower_bound: lb[i],
                gap_pct: gp[i],
                best_bound: vb[i],
                certified_gap_pct: cg[i],
                lp_bound: lp[i],
                lp_status: ls[i].clone(),
            })
            .collect())
    }

    /// The workloads the charts show: those of `bounds.parquet`, in its order.
    pub(crate) fn chart_workloads(&self) -> Result<Vec<String>, ReportError> {
        let mut w = self.bounds.strs(const { BOUNDS.column("workload") })?;
        w.dedup();
        Ok(w)
    }

    /// One schedule's start and end seconds per attempt.
    pub(crate) fn schedule_times(
        &self,
        workload: &str,
        schedule: &str,
    ) -> Result<(Times, Times), ReportError> {
        let f = &self.schedules;
        let w = f.strs(const { SCHEDULES.column("workload") })?;
        let s = f.strs(const { SCHEDULES.column("schedule") })?;
        let a = f.strs(const { SCHEDULES.column("attempt_id") })?;
        let st = f.f64s(const { SCHEDULES.column("start_s") })?;
        let en = f.f64s(const { SCHEDULES.column("end_s") })?;
        let mut starts = BTreeMap::new();
        let mut ends = BTreeMap::new();
        for i in 0..w.len() {
            if w[i] == workload && s[i] == schedule {
                starts.insert(a[i].clone(), st[i].unwrap_or(0.0));
                ends.insert(a[i].clone(), en[i].unwrap_or(0.0));
            }
        }
        Ok((starts, ends))
    }

    /// Absolute request intervals of a schedule (start + offsets), seconds.
    pub(crate) fn shifted_requests(
        &self,
        workload: &str,
        starts: &Times,
    ) -> Result<Vec<(f64, f64)>, ReportError> {
        let f = &self.requests;
        let w = f.strs(const { REQUESTS.column("workload") })?;
        let a = f.strs(const { REQUESTS.column("attempt_id") })?;
        let s = f.f64s(const { REQUESTS.column("start_offset_s") })?;
        let e = f.f64s(const { REQUESTS.column("end_offset_s") })?;
        Ok((0..w.len())
            .filter(|&i| w[i] == workload)
            .filter_map(|i| {
                let st = starts.get(&a[i])?;
                Some((st + s[i]?, st + e[i]?))
            })
            .collect())
    }

    /// The lifetimes (union of the using attempts' intervals) of a schedule's 25 largest
    /// blobs, largest first (ties by digest).
    pub(crate) fn blob_rows(
        &self,
        workload: &str,
        starts: &Times,
        ends: &Times,
    ) -> Result<Vec<BlobSegments>, ReportError> {
        let digests = self.blobs.strs(const { BLOBS.column("digest") })?;
        let gib = self.blobs.f64s(const { BLOBS.column("compressed_gib") })?;
        let size: BTreeMap<&str, f64> = digests
            .iter()
            .zip(gib.iter())
            .map(|(k, v)| (k.as_str(), v.unwrap_or(0.0)))
            .collect();
        let f = &self.attempt_blobs;
        let w = f.strs(const { ATTEMPT_BLOBS.column("workload") })?;
        let a = f.strs(const { ATTEMPT_BLOBS.column("attempt_id") })?;
        let g = f.strs(const { ATTEMPT_BLOBS.column("digest") })?;
        let mut by_blob: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for i in 0..w.len() {
            if w[i] != workload {
                continue;
            }
            if let (Some(s), Some(e)) = (starts.get(&a[i]), ends.get(&a[i])) {
                by_blob.entry(g[i].clone()).or_default().push((*s, *e));
            }
        }
        let mut rows: Vec<BlobSegments> = by_blob
            .into_iter()
            .map(|(dg, mut iv)| {
                iv.sort_by(|x, y| x.0.total_cmp(&y.0));
                let mut segs: Vec<(f64, f64)> = Vec::new();
                for (s, e) in iv {
                    match segs.last_mut() {
                        Some(l) if s <= l.1 => l.1 = l.1.max(e),
                        _ => segs.push((s, e)),
                    }
                }
                let gib = size.get(dg.as_str()).copied().unwrap_or(0.0);
                (dg, gib, segs)
            })
            .collect();
        rows.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        rows.truncate(25);
        Ok(rows)
    }

    /// The search's best-so-far lines (objective -> (candidates evaluated, hours)) for the
    /// GPU and cache objectives.
    pub(crate) fn convergence(&self, workload: &str) -> Result<Vec<Line>, ReportError> {
        let f = &self.trace;
        let tw = f.strs(const { SEARCH_TRACE.column("workload") })?;
        let to = f.strs(const { SEARCH_TRACE.column("objective") })?;
        let tc = f.u64s(const { SEARCH_TRACE.column("candidates_evaluated") })?;
        let tb = f.f64s(const { SEARCH_TRACE.column("best_so_far_h") })?;
        let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for i in 0..tw.len() {
            if tw[i] == workload && (to[i] == "gpu" || to[i] == "cache") {
                lines
                    .entry(to[i].clone())
                    .or_default()
                    .push((tc[i].unwrap_or(0) as f64, tb[i].unwrap_or(0.0)));
            }
        }
        Ok(lines.into_iter().collect())
    }

    /// The Pareto front's (GPU, cache) ideal values, if the run has the frame.
    pub(crate) fn pareto_points(
        &self,
        workload: &str,
    ) -> Result<Option<Vec<(f64, f64)>>, ReportError> {
        let Some(p) = &self.pareto else {
            return Ok(None);
        };
        let pw = p.strs(const { PARETO.column("workload") })?;
        let pg = p.f64s(const { PARETO.column("gpu_ideal_h") })?;
        let pc = p.f64s(const { PARETO.column("cache_ideal_h") })?;
        Ok(Some(
            (0..pw.len())
                .filter(|&i| pw[i] == workload)
                .filter_map(|i| Some((pg[i]?, pc[i]?)))
                .collect(),
        ))
    }
}
