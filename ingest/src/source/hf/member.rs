//! Locating the member in its raw shard: the shard's member table from memory or from disk
//! ([`super::shard_index`]), else tar headers read by range, one at a time, into that table
//! (kept per (repo, commit, shard, size) in memory and on disk), until the member is found.

use super::resolve::Resolved;
use super::shard_index::{ShardAt, ShardIndexRecord};
use super::{HfSource, Probe, ShardIndex};
use crate::error::FetchError;
use crate::source::FetchInfo;
use crate::source::tar_index::{HeaderStep, MemberEntry, PendingMeta, padded};

impl HfSource {
    /// Find the member's data range by reading tar headers by range (cached per shard), or
    /// hand back a full answer when the content host ignores Range.
    pub(super) async fn find_member(
        &self,
        r: &mut Resolved<'_>,
        info: &mut FetchInfo,
    ) -> Result<Result<MemberEntry, reqwest::Response>, FetchError> {
        let (uri, loc) = (r.uri, r.loc);
        let key = (
            loc.repo.clone(),
            r.shard.commit.clone(),
            loc.shard.clone(),
            r.shard.size,
        );
        let etag = r.shard.etag.clone();
        let at = ShardAt {
            repo: &key.0,
            commit: &key.1,
            path: &key.2,
            size: key.3,
            etag: etag.as_deref(),
        };
        let cached = self.index.lock().expect("index lock").get(&key).cloned();
        let mut index = match cached {
            Some(i) => i,
            None => self
                .settings
                .shard_index
                .load(&at)
                .map(|rec| ShardIndex {
                    entries: rec.entries(),
                    next_header: rec.next_header,
                    complete: rec.complete,
                })
                .unwrap_or_default(),
        };
        let known_before = (index.complete, index.next_header);
        let not_found = || FetchError::NotFound {
            uri: uri.to_string(),
            detail: format!("raw shard `{}` has no member `{}`", loc.shard, loc.member),
        };
        if let Some(e) = index.entries.iter().find(|e| e.name == loc.member) {
            return Ok(Ok(e.clone()));
        }
        if index.complete {
            return Err(not_found());
        }
        let mut pos = index.next_header;
        let mut pending = PendingMeta::default();
        let found = loop {
            if pos + 512 > r.shard.size {
                index.complete = true;
                break None;
            }
            let block = match self.read_range(r, pos, 512, info).await? {
                Probe::Header(b) => b,
                Probe::RangeIgnored(resp) if pos == 0 => return Ok(Err(resp)),
                Probe::RangeIgnored(_) => {
                    return Err(FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: "the content host stopped honouring Range mid-index".into(),
                    });
                }
            };
            let block: [u8; 512] = block[..].try_into().expect("512 bytes read");
            let step = crate::source::tar_index::parse_header(&block, pos).map_err(|detail| {
                FetchError::Protocol {
                    uri: uri.to_string(),
                    detail: format!("raw shard `{}`: {detail}", loc.shard),
                }
            })?;
            match step {
                HeaderStep::End => {
                    index.complete = true;
                    break None;
                }
                HeaderStep::Meta {
                    kind,
                    data_offset,
                    size,
                } => {
                    let payload = if size == 0 {
                        Vec::new()
                    } else {
                        match self.read_range(r, data_offset, size, info).await? {
                            Probe::Header(b) => b,
                            Probe::RangeIgnored(_) => {
                                return Err(FetchError::Protocol {
                                    uri: uri.to_string(),
                                    detail: "the content host stopped honouring Range mid-index"
                                        .into(),
                                });
                            }
                        }
                    };
                    pending.apply(kind, &payload);
                    pos = data_offset + padded(size);
                }
                HeaderStep::Entry {
                    kind,
                    name,
                    data_offset,
                    size,
                } => {
                    let p = std::mem::take(&mut pending);
                    let name = p.path.unwrap_or(name);
                    let size = p.size.unwrap_or(size);
                    pos = data_offset + padded(size);
                    if data_offset + size > r.shard.size {
                        return Err(FetchError::Protocol {
                            uri: uri.to_string(),
                            detail: format!(
                                "member `{name}` ends at byte {}, past the shard's {} bytes",
                                data_offset + size,
                                r.shard.size
                            ),
                        });
                    }
                    index.next_header = pos;
                    if crate::source::tar_index::is_regular(kind) {
                        let entry = MemberEntry {
                            name,
                            data_offset,
                            size,
                        };
                        let hit = entry.name == loc.member;
                        index.entries.push(entry.clone());
                        if hit {
                            break Some(entry);
                        }
                    }
                }
            }
        };
        if (index.complete, index.next_header) != known_before {
            self.settings.shard_index.save(&ShardIndexRecord::of(
                &at,
                index.complete,
                index.next_header,
                &index.entries,
            ));
        }
        {
            let mut cache = self.index.lock().expect("index lock");
            let slot = cache.entry(key).or_default();
            if index.complete || index.next_header > slot.next_header {
                *slot = index;
            }
        }
        found.map(Ok).ok_or_else(not_found)
    }
}
