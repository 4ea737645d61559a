//! The GCS side of a pin: list the objects under a prefix (the JSON API's names, as stored),
//! leave out folder objects, names the filter drops and names object_store cannot address,
//! then read each object's live generation once, hashing it. An object is an archive when
//! its first bytes say so (gzip or zstd); another is skipped after those bytes, with its
//! reason. The generation recorded is the one the server names (`x-goog-generation`) in the
//! answer whose bytes were hashed, so a concurrent overwrite cannot pair one generation with
//! another's bytes. A broken body continues from the byte reached, pinned to that
//! generation.

use super::gcs_list::ListedObject;
use super::{GcsFound, GcsPin, GcsPrefix, ObjectFilter, PinError, PinSettings, SkippedObject};
use crate::source::Backoff;
use crate::source::gcs::{GcsClients, GcsCredentials, GcsSettings};
use futures::{StreamExt, TryStreamExt};
use model::compression::ArchiveCompression;
use object_store::gcp::GoogleCloudStorage;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
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

/// List every object under `prefix` (through the JSON API: [`super::gcs_list`]) and read
/// each one the filter keeps, hashing it; an object whose first bytes are not an
/// archive's, a folder object, and a name the GCS client cannot address are skipped, each
/// with its reason.
pub(super) async fn pin_prefix(
    prefix: &GcsPrefix,
    settings: &PinSettings,
    filter: &ObjectFilter,
) -> Result<(GcsPin, Vec<GcsFound>, Vec<SkippedObject>), PinError> {
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
    let listed =
        super::gcs_list::list_objects(&clients, &prefix.bucket, &prefix.prefix, settings).await?;
    let mut skipped = Vec::new();
    let mut to_read = Vec::new();
    for object in listed {
        let at = format!(
            "gs://{}/{}#{}",
            prefix.bucket, object.name, object.generation
        );
        let below = object
            .name
            .strip_prefix(&format!("{}/", prefix.prefix))
            .filter(|_| !prefix.prefix.is_empty())
            .unwrap_or(&object.name);
        let skip = |reason: String| SkippedObject {
            at: at.clone(),
            bytes: object.size,
            reason,
        };
        if object.name.ends_with('/') {
            skipped.push(skip("a folder object (its name ends with `/`)".into()));
            continue;
        }
        if let Some(reason) = filter.leaves_out(below) {
            skipped.push(skip(reason));
            continue;
        }
        match ObjectPath::parse(&object.name) {
            Ok(path) => to_read.push((path, object)),
            Err(e) => skipped.push(skip(format!(
                "its name cannot be read through the GCS client ({e}); rename the object to pin it"
            ))),
        }
    }
    let read: Vec<ObjectRead> = futures::stream::iter(to_read.iter())
        .map(|(path, object)| hash_object(&store, &clients, &prefix.bucket, path, object, settings))
        .buffered(settings.parallel.max(1))
        .try_collect()
        .await?;
    let mut found = Vec::new();
    for r in read {
        match r {
            ObjectRead::Archive(g) => found.push(g),
            ObjectRead::NotArchive(s) => skipped.push(s),
        }
    }
    skipped.sort_by(|a, b| a.at.cmp(&b.at));
    Ok((
        GcsPin {
            endpoint: settings.gcs_endpoint.clone(),
            bucket: prefix.bucket.clone(),
            prefix: prefix.prefix.clone(),
            objects: found.len(),
            credentials: clients.describe(),
        },
        found,
        skipped,
    ))
}

/// What reading an object found.
enum ObjectRead {
    /// Its bytes are an archive's, all of them hashed.
    Archive(GcsFound),
    /// Its first bytes are not an archive's; the rest was not read.
    NotArchive(SkippedObject),
}

/// Read the object's live generation once, hashing it.
async fn hash_object(
    store: &GoogleCloudStorage,
    clients: &GcsClients,
    bucket: &str,
    path: &ObjectPath,
    listed: &ListedObject,
    settings: &PinSettings,
) -> Result<ObjectRead, PinError> {
    let object = listed.name.clone();
    let mut head: Vec<u8> = Vec::with_capacity(ArchiveCompression::MAGIC_LEN);
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
            .get_opts(path, options)
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
                    if head.len() < ArchiveCompression::MAGIC_LEN {
                        let take = (ArchiveCompression::MAGIC_LEN - head.len()).min(chunk.len());
                        head.extend_from_slice(&chunk[..take]);
                        if head.len() == ArchiveCompression::MAGIC_LEN
                            && ArchiveCompression::detect(&head).is_none()
                        {
                            let served = generation.as_deref().unwrap_or_default();
                            return Ok(not_archive(bucket, &object, served, size, &head));
                        }
                    }
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
                if ArchiveCompression::detect(&head).is_none() {
                    return Ok(not_archive(bucket, &object, &generation_text, size, &head));
                }
                return Ok(ObjectRead::Archive(GcsFound {
                    bucket: bucket.to_string(),
                    object,
                    generation,
                    sha256: hex::encode(hasher.finalize()),
                    bytes: read,
                }));
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

/// An object whose first bytes are not an archive's.
fn not_archive(bucket: &str, object: &str, generation: &str, size: u64, head: &[u8]) -> ObjectRead {
    ObjectRead::NotArchive(SkippedObject {
        at: format!("gs://{bucket}/{object}#{generation}"),
        bytes: size,
        reason: super::not_archive_reason(head),
    })
}
