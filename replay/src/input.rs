//! The replay's input read from the audit frames: the included attempts of each workload,
//! in `search.order`, as [`schedule::WorkloadInstance`]s.

use crate::error::ReplayError;
use audit::schema::{ATTEMPT_BLOBS, ATTEMPTS, BLOBS, REQUESTS};
use frames::schema::FrameSpec;
use model::WorkloadId;
use polars::prelude::*;
use schedule::{AttemptInput, BlobInput, WorkloadInstance};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every workload to replay, in `search.order`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayInput {
    /// The workloads, in the order they consume the RNG stream.
    pub workloads: Vec<WorkloadInstance>,
}

/// The audit frames the replay reads, below the run directory (the audit's declared frames).
pub const INPUT_FRAMES: [&FrameSpec; 4] = [&ATTEMPTS, &REQUESTS, &BLOBS, &ATTEMPT_BLOBS];

// The columns read, named through the audit's declared schemas: a column the audit does not
// declare (renamed, say) fails to compile here.
const BLOB_DIGEST: &str = BLOBS.column("digest");
const BLOB_BYTES: &str = BLOBS.column("compressed_bytes");
const A_WORKLOAD: &str = ATTEMPTS.column("workload");
const A_TASK: &str = ATTEMPTS.column("task_id");
const A_ID: &str = ATTEMPTS.column("attempt_id");
const A_START: &str = ATTEMPTS.column("gen_start");
const A_DURATION: &str = ATTEMPTS.column("duration_s");
const A_REQUEST: &str = ATTEMPTS.column("request_s");
const A_CORES: &str = ATTEMPTS.column("quota_cores");
const A_GIB: &str = ATTEMPTS.column("quota_gib");
const A_INCLUDED: &str = ATTEMPTS.column("included");
const R_WORKLOAD: &str = REQUESTS.column("workload");
const R_ID: &str = REQUESTS.column("attempt_id");
const R_START: &str = REQUESTS.column("start_offset_s");
const R_END: &str = REQUESTS.column("end_offset_s");
const AB_WORKLOAD: &str = ATTEMPT_BLOBS.column("workload");
const AB_ID: &str = ATTEMPT_BLOBS.column("attempt_id");
const AB_DIGEST: &str = ATTEMPT_BLOBS.column("digest");
// The trace columns every frame with per-attempt rows carries under the same names.
const TRACE_SHA256: &str = ATTEMPTS.column("archive_sha256");
const TRACE_PREFIX: &str = ATTEMPTS.column("member_prefix");
const _: () = {
    assert!(frames::schema::const_str_eq(
        REQUESTS.column("archive_sha256"),
        TRACE_SHA256
    ));
    assert!(frames::schema::const_str_eq(
        ATTEMPT_BLOBS.column("member_prefix"),
        TRACE_PREFIX
    ));
};

