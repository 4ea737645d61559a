//! Listing a GCS prefix through the JSON API, as Google's own clients list it:
//! `GET {base}/storage/v1/b/{bucket}/o?prefix=..&pageToken=..`, page by page, with the
//! credentials and user project of every other request. The names come back exactly as
//! stored: console "folder" objects (`runs/`) and keys with an empty path segment
//! (`runs//a.tar.gz`) included, which object_store's listing renames (it strips the
//! trailing `/`) or refuses whole (an empty segment is not a path to it).

use super::{PinError, PinSettings};
use crate::source::FetchInfo;
use crate::source::gcs::GcsClients;
use crate::source::retry::{RateGate, RetryPolicy, send_with_retries};
use object_store::CredentialProvider;
use reqwest::Url;

/// One object as the listing names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ListedObject {
    /// The object name, as stored.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Its live generation.
    pub generation: i64,
}

/// Characters left alone in a query value (the rest percent-encoded, `/` included).
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// List every object whose name starts with `prefix/` (every object of the bucket for an
/// empty prefix), sorted by name.
pub(super) async fn list_objects(
    clients: &GcsClients,
    bucket: &str,
    prefix: &str,
    settings: &PinSettings,
) -> Result<Vec<ListedObject>, PinError> {
    let where_ = format!("gs://{bucket}/{prefix}");
    let http = reqwest::Client::builder()
        .connect_timeout(settings.timeout)
        .read_timeout(settings.timeout)
        .user_agent(concat!("agentrace-pin/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| PinError::Gcs {
            uri: where_.clone(),
            detail: format!("HTTP client: {e}"),
        })?;
    let gate = RateGate::new(settings.rate_limit_patience, settings.progress.clone());
    let policy = RetryPolicy {
        retries: settings.retries,
        initial_backoff: settings.initial_backoff,
        gate: &gate,
    };
    let list_prefix = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    // The JSON API's base: the emulator's or the configured service URL, else the real one.
    let base = clients.endpoint_label().trim_end_matches('/').to_string();
    let mut objects = Vec::new();
    let mut page_token: Option<String> = None;
    loop {
        let mut text = format!(
            "{base}/storage/v1/b/{}/o?fields=items(name,size,generation),nextPageToken",
            percent_encoding::utf8_percent_encode(bucket, QUERY_VALUE)
        );
        if !list_prefix.is_empty() {
            text.push_str("&prefix=");
            text.push_str(
                &percent_encoding::utf8_percent_encode(&list_prefix, QUERY_VALUE).to_string(),
            );
        }
        if let Some(t) = &page_token {
            text.push_str("&pageToken=");
            text.push_str(&percent_encoding::utf8_percent_encode(t, QUERY_VALUE).to_string());
        }
        let url = Url::parse(&text).map_err(|e| PinError::Gcs {
            uri: where_.clone(),
            detail: format!("GCS endpoint `{base}` gives no listing URL: {e}"),
        })?;
        let bearer = match clients.provider() {
            Some(p) => match p.get_credential().await {
                Ok(c) => Some(c.bearer.clone()),
                Err(e) => return Err(refused_or(clients, &e, bucket, &where_)),
            },
            None => None,
        };
        let user_project = clients.settings().user_project.clone();
        let mut info = FetchInfo::default();
        let resp = send_with_retries(&where_, &policy, &mut info, &|| {
            let mut rb = http.get(url.clone());
            if let Some(b) = &bearer {
                rb = rb.bearer_auth(b);
            }
            if let Some(p) = &user_project {
                rb = rb.header("x-goog-user-project", p);
            }
            rb
        })
        .await
        .map_err(|e| {
            PinError::unreachable(e, &base, "GCS").unwrap_or_else(|other| PinError::Gcs {
                uri: where_.clone(),
                detail: other.to_string(),
            })
        })?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| PinError::Gcs {
            uri: where_.clone(),
            detail: format!(
                "reading the listing: {}",
                crate::source::retry::error_chain(&e)
            ),
        })?;
        if !status.is_success() {
            return Err(answer_error(
                clients,
                status.as_u16(),
                &body,
                bucket,
                &where_,
            ));
        }
        let page: serde_json::Value = serde_json::from_str(&body).map_err(|e| PinError::Gcs {
            uri: where_.clone(),
            detail: format!("the listing is not JSON ({e}); is the endpoint a GCS server?"),
        })?;
        for item in page["items"].as_array().into_iter().flatten() {
            objects.push(listed(item).ok_or_else(|| PinError::Gcs {
                uri: where_.clone(),
                detail: format!("a listed object lacks its name, size or generation: {item}"),
            })?);
        }
        page_token = page["nextPageToken"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if page_token.is_none() {
            break;
        }
    }
    objects.sort_by(|a, b| a.name.cmp(&b.name));
    objects.dedup_by(|a, b| a.name == b.name);
    Ok(objects)
}

/// A listing item: `name`, and `size` and `generation` (decimal strings in the JSON API).
fn listed(item: &serde_json::Value) -> Option<ListedObject> {
    let number = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .or_else(|| v.as_i64())
    };
    Some(ListedObject {
        name: item["name"].as_str()?.to_string(),
        size: u64::try_from(number(&item["size"])?).ok()?,
        generation: number(&item["generation"])?,
    })
}

/// A token that could not be had, as the refusal it is.
fn refused_or(
    clients: &GcsClients,
    e: &object_store::Error,
    bucket: &str,
    where_: &str,
) -> PinError {
    let detail = match clients.refusal(e, bucket) {
        Some(r) => format!("{r} (hint: {})", r.hint()),
        None => e.to_string(),
    };
    PinError::Gcs {
        uri: where_.to_string(),
        detail,
    }
}

/// A non-success answer of the listing: a refusal with its hint, else the status and body.
fn answer_error(
    clients: &GcsClients,
    status: u16,
    body: &str,
    bucket: &str,
    where_: &str,
) -> PinError {
    let detail = match clients.answer_refusal(status, body, bucket) {
        Some(r) => format!("{r} (hint: {})", r.hint()),
        None if status == 404 => "not found (is the bucket name right?)".to_string(),
        None => {
            let short: String = body.chars().take(300).collect();
            format!("listing answered HTTP {status}: {}", short.trim())
        }
    };
    PinError::Gcs {
        uri: where_.to_string(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_items_read_decimal_strings_and_numbers() {
        let item = serde_json::json!({"name": "a//b.tar.gz", "size": "12", "generation": "1700000000000001"});
        assert_eq!(
            listed(&item),
            Some(ListedObject {
                name: "a//b.tar.gz".into(),
                size: 12,
                generation: 1_700_000_000_000_001
            })
        );
        let item = serde_json::json!({"name": "runs/", "size": 0, "generation": 5});
        assert_eq!(listed(&item).map(|o| o.size), Some(0));
        assert_eq!(listed(&serde_json::json!({"name": "x"})), None);
    }
}
