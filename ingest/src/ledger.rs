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
    /// `--offline`, and the store lacks the archive or this location never delivered its
    /// bytes (no verified record of its own).
    SkippedOffline,
    /// `--offline --accept-unchecked`: the store holds the verified bytes, but this location
    /// never delivered them; accepted as asked, not checked.
    Unchecked,
    /// The archive has none of the configured location kinds.
    NoLocation,
}

impl Verdict {
    /// The ledger spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::InStore => "in_store",
            Verdict::Mismatch => "mismatch",
            Verdict::Error => "error",
            Verdict::SkippedOffline => "skipped_offline",
            Verdict::Unchecked => "unchecked",
            Verdict::NoLocation => "no_location",
        }
    }

    /// Every verdict, for the schema.
    pub const ALL: [Verdict; 7] = [
        Verdict::Verified,
        Verdict::InStore,
        Verdict::Mismatch,
        Verdict::Error,
        Verdict::SkippedOffline,
        Verdict::Unchecked,
        Verdict::NoLocation,
    ];

    /// The verdict of its ledger spelling.
    pub fn parse(text: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// Whether the row lets its archive be used: verified now, verified by this location in
    /// an earlier run (`in_store`), or held verified in the store and accepted unchecked.
    pub fn is_ok(self) -> bool {
        matches!(
            self,
            Verdict::Verified | Verdict::InStore | Verdict::Unchecked
        )
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
            "verified (fetched now), in_store (this location delivered the stored bytes in an earlier run), mismatch, error, skipped_offline, unchecked (offline, accepted: stored bytes, location never checked), no_location.",
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
            "Whether every location that delivered bytes (this run, or by its record in an earlier run) gave identical bytes; null with fewer than two.",
        ),
        col(
            "quarantine_path",
            Str,
            true,
            "Where mismatching bytes were kept, relative to the run directory.",
        ),
    ],
};

/// The ledger spellings of [`Verdict::ALL`], in order.
const VERDICTS: &[&str] = &{
    let mut names = [""; Verdict::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = Verdict::ALL[i].as_str();
        i += 1;
    }
    names
};

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

