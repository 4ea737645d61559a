//! The audit's frames (`attempts`, `requests`, `clipping`, `exclusions`, `blobs`,
//! `attempt_blobs`) and `audit.json`, written atomically with schema metadata.

use crate::attempt::AuditedAttempt;
use crate::cohort::WorkloadAudit;
use crate::error::AuditError;
use frames::{FrameBuilder, FrameMeta};
use model::run_dir::{FRAME_SCHEMA_VERSION, JSON_FORMAT_VERSION, RunDir};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Metadata key listing the source archives (`id=sha256` joined by `,`).
pub const KEY_SOURCE_ARCHIVES: &str = "agentrace.source_archives";

/// `audit.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditDocument {
    /// Format version.
    pub format_version: u32,
    /// Every workload's cohort audit.
    pub workloads: BTreeMap<String, WorkloadAudit>,
    /// Source archives: id -> SHA256.
    pub archives: BTreeMap<String, String>,
    /// Blobs whose digest was listed with different sizes: digest -> sizes seen.
    pub blob_size_conflicts: BTreeMap<String, Vec<u64>>,
    /// All workloads match their expectations.
    pub pass: bool,
}

/// Digest -> every size it was listed with (only digests with more than one size).
pub type BlobSizeConflicts = BTreeMap<String, Vec<u64>>;

fn meta(frame: &str, sources: &str) -> FrameMeta {
    FrameMeta::new(frame, FRAME_SCHEMA_VERSION).with(KEY_SOURCE_ARCHIVES, sources)
}

/// The audit frames other than `requests`, written batch by batch in row order (one
/// Parquet row group per batch), so the audit holds one batch of attempts, not the corpus.
#[derive(Debug)]
pub struct AuditFrameWriters {
    attempts: frames::FrameStreamWriter,
    clipping: frames::FrameStreamWriter,
    exclusions: frames::FrameStreamWriter,
    attempt_blobs: frames::FrameStreamWriter,
    /// Every blob digest seen, with each size it was listed with.
    sizes: BTreeMap<String, Vec<u64>>,
    run: RunDir,
    sources: String,
}

impl AuditFrameWriters {
    /// Writers for the run's frames; nothing is created until the first batch.
    pub fn new(run: &RunDir, sources: &str) -> Self {
        let writer = |spec: &'static frames::schema::FrameSpec| {
            frames::FrameStreamWriter::new(
                &run.file(&spec.parquet_file()),
                spec,
                meta(spec.name, sources),
            )
        };
        AuditFrameWriters {
            attempts: writer(&crate::schema::ATTEMPTS),
            clipping: writer(&crate::schema::CLIPPING),
            exclusions: writer(&crate::schema::EXCLUSIONS),
            attempt_blobs: writer(&crate::schema::ATTEMPT_BLOBS),
            sizes: BTreeMap::new(),
            run: run.clone(),
            sources: sources.to_string(),
        }
    }

    /// Append the next attempts in row order, after the cohort rules.
    pub fn write(&mut self, attempts: &[AuditedAttempt]) -> Result<(), AuditError> {
        self.attempts.write(&attempts_frame(attempts))?;
        self.clipping.write(&clipping_frame(attempts))?;
        self.exclusions.write(&exclusions_frame(attempts))?;
        self.attempt_blobs.write(&attempt_blobs_frame(attempts))?;
        for b in attempts.iter().flat_map(|a| &a.blobs) {
            let v = self.sizes.entry(b.digest.clone()).or_default();
            if !v.contains(&b.compressed_bytes) {
                v.push(b.compressed_bytes);
            }
        }
        Ok(())
    }

    /// Finish every frame and write `blobs`; returns the digests listed with more than one
    /// size.
    pub fn finish(self) -> Result<BlobSizeConflicts, AuditError> {
        let AuditFrameWriters {
            attempts,
            clipping,
            exclusions,
            attempt_blobs,
            sizes,
            run,
            sources,
        } = self;
        attempts.finish(&mut attempts_frame(&[]))?;
        clipping.finish(&mut clipping_frame(&[]))?;
        exclusions.finish(&mut exclusions_frame(&[]))?;
        let blobs = run.file("blobs.parquet");
        let mut df = FrameBuilder::new(sizes.len())
            .str("digest", sizes.keys().cloned().collect())
            .u64("compressed_bytes", sizes.values().map(|v| v[0]).collect())
            .f64(
                "compressed_gib",
                sizes.values().map(|v| v[0] as f64 / model::GIB).collect(),
            )
            .finish();
        frames::write_declared(
            &blobs,
            &mut df,
            &crate::schema::BLOBS,
            &meta("blobs", &sources),
        )?;
        attempt_blobs.finish(&mut attempt_blobs_frame(&[]))?;
        Ok(sizes.into_iter().filter(|(_, v)| v.len() > 1).collect())
    }
}

