//! The ledger frame (`ledger.parquet`): one row per (archive, location kind) with what was
//! expected, what arrived and the verdict. Rows are in manifest order, then location kind
//! order (file, gcs, hf); no wall-clock time is in it, so the same inputs give the same bytes.

use frames::schema::{ColumnType::*, FrameSpec, col, col_in};
use polars::prelude::*;
use std::path::Path;

/// Frame name in the Parquet metadata.
pub const LEDGER_FRAME: &str = "ledger";
/// File name below the run directory.
pub const LEDGER_FILE: &str = "ledger.parquet";

/// The verdict of one (archive, location) row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Fetched this run; SHA256 and byte count match the manifest.
    Verified,
    /// Not fetched: the store already held the archive, re-hashed and matching.
    InStore,
    /// Fetched completely, but SHA256 or byte count differ; kept under `quarantine/`.
    Mismatch,
    /// The fetch failed (not found, refused, wrong pin, transfer failed, oversize).
    Error,
    /// `--offline` and the store lacks the archive.
    SkippedOffline,
    /// The archive has none of the configured location kinds.
    NoLocation,
}

impl Verdict {
    /// The ledger spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::InStore => "in_store",
            Verdict::Mismatch => "mismatch",
            Verdict::Error => "error",
            Verdict::SkippedOffline => "skipped_offline",
            Verdict::NoLocation => "no_location",
        }
    }

    /// Every verdict, for the schema.
    pub const ALL: [Verdict; 6] = [
        Verdict::Verified,
        Verdict::InStore,
        Verdict::Mismatch,
        Verdict::Error,
        Verdict::SkippedOffline,
        Verdict::NoLocation,
    ];

    /// Whether the row is good (verified now or held verified in the store).
    pub fn is_ok(self) -> bool {
        matches!(self, Verdict::Verified | Verdict::InStore)
    }
}

/// One ledger row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    /// Archive id.
    pub archive_id: String,
    /// Workload.
    pub workload: String,
    /// `file`, `gcs`, `hf` (or `none` for a `no_location` row).
    pub location_kind: String,
    /// The location as a URI.
    pub uri: String,
    /// GCS generation pinned.
    pub generation: Option<i64>,
    /// Hub revision pinned.
    pub revision: Option<String>,
    /// Commit the Hub resolved the revision to, when it was asked.
    pub resolved_commit: Option<String>,
    /// Manifest SHA256.
    pub expected_sha256: String,
    /// SHA256 of the bytes received (or of the stored blob).
    pub actual_sha256: Option<String>,
    /// Manifest byte count.
    pub expected_bytes: u64,
    /// Bytes received (or of the stored blob).
    pub actual_bytes: Option<u64>,
    /// Verdict.
    pub verdict: Verdict,
    /// Why it failed.
    pub error: Option<String>,
    /// Whether the verified store answered instead of the location.
    pub served_from_store: bool,
    /// `full_object`, `member_range`, `shard_scan` or `store`; null if nothing was read.
    pub method: Option<String>,
    /// Whether all locations fetched this run gave identical bytes (null: fewer than two).
    pub cross_source_identical: Option<bool>,
    /// Where mismatching bytes were kept, relative to the run directory.
    pub quarantine_path: Option<String>,
}

/// The ledger frame's contract (rendered into `schemas/ledger.schema.json`).
pub const LEDGER: FrameSpec = FrameSpec {
    name: LEDGER_FRAME,
    doc: "One row per (archive, location kind) of an ingest run, in manifest order then location kind order file, gcs, hf.",
    columns: &[
        col("archive_id", Str, false, "Archive id from the manifest."),
        col("workload", Str, false, "tmax or deepswe."),
        col(
            "location_kind",
            Str,
            false,
            "file, gcs, hf (none: the archive has no configured location).",
        ),
        col(
            "uri",
            Str,
            false,
            "The location: file:<path relative to the manifest>, gs://bucket/object#generation, hf://datasets/repo@revision/shard#member.",
        ),
        col(
            "generation",
            I64,
            true,
            "GCS object generation pinned (gcs rows).",
        ),
        col("revision", Str, true, "Hub commit pinned (hf rows)."),
        col(
            "resolved_commit",
            Str,
            true,
            "X-Repo-Commit the Hub answered with (hf rows that reached the Hub).",
        ),
        col(
            "expected_sha256",
            Str,
            false,
            "SHA256 from the manifest, lowercase hex.",
        ),
        col(
            "actual_sha256",
            Str,
            true,
            "SHA256 of the bytes received, or of the stored blob; null if none arrived.",
        ),
        col(
            "expected_bytes",
            U64,
            false,
            "Byte count from the manifest.",
        ),
        col(
            "actual_bytes",
            U64,
            true,
            "Bytes received, or of the stored blob; null if none arrived.",
        ),
        col_in(
            "verdict",
            VERDICTS,
            "verified, in_store, mismatch, error, skipped_offline, no_location.",
        ),
        col("error", Str, true, "Why the row is not verified."),
        col(
            "served_from_store",
            Bool,
            false,
            "True when the verified store answered and nothing was downloaded.",
        ),
        col(
            "method",
            Str,
            true,
            "full_object, member_range, shard_scan or store; null when nothing was read.",
        ),
        col(
            "cross_source_identical",
            Bool,
            true,
            "Whether every location fetched this run gave identical bytes; null with fewer than two.",
        ),
        col(
            "quarantine_path",
            Str,
            true,
            "Where mismatching bytes were kept, relative to the run directory.",
        ),
    ],
};

