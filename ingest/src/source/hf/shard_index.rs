//! The member table of a raw shard at a pinned commit, kept on disk so that it is built
//! once (by `pipeline pin`, which reads every shard whole, or by the first fetch that walks
//! the shard's tar headers) and shared by every later process and shard task:
//! `shard-index/<key>.json`, the key the SHA256 of (repo, commit, shard path, size). A
//! fetch then reads only its member's byte range.
//!
//! A record is checked before use: its format version, that it names the same repo,
//! commit, path and size as the key (and the same `X-Linked-Etag` as the Hub's answer when
//! both have one), and that every member lies inside the shard, starts on a block boundary
//! and follows the one before. A record that fails is ignored with a warning and the
//! headers are walked again. The member's bytes are verified against the manifest's SHA256
//! as every fetch's are, so a table that names the wrong range costs a refetch, never
//! unverified bytes. Writing a record is best effort: a directory that cannot be written
//! leaves the table in memory only.

use crate::source::tar_index::MemberEntry;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Version of the record's layout; a record of another version is not used.
pub const SHARD_INDEX_FORMAT: u32 = 1;

/// The folder of the records, in a run directory or beside a pinned manifest.
pub const SHARD_INDEX_DIR: &str = "shard-index";

/// Which shard a record is of: the key of its file, and what its check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardAt<'a> {
    /// Dataset repository.
    pub repo: &'a str,
    /// The commit the shard is read at.
    pub commit: &'a str,
    /// The shard's path in the repository.
    pub path: &'a str,
    /// The shard's size.
    pub size: u64,
    /// The Hub's `X-Linked-Etag` of the shard, when known (not part of the key).
    pub etag: Option<&'a str>,
}

impl ShardAt<'_> {
    /// The file name of this shard's record: the SHA256 of (repo, commit, path, size).
    pub fn file_name(&self) -> String {
        let mut h = Sha256::new();
        for part in [self.repo, self.commit, self.path, &self.size.to_string()] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        format!("{}.json", hex::encode(h.finalize()))
    }
}

/// One member in a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexedMember {
    /// Member path in the shard.
    pub name: String,
    /// Offset of its first data byte.
    pub data_offset: u64,
    /// Its size.
    pub size: u64,
}

/// A shard's member table, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardIndexRecord {
    /// [`SHARD_INDEX_FORMAT`].
    pub format: u32,
    /// Dataset repository.
    pub repo: String,
    /// The commit the shard was read at.
    pub commit: String,
    /// The shard's path in the repository.
    pub path: String,
    /// The shard's size.
    pub size: u64,
    /// The Hub's `X-Linked-Etag` of the shard (its SHA256 for an LFS file), when known.
    pub etag: Option<String>,
    /// Whether every header was read (a member not in a complete table is not there).
    pub complete: bool,
    /// Where the next unread header starts (the shard's size once complete).
    pub next_header: u64,
    /// Regular members, in shard order.
    pub members: Vec<IndexedMember>,
}

