//! One workload's replay problem as plain Rust values: the included attempts with their
//! durations, request offsets, quotas and image blobs, checked on construction. Read from
//! the audit frames by the `replay` stage or built by hand (tests, benchmarks, the
//! synthetic generator); every algorithm of the workspace takes these structs.

use model::config::ReplayCaps;
use model::{GIB, WorkloadId};
use std::path::{Path, PathBuf};

/// Why an instance was refused: each names the frame (or `<memory>`), the workload, the
/// attempt and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InstanceError {
    /// An input value is unusable (null duration, unsorted requests, unknown blob, ...).
    #[error("{}: {workload} attempt `{attempt_id}`: field `{field}`: {message}", path.display())]
    Input {
        /// The frame the value came from (or `<memory>` for hand-built instances).
        path: PathBuf,
        /// The workload.
        workload: String,
        /// The attempt.
        attempt_id: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An attempt's quota alone exceeds a workload cap: no schedule can ever place it.
    #[error(
        "{workload} attempt `{attempt_id}` can never be placed: its {resource} quota {quota} exceeds the cap {cap} of workloads.{workload}.replay"
    )]
    QuotaExceedsCap {
        /// The workload.
        workload: String,
        /// The attempt.
        attempt_id: String,
        /// `cpu_cores` or `ram_gib`.
        resource: &'static str,
        /// The attempt's quota.
        quota: f64,
        /// The cap.
        cap: f64,
    },
}

/// A compressed image layer used by at least one included attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobInput {
    /// `sha256:<hex>`.
    pub digest: String,
    /// Compressed size in bytes.
    pub compressed_bytes: u64,
}

impl BlobInput {
    /// Size in GiB (2^30 bytes).
    pub fn gib(&self) -> f64 {
        self.compressed_bytes as f64 / GIB
    }
}

/// One included attempt: the unit that is scheduled.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptInput {
    /// Attempt id, unique within the workload.
    pub attempt_id: String,
    /// Task (benchmark problem) id.
    pub task_id: String,
    /// Historical generation start, epoch seconds (FIFO order key).
    pub gen_start: f64,
    /// Fixed duration `d` in seconds.
    pub duration_s: f64,
    /// Model-request intervals `[start, end)` as offsets from the generation start,
    /// sorted and disjoint, inside `[0, d]`.
    pub requests: Vec<(f64, f64)>,
    /// CPU quota in cores.
    pub cores: f64,
    /// RAM quota in GiB.
    pub mem_gib: f64,
    /// Indices into [`WorkloadInstance::blobs`], ascending, without repeats.
    pub blobs: Vec<u32>,
}

impl AttemptInput {
    /// `req_j`: the union length of the attempt's requests (they are disjoint), seconds.
    pub fn request_seconds(&self) -> f64 {
        // `+ 0.0`: an empty sum is -0.0.
        self.requests.iter().map(|(s, e)| e - s).sum::<f64>() + 0.0
    }
}

/// One workload's replay problem.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadInstance {
    /// The workload.
    pub workload: WorkloadId,
    /// Concurrency, caps and GPUs.
    pub caps: ReplayCaps,
    /// Included attempts in FIFO order: by (`gen_start`, `attempt_id`).
    pub attempts: Vec<AttemptInput>,
    /// Blobs used by the attempts, sorted by digest.
    pub blobs: Vec<BlobInput>,
}

/// How far (seconds) a request end may lie past `d` before it is refused (float noise from
/// the audit's offset arithmetic); within it the end is clamped to `d`.
const REQUEST_END_SLACK_S: f64 = 1e-6;

fn memory_path() -> PathBuf {
    PathBuf::from("<memory>")
}

