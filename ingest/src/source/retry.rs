//! Retrying HTTP: exponential [`Backoff`], the retrying send of the Hub source and `pipeline
//! pin` with its rate-limit waits ([`RateGate`]), and a transport error's text without its
//! (signed) URL.
//!
//! A 429 is waited out as `huggingface_hub` does: the IETF `RateLimit` header's reset
//! (`"api";r=0;t=55`: 55 s, waited as 56 to be past the window's end) when it says no
//! request remains, else a numeric `Retry-After`, else the next backoff step, never less than
//! that step. Rate-limit waits do not use up `retries`; a request waits at most the
//! patience in total ([`RateGate::patience`], `ingest.rate_limit_patience_s`), then fails with
//! [`FetchError::RateLimited`]. Every request of one source waits while any of them is told
//! to, so parallel fetches from one address stop together instead of each spending its
//! retries.

use super::FetchInfo;
use crate::error::FetchError;
use crate::progress::ProgressSink;
use reqwest::StatusCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

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

    /// The next pause, advancing the doubling without sleeping.
    fn step(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        d
    }
}

/// The IETF `RateLimit` / `RateLimit-Policy` headers of an answer (the Hub's
/// `"api";r=0;t=55` and `"fixed window";"api";q=500;w=300`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitInfo {
    /// The limited resource (`api`, `resolvers`, ...).
    pub resource: String,
    /// Requests left in the window (`r`).
    pub remaining: u64,
    /// Seconds until the window resets (`t`).
    pub reset_s: u64,
    /// Requests a window allows (`q` of the policy).
    pub limit: Option<u64>,
    /// The window's length in seconds (`w` of the policy).
    pub window_s: Option<u64>,
}

impl RateLimitInfo {
    /// Read the headers; `None` without a usable `RateLimit` header. `RateLimit` is a
    /// structured field (a list of items with parameters); the Hub's `RateLimit-Policy`
    /// (`"fixed window";"api";q=500;w=300`) is not one, so its `q` and `w` are read by name
    /// as `huggingface_hub` reads them.
    pub fn from_headers(headers: &reqwest::header::HeaderMap) -> Option<RateLimitInfo> {
        let value = headers.get("ratelimit")?.to_str().ok()?;
        let list: sfv::List = sfv::Parser::new(value).parse().ok()?;
        let (resource, remaining, reset_s) = list.iter().find_map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                return None;
            };
            let int = |k: &str| {
                item.params
                    .get(k)
                    .and_then(|v| v.as_integer())
                    .and_then(|i| u64::try_from(i64::from(i)).ok())
            };
            let resource = match &item.bare_item {
                sfv::BareItem::String(s) => s.as_str().to_string(),
                sfv::BareItem::Token(t) => t.as_str().to_string(),
                _ => String::new(),
            };
            Some((resource, int("r")?, int("t")?))
        })?;
        let policy_param = |name: &str| -> Option<u64> {
            let policy = headers.get("ratelimit-policy")?.to_str().ok()?;
            policy.split(';').find_map(|p| {
                let (k, v) = p.split_once('=')?;
                (k.trim() == name).then(|| v.trim().parse().ok()).flatten()
            })
        };
        Some(RateLimitInfo {
            resource,
            remaining,
            reset_s,
            limit: policy_param("q"),
            window_s: policy_param("w"),
        })
    }

    /// `'api' limit (500 requests per 300 s window), 0 left, reset in 55 s`.
    fn describe(&self) -> String {
        let policy = match (self.limit, self.window_s) {
            (Some(q), Some(w)) => format!(" ({q} requests per {w} s window)"),
            _ => String::new(),
        };
        format!(
            "'{}' limit{policy}, {} left, reset in {} s",
            self.resource, self.remaining, self.reset_s
        )
    }
}

/// Rate-limit waits shared by every request of one source: while one request is told to
/// wait, the others wait too. Waits are announced through the progress sink and traced.
pub(crate) struct RateGate {
    until: Mutex<Option<Instant>>,
    /// Longest a single request waits for rate limits in total.
    pub(crate) patience: Duration,
    progress: Arc<dyn ProgressSink>,
}

impl std::fmt::Debug for RateGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateGate")
            .field("patience", &self.patience)
            .finish_non_exhaustive()
    }
}

impl RateGate {
    /// A gate allowing `patience` of waiting per request, announcing waits to `progress`.
    pub(crate) fn new(patience: Duration, progress: Arc<dyn ProgressSink>) -> RateGate {
        RateGate {
            until: Mutex::new(None),
            patience,
            progress,
        }
    }

    /// Until when every request waits, if later than now.
    fn closed_until(&self) -> Option<Instant> {
        let until = *self.until.lock().expect("rate gate");
        until.filter(|u| *u > Instant::now())
    }

    /// Close the gate until at least `until`.
    fn close_until(&self, until: Instant) {
        let mut slot = self.until.lock().expect("rate gate");
        if slot.is_none_or(|u| u < until) {
            *slot = Some(until);
        }
    }
}

