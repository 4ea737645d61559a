//! Ranged reads of the content host: a GET of the shard or of a byte range that survives an
//! expired content URL (re-resolve and repeat), header reads by range, and copying the
//! member into the sink: by range, resuming a broken body, or by streaming the shard from
//! byte 0 when the content host ignores `Range`.

use super::resolve::Resolved;
use super::{HfSource, Probe, ResolvedShard};
use crate::error::FetchError;
use crate::sink::ByteSink;
use crate::source::tar_index::{MemberEntry, ScanStatus, TarScanner};
use crate::source::{Backoff, FetchInfo};
use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_RANGE, RANGE};

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

    /// Read `len` bytes at `start` of the shard, or hand back a full answer if the content
    /// host ignored the Range header.
    pub(super) async fn read_range(
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
            check_range(&resp, uri, start, start + len - 1, r.shard.size)?;
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

    /// Copy the member's byte range into the sink, resuming a broken body by Range.
    pub(super) async fn copy_member_range(
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
            check_range(&resp, uri, from, end - 1, r.shard.size)?;
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
    pub(super) async fn scan_shard(
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

/// A 206 answer must carry exactly the asked-for bytes `first..=last` (its
/// `Content-Range`), of a file of the size the Hub announced when it says the total.
fn check_range(
    resp: &reqwest::Response,
    uri: &str,
    first: u64,
    last: u64,
    announced: u64,
) -> Result<(), FetchError> {
    match content_range(resp) {
        Some((a, b, total)) if a == first && b == last => match total {
            Some(t) if t != announced => Err(size_disagreement(uri, t, announced)),
            _ => Ok(()),
        },
        other => Err(FetchError::Protocol {
            uri: uri.to_string(),
            detail: format!(
                "asked for bytes {first}-{last}, the content host answered range {:?}",
                other.map(|(a, b, _)| (a, b))
            ),
        }),
    }
}

fn size_disagreement(uri: &str, served: u64, announced: u64) -> FetchError {
    FetchError::Protocol {
        uri: uri.to_string(),
        detail: format!(
            "the content host has {served} bytes, the Hub announced {announced} (X-Linked-Size)"
        ),
    }
}
