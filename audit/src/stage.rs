//! The audit stage as a whole: every archive in parallel, cohort rules, frames, `audit.json`.

use crate::archive::ScanStats;
use crate::attempt::AuditedAttempt;
use crate::output::{self, AuditDocument};
use crate::spill::AttemptSpill;
use crate::{ArchiveAudit, AuditError, AuditOptions, audit_archive, cohort};
use model::run_dir::{JSON_FORMAT_VERSION, RunDir};
use model::{ArchiveSpec, LoadedConfig};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Archives read in parallel before their request rows are written and released.
const ARCHIVES_PER_BATCH: usize = 4;

/// Attempts read back from the spill, given the cohort rules and written as one row group
/// of each frame at a time (fixed, so the bytes do not depend on the machine).
const ATTEMPTS_PER_BATCH: usize = 1024;

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
    let sources_text = sources_text(cfg);
    let _lock = lock_and_tidy(run_dir.root(), std::path::Path::new(""), "audit")?;
    let pool = thread_pool(opts)?;
    // Each archive's request rows are streamed to the requests frame in manifest order and
    // then released, and its attempts go to the spill, so memory follows the batch (plus a
    // small key per attempt), not the corpus.
    let mut requests = output::requests_writer(&run_dir, &sources_text);
    let mut attempts = AttemptSpill::new(run_dir.root())?;
    let mut archives = Vec::new();
    scan_in_batches(cfg, &cfg.archives, pool.as_ref(), |spec, mut a, stats| {
        archives.push(ArchiveAudit {
            archive_id: spec.archive_id.clone(),
            stats,
            attempts: a.len(),
        });
        requests.write(&output::requests_batch(&a))?;
        release_intervals(&mut a);
        attempts.extend(&a)
    })?;
    requests.finish(&mut output::requests_batch(&[]))?;
    finish(cfg, &run_dir, attempts, archives, &sources_text)
}

