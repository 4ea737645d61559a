//! Resolving the pin: the Hub's answer to `HEAD .../resolve/{revision}/{shard}` (the
//! served commit must be the pinned one), and re-resolving an expired content URL, which
//! must repeat the first answer's commit, etag and size.

use super::{HfSource, HubRefusal};
use crate::error::FetchError;
use crate::source::FetchInfo;
use model::manifest::HfLocation;
use reqwest::header::{CONTENT_LENGTH, ETAG, LOCATION};
use reqwest::{Method, Url};

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

impl HfSource {
    /// Ask the Hub where the pinned shard is (following redirects on its own origin);
    /// check the commit. A refusal is [`FetchError::Hub`].
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
        let (resp, answered) = self
            .send_hub(uri, Method::HEAD, hub_url, None, info)
            .await?;
        let status = resp.status();
        let asked = self.asked(&loc.repo, &loc.revision, &loc.shard);
        if let Some(refusal) = HubRefusal::from_answer(status, resp.headers(), &asked) {
            return Err(FetchError::Hub {
                uri: uri.to_string(),
                refusal: Box::new(refusal),
            });
        }
        match status.as_u16() {
            200 | 301 | 302 | 303 | 307 | 308 => {}
            s => {
                return Err(FetchError::Http {
                    uri: uri.to_string(),
                    status: s,
                    attempts: 1,
                    detail: "unexpected answer to the resolve request".into(),
                });
            }
        }
        interpret_resolve_headers(status, resp.headers(), &answered, &loc.revision, uri)
    }

    /// Resolve the shard again for a fresh content URL. The answer must repeat the first
    /// one's commit, `X-Linked-Etag` and `X-Linked-Size`: the bytes under a pinned commit
    /// do not change, and bytes already in the sink were read under the first answer.
    pub(super) async fn re_resolve(
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
}
