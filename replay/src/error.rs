//! Errors of the replay stage: each names the file, column, workload or attempt involved.

use std::path::PathBuf;

/// Why the replay stage (or `replay validate`) refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Another process holds the run directory's lock.
    #[error(transparent)]
    RunLock(#[from] model::RunLockError),
    /// The pipeline.yaml could not be loaded.
    #[error("cannot load the configuration")]
    Config(#[from] model::ConfigError),
    /// A frame could not be read or written.
    #[error("frame I/O failed")]
    Frame(#[from] frames::FrameError),
    /// A frame lacks a column or has one of the wrong type.
    #[error("{}: column `{column}`: {message}", path.display())]
    Column {
        /// The frame file.
        path: PathBuf,
        /// The column.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// The instance built from the frames is refused (an unusable value, an attempt whose
    /// quota exceeds a cap): the schedule crate's own error, message unchanged.
    #[error(transparent)]
    Instance(#[from] schedule::InstanceError),
    /// A workload in `search.order` has no configuration.
    #[error("search.order lists `{workload}`, which has no entry under `workloads`")]
    UnconfiguredWorkload {
        /// The workload.
        workload: String,
    },
    /// The search's own FIFO replay and the validator's independent one disagree.
    #[error("{workload}: the evaluator's FIFO replay and the validator's disagree: {detail}")]
    FifoMismatch {
        /// The workload.
        workload: String,
        /// First difference.
        detail: String,
    },
    /// One or more schedules failed validation; nothing about them was written as valid.
    #[error("{} schedule(s) failed validation: {}", failures.len(), summarize(failures))]
    Validation {
        /// Each failing schedule with its problems.
        failures: Vec<schedule::reference::ScheduleFailure>,
    },
    /// A schedules file given to `replay validate` is unusable.
    #[error("{}: {message}", path.display())]
    SchedulesFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Building an output frame failed.
    #[error("building frame `{frame}`")]
    Polars {
        /// The frame name.
        frame: String,
        /// The Polars error.
        #[source]
        source: polars::error::PolarsError,
    },
    /// Reading or writing a plain file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON document of the run (`replay.json`) is of another version or malformed.
    #[error(transparent)]
    Document(model::run_dir::DocumentError),
    /// The local thread pool could not be built.
    #[error("cannot build a thread pool of {threads} threads")]
    ThreadPool {
        /// Requested threads (0: rayon's default).
        threads: usize,
        /// The rayon error.
        #[source]
        source: rayon::ThreadPoolBuildError,
    },
}

impl From<search::SearchError> for ReplayError {
    /// The same failure, under the stage's error type.
    fn from(e: search::SearchError) -> Self {
        match e {
            search::SearchError::Instance(e) => e.into(),
            search::SearchError::FifoUnscheduled { workload, detail } => {
                ReplayError::FifoMismatch { workload, detail }
            }
        }
    }
}

fn summarize(failures: &[schedule::reference::ScheduleFailure]) -> String {
    failures
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A configuration that cannot be loaded is a refusal (exit 2); anything else failed (1).
impl model::exit::Classify for ReplayError {
    fn failure_kind(&self) -> model::stage::FailureKind {
        match self {
            ReplayError::Config(_) => model::stage::FailureKind::Refused,
            _ => model::stage::FailureKind::Failed,
        }
    }
}
