//! The Hub side of a pin, through the Hub's own API as `huggingface_hub`'s `HfApi` reads it:
//! `GET /api/datasets/{repo}/revision/{revision}` resolves the revision to its commit
//! (`sha`); `GET /api/datasets/{repo}/tree/{commit}[/{path}]?recursive=true` lists the files
//! at that commit, page by page (`Link: <...>; rel="next"`). Every `.tar` file listed is a
//! raw shard: it is resolved like any download (the same `HEAD` as ingest, the commit
//! checked) and streamed once from the content host, walking its tar headers and hashing
//! every regular member on the way. A broken stream continues by `Range` from the byte
//! reached (or restarts when the content host ignores `Range`); an expired content URL is
//! resolved again. A member whose first bytes are not an archive's, or that the filter
//! leaves out, is skipped with its reason; every shard's member table (with its data
//! offsets) is returned for the shard index ([`crate::source::hf::shard_index`]).

use super::{
    HfFound, HubPin, HubTarget, ObjectFilter, PinError, PinSettings, ShardPin, SkippedObject,
};
use crate::error::FetchError;
use crate::source::hf::shard_index::{ShardAt, ShardIndexRecord};
use crate::source::hf::{
    HfSettings, HfSource, HubRefusal, Resolved, content_range, content_status_error, quote_segment,
};
use crate::source::tar_index::MemberEntry;
use crate::source::tar_index::{TarEvent, TarWalker, WalkStatus};
use crate::source::{Backoff, FetchInfo};
use futures::{StreamExt, TryStreamExt};
use model::compression::ArchiveCompression;
use model::manifest::HfLocation;
use reqwest::{Method, StatusCode, Url};
use sha2::{Digest, Sha256};
use std::ops::ControlFlow;
use std::time::Duration;

/// Whole-request bound of one shard read (the connect and read timeouts catch a silent
/// server long before it).
const SHARD_READ_LIMIT: Duration = Duration::from_secs(6 * 3600);

/// `{endpoint}/api/datasets/{owner}/{name}/{segments...}`, each segment quoted whole (a
/// `/` inside one becomes `%2F`), as `huggingface_hub` quotes revisions and paths.
fn api_url(endpoint: &str, repo: &str, segments: &[&str]) -> Result<Url, PinError> {
    let mut text = format!("{}/api/datasets/{repo}", endpoint.trim_end_matches('/'));
    for s in segments {
        text.push('/');
        text.push_str(&quote_segment(s));
    }
    Url::parse(&text)
        .map_err(|e| PinError::Usage(format!("Hub endpoint `{endpoint}` is not a URL: {e}")))
}

/// The `rel="next"` target of a `Link` header.
fn next_link(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let value = headers.get(reqwest::header::LINK)?.to_str().ok()?;
    value.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"" || p.trim() == "rel=next");
        is_next.then(|| {
            target
                .trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
    })
}

/// Turn a non-success answer of the listing API into the refusal it means (read as
/// ingest reads the resolve answer's, [`HubRefusal`]).
fn api_refusal(
    resp: &reqwest::Response,
    uri: &str,
    target: &HubTarget,
    source: &HfSource,
) -> PinError {
    let status = resp.status();
    let asked = source.asked(&target.repo, &target.revision, &target.path);
    match HubRefusal::from_answer(status, resp.headers(), &asked) {
        Some(refusal) => PinError::Hub(FetchError::Hub {
            uri: uri.to_string(),
            refusal: Box::new(refusal),
        }),
        None => PinError::Hub(FetchError::Http {
            uri: uri.to_string(),
            status: status.as_u16(),
            attempts: 1,
            detail: "unexpected answer from the listing API".into(),
        }),
    }
}

/// GET a listing-API URL (token to the Hub), retrying transient faults, waiting out rate
/// limits and following redirects on the Hub's own origin (a renamed repository).
async fn api_get(
    source: &HfSource,
    uri: &str,
    url: Url,
    info: &mut FetchInfo,
) -> Result<(reqwest::Response, Url), PinError> {
    source
        .send_hub(uri, Method::GET, url, Some("application/json"), info)
        .await
        .map_err(|e| {
            PinError::unreachable(e, &source.settings().endpoint, "the Hub")
                .unwrap_or_else(PinError::Hub)
        })
}