/// The attempt_blobs frame of these attempts: one row per (attempt, listed blob).
pub fn attempt_blobs_frame(attempts: &[AuditedAttempt]) -> polars::prelude::DataFrame {
    let ab: Vec<(&AuditedAttempt, &model::BlobRef)> = attempts
        .iter()
        .flat_map(|a| a.blobs.iter().map(move |b| (a, b)))
        .collect();
    FrameBuilder::new(ab.len())
        .str(
            "workload",
            ab.iter().map(|r| r.0.workload.as_str().into()).collect(),
        )
        .str(
            "attempt_id",
            ab.iter().map(|r| r.0.attempt_id.clone()).collect(),
        )
        .str("digest", ab.iter().map(|r| r.1.digest.clone()).collect())
        .str(
            "archive_sha256",
            ab.iter().map(|r| r.0.archive_sha256.clone()).collect(),
        )
        .str(
            "member_prefix",
            ab.iter().map(|r| r.0.member_prefix.clone()).collect(),
        )
        .finish()
}

/// The attempts frame of these attempts (one row each, in the given order).
pub fn attempts_frame(attempts: &[AuditedAttempt]) -> polars::prelude::DataFrame {
    let n = attempts.len();
    let s = |f: &dyn Fn(&AuditedAttempt) -> String| attempts.iter().map(f).collect::<Vec<_>>();
    let os =
        |f: &dyn Fn(&AuditedAttempt) -> Option<String>| attempts.iter().map(f).collect::<Vec<_>>();
    let of =
        |f: &dyn Fn(&AuditedAttempt) -> Option<f64>| attempts.iter().map(f).collect::<Vec<_>>();
    let result_str = |f: fn(&model::ResultFields) -> Option<String>| {
        attempts
            .iter()
            .map(|a| a.result.as_ref().and_then(f))
            .collect::<Vec<_>>()
    };
    FrameBuilder::new(n)
        .str("workload", s(&|a| a.workload.as_str().into()))
        .opt_str("task_id", os(&|a| a.task_id.clone()))
        .str("attempt_id", s(&|a| a.attempt_id.clone()))
        .opt_str("run", os(&|a| a.run.map(|r| r.as_str().into())))
        .str("archive_id", s(&|a| a.archive_id.clone()))
        .str("archive_sha256", s(&|a| a.archive_sha256.clone()))
        .str("member_prefix", s(&|a| a.member_prefix.clone()))
        .opt_f64("gen_start", of(&|a| a.gen_start.map(|t| t.seconds)))
        .opt_f64("gen_end", of(&|a| a.gen_end.map(|t| t.seconds)))
        .datetime_ns(
            "gen_start_utc",
            attempts
                .iter()
                .map(|a| a.gen_start.map(|t| t.nanos))
                .collect(),
        )
        .datetime_ns(
            "gen_end_utc",
            attempts
                .iter()
                .map(|a| a.gen_end.map(|t| t.nanos))
                .collect(),
        )
        .opt_f64("duration_s", of(&|a| a.duration()))
        .u32(
            "n_requests",
            attempts.iter().map(|a| a.n_requests).collect(),
        )
        .u32(
            "n_intervals",
            attempts.iter().map(|a| a.n_intervals).collect(),
        )
        .f64("request_s", attempts.iter().map(|a| a.request_s).collect())
        .opt_f64("quota_cores", of(&|a| a.quota.map(|q| q.cores)))
        .opt_f64("quota_gib", of(&|a| a.quota.map(|q| q.mem_gib)))
        .u32(
            "n_blobs",
            attempts.iter().map(|a| a.blobs.len() as u32).collect(),
        )
        .opt_str("completed_utc", result_str(|r| r.completed_utc.clone()))
        .opt_str("termination", result_str(|r| r.termination.clone()))
        .opt_str("infra_error", result_str(|r| r.infra_error.clone()))
        .opt_str(
            "exception_type",
            result_str(|r| r.exception.as_ref().and_then(|e| e.kind.clone())),
        )
        .opt_str(
            "exception_message",
            result_str(|r| r.exception.as_ref().and_then(|e| e.message.clone())),
        )
        .opt_f64(
            "reward",
            attempts
                .iter()
                .map(|a| a.result.as_ref().and_then(|r| r.reward))
                .collect(),
        )
        .bool(
            "included",
            attempts.iter().map(|a| a.exclusion.is_none()).collect(),
        )
        .opt_str(
            "exclusion_reason",
            os(&|a| a.exclusion.as_ref().map(|e| e.0.as_str().into())),
        )
        .bool(
            "flagged",
            attempts.iter().map(|a| a.flag.is_some()).collect(),
        )
        .opt_str("flag_reason", os(&|a| a.flag.clone()))
        .finish()
}

