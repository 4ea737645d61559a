//! The Hugging Face location: a member of a raw shard pinned to a commit, fetched with the
//! Hub's resolve protocol as its own client expects it.
//!
//! 1. `HEAD {endpoint}/datasets/{repo}/resolve/{revision}/{shard}` without following
//!    redirects; the 302 carries `X-Repo-Commit` (must equal the pinned revision),
//!    `X-Linked-Etag` and `X-Linked-Size`; `Location` names the content host.
//! 2. The content host is asked for the shard's tar headers by byte range, one header at a
//!    time, until the member is found (`member_range`); the index is cached per
//!    (repo, commit, shard). Then only the member's bytes are read. If the content host
//!    ignores `Range`, the shard is streamed from byte 0 until the member is complete
//!    (`shard_scan`).
//! 3. Content URLs are signed and expire: a 401 or 403 from the content host makes the
//!    source resolve the shard again (same `HEAD`, same pin check). The new answer must
//!    name the same commit, `X-Linked-Etag` and `X-Linked-Size` as the first, or the fetch
//!    is refused ([`FetchError::ResolveChanged`]); then the request is repeated at the new
//!    URL, continuing from the bytes the sink holds. At most `retries` re-resolves per fetch
//!    (each counted in [`FetchInfo::retries`]); after that the refusal is
//!    [`FetchError::Denied`].
//! 4. `HF_TOKEN` goes to the Hub as a bearer token, and to the content host only when it has
//!    the Hub's origin. It is never logged.

use super::tar_index::{HeaderStep, MemberEntry, PendingMeta, ScanStatus, TarScanner, padded};
use super::{ArchiveSource, Backoff, FetchInfo, FetchMethod, retry_after};
use crate::error::FetchError;
use crate::options::HfToken;
use crate::sink::ByteSink;
use futures::StreamExt;
use futures::future::BoxFuture;
use model::ArchiveSpec;
use model::config::LocationKind;
use model::manifest::HfLocation;
use reqwest::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_RANGE, ETAG, LOCATION, RANGE};
use reqwest::{Method, StatusCode, Url};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How to reach the Hub.
#[derive(Debug, Clone)]
pub struct HfSettings {
    /// Hub base URL (no trailing slash).
    pub endpoint: String,
    /// Bearer token for the Hub.
    pub token: Option<HfToken>,
    /// Retries of a transient fault, and resumes of a broken body.
    pub retries: u32,
    /// Whole-request timeout.
    pub request_timeout: Duration,
    /// First retry pause.
    pub initial_backoff: Duration,
}

/// What the Hub's resolve answer says about a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedShard {
    /// `X-Repo-Commit`.
    pub commit: String,
    /// `X-Linked-Etag` (or `ETag`), unquoted: the shard's SHA256 for LFS files.
    pub etag: Option<String>,
    /// `X-Linked-Size` (or `Content-Length` for a direct answer).
    pub size: u64,
    /// Where the bytes are.
    pub content_url: Url,
    /// Whether the content host has the Hub's origin (the token may go there).
    pub same_origin: bool,
}

/// One fetch's view of its shard: where the archive is, the Hub's current answer (facts
/// fixed by the first resolve, content URL renewed by re-resolves) and how many times the
/// URL was re-resolved.
pub(crate) struct Resolved<'f> {
    pub(crate) uri: &'f str,
    pub(crate) loc: &'f HfLocation,
    pub(crate) shard: ResolvedShard,
    pub(crate) re_resolves: u32,
}

#[derive(Debug, Clone, Default)]
struct ShardIndex {
    entries: Vec<MemberEntry>,
    next_header: u64,
    complete: bool,
}

type ShardKey = (String, String, String);

/// Reads archives out of Hub raw shards.
#[derive(Debug)]
pub struct HfSource {
    client: reqwest::Client,
    settings: HfSettings,
    index: Mutex<HashMap<ShardKey, ShardIndex>>,
}