impl ShardIndexRecord {
    /// The shard this record is of.
    pub fn at(&self) -> ShardAt<'_> {
        ShardAt {
            repo: &self.repo,
            commit: &self.commit,
            path: &self.path,
            size: self.size,
            etag: self.etag.as_deref(),
        }
    }

    /// Why the record cannot serve `shard`, if it cannot.
    pub fn check(&self, shard: &ShardAt<'_>) -> Result<(), String> {
        let ShardAt {
            repo,
            commit,
            path,
            size,
            etag,
        } = *shard;
        if self.format != SHARD_INDEX_FORMAT {
            return Err(format!(
                "format {} (this build reads {SHARD_INDEX_FORMAT})",
                self.format
            ));
        }
        if (
            self.repo.as_str(),
            self.commit.as_str(),
            self.path.as_str(),
            self.size,
        ) != (repo, commit, path, size)
        {
            return Err(format!(
                "it is the table of {}@{}/{} ({} bytes), not of {repo}@{commit}/{path} ({size} bytes)",
                self.repo, self.commit, self.path, self.size
            ));
        }
        if let (Some(mine), Some(theirs)) = (self.etag.as_deref(), etag)
            && mine != theirs
        {
            return Err(format!(
                "it was built for etag {mine}, the Hub now answers {theirs}"
            ));
        }
        let mut end = 0u64;
        for m in &self.members {
            if m.data_offset % 512 != 0 || m.data_offset < end + 512 {
                return Err(format!(
                    "member `{}` starts at byte {}, not on a block after the member before",
                    m.name, m.data_offset
                ));
            }
            end = m
                .data_offset
                .checked_add(m.size)
                .filter(|e| *e <= self.size)
                .ok_or_else(|| {
                    format!(
                        "member `{}` ends past the shard's {} bytes",
                        m.name, self.size
                    )
                })?;
        }
        if self.next_header > self.size || self.next_header < end {
            return Err(format!(
                "its next header ({}) is outside the shard or inside a member",
                self.next_header
            ));
        }
        Ok(())
    }

    /// The members as the fetch reads them.
    pub fn entries(&self) -> Vec<MemberEntry> {
        self.members
            .iter()
            .map(|m| MemberEntry {
                name: m.name.clone(),
                data_offset: m.data_offset,
                size: m.size,
            })
            .collect()
    }

    /// A record of `shard` holding `entries`.
    pub fn of(
        shard: &ShardAt<'_>,
        complete: bool,
        next_header: u64,
        entries: &[MemberEntry],
    ) -> ShardIndexRecord {
        ShardIndexRecord {
            format: SHARD_INDEX_FORMAT,
            repo: shard.repo.to_string(),
            commit: shard.commit.to_string(),
            path: shard.path.to_string(),
            size: shard.size,
            etag: shard.etag.map(str::to_string),
            complete,
            next_header,
            members: entries
                .iter()
                .map(|e| IndexedMember {
                    name: e.name.clone(),
                    data_offset: e.data_offset,
                    size: e.size,
                })
                .collect(),
        }
    }

    /// Whether this record knows more of the shard than `other`.
    pub fn knows_more_than(&self, other: &ShardIndexRecord) -> bool {
        (self.complete && !other.complete) || self.next_header > other.next_header
    }
}

/// Where records are read and written: the run directory's folder (read and written) and
/// others read only (beside the pinned manifest).
#[derive(Debug, Clone, Default)]
pub struct ShardIndexDirs {
    /// Read and written; `None` keeps tables in memory only.
    pub write: Option<PathBuf>,
    /// Also read, after `write`.
    pub read: Vec<PathBuf>,
}

impl ShardIndexDirs {
    /// The run directory's folder, and the one beside the manifest.
    pub fn for_run(run_dir: &Path, manifest: Option<&Path>) -> ShardIndexDirs {
        let write = run_dir.join(SHARD_INDEX_DIR);
        let read = manifest
            .and_then(Path::parent)
            .map(|d| d.join(SHARD_INDEX_DIR))
            .filter(|d| *d != write)
            .into_iter()
            .collect();
        ShardIndexDirs {
            write: Some(write),
            read,
        }
    }

    /// The best record of the shard that passes its check; records that fail are named in
    /// a warning and ignored.
    pub fn load(&self, shard: &ShardAt<'_>) -> Option<ShardIndexRecord> {
        let name = shard.file_name();
        let mut best: Option<ShardIndexRecord> = None;
        for dir in self.write.iter().chain(&self.read) {
            let file = dir.join(&name);
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    tracing::warn!(
                        "shard index {}: {e}; walking the shard's headers",
                        file.display()
                    );
                    continue;
                }
            };
            let checked = serde_json::from_str::<ShardIndexRecord>(&text)
                .map_err(|e| format!("not a shard index record ({e})"))
                .and_then(|r| r.check(shard).map(|()| r));
            match checked {
                Ok(r) if best.as_ref().is_none_or(|b| r.knows_more_than(b)) => best = Some(r),
                Ok(_) => {}
                Err(why) => tracing::warn!(
                    "shard index {} is not used: {why}; walking the shard's headers",
                    file.display()
                ),
            }
        }
        best
    }

    /// Store `record` in the written folder unless a record there knows as much; a failure
    /// is a warning (the table stays in memory).
    pub fn save(&self, record: &ShardIndexRecord) {
        let Some(dir) = &self.write else { return };
        if let Err(e) = write_record(dir, record) {
            tracing::warn!(
                "shard index of {}@{}/{} not stored in {}: {e}",
                record.repo,
                record.commit,
                record.path,
                dir.display()
            );
        }
    }
}