/// The clipping frame of these attempts: every change, absolute times, attempt by attempt.
pub fn clipping_frame(attempts: &[AuditedAttempt]) -> polars::prelude::DataFrame {
    // clipping: every change, absolute times.
    let mut cl = Vec::new();
    for a in attempts {
        for c in &a.requests.records {
            cl.push((a, c));
        }
    }
    FrameBuilder::new(cl.len())
        .str(
            "workload",
            cl.iter().map(|r| r.0.workload.as_str().into()).collect(),
        )
        .str(
            "attempt_id",
            cl.iter().map(|r| r.0.attempt_id.clone()).collect(),
        )
        .list_u64("seqs", cl.iter().map(|r| r.1.seqs.clone()).collect())
        .opt_f64(
            "raw_start",
            cl.iter().map(|r| r.1.raw.map(|x| x.0)).collect(),
        )
        .opt_f64(
            "raw_end",
            cl.iter().map(|r| r.1.raw.and_then(|x| x.1)).collect(),
        )
        .opt_f64(
            "kept_start",
            cl.iter().map(|r| r.1.kept.map(|x| x.0)).collect(),
        )
        .opt_f64(
            "kept_end",
            cl.iter().map(|r| r.1.kept.map(|x| x.1)).collect(),
        )
        .f64(
            "seconds_removed",
            cl.iter().map(|r| r.1.seconds_removed).collect(),
        )
        .str(
            "reason",
            cl.iter().map(|r| r.1.reason.as_str().into()).collect(),
        )
        .bool(
            "included",
            cl.iter().map(|r| r.0.exclusion.is_none()).collect(),
        )
        .str(
            "archive_sha256",
            cl.iter().map(|r| r.0.archive_sha256.clone()).collect(),
        )
        .str(
            "member_prefix",
            cl.iter().map(|r| r.0.member_prefix.clone()).collect(),
        )
        .finish()
}

/// The exclusions frame of these attempts (the excluded ones, in the given order).
pub fn exclusions_frame(attempts: &[AuditedAttempt]) -> polars::prelude::DataFrame {
    // exclusions.
    let ex: Vec<(&AuditedAttempt, &(model::ExclusionReason, String, String))> = attempts
        .iter()
        .filter_map(|a| a.exclusion.as_ref().map(|e| (a, e)))
        .collect();
    FrameBuilder::new(ex.len())
        .str(
            "workload",
            ex.iter().map(|r| r.0.workload.as_str().into()).collect(),
        )
        .str(
            "attempt_id",
            ex.iter().map(|r| r.0.attempt_id.clone()).collect(),
        )
        .opt_str("task_id", ex.iter().map(|r| r.0.task_id.clone()).collect())
        .opt_str(
            "run",
            ex.iter()
                .map(|r| r.0.run.map(|x| x.as_str().into()))
                .collect(),
        )
        .str("reason", ex.iter().map(|r| r.1.0.as_str().into()).collect())
        .str("detail", ex.iter().map(|r| r.1.1.clone()).collect())
        .str(
            "archive_id",
            ex.iter().map(|r| r.0.archive_id.clone()).collect(),
        )
        .str(
            "archive_sha256",
            ex.iter().map(|r| r.0.archive_sha256.clone()).collect(),
        )
        .str("member_path", ex.iter().map(|r| r.1.2.clone()).collect())
        .finish()
}

