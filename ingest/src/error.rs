//! Errors of the ingest stage: one fetch from one location ([`FetchError`]) and the stage as
//! a whole ([`IngestError`]). Every message names the location URI or the path involved.

use crate::report::IngestReport;
use std::path::PathBuf;

/// Why fetching one archive from one location failed (before its bytes could be verified).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The endpoint did not answer within the read timeout; not retried.
    #[error(
        "{uri}: no answer from {endpoint} within the read timeout after {attempts} attempt(s); a timed-out location is not retried"
    )]
    TimedOut {
        /// The location.
        uri: String,
        /// The endpoint (`scheme://host:port`).
        endpoint: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The endpoint could not be connected to on any attempt (the Hub's client), or timed
    /// out or refused the connection after the client's own retries (GCS, whose client
    /// retries connection faults within one read timeout).
    #[error("{uri}: {endpoint} cannot be reached{}: {detail}", attempts.map(|n| format!(" after {n} attempt(s)")).unwrap_or_default())]
    Unreachable {
        /// The location.
        uri: String,
        /// The endpoint.
        endpoint: String,
        /// Attempts made, when this client counted them (GCS's client retries on its own).
        attempts: Option<u32>,
        /// The client's error.
        detail: String,
    },
    /// The object, generation, revision, shard or member does not exist.
    #[error("{uri}: not found: {detail}")]
    NotFound {
        /// The location.
        uri: String,
        /// What was missing.
        detail: String,
    },
    /// The server refused the credentials (or their absence).
    #[error("{uri}: access denied (HTTP {status}): {detail}")]
    Denied {
        /// The location.
        uri: String,
        /// HTTP status.
        status: u16,
        /// What to do.
        detail: String,
    },
    /// The Hub refused the request (`X-Error-Code`, `X-Error-Message`, the status), read as
    /// its own client reads it.
    #[error("{uri}: {refusal}")]
    Hub {
        /// The location.
        uri: String,
        /// What the refusal means, with the HTTP status.
        refusal: Box<crate::source::hf::HubRefusal>,
    },
    /// The server kept answering 429 past the rate-limit patience.
    #[error(
        "{uri}: rate limited: {detail}; the next wait of {wait_s} s would pass the patience of {patience_s} s (ingest.rate_limit_patience_s) after {waited_s} s of waiting"
    )]
    RateLimited {
        /// The location.
        uri: String,
        /// Seconds waited so far for this request.
        waited_s: u64,
        /// Seconds the server asked to wait next.
        wait_s: u64,
        /// The patience, in seconds.
        patience_s: u64,
        /// What the server said.
        detail: String,
    },
    /// The Hub resolved the pinned revision to another commit.
    #[error("{uri}: the Hub served commit {served} for the pinned revision {pinned}")]
    CommitMismatch {
        /// The location.
        uri: String,
        /// The manifest's revision.
        pinned: String,
        /// `X-Repo-Commit` of the answer.
        served: String,
    },
    /// Re-resolving an expired content URL, the Hub announced another commit, etag or size
    /// than its first answer for the same pinned shard.
    #[error(
        "{uri}: the Hub's answer changed when the expired content URL was re-resolved ({changes}); the bytes under a pinned commit must not change"
    )]
    ResolveChanged {
        /// The location.
        uri: String,
        /// What changed, e.g. `X-Linked-Size 10240 -> 10247`.
        changes: String,
    },
    /// GCS served another generation than the pinned one.
    #[error(
        "{uri}: the server answered with generation {served} for the pinned generation {pinned}"
    )]
    GenerationMismatch {
        /// The location.
        uri: String,
        /// The manifest's generation.
        pinned: i64,
        /// `x-goog-generation` of the answer.
        served: String,
    },
    /// The location holds more bytes than the manifest expects; nothing was kept.
    #[error("{uri}: serves {} bytes, more than the {expected} the manifest expects", advertised.map(|a| a.to_string()).unwrap_or_else(|| "more".into()))]
    Oversize {
        /// The location.
        uri: String,
        /// Size the server announced, if it did.
        advertised: Option<u64>,
        /// Size in the manifest.
        expected: u64,
    },
    /// The server broke the protocol (missing header, bad tar, size disagreement, ...).
    #[error("{uri}: {detail}")]
    Protocol {
        /// The location.
        uri: String,
        /// What was wrong.
        detail: String,
    },
    /// An HTTP error status that is not transient, or a transient one after all retries.
    #[error("{uri}: HTTP {status} after {attempts} attempt(s): {detail}")]
    Http {
        /// The location.
        uri: String,
        /// HTTP status.
        status: u16,
        /// Requests made.
        attempts: u32,
        /// Server text, shortened.
        detail: String,
    },
    /// The connection failed or broke, and retries (with resume) were exhausted.
    #[error("{uri}: transfer failed after {attempts} attempt(s) at byte {reached}: {detail}")]
    Transport {
        /// The location.
        uri: String,
        /// Requests made.
        attempts: u32,
        /// Bytes received in total before giving up.
        reached: u64,
        /// Last error.
        detail: String,
    },
    /// GCS refused the request (401, 403, a missing bucket, requester pays), or no token
    /// could be had from the credentials.
    #[error("{uri}: {refusal}")]
    GcsRefused {
        /// The location.
        uri: String,
        /// What was refused, with the credentials and user project used.
        refusal: Box<crate::source::gcs_auth::GcsRefusal>,
    },
    /// The GCS client failed.
    #[error("{uri}: {detail}")]
    Gcs {
        /// The location.
        uri: String,
        /// The object_store error text.
        detail: String,
    },
    /// A local file could not be read.
    #[error("{uri}: cannot read {}: {source}", path.display())]
    Read {
        /// The location.
        uri: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A local file location names something other than a regular file (a FIFO, a
    /// device, a directory): it is never opened for reading.
    #[error("{uri}: {} is {what}, not a regular file", path.display())]
    NotRegularFile {
        /// The location.
        uri: String,
        /// The path as resolved against the manifest's directory.
        path: PathBuf,
        /// What it is instead.
        what: String,
    },
    /// Not tried: another archive's request to the same endpoint timed out or could not
    /// connect in this run, so this one would only wait as long again.
    #[error("{uri}: {}: {cause}", if *waiting { "stopped waiting" } else { "not tried" })]
    EndpointDown {
        /// The location.
        uri: String,
        /// The request was under way (and was given up), rather than not started.
        waiting: bool,
        /// The first failure of the endpoint (`archive X at URI: no answer from ...`).
        cause: String,
    },
    /// Writing the temporary file failed.
    #[error("{0}")]
    Sink(#[from] crate::sink::SinkError),
}

impl FetchError {
    /// Whether the failure says the endpoint itself stopped answering (a read timeout, a
    /// connection refused or timed out), so that every other request to it would fail the
    /// same way: the circuit breaker of the ingest run opens on it.
    pub fn endpoint_down(&self) -> bool {
        matches!(
            self,
            FetchError::TimedOut { .. } | FetchError::Unreachable { .. }
        )
    }

    /// The commit the Hub served, when the error carries it.
    pub fn resolved_commit(&self) -> Option<&str> {
        match self {
            FetchError::CommitMismatch { served, .. } => Some(served),
            _ => None,
        }
    }

    /// What to try next, for the failure summary.
    pub fn hint(&self) -> std::borrow::Cow<'static, str> {
        match self {
            FetchError::Hub { refusal, .. } => refusal.hint().into(),
            FetchError::GcsRefused { refusal, .. } => refusal.hint().into(),
            FetchError::RateLimited { .. } => {
                "the Hub limits requests per 5-minute window: raise ingest.rate_limit_patience_s, lower ingest.parallel or the number of shards running at once, or rerun later (verified archives are kept)".into()
            }
            other => other.static_hint().into(),
        }
    }

    fn static_hint(&self) -> &'static str {
        match self {
            FetchError::Hub { .. }
            | FetchError::RateLimited { .. }
            | FetchError::GcsRefused { .. } => "",
            FetchError::NotFound { .. } => {
                "check the manifest's generation / revision / path: pins are exact and never fall back to the latest version"
            }
            FetchError::Denied { .. } => {
                "set credentials (GOOGLE_APPLICATION_CREDENTIALS, or HF_TOKEN / `hf auth login`) for this location"
            }
            FetchError::CommitMismatch { .. } => {
                "the endpoint does not serve the pinned commit; check hf_revision and HF_ENDPOINT"
            }
            FetchError::ResolveChanged { .. } => {
                "the Hub announced other bytes for the pinned commit during the fetch; rerun, and check HF_ENDPOINT if it persists"
            }
            FetchError::GenerationMismatch { .. } => {
                "the endpoint ignores generation pins; use a server that honours `generation`"
            }
            FetchError::Oversize { .. } => {
                "the location holds other bytes than the manifest describes; check the pin and the manifest's bytes"
            }
            FetchError::Protocol { .. } => "the server does not speak the expected protocol",
            FetchError::TimedOut { .. } => {
                "the endpoint accepted the connection but did not answer; check the endpoint, or raise ingest.read_timeout_s for a slow one"
            }
            FetchError::Unreachable { .. } => {
                "the endpoint did not answer or refused the connection; check the endpoint and connectivity, or raise ingest.read_timeout_s for a slow one"
            }
            FetchError::Http { .. } | FetchError::Transport { .. } | FetchError::Gcs { .. } => {
                "transient faults were retried; check connectivity and rerun (verified archives are kept)"
            }
            FetchError::Read { .. } => "check file_path in the manifest (relative to the manifest)",
            FetchError::NotRegularFile { .. } => {
                "file_path must name a regular file inside the manifest's directory"
            }
            FetchError::Sink(_) => "check free space and permissions of the run directory",
            FetchError::EndpointDown { .. } => {
                "the endpoint stopped answering during this run; check it (or raise ingest.read_timeout_s for a slow one) and rerun: verified archives are kept"
            }
        }
    }
}