/// `archive_id=sha256,...` of every archive, sorted (the frames' source metadata).
fn sources_text(cfg: &LoadedConfig) -> String {
    cfg.archives
        .iter()
        .map(|a| (a.archive_id.clone(), a.sha256.clone()))
        .collect::<BTreeMap<_, _>>()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Create `dir`, take its lock, and remove temporary files of a killed earlier write (their
/// process is gone).
fn lock_and_tidy(
    run_root: &std::path::Path,
    below: &std::path::Path,
    holder: &str,
) -> Result<model::RunLock, AuditError> {
    let dir =
        &model::run_dir::create_dir_below(run_root, below).map_err(|source| AuditError::Io {
            path: run_root.join(below),
            source,
        })?;
    let lock = model::RunLock::acquire(dir, holder)?;
    frames::temp::remove_stale_temp_files(dir, frames::temp::temp_name_pid).map_err(|source| {
        AuditError::Io {
            path: dir.to_path_buf(),
            source,
        }
    })?;
    Ok(lock)
}

fn thread_pool(opts: &AuditOptions) -> Result<Option<rayon::ThreadPool>, AuditError> {
    opts.threads
        .map(|n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
                .map_err(|e| AuditError::ThreadPool {
                    threads: n,
                    detail: e.to_string(),
                })
        })
        .transpose()
}

/// Audit `archives` in fixed batches (independent of the thread count, so the output is
/// byte-identical), handing each archive's attempts, sorted by (workload, attempt, member
/// prefix), to `each` in manifest order.
fn scan_in_batches(
    cfg: &LoadedConfig,
    archives: &[ArchiveSpec],
    pool: Option<&rayon::ThreadPool>,
    mut each: impl FnMut(&ArchiveSpec, Vec<AuditedAttempt>, ScanStats) -> Result<(), AuditError>,
) -> Result<(), AuditError> {
    for batch in archives.chunks(ARCHIVES_PER_BATCH) {
        let work = || -> Vec<Result<(Vec<AuditedAttempt>, ScanStats), AuditError>> {
            batch
                .par_iter()
                .map(|spec| audit_archive(cfg, spec))
                .collect()
        };
        let results = match pool {
            Some(p) => p.install(work),
            None => work(),
        };
        for (spec, r) in batch.iter().zip(results) {
            let (mut a, stats) = r?;
            a.sort_by(|x, y| {
                (x.workload, &x.attempt_id, &x.member_prefix).cmp(&(
                    y.workload,
                    &y.attempt_id,
                    &y.member_prefix,
                ))
            });
            each(spec, a, stats)?;
        }
    }
    Ok(())
}

/// Drop what the requests frame already holds (the counts the attempts frame needs stay).
fn release_intervals(attempts: &mut [AuditedAttempt]) {
    for x in attempts {
        x.requests.intervals = Vec::new();
        x.requests.pieces = Vec::new();
    }
}

/// What needs the whole corpus: the cohort rules, the other frames, `audit.json` and the
/// expectations. `attempts` were spilled in manifest order of their archives, each
/// archive's sorted; they are read back in the frames' row order a batch at a time.
fn finish(
    cfg: &LoadedConfig,
    run_dir: &RunDir,
    attempts: AttemptSpill,
    archives: Vec<ArchiveAudit>,
    sources_text: &str,
) -> Result<AuditReport, AuditError> {
    let sources: BTreeMap<String, String> = cfg
        .archives
        .iter()
        .map(|a| (a.archive_id.clone(), a.sha256.clone()))
        .collect();
    let attempts = attempts.into_reader()?;
    let duplicate_of = cohort::duplicate_details(attempts.keys().iter().map(|k| k.copy_key()));
    let mut tallies: BTreeMap<model::WorkloadId, cohort::WorkloadTally> = cfg
        .config
        .workloads
        .iter()
        .map(|(w, _)| (w, cohort::WorkloadTally::new(w)))
        .collect();
    let mut writers = output::AuditFrameWriters::new(run_dir, sources_text);
    for rows in attempts.output_order().chunks(ATTEMPTS_PER_BATCH) {
        let batch = rows
            .iter()
            .map(|&i| {
                let mut a = attempts.read(i)?;
                cohort::apply_rules(&mut a, duplicate_of.get(&i).map(String::as_str));
                if let Some(t) = tallies.get_mut(&a.workload) {
                    t.add(&a);
                }
                Ok(a)
            })
            .collect::<Result<Vec<_>, AuditError>>()?;
        writers.write(&batch)?;
    }
    let blob_size_conflicts = writers.finish()?;
    let mut written: Vec<PathBuf> = crate::schema::AUDIT_FRAME_SPECS
        .iter()
        .map(|spec| run_dir.file(&spec.parquet_file()))
        .collect();
    let mut workloads = BTreeMap::new();
    for (w, wc) in cfg.config.workloads.iter() {
        let tally = tallies
            .remove(&w)
            .unwrap_or_else(|| cohort::WorkloadTally::new(w));
        workloads.insert(
            w.as_str().to_string(),
            tally.finish(Some(wc.expect.clone())),
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
    written.push(output::write_audit_json(run_dir, &document)?);
    if !differences.is_empty() {
        return Err(AuditError::Expectations { differences });
    }
    Ok(AuditReport {
        document,
        written,
        archives,
    })
}

/// One archive's part of an audit shard: its scan totals and its attempts (as the frames
/// want them, before the cohort rules; their request rows are in the requests part beside).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ArchivePart {
    archive_id: String,
    stats: ScanStats,
    attempts: Vec<AuditedAttempt>,
}

/// The files of one archive's part below a shard's directory: the attempts (JSON) and the
/// request rows (Parquet), named by the archive's position in the manifest.
fn file_name_of(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

fn part_files(dir: &std::path::Path, manifest_index: usize) -> (PathBuf, PathBuf) {
    let stem = format!("archive-{manifest_index:06}");
    (
        dir.join(format!("{stem}.attempts.json")),
        dir.join(format!("{stem}.requests.parquet")),
    )
}

/// `audit --config F --shard I/N`: audit this shard's archives only (the rule of
/// [`model::shard`]) and write, per archive, its attempts and request rows below
/// `run_dir/shards/I-of-N/` with a record of what the shard saw. The cohort rules, which
/// need the whole corpus, wait for [`merge_shards`]. Returns the shard's archives.
pub fn run_shard(
    cfg: &LoadedConfig,
    shard: model::shard::Shard,
    opts: &AuditOptions,
) -> Result<Vec<ArchiveAudit>, AuditError> {
    let dir = shard.dir(&cfg.run_dir);
    let _lock = lock_and_tidy(&cfg.run_dir, &shard.relative_dir(), "audit shard")?;
    let pool = thread_pool(opts)?;
    let index: BTreeMap<&str, usize> = cfg
        .archives
        .iter()
        .enumerate()
        .map(|(i, a)| (a.archive_id.as_str(), i))
        .collect();
    let mine = shard.narrow(cfg).archives;
    let mut archives = Vec::new();
    let mut parts = Vec::new();
    scan_in_batches(cfg, &mine, pool.as_ref(), |spec, mut a, stats| {
        let (attempts_path, requests_path) = part_files(&dir, index[spec.archive_id.as_str()]);
        let mut df = output::requests_batch(&a);
        frames::write_frame(
            &requests_path,
            &mut df,
            &frames::FrameMeta::new("requests", model::run_dir::FRAME_SCHEMA_VERSION),
        )?;
        release_intervals(&mut a);
        archives.push(ArchiveAudit {
            archive_id: spec.archive_id.clone(),
            stats,
            attempts: a.len(),
        });
        let part = ArchivePart {
            archive_id: spec.archive_id.clone(),
            stats,
            attempts: a,
        };
        let text = serde_json::to_string(&part).map_err(|e| {
            AuditError::Document(model::run_dir::DocumentError::Invalid {
                path: attempts_path.clone(),
                detail: e.to_string(),
            })
        })?;
        frames::atomic_write(&attempts_path, text.as_bytes())?;
        for p in [&requests_path, &attempts_path] {
            parts.push(file_name_of(p));
        }
        Ok(())
    })?;
    let record = model::shard::ShardRecord::new(STAGE_NAME, shard, cfg)
        .with_parts(&dir, parts)
        .map_err(|source| AuditError::Io {
            path: dir.clone(),
            source,
        })?;
    let text = serde_json::to_string_pretty(&record).unwrap_or_default() + "\n";
    frames::atomic_write(
        &dir.join(model::shard::ShardRecord::file_name(STAGE_NAME)),
        text.as_bytes(),
    )?;
    Ok(archives)
}

/// `audit --config F merge`: check that the finished audit shards are exactly the N parts
/// of this config's manifest (refused otherwise, naming the shard), then write the frames
/// and `audit.json` from their parts, byte-identical to a one-process run: the request rows
/// archive by archive in manifest order, then the cohort rules over every attempt.
pub fn merge_shards(cfg: &LoadedConfig) -> Result<AuditReport, AuditError> {
    let run_dir = RunDir::new(&cfg.run_dir);
    let _lock = lock_and_tidy(run_dir.root(), std::path::Path::new(""), "audit merge")?;
    let shards = model::shard::check_shards(cfg, STAGE_NAME)?;
    let count = shards.first().map_or(1, |(s, _)| s.count);
    let sources_text = sources_text(cfg);
    let mut requests = output::requests_writer(&run_dir, &sources_text);
    let mut attempts = AttemptSpill::new(run_dir.root())?;
    let mut archives = Vec::new();
    for (i, spec) in cfg.archives.iter().enumerate() {
        let shard = model::shard::Shard {
            index: model::shard::shard_of(&spec.archive_id, count),
            count,
        };
        let dir = shard.dir(&cfg.run_dir);
        let record = &shards[shard.index as usize].1;
        let (attempts_path, requests_path) = part_files(&dir, i);
        let attempts_path = record.part_path(&dir, &file_name_of(&attempts_path))?;
        let requests_path = record.part_path(&dir, &file_name_of(&requests_path))?;
        let df = frames::read_frame(
            &requests_path,
            "requests",
            model::run_dir::FRAME_SCHEMA_VERSION,
        )?;
        requests.write(&df)?;
        let text = std::fs::read_to_string(&attempts_path).map_err(|source| AuditError::Io {
            path: attempts_path.clone(),
            source,
        })?;
        let part: ArchivePart = serde_json::from_str(&text).map_err(|e| {
            AuditError::Document(model::run_dir::DocumentError::Invalid {
                path: attempts_path.clone(),
                detail: e.to_string(),
            })
        })?;
        archives.push(ArchiveAudit {
            archive_id: part.archive_id,
            stats: part.stats,
            attempts: part.attempts.len(),
        });
        attempts.extend(&part.attempts)?;
    }
    requests.finish(&mut output::requests_batch(&[]))?;
    finish(cfg, &run_dir, attempts, archives, &sources_text)
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
    fn config_keys(&self) -> Vec<&'static str> {
        vec![
            "sources.manifest",
            "sources.archives",
            "workloads.*.layout",
            "workloads.*.expect",
            "audit",
        ]
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
        Ok(cohort_summary(&r))
    }
    fn merge_shards(
        &self,
        cfg: &LoadedConfig,
        _ctx: &model::StageContext,
    ) -> Option<Result<String, model::StageError>> {
        Some(merge_shards(cfg).map(|r| cohort_summary(&r)).map_err(|e| {
            model::StageError::new(STAGE_NAME, model::exit::Classify::failure_kind(&e), e)
        }))
    }
}

/// The stage's one-line summary: the cohort per workload.
fn cohort_summary(r: &AuditReport) -> String {
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
    format!("cohort matches pipeline.yaml: {}", parts.join(", "))
}
