//! The GCS location, read through `object_store`'s GCS backend and always pinned to the
//! manifest's object generation (`GetOptions.version`). object_store retries 5xx / 429 /
//! connection faults (its `RetryConfig`) and continues a broken body with a Range request
//! itself; when it gives up mid-body, this source resumes from the byte the sink reached.
//!
//! An emulator (`STORAGE_EMULATOR_HOST` or `sources.gcs.endpoint`) is reached through a
//! service-account file written to a temporary path with `gcs_base_url` and
//! `disable_oauth: true`, as object_store documents. The emulator must serve the XML API on
//! the address it is reached at (fake-gcs-server: `-public-host <host:port>`).
//!
//! The real service is reached with the credentials the chain of [`super::gcs_auth`] finds
//! (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud's application-default file, the metadata
//! server, else none: unsigned requests, as a public bucket is read), with the user project
//! of a requester-pays bucket on every request (`x-goog-user-project`). A refusal (401, 403,
//! a missing bucket, requester pays) is told apart from a fault
//! ([`super::gcs_auth::GcsRefusal`]). [`GcsClients`] is the one place that builds the
//! clients; `pipeline pin` uses it too.

use super::{ArchiveSource, Backoff, FetchInfo, FetchMethod, begin_fetch};
use crate::error::{FetchError, IngestError};
use crate::sink::ByteSink;
use futures::StreamExt;
use futures::future::BoxFuture;
use model::ArchiveSpec;
use model::config::LocationKind;
use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder};
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, GetOptions, GetRange, ObjectStore, RetryConfig};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

pub use super::gcs_auth::{
    CredentialsKind, CredentialsOrigin, GcsAuthEnv, GcsCredentials, GcsRefusal, RefusalContext,
    RefusalKind,
};

/// How to reach GCS.
#[derive(Debug, Clone)]
pub struct GcsSettings {
    /// Emulator base URL (`http://host:port`); `None` for the real service.
    pub endpoint: Option<String>,
    /// The real service's base URL; `None` is `https://storage.googleapis.com`. Another one
    /// is a private endpoint (or a stand-in): requests to it carry the credentials, unlike
    /// an emulator's.
    pub service_url: Option<String>,
    /// Credentials for the real service, as [`GcsCredentials::detect`] found them (an
    /// emulator needs none).
    pub credentials: GcsCredentials,
    /// The project billed for requester-pays buckets, sent as `x-goog-user-project` on
    /// every request ([`super::gcs_auth::user_project`] chooses it).
    pub user_project: Option<String>,
    /// Retries of a transient fault, and resumes of a broken body.
    pub retries: u32,
    /// Whole-request timeout (must cover the largest archive's transfer).
    pub request_timeout: Duration,
    /// First retry pause.
    pub initial_backoff: Duration,
}

/// Builds object_store clients, one per bucket, for the settings' endpoint and credentials.
#[derive(Debug)]
pub struct GcsClients {
    settings: GcsSettings,
    retry: RetryConfig,
    client: ClientOptions,
    /// The emulator's service-account file; lives as long as the clients.
    service_account: Option<tempfile::NamedTempFile>,
    /// Tokens for the real service; `None` sends unsigned requests.
    provider: Option<Arc<super::gcs_auth::GoogleAuthProvider>>,
}

impl GcsClients {
    /// The endpoint the clients talk to, for errors: the emulator's URL or the real service.
    pub fn endpoint_label(&self) -> &str {
        self.settings
            .endpoint
            .as_deref()
            .or(self.settings.service_url.as_deref())
            .unwrap_or("https://storage.googleapis.com")
    }

    /// Which credentials the requests carry, for the user (never a secret).
    pub fn credentials_label(&self) -> String {
        match &self.settings.endpoint {
            Some(e) => format!("none (the emulator at {e}, unsigned requests)"),
            None => self.settings.credentials.label(),
        }
    }

    /// The credentials and user project the requests carry, one line for progress output:
    /// e.g. `GCS credentials: the metadata server at http://metadata.google.internal; user
    /// project my-project`.
    pub fn describe(&self) -> String {
        let project = match &self.settings.user_project {
            Some(p) => format!("; user project {p} (x-goog-user-project)"),
            None => String::new(),
        };
        format!("GCS credentials: {}{project}", self.credentials_label())
    }

    /// The refusal `e` is (401, 403, a missing bucket, requester pays, no token), with the
    /// credentials and user project the request carried.
    pub fn refusal(&self, e: &object_store::Error, bucket: &str) -> Option<GcsRefusal> {
        GcsRefusal::classify(e, &self.refusal_context(bucket, &self.credentials_label()))
    }

    /// The refusal an answer of GCS is (its status and body), like [`GcsClients::refusal`]
    /// for a request made outside object_store (the JSON listing of `pipeline pin`).
    pub fn answer_refusal(&self, status: u16, body: &str, bucket: &str) -> Option<GcsRefusal> {
        GcsRefusal::classify_answer(
            status,
            body,
            &self.refusal_context(bucket, &self.credentials_label()),
        )
    }

