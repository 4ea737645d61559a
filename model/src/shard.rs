//! Shards: ingest and audit run on a deterministic 1/N of the manifest's archives each
//! (`--shard I/N`), on as many machines as a user's batch system gives, writing below
//! `run_dir/shards/I-of-N/`; a merge checks that the shards are exactly the N parts of this
//! config's manifest and combines them into the one-process outputs.
//!
//! The rule: archive `a` belongs to shard `u64::from_be_bytes(sha256(a.archive_id)[..8]) % N`.
//! It depends on the archive's id alone, so an archive keeps its shard when the manifest
//! grows, and every machine computes the same split without talking to the others.

use crate::LoadedConfig;
use crate::manifest::ArchiveSpec;
use crate::run_dir::{DocumentError, JSON_FORMAT_VERSION, check_json_version, hash_file};
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::path::{Path, PathBuf};

/// One shard: index `index` of `count` (`0 <= index < count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shard {
    /// This shard's index.
    pub index: u32,
    /// How many shards the manifest is split into.
    pub count: u32,
}

/// A `--shard` value that is not `I/N` with `0 <= I < N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shard `{text}`: {why} (expected I/N with 0 <= I < N, e.g. 0/4)")]
pub struct ShardParseError {
    text: String,
    why: &'static str,
}

impl std::str::FromStr for Shard {
    type Err = ShardParseError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |why| ShardParseError {
            text: text.to_string(),
            why,
        };
        let (i, n) = text.split_once('/').ok_or_else(|| err("no `/`"))?;
        let index: u32 = i.trim().parse().map_err(|_| err("I is not a number"))?;
        let count: u32 = n.trim().parse().map_err(|_| err("N is not a number"))?;
        if count == 0 {
            return Err(err("N is 0"));
        }
        if index >= count {
            return Err(err("I is not below N"));
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-of-{}", self.index, self.count)
    }
}

/// The shard an archive belongs to among `count` shards.
pub fn shard_of(archive_id: &str, count: u32) -> u32 {
    let h = sha2::Sha256::digest(archive_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&h[..8]);
    (u64::from_be_bytes(first) % u64::from(count.max(1))) as u32
}

impl Shard {
    /// Whether this shard processes the archive.
    pub fn owns(&self, archive_id: &str) -> bool {
        shard_of(archive_id, self.count) == self.index
    }

    /// This shard's directory: `run_dir/shards/I-of-N/`.
    pub fn dir(&self, run_dir: &Path) -> PathBuf {
        run_dir.join(self.relative_dir())
    }

    /// This shard's directory relative to the run directory: `shards/I-of-N`.
    pub fn relative_dir(&self) -> PathBuf {
        Path::new("shards").join(self.to_string())
    }

    /// The config narrowed to this shard's archives (manifest order kept).
    pub fn narrow(&self, cfg: &LoadedConfig) -> LoadedConfig {
        LoadedConfig {
            archives: cfg
                .archives
                .iter()
                .filter(|a| self.owns(&a.archive_id))
                .cloned()
                .collect(),
            ..cfg.clone()
        }
    }
}

/// `run_dir/shards/`.
pub fn shards_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("shards")
}

/// SHA256 of the manifest as loaded (every archive's id, workload, hash, size and
/// locations, in order): shards of another manifest are refused by the merge.
pub fn manifest_sha256(archives: &[ArchiveSpec]) -> String {
    let text = serde_json::to_string(archives).unwrap_or_default();
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// What one shard of one stage saw, written as `shards/I-of-N/<stage>.shard.json` when the
/// shard finished; the merge reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRecord {
    /// [`JSON_FORMAT_VERSION`], checked on read.
    pub format_version: u32,
    /// The stage (`ingest`, `audit`).
    pub stage: String,
    /// This shard's index.
    pub index: u32,
    /// The shard count N.
    pub count: u32,
    /// SHA256 of the config text the shard ran.
    pub config_sha256: String,
    /// [`manifest_sha256`] of the whole manifest the shard split.
    pub manifest_sha256: String,
    /// The archives it processed, in manifest order.
    pub archives: Vec<String>,
    /// Every file the shard wrote for the merge, with its SHA256 and size as written: the
    /// merge reads only these, and refuses one whose bytes changed since.
    pub parts: Vec<ShardPart>,
}

/// One file a shard wrote for the merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardPart {
    /// The file's name in the shard's directory.
    pub file: String,
    /// SHA256 of its bytes, lowercase hex.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
}

