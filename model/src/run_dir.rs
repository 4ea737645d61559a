//! Where each stage's outputs live below `run_dir`, and the format versions they carry.

use std::path::{Path, PathBuf};

/// Version of every Parquet frame's schema, written into its key-value metadata.
pub const FRAME_SCHEMA_VERSION: u32 = 1;
/// Version of the JSON documents (`audit.json`, `provenance.json`, `run.json`).
pub const JSON_FORMAT_VERSION: u32 = 1;

/// A verified archive's stored path relative to the run directory: `store/sha256/<hex>`.
pub fn stored_archive_relative(sha256_hex: &str) -> String {
    format!("store/sha256/{sha256_hex}")
}

/// The run directory and its well-known files (flat, as SPEC 2 names them).
#[derive(Debug, Clone)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    /// Wrap a run directory path.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RunDir { root: root.into() }
    }
    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// A file directly below the run directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
    /// Content-addressed store of verified archives: `store/sha256/<hex>`.
    pub fn store_dir(&self) -> PathBuf {
        self.root.join("store").join("sha256")
    }
    /// The stored path of a verified archive.
    pub fn stored_archive(&self, sha256_hex: &str) -> PathBuf {
        self.root.join(stored_archive_relative(sha256_hex))
    }
    /// Where mismatching downloads are kept aside.
    pub fn quarantine_dir(&self) -> PathBuf {
        self.root.join("quarantine")
    }
}
