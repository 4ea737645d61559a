//! The ingest stage (docs/INGEST.md): fetch every original archive from each of its locations
//! (local file, GCS pinned generation, Hugging Face raw shard pinned revision), verify SHA256
//! and byte count while streaming, admit verified bytes into the content-addressed store,
//! quarantine the rest, check cross-source identity, and write `ledger.parquet`.
//!
//! Entry point: [`run`]. Writing a manifest from real sources: [`pin`]. The test servers and
//! conformance checks are the `testkit` crate's (a dev-dependency).

pub mod engine;
pub mod error;
pub mod ledger;
pub mod options;
pub mod pin;
pub mod progress;
pub mod report;
pub mod sink;
pub mod source;
pub mod stage;
pub mod store;

pub use engine::{RUN_JSON_FILE, run, run_async};
pub use error::{FetchError, IngestError};
pub use ledger::{LEDGER_FILE, LedgerRow, Verdict};
pub use options::{EnvOverrides, HfToken, IngestOptions};
pub use progress::{NoProgress, ProgressSink};
pub use report::{ArchiveFailure, IngestReport};
pub use stage::IngestStage;