impl ShardRecord {
    /// The record of `shard` of `stage` for `cfg` (the whole config, not narrowed).
    pub fn new(stage: &str, shard: Shard, cfg: &LoadedConfig) -> Self {
        ShardRecord {
            format_version: JSON_FORMAT_VERSION,
            stage: stage.to_string(),
            index: shard.index,
            count: shard.count,
            config_sha256: cfg.sha256.clone(),
            manifest_sha256: manifest_sha256(&cfg.archives),
            archives: cfg
                .archives
                .iter()
                .filter(|a| shard.owns(&a.archive_id))
                .map(|a| a.archive_id.clone())
                .collect(),
            parts: Vec::new(),
        }
    }

    /// The record with `files` (names in the shard's directory `dir`, as written) listed as
    /// its parts, each hashed now: called when the shard finished writing them.
    pub fn with_parts(
        mut self,
        dir: &Path,
        files: impl IntoIterator<Item = String>,
    ) -> std::io::Result<Self> {
        for file in files {
            let (sha256, bytes) = hash_file(&dir.join(&file)).map_err(|e| {
                std::io::Error::new(e.kind(), format!("{}: {e}", dir.join(&file).display()))
            })?;
            self.parts.push(ShardPart {
                file,
                sha256,
                bytes,
            });
        }
        Ok(self)
    }

    /// The path of a part the merge reads, which the record must list (its bytes were
    /// checked against the record by [`check_shards`]).
    pub fn part_path(&self, dir: &Path, file: &str) -> Result<PathBuf, ShardMergeError> {
        if self.parts.iter().any(|p| p.file == file) {
            Ok(dir.join(file))
        } else {
            Err(ShardMergeError::Foreign {
                dir: dir.to_path_buf(),
                why: format!(
                    "its record does not list the part `{file}` (a shard of an older build, or an edited record); rerun the shard"
                ),
            })
        }
    }

    /// Its file name below the shard's directory.
    pub fn file_name(stage: &str) -> String {
        format!("{stage}.shard.json")
    }
}