async fn read_json(resp: reqwest::Response, uri: &str) -> Result<serde_json::Value, PinError> {
    let text = resp.text().await.map_err(|e| {
        PinError::Hub(FetchError::Protocol {
            uri: uri.to_string(),
            detail: format!(
                "reading the answer: {}",
                crate::source::retry::error_chain(&e)
            ),
        })
    })?;
    serde_json::from_str(&text).map_err(|e| {
        PinError::Hub(FetchError::Protocol {
            uri: uri.to_string(),
            detail: format!("the answer is not JSON ({e}); is HF_ENDPOINT a Hub?"),
        })
    })
}

/// What the Hub side of a pin found.
pub(super) struct HubSide {
    /// The dataset, commit and shards.
    pub pin: HubPin,
    /// The archives among the members.
    pub found: Vec<HfFound>,
    /// The members left out, with their reasons.
    pub skipped: Vec<SkippedObject>,
    /// Every shard's member table.
    pub indexes: Vec<ShardIndexRecord>,
}

/// Resolve the revision, list the shards and hash every member of every shard; keep the
/// members that are archives and that the filter keeps.
pub(super) async fn pin_dataset(
    target: &HubTarget,
    settings: &PinSettings,
    filter: &ObjectFilter,
) -> Result<HubSide, PinError> {
    if settings.hf_hub_offline {
        return Err(PinError::Usage(format!(
            "--hf {target}: HF_HUB_OFFLINE is set, and pinning must ask the Hub; unset HF_HUB_OFFLINE to pin"
        )));
    }
    let source = HfSource::with_timeouts(
        HfSettings {
            endpoint: settings.hf_endpoint.clone(),
            token: settings.hf_token.clone(),
            retries: settings.retries,
            request_timeout: SHARD_READ_LIMIT,
            initial_backoff: settings.initial_backoff,
            rate_limit_patience: settings.rate_limit_patience,
            progress: settings.progress.clone(),
            shard_index: Default::default(),
        },
        settings.timeout,
        settings.timeout,
    )
    .map_err(|e| PinError::Usage(e.to_string()))?;
    let mut info = FetchInfo::default();

    // 1. The revision's commit.
    let uri = format!("hf://datasets/{}@{}", target.repo, target.revision);
    let url = api_url(
        &settings.hf_endpoint,
        &target.repo,
        &["revision", &target.revision],
    )?;
    let (resp, _) = api_get(&source, &uri, url, &mut info).await?;
    if resp.status() != StatusCode::OK {
        return Err(api_refusal(&resp, &uri, target, &source));
    }
    let doc = read_json(resp, &uri).await?;
    let commit = doc["sha"].as_str().unwrap_or_default().to_string();
    if commit.len() != 40
        || !commit
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(PinError::Hub(FetchError::Protocol {
            uri,
            detail: format!(
                "the revision answer's `sha` is not a 40-hex commit: {:?}",
                doc["sha"]
            ),
        }));
    }

    // 2. The shards at that commit.
    let uri = format!("hf://datasets/{}@{commit}/{}", target.repo, target.path);
    let mut segments = vec!["tree", commit.as_str()];
    if !target.path.is_empty() {
        segments.push(&target.path);
    }
    let mut url = api_url(&settings.hf_endpoint, &target.repo, &segments)?;
    url.query_pairs_mut()
        .append_pair("recursive", "true")
        .append_pair("expand", "false");
    let mut shards: Vec<(String, u64)> = Vec::new();
    let mut next = Some(url);
    while let Some(url) = next.take() {
        let (resp, answered) = api_get(&source, &uri, url, &mut info).await?;
        if resp.status() != StatusCode::OK {
            return Err(api_refusal(&resp, &uri, target, &source));
        }
        if let Some(link) = next_link(resp.headers()) {
            next = Some(answered.join(&link).map_err(|e| {
                PinError::Hub(FetchError::Protocol {
                    uri: uri.clone(),
                    detail: format!("bad next-page link `{link}`: {e}"),
                })
            })?);
        }
        let page = read_json(resp, &uri).await?;
        let entries = page.as_array().ok_or_else(|| {
            PinError::Hub(FetchError::Protocol {
                uri: uri.clone(),
                detail: "the tree answer is not a JSON list".into(),
            })
        })?;
        for e in entries {
            let path = e["path"].as_str().unwrap_or_default();
            if e["type"] == "file" && path.to_ascii_lowercase().ends_with(".tar") {
                let size = e["lfs"]["size"].as_u64().or_else(|| e["size"].as_u64());
                shards.push((path.to_string(), size.unwrap_or(0)));
            }
        }
    }
    shards.sort();
    shards.dedup();
    if shards.is_empty() {
        return Err(PinError::Empty(format!("{uri} (no .tar shard)")));
    }

    // 3. Every member of every shard.
    let walked: Vec<WalkedShard> = futures::stream::iter(shards.iter())
        .map(|(path, size)| walk_shard(&source, &target.repo, &commit, path, *size, settings))
        .buffered(settings.parallel.max(1))
        .try_collect()
        .await?;
    let mut pins = Vec::with_capacity(walked.len());
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    let mut indexes = Vec::new();
    for shard in walked {
        let entries: Vec<MemberEntry> = shard
            .members
            .iter()
            .map(|m| MemberEntry {
                name: m.found.member.clone(),
                data_offset: m.data_offset,
                size: m.found.bytes,
            })
            .collect();
        indexes.push(ShardIndexRecord::of(
            &ShardAt {
                repo: &target.repo,
                commit: &commit,
                path: &shard.pin.path,
                size: shard.pin.bytes,
                etag: shard.etag.as_deref(),
            },
            true,
            shard.pin.bytes,
            &entries,
        ));
        for m in shard.members {
            let at = format!(
                "hf://datasets/{}@{commit}/{}#{}",
                target.repo, m.found.shard, m.found.member
            );
            let reason = match filter.leaves_out(&m.found.member) {
                Some(r) => Some(r),
                None if ArchiveCompression::detect(&m.head).is_none() => {
                    Some(super::not_archive_reason(&m.head))
                }
                None => None,
            };
            match reason {
                Some(reason) => skipped.push(SkippedObject {
                    at,
                    bytes: m.found.bytes,
                    reason,
                }),
                None => found.push(m.found),
            }
        }
        pins.push(shard.pin);
    }
    Ok(HubSide {
        pin: HubPin {
            endpoint: settings.hf_endpoint.clone(),
            repo: target.repo.clone(),
            revision: target.revision.clone(),
            commit,
            path: target.path.clone(),
            shards: pins,
        },
        found,
        skipped,
        indexes,
    })
}

