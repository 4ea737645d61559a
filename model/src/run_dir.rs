//! Where each stage's outputs live below `run_dir`, and the format versions they carry.

use std::path::{Path, PathBuf};

/// Version of every Parquet frame's schema, written into its key-value metadata. What
/// changes it is docs/FRAMES.md's "Format version": any change a reader of the files can
/// see (columns, types, nulls, value sets, time bases, frames, meaning).
pub const FRAME_SCHEMA_VERSION: u32 = 2;
/// The fingerprint of the frames' contract at each format version: the SHA256 of
/// `pipeline::reference::frames_contract()` (every frame's columns, types, nulls, value
/// sets and time bases). A test fails when the contract's fingerprint is not the one
/// recorded for [`FRAME_SCHEMA_VERSION`]: a change a reader can see bumps the version and
/// records the new fingerprint here, the earlier ones kept.
pub const FRAME_SCHEMA_FINGERPRINTS: &[(u32, &str)] = &[
    (
        1,
        "661738e0d6f1c2b917b32787fd1213f1738645a8585827222b35775810767cec",
    ),
    (
        2,
        "09fd4d13a644d7a657fb030fa53d846a6ebdce67f19537f983fc31b75a513d46",
    ),
];
/// Version of the JSON documents (`audit.json`, `provenance.json`, `run.json`).
pub const JSON_FORMAT_VERSION: u32 = 1;

/// SHA256 (lowercase hex) and size of a file, streaming: the one hashing every check of
/// stored bytes, shard parts and recorded outputs uses.
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    use sha2::Digest;
    let mut f = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = std::io::Read::read(&mut f, &mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), total))
}

/// A verified archive's stored path relative to the run directory: `store/sha256/<hex>`.
pub fn stored_archive_relative(sha256_hex: &str) -> String {
    format!("store/sha256/{sha256_hex}")
}

/// The run directory and its well-known files (flat, as docs/FORMAT.md, "Outputs", names them).
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

/// The error for a symbolic link found where a run writes: the run directory holds no
/// links it did not make, so nothing is written through one (a lock note, a stage record
/// or a shard part would otherwise land in whatever file the link names).
pub fn link_refused(link: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "{} is a symbolic link; a run directory holds no links it did not make, so nothing is written through it (remove the link)",
        link.display()
    ))
}

/// Whether `path` itself is a symbolic link (a missing path is not).
pub fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Create `root/rel` directory by directory, refusing any symbolic link below `root` on
/// the way (`root` itself may be one: a run directory on another disk). Returns the path.
pub fn create_dir_below(root: &Path, rel: impl AsRef<Path>) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    let mut path = root.to_path_buf();
    for part in rel.as_ref().components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => return Err(link_refused(&path)),
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a directory",
                    path.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match std::fs::create_dir(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(path)
}

/// Whether a directory is a run directory of this toolkit: one of its commands has written
/// there (every writer takes the lock, which leaves `.lock`; `pipeline run` also keeps
/// `.stages/`).
pub fn is_toolkit_run_dir(root: &Path) -> bool {
    root.join(".lock").is_file() || root.join(".stages").is_dir()
}

/// A command would replace files it did not write: in a directory no command of this
/// toolkit has written to, these files are already there.
#[derive(Debug, thiserror::Error)]
#[error(
    "run directory {} already holds {} that no run wrote there: {}; pass --force to replace them, or choose another run_dir",
    root.display(),
    if files.len() == 1 { "a file" } else { "files" },
    files.join(", ")
)]
pub struct ForeignFiles {
    /// The directory.
    pub root: PathBuf,
    /// The files, relative to it.
    pub files: Vec<String>,
}

/// Refuse to write into a directory no command of this toolkit has written to when any of
/// `files` (relative to it) is already there, unless `force`. `ours` says which existing
/// files are not a conflict (a config snapshot equal to the config being run, say).
pub fn refuse_foreign_files(
    root: &Path,
    files: &[String],
    force: bool,
    ours: impl Fn(&str, &Path) -> bool,
) -> Result<(), ForeignFiles> {
    if force || is_toolkit_run_dir(root) {
        return Ok(());
    }
    let foreign: Vec<String> = files
        .iter()
        .filter(|name| {
            let path = root.join(name);
            path.exists() && !ours(name, &path)
        })
        .cloned()
        .collect();
    if foreign.is_empty() {
        Ok(())
    } else {
        Err(ForeignFiles {
            root: root.to_path_buf(),
            files: foreign,
        })
    }
}

/// A JSON document of a run (`audit.json`, `replay.json`, `provenance.json`, a stage
/// record) that cannot be read as this build's format.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// Written in another format version.
    #[error("{}: format_version {found}, this build reads version {expected}; rerun the stage (or use the build that wrote it)", path.display())]
    Version {
        /// The document.
        path: PathBuf,
        /// The version it carries (`none` when absent).
        found: String,
        /// The version this build reads.
        expected: u32,
    },
    /// Not valid JSON, or a field is missing, unknown or of the wrong type.
    #[error("{}: {detail}", path.display())]
    Invalid {
        /// The document.
        path: PathBuf,
        /// What is wrong (serde's words, with the field and position).
        detail: String,
    },
}

/// Check a JSON document's `format_version` before reading it as a type, so that a document
/// of another version is refused as such rather than as a missing or unknown field.
pub fn check_json_version(path: &Path, text: &str, expected: u32) -> Result<(), DocumentError> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        format_version: Option<serde_json::Value>,
    }
    let v: Versioned = serde_json::from_str(text).map_err(|e| DocumentError::Invalid {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    match v.format_version {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(u64::from(expected)) => Ok(()),
        found => Err(DocumentError::Version {
            path: path.to_path_buf(),
            found: found.map_or_else(|| "none".to_string(), |f| f.to_string()),
            expected,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_of_another_version_is_refused_naming_both_versions() {
        let p = Path::new("run/audit.json");
        assert!(check_json_version(p, r#"{"format_version": 1, "x": 2}"#, 1).is_ok());
        let e = check_json_version(p, r#"{"format_version": 2}"#, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "run/audit.json: format_version 2, this build reads version 1; rerun the stage (or use the build that wrote it)"
        );
        let e = check_json_version(p, r#"{"workloads": {}}"#, 1).unwrap_err();
        assert!(e.to_string().contains("format_version none"), "{e}");
        let e = check_json_version(p, "not json", 1).unwrap_err();
        assert!(matches!(e, DocumentError::Invalid { .. }), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn directories_below_the_root_are_made_but_links_there_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("run");
        let made = create_dir_below(&root, "shards/0-of-2").unwrap();
        assert!(made.is_dir() && made == root.join("shards/0-of-2"));
        // Again: already there is fine.
        create_dir_below(&root, "shards/0-of-2").unwrap();
        let elsewhere = d.path().join("users-own");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join(".stages")).unwrap();
        let e = create_dir_below(&root, ".stages").unwrap_err().to_string();
        assert!(e.contains(".stages is a symbolic link"), "{e}");
        std::os::unix::fs::symlink(&elsewhere, root.join("shards/1-of-2")).unwrap();
        let e = create_dir_below(&root, "shards/1-of-2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("1-of-2 is a symbolic link"), "{e}");
        // The root itself may be a link.
        let linked_root = d.path().join("linked-run");
        std::os::unix::fs::symlink(&root, &linked_root).unwrap();
        create_dir_below(&linked_root, "shards/0-of-2").unwrap();
        assert!(is_link(&root.join(".stages")) && !is_link(&root.join("absent")));
    }
}
