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
//!
//! By job: resolving the pin (`resolve`), ranged reads of the content host and copying
//! the member (`content`), locating the member in the shard's tar headers (`member`);
//! the retrying send is [`super::retry`]'s, next to [`super::Backoff`].

mod content;
mod member;
mod resolve;

pub(crate) use content::{content_range, content_status_error};
pub(crate) use resolve::Resolved;
pub use resolve::{ResolvedShard, interpret_resolve_headers};

use super::tar_index::MemberEntry;
use super::{ArchiveSource, FetchInfo, FetchMethod, begin_fetch};
use crate::error::FetchError;
use crate::options::HfToken;
use crate::sink::ByteSink;
use futures::future::BoxFuture;
use model::ArchiveSpec;
use model::config::LocationKind;
use model::manifest::HfLocation;
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
    /// Send a request, retrying transient statuses (429, 5xx) and connection failures
    /// ([`super::retry::send_with_retries`] with this source's settings).
    pub(crate) async fn send(
        &self,
        uri: &str,
        info: &mut FetchInfo,
        build: &(dyn Fn() -> reqwest::RequestBuilder + Sync),
    ) -> Result<reqwest::Response, FetchError> {
        super::retry::send_with_retries(
            uri,
            self.settings.retries,
            self.settings.initial_backoff,
            info,
            build,
        )
        .await
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
