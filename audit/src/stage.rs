//! The audit stage as a whole: every archive in parallel, cohort rules, frames, `audit.json`.

use crate::archive::ScanStats;
use crate::attempt::AuditedAttempt;
use crate::output::{self, AuditDocument};
use crate::{ArchiveAudit, AuditError, AuditOptions, audit_archive, cohort};
use model::LoadedConfig;
use model::run_dir::{JSON_FORMAT_VERSION, RunDir};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Archives read in parallel before their request rows are written and released.
const ARCHIVES_PER_BATCH: usize = 4;

/// The outcome of an audit run.
#[derive(Debug, Clone)]
pub struct AuditReport {
    /// `audit.json`'s content.
    pub document: AuditDocument,
    /// Files written.
    pub written: Vec<PathBuf>,
    /// Per-archive totals, in manifest order.
    pub archives: Vec<ArchiveAudit>,
}

/// Run the audit stage: read every archive of the config from the verified store, write
/// the frames and `audit.json`, and fail if the cohort differs from the expectations.
pub fn run(cfg: &LoadedConfig, opts: &AuditOptions) -> Result<AuditReport, AuditError> {
    let run_dir = RunDir::new(&cfg.run_dir);
    let sources: BTreeMap<String, String> = cfg
        .archives
        .iter()
        .map(|a| (a.archive_id.clone(), a.sha256.clone()))
        .collect();
    let sources_text = sources
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    std::fs::create_dir_all(run_dir.root()).map_err(|source| AuditError::Io {
        path: run_dir.root().to_path_buf(),
        source,
    })?;
    let _lock = model::RunLock::acquire(run_dir.root(), "audit")?;
    // Temporary files of a killed earlier write (their process is gone) are removed.
    frames::temp::remove_stale_temp_files(run_dir.root(), frames::temp::temp_name_pid).map_err(
        |source| AuditError::Io {
            path: run_dir.root().to_path_buf(),
            source,
        },
    )?;
    let pool = match opts.threads {
        Some(n) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
                .map_err(|e| AuditError::ThreadPool {
                    threads: n,
                    detail: e.to_string(),
                })?,
        ),
        None => None,
    };
    // Archives go in fixed batches (independent of the thread count, so the output is
    // byte-identical); each archive's request rows are streamed to the requests frame in
    // manifest order and then released, so memory follows the batch, not the corpus.
    let mut requests = output::requests_writer(&run_dir, &sources_text);
    let mut attempts = Vec::new();
    let mut archives = Vec::new();
    for batch in cfg.archives.chunks(ARCHIVES_PER_BATCH) {
        let work = || -> Vec<Result<(Vec<AuditedAttempt>, ScanStats), AuditError>> {
            batch
                .par_iter()
                .map(|spec| audit_archive(cfg, spec))
                .collect()
        };
        let results = match &pool {
            Some(p) => p.install(work),
            None => work(),
        };
        for (spec, r) in batch.iter().zip(results) {
            let (mut a, stats) = r?;
            archives.push(ArchiveAudit {
                archive_id: spec.archive_id.clone(),
                stats,
                attempts: a.len(),
            });
            a.sort_by(|x, y| {
                (x.workload, &x.attempt_id, &x.member_prefix).cmp(&(
                    y.workload,
                    &y.attempt_id,
                    &y.member_prefix,
                ))
            });
            let df = output::requests_batch(&a);
            requests.write(&df)?;
            for x in &mut a {
                x.requests.intervals = Vec::new();
                x.requests.pieces = Vec::new();
            }
            attempts.extend(a);
        }
    }
    requests.finish(&mut output::requests_batch(&[]))?;
    cohort::apply_cohort_rules(&mut attempts);
    attempts.sort_by(|a, b| {
        (a.workload, &a.attempt_id, &a.archive_id, &a.member_prefix).cmp(&(
            b.workload,
            &b.attempt_id,
            &b.archive_id,
            &b.member_prefix,
        ))
    });
    let (mut written, blob_size_conflicts) =
        output::write_frames(&run_dir, &attempts, &sources_text)?;
    written.insert(1, run_dir.file("requests.parquet"));
    let mut workloads = BTreeMap::new();
    for (w, wc) in cfg.config.workloads.iter() {
        workloads.insert(
            w.as_str().to_string(),
            cohort::summarize(w, &attempts, Some(wc.expect.clone())),
        );
    }
    let differences: Vec<String> = workloads
        .values()
        .flat_map(|w: &cohort::WorkloadAudit| w.differences.clone())
        .collect();
    let document = AuditDocument {
        format_version: JSON_FORMAT_VERSION,
        workloads,
        archives: sources,
        blob_size_conflicts,
        pass: differences.is_empty(),
    };
    written.push(output::write_audit_json(&run_dir, &document)?);
    if !differences.is_empty() {
        return Err(AuditError::Expectations { differences });
    }
    Ok(AuditReport {
        document,
        written,
        archives,
    })
}

/// The audit stage as the pipeline sees it: it reads the manifest and every archive's
/// verified blob from the store, and writes the frames and `audit.json`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AuditStage;

/// The stage's name.
const STAGE_NAME: &str = "audit";

impl model::Stage for AuditStage {
    fn name(&self) -> &'static str {
        STAGE_NAME
    }
    fn about(&self) -> &'static str {
        "stream the verified archives, rebuild generation lifetimes and request intervals, clip and merge with a record of every change, run the cohort audit, write the frames"
    }
    fn inputs(&self, cfg: &LoadedConfig) -> Vec<model::StageInput> {
        std::iter::once(model::StageInput::Manifest)
            .chain(cfg.archives.iter().map(|a| {
                model::StageInput::File(model::run_dir::stored_archive_relative(&a.sha256))
            }))
            .collect()
    }
    fn outputs(&self, _cfg: &LoadedConfig) -> Vec<String> {
        output::audit_outputs()
    }
    fn run(
        &self,
        cfg: &LoadedConfig,
        ctx: &model::StageContext,
    ) -> Result<String, model::StageError> {
        let r = run(
            cfg,
            &AuditOptions {
                threads: ctx.threads,
            },
        )
        .map_err(|e| model::StageError::new(STAGE_NAME, model::stage::FailureKind::Failed, e))?;
        let parts: Vec<String> = r
            .document
            .workloads
            .iter()
            .map(|(w, s)| {
                format!(
                    "{w} {}/{} included ({} pilot)",
                    s.included, s.audited, s.pilot
                )
            })
            .collect();
        Ok(format!(
            "cohort matches pipeline.yaml: {}",
            parts.join(", ")
        ))
    }
}
