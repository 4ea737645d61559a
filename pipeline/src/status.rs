//! `pipeline status`: per stage, whether `pipeline run` would run it and every reason, from
//! the decision `run` itself takes ([`crate::stages::decide`]); nothing is written.

use crate::stages::{RunReason, STAGES, decide};
use anyhow::Result;
use model::LoadedConfig;
use model::run_dir::RunDir;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Format version of `pipeline status --json`.
pub const STATUS_FORMAT_VERSION: u32 = 1;

/// `pipeline status --json` (schemas/status.schema.json).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StatusDocument {
    /// [`STATUS_FORMAT_VERSION`].
    pub format_version: u32,
    /// The config file.
    pub config: String,
    /// The run directory.
    pub run_dir: String,
    /// Whether every stage is up to date (exit 0; otherwise 1).
    pub up_to_date: bool,
    /// Each stage, in run order.
    pub stages: Vec<StageStatus>,
}

/// One stage's status.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StageStatus {
    /// Stage name.
    pub stage: String,
    /// `up_to_date`, `will_run`, or `may_run` (its only reasons are inputs an earlier stage
    /// rewrites: it runs if their bytes come out different).
    pub status: StatusWord,
    /// Every reason it runs (empty when up to date).
    pub reasons: Vec<RunReason>,
    /// Recorded outputs confirmed by their file status alone (not read).
    pub outputs_trusted_by_status: usize,
    /// Recorded outputs read and hashed to confirm them.
    pub outputs_hashed: usize,
}

/// What `pipeline run` would do with a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusWord {
    /// Skipped.
    UpToDate,
    /// Runs.
    WillRun,
    /// Runs if an earlier stage that runs rewrites its inputs with other bytes.
    MayRun,
}

impl StatusWord {
    /// The words of the text output.
    pub fn text(self) -> &'static str {
        match self {
            StatusWord::UpToDate => "up to date",
            StatusWord::WillRun => "will run",
            StatusWord::MayRun => "may run",
        }
    }
}

/// The status of every stage of `cfg`'s run directory.
pub fn status(cfg: &LoadedConfig) -> Result<StatusDocument> {
    let run = RunDir::new(&cfg.run_dir);
    let mut known: BTreeMap<String, String> = BTreeMap::new();
    let mut rewritten: BTreeMap<String, String> = BTreeMap::new();
    let mut stages = Vec::new();
    for stage in STAGES {
        let d = decide(cfg, stage, &known, &rewritten, &run, false)?;
        let status = if d.up_to_date() {
            StatusWord::UpToDate
        } else if d
            .reasons
            .iter()
            .all(|r| matches!(r, RunReason::InputRewritten { .. }))
        {
            StatusWord::MayRun
        } else {
            StatusWord::WillRun
        };
        if status == StatusWord::UpToDate {
            known.extend(d.outputs.sha256.clone());
        } else {
            // Its outputs will be written again: later stages name them as rewritten, and
            // take the recorded hashes rather than read the files.
            if let Some(rec) = &d.recorded {
                known.extend(rec.outputs.clone());
            }
            for file in stage.outputs(cfg) {
                rewritten.insert(file, stage.name().to_string());
            }
        }
        stages.push(StageStatus {
            stage: stage.name().into(),
            status,
            outputs_trusted_by_status: d.trusted_by_status,
            outputs_hashed: d.outputs.sha256.len() - d.trusted_by_status,
            reasons: d.reasons,
        });
    }
    Ok(StatusDocument {
        format_version: STATUS_FORMAT_VERSION,
        config: cfg.path.display().to_string(),
        run_dir: cfg.run_dir.display().to_string(),
        up_to_date: stages.iter().all(|s| s.status == StatusWord::UpToDate),
        stages,
    })
}

/// The text output: one line per stage, then its reasons, one per line.
pub fn status_text(doc: &StatusDocument) -> String {
    let mut out = String::new();
    for s in &doc.stages {
        let _ = writeln!(out, "{:<8} {}", s.stage, s.status.text());
        for line in crate::stages::reason_lines(&s.reasons, crate::stages::REASON_LINES) {
            let _ = writeln!(out, "         - {line}");
        }
    }
    out
}

/// The names of the stages that are not up to date, for the exit message.
pub fn not_up_to_date(doc: &StatusDocument) -> Vec<String> {
    doc.stages
        .iter()
        .filter(|s| s.status != StatusWord::UpToDate)
        .map(|s| format!("{} ({})", s.stage, s.status.text()))
        .collect()
}
