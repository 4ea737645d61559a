//! Retrying HTTP: exponential [`Backoff`] (honouring `Retry-After`), the retrying send of the
//! Hub source and `pipeline pin`, and a transport error's text without its (signed) URL.

use super::FetchInfo;
use crate::error::FetchError;
use reqwest::StatusCode;
use std::time::Duration;

/// Exponential backoff between retries: `initial`, doubling, capped at 8 s.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    /// Maximum single pause.
    pub const MAX: Duration = Duration::from_secs(8);

    /// Start at `initial`.
    pub fn new(initial: Duration) -> Backoff {
        Backoff { next: initial }
    }

    /// Pause, honouring a server's `Retry-After` (capped at [`Backoff::MAX`]) when given.
    pub async fn wait(&mut self, retry_after: Option<Duration>) {
        let d = retry_after.unwrap_or(self.next).min(Self::MAX);
        self.next = (self.next * 2).min(Self::MAX);
        tokio::time::sleep(d).await;
    }
}

/// The `Retry-After` header in seconds, if present and numeric.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// Send a request built by `build`, retrying a transient status (429, 5xx) or connection
/// failure at most `retries` times with [`Backoff`] from `initial_backoff` (honouring
/// `Retry-After`); each retry is counted in `info.retries`. Any other answer is returned.
pub(crate) async fn send_with_retries(
    uri: &str,
    retries: u32,
    initial_backoff: Duration,
    info: &mut FetchInfo,
    build: &(dyn Fn() -> reqwest::RequestBuilder + Sync),
) -> Result<reqwest::Response, FetchError> {
    let mut backoff = Backoff::new(initial_backoff);
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let can_retry = attempts <= retries;
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
            // A timeout is final: an endpoint that accepts and never answers would make
            // every retry wait as long again.
            Err(e) if e.is_timeout() => {
                return Err(FetchError::TimedOut {
                    uri: uri.to_string(),
                    endpoint: e.url().map(origin).unwrap_or_else(|| "?".into()),
                    attempts,
                });
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
    e.is_connect() || e.is_request() || e.is_body() || e.is_decode()
}

/// `scheme://host:port` of a URL: the endpoint, without a path or a (signed) query.
pub(crate) fn origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}
