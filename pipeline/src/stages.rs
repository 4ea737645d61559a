//! The registry of stages and skip-when-unchanged: each stage's declared inputs (config
//! hash, tool version and build, the input files' hashes) form a fingerprint recorded
//! beside its outputs' hashes in `.stages/<name>.json`.

use anyhow::{Context, Result};
use model::LoadedConfig;
use model::run_dir::RunDir;
use model::stage::{Stage, StageInput};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The stages, in the order `pipeline run` runs them: the one list (adding a stage is one
/// line here and an implementation of [`Stage`] in its crate).
pub static STAGES: [&dyn Stage; 4] = [
    &ingest::IngestStage,
    &audit::AuditStage,
    &replay::ReplayStage,
    &report::ReportStage,
];

/// The stage's names, in order.
pub fn stage_names() -> Vec<&'static str> {
    STAGES.iter().map(|s| s.name()).collect()
}

/// What a stage recorded the last time it completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageRecord {
    /// Format version.
    pub format_version: u32,
    /// Stage name.
    pub stage: String,
    /// Hash of the inputs.
    pub fingerprint: String,
    /// Output file (relative to run_dir) -> SHA256.
    pub outputs: BTreeMap<String, String>,
}

/// SHA256 of a file, streaming (the same hashing ingest verifies with).
pub fn sha256_file(path: &Path) -> Result<String> {
    let (sha, _bytes) =
        ingest::sink::hash_file(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(sha)
}

fn record_path(run: &RunDir, stage: &str) -> PathBuf {
    run.root().join(".stages").join(format!("{stage}.json"))
}

/// The outputs of a stage that exist now, with their hashes.
pub fn hash_outputs(run: &RunDir, names: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for n in names {
        let p = run.file(n);
        if p.is_file() {
            out.insert(n.clone(), sha256_file(&p)?);
        }
    }
    Ok(out)
}

/// The identity of the running build: the SHA256 of this executable. The crate version does
/// not change between commits, so without it a rebuilt binary (a changed search, say) would
/// skip its stages and keep another build's outputs.
pub fn build_identity() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| sha256_file(&p).ok())
            .unwrap_or_else(|| "unknown".to_string())
    })
}

/// The inputs fingerprint of a stage, derived from its declared inputs: the stage's name,
/// tool version and build identity, the config's hash, then each input in declaration
/// order: the manifest's every column, a source archive's id, SHA256 and size, a file's
/// SHA256 (from `known`, the hashes the run's earlier stages recorded, else hashed now;
/// `missing` when absent).
pub fn fingerprint(
    cfg: &LoadedConfig,
    stage: &dyn Stage,
    known: &BTreeMap<String, String>,
    run: &RunDir,
) -> String {
    let mut h = Sha256::new();
    h.update(format!(
        "agentrace {} stage {}\n",
        model::TOOL_VERSION,
        stage.name()
    ));
    h.update(format!("build {}\n", build_identity()));
    h.update(format!("pipeline.yaml {}\n", cfg.sha256));
    for input in stage.inputs(cfg) {
        match input {
            StageInput::Manifest => h.update(format!("manifest {}\n", manifest_identity(cfg))),
            StageInput::SourceArchive(id) => {
                let a = cfg.archives.iter().find(|a| a.archive_id == id);
                h.update(format!(
                    "archive {id} {} {}\n",
                    a.map(|a| a.sha256.as_str()).unwrap_or("unknown"),
                    a.map(|a| a.bytes).unwrap_or(0)
                ));
            }
            StageInput::File(path) => {
                let sha = match known.get(&path) {
                    Some(sha) => sha.clone(),
                    None => sha256_file(&run.file(&path)).unwrap_or_else(|_| "missing".into()),
                };
                h.update(format!("input {path} {sha}\n"));
            }
        }
    }
    hex::encode(h.finalize())
}

/// SHA256 of every manifest row as validated (all columns; a file location as written,
/// relative to the manifest, so moving a whole run does not change it), in manifest order.
pub fn manifest_identity(cfg: &LoadedConfig) -> String {
    let mut h = Sha256::new();
    for a in &cfg.archives {
        let row = serde_json::json!([
            a.archive_id,
            a.workload,
            a.sha256,
            a.bytes,
            a.gcs,
            a.hf,
            a.file.as_ref().map(|f| &f.relative),
        ]);
        h.update(row.to_string());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Whether the stage can be skipped: same fingerprint and every recorded output unchanged.
pub fn can_skip(run: &RunDir, stage: &str, fp: &str) -> bool {
    let Some(rec) = read_record(run, stage) else {
        return false;
    };
    if rec.fingerprint != fp || rec.outputs.is_empty() {
        return false;
    }
    rec.outputs
        .iter()
        .all(|(name, sha)| sha256_file(&run.file(name)).ok().as_deref() == Some(sha))
}

/// Read a stage's record, if any. A record of another format version (or unreadable) is
/// no record: the stage runs again and writes one of this build's version.
pub fn read_record(run: &RunDir, stage: &str) -> Option<StageRecord> {
    let path = record_path(run, stage);
    let text = std::fs::read_to_string(&path).ok()?;
    model::run_dir::check_json_version(&path, &text, model::run_dir::JSON_FORMAT_VERSION).ok()?;
    serde_json::from_str(&text).ok()
}

/// Record a completed stage.
pub fn write_record(run: &RunDir, rec: &StageRecord) -> Result<()> {
    let p = record_path(run, &rec.stage);
    let text = serde_json::to_string_pretty(rec)? + "\n";
    frames::atomic_write(&p, text.as_bytes())?;
    Ok(())
}

/// How one stage went.
#[derive(Debug, Clone, Serialize)]
pub struct StageOutcome {
    /// Stage name.
    pub stage: String,
    /// Skipped because nothing changed.
    pub skipped: bool,
    /// Wall seconds.
    pub seconds: f64,
    /// One-line summary.
    pub summary: String,
}

/// Time a closure.
pub fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let t = Instant::now();
    let v = f()?;
    Ok((v, t.elapsed().as_secs_f64()))
}
