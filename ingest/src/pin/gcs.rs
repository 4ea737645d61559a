//! The GCS side of a pin: list the objects under a prefix through object_store, then read
//! each object's live generation once, hashing it; the generation recorded is the one the
//! server names (`x-goog-generation`) in the answer whose bytes were hashed, so a concurrent
//! overwrite cannot pair one generation with another's bytes. A broken body continues from
//! the byte reached, pinned to that generation.

use super::{GcsFound, GcsPin, GcsPrefix, PinError, PinSettings, Refusal, WorkloadRule};
use crate::source::Backoff;
use crate::source::gcs::{GcsClients, GcsCredentials, GcsSettings};
use futures::{StreamExt, TryStreamExt};
use object_store::gcp::GoogleCloudStorage;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Whole-request bound of one object read (the connect and read timeouts catch a silent
/// server long before it).
const OBJECT_READ_LIMIT: Duration = Duration::from_secs(6 * 3600);

/// The endpoint GCS requests go to.
fn endpoint(settings: &PinSettings) -> String {
    settings
        .gcs_endpoint
        .clone()
        .or_else(|| settings.gcs_service_url.clone())
        .unwrap_or_else(|| "https://storage.googleapis.com".into())
}

/// An object_store error as a refusal: a transport failure (connect, send, timeout) after
/// object_store's retries is [`PinError::Unreachable`], with the causes below the HTTP error
/// and no URL; anything else keeps object_store's text.
fn gcs_error(
    uri: &str,
    e: object_store::Error,
    settings: &PinSettings,
    clients: &GcsClients,
    bucket: &str,
) -> PinError {
    use object_store::client::{HttpError, HttpErrorKind};
    if let Some(refusal) = clients.refusal(&e, bucket) {
        return PinError::Gcs {
            uri: uri.to_string(),
            detail: format!("{refusal} (hint: {})", refusal.hint()),
        };
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if let Some(http) = c.downcast_ref::<HttpError>()
            && matches!(
                http.kind(),
                HttpErrorKind::Connect
                    | HttpErrorKind::Request
                    | HttpErrorKind::Timeout
                    | HttpErrorKind::Interrupted
            )
        {
            let mut parts: Vec<String> = Vec::new();
            let mut below = std::error::Error::source(http);
            while let Some(b) = below {
                let text = without_url(&b.to_string());
                if !parts.iter().any(|p| p.contains(&text)) {
                    parts.push(text);
                }
                below = b.source();
            }
            return PinError::Unreachable {
                endpoint: endpoint(settings),
                service: "GCS",
                attempts: settings.retries + 1,
                detail: parts.join(": "),
            };
        }
        cause = c.source();
    }
    let detail = match e {
        object_store::Error::NotFound { .. } => "not found (is the bucket name right?)".to_string(),
        other => other.to_string(),
    };
    PinError::Gcs {
        uri: uri.to_string(),
        detail,
    }
}

/// `text` without reqwest's ` for url (...)`.
fn without_url(text: &str) -> String {
    match text.find(" for url (") {
        Some(i) => {
            let rest = &text[i + " for url (".len()..];
            let tail = rest.find(')').map_or("", |j| &rest[j + 1..]);
            format!("{}{tail}", &text[..i])
        }
        None => text.to_string(),
    }
}

/// List and hash every object under `prefix`. Names that give no archive id or match no
/// workload are refused before any object is read.
pub(super) async fn pin_prefix(
    prefix: &GcsPrefix,
    settings: &PinSettings,
    rules: &[WorkloadRule],
) -> Result<(GcsPin, Vec<GcsFound>), PinError> {
    let where_ = prefix.to_string();
    let credentials = match &settings.gcs_endpoint {
        Some(_) => GcsCredentials::Anonymous,
        None => GcsCredentials::detect(&settings.gcs_auth)
            .await
            .map_err(|detail| PinError::Gcs {
                uri: where_.clone(),
                detail,
            })?,
    };
    let user_project =
        crate::source::gcs_auth::user_project(&settings.gcs_auth, None, &credentials);
    let clients = GcsClients::new(
        GcsSettings {
            endpoint: settings.gcs_endpoint.clone(),
            service_url: settings.gcs_service_url.clone(),
            credentials,
            user_project,
            retries: settings.retries,
            request_timeout: OBJECT_READ_LIMIT,
            initial_backoff: settings.initial_backoff,
        },
        settings.timeout,
        settings.timeout,
    )
    .map_err(|detail| PinError::Gcs {
        uri: where_.clone(),
        detail,
    })?;
    let store = clients
        .store(&prefix.bucket)
        .map_err(|detail| PinError::Gcs {
            uri: where_.clone(),
            detail,
        })?;
    let list_prefix = (!prefix.prefix.is_empty()).then(|| ObjectPath::from(prefix.prefix.as_str()));
    let mut metas: Vec<ObjectMeta> = store
        .list(list_prefix.as_ref())
        .try_collect()
        .await
        .map_err(|e| gcs_error(&where_, e, settings, &clients, &prefix.bucket))?;
    metas.retain(|m| !m.location.as_ref().ends_with('/'));
    metas.sort_by(|a, b| a.location.cmp(&b.location));
    let mut refusals = Vec::new();
    for m in &metas {
        let name = super::base_name(m.location.as_ref());
        let at = format!("gs://{}/{}", prefix.bucket, m.location);
        if super::archive_id_of(name).is_none() {
            refusals.push(Refusal::BadName {
                name: name.to_string(),
                at,
            });
        } else if WorkloadRule::first_match(rules, name).is_none() {
            refusals.push(Refusal::NoWorkload {
                name: name.to_string(),
                at,
            });
        }
    }
    if !refusals.is_empty() {
        return Err(PinError::Refused(refusals));
    }
    let found: Vec<GcsFound> = futures::stream::iter(metas.iter())
        .map(|m| hash_object(&store, &clients, &prefix.bucket, m, settings))
        .buffered(settings.parallel.max(1))
        .try_collect()
        .await?;
    Ok((
        GcsPin {
            endpoint: settings.gcs_endpoint.clone(),
            bucket: prefix.bucket.clone(),
            prefix: prefix.prefix.clone(),
            objects: found.len(),
            credentials: clients.describe(),
        },
        found,
    ))
}

/// Read the object's live generation once, hashing it.
async fn hash_object(
    store: &GoogleCloudStorage,
    clients: &GcsClients,
    bucket: &str,
    meta: &ObjectMeta,
    settings: &PinSettings,
) -> Result<GcsFound, PinError> {
    let object = meta.location.to_string();
    let uri = format!("gs://{bucket}/{object}");
    let mut hasher = Sha256::new();
    let mut read = 0u64;
    let mut generation: Option<String> = None;
    let mut resumes = 0u32;
    let mut backoff = Backoff::new(settings.initial_backoff);
    loop {
        let options = GetOptions {
            version: generation.clone(),
            range: (read > 0).then_some(GetRange::Offset(read)),
            ..GetOptions::default()
        };
        let result = store
            .get_opts(&meta.location, options)
            .await
            .map_err(|e| gcs_error(&uri, e, settings, clients, bucket))?;
        let served = result.meta.version.clone().ok_or_else(|| PinError::Gcs {
            uri: uri.clone(),
            detail: "the answer names no generation (x-goog-generation); is STORAGE_EMULATOR_HOST a GCS server?".into(),
        })?;
        match &generation {
            None => generation = Some(served),
            Some(g) if *g != served => {
                return Err(PinError::Gcs {
                    uri,
                    detail: format!("asked for generation {g}, the server answered {served}"),
                });
            }
            Some(_) => {}
        }
        let size = result.meta.size;
        let mut body = result.into_stream();
        let mut broke = None;
        while let Some(item) = body.next().await {
            match item {
                Ok(chunk) => {
                    hasher.update(&chunk);
                    read += chunk.len() as u64;
                }
                Err(e) => {
                    broke = Some(e);
                    break;
                }
            }
        }
        let generation_text = generation.clone().unwrap_or_default();
        match broke {
            None if read == size => {
                let generation = generation_text.parse::<i64>().map_err(|_| PinError::Gcs {
                    uri: uri.clone(),
                    detail: format!("generation `{generation_text}` is not an integer"),
                })?;
                return Ok(GcsFound {
                    bucket: bucket.to_string(),
                    object,
                    generation,
                    sha256: hex::encode(hasher.finalize()),
                    bytes: read,
                });
            }
            None => {
                return Err(PinError::Gcs {
                    uri,
                    detail: format!(
                        "generation {generation_text} ended after {read} of its {size} bytes"
                    ),
                });
            }
            Some(e) if resumes >= settings.retries => {
                return Err(PinError::Gcs {
                    uri,
                    detail: format!(
                        "transfer of generation {generation_text} broke at byte {read} after {resumes} resume(s): {e}"
                    ),
                });
            }
            Some(e) => {
                resumes += 1;
                tracing::debug!(%uri, read, error = %e, "body broke; resuming");
                backoff.wait(None).await;
            }
        }
    }
}