/// Read the included attempts of every workload in `search.order` from the audit frames.
pub fn load_input(cfg: &model::LoadedConfig) -> Result<ReplayInput, ReplayError> {
    let dir = model::run_dir::RunDir::new(&cfg.run_dir);
    let read = |name: &str| -> Result<(PathBuf, DataFrame), ReplayError> {
        let p = dir.file(&format!("{name}.parquet"));
        let df = frames::read_frame(&p, name, model::run_dir::FRAME_SCHEMA_VERSION)?;
        Ok((p, df))
    };
    let (attempts_path, attempts) = read(ATTEMPTS.name)?;
    let (requests_path, requests) = read(REQUESTS.name)?;
    let (blobs_path, blobs) = read(BLOBS.name)?;
    let (ab_path, attempt_blobs) = read(ATTEMPT_BLOBS.name)?;

    // Blobs: digest -> bytes.
    let digests = col_str(&blobs, &blobs_path, BLOB_DIGEST)?;
    let bytes = col_u64(&blobs, &blobs_path, BLOB_BYTES)?;
    let mut blob_bytes: BTreeMap<String, u64> = BTreeMap::new();
    for (d, b) in digests.into_iter().zip(bytes) {
        let d = d.ok_or_else(|| column_err(&blobs_path, BLOB_DIGEST, "null digest"))?;
        let b = b.ok_or_else(|| column_err(&blobs_path, BLOB_BYTES, "null size"))?;
        if let Some(prev) = blob_bytes.insert(d.clone(), b)
            && prev != b
        {
            return Err(column_err(
                &blobs_path,
                "compressed_bytes",
                &format!("blob `{d}` has two sizes: {prev} and {b}"),
            ));
        }
    }

    // Included attempts per workload.
    let a_workload = col_str(&attempts, &attempts_path, A_WORKLOAD)?;
    let a_task = col_str(&attempts, &attempts_path, A_TASK)?;
    let a_id = col_str(&attempts, &attempts_path, A_ID)?;
    let a_start = col_f64(&attempts, &attempts_path, A_START)?;
    let a_dur = col_f64(&attempts, &attempts_path, A_DURATION)?;
    let a_req = col_f64(&attempts, &attempts_path, A_REQUEST)?;
    let a_cores = col_f64(&attempts, &attempts_path, A_CORES)?;
    let a_gib = col_f64(&attempts, &attempts_path, A_GIB)?;
    let a_incl = col_bool(&attempts, &attempts_path, A_INCLUDED)?;
    // Each attempt's origin (absent in frames written without the trace columns).
    let a_trace: Vec<_> = trace_rows(&attempts, &attempts_path)?.collect();
    let attempts_trace = has_trace(&attempts);
    // Rows per (workload, attempt_id), included or not: an id with more than one row can be
    // matched only through the trace columns.
    let mut id_rows: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (w, id) in a_workload.iter().zip(&a_id) {
        if let (Some(w), Some(id)) = (w, id) {
            *id_rows.entry((w.clone(), id.clone())).or_default() += 1;
        }
    }

    // (workload, attempt_id) -> (AttemptInput, request_s from the attempts frame)
    let mut included: BTreeMap<(String, String), (AttemptInput, f64)> = BTreeMap::new();
    // (workload, attempt_id) -> where the included attempt's files are (archive_sha256,
    // member_prefix): an excluded attempt (a pilot) may share its id, and its request and
    // blob rows must not be attached to the included one.
    let mut origin: Origins = BTreeMap::new();
    for i in 0..attempts.height() {
        if a_incl[i] != Some(true) {
            continue;
        }
        let workload = a_workload[i]
            .clone()
            .ok_or_else(|| column_err(&attempts_path, A_WORKLOAD, &format!("null in row {i}")))?;
        let attempt_id = a_id[i]
            .clone()
            .ok_or_else(|| column_err(&attempts_path, A_ID, &format!("null in row {i}")))?;
        let input_err = |field: &str, message: &str| {
            ReplayError::Instance(schedule::InstanceError::Input {
                path: attempts_path.clone(),
                workload: workload.clone(),
                attempt_id: attempt_id.clone(),
                field: field.to_string(),
                message: message.to_string(),
            })
        };
        let need = |v: Option<f64>, field: &str| {
            v.ok_or_else(|| input_err(field, "null for an included attempt"))
        };
        let attempt = AttemptInput {
            attempt_id: attempt_id.clone(),
            task_id: a_task[i]
                .clone()
                .ok_or_else(|| input_err("task_id", "null for an included attempt"))?,
            gen_start: need(a_start[i], "gen_start")?,
            duration_s: need(a_dur[i], "duration_s")?,
            requests: Vec::new(),
            cores: need(a_cores[i], "quota_cores")?,
            mem_gib: need(a_gib[i], "quota_gib")?,
            blobs: Vec::new(),
        };
        let request_s = need(a_req[i], "request_s")?;
        if included
            .insert((workload.clone(), attempt_id.clone()), (attempt, request_s))
            .is_some()
        {
            return Err(input_err("attempt_id", "included twice"));
        }
        let (sha, prefix) = a_trace[i].unwrap_or_default();
        origin.insert(
            (workload.clone(), attempt_id.clone()),
            (sha.map(str::to_string), prefix.map(str::to_string)),
        );
    }

    // Requests of included attempts. The string columns are read in place (this frame has
    // a row per request: millions at scale).
    let r_workload = str_col(&requests, &requests_path, R_WORKLOAD)?;
    let r_id = str_col(&requests, &requests_path, R_ID)?;
    let r_start = col_f64(&requests, &requests_path, R_START)?;
    let r_end = col_f64(&requests, &requests_path, R_END)?;
    let r_trace = trace_rows(&requests, &requests_path)?;
    let matching = Matching {
        origin: &origin,
        id_rows: &id_rows,
        attempts_trace,
    };
    for (i, ((w, id), here)) in r_workload.iter().zip(r_id.iter()).zip(r_trace).enumerate() {
        let (Some(w), Some(id)) = (w, id) else {
            return Err(column_err(
                &requests_path,
                "attempt_id",
                &format!("null workload or attempt_id in row {i}"),
            ));
        };
        let key = (w.to_string(), id.to_string());
        if !matching.belongs(&key, here, &requests_path)? {
            continue;
        }
        if let Some((a, _)) = included.get_mut(&key) {
            let (Some(s), Some(e)) = (r_start[i], r_end[i]) else {
                return Err(ReplayError::Instance(schedule::InstanceError::Input {
                    path: requests_path.clone(),
                    workload: key.0,
                    attempt_id: key.1,
                    field: "start_offset_s".into(),
                    message: format!("null offset in row {i}"),
                }));
            };
            a.requests.push((s, e));
        }
    }

    // Blob uses of included attempts.
    let ab_workload = optional_col_str(&attempt_blobs, &ab_path, AB_WORKLOAD)?;
    let ab_id = col_str(&attempt_blobs, &ab_path, AB_ID)?;
    let ab_digest = col_str(&attempt_blobs, &ab_path, AB_DIGEST)?;
    let ab_trace = trace_rows(&attempt_blobs, &ab_path)?;
    let mut uses: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (i, here) in ab_trace.enumerate() {
        let (Some(id), Some(d)) = (&ab_id[i], &ab_digest[i]) else {
            return Err(column_err(
                &ab_path,
                "digest",
                &format!("null attempt_id or digest in row {i}"),
            ));
        };
        let workloads: Vec<String> = match ab_workload.as_ref().and_then(|c| c[i].clone()) {
            Some(w) => vec![w],
            None => WorkloadId::ALL.iter().map(|w| w.to_string()).collect(),
        };
        for w in workloads {
            let key = (w, id.clone());
            if matching.belongs(&key, here, &ab_path)? {
                uses.entry(key).or_default().push(d.clone());
            }
        }
    }

    let mut out = Vec::new();
    for w in &cfg.config.search.order {
        let wc = cfg
            .config
            .workloads
            .get(*w)
            .ok_or_else(|| ReplayError::UnconfiguredWorkload {
                workload: w.to_string(),
            })?;
        let mut blob_index: BTreeMap<String, u32> = BTreeMap::new();
        let mut blob_list: Vec<BlobInput> = Vec::new();
        let mut list = Vec::new();
        for ((wname, id), (attempt, request_s)) in &included {
            if wname != w.as_str() {
                continue;
            }
            let mut a = attempt.clone();
            a.requests
                .sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
            let computed = a.request_seconds();
            if (computed - request_s).abs() > 1e-6 * request_s.abs().max(1.0) {
                return Err(ReplayError::Instance(schedule::InstanceError::Input {
                    path: attempts_path.clone(),
                    workload: w.to_string(),
                    attempt_id: id.clone(),
                    field: "request_s".into(),
                    message: format!(
                        "{request_s} s disagrees with the union of its intervals in {} ({computed} s)",
                        requests_path.display()
                    ),
                }));
            }
            for d in uses.get(&(wname.clone(), id.clone())).into_iter().flatten() {
                let bytes = *blob_bytes.get(d).ok_or_else(|| {
                    ReplayError::Instance(schedule::InstanceError::Input {
                        path: ab_path.clone(),
                        workload: w.to_string(),
                        attempt_id: id.clone(),
                        field: "digest".into(),
                        message: format!("blob `{d}` is not in {}", blobs_path.display()),
                    })
                })?;
                let next = blob_list.len() as u32;
                let idx = *blob_index.entry(d.clone()).or_insert_with(|| {
                    blob_list.push(BlobInput {
                        digest: d.clone(),
                        compressed_bytes: bytes,
                    });
                    next
                });
                a.blobs.push(idx);
            }
            list.push(a);
        }
        out.push(WorkloadInstance::new(
            *w,
            wc.replay,
            list,
            blob_list,
            Some(&attempts_path),
        )?);
    }
    Ok(ReplayInput { workloads: out })
}

