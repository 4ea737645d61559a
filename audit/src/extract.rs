//! `audit extract`: materialize one attempt's files from its verified archive, with their
//! original mtimes, so a clipped or excluded attempt can be inspected with ordinary tools.

use crate::archive::{ArchiveLimits, MemberKind, scan_archive};
use crate::error::AuditError;
use model::LoadedConfig;
use model::run_dir::RunDir;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What was extracted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// Archive the attempt came from.
    pub archive_id: String,
    /// The attempt directory inside the archive.
    pub member_prefix: String,
    /// Files written (relative to the target directory).
    pub files: Vec<String>,
    /// Links inside the attempt that were not materialized.
    pub skipped_links: Vec<String>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AuditError + '_ {
    move |source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One row of `attempts.parquet` as the lookup of an attempt id sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    /// Workload.
    pub workload: String,
    /// Attempt id.
    pub attempt_id: String,
    /// `census` or `pilot` (absent when the identity file was unreadable).
    pub run: Option<String>,
    /// Archive the attempt came from.
    pub archive_id: String,
    /// The attempt directory inside the archive.
    pub member_prefix: String,
}

impl AttemptRow {
    /// `workload archive_id:member_prefix`, as candidates are listed.
    pub fn place(&self) -> String {
        format!(
            "{} {}:{}",
            self.workload, self.archive_id, self.member_prefix
        )
    }
}

/// Every row of `attempts.parquet` with this attempt id (any workload, any archive).
pub fn attempt_rows(cfg: &LoadedConfig, attempt_id: &str) -> Result<Vec<AttemptRow>, AuditError> {
    use crate::schema::ATTEMPTS;
    let p = RunDir::new(&cfg.run_dir).file(&ATTEMPTS.parquet_file());
    let df = frames::read_declared(&p, &ATTEMPTS, model::run_dir::FRAME_SCHEMA_VERSION)?;
    let col = |n: &str| frames::str_values(&df, &p, n);
    let ids = col(const { ATTEMPTS.column("attempt_id") })?;
    let wls = col(const { ATTEMPTS.column("workload") })?;
    let runs = col(const { ATTEMPTS.column("run") })?;
    let arcs = col(const { ATTEMPTS.column("archive_id") })?;
    let pre = col(const { ATTEMPTS.column("member_prefix") })?;
    Ok((0..ids.len())
        .filter(|&i| ids[i].as_deref() == Some(attempt_id))
        .map(|i| AttemptRow {
            workload: wls[i].clone().unwrap_or_default(),
            attempt_id: attempt_id.to_string(),
            run: runs[i].clone(),
            archive_id: arcs[i].clone().unwrap_or_default(),
            member_prefix: pre[i].clone().unwrap_or_default(),
        })
        .collect())
}

/// Find exactly one attempt in `attempts.parquet` by id, narrowed by workload and archive
/// when given. An unknown id, or one that names several attempts, is refused
/// ([`AuditError::Lookup`]) with the candidates listed.
pub fn find_attempt(
    cfg: &LoadedConfig,
    attempt_id: &str,
    workload: Option<&str>,
    archive: Option<&str>,
) -> Result<AttemptRow, AuditError> {
    let rows = attempt_rows(cfg, attempt_id)?;
    let hits: Vec<&AttemptRow> = rows
        .iter()
        .filter(|r| workload.is_none_or(|w| r.workload == w))
        .filter(|r| archive.is_none_or(|a| r.archive_id == a))
        .collect();
    let list = |v: &[&AttemptRow]| v.iter().map(|r| r.place()).collect::<Vec<_>>().join(", ");
    match hits.as_slice() {
        [r] => Ok((*r).clone()),
        [] if rows.is_empty() => Err(AuditError::Lookup(format!(
            "attempt `{attempt_id}` is not in attempts.parquet of {}",
            cfg.run_dir.display()
        ))),
        [] => Err(AuditError::Lookup(format!(
            "no attempt `{attempt_id}`{}{}; candidates: {}",
            workload
                .map(|w| format!(" in workload `{w}`"))
                .unwrap_or_default(),
            archive
                .map(|a| format!(" in archive `{a}`"))
                .unwrap_or_default(),
            list(&rows.iter().collect::<Vec<_>>())
        ))),
        many => {
            let hint = if many.iter().any(|r| r.workload != many[0].workload) {
                "name one with --workload"
            } else {
                "name one with --archive"
            };
            Err(AuditError::Lookup(format!(
                "attempt `{attempt_id}` is ambiguous, {} candidates: {}; {hint}",
                many.len(),
                list(many)
            )))
        }
    }
}

