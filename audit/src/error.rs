//! Errors of the audit stage; each names the archive, member, file or expectation at fault.

use std::path::PathBuf;

/// Why the audit refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Another process holds the run directory's lock.
    #[error(transparent)]
    RunLock(#[from] model::RunLockError),
    /// A filesystem failure.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An archive is not in the verified store.
    #[error("archive `{archive_id}` is not in the verified store ({}); run `ingest` first", path.display())]
    NotInStore {
        /// Archive id.
        archive_id: String,
        /// Where it should be.
        path: PathBuf,
    },
    /// The stored bytes no longer match the verified SHA256.
    #[error("archive `{archive_id}`: stored file {} does not match its verified hash: expected {expected}, read {actual}; rerun `ingest`", path.display())]
    StoreMismatch {
        /// Archive id.
        archive_id: String,
        /// Stored path.
        path: PathBuf,
        /// Expected hash and size.
        expected: String,
        /// Actual hash and size.
        actual: String,
    },
    /// A refused or unreadable archive (docs/FORMAT.md, "Container").
    #[error("archive `{archive_id}`{}: {detail}", member.as_ref().map(|m| format!(", member `{m}`")).unwrap_or_default())]
    Archive {
        /// Archive id.
        archive_id: String,
        /// The member concerned (or the last good one), if any.
        member: Option<String>,
        /// What is wrong.
        detail: String,
    },
    /// Writing a frame failed.
    #[cfg(feature = "frames")]
    #[error(transparent)]
    Frame(#[from] frames::FrameError),
    /// The cohort audit differs from `pipeline.yaml`'s expectations (frames were written).
    #[error("cohort audit does not match pipeline.yaml: {}", differences.join("; "))]
    Expectations {
        /// Each difference.
        differences: Vec<String>,
    },
    /// `audit extract` could not place an attempt's files.
    #[error("{0}")]
    Extract(String),
    /// `audit show` / `audit extract`: the attempt id is unknown or names several attempts
    /// (the message lists the candidates). A refusal: exit 2.
    #[error("{0}")]
    Lookup(String),
    /// `audit show`: the attempt cannot be re-derived (it is no longer in its archive).
    #[error("{0}")]
    Show(String),
    /// The shards cannot be merged (missing, duplicated, foreign).
    #[error(transparent)]
    Shards(#[from] model::shard::ShardMergeError),
    /// A JSON document of the run (`audit.json`) is of another version or malformed.
    #[error(transparent)]
    Document(model::run_dir::DocumentError),
    /// The worker threads could not be started.
    #[error("cannot start {threads} worker threads: {detail}")]
    ThreadPool {
        /// Threads asked for.
        threads: usize,
        /// The OS's answer.
        detail: String,
    },
}

/// An unknown or ambiguous attempt id, or shards that cannot be merged, are bad input
/// (exit 2); anything else failed (exit 1).
impl model::exit::Classify for AuditError {
    fn failure_kind(&self) -> model::stage::FailureKind {
        match self {
            AuditError::Lookup(_) | AuditError::Shards(_) => model::stage::FailureKind::Refused,
            _ => model::stage::FailureKind::Failed,
        }
    }
}
