//! `pipeline pin`: check that the outputs may be written, pin the sources
//! ([`ingest::pin`]), then write the manifest, the pinning report (`<stem>.pin.json`) and
//! the shards' member tables (`shard-index/` beside the manifest), list every skipped object
//! and every pair of ids with the same bytes on stderr, and print one line per archive.

use crate::cli::Failure;
use ingest::EnvOverrides;
use ingest::pin::{GcsPrefix, HubTarget, ObjectFilter, PinRequest, PinSettings, WorkloadRule};
use ingest::source::hf::shard_index::{SHARD_INDEX_DIR, write_record};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The command line of `pipeline pin`.
#[derive(Debug, Clone)]
pub struct PinArgs {
    /// `gs://BUCKET/PREFIX`.
    pub gcs: Option<String>,
    /// `REPO[@REVISION][:PATH]`.
    pub hf: Option<String>,
    /// `GLOB=NAME` rules.
    pub workloads: Vec<String>,
    /// `--include` globs.
    pub include: Vec<String>,
    /// `--exclude` globs.
    pub exclude: Vec<String>,
    /// The manifest to write.
    pub out: PathBuf,
    /// Replace existing outputs.
    pub force: bool,
    /// Retries per request.
    pub retries: u32,
    /// Connect and read timeout.
    pub timeout: Duration,
    /// Archives read at once.
    pub parallel: usize,
    /// Summary line only.
    pub quiet: bool,
}

/// The pinning report's path beside the manifest: `<stem>.pin.json`.
pub fn report_path(manifest: &Path) -> PathBuf {
    let stem = manifest
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "manifest".into());
    manifest.with_file_name(format!("{stem}.pin.json"))
}

/// The shard index beside the manifest (`shard-index/`), which ingest reads for runs of
/// that manifest.
pub fn shard_index_dir(manifest: &Path) -> PathBuf {
    manifest
        .parent()
        .unwrap_or(Path::new(""))
        .join(SHARD_INDEX_DIR)
}

fn usage(message: String) -> Failure {
    Failure::refused(anyhow::anyhow!(message))
}

/// Run `pipeline pin` with the given environment.
pub fn pin_command(args: &PinArgs, env: &EnvOverrides) -> Result<(), Failure> {
    let request = PinRequest {
        gcs: args
            .gcs
            .as_deref()
            .map(str::parse::<GcsPrefix>)
            .transpose()
            .map_err(Failure::of)?,
        hf: args
            .hf
            .as_deref()
            .map(str::parse::<HubTarget>)
            .transpose()
            .map_err(Failure::of)?,
        rules: args
            .workloads
            .iter()
            .map(|w| w.parse::<WorkloadRule>())
            .collect::<Result<_, _>>()
            .map_err(Failure::of)?,
        filter: ObjectFilter::parse(&args.include, &args.exclude).map_err(Failure::of)?,
    };
    let report_file = report_path(&args.out);
    if !args.force {
        for p in [&args.out, &report_file] {
            if p.exists() {
                return Err(usage(format!(
                    "{} exists; pass --force to replace it",
                    p.display()
                )));
            }
        }
    }
    let settings = PinSettings {
        retries: args.retries,
        timeout: args.timeout,
        parallel: args.parallel.max(1),
        ..PinSettings::from_env(env)
    };
    let report = ingest::pin::pin(&request, &settings).map_err(Failure::of)?;
    if let Some(g) = report.gcs.as_ref().filter(|_| !args.quiet) {
        eprintln!("pin: {}", g.credentials);
    }
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::failed(anyhow::anyhow!("creating {}: {e}", dir.display())))?;
    }
    let index_dir = shard_index_dir(&args.out);
    for record in &report.shard_indexes {
        write_record(&index_dir, record).map_err(|e| {
            Failure::failed(anyhow::anyhow!(
                "writing the shard index in {}: {e}",
                index_dir.display()
            ))
        })?;
    }
    frames::atomic_write(&args.out, report.manifest_csv().as_bytes())?;
    frames::atomic_write(&report_file, report.to_json().as_bytes())?;
    for s in &report.skipped {
        eprintln!("pin: skipped {} ({} bytes): {}", s.at, s.bytes, s.reason);
    }
    for same in &report.same_bytes {
        eprintln!("warning: {same}");
    }
    if !args.quiet {
        for line in report.archive_lines() {
            model::outln!("  {line}");
        }
    }
    let mut sources = Vec::new();
    if let Some(g) = &report.gcs {
        sources.push(format!("gs://{}/{}", g.bucket, g.prefix));
    }
    if let Some(h) = &report.hf {
        sources.push(format!(
            "hf://datasets/{}@{} (commit {})",
            h.repo, h.revision, h.commit
        ));
    }
    let per_workload = model::WorkloadId::ALL
        .iter()
        .map(|w| {
            let n = report.archives.iter().filter(|a| a.workload == *w).count();
            format!("{w} {n}")
        })
        .collect::<Vec<_>>()
        .join(", ");
    let skipped = match report.skipped.len() {
        0 => String::new(),
        n => format!(
            "; skipped {n} object(s) that are not archives or were left out (listed in the report)"
        ),
    };
    model::outln!(
        "pinned {} archives ({per_workload}) from {}{skipped}; wrote {} and {}",
        report.archives.len(),
        sources.join(" and "),
        args.out.display(),
        report_file.display()
    );
    Ok(())
}
