//! The ingest stage as the pipeline sees it: its declared inputs (the manifest and every
//! archive from its sources) and outputs (the ledger and each archive's stored blob).

use crate::{IngestError, IngestOptions, LEDGER_FILE, ProgressSink, RUN_JSON_FILE};
use model::LoadedConfig;
use model::stage::{Stage, StageContext, StageError, StageInput, StageProgress};
use std::sync::Arc;

/// The ingest stage.
#[derive(Debug, Clone, Copy, Default)]
pub struct IngestStage;

/// The stage's name.
pub const STAGE_NAME: &str = "ingest";

/// Ingest's progress, as lines for the stage's progress sink.
struct StageLines(Arc<dyn StageProgress>);

impl ProgressSink for StageLines {
    fn begin(&self, archives: u64, bytes: u64) {
        self.0.note(
            STAGE_NAME,
            &format!("{archives} archives, up to {bytes} bytes to verify"),
        );
    }
    fn archive_done(&self, archive_id: &str, status: &str) {
        if status != "verified" && status != "in_store" {
            self.0.note(STAGE_NAME, &format!("{archive_id}: {status}"));
        }
    }
    fn note(&self, line: &str) {
        self.0.note(STAGE_NAME, line);
    }
}

impl Stage for IngestStage {
    fn name(&self) -> &'static str {
        STAGE_NAME
    }
    fn about(&self) -> &'static str {
        "fetch every archive (GCS pinned generation, Hugging Face pinned commit, or a file), verify SHA256 and size while streaming, keep verified bytes, write the ledger"
    }
    fn config_keys(&self) -> Vec<&'static str> {
        vec!["sources", "ingest"]
    }
    fn inputs(&self, cfg: &LoadedConfig) -> Vec<StageInput> {
        std::iter::once(StageInput::Manifest)
            .chain(
                cfg.archives
                    .iter()
                    .map(|a| StageInput::SourceArchive(a.archive_id.clone())),
            )
            .collect()
    }
    fn outputs(&self, cfg: &LoadedConfig) -> Vec<String> {
        std::iter::once(LEDGER_FILE.to_string())
            .chain(
                cfg.archives
                    .iter()
                    .map(|a| model::run_dir::stored_archive_relative(&a.sha256)),
            )
            .collect()
    }
    fn run_facts(&self) -> Vec<&'static str> {
        vec![RUN_JSON_FILE]
    }
    /// Ingest with the process's endpoint and credential overrides (`STORAGE_EMULATOR_HOST`,
    /// `HF_ENDPOINT`, `HF_TOKEN`, ...).
    fn run(&self, cfg: &LoadedConfig, ctx: &StageContext) -> Result<String, StageError> {
        let opts = IngestOptions {
            offline: ctx.offline,
            accept_unchecked: ctx.accept_unchecked,
            progress: Arc::new(StageLines(ctx.progress.clone())),
            ..IngestOptions::from_process_env()
        };
        match crate::run(cfg, &opts) {
            Ok(report) => Ok(report.summary_line()),
            Err(e) => Err(stage_error(e)),
        }
    }
    fn merge_shards(
        &self,
        cfg: &LoadedConfig,
        _ctx: &StageContext,
    ) -> Option<Result<String, StageError>> {
        Some(
            crate::engine::merge_shards(cfg)
                .map(|rows| {
                    format!(
                        "merged {} ledger rows of {} archives from the shards",
                        rows.len(),
                        cfg.archives.len()
                    )
                })
                .map_err(stage_error),
        )
    }
}

fn stage_error(e: IngestError) -> StageError {
    StageError::new(STAGE_NAME, model::exit::Classify::failure_kind(&e), e)
}