fn column_err(path: &Path, column: &str, message: &str) -> ReplayError {
    ReplayError::Column {
        path: path.to_path_buf(),
        column: column.to_string(),
        message: message.to_string(),
    }
}

fn column<'a>(df: &'a DataFrame, path: &Path, name: &str) -> Result<&'a Column, ReplayError> {
    df.column(name)
        .map_err(|_| column_err(path, name, "missing"))
}

fn cast_err(path: &Path, name: &str, c: &Column, want: &str) -> ReplayError {
    column_err(path, name, &format!("expected {want}, found {}", c.dtype()))
}

pub(crate) fn col_str(
    df: &DataFrame,
    path: &Path,
    name: &str,
) -> Result<Vec<Option<String>>, ReplayError> {
    let c = column(df, path, name)?;
    let s = c.str().map_err(|_| cast_err(path, name, c, "a string"))?;
    Ok(s.iter().map(|v| v.map(str::to_string)).collect())
}

/// (workload, attempt_id) of each included attempt -> its (archive_sha256, member_prefix)
/// in attempts.parquet.
type Origins = BTreeMap<(String, String), (Option<String>, Option<String>)>;

/// Which rows of the requests and attempt_blobs frames belong to an included attempt.
struct Matching<'a> {
    /// Where each included attempt's files are.
    origin: &'a Origins,
    /// Rows per (workload, attempt_id) in attempts.parquet, included or not.
    id_rows: &'a BTreeMap<(String, String), usize>,
    /// Whether attempts.parquet has both trace columns.
    attempts_trace: bool,
}