/// Find an attempt in `attempts.parquet`: (archive id, member prefix). See [`find_attempt`].
pub fn locate_attempt(
    cfg: &LoadedConfig,
    attempt_id: &str,
    workload: Option<&str>,
) -> Result<(String, String), AuditError> {
    let r = find_attempt(cfg, attempt_id, workload, None)?;
    Ok((r.archive_id, r.member_prefix))
}

/// Extract the attempt at `member_prefix` of `archive_id` into `to` (paths as in the
/// archive). Files are written below a temporary directory and moved into place only after
/// the archive's hash has been checked; existing files are never overwritten.
pub fn extract_attempt(
    cfg: &LoadedConfig,
    archive_id: &str,
    member_prefix: &str,
    to: &Path,
) -> Result<Extracted, AuditError> {
    let spec = cfg
        .archives
        .iter()
        .find(|a| a.archive_id == archive_id)
        .ok_or_else(|| {
            AuditError::Extract(format!("archive `{archive_id}` is not in the manifest"))
        })?;
    let stored = RunDir::new(&cfg.run_dir).stored_archive(&spec.sha256);
    if !stored.is_file() {
        return Err(AuditError::NotInStore {
            archive_id: archive_id.into(),
            path: stored,
        });
    }
    std::fs::create_dir_all(to).map_err(io(to))?;
    let tmp = to.join(format!(".agentrace-extract-{}", std::process::id()));
    // `create_dir`, not `create_dir_all`: a name already there (a symlink planted in the
    // target directory included) is refused instead of followed.
    std::fs::create_dir(&tmp).map_err(io(&tmp))?;
    let mut out = Extracted {
        archive_id: archive_id.into(),
        member_prefix: member_prefix.into(),
        files: Vec::new(),
        skipped_links: Vec::new(),
    };
    let mut mtimes: Vec<(PathBuf, filetime::FileTime)> = Vec::new();
    let limits = ArchiveLimits::of(cfg);
    let r = scan_archive(
        &stored,
        archive_id,
        &spec.sha256,
        spec.bytes,
        limits,
        |m, data: &mut dyn Read| {
            if !m.path.starts_with(member_prefix) && format!("{}/", m.path) != member_prefix {
                return Ok(());
            }
            let dest = tmp.join(&m.path);
            match &m.kind {
                MemberKind::Directory => {
                    std::fs::create_dir_all(&dest).map_err(io(&dest))?;
                }
                MemberKind::Link { .. } => out.skipped_links.push(m.path.clone()),
                MemberKind::File => {
                    if let Some(parent) = dest.parent() {
                        std::fs::create_dir_all(parent).map_err(io(parent))?;
                    }
                    let mut f = std::fs::File::create(&dest).map_err(io(&dest))?;
                    std::io::copy(data, &mut f).map_err(io(&dest))?;
                    if let Ok(t) = &m.mtime {
                        let secs = t.nanos.div_euclid(1_000_000_000);
                        let ns = t.nanos.rem_euclid(1_000_000_000) as u32;
                        mtimes.push((dest.clone(), filetime::FileTime::from_unix_time(secs, ns)));
                    }
                    out.files.push(m.path.clone());
                }
            }
            Ok(())
        },
    );
    if let Err(e) = r {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if out.files.is_empty() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(AuditError::Extract(format!(
            "archive `{archive_id}` holds no files under `{member_prefix}`"
        )));
    }
    // Move into place without overwriting anything and without following a link that is
    // already in the target directory (a planted `deepswe -> /etc` would otherwise receive
    // the files).
    for f in &out.files {
        if let Err(e) = check_target(to, f) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    }
    for (p, t) in &mtimes {
        filetime::set_file_mtime(p, *t).map_err(io(p))?;
    }
    for f in &out.files {
        let (src, target) = (tmp.join(f), to.join(f));
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::rename(&src, &target).map_err(io(&target))?;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(out)
}

/// Refuse a target path `to/rel` that exists already (a dangling link included) or whose
/// directories below `to` include a symbolic link or a non-directory.
fn check_target(to: &Path, rel: &str) -> Result<(), AuditError> {
    let target = to.join(rel);
    let mut dir = to.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(AuditError::Extract(format!(
                    "{} is a symbolic link; refusing to extract through it (extract into an empty directory)",
                    dir.display()
                )));
            }
            Ok(m) if !m.is_dir() => {
                return Err(AuditError::Extract(format!(
                    "{} exists and is not a directory; refusing to overwrite (extract into an empty directory)",
                    dir.display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(&dir)(e)),
        }
    }
    match std::fs::symlink_metadata(&target) {
        Ok(_) => Err(AuditError::Extract(format!(
            "{} already exists; refusing to overwrite (extract into an empty directory)",
            target.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(&target)(e)),
    }
}
