//! The Hugging Face location: a member of a raw shard pinned to a commit, fetched with the
//! Hub's resolve protocol as its own client expects it.
//!
//! 1. `HEAD {endpoint}/datasets/{repo}/resolve/{revision}/{shard}`, the revision quoted as
//!    one segment and the shard as a path (`huggingface_hub`'s `quote(revision, safe="")`
//!    and `quote(filename)`). Redirects on the Hub's own origin (a relative `Location`, as
//!    for a renamed repository) are followed, resolved against the request URL, at most
//!    [`MAX_HUB_REDIRECTS`] times; a redirect to another origin is the content redirect:
//!    it carries `X-Repo-Commit` (must equal the pinned revision), `X-Linked-Etag` and
//!    `X-Linked-Size`, and its `Location` names the content host. A refusal is read as the
//!    Hub's client reads it ([`HubRefusal`]).
//! 2. The shard's member table is taken from memory or from disk ([`shard_index`]: built
//!    by `pipeline pin` or by an earlier fetch, checked before use); else the content host
//!    is asked for the shard's tar headers by byte range, one header at a time, until the
//!    member is found (`member_range`), and the table is kept per (repo, commit, shard,
//!    size) in memory and on disk. Then only the member's bytes are read. If the content host
//!    ignores `Range`, the shard is streamed from byte 0 until the member is complete
//!    (`shard_scan`).
//! 3. Content URLs are signed and expire: a 401 or 403 from the content host makes the
//!    source resolve the shard again (same `HEAD`, same pin check). The new answer must
//!    name the same commit, `X-Linked-Etag` and `X-Linked-Size` as the first, or the fetch
//!    is refused ([`FetchError::ResolveChanged`]); then the request is repeated at the new
//!    URL, continuing from the bytes the sink holds. At most `retries` re-resolves per fetch
//!    (each counted in [`FetchInfo::retries`]); after that the refusal is
//!    [`FetchError::Denied`].
//! 4. The token (`HF_TOKEN`, or the token file: [`crate::options`]) goes to the Hub as a
//!    bearer token, and to the content host only when it has the Hub's origin. It is never
//!    logged.
//! 5. A 429 is waited out as its `RateLimit` header says, within the rate-limit patience
//!    ([`super::retry`]); every request of the source waits while one is told to.
//!
//! By job: resolving the pin (`resolve`), ranged reads of the content host and copying
//! the member (`content`), locating the member in the shard's tar headers (`member`);
//! the retrying send is [`super::retry`]'s, next to [`super::Backoff`].

mod content;
mod member;
mod refusal;
mod resolve;
pub mod shard_index;

pub(crate) use content::{content_range, content_status_error};
pub use refusal::{HubAsked, HubRefusal, HubRefusalKind};
pub(crate) use resolve::Resolved;
pub use resolve::{ResolvedShard, interpret_resolve_headers};
pub use shard_index::{ShardIndexDirs, ShardIndexRecord};

use super::retry::{RateGate, RetryPolicy};
use super::tar_index::MemberEntry;
use super::{ArchiveSource, FetchInfo, FetchMethod, begin_fetch};
use crate::error::FetchError;
use crate::options::HfToken;
use crate::progress::{NoProgress, ProgressSink};
use crate::sink::ByteSink;
use futures::future::BoxFuture;
use model::ArchiveSpec;
use model::config::LocationKind;
use model::manifest::HfLocation;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::header::LOCATION;
use reqwest::{Method, Url};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Hops followed on the Hub's own origin before a request is given up (`huggingface_hub`'s
/// bound).
pub const MAX_HUB_REDIRECTS: usize = 20;

/// What Python's `urllib.parse.quote(s, safe="")` leaves alone: letters, digits, `_.-~`.
const QUOTE_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');
/// `quote(s)`: the same and `/`.
const QUOTE_PATH: &AsciiSet = &QUOTE_SEGMENT.remove(b'/');

/// A revision or a path as one URL segment (`/` too is encoded), as `huggingface_hub`
/// quotes revisions: `refs/pr/1` is `refs%2Fpr%2F1`.
pub fn quote_segment(s: &str) -> String {
    utf8_percent_encode(s, QUOTE_SEGMENT).to_string()
}

/// A file's path in a repository as URL path segments (`/` kept), as `huggingface_hub`
/// quotes file names.
pub fn quote_path(s: &str) -> String {
    utf8_percent_encode(s, QUOTE_PATH).to_string()
}

/// How to reach the Hub.
#[derive(Clone)]
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
    /// Longest one request waits in total for the Hub's rate limit (429).
    pub rate_limit_patience: Duration,
    /// Where rate-limit waits are announced.
    pub progress: Arc<dyn ProgressSink>,
    /// Where shards' member tables are read and stored.
    pub shard_index: ShardIndexDirs,
}

impl std::fmt::Debug for HfSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfSettings")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token)
            .field("retries", &self.retries)
            .field("request_timeout", &self.request_timeout)
            .field("initial_backoff", &self.initial_backoff)
            .field("rate_limit_patience", &self.rate_limit_patience)
            .field("shard_index", &self.shard_index)
            .finish_non_exhaustive()
    }
}

impl Default for HfSettings {
    /// The real Hub, no token, `ingest`'s default limits, no progress.
    fn default() -> HfSettings {
        let ingest = model::config::IngestConfig::default();
        HfSettings {
            endpoint: model::config::hf_endpoint(None, None),
            token: None,
            retries: ingest.retries,
            request_timeout: Duration::from_secs(ingest.request_timeout_s),
            initial_backoff: Duration::from_millis(200),
            rate_limit_patience: Duration::from_secs(ingest.rate_limit_patience_s),
            progress: Arc::new(NoProgress),
            shard_index: ShardIndexDirs::default(),
        }
    }
}