const VERDICTS: &[&str] = &[
    "verified",
    "in_store",
    "mismatch",
    "error",
    "skipped_offline",
    "no_location",
];

/// The ledger rows as a DataFrame with the columns of [`LEDGER`].
pub fn ledger_frame(rows: &[LedgerRow]) -> PolarsResult<DataFrame> {
    fn s<T>(rows: &[LedgerRow], f: impl Fn(&LedgerRow) -> T) -> Vec<T> {
        rows.iter().map(f).collect()
    }
    let cols: Vec<Column> = vec![
        Series::new("archive_id".into(), s(rows, |r| r.archive_id.clone())).into(),
        Series::new("workload".into(), s(rows, |r| r.workload.clone())).into(),
        Series::new("location_kind".into(), s(rows, |r| r.location_kind.clone())).into(),
        Series::new("uri".into(), s(rows, |r| r.uri.clone())).into(),
        Series::new("generation".into(), s(rows, |r| r.generation)).into(),
        Series::new("revision".into(), s(rows, |r| r.revision.clone())).into(),
        Series::new(
            "resolved_commit".into(),
            s(rows, |r| r.resolved_commit.clone()),
        )
        .into(),
        Series::new(
            "expected_sha256".into(),
            s(rows, |r| r.expected_sha256.clone()),
        )
        .into(),
        Series::new("actual_sha256".into(), s(rows, |r| r.actual_sha256.clone())).into(),
        Series::new("expected_bytes".into(), s(rows, |r| r.expected_bytes)).into(),
        Series::new("actual_bytes".into(), s(rows, |r| r.actual_bytes)).into(),
        Series::new(
            "verdict".into(),
            s(rows, |r| r.verdict.as_str().to_string()),
        )
        .into(),
        Series::new("error".into(), s(rows, |r| r.error.clone())).into(),
        Series::new("served_from_store".into(), s(rows, |r| r.served_from_store)).into(),
        Series::new("method".into(), s(rows, |r| r.method.clone())).into(),
        Series::new(
            "cross_source_identical".into(),
            s(rows, |r| r.cross_source_identical),
        )
        .into(),
        Series::new(
            "quarantine_path".into(),
            s(rows, |r| r.quarantine_path.clone()),
        )
        .into(),
    ];
    DataFrame::new(rows.len(), cols)
}

/// Write `ledger.parquet` (frame `ledger`, schema version [`model::run_dir::FRAME_SCHEMA_VERSION`]).
pub fn write_ledger(path: &Path, rows: &[LedgerRow]) -> Result<(), frames::FrameError> {
    let mut df = ledger_frame(rows).map_err(|source| frames::FrameError::Polars {
        path: path.to_path_buf(),
        source,
    })?;
    frames::write_declared(
        path,
        &mut df,
        &LEDGER,
        &frames::FrameMeta::new(LEDGER_FRAME, model::run_dir::FRAME_SCHEMA_VERSION),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: Verdict) -> LedgerRow {
        LedgerRow {
            archive_id: "a-1".into(),
            workload: "tmax".into(),
            location_kind: "gcs".into(),
            uri: "gs://b/o#7".into(),
            generation: Some(7),
            revision: None,
            resolved_commit: None,
            expected_sha256: "0".repeat(64),
            actual_sha256: None,
            expected_bytes: 10,
            actual_bytes: None,
            verdict: v,
            error: Some("boom".into()),
            served_from_store: false,
            method: None,
            cross_source_identical: None,
            quarantine_path: None,
        }
    }

    #[test]
    fn frame_columns_and_types_follow_the_contract() {
        for v in Verdict::ALL {
            LEDGER.check(&ledger_frame(&[row(v)]).unwrap()).unwrap();
        }
        let empty = ledger_frame(&[]).unwrap();
        assert_eq!(empty.height(), 0);
        LEDGER.check(&empty).unwrap();
        let mut bad = ledger_frame(&[row(Verdict::Error)]).unwrap();
        bad.rename("verdict", "outcome".into()).unwrap();
        assert!(LEDGER.check(&bad).is_err());
    }
}
