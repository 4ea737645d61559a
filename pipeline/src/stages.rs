//! Running the stages in order with skip-when-unchanged: each stage's inputs (config hash,
//! tool version, the input files' hashes) form a fingerprint recorded beside its outputs.

use anyhow::{Context, Result};
use model::LoadedConfig;
use model::run_dir::RunDir;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The stages, in order.
pub const STAGES: [&str; 4] = ["ingest", "audit", "replay", "report"];

/// Outputs each stage writes (relative to the run directory): for ingest, the ledger and
/// the verified store's blob of every archive of the config.
pub fn stage_outputs(stage: &str, cfg: &LoadedConfig) -> Vec<String> {
    let mut names: Vec<String> = stage_files(stage).iter().map(|s| s.to_string()).collect();
    if stage == "ingest" {
        names.extend(
            cfg.archives
                .iter()
                .map(|a| format!("store/sha256/{}", a.sha256)),
        );
    }
    names
}

/// The files a stage writes besides the store.
pub fn stage_files(stage: &str) -> Vec<&'static str> {
    match stage {
        "ingest" => vec!["ledger.parquet"],
        "audit" => vec![
            "attempts.parquet",
            "requests.parquet",
            "clipping.parquet",
            "exclusions.parquet",
            "blobs.parquet",
            "attempt_blobs.parquet",
            "audit.json",
        ],
        "replay" => vec![
            "schedules.parquet",
            "joint_schedules.csv",
            "bounds.parquet",
            "search_trace.parquet",
            "pareto.parquet",
        ],
        "report" => report::OUTPUTS.to_vec(),
        _ => vec![],
    }
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

/// The inputs fingerprint of a stage: config hash, tool version and build identity, and the
/// previous stage's recorded outputs. Ingest and audit also cover every manifest column of
/// every archive, in manifest order (ingest reads the locations, audit the workload), so an
/// edited manifest (a CSV is not part of `pipeline.yaml`'s hash) reruns them.
pub fn fingerprint(cfg: &LoadedConfig, stage: &str, prior: &BTreeMap<String, String>) -> String {
    let mut h = Sha256::new();
    h.update(format!("agentrace {} stage {stage}\n", model::TOOL_VERSION));
    h.update(format!("build {}\n", build_identity()));
    h.update(format!("pipeline.yaml {}\n", cfg.sha256));
    for a in &cfg.archives {
        h.update(format!(
            "archive {} {} {}\n",
            a.archive_id, a.sha256, a.bytes
        ));
    }
    if matches!(stage, "ingest" | "audit") {
        h.update(format!("manifest {}\n", manifest_identity(cfg)));
    }
    for (k, v) in prior {
        h.update(format!("input {k} {v}\n"));
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
    let Ok(text) = std::fs::read_to_string(record_path(run, stage)) else {
        return false;
    };
    let Ok(rec) = serde_json::from_str::<StageRecord>(&text) else {
        return false;
    };
    if rec.fingerprint != fp || rec.outputs.is_empty() {
        return false;
    }
    rec.outputs
        .iter()
        .all(|(name, sha)| sha256_file(&run.file(name)).ok().as_deref() == Some(sha))
}

/// Read a stage's record, if any.
pub fn read_record(run: &RunDir, stage: &str) -> Option<StageRecord> {
    let text = std::fs::read_to_string(record_path(run, stage)).ok()?;
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