/// Write `record` into `dir` (atomically), unless the record there knows as much.
pub fn write_record(dir: &Path, record: &ShardIndexRecord) -> std::io::Result<()> {
    let file = dir.join(record.at().file_name());
    if let Ok(text) = std::fs::read_to_string(&file)
        && let Ok(there) = serde_json::from_str::<ShardIndexRecord>(&text)
        && there.check(&record.at()).is_ok()
        && !record.knows_more_than(&there)
    {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(record).expect("serializable") + "\n";
    frames::atomic_write(&file, text.as_bytes()).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    /// The test shard with `etag`, another `path` or another `size`.
    fn shard(path: &'static str, size: u64, etag: Option<&'static str>) -> ShardAt<'static> {
        ShardAt {
            repo: "o/d",
            commit: COMMIT,
            path,
            size,
            etag,
        }
    }

    fn record() -> ShardIndexRecord {
        ShardIndexRecord::of(
            &shard("raw/s-0.tar", 10_240, Some("e1")),
            true,
            10_240,
            &[
                MemberEntry {
                    name: "tmax-000.tar.gz".into(),
                    data_offset: 512,
                    size: 1000,
                },
                MemberEntry {
                    name: "tmax-001.tar.gz".into(),
                    data_offset: 2048,
                    size: 10,
                },
            ],
        )
    }

    #[test]
    fn a_record_serves_only_its_own_shard() {
        let r = record();
        assert_eq!(r.check(&shard("raw/s-0.tar", 10_240, Some("e1"))), Ok(()));
        assert_eq!(r.check(&shard("raw/s-0.tar", 10_240, None)), Ok(()));
        assert!(r.check(&shard("raw/s-0.tar", 10_240, Some("e2"))).is_err());
        assert!(r.check(&shard("raw/s-1.tar", 10_240, None)).is_err());
        assert!(r.check(&shard("raw/s-0.tar", 10_241, None)).is_err());
        assert_ne!(
            shard("raw/s-0.tar", 1, None).file_name(),
            shard("raw/s-0.tar", 2, None).file_name()
        );
        assert_eq!(
            shard("raw/s-0.tar", 1, Some("e1")).file_name(),
            shard("raw/s-0.tar", 1, None).file_name(),
            "the etag is checked, not part of the key"
        );
    }

    #[test]
    fn damaged_tables_are_refused() {
        let check = |r: &ShardIndexRecord| r.check(&shard("raw/s-0.tar", 10_240, None));
        let mut r = record();
        r.members[1].data_offset = 1024;
        assert!(check(&r).unwrap_err().contains("tmax-001"));
        let mut r = record();
        r.members[1].size = 10_000;
        assert!(check(&r).unwrap_err().contains("past the shard"));
        let mut r = record();
        r.members[0].data_offset = 513;
        assert!(check(&r).is_err());
        let mut r = record();
        r.format = 2;
        assert!(check(&r).unwrap_err().contains("format 2"));
        let mut r = record();
        r.next_header = 600;
        assert!(check(&r).is_err());
    }

    #[test]
    fn records_are_shared_through_the_folders_and_checked_on_read() {
        let run = tempfile::tempdir().unwrap();
        let pinned = tempfile::tempdir().unwrap();
        let dirs = ShardIndexDirs::for_run(run.path(), Some(&pinned.path().join("manifest.csv")));
        let at = shard("raw/s-0.tar", 10_240, None);
        assert_eq!(dirs.load(&at), None);
        let full = record();
        write_record(&pinned.path().join(SHARD_INDEX_DIR), &full).unwrap();
        assert_eq!(dirs.load(&at), Some(full.clone()));
        let mut partial = full.clone();
        partial.complete = false;
        partial.next_header = 2048;
        partial.members.truncate(1);
        dirs.save(&partial);
        assert_eq!(
            dirs.load(&at),
            Some(full.clone()),
            "the complete table wins over a partial one"
        );
        let file = pinned.path().join(SHARD_INDEX_DIR).join(at.file_name());
        std::fs::write(&file, "{ not json").unwrap();
        assert_eq!(dirs.load(&at), Some(partial.clone()));
        dirs.save(&full);
        dirs.save(&partial);
        assert_eq!(
            dirs.load(&at),
            Some(full),
            "a partial table does not replace a complete one"
        );
    }
}
