//! `provenance.json` (every output with its SHA256 and the inputs it came from), `run.json`
//! (wall-clock facts), and `pipeline verify` (recompute every hash, re-derive every output).

use crate::stages::{STAGES, StageOutcome, read_record, sha256_file, stage_files, stage_outputs};
use anyhow::{Context, Result};
use model::config::PipelineConfig;
use model::manifest::ArchiveSpec;
use model::run_dir::{JSON_FORMAT_VERSION, RunDir};
use model::{LoadedConfig, WorkloadId};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The copy of the config text a run used, kept in the run directory.
pub const CONFIG_SNAPSHOT: &str = "pipeline.yaml";
/// The run's provenance document (archives, outputs and their hashes).
pub const PROVENANCE_FILE: &str = "provenance.json";
/// The run's wall-clock facts (times, host, per-stage durations).
pub const RUN_JSON_FILE: &str = "run.json";

/// One archive the run read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvenanceArchive {
    /// Archive id.
    pub archive_id: String,
    /// Workload.
    pub workload: String,
    /// SHA256.
    pub sha256: String,
    /// Bytes.
    pub bytes: u64,
}

/// One output and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvenanceOutput {
    /// Path relative to the run directory.
    pub path: String,
    /// SHA256.
    pub sha256: String,
    /// Stage that wrote it.
    pub stage: String,
    /// What it was derived from (paths relative to the run directory, or `archive:<id>`).
    pub inputs: Vec<String>,
}

/// `provenance.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Format version.
    pub format_version: u32,
    /// Tool version.
    pub tool_version: String,
    /// SHA256 of the config text (kept as `pipeline.yaml` in the run directory).
    pub pipeline_yaml_sha256: String,
    /// Search seed.
    pub seed: u64,
    /// Order in which the workloads consumed the RNG stream.
    pub order: Vec<WorkloadId>,
    /// Archives.
    pub archives: Vec<ProvenanceArchive>,
    /// Outputs, sorted by path.
    pub outputs: Vec<ProvenanceOutput>,
}

fn stage_inputs(stage: &str, cfg: &LoadedConfig) -> Vec<String> {
    let mut v = vec![CONFIG_SNAPSHOT.to_string()];
    match stage {
        "ingest" => v.extend(
            cfg.archives
                .iter()
                .map(|a| format!("archive:{}", a.archive_id)),
        ),
        "audit" => v.extend(
            cfg.archives
                .iter()
                .map(|a| format!("store/sha256/{}", a.sha256)),
        ),
        "replay" => v.extend(
            ["attempts", "requests", "blobs", "attempt_blobs"]
                .iter()
                .map(|f| format!("{f}.parquet")),
        ),
        "report" => {
            for s in ["ingest", "audit", "replay"] {
                v.extend(stage_files(s).iter().map(|f| f.to_string()));
            }
        }
        _ => {}
    }
    v
}

/// Build the provenance of the run directory's current outputs from the stage records
/// (each holds the SHA256 of its outputs, hashed when the stage ran or was checked for a
/// skip), so no output is hashed twice in a run.
pub fn build_provenance(cfg: &LoadedConfig, run: &RunDir) -> Result<Provenance> {
    let mut outputs = Vec::new();
    for stage in STAGES {
        let recorded = read_record(run, stage)
            .map(|r| r.outputs)
            .unwrap_or_default();
        for n in stage_outputs(stage, cfg) {
            let sha256 = match recorded.get(&n) {
                Some(h) => h.clone(),
                None if run.file(&n).is_file() => sha256_file(&run.file(&n))?,
                None => continue,
            };
            outputs.push(ProvenanceOutput {
                sha256,
                path: n,
                stage: stage.into(),
                inputs: stage_inputs(stage, cfg),
            });
        }
    }
    outputs.sort_by(|a, b| a.path.cmp(&b.path));
    outputs.dedup_by(|a, b| a.path == b.path);
    Ok(Provenance {
        format_version: JSON_FORMAT_VERSION,
        tool_version: model::TOOL_VERSION.into(),
        pipeline_yaml_sha256: cfg.sha256.clone(),
        seed: cfg.config.search.seed,
        order: cfg.config.search.order.clone(),
        archives: cfg
            .archives
            .iter()
            .map(|a| ProvenanceArchive {
                archive_id: a.archive_id.clone(),
                workload: a.workload.as_str().into(),
                sha256: a.sha256.clone(),
                bytes: a.bytes,
            })
            .collect(),
        outputs,
    })
}

/// The config text a run keeps as its snapshot: the file's, or the embedded run's.
pub fn config_text(cfg: &LoadedConfig) -> Result<String> {
    if cfg.path.is_file() {
        std::fs::read_to_string(&cfg.path)
            .with_context(|| format!("cannot read {}", cfg.path.display()))
    } else {
        Ok(crate::run::EMBEDDED_PIPELINE_YAML.to_string())
    }
}