/// How a request is retried.
pub(crate) struct RetryPolicy<'g> {
    /// Retries of a 5xx or a connection fault.
    pub(crate) retries: u32,
    /// First backoff pause.
    pub(crate) initial_backoff: Duration,
    /// Rate-limit waits.
    pub(crate) gate: &'g RateGate,
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

/// Send a request built by `build`, retrying a 5xx or connection failure at most
/// `policy.retries` times with [`Backoff`] from `policy.initial_backoff` (honouring a
/// numeric `Retry-After`), and waiting out 429s as the module says, within the gate's
/// patience. Each repeat is counted in `info.retries`. Any other answer is returned.
pub(crate) async fn send_with_retries(
    uri: &str,
    policy: &RetryPolicy<'_>,
    info: &mut FetchInfo,
    build: &(dyn Fn() -> reqwest::RequestBuilder + Sync),
) -> Result<reqwest::Response, FetchError> {
    let mut backoff = Backoff::new(policy.initial_backoff);
    let mut attempts = 0u32;
    let mut faults = 0u32;
    let mut waited = Duration::ZERO;
    loop {
        if let Some(until) = policy.gate.closed_until() {
            let d = until.saturating_duration_since(Instant::now());
            if waited + d > policy.gate.patience {
                return Err(FetchError::RateLimited {
                    uri: uri.to_string(),
                    waited_s: waited.as_secs(),
                    wait_s: d.as_secs_f64().ceil() as u64,
                    patience_s: policy.gate.patience.as_secs(),
                    detail: "another request of this run was told to wait".into(),
                });
            }
            tokio::time::sleep_until(until).await;
            waited += d;
        }
        attempts += 1;
        let can_retry = faults < policy.retries;
        match build().send().await {
            Ok(resp) => {
                let s = resp.status();
                if s == StatusCode::TOO_MANY_REQUESTS {
                    let limit = RateLimitInfo::from_headers(resp.headers());
                    let step = backoff.step();
                    let (told, why) = match (&limit, retry_after(resp.headers())) {
                        (Some(l), _) if l.remaining == 0 => (
                            Duration::from_secs(l.reset_s + 1),
                            format!("RateLimit: {}", l.describe()),
                        ),
                        (_, Some(ra)) => (ra, format!("Retry-After: {} s", ra.as_secs())),
                        _ => (Duration::ZERO, "no RateLimit or Retry-After header".into()),
                    };
                    let wait = told.max(step);
                    let endpoint = resp.url().origin().ascii_serialization();
                    if waited + wait > policy.gate.patience {
                        return Err(FetchError::RateLimited {
                            uri: uri.to_string(),
                            waited_s: waited.as_secs(),
                            wait_s: wait.as_secs_f64().ceil() as u64,
                            patience_s: policy.gate.patience.as_secs(),
                            detail: format!("{endpoint} answered 429 ({why})"),
                        });
                    }
                    info.retries += 1;
                    let line = format!(
                        "{endpoint}: rate limited (HTTP 429, {why}); waiting {:.1} s before retrying ({:.0} s of {} s patience used)",
                        wait.as_secs_f64(),
                        waited.as_secs_f64(),
                        policy.gate.patience.as_secs()
                    );
                    tracing::info!(%uri, wait_s = wait.as_secs_f64(), "{line}");
                    policy.gate.progress.note(&line);
                    policy.gate.close_until(Instant::now() + wait);
                    continue;
                }
                if s.is_server_error() {
                    if can_retry {
                        faults += 1;
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
                faults += 1;
                info.retries += 1;
                tracing::debug!(%uri, error = %e, "transport error; retrying");
                backoff.wait(None).await;
            }
            // Connecting failed on every attempt: the endpoint itself cannot be reached.
            Err(e) if e.is_connect() => {
                return Err(FetchError::Unreachable {
                    uri: uri.to_string(),
                    endpoint: e.url().map(origin).unwrap_or_else(|| "?".into()),
                    attempts: Some(attempts),
                    detail: error_chain(&e),
                });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> reqwest::header::HeaderMap {
        let mut h = reqwest::header::HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_hubs_ratelimit_headers_are_read() {
        let l = RateLimitInfo::from_headers(&headers(&[
            ("ratelimit", "\"api\";r=0;t=55"),
            ("ratelimit-policy", "\"fixed window\";\"api\";q=500;w=300"),
        ]))
        .unwrap();
        assert_eq!(
            l,
            RateLimitInfo {
                resource: "api".into(),
                remaining: 0,
                reset_s: 55,
                limit: Some(500),
                window_s: Some(300),
            }
        );
        assert_eq!(
            l.describe(),
            "'api' limit (500 requests per 300 s window), 0 left, reset in 55 s"
        );
        let l = RateLimitInfo::from_headers(&headers(&[("ratelimit", "\"resolvers\";r=12;t=3")]))
            .unwrap();
        assert_eq!((l.remaining, l.reset_s, l.limit), (12, 3, None));
        assert_eq!(
            RateLimitInfo::from_headers(&headers(&[("ratelimit", "garbage;;")])),
            None
        );
        assert_eq!(
            RateLimitInfo::from_headers(&headers(&[("retry-after", "5")])),
            None
        );
    }
}