/// The requests frame rows of some attempts (one batch of the streamed frame): merged,
/// clipped intervals as offsets from gen_start.
pub fn requests_batch(attempts: &[AuditedAttempt]) -> polars::prelude::DataFrame {
    let mut rq = Vec::new();
    for a in attempts {
        let Some(gs) = a.gen_start else { continue };
        for iv in &a.requests.intervals {
            rq.push((
                a,
                iv.seqs.clone(),
                iv.start - gs.seconds,
                iv.end - gs.seconds,
            ));
        }
    }
    FrameBuilder::new(rq.len())
        .str(
            "workload",
            rq.iter().map(|r| r.0.workload.as_str().into()).collect(),
        )
        .str(
            "attempt_id",
            rq.iter().map(|r| r.0.attempt_id.clone()).collect(),
        )
        .list_u64("seqs", rq.iter().map(|r| r.1.clone()).collect())
        .f64("start_offset_s", rq.iter().map(|r| r.2).collect())
        .f64("end_offset_s", rq.iter().map(|r| r.3).collect())
        .str(
            "archive_sha256",
            rq.iter().map(|r| r.0.archive_sha256.clone()).collect(),
        )
        .str(
            "member_prefix",
            rq.iter().map(|r| r.0.member_prefix.clone()).collect(),
        )
        .finish()
}

/// Start the streamed requests frame.
pub fn requests_writer(run: &RunDir, sources: &str) -> frames::FrameStreamWriter {
    frames::FrameStreamWriter::new(
        &run.file("requests.parquet"),
        &crate::schema::REQUESTS,
        meta("requests", sources),
    )
}

/// The audit's JSON document, below the run directory.
pub const AUDIT_JSON_FILE: &str = "audit.json";

/// Every file the audit writes whose bytes are a result: the frames, then `audit.json`.
pub fn audit_outputs() -> Vec<String> {
    crate::schema::AUDIT_FRAME_SPECS
        .iter()
        .map(|spec| spec.parquet_file())
        .chain(std::iter::once(AUDIT_JSON_FILE.to_string()))
        .collect()
}

/// Write `audit.json` atomically.
pub fn write_audit_json(run: &RunDir, doc: &AuditDocument) -> Result<PathBuf, AuditError> {
    let p = run.file(AUDIT_JSON_FILE);
    let text = serde_json::to_string_pretty(doc).expect("audit document serializes") + "\n";
    frames::atomic_write(&p, text.as_bytes())?;
    Ok(p)
}

/// The format version `audit.json` carries.
pub const AUDIT_JSON_VERSION: u32 = JSON_FORMAT_VERSION;

/// Read `audit.json` through its type: the format version is checked first (a document of
/// another version is refused, naming both), then every field (an unknown or missing field
/// is refused, naming it).
pub fn read_audit_json(path: &std::path::Path) -> Result<AuditDocument, AuditError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    model::run_dir::check_json_version(path, &text, AUDIT_JSON_VERSION)
        .map_err(AuditError::Document)?;
    serde_json::from_str(&text).map_err(|e| {
        AuditError::Document(model::run_dir::DocumentError::Invalid {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `audit.json` is read through its type: what was written reads back equal; a renamed
    /// field and another format version are refused, naming the file and the field or the
    /// versions (an untyped reader would have printed `null`).
    #[test]
    fn audit_json_reads_through_its_type_and_refuses_drift() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        let mut doc = AuditDocument {
            format_version: AUDIT_JSON_VERSION,
            workloads: BTreeMap::new(),
            archives: BTreeMap::from([("arc-1".to_string(), "ab".repeat(32))]),
            blob_size_conflicts: BTreeMap::new(),
            pass: true,
        };
        doc.workloads.insert(
            "tmax".into(),
            crate::cohort::WorkloadAudit {
                audited: 267,
                included: 253,
                excluded: 14,
                pass: true,
                ..Default::default()
            },
        );
        let path = write_audit_json(&run, &doc).unwrap();
        assert_eq!(read_audit_json(&path).unwrap(), doc);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"included\"", "\"included_attempts\"")).unwrap();
        let e = read_audit_json(&path).unwrap_err().to_string();
        assert!(
            e.contains("audit.json") && e.contains("included_attempts"),
            "{e}"
        );
        std::fs::write(
            &path,
            text.replace("\"format_version\": 1", "\"format_version\": 2"),
        )
        .unwrap();
        let e = read_audit_json(&path).unwrap_err().to_string();
        assert!(
            e.contains("format_version 2, this build reads version 1"),
            "{e}"
        );
    }
}