    /// What this client's requests to `bucket` carry, for a refusal.
    fn refusal_context<'a>(&'a self, bucket: &'a str, credentials: &'a str) -> RefusalContext<'a> {
        RefusalContext {
            bucket,
            credentials,
            anonymous: self.settings.endpoint.is_some()
                || self.settings.credentials == GcsCredentials::Anonymous,
            user_project: self.settings.user_project.as_deref(),
        }
    }

    /// The token source of the real service's requests; `None` for unsigned requests.
    pub(crate) fn provider(&self) -> Option<&Arc<super::gcs_auth::GoogleAuthProvider>> {
        self.provider.as_ref()
    }

    /// Prepare; no request is made. `connect_timeout` bounds connecting to the endpoint,
    /// `read_timeout` each wait for the next bytes of an answer.
    pub fn new(
        settings: GcsSettings,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Result<GcsClients, String> {
        let provider = match &settings.endpoint {
            Some(_) => None,
            None => settings.credentials.provider()?,
        };
        let service_account = match &settings.endpoint {
            Some(endpoint) => {
                let mut f = tempfile::Builder::new()
                    .prefix("ingest-gcs-emulator-")
                    .suffix(".json")
                    .tempfile()
                    .map_err(|e| format!("writing the emulator's service-account file: {e}"))?;
                let doc = serde_json::json!({
                    "gcs_base_url": endpoint,
                    "disable_oauth": true,
                    "client_email": "",
                    "private_key": "",
                    "private_key_id": "",
                });
                f.write_all(doc.to_string().as_bytes())
                    .and_then(|_| f.flush())
                    .map_err(|e| format!("writing {}: {e}", f.path().display()))?;
                Some(f)
            }
            None => None,
        };
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: settings.initial_backoff,
                max_backoff: Backoff::MAX,
                base: 2.0,
            },
            max_retries: settings.retries as usize,
            // Faults are retried only within one read timeout of the first attempt: an
            // endpoint that accepts and never answers fails after about `read_timeout`.
            retry_timeout: read_timeout,
        };
        let mut client = ClientOptions::new()
            .with_timeout(settings.request_timeout)
            .with_connect_timeout(connect_timeout)
            .with_read_timeout(read_timeout);
        if settings
            .endpoint
            .as_deref()
            .or(settings.service_url.as_deref())
            .is_some_and(|e| e.starts_with("http://"))
        {
            client = client.with_allow_http(true);
        }
        if let Some(project) = &settings.user_project {
            let value = reqwest::header::HeaderValue::from_str(project)
                .map_err(|_| format!("user project `{project}` is not a valid header value"))?;
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert("x-goog-user-project", value);
            client = client.with_default_headers(headers);
        }
        Ok(GcsClients {
            settings,
            retry,
            client,
            service_account,
            provider,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &GcsSettings {
        &self.settings
    }

    /// A client for `bucket`.
    pub fn store(&self, bucket: &str) -> Result<GoogleCloudStorage, String> {
        let mut builder = match (&self.service_account, &self.provider) {
            (Some(f), _) => GoogleCloudStorageBuilder::new()
                .with_service_account_path(f.path().to_string_lossy()),
            (None, Some(p)) => GoogleCloudStorageBuilder::new().with_credentials(p.clone()),
            (None, None) => GoogleCloudStorageBuilder::new().with_skip_signature(true),
        };
        if self.settings.endpoint.is_none()
            && let Some(url) = &self.settings.service_url
        {
            builder = builder.with_base_url(url.trim_end_matches('/'));
        }
        builder
            .with_bucket_name(bucket)
            .with_retry(self.retry.clone())
            .with_client_options(self.client.clone())
            .build()
            .map_err(|e| format!("GCS client for bucket `{bucket}`: {e}"))
    }
}

/// Reads pinned object generations, one object_store client per bucket.
#[derive(Debug)]
pub struct GcsSource {
    stores: BTreeMap<String, GoogleCloudStorage>,
    /// Builds the clients; keeps the emulator's service-account file alive.
    clients: GcsClients,
}

/// `gs://bucket/object#generation` of an archive's GCS location.
pub fn gcs_uri(archive: &ArchiveSpec) -> Option<String> {
    archive.gcs.as_ref().map(|g| g.uri())
}

impl GcsSource {
    /// Build clients for the given buckets with the default timeouts (connect 30 s, read
    /// 120 s). No request is made.
    pub fn new<'b>(
        buckets: impl IntoIterator<Item = &'b str>,
        settings: GcsSettings,
    ) -> Result<GcsSource, IngestError> {
        GcsSource::with_timeouts(
            buckets,
            settings,
            Duration::from_secs(30),
            Duration::from_secs(120),
        )
    }

    /// Build clients for the given buckets: `connect_timeout` bounds connecting to the
    /// endpoint, `read_timeout` each wait for the next bytes of an answer (and the time over
    /// which faults are retried, so a timed-out request is not tried again). No request is
    /// made.
    pub fn with_timeouts<'b>(
        buckets: impl IntoIterator<Item = &'b str>,
        settings: GcsSettings,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Result<GcsSource, IngestError> {
        let clients = GcsClients::new(settings, connect_timeout, read_timeout)
            .map_err(IngestError::Config)?;
        let mut stores = BTreeMap::new();
        for bucket in buckets {
            if stores.contains_key(bucket) {
                continue;
            }
            let store = clients.store(bucket).map_err(IngestError::Config)?;
            stores.insert(bucket.to_string(), store);
        }
        Ok(GcsSource { stores, clients })
    }
}