/// Failure of the ingest stage.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Another process holds the run directory's lock.
    #[error(transparent)]
    RunLock(#[from] model::RunLockError),
    /// The shards cannot be merged (missing, duplicated, foreign).
    #[error(transparent)]
    Shards(#[from] model::shard::ShardMergeError),
    /// The merged ledger has archives without a good row (the ledger is written).
    #[error("merged ledger: no verified row for {}", .0.join(", "))]
    MergedFailures(Vec<String>),

    /// The configuration cannot be used (bad endpoint, GCS client setup).
    #[error("configuration: {0}")]
    Config(String),
    /// A file or directory of the run could not be created, read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The ledger (or a shard's part) could not be written or read.
    #[error("ledger: {0}")]
    Frame(#[from] frames::FrameError),
    /// The async runtime could not be started.
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// Some archives failed; all others were fetched and verified. The report has every row.
    #[error("{}", failure_summary(report))]
    ArchivesFailed {
        /// The full report (ledger rows, failures).
        report: Box<IngestReport>,
    },
}

impl IngestError {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> IngestError + '_ {
        move |source| IngestError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An unusable configuration or shards that cannot be merged are refusals (exit 2);
/// everything else failed (exit 1).
impl model::exit::Classify for IngestError {
    fn failure_kind(&self) -> model::stage::FailureKind {
        match self {
            IngestError::Config(_) | IngestError::Shards(_) => model::stage::FailureKind::Refused,
            _ => model::stage::FailureKind::Failed,
        }
    }
}

fn failure_summary(report: &IngestReport) -> String {
    let failed: std::collections::BTreeSet<&str> = report
        .failures
        .iter()
        .map(|f| f.archive_id.as_str())
        .collect();
    // An archive whose bytes verified from one location (or the store) is safe in the
    // store even when another of its locations failed: say so, rather than count it as an
    // archive that failed verification outright.
    let stored: std::collections::BTreeSet<&str> = report
        .ledger
        .iter()
        .filter(|r| {
            matches!(
                r.verdict,
                crate::Verdict::Verified | crate::Verdict::InStore
            )
        })
        .map(|r| r.archive_id.as_str())
        .collect();
    let partly = failed.iter().filter(|a| stored.contains(*a)).count();
    let mut notes: Vec<String> = Vec::new();
    if failed.len() < report.archives {
        notes.push("all others were fetched and verified".into());
    }
    match partly {
        0 => {}
        n if n == failed.len() => {
            notes.push("each of them verified from another location and is in the store".into())
        }
        1 => notes.push("1 of them verified from another location and is in the store".into()),
        n => notes.push(format!(
            "{n} of them verified from another location and are in the store"
        )),
    }
    notes.push(format!("ledger: {}", report.ledger_path.display()));
    let mut s = format!(
        "{} of {} archives failed verification ({}):",
        failed.len(),
        report.archives,
        notes.join("; ")
    );
    for f in &report.failures {
        s.push_str("\n  ");
        s.push_str(&f.to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{LedgerRow, Verdict};
    use crate::report::{ArchiveFailure, IngestReport};

    fn row(archive: &str, kind: &str, verdict: Verdict) -> LedgerRow {
        LedgerRow {
            archive_id: archive.into(),
            workload: "tmax".into(),
            location_kind: kind.into(),
            uri: format!("{kind}:{archive}"),
            generation: None,
            revision: None,
            resolved_commit: None,
            expected_sha256: "00".into(),
            actual_sha256: None,
            expected_bytes: 1,
            actual_bytes: None,
            verdict,
            error: None,
            served_from_store: false,
            method: None,
            cross_source_identical: None,
            quarantine_path: None,
        }
    }

    fn summary(ledger: Vec<LedgerRow>, failed: &[&str]) -> String {
        let report = IngestReport {
            ledger,
            failures: failed
                .iter()
                .map(|a| ArchiveFailure {
                    archive_id: (*a).into(),
                    location: format!("gcs:{a}"),
                    problem: "not found".into(),
                    hint: "h".into(),
                })
                .collect(),
            archives: 2,
            verified_archives: 0,
            served_from_store: 0,
            fetches: 0,
            downloaded_bytes: 0,
            offline: false,
            ledger_path: "run/ledger.parquet".into(),
            run_json_path: "run/ingest.run.json".into(),
        };
        IngestError::ArchivesFailed {
            report: Box::new(report),
        }
        .to_string()
    }

    /// Archives whose bytes verified from their file while their GCS location failed are
    /// said to be in the store, not counted as lost; "all others" is said only when there
    /// are others.
    #[test]
    fn the_summary_says_which_failed_archives_are_verified_in_the_store() {
        use Verdict::*;
        let both = summary(
            vec![
                row("a", "file", Verified),
                row("a", "gcs", Error),
                row("b", "file", InStore),
                row("b", "gcs", Error),
            ],
            &["a", "b"],
        );
        assert_eq!(
            both.lines().next().unwrap(),
            "2 of 2 archives failed verification (each of them verified from another location and is in the store; ledger: run/ledger.parquet):"
        );
        let one = summary(
            vec![
                row("a", "file", Verified),
                row("a", "gcs", Error),
                row("b", "gcs", Error),
            ],
            &["a", "b"],
        );
        assert!(
            one.starts_with("2 of 2 archives failed verification (1 of them verified from another location and is in the store; ledger"),
            "{one}"
        );
        let none = summary(vec![row("b", "gcs", Mismatch)], &["b"]);
        assert!(
            none.starts_with(
                "1 of 2 archives failed verification (all others were fetched and verified; ledger"
            ),
            "{none}"
        );
        let all = summary(vec![row("b", "gcs", Mismatch)], &["b", "c"]);
        assert!(
            all.starts_with("2 of 2 archives failed verification (ledger: run/ledger.parquet):"),
            "{all}"
        );
    }
}