/// Write the config snapshot and `provenance.json`.
pub fn write_provenance(cfg: &LoadedConfig, run: &RunDir) -> Result<()> {
    let text = config_text(cfg)?;
    frames::atomic_write(&run.file(CONFIG_SNAPSHOT), text.as_bytes())?;
    let p = build_provenance(cfg, run)?;
    let json = serde_json::to_string_pretty(&p)? + "\n";
    frames::atomic_write(&run.file(PROVENANCE_FILE), json.as_bytes())?;
    Ok(())
}

/// Write `run.json`: times, host, versions, per-stage durations.
pub fn write_run_json(
    cfg: &LoadedConfig,
    run: &RunDir,
    started: chrono::DateTime<chrono::Utc>,
    stages: &[StageOutcome],
) -> Result<()> {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let doc = serde_json::json!({
        "format_version": JSON_FORMAT_VERSION,
        "tool_version": model::TOOL_VERSION,
        "config": cfg.path.display().to_string(),
        "pipeline_yaml_sha256": cfg.sha256,
        "started_utc": started.to_rfc3339(),
        "finished_utc": chrono::Utc::now().to_rfc3339(),
        "host": host,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "stages": stages,
    });
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    frames::atomic_write(&run.file(RUN_JSON_FILE), text.as_bytes())?;
    Ok(())
}

/// What `pipeline verify` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Files whose hash matches.
    pub checked: usize,
    /// Each difference, naming the file.
    pub differences: Vec<String>,
}

/// Recompute every hash of a run directory and re-derive the audit, replay and report
/// outputs from its verified store in a scratch directory.
pub fn verify(run_dir: &Path, rederive: bool) -> Result<VerifyReport> {
    let run = RunDir::new(run_dir);
    let ppath = run.file(PROVENANCE_FILE);
    let text = std::fs::read_to_string(&ppath)
        .with_context(|| format!("cannot read {}", ppath.display()))?;
    let prov: Provenance = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a provenance document", ppath.display()))?;
    let mut rep = VerifyReport::default();
    let snap = run.file(CONFIG_SNAPSHOT);
    let snap_text = std::fs::read_to_string(&snap)
        .with_context(|| format!("cannot read {}", snap.display()))?;
    let snap_sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(snap_text.as_bytes()));
    if snap_sha != prov.pipeline_yaml_sha256 {
        rep.differences.push(format!(
            "{}: sha256 {snap_sha}, provenance says {}",
            snap.display(),
            prov.pipeline_yaml_sha256
        ));
    }
    for o in &prov.outputs {
        let p = run.file(&o.path);
        match sha256_file(&p) {
            Ok(h) if h == o.sha256 => rep.checked += 1,
            Ok(h) => rep.differences.push(format!(
                "{}: sha256 {h}, provenance says {}",
                p.display(),
                o.sha256
            )),
            Err(_) => rep.differences.push(format!("{}: missing", p.display())),
        }
    }
    if rederive && rep.differences.is_empty() {
        rederive_outputs(&run, &prov, &snap_text, &mut rep)?;
    }
    Ok(rep)
}

fn rederive_outputs(
    run: &RunDir,
    prov: &Provenance,
    config_text: &str,
    rep: &mut VerifyReport,
) -> Result<()> {
    let config: PipelineConfig =
        serde_yaml::from_str(config_text).context("the run's pipeline.yaml snapshot")?;
    let scratch = tempfile::tempdir().context("scratch directory")?;
    let srun = RunDir::new(scratch.path());
    std::fs::create_dir_all(srun.store_dir())?;
    let mut archives = Vec::new();
    for a in &prov.archives {
        let src = run.stored_archive(&a.sha256);
        let dst = srun.stored_archive(&a.sha256);
        if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).with_context(|| format!("cannot copy {}", src.display()))?;
        }
        archives.push(ArchiveSpec {
            archive_id: a.archive_id.clone(),
            workload: WorkloadId::parse(&a.workload)
                .with_context(|| format!("workload `{}`", a.workload))?,
            sha256: a.sha256.clone(),
            bytes: a.bytes,
            gcs: None,
            hf: None,
            file: None,
        });
    }
    let ledger = run.file("ledger.parquet");
    if ledger.is_file() {
        std::fs::copy(&ledger, srun.file("ledger.parquet"))?;
    }
    let cfg = LoadedConfig {
        path: scratch.path().join(CONFIG_SNAPSHOT),
        sha256: prov.pipeline_yaml_sha256.clone(),
        config,
        run_dir: scratch.path().to_path_buf(),
        archives,
    };
    audit::run(&cfg, &audit::AuditOptions::default()).context("re-deriving the audit")?;
    replay::run(&cfg, &replay::ReplayOptions::default()).context("re-deriving the replay")?;
    report::write_report(&cfg).context("re-deriving the report")?;
    for o in prov
        .outputs
        .iter()
        .filter(|o| matches!(o.stage.as_str(), "audit" | "replay" | "report"))
    {
        let h = sha256_file(&srun.file(&o.path)).ok();
        if h.as_deref() != Some(o.sha256.as_str()) {
            rep.differences.push(format!(
                "{}: re-derived from the verified store it hashes to {}, provenance says {}",
                run.file(&o.path).display(),
                h.unwrap_or_else(|| "nothing (not produced)".into()),
                o.sha256
            ));
        } else {
            rep.checked += 1;
        }
    }
    Ok(())
}
