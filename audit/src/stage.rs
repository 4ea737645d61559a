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
    let work = || -> Vec<Result<(Vec<AuditedAttempt>, ScanStats), AuditError>> {
        cfg.archives
            .par_iter()
            .map(|spec| audit_archive(cfg, spec))
            .collect()
    };
    let results = match opts.threads {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .map_err(|e| AuditError::Extract(format!("cannot start worker threads: {e}")))?
            .install(work),
        None => work(),
    };
    let mut attempts = Vec::new();
    let mut archives = Vec::new();
    for (spec, r) in cfg.archives.iter().zip(results) {
        let (a, stats) = r?;
        archives.push(ArchiveAudit {
            archive_id: spec.archive_id.clone(),
            stats,
            attempts: a.len(),
        });
        attempts.extend(a);
    }
    cohort::apply_cohort_rules(&mut attempts);
    attempts.sort_by(|a, b| {
        (a.workload, &a.attempt_id, &a.archive_id, &a.member_prefix).cmp(&(
            b.workload,
            &b.attempt_id,
            &b.archive_id,
            &b.member_prefix,
        ))
    });
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
    let (mut written, blob_size_conflicts) =
        output::write_frames(&run_dir, &attempts, &sources_text)?;
    let mut workloads = BTreeMap::new();
    for (w, wc) in cfg.config.workloads.iter() {
        workloads.insert(
            w.as_str().to_string(),
            cohort::summarize(w, &attempts, Some(wc.expect)),
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
