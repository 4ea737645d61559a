//! The content-addressed store of verified archives (`store/sha256/<hex>`), its temporary
//! area (`store/tmp/`, same filesystem, so admission is one rename) and `quarantine/`.
//!
//! A blob already in the store is re-hashed before it is trusted (an offline rerun proves
//! the store, not just that a file name exists); a stored file whose bytes no longer match
//! its name is moved to quarantine and fetched again.
//!
//! The store answers "are these bytes known", never "is this location good": which
//! locations delivered a blob's bytes is recorded per (blob, location) in
//! `store/locations/` ([`LocationRecord`]), one file each, written once a location's bytes
//! verified. A location without its own record (new, changed in the manifest, or whose
//! fetch never finished) is fetched and checked even when the store holds the bytes.

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

/// Format version of a location record; checked on read.
pub const LOCATION_RECORD_VERSION: u32 = 1;

/// That one location (its URI names the pin: GCS generation, Hub commit and member) once
/// delivered bytes that verified against the manifest: `store/locations/<sha256>.<key>.json`,
/// `key` the first 32 hex digits of the SHA256 of the URI. No wall-clock time is in it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LocationRecord {
    /// [`LOCATION_RECORD_VERSION`].
    pub format_version: u32,
    /// The blob's SHA256.
    pub sha256: String,
    /// The blob's byte count.
    pub bytes: u64,
    /// `file`, `gcs` or `hf`.
    pub location_kind: String,
    /// The location as the ledger writes it.
    pub uri: String,
    /// The commit the Hub resolved the pinned revision to when the bytes were fetched.
    pub resolved_commit: Option<String>,
    /// How the bytes were read (`full_object`, `member_range`, `shard_scan`).
    pub method: Option<String>,
}

/// What `store/locations/` says of one (blob, location).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationCheck {
    /// A record of this very location and blob.
    Verified(LocationRecord),
    /// No record: the location was never verified for these bytes.
    Unverified,
    /// A record file that cannot be trusted (unreadable, another version, or about another
    /// location or blob); the location counts as unverified, and the reason is reported.
    Unusable(String),
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

    /// The record file of one (blob, location).
    pub fn location_record_path(&self, sha256: &str, uri: &str) -> PathBuf {
        let key = crate::sink::sha256_hex(uri.as_bytes());
        self.run
            .root()
            .join("store")
            .join("locations")
            .join(format!("{sha256}.{}.json", &key[..32]))
    }

    /// Whether `uri` has delivered the blob `sha256` of `bytes` bytes in an earlier run.
    pub fn location_check(&self, sha256: &str, bytes: u64, uri: &str) -> LocationCheck {
        let path = self.location_record_path(sha256, uri);
        if model::run_dir::is_link(&path) {
            return LocationCheck::Unusable(format!(
                "{} is a symbolic link; a run directory holds no links it did not make",
                path.display()
            ));
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return LocationCheck::Unverified;
            }
            Err(e) => return LocationCheck::Unusable(format!("{}: {e}", path.display())),
        };
        if let Err(e) = model::run_dir::check_json_version(&path, &text, LOCATION_RECORD_VERSION) {
            return LocationCheck::Unusable(e.to_string());
        }
        match serde_json::from_str::<LocationRecord>(&text) {
            Ok(r) if r.sha256 == sha256 && r.bytes == bytes && r.uri == uri => {
                LocationCheck::Verified(r)
            }
            Ok(_) => LocationCheck::Unusable(format!(
                "{}: the record is about another location or blob",
                path.display()
            )),
            Err(e) => LocationCheck::Unusable(format!("{}: {e}", path.display())),
        }
    }

    /// Record that a location delivered verified bytes (after they are in the store).
    pub fn record_location(&self, record: &LocationRecord) -> Result<(), IngestError> {
        let path = self.location_record_path(&record.sha256, &record.uri);
        model::run_dir::create_dir_below(self.run.root(), "store/locations")
            .map_err(IngestError::io(&path))?;
        let text = serde_json::to_string_pretty(record).expect("json") + "\n";
        frames::atomic_write(&path, text.as_bytes())?;
        Ok(())
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