/// Read `ledger.parquet` back through [`LEDGER`] (name, schema version, columns and types
/// checked); a missing required value or an unknown verdict is refused naming the row.
pub fn read_ledger(path: &Path) -> Result<Vec<LedgerRow>, frames::FrameError> {
    use frames::{bool_values, i64_values, str_values, u64_values};
    let df = frames::read_declared(path, &LEDGER, model::run_dir::FRAME_SCHEMA_VERSION)?;
    const ARCHIVE_ID: &str = LEDGER.column("archive_id");
    const WORKLOAD: &str = LEDGER.column("workload");
    const LOCATION_KIND: &str = LEDGER.column("location_kind");
    const URI: &str = LEDGER.column("uri");
    const GENERATION: &str = LEDGER.column("generation");
    const REVISION: &str = LEDGER.column("revision");
    const RESOLVED_COMMIT: &str = LEDGER.column("resolved_commit");
    const EXPECTED_SHA256: &str = LEDGER.column("expected_sha256");
    const ACTUAL_SHA256: &str = LEDGER.column("actual_sha256");
    const EXPECTED_BYTES: &str = LEDGER.column("expected_bytes");
    const ACTUAL_BYTES: &str = LEDGER.column("actual_bytes");
    const VERDICT: &str = LEDGER.column("verdict");
    const ERROR: &str = LEDGER.column("error");
    const SERVED_FROM_STORE: &str = LEDGER.column("served_from_store");
    const METHOD: &str = LEDGER.column("method");
    const CROSS_SOURCE_IDENTICAL: &str = LEDGER.column("cross_source_identical");
    const QUARANTINE_PATH: &str = LEDGER.column("quarantine_path");
    let bad = |row: usize, column: &str, what: &str| frames::FrameError::Schema {
        path: path.to_path_buf(),
        message: format!("row {row}, column `{column}`: {what}"),
    };
    let required =
        |v: Vec<Option<String>>, column: &str| -> Result<Vec<String>, frames::FrameError> {
            v.into_iter()
                .enumerate()
                .map(|(i, x)| x.ok_or_else(|| bad(i, column, "missing")))
                .collect()
        };
    let ids = required(str_values(&df, path, ARCHIVE_ID)?, ARCHIVE_ID)?;
    let workloads = required(str_values(&df, path, WORKLOAD)?, WORKLOAD)?;
    let kinds = required(str_values(&df, path, LOCATION_KIND)?, LOCATION_KIND)?;
    let uris = required(str_values(&df, path, URI)?, URI)?;
    let generations = i64_values(&df, path, GENERATION)?;
    let revisions = str_values(&df, path, REVISION)?;
    let commits = str_values(&df, path, RESOLVED_COMMIT)?;
    let expected_shas = required(str_values(&df, path, EXPECTED_SHA256)?, EXPECTED_SHA256)?;
    let actual_shas = str_values(&df, path, ACTUAL_SHA256)?;
    let expected_counts = u64_values(&df, path, EXPECTED_BYTES)?;
    let actual_counts = u64_values(&df, path, ACTUAL_BYTES)?;
    let verdicts = required(str_values(&df, path, VERDICT)?, VERDICT)?;
    let errors = str_values(&df, path, ERROR)?;
    let from_store = bool_values(&df, path, SERVED_FROM_STORE)?;
    let methods = str_values(&df, path, METHOD)?;
    let identical = bool_values(&df, path, CROSS_SOURCE_IDENTICAL)?;
    let quarantined = str_values(&df, path, QUARANTINE_PATH)?;
    let mut rows = Vec::with_capacity(ids.len());
    for i in 0..ids.len() {
        rows.push(LedgerRow {
            archive_id: ids[i].clone(),
            workload: workloads[i].clone(),
            location_kind: kinds[i].clone(),
            uri: uris[i].clone(),
            generation: generations[i],
            revision: revisions[i].clone(),
            resolved_commit: commits[i].clone(),
            expected_sha256: expected_shas[i].clone(),
            actual_sha256: actual_shas[i].clone(),
            expected_bytes: expected_counts[i].ok_or_else(|| bad(i, EXPECTED_BYTES, "missing"))?,
            actual_bytes: actual_counts[i],
            verdict: Verdict::parse(&verdicts[i])
                .ok_or_else(|| bad(i, VERDICT, &format!("unknown verdict `{}`", verdicts[i])))?,
            error: errors[i].clone(),
            served_from_store: from_store[i].ok_or_else(|| bad(i, SERVED_FROM_STORE, "missing"))?,
            method: methods[i].clone(),
            cross_source_identical: identical[i],
            quarantine_path: quarantined[i].clone(),
        });
    }
    Ok(rows)
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

    /// What `write_ledger` wrote, `read_ledger` reads back equal, every verdict and null
    /// included; an unknown verdict is refused naming its row and column.
    #[test]
    fn the_ledger_reads_back_through_its_contract() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.parquet");
        let mut rows: Vec<LedgerRow> = Verdict::ALL.into_iter().map(row).collect();
        rows[1].revision = Some("main".into());
        rows[1].resolved_commit = Some("c".repeat(40));
        rows[1].actual_sha256 = Some("1".repeat(64));
        rows[1].actual_bytes = Some(10);
        rows[1].served_from_store = true;
        rows[1].cross_source_identical = Some(true);
        rows[2].quarantine_path = Some("quarantine/x".into());
        write_ledger(&path, &rows).unwrap();
        assert_eq!(read_ledger(&path).unwrap(), rows);
        let mut df = ledger_frame(&rows[..1]).unwrap();
        df.replace("verdict", Series::new("verdict".into(), ["fetched"]).into())
            .unwrap();
        frames::write_frame(
            &path,
            &mut df,
            &frames::FrameMeta::new(LEDGER_FRAME, model::run_dir::FRAME_SCHEMA_VERSION),
        )
        .unwrap();
        let e = read_ledger(&path).unwrap_err().to_string();
        assert!(
            e.contains("ledger.verdict: value `fetched` is not one of"),
            "{e}"
        );
    }
}