impl GcsSource {
    /// The clients (their credentials, user project and endpoint).
    pub fn clients(&self) -> &GcsClients {
        &self.clients
    }
}

impl ArchiveSource for GcsSource {
    fn kind(&self) -> LocationKind {
        LocationKind::Gcs
    }

    fn uri(&self, archive: &ArchiveSpec) -> Option<String> {
        gcs_uri(archive)
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
                FetchMethod::FullObject,
                gcs_uri(archive),
                archive.gcs.as_ref(),
                "GCS",
            )?;
            let Some(store) = self.stores.get(&loc.bucket) else {
                return Err(FetchError::Gcs {
                    uri,
                    detail: format!("no client was built for bucket `{}`", loc.bucket),
                });
            };
            let path = ObjectPath::parse(&loc.object).map_err(|e| FetchError::Protocol {
                uri: uri.clone(),
                detail: format!("object name is not a valid path: {e}"),
            })?;
            let pinned = loc.generation.to_string();
            let mut backoff = Backoff::new(self.clients.settings.initial_backoff);
            let mut known_size: Option<u64> = None;
            let mut attempts = 0u32;
            loop {
                attempts += 1;
                let offset = sink.offset();
                if known_size == Some(offset) {
                    return Ok(());
                }
                let options = GetOptions {
                    version: Some(pinned.clone()),
                    range: (offset > 0).then_some(GetRange::Offset(offset)),
                    ..GetOptions::default()
                };
                let result = match store.get_opts(&path, options).await {
                    Ok(r) => r,
                    Err(e) => {
                        if let Some(refusal) = self.clients.refusal(&e, &loc.bucket) {
                            return Err(FetchError::GcsRefused {
                                uri,
                                refusal: Box::new(refusal),
                            });
                        }
                        if let object_store::Error::NotFound { .. } = e {
                            return Err(FetchError::NotFound {
                                uri,
                                detail: format!(
                                    "object `{}` has no generation {} in bucket `{}`",
                                    loc.object, loc.generation, loc.bucket
                                ),
                            });
                        }
                        if unreachable(&e) {
                            return Err(FetchError::Unreachable {
                                uri,
                                endpoint: self.clients.endpoint_label().to_string(),
                                attempts: None,
                                detail: e.to_string(),
                            });
                        }
                        return Err(FetchError::Gcs {
                            uri,
                            detail: format!("{e} (endpoint {})", self.clients.endpoint_label()),
                        });
                    }
                };
                match result.meta.version.as_deref() {
                    Some(v) if v == pinned => {}
                    other => {
                        return Err(FetchError::GenerationMismatch {
                            uri,
                            pinned: loc.generation,
                            served: other.unwrap_or("(none)").to_string(),
                        });
                    }
                }
                let size = result.meta.size;
                if size > archive.bytes {
                    return Err(FetchError::Oversize {
                        uri,
                        advertised: Some(size),
                        expected: archive.bytes,
                    });
                }
                known_size = Some(size);
                let mut stream = result.into_stream();
                let mut broke = None;
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(chunk) => sink.write(&chunk)?,
                        Err(e) => {
                            broke = Some(e);
                            break;
                        }
                    }
                }
                match broke {
                    None => return Ok(()),
                    Some(e) => {
                        if info.resumes >= self.clients.settings.retries {
                            return Err(FetchError::Transport {
                                uri,
                                attempts,
                                reached: sink.offset(),
                                detail: e.to_string(),
                            });
                        }
                        info.resumes += 1;
                        tracing::debug!(%uri, reached = sink.offset(), "body broke; resuming");
                        backoff.wait(None).await;
                    }
                }
            }
        })
    }
}

/// Whether object_store gave up because the endpoint timed out or could not be connected to
/// (its HTTP error kind, found in the error's causes), rather than for an answer it got.
fn unreachable(e: &object_store::Error) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(h) = c.downcast_ref::<HttpError>() {
            return matches!(h.kind(), HttpErrorKind::Timeout | HttpErrorKind::Connect);
        }
        cause = c.source();
    }
    false
}
