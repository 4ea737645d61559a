//! The audit stage: stream every verified archive, rebuild each attempt's generation
//! lifetime and request intervals with a record of every clip and merge, run the cohort
//! audit, and write the frames (docs/FORMAT.md).

pub mod archive;
pub mod attempt;
pub mod cohort;
pub mod error;
#[cfg(feature = "frames")]
pub mod extract;
pub mod intervals;
#[cfg(feature = "frames")]
pub mod output;
#[cfg(feature = "frames")]
pub mod schema;
#[cfg(feature = "frames")]
pub mod show;
#[cfg(feature = "frames")]
pub mod spill;

pub use error::AuditError;
#[cfg(feature = "frames")]
mod stage;
#[cfg(feature = "frames")]
pub use stage::{AuditReport, AuditStage, merge_shards, run, run_shard};

use archive::{ArchiveLimits, ScanStats, scan_archive};
use attempt::{AttemptCollector, AuditedAttempt, audit_attempt};
use model::LoadedConfig;
use model::run_dir::RunDir;

/// Knobs of one audit run.
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// Worker threads for archives (None: rayon's default). Results do not depend on it.
    pub threads: Option<usize>,
}

/// What one archive gave.
#[derive(Debug, Clone)]
pub struct ArchiveAudit {
    /// Archive id.
    pub archive_id: String,
    /// Bytes and members read.
    pub stats: ScanStats,
    /// Attempts found.
    pub attempts: usize,
}

/// Audit one stored archive into attempts.
pub fn audit_archive(
    cfg: &LoadedConfig,
    spec: &model::ArchiveSpec,
) -> Result<(Vec<AuditedAttempt>, ScanStats), AuditError> {
    let run = RunDir::new(&cfg.run_dir);
    let path = run.stored_archive(&spec.sha256);
    if !path.is_file() {
        return Err(AuditError::NotInStore {
            archive_id: spec.archive_id.clone(),
            path,
        });
    }
    let layout = cfg
        .layout(spec.workload)
        .expect("config validation ties archives to configured workloads");
    let limits = ArchiveLimits::of(cfg);
    let mut collector = AttemptCollector::new(&layout);
    let stats = scan_archive(
        &path,
        &spec.archive_id,
        &spec.sha256,
        spec.bytes,
        limits,
        |m, data| {
            collector
                .visit(m, data)
                .map_err(|r| r.into_error(&spec.archive_id))
        },
    )?;
    let attempts = collector
        .finish()
        .into_iter()
        .map(|ev| audit_attempt(spec.workload, &layout, &spec.archive_id, &spec.sha256, ev))
        .collect();
    Ok((attempts, stats))
}