/// Why a set of shards cannot be merged; each names the shard directory at fault.
#[derive(Debug, thiserror::Error)]
pub enum ShardMergeError {
    /// No shard of the stage was found.
    #[error("{}: no {stage} shard found (run `{stage} --config F --shard I/N` for every I first)", dir.display())]
    None {
        /// `run_dir/shards`.
        dir: PathBuf,
        /// The stage.
        stage: String,
    },
    /// Shards of different counts sit side by side.
    #[error("{}: shards of different counts ({found}); remove the stale ones", dir.display())]
    MixedCounts {
        /// `run_dir/shards`.
        dir: PathBuf,
        /// The directories, named.
        found: String,
    },
    /// A shard of the count has not finished (no record).
    #[error("{}: missing: shard {missing} has no {file}", dir.display())]
    Missing {
        /// The missing shard's directory.
        dir: PathBuf,
        /// `I-of-N`.
        missing: String,
        /// The record file expected.
        file: String,
    },
    /// A shard ran another config or manifest, or is not the part its name says.
    #[error("{}: {why}", dir.display())]
    Foreign {
        /// The shard's directory.
        dir: PathBuf,
        /// What differs.
        why: String,
    },
    /// A record could not be read.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A directory could not be listed or a record read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Find the finished shards of `stage` below `run_dir/shards/` and check they are exactly
/// the `N` parts of `cfg`'s manifest under `cfg`'s config: one count, every index present
/// once, each record naming this config and manifest and the archives the rule gives it.
/// Returns the shards in index order.
pub fn check_shards(
    cfg: &LoadedConfig,
    stage: &str,
) -> Result<Vec<(Shard, ShardRecord)>, ShardMergeError> {
    let root = shards_dir(&cfg.run_dir);
    let file = ShardRecord::file_name(stage);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ShardMergeError::Io { path, source }
    };
    let mut found: Vec<Shard> = Vec::new();
    if root.is_dir() {
        for e in std::fs::read_dir(&root).map_err(io(&root))? {
            let e = e.map_err(io(&root))?;
            let name = e.file_name().to_string_lossy().to_string();
            let Some((i, n)) = name.split_once("-of-") else {
                continue;
            };
            let shard = format!("{i}/{n}")
                .parse::<Shard>()
                .ok()
                .filter(|s| s.to_string() == name);
            match shard {
                Some(s) if e.path().join(&file).is_file() => found.push(s),
                Some(_) => {}
                None => {
                    return Err(ShardMergeError::Foreign {
                        dir: e.path(),
                        why: "is named like a shard directory but is none (I-of-N with 0 <= I < N); remove or rename it".into(),
                    });
                }
            }
        }
    }
    found.sort();
    let Some(first) = found.first().copied() else {
        return Err(ShardMergeError::None {
            dir: root,
            stage: stage.to_string(),
        });
    };
    if found.iter().any(|s| s.count != first.count) {
        return Err(ShardMergeError::MixedCounts {
            dir: root,
            found: found
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let manifest = manifest_sha256(&cfg.archives);
    let mut out = Vec::new();
    for index in 0..first.count {
        let shard = Shard {
            index,
            count: first.count,
        };
        let dir = shard.dir(&cfg.run_dir);
        let path = dir.join(&file);
        if !found.contains(&shard) {
            return Err(ShardMergeError::Missing {
                dir,
                missing: shard.to_string(),
                file,
            });
        }
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        check_json_version(&path, &text, JSON_FORMAT_VERSION)?;
        let record: ShardRecord =
            serde_json::from_str(&text).map_err(|e| DocumentError::Invalid {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        let foreign = |why: String| ShardMergeError::Foreign {
            dir: dir.clone(),
            why,
        };
        if record.stage != stage || record.index != index || record.count != first.count {
            return Err(foreign(format!(
                "its record says {} shard {}/{}, not {stage} shard {index}/{}",
                record.stage, record.index, record.count, first.count
            )));
        }
        if record.config_sha256 != cfg.sha256 {
            return Err(foreign(format!(
                "ran another config (sha256 {}; this config is {})",
                record.config_sha256, cfg.sha256
            )));
        }
        if record.manifest_sha256 != manifest {
            return Err(foreign(format!(
                "split another manifest (sha256 {}; this manifest is {manifest})",
                record.manifest_sha256
            )));
        }
        let expected = ShardRecord::new(stage, shard, cfg).archives;
        if record.archives != expected {
            return Err(foreign(format!(
                "processed archives [{}], the rule gives it [{}]",
                record.archives.join(", "),
                expected.join(", ")
            )));
        }
        // A shard run again writes its parts before its new record: while it holds its
        // lock, the record on disk may describe parts that are being replaced.
        if let Err(e) = crate::RunLock::acquire(&dir, &format!("{stage} merge")) {
            return Err(foreign(format!("is still being written: {e}")));
        }
        for part in &record.parts {
            let path = dir.join(&part.file);
            if part.file.contains(['/', '\\']) || part.file.starts_with('.') {
                return Err(foreign(format!(
                    "its record lists `{}`, which is not a file of the shard's directory",
                    part.file
                )));
            }
            let changed = |why: String| ShardMergeError::Foreign {
                dir: path.clone(),
                why: format!(
                    "{why}; the part changed after shard {shard} finished: rerun that shard"
                ),
            };
            if crate::run_dir::is_link(&path) {
                return Err(ShardMergeError::Io {
                    source: crate::run_dir::link_refused(&path),
                    path,
                });
            }
            let (sha256, bytes) = hash_file(&path).map_err(io(&path))?;
            if bytes != part.bytes {
                return Err(changed(format!(
                    "{bytes} bytes, its shard record says {}",
                    part.bytes
                )));
            }
            if sha256 != part.sha256 {
                return Err(changed(format!(
                    "sha256 {sha256}, its shard record says {}",
                    part.sha256
                )));
            }
        }
        out.push((shard, record));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_values_parse_and_bad_ones_are_refused_naming_why() {
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 4 }
        );
        assert_eq!("2/4".parse::<Shard>().unwrap().to_string(), "2-of-4");
        for (text, why) in [
            ("4/4", "I is not below N"),
            ("0/0", "N is 0"),
            ("a/4", "I is not a number"),
            ("3", "no `/`"),
        ] {
            let e = text.parse::<Shard>().unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    /// Every archive is in exactly one shard; the split depends on the id alone (an
    /// archive keeps its shard when others are added), and spreads ids evenly enough.
    #[test]
    fn the_rule_partitions_and_is_stable_as_the_manifest_grows() {
        let ids: Vec<String> = (0..400).map(|i| format!("deepswe-{i:03}")).collect();
        for n in [1u32, 2, 3, 4, 7] {
            let mut sizes = vec![0usize; n as usize];
            for id in &ids {
                let owners: Vec<u32> = (0..n)
                    .filter(|&i| Shard { index: i, count: n }.owns(id))
                    .collect();
                assert_eq!(owners, [shard_of(id, n)]);
                sizes[owners[0] as usize] += 1;
            }
            let fair = ids.len() / n as usize;
            assert!(
                sizes.iter().all(|&s| s * 10 >= fair * 7),
                "n={n}: {sizes:?}"
            );
        }
        // Known values pin the rule (a change of rule would re-split users' shards); computed
        // independently: python3 -c "import hashlib; h=hashlib.sha256(b'tmax-000').digest();
        // print(int.from_bytes(h[:8], 'big') % 7)".
        assert_eq!(shard_of("tmax-000", 7), 2);
        assert_eq!(shard_of("deepswe-001", 4), 0);
    }
}