/// `hf://datasets/repo@revision/shard#member` of an archive's Hub location.
pub fn hf_uri(archive: &ArchiveSpec) -> Option<String> {
    archive.hf.as_ref().map(|h| h.uri())
}

enum Probe {
    Header(Vec<u8>),
    RangeIgnored(reqwest::Response),
}

fn origin(u: &Url) -> (String, Option<String>, Option<u16>) {
    (
        u.scheme().to_string(),
        u.host_str().map(str::to_ascii_lowercase),
        u.port_or_known_default(),
    )
}

fn normalize_etag(v: &str) -> String {
    v.trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_string()
}

fn header_str(resp: &reqwest::Response, name: &str) -> Option<String> {
    header_of(resp.headers(), name)
}

/// A transport error with its causes (`error sending request: ...: Connection refused`),
/// without the URL (it may carry a signed query).
pub(crate) fn error_chain(e: &reqwest::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    let url = e.url().map(|u| u.as_str().to_string());
    let joined = parts.join(": ");
    match url {
        Some(u) => joined.replace(&format!(" for url ({u})"), ""),
        None => joined,
    }
}

fn is_transient(e: &reqwest::Error) -> bool {
    e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() || e.is_decode()
}

/// Interpret the headers of the Hub's answer to a resolve request (a 2xx or a redirect):
/// the served commit must equal the pinned revision; the size, the ETag and where the bytes
/// are come from the answer itself. Pure, so the header handling can be fuzzed.
pub fn interpret_resolve_headers(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    hub_url: &Url,
    pinned: &str,
    uri: &str,
) -> Result<ResolvedShard, FetchError> {
    let commit = header_of(headers, "x-repo-commit").ok_or_else(|| FetchError::Protocol {
        uri: uri.to_string(),
        detail: "the resolve answer has no X-Repo-Commit header; is HF_ENDPOINT a Hub?".into(),
    })?;
    if commit != pinned {
        return Err(FetchError::CommitMismatch {
            uri: uri.to_string(),
            pinned: pinned.to_string(),
            served: commit,
        });
    }
    let redirected = status.is_redirection();
    let etag = header_of(headers, "x-linked-etag")
        .or_else(|| {
            headers
                .get(ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .map(|e| normalize_etag(&e));
    let size_text = if redirected {
        header_of(headers, "x-linked-size")
    } else {
        header_of(headers, "x-linked-size").or_else(|| {
            headers
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
    };
    let size = size_text
        .as_deref()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or_else(|| FetchError::Protocol {
            uri: uri.to_string(),
            detail: "the resolve answer has no usable X-Linked-Size".into(),
        })?;
    let content_url = if redirected {
        let loc_text = headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| FetchError::Protocol {
                uri: uri.to_string(),
                detail: format!("redirect {} without a Location", status.as_u16()),
            })?;
        hub_url.join(loc_text).map_err(|e| FetchError::Protocol {
            uri: uri.to_string(),
            detail: format!("bad Location `{loc_text}`: {e}"),
        })?
    } else {
        hub_url.clone()
    };
    let same_origin = origin(&content_url) == origin(hub_url);
    Ok(ResolvedShard {
        commit,
        etag,
        size,
        content_url,
        same_origin,
    })
}

fn header_of(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// `bytes a-b/total` of a 206 answer.
pub(crate) fn content_range(resp: &reqwest::Response) -> Option<(u64, u64, Option<u64>)> {
    let v = resp.headers().get(CONTENT_RANGE)?.to_str().ok()?;
    let rest = v.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    Some((
        a.trim().parse().ok()?,
        b.trim().parse().ok()?,
        total.trim().parse().ok(),
    ))
}

impl HfSource {
    /// Build the HTTP client (no redirects followed; every hop is read explicitly).
    pub fn new(settings: HfSettings) -> Result<HfSource, crate::error::IngestError> {
        HfSource::with_timeouts(settings, Duration::from_secs(30), Duration::from_secs(120))
    }

    /// [`HfSource::new`] with other bounds on connecting and on each wait for the next bytes
    /// of an answer.
    pub fn with_timeouts(
        settings: HfSettings,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Result<HfSource, crate::error::IngestError> {
        if let Some(problem) = settings.token.as_ref().and_then(HfToken::header_problem) {
            return Err(crate::error::IngestError::Config(problem.into()));
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.request_timeout)
            .connect_timeout(connect_timeout)
            .read_timeout(read_timeout)
            .user_agent(concat!("agentrace-ingest/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| crate::error::IngestError::Config(format!("HTTP client: {e}")))?;
        Ok(HfSource {
            client,
            settings,
            index: Mutex::new(HashMap::new()),
        })
    }

    /// The resolve URL of a shard at the pinned revision.
    pub fn resolve_url(&self, loc: &HfLocation) -> String {
        format!(
            "{}/datasets/{}/resolve/{}/{}",
            self.settings.endpoint, loc.repo, loc.revision, loc.shard
        )
    }

    /// The HTTP client (no redirects followed).
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The settings.
    pub(crate) fn settings(&self) -> &HfSettings {
        &self.settings
    }

    /// Send a request, retrying transient statuses (429, 5xx) and connection failures.
    pub(crate) async fn send(
        &self,
        uri: &str,
        info: &mut FetchInfo,
        build: &(dyn Fn() -> reqwest::RequestBuilder + Sync),
    ) -> Result<reqwest::Response, FetchError> {
        let mut backoff = Backoff::new(self.settings.initial_backoff);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let can_retry = attempts <= self.settings.retries;
            match build().send().await {
                Ok(resp) => {
                    let s = resp.status();
                    if s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error() {
                        if can_retry {
                            info.retries += 1;
                            tracing::debug!(%uri, status = s.as_u16(), "transient status; retrying");
                            backoff.wait(retry_after(resp.headers())).await;
                            continue;
                        }
                        let detail = resp.text().await.unwrap_or_default();
                        return Err(FetchError::Http {
                            uri: uri.to_string(),
                            status: s.as_u16(),
                            attempts,
                            detail: detail.chars().take(200).collect(),
                        });
                    }
                    return Ok(resp);
                }
                Err(e) if is_transient(&e) && can_retry => {
                    info.retries += 1;
                    tracing::debug!(%uri, error = %e, "transport error; retrying");
                    backoff.wait(None).await;
                }
                Err(e) => {
                    return Err(FetchError::Transport {
                        uri: uri.to_string(),
                        attempts,
                        reached: 0,
                        detail: error_chain(&e),
                    });
                }
            }
        }
    }

    /// Ask the Hub where the pinned shard is; check the commit.
    pub async fn resolve(
        &self,
        uri: &str,
        loc: &HfLocation,
        info: &mut FetchInfo,
    ) -> Result<ResolvedShard, FetchError> {
        let url_text = self.resolve_url(loc);
        let hub_url = Url::parse(&url_text).map_err(|e| FetchError::Protocol {
            uri: uri.to_string(),
            detail: format!("bad resolve URL {url_text}: {e}"),
        })?;
        let resp = self
            .send(uri, info, &|| {
                let mut rb = self
                    .client
                    .request(Method::HEAD, hub_url.clone())
                    .header("Accept-Encoding", "identity");
                if let Some(t) = &self.settings.token {
                    rb = rb.bearer_auth(t.expose());
                }
                rb
            })
            .await?;
        let status = resp.status();
        let error_code = header_str(&resp, "x-error-code");
        match status.as_u16() {
            200 | 301 | 302 | 303 | 307 | 308 => {}
            401 | 403 => {
                return Err(FetchError::Denied {
                    uri: uri.to_string(),
                    status: status.as_u16(),
                    detail: if self.settings.token.is_some() {
                        "the Hub refused HF_TOKEN".into()
                    } else {
                        "the Hub wants a token; set HF_TOKEN".into()
                    },
                });
            }
            404 => {
                return Err(FetchError::NotFound {
                    uri: uri.to_string(),
                    detail: format!(
                        "the Hub has no `{}` at revision {} of dataset `{}`{}",
                        loc.shard,
                        loc.revision,
                        loc.repo,
                        error_code.map(|c| format!(" ({c})")).unwrap_or_default()
                    ),
                });
            }
            s => {
                return Err(FetchError::Http {
                    uri: uri.to_string(),
                    status: s,
                    attempts: 1,
                    detail: "unexpected answer to the resolve request".into(),
                });
            }
        }
        interpret_resolve_headers(status, resp.headers(), &hub_url, &loc.revision, uri)
    }

    fn content_request(&self, shard: &ResolvedShard) -> reqwest::RequestBuilder {
        let mut rb = self
            .client
            .get(shard.content_url.clone())
            .header("Accept-Encoding", "identity");
        if shard.same_origin
            && let Some(t) = &self.settings.token
        {
            rb = rb.header(AUTHORIZATION, format!("Bearer {}", t.expose()));
        }
        rb
    }

    /// GET the shard (the inclusive byte range `range`, or all of it) from the content host.
    /// A 401 or 403 means the signed content URL expired: the shard is resolved again
    /// ([`HfSource::re_resolve`]) and the same request repeated at the new URL, at most
    /// `retries` times per fetch; then the refusal is [`FetchError::Denied`]. Any other
    /// answer is handed back for the caller to judge.
    pub(crate) async fn content_get(
        &self,
        r: &mut Resolved<'_>,
        range: Option<(u64, u64)>,
        info: &mut FetchInfo,
    ) -> Result<reqwest::Response, FetchError> {
        loop {
            let resp = {
                let shard = &r.shard;
                self.send(r.uri, info, &|| {
                    let rb = self.content_request(shard);
                    match range {
                        Some((a, b)) => rb.header(RANGE, format!("bytes={a}-{b}")),
                        None => rb,
                    }
                })
                .await?
            };
            let status = resp.status();
            if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
                return Ok(resp);
            }
            let said = short_text(resp).await;
            if r.re_resolves >= self.settings.retries {
                return Err(FetchError::Denied {
                    uri: r.uri.to_string(),
                    status: status.as_u16(),
                    detail: format!(
                        "the content host refused the request{} after the URL was re-resolved {} time(s)",
                        if said.is_empty() {
                            String::new()
                        } else {
                            format!(" ({said})")
                        },
                        r.re_resolves
                    ),
                });
            }
            r.re_resolves += 1;
            info.retries += 1;
            tracing::debug!(
                uri = %r.uri,
                status = status.as_u16(),
                re_resolves = r.re_resolves,
                "the content host refused the content URL (expired?); resolving the shard again"
            );
            self.re_resolve(r, info).await?;
        }
    }

    /// Resolve the shard again for a fresh content URL. The answer must repeat the first
    /// one's commit, `X-Linked-Etag` and `X-Linked-Size`: the bytes under a pinned commit
    /// do not change, and bytes already in the sink were read under the first answer.
    async fn re_resolve(
        &self,
        r: &mut Resolved<'_>,
        info: &mut FetchInfo,
    ) -> Result<(), FetchError> {
        let first = &r.shard;
        let mut changes = Vec::new();
        let fresh = match self.resolve(r.uri, r.loc, info).await {
            Ok(fresh) => Some(fresh),
            Err(FetchError::CommitMismatch { served, .. }) => {
                changes.push(format!("commit {} -> {served}", first.commit));
                None
            }
            Err(e) => return Err(e),
        };
        if let Some(fresh) = &fresh {
            if fresh.commit != first.commit {
                changes.push(format!("commit {} -> {}", first.commit, fresh.commit));
            }
            if fresh.etag != first.etag {
                let show = |e: &Option<String>| e.clone().unwrap_or_else(|| "(none)".into());
                changes.push(format!(
                    "X-Linked-Etag {} -> {}",
                    show(&first.etag),
                    show(&fresh.etag)
                ));
            }
            if fresh.size != first.size {
                changes.push(format!("X-Linked-Size {} -> {}", first.size, fresh.size));
            }
        }
        match fresh {
            Some(fresh) if changes.is_empty() => {
                r.shard = fresh;
                Ok(())
            }
            _ => Err(FetchError::ResolveChanged {
                uri: r.uri.to_string(),
                changes: changes.join(", "),
            }),
        }
    }

    /// Read `len` bytes at `start` of the shard, or hand back a full answer if the content
    /// host ignored the Range header.
    async fn read_range(
        &self,
        r: &mut Resolved<'_>,
        start: u64,
        len: u64,
        info: &mut FetchInfo,
    ) -> Result<Probe, FetchError> {
        let uri = r.uri;
        let mut backoff = Backoff::new(self.settings.initial_backoff);
        let mut breaks = 0u32;
        loop {
            let resp = self
                .content_get(r, Some((start, start + len - 1)), info)
                .await?;
            match resp.status() {
                StatusCode::PARTIAL_CONTENT => {}
                StatusCode::OK => return Ok(Probe::RangeIgnored(resp)),
                s => return Err(content_status_error(uri, s)),
            }
            match content_range(&resp) {
                Some((a, b, total)) if a == start && b == start + len - 1 => {
                    if let Some(t) = total
                        && t != r.shard.size
                    {
                        return Err(size_disagreement(uri, t, r.shard.size));
                    }
                }
                other => {
                    return Err(FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: format!(
                            "asked for bytes {}-{}, the content host answered range {:?}",
                            start,
                            start + len - 1,
                            other.map(|(a, b, _)| (a, b))
                        ),
                    });
                }
            }
            match resp.bytes().await {
                Ok(b) if b.len() as u64 == len => return Ok(Probe::Header(b.to_vec())),
                Ok(b) => {
                    return Err(FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: format!("asked for {len} bytes at {start}, got {}", b.len()),
                    });
                }
                Err(e) => {
                    breaks += 1;
                    if breaks > self.settings.retries {
                        return Err(FetchError::Transport {
                            uri: uri.to_string(),
                            attempts: breaks,
                            reached: 0,
                            detail: e.without_url().to_string(),
                        });
                    }
                    info.retries += 1;
                    backoff.wait(None).await;
                }
            }
        }
    }

    /// Find the member's data range by reading tar headers by range (cached per shard), or
    /// hand back a full answer when the content host ignores Range.
    async fn find_member(
        &self,
        r: &mut Resolved<'_>,
        info: &mut FetchInfo,
    ) -> Result<Result<MemberEntry, reqwest::Response>, FetchError> {
        let (uri, loc) = (r.uri, r.loc);
        let key = (loc.repo.clone(), r.shard.commit.clone(), loc.shard.clone());
        let mut index = {
            let cache = self.index.lock().expect("index lock");
            cache.get(&key).cloned().unwrap_or_default()
        };
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
            let step = super::tar_index::parse_header(&block, pos).map_err(|detail| {
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
                    if super::tar_index::is_regular(kind) {
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
        {
            let mut cache = self.index.lock().expect("index lock");
            let slot = cache.entry(key).or_default();
            if index.complete || index.next_header > slot.next_header {
                *slot = index;
            }
        }
        found.map(Ok).ok_or_else(not_found)
    }

    /// Copy the member's byte range into the sink, resuming a broken body by Range.
    async fn copy_member_range(
        &self,
        r: &mut Resolved<'_>,
        entry: &MemberEntry,
        sink: &mut dyn ByteSink,
        info: &mut FetchInfo,
    ) -> Result<(), FetchError> {
        let uri = r.uri;
        let end = entry.data_offset + entry.size;
        let mut backoff = Backoff::new(self.settings.initial_backoff);
        let mut attempts = 0;
        loop {
            let from = entry.data_offset + sink.offset();
            if from >= end {
                return Ok(());
            }
            attempts += 1;
            let resp = self.content_get(r, Some((from, end - 1)), info).await?;
            if resp.status() != StatusCode::PARTIAL_CONTENT {
                return Err(match resp.status() {
                    StatusCode::OK => FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: "the content host stopped honouring Range".into(),
                    },
                    s => content_status_error(uri, s),
                });
            }
            match content_range(&resp) {
                Some((a, b, total)) if a == from && b == end - 1 => {
                    if let Some(t) = total
                        && t != r.shard.size
                    {
                        return Err(size_disagreement(uri, t, r.shard.size));
                    }
                }
                other => {
                    return Err(FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: format!(
                            "asked for bytes {from}-{}, the content host answered range {:?}",
                            end - 1,
                            other.map(|(a, b, _)| (a, b))
                        ),
                    });
                }
            }
            let mut body = resp.bytes_stream();
            let mut broke = None;
            while let Some(item) = body.next().await {
                match item {
                    Ok(chunk) => sink.write(&chunk)?,
                    Err(e) => {
                        broke = Some(e);
                        break;
                    }
                }
            }
            let reached = entry.data_offset + sink.offset();
            match broke {
                None if reached == end => return Ok(()),
                None => {
                    return Err(FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: format!(
                            "the content host ended the member's range at byte {reached} of {end}"
                        ),
                    });
                }
                Some(e) => {
                    if info.resumes >= self.settings.retries {
                        return Err(FetchError::Transport {
                            uri: uri.to_string(),
                            attempts,
                            reached: sink.offset(),
                            detail: e.without_url().to_string(),
                        });
                    }
                    info.resumes += 1;
                    tracing::debug!(%uri, reached = sink.offset(), "member body broke; resuming by range");
                    backoff.wait(None).await;
                }
            }
        }
    }

    /// Stream the shard from byte 0 and copy the member; a broken stream restarts from 0
    /// (the content host cannot resume) and skips what the sink already holds.
    async fn scan_shard(
        &self,
        r: &mut Resolved<'_>,
        expected_bytes: u64,
        first: reqwest::Response,
        sink: &mut dyn ByteSink,
        info: &mut FetchInfo,
    ) -> Result<(), FetchError> {
        let (uri, loc) = (r.uri, r.loc);
        let mut backoff = Backoff::new(self.settings.initial_backoff);
        let mut next = Some(first);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let resp = match next.take() {
                Some(first) => first,
                None => self.content_get(r, None, info).await?,
            };
            if resp.status() != StatusCode::OK {
                return Err(content_status_error(uri, resp.status()));
            }
            if let Some(len) = resp.content_length()
                && len != r.shard.size
            {
                return Err(size_disagreement(uri, len, r.shard.size));
            }
            // A restarted stream skips the member bytes the sink already holds.
            let already = sink.offset();
            let mut seen = 0u64;
            let mut scanner = TarScanner::new(&loc.member);
            let mut body = resp.bytes_stream();
            let mut broke = None;
            let mut status = ScanStatus::NeedMore;
            while let Some(item) = body.next().await {
                let chunk = match item {
                    Ok(c) => c,
                    Err(e) => {
                        broke = Some(e);
                        break;
                    }
                };
                let mut on_found = |size: u64| -> Result<(), FetchError> {
                    if size > expected_bytes {
                        Err(FetchError::Oversize {
                            uri: uri.to_string(),
                            advertised: Some(size),
                            expected: expected_bytes,
                        })
                    } else {
                        Ok(())
                    }
                };
                let mut on_data = |d: &[u8]| -> Result<(), FetchError> {
                    let skip = already.saturating_sub(seen).min(d.len() as u64) as usize;
                    seen += d.len() as u64;
                    if skip < d.len() {
                        sink.write(&d[skip..])?;
                    }
                    Ok(())
                };
                status = scanner
                    .feed(&chunk, &mut on_found, &mut on_data)?
                    .map_err(|detail| FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: format!("raw shard `{}`: {detail}", loc.shard),
                    })?;
                if status != ScanStatus::NeedMore {
                    break;
                }
            }
            match (status, broke) {
                (ScanStatus::Found { .. }, _) => return Ok(()),
                (ScanStatus::Missing, _) => {
                    return Err(FetchError::NotFound {
                        uri: uri.to_string(),
                        detail: format!("raw shard `{}` has no member `{}`", loc.shard, loc.member),
                    });
                }
                (ScanStatus::NeedMore, Some(e)) => {
                    if info.resumes >= self.settings.retries {
                        return Err(FetchError::Transport {
                            uri: uri.to_string(),
                            attempts,
                            reached: scanner.offset(),
                            detail: e.without_url().to_string(),
                        });
                    }
                    info.resumes += 1;
                    backoff.wait(None).await;
                }
                (ScanStatus::NeedMore, None) => {
                    return Err(FetchError::Protocol {
                        uri: uri.to_string(),
                        detail: format!(
                            "raw shard `{}` ended at byte {} before member `{}` was complete",
                            loc.shard,
                            scanner.offset(),
                            loc.member
                        ),
                    });
                }
            }
        }
    }
}

pub(crate) fn content_status_error(uri: &str, s: StatusCode) -> FetchError {
    match s.as_u16() {
        401 | 403 => FetchError::Denied {
            uri: uri.to_string(),
            status: s.as_u16(),
            detail: "the content host refused the request".into(),
        },
        404 | 410 => FetchError::NotFound {
            uri: uri.to_string(),
            detail: format!("the content host answered {}", s.as_u16()),
        },
        code => FetchError::Http {
            uri: uri.to_string(),
            status: code,
            attempts: 1,
            detail: "unexpected answer from the content host".into(),
        },
    }
}

/// The start of a refusal's body on one line (e.g. `Request has expired`), or nothing.
async fn short_text(resp: reqwest::Response) -> String {
    // At most the first 4 KiB of the body are read: a refusal is short.
    let mut head: Vec<u8> = Vec::new();
    let mut body = resp.bytes_stream();
    while head.len() < 4096 {
        match body.next().await {
            Some(Ok(chunk)) => head.extend_from_slice(&chunk[..chunk.len().min(4096 - head.len())]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(120).collect()
}

fn size_disagreement(uri: &str, served: u64, announced: u64) -> FetchError {
    FetchError::Protocol {
        uri: uri.to_string(),
        detail: format!(
            "the content host has {served} bytes, the Hub announced {announced} (X-Linked-Size)"
        ),
    }
}

impl ArchiveSource for HfSource {
    fn kind(&self) -> LocationKind {
        LocationKind::Hf
    }

    fn uri(&self, archive: &ArchiveSpec) -> Option<String> {
        hf_uri(archive)
    }

    fn fetch<'a>(
        &'a self,
        archive: &'a ArchiveSpec,
        sink: &'a mut dyn ByteSink,
        info: &'a mut FetchInfo,
    ) -> BoxFuture<'a, Result<(), FetchError>> {
        Box::pin(async move {
            *info = FetchInfo {
                method: FetchMethod::MemberRange,
                ..FetchInfo::default()
            };
            let uri = hf_uri(archive).unwrap_or_default();
            let Some(loc) = &archive.hf else {
                return Err(FetchError::NotFound {
                    uri,
                    detail: "the archive has no Hugging Face location".into(),
                });
            };
            let shard = self.resolve(&uri, loc, info).await?;
            info.resolved_commit = Some(shard.commit.clone());
            let mut r = Resolved {
                uri: &uri,
                loc,
                shard,
                re_resolves: 0,
            };
            match self.find_member(&mut r, info).await? {
                Ok(entry) => {
                    if entry.size > archive.bytes {
                        return Err(FetchError::Oversize {
                            uri: uri.clone(),
                            advertised: Some(entry.size),
                            expected: archive.bytes,
                        });
                    }
                    self.copy_member_range(&mut r, &entry, sink, info).await
                }
                Err(full) => {
                    info.method = FetchMethod::ShardScan;
                    self.scan_shard(&mut r, archive.bytes, full, sink, info)
                        .await
                }
            }
        })
    }
}
