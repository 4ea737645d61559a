//! Shared model of the toolkit: the study's domain types, the `pipeline.yaml` contract,
//! the archive manifest and the run directory's layout. No I/O beyond reading config files.

pub mod compression;
pub mod config;
pub mod domain;
pub mod error;
pub mod exit;
pub mod manifest;
pub mod out;
pub mod process;
pub mod run_dir;
pub mod run_lock;
pub mod shard;
pub mod stage;
pub mod study;
pub mod threads;

pub use config::{LoadedConfig, PipelineConfig, load_config};
pub use domain::*;
pub use error::ConfigError;
pub use manifest::ArchiveSpec;
pub use run_lock::{RunLock, RunLockError};
pub use stage::{Stage, StageContext, StageError, StageInput};

/// Version of this toolkit, recorded in every output's provenance.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");