/// One member as a shard walk found it.
struct WalkedMember {
    /// Where it is and its hash.
    found: HfFound,
    /// Offset of its first data byte in the shard.
    data_offset: u64,
    /// Its first bytes (up to the longest archive magic).
    head: Vec<u8>,
}

/// One shard as walked.
struct WalkedShard {
    pin: ShardPin,
    /// The Hub's `X-Linked-Etag` of the shard.
    etag: Option<String>,
    members: Vec<WalkedMember>,
}

/// The member being hashed.
struct Current {
    name: String,
    data_offset: u64,
    hasher: Sha256,
    bytes: u64,
    head: Vec<u8>,
}

/// Stream one shard once, hashing every regular member.
async fn walk_shard(
    source: &HfSource,
    repo: &str,
    commit: &str,
    path: &str,
    listed_size: u64,
    settings: &PinSettings,
) -> Result<WalkedShard, PinError> {
    let uri = format!("hf://datasets/{repo}@{commit}/{path}");
    let loc = HfLocation {
        repo: repo.to_string(),
        revision: commit.to_string(),
        shard: path.to_string(),
        member: String::new(),
    };
    let mut info = FetchInfo::default();
    let shard = source
        .resolve(&uri, &loc, &mut info)
        .await
        .map_err(PinError::Hub)?;
    let protocol = |detail: String| {
        PinError::Hub(FetchError::Protocol {
            uri: uri.clone(),
            detail,
        })
    };
    if listed_size != 0 && shard.size != listed_size {
        return Err(protocol(format!(
            "the tree lists {listed_size} bytes, the resolve answer announces {} (X-Linked-Size)",
            shard.size
        )));
    }
    let size = shard.size;
    let etag = shard.etag.clone();
    let mut r = Resolved {
        uri: &uri,
        loc: &loc,
        shard,
        re_resolves: 0,
    };
    let mut walker = TarWalker::new();
    let mut members: Vec<WalkedMember> = Vec::new();
    let mut current: Option<Current> = None;
    let mut resumes = 0u32;
    let mut backoff = Backoff::new(settings.initial_backoff);
    loop {
        let from = walker.offset();
        let range = (from > 0).then(|| (from, size.saturating_sub(1)));
        let resp = source
            .content_get(&mut r, range, &mut info)
            .await
            .map_err(PinError::Hub)?;
        match resp.status() {
            StatusCode::OK => {
                if from > 0 {
                    // The content host ignores Range: start over.
                    walker = TarWalker::new();
                    members.clear();
                    current = None;
                }
            }
            StatusCode::PARTIAL_CONTENT => match content_range(&resp) {
                Some((a, _, _)) if a == from => {}
                other => {
                    return Err(protocol(format!(
                        "asked for bytes from {from}, the content host answered range {:?}",
                        other.map(|(a, b, _)| (a, b))
                    )));
                }
            },
            s => return Err(PinError::Hub(content_status_error(&uri, s))),
        }
        let mut body = resp.bytes_stream();
        let mut broke = None;
        let mut status = WalkStatus::NeedMore;
        while let Some(item) = body.next().await {
            let chunk = match item {
                Ok(c) => c,
                Err(e) => {
                    broke = Some(crate::source::retry::error_chain(&e));
                    break;
                }
            };
            let fed = walker.feed::<std::convert::Infallible>(&chunk, &mut |ev| {
                match ev {
                    TarEvent::MemberStart {
                        name, data_offset, ..
                    } => {
                        current = Some(Current {
                            name: name.to_string(),
                            data_offset,
                            hasher: Sha256::new(),
                            bytes: 0,
                            head: Vec::with_capacity(ArchiveCompression::MAGIC_LEN),
                        });
                    }
                    TarEvent::Data(d) => {
                        if let Some(c) = current.as_mut() {
                            c.hasher.update(d);
                            c.bytes += d.len() as u64;
                            let take = ArchiveCompression::MAGIC_LEN
                                .saturating_sub(c.head.len())
                                .min(d.len());
                            c.head.extend_from_slice(&d[..take]);
                        }
                    }
                    TarEvent::MemberEnd => {
                        if let Some(c) = current.take() {
                            members.push(WalkedMember {
                                found: HfFound {
                                    shard: path.to_string(),
                                    member: c.name,
                                    sha256: hex::encode(c.hasher.finalize()),
                                    bytes: c.bytes,
                                },
                                data_offset: c.data_offset,
                                head: c.head,
                            });
                        }
                    }
                }
                Ok(ControlFlow::Continue(()))
            });
            status = match fed {
                Ok(Ok(s)) => s,
                Ok(Err(detail)) => return Err(protocol(format!("raw shard `{path}`: {detail}"))),
                Err(never) => match never {},
            };
            if status == WalkStatus::End {
                break;
            }
        }
        match (status, broke) {
            (WalkStatus::End, _) => break,
            (_, None) if walker.offset() == size && walker.at_entry_boundary() => break,
            (_, None) => {
                return Err(protocol(format!(
                    "raw shard `{path}` ended at byte {} of {size} inside an entry",
                    walker.offset()
                )));
            }
            (_, Some(detail)) => {
                if resumes >= settings.retries {
                    return Err(PinError::Hub(FetchError::Transport {
                        uri: uri.clone(),
                        attempts: resumes + 1,
                        reached: walker.offset(),
                        detail,
                    }));
                }
                resumes += 1;
                tracing::debug!(%uri, reached = walker.offset(), "shard body broke; resuming");
                backoff.wait(None).await;
            }
        }
    }
    Ok(WalkedShard {
        pin: ShardPin {
            path: path.to_string(),
            bytes: size,
            members: members.len(),
        },
        etag,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_links_and_api_urls() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            reqwest::header::LINK,
            "<https://hub.example/api/datasets/o/n/tree/abc?cursor=xyz>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_link(&h).as_deref(),
            Some("https://hub.example/api/datasets/o/n/tree/abc?cursor=xyz")
        );
        h.insert(
            reqwest::header::LINK,
            "<https://a/prev>; rel=\"prev\"".parse().unwrap(),
        );
        assert_eq!(next_link(&h), None);
        let u = api_url(
            "http://127.0.0.1:9/",
            "o/n",
            &["tree", "refs/pr/1", "raw/x"],
        )
        .unwrap();
        assert_eq!(
            u.as_str(),
            "http://127.0.0.1:9/api/datasets/o/n/tree/refs%2Fpr%2F1/raw%2Fx"
        );
    }
}