/// A shard's member table as far as it is known.
#[derive(Debug, Clone, Default)]
struct ShardIndex {
    entries: Vec<MemberEntry>,
    next_header: u64,
    complete: bool,
}

/// (repo, commit, shard path, size).
type ShardKey = (String, String, String, u64);

/// Reads archives out of Hub raw shards.
#[derive(Debug)]
pub struct HfSource {
    client: reqwest::Client,
    settings: HfSettings,
    index: Mutex<HashMap<ShardKey, ShardIndex>>,
    gate: RateGate,
}

/// `hf://datasets/repo@revision/shard#member` of an archive's Hub location.
pub fn hf_uri(archive: &ArchiveSpec) -> Option<String> {
    archive.hf.as_ref().map(|h| h.uri())
}

enum Probe {
    Header(Vec<u8>),
    RangeIgnored(reqwest::Response),
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
            return Err(crate::error::IngestError::Config(problem));
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.request_timeout)
            .connect_timeout(connect_timeout)
            .read_timeout(read_timeout)
            .user_agent(concat!("agentrace-ingest/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| crate::error::IngestError::Config(format!("HTTP client: {e}")))?;
        let gate = RateGate::new(settings.rate_limit_patience, settings.progress.clone());
        Ok(HfSource {
            client,
            settings,
            index: Mutex::new(HashMap::new()),
            gate,
        })
    }

    /// The resolve URL of a shard at the pinned revision (revision and path quoted as
    /// [`quote_segment`] and [`quote_path`] say).
    pub fn resolve_url(&self, loc: &HfLocation) -> String {
        format!(
            "{}/datasets/{}/resolve/{}/{}",
            self.settings.endpoint,
            loc.repo,
            quote_segment(&loc.revision),
            quote_path(&loc.shard)
        )
    }

    /// What a request for `loc` asks, to name it in a refusal.
    pub(crate) fn asked(&self, repo: &str, revision: &str, path: &str) -> HubAsked {
        HubAsked {
            endpoint: self.settings.endpoint.clone(),
            repo: repo.to_string(),
            revision: revision.to_string(),
            path: path.to_string(),
            token: self.settings.token.as_ref().map(|t| t.source().clone()),
        }
    }

    /// The settings.
    pub(crate) fn settings(&self) -> &HfSettings {
        &self.settings
    }
    /// Send a request, retrying transient statuses (429, 5xx) and connection failures
    /// ([`super::retry::send_with_retries`] with this source's settings).
    pub(crate) async fn send(
        &self,
        uri: &str,
        info: &mut FetchInfo,
        build: &(dyn Fn() -> reqwest::RequestBuilder + Sync),
    ) -> Result<reqwest::Response, FetchError> {
        let policy = RetryPolicy {
            retries: self.settings.retries,
            initial_backoff: self.settings.initial_backoff,
            gate: &self.gate,
        };
        super::retry::send_with_retries(uri, &policy, info, build).await
    }

    /// Send `method` to `url` on the Hub with the token, following redirects that stay on
    /// the request's origin (a relative `Location` is resolved against the request URL), at
    /// most [`MAX_HUB_REDIRECTS`] times; return the first other answer with the URL that
    /// gave it (a redirect to another origin is returned: it is the content redirect).
    pub(crate) async fn send_hub(
        &self,
        uri: &str,
        method: Method,
        url: Url,
        accept: Option<&str>,
        info: &mut FetchInfo,
    ) -> Result<(reqwest::Response, Url), FetchError> {
        let mut url = url;
        for _ in 0..=MAX_HUB_REDIRECTS {
            let resp = {
                let url = &url;
                let method = &method;
                self.send(uri, info, &|| {
                    let mut rb = self
                        .client
                        .request(method.clone(), url.clone())
                        .header("Accept-Encoding", "identity");
                    if let Some(a) = accept {
                        rb = rb.header(reqwest::header::ACCEPT, a);
                    }
                    if let Some(t) = &self.settings.token {
                        rb = rb.bearer_auth(t.expose());
                    }
                    rb
                })
                .await?
            };
            if !resp.status().is_redirection() {
                return Ok((resp, url));
            }
            let Some(target) = resp
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|l| url.join(l).ok())
            else {
                return Ok((resp, url));
            };
            if target.origin() != url.origin() {
                return Ok((resp, url));
            }
            tracing::debug!(%uri, status = resp.status().as_u16(), to = target.path(), "following the Hub's redirect on its own origin");
            url = target;
        }
        Err(FetchError::Protocol {
            uri: uri.to_string(),
            detail: format!(
                "the Hub redirected more than {MAX_HUB_REDIRECTS} times on its own origin (last to {})",
                url.path()
            ),
        })
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
            let (uri, loc) = begin_fetch(
                info,
                FetchMethod::MemberRange,
                hf_uri(archive),
                archive.hf.as_ref(),
                "Hugging Face",
            )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// As `huggingface_hub` quotes them: `quote(revision, safe="")`, `quote(filename)`.
    #[test]
    fn revisions_and_paths_are_quoted_as_the_hub_client_quotes_them() {
        assert_eq!(quote_segment("refs/pr/1"), "refs%2Fpr%2F1");
        assert_eq!(quote_segment("main"), "main");
        assert_eq!(quote_path("raw/a b#1?.tar"), "raw/a%20b%231%3F.tar");
        assert_eq!(quote_path("raw/é~_-.tar"), "raw/%C3%A9~_-.tar");
        assert_eq!(quote_path("raw/a+b=c&d.tar"), "raw/a%2Bb%3Dc%26d.tar");
    }
}