impl Matching<'_> {
    /// Whether a row (with its trace values when its frame has the trace columns) belongs
    /// to the included attempt `key`: by the trace columns when both frames have them, else
    /// by the id alone, refused when the id has more than one row in attempts.parquet (an
    /// excluded pilot sharing a census attempt's id).
    fn belongs(
        &self,
        key: &(String, String),
        here: TraceRow<'_>,
        path: &Path,
    ) -> Result<bool, ReplayError> {
        let Some(o) = self.origin.get(key) else {
            return Ok(false);
        };
        match here {
            Some((sha, prefix)) if self.attempts_trace => {
                Ok(o.0.as_deref() == sha && o.1.as_deref() == prefix)
            }
            _ => {
                let n = self.id_rows.get(key).copied().unwrap_or(0);
                if n > 1 {
                    return Err(column_err(
                        path,
                        "member_prefix",
                        &format!(
                            "{} attempt `{}` has {n} rows in attempts.parquet; without `archive_sha256` and `member_prefix` in both frames its rows cannot be told apart",
                            key.0, key.1
                        ),
                    ));
                }
                Ok(true)
            }
        }
    }
}

/// A string column, read in place.
fn str_col<'a>(
    df: &'a DataFrame,
    path: &Path,
    name: &str,
) -> Result<&'a StringChunked, ReplayError> {
    let c = column(df, path, name)?;
    c.str().map_err(|_| cast_err(path, name, c, "a string"))
}

/// Whether a frame has both trace columns (`archive_sha256`, `member_prefix`).
fn has_trace(df: &DataFrame) -> bool {
    df.column(TRACE_SHA256).is_ok() && df.column(TRACE_PREFIX).is_ok()
}

/// A row's `(archive_sha256, member_prefix)`, or `None` when its frame lacks them.
type TraceRow<'a> = Option<(Option<&'a str>, Option<&'a str>)>;

/// Every row's [`TraceRow`], read in place.
fn trace_rows<'a>(
    df: &'a DataFrame,
    path: &Path,
) -> Result<Box<dyn Iterator<Item = TraceRow<'a>> + 'a>, ReplayError> {
    if !has_trace(df) {
        return Ok(Box::new(std::iter::repeat_n(None, df.height())));
    }
    let sha = str_col(df, path, TRACE_SHA256)?;
    let prefix = str_col(df, path, TRACE_PREFIX)?;
    Ok(Box::new(sha.iter().zip(prefix.iter()).map(Some)))
}

fn optional_col_str(
    df: &DataFrame,
    path: &Path,
    name: &str,
) -> Result<Option<Vec<Option<String>>>, ReplayError> {
    if df.column(name).is_err() {
        return Ok(None);
    }
    col_str(df, path, name).map(Some)
}

pub(crate) fn col_f64(
    df: &DataFrame,
    path: &Path,
    name: &str,
) -> Result<Vec<Option<f64>>, ReplayError> {
    let c = column(df, path, name)?;
    if !c.dtype().is_primitive_numeric() && !c.dtype().is_null() {
        return Err(cast_err(path, name, c, "a number"));
    }
    let cast = c
        .cast(&DataType::Float64)
        .map_err(|_| cast_err(path, name, c, "a number"))?;
    let f = cast
        .f64()
        .map_err(|_| cast_err(path, name, c, "a number"))?;
    Ok(f.iter().collect())
}

fn col_u64(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<u64>>, ReplayError> {
    let c = column(df, path, name)?;
    if !c.dtype().is_integer() {
        return Err(cast_err(path, name, c, "an integer"));
    }
    let cast = c
        .cast(&DataType::UInt64)
        .map_err(|_| cast_err(path, name, c, "a nonnegative integer"))?;
    let u = cast
        .u64()
        .map_err(|_| cast_err(path, name, c, "a nonnegative integer"))?;
    Ok(u.iter().collect())
}

fn col_bool(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<bool>>, ReplayError> {
    let c = column(df, path, name)?;
    let b = c.bool().map_err(|_| cast_err(path, name, c, "a boolean"))?;
    Ok(b.iter().collect())
}
