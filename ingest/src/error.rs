//! Errors of the ingest stage: one fetch from one location ([`FetchError`]) and the stage as
//! a whole ([`IngestError`]). Every message names the location URI or the path involved.

use crate::report::IngestReport;
use std::path::PathBuf;

/// Why fetching one archive from one location failed (before its bytes could be verified).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
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
    /// Writing the temporary file failed.
    #[error("{0}")]
    Sink(#[from] crate::sink::SinkError),
}

impl FetchError {
    /// The commit the Hub served, when the error carries it.
    pub fn resolved_commit(&self) -> Option<&str> {
        match self {
            FetchError::CommitMismatch { served, .. } => Some(served),
            _ => None,
        }
    }

    /// What to try next, for the failure summary.
    pub fn hint(&self) -> &'static str {
        match self {
            FetchError::NotFound { .. } => {
                "check the manifest's generation / revision / path: pins are exact and never fall back to the latest version"
            }
            FetchError::Denied { .. } => {
                "set credentials (GOOGLE_APPLICATION_CREDENTIALS or HF_TOKEN) for this location"
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
            FetchError::Http { .. } | FetchError::Transport { .. } | FetchError::Gcs { .. } => {
                "transient faults were retried; check connectivity and rerun (verified archives are kept)"
            }
            FetchError::Read { .. } => "check file_path in the manifest (relative to the manifest)",
            FetchError::Sink(_) => "check free space and permissions of the run directory",
        }
    }
}

/// Failure of the ingest stage.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
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
    /// The ledger could not be written.
    #[error("writing the ledger: {0}")]
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
    /// Process exit code: 2 for unusable configuration, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            IngestError::Config(_) => 2,
            _ => 1,
        }
    }

    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> IngestError + '_ {
        move |source| IngestError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn failure_summary(report: &IngestReport) -> String {
    let failed: std::collections::BTreeSet<&str> = report
        .failures
        .iter()
        .map(|f| f.archive_id.as_str())
        .collect();
    let mut s = format!(
        "{} of {} archives failed verification (all others were fetched and verified; ledger: {}):",
        failed.len(),
        report.archives,
        report.ledger_path.display()
    );
    for f in &report.failures {
        s.push_str("\n  ");
        s.push_str(&f.to_string());
    }
    s
}
