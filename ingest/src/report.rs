//! What an ingest run tells its caller: every ledger row, every failure (one line each, with
//! expected vs actual and a hint), and whether anything had to be downloaded.

use crate::ledger::{LedgerRow, Verdict};
use std::path::PathBuf;

/// One failed (archive, location), or a disagreement between two locations of an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveFailure {
    /// Archive id.
    pub archive_id: String,
    /// The location URI (for a disagreement: both, joined with ` vs `).
    pub location: String,
    /// What was expected and what was found.
    pub problem: String,
    /// What to check next.
    pub hint: String,
}

impl std::fmt::Display for ArchiveFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {}: {} (hint: {})",
            self.archive_id, self.location, self.problem, self.hint
        )
    }
}

/// The outcome of an ingest run.
#[derive(Debug, Clone)]
pub struct IngestReport {
    /// Ledger rows, as written to `ledger.parquet`.
    pub ledger: Vec<LedgerRow>,
    /// Every failure; empty on success.
    pub failures: Vec<ArchiveFailure>,
    /// Archives in the manifest.
    pub archives: usize,
    /// Archives whose every configured location is verified (now or in the store).
    pub verified_archives: usize,
    /// Archives answered by the store without any download.
    pub served_from_store: usize,
    /// Location fetches attempted.
    pub fetches: usize,
    /// Bytes received from locations.
    pub downloaded_bytes: u64,
    /// Whether the run was offline.
    pub offline: bool,
    /// `ledger.parquet`.
    pub ledger_path: PathBuf,
    /// `ingest.run.json` (wall-clock facts of the run).
    pub run_json_path: PathBuf,
}

impl IngestReport {
    /// True when no location was contacted: the store held every archive.
    pub fn nothing_downloaded(&self) -> bool {
        self.fetches == 0
    }

    /// Rows of one verdict.
    pub fn rows_with(&self, verdict: Verdict) -> impl Iterator<Item = &LedgerRow> {
        self.ledger.iter().filter(move |r| r.verdict == verdict)
    }

    /// One line for the user.
    pub fn summary_line(&self) -> String {
        let mib = self.downloaded_bytes as f64 / (1u64 << 20) as f64;
        let unchecked = self.rows_with(Verdict::Unchecked).count();
        let head = match unchecked {
            0 => format!(
                "{} of {} archives verified",
                self.verified_archives, self.archives
            ),
            n => format!(
                "{} of {} archives verified ({n} location{} never checked, accepted offline)",
                self.verified_archives,
                self.archives,
                if n == 1 { "" } else { "s" }
            ),
        };
        if self.nothing_downloaded() {
            format!("{head}; store complete, nothing downloaded")
        } else {
            format!(
                "{head}; {} from the store, {} location fetches, {mib:.1} MiB downloaded",
                self.served_from_store, self.fetches
            )
        }
    }
}