impl WorkloadInstance {
    /// Build an instance: attempts are sorted into FIFO order, blobs by digest (attempt blob
    /// indices are remapped), and every value is checked. `source` names the frame the
    /// values came from in errors.
    pub fn new(
        workload: WorkloadId,
        caps: ReplayCaps,
        attempts: Vec<AttemptInput>,
        blobs: Vec<BlobInput>,
        source: Option<&Path>,
    ) -> Result<Self, InstanceError> {
        let path = source.map(Path::to_path_buf).unwrap_or_else(memory_path);
        let err = |attempt_id: &str, field: &str, message: String| InstanceError::Input {
            path: path.clone(),
            workload: workload.to_string(),
            attempt_id: attempt_id.to_string(),
            field: field.to_string(),
            message,
        };
        // Blobs sorted by digest; remap indices.
        let mut blob_order: Vec<usize> = (0..blobs.len()).collect();
        blob_order.sort_by(|&a, &b| blobs[a].digest.cmp(&blobs[b].digest));
        let mut remap = vec![0u32; blobs.len()];
        for (new, &old) in blob_order.iter().enumerate() {
            remap[old] = new as u32;
        }
        for w in blob_order.windows(2) {
            if blobs[w[0]].digest == blobs[w[1]].digest {
                return Err(err(
                    "",
                    "digest",
                    format!("blob `{}` is listed twice", blobs[w[0]].digest),
                ));
            }
        }
        let sorted_blobs: Vec<BlobInput> = blob_order.iter().map(|&i| blobs[i].clone()).collect();
        let mut attempts = attempts;
        for a in &mut attempts {
            if !a.gen_start.is_finite() {
                return Err(err(
                    &a.attempt_id,
                    "gen_start",
                    format!("not finite: {}", a.gen_start),
                ));
            }
            if !(a.duration_s.is_finite() && a.duration_s >= 0.0) {
                return Err(err(
                    &a.attempt_id,
                    "duration_s",
                    format!(
                        "must be a finite, nonnegative number of seconds, got {}",
                        a.duration_s
                    ),
                ));
            }
            for (field, v) in [("quota_cores", a.cores), ("quota_gib", a.mem_gib)] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(err(
                        &a.attempt_id,
                        field,
                        format!("must be a finite, nonnegative number, got {v}"),
                    ));
                }
            }
            let mut prev_end = 0.0f64;
            for (k, r) in a.requests.iter_mut().enumerate() {
                let (s, e) = *r;
                if !(s.is_finite() && e.is_finite() && s >= 0.0 && s <= e) {
                    return Err(err(
                        &a.attempt_id,
                        "start_offset_s",
                        format!("request {k} is not an interval inside the lifetime: [{s}, {e})"),
                    ));
                }
                if e > a.duration_s + REQUEST_END_SLACK_S {
                    return Err(err(
                        &a.attempt_id,
                        "end_offset_s",
                        format!(
                            "request {k} ends at offset {e} s, after the attempt's duration {} s",
                            a.duration_s
                        ),
                    ));
                }
                if k > 0 && s < prev_end {
                    return Err(err(
                        &a.attempt_id,
                        "start_offset_s",
                        format!(
                            "request {k} starts at {s} s, before the previous one ends ({prev_end} s): requests must be merged, sorted and disjoint"
                        ),
                    ));
                }
                r.1 = e.min(a.duration_s);
                prev_end = e;
            }
            for b in &mut a.blobs {
                let Some(&nb) = remap.get(*b as usize) else {
                    return Err(err(
                        &a.attempt_id,
                        "blobs",
                        format!("blob index {b} out of range ({} blobs)", blobs.len()),
                    ));
                };
                *b = nb;
            }
            a.blobs.sort_unstable();
            a.blobs.dedup();
        }
        attempts.sort_by(|a, b| {
            a.gen_start
                .total_cmp(&b.gen_start)
                .then_with(|| a.attempt_id.cmp(&b.attempt_id))
        });
        let mut ids: Vec<&str> = attempts.iter().map(|a| a.attempt_id.as_str()).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(err(w[0], "attempt_id", "appears twice".into()));
        }
        Ok(WorkloadInstance {
            workload,
            caps,
            attempts,
            blobs: sorted_blobs,
        })
    }

    /// Refuse an attempt whose quota alone exceeds a cap (it could never be placed).
    pub fn check_quotas_fit(&self) -> Result<(), InstanceError> {
        for a in &self.attempts {
            for (resource, quota, cap) in [
                ("cpu_cores", a.cores, self.caps.cpu_cores),
                ("ram_gib", a.mem_gib, self.caps.ram_gib),
            ] {
                if quota_units(quota) > quota_units(cap) {
                    return Err(InstanceError::QuotaExceedsCap {
                        workload: self.workload.to_string(),
                        attempt_id: a.attempt_id.clone(),
                        resource,
                        quota,
                        cap,
                    });
                }
            }
        }
        Ok(())
    }
}

/// A quota or cap in integer nano-units (1e-9 core or GiB): exact decimal sums.
pub fn quota_units(x: f64) -> i64 {
    (x * 1e9).round() as i64
}
