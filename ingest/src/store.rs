//! The content-addressed store of verified archives (`store/sha256/<hex>`), its temporary
//! area (`store/tmp/`, same filesystem, so admission is one rename) and `quarantine/`.
//!
//! A blob already in the store is re-hashed before it is trusted (an offline rerun proves
//! the store, not just that a file name exists); a stored file whose bytes no longer match
//! its name is moved to quarantine and fetched again.

use crate::error::IngestError;
use crate::sink::{TempBlob, hash_file};
use model::run_dir::RunDir;
use std::path::{Path, PathBuf};

/// What the store holds for an expected blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreCheck {
    /// Nothing.
    Absent,
    /// The blob, re-hashed: it matches.
    Verified,
    /// A file with the expected name but other bytes; moved to quarantine.
    Corrupt {
        /// Its actual SHA256.
        actual_sha256: String,
        /// Its actual size.
        actual_bytes: u64,
        /// Where it went, relative to the run directory.
        quarantined: String,
    },
}

/// The run directory's store and quarantine.
#[derive(Debug, Clone)]
pub struct Store {
    run: RunDir,
    tmp: PathBuf,
}

impl Store {
    /// Open (create) `store/sha256/` and `store/tmp/` below the run directory.
    pub fn open(run_dir: &Path) -> Result<Store, IngestError> {
        let store = Store::create(run_dir)?;
        remove_leftovers(store.run.root())?;
        Ok(store)
    }

    /// Create (if absent) `store/sha256/` and `store/tmp/`; remove nothing.
    fn create(run_dir: &Path) -> Result<Store, IngestError> {
        let run = RunDir::new(run_dir);
        let tmp = run.root().join("store").join("tmp");
        for (d, rel) in [
            (run.store_dir(), "store/sha256"),
            (tmp.clone(), "store/tmp"),
        ] {
            model::run_dir::create_dir_below(run.root(), rel).map_err(IngestError::io(&d))?;
        }
        Ok(Store { run, tmp })
    }

    /// Open the store for one shard, which shares it with other shards that may run at
    /// once on other machines (a shared filesystem): only stale partial downloads of this
    /// shard's own archives are removed (a process id means nothing across machines).
    pub fn open_for(run_dir: &Path, archives: &[String]) -> Result<Store, IngestError> {
        let store = Store::create(run_dir)?;
        let ours = |name: &str| {
            archives.iter().any(|a| {
                name.strip_prefix(a.as_str())
                    .is_some_and(|r| r.starts_with('.'))
            })
        };
        frames::temp::remove_stale_temp_files(&store.tmp, |name| {
            part_name_pid(name).filter(|_| ours(name))
        })
        .map_err(IngestError::io(&store.tmp))?;
        Ok(store)
    }

    /// The run directory.
    pub fn run_dir(&self) -> &RunDir {
        &self.run
    }

    /// A fresh temporary path for one (archive, location) download:
    /// `store/tmp/ARCHIVE.KIND.PID.part` ([`part_name_pid`] reads the pid back).
    pub fn temp_path(&self, archive_id: &str, kind: &str) -> PathBuf {
        self.tmp
            .join(format!("{archive_id}.{kind}.{}.part", std::process::id()))
    }

    /// Check (and re-hash) the stored blob for `sha256`.
    pub fn check(
        &self,
        archive_id: &str,
        sha256: &str,
        bytes: u64,
    ) -> Result<StoreCheck, IngestError> {
        let path = self.run.stored_archive(sha256);
        if !path.exists() {
            return Ok(StoreCheck::Absent);
        }
        let (actual, n) = hash_file(&path).map_err(IngestError::io(&path))?;
        if actual == sha256 && n == bytes {
            return Ok(StoreCheck::Verified);
        }
        let rel = self.quarantine_name(&actual, archive_id, "store");
        let target = self.run.root().join(&rel);
        self.ensure_quarantine()?;
        std::fs::rename(&path, &target).map_err(IngestError::io(&path))?;
        Ok(StoreCheck::Corrupt {
            actual_sha256: actual,
            actual_bytes: n,
            quarantined: rel,
        })
    }

    /// Move verified bytes into the store. An identical blob already there is kept as is.
    pub fn admit(&self, blob: TempBlob) -> Result<(), IngestError> {
        let target = self.run.stored_archive(&blob.sha256);
        if target.exists() {
            return Ok(());
        }
        let from = blob.path().to_path_buf();
        blob.persist(&target).map_err(IngestError::io(&from))
    }

    /// Keep mismatching bytes aside; returns the path relative to the run directory.
    pub fn quarantine(
        &self,
        blob: TempBlob,
        archive_id: &str,
        kind: &str,
    ) -> Result<String, IngestError> {
        self.ensure_quarantine()?;
        let rel = self.quarantine_name(&blob.sha256, archive_id, kind);
        let target = self.run.root().join(&rel);
        let from = blob.path().to_path_buf();
        blob.persist(&target).map_err(IngestError::io(&from))?;
        Ok(rel)
    }

    fn quarantine_name(&self, actual_sha256: &str, archive_id: &str, kind: &str) -> String {
        format!("quarantine/{actual_sha256}-{archive_id}-{kind}")
    }

    fn ensure_quarantine(&self) -> Result<(), IngestError> {
        let q = self.run.quarantine_dir();
        std::fs::create_dir_all(&q).map_err(IngestError::io(&q))
    }

    /// Remove `store/tmp/` if it is empty (it is, unless another run is active).
    pub fn tidy(&self) {
        let _ = std::fs::remove_dir(&self.tmp);
    }
}

/// The process id in a partial download's name (`ARCHIVE.KIND.PID.part`, see
/// [`Store::temp_path`]); `None` for any other name.
pub fn part_name_pid(file_name: &str) -> Option<u32> {
    let stem = file_name.strip_suffix(".part")?;
    let (_, pid) = stem.rsplit_once('.')?;
    pid.parse().ok()
}

/// Remove what killed earlier runs left in `run_dir` (their process is gone): partial
/// downloads in `store/tmp/` and temporary files of atomic writes in the run directory.
/// Files of a process still running (another ingest on this store) are kept. Returns what
/// was removed.
pub fn remove_leftovers(run_dir: &Path) -> Result<Vec<PathBuf>, IngestError> {
    let tmp = run_dir.join("store").join("tmp");
    let mut removed = frames::temp::remove_stale_temp_files(&tmp, part_name_pid)
        .map_err(IngestError::io(&tmp))?;
    removed.extend(
        frames::temp::remove_stale_temp_files(run_dir, frames::temp::temp_name_pid)
            .map_err(IngestError::io(run_dir))?,
    );
    Ok(removed)
}
