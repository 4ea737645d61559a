//! The GCS credential chain, in the order Google's own clients follow it (google-auth's
//! `google.auth.default`, AIP-4110): the file `GOOGLE_APPLICATION_CREDENTIALS` names, else
//! gcloud's application-default credentials file (`$CLOUDSDK_CONFIG`, else
//! `~/.config/gcloud`), else the metadata server of GCE / GKE / Cloud Run (found by a short
//! probe, `GCE_METADATA_HOST` honoured), else none: requests are then unsigned, which is how
//! a public bucket is read.
//!
//! Tokens come from `google-cloud-auth` (Google's Rust client library) for every kind of
//! credentials file it supports (service account, authorized user, impersonated service
//! account, workload / workforce identity federation) and for the metadata server; they reach
//! object_store through its `CredentialProvider`. The file found is always handed over
//! explicitly, so a file found through `CLOUDSDK_CONFIG` is the file used.
//!
//! The user project of requester-pays buckets (`x-goog-user-project`) is chosen here too:
//! `GOOGLE_CLOUD_QUOTA_PROJECT`, else `sources.gcs.user_project`, else the credentials file's
//! `quota_project_id`.

use google_cloud_auth::credentials::{
    AccessTokenCredentials, external_account, external_account_authorized_user, impersonated, mds,
    service_account, user_account,
};
use object_store::CredentialProvider;
use object_store::gcp::GcpCredential;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The metadata server's name (tokens are asked there when `GCE_METADATA_HOST` is unset).
const METADATA_HOST: &str = "metadata.google.internal";
/// The address probed when `GCE_METADATA_HOST` is unset (no DNS lookup, as google-auth).
const METADATA_IP: &str = "169.254.169.254";
/// How long one probe of the metadata server waits (`GCE_METADATA_TIMEOUT`, as google-auth).
const METADATA_PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Probes of the metadata server when the connection fails at once (google-auth: 3).
const METADATA_PROBE_ATTEMPTS: u32 = 3;
/// gcloud's application-default credentials file, in its configuration directory.
const ADC_FILE: &str = "application_default_credentials.json";

/// The environment the chain reads, captured once (tests pass their own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcsAuthEnv {
    /// `GOOGLE_APPLICATION_CREDENTIALS`: a credentials file (its path is no secret).
    pub google_application_credentials: Option<PathBuf>,
    /// `CLOUDSDK_CONFIG`: gcloud's configuration directory (default `~/.config/gcloud`).
    pub cloudsdk_config: Option<PathBuf>,
    /// `HOME`, below which gcloud's configuration directory is by default.
    pub home: Option<PathBuf>,
    /// `GCE_METADATA_HOST`: `host[:port]` of the metadata server.
    pub gce_metadata_host: Option<String>,
    /// `GCE_METADATA_IP`: the address probed when `GCE_METADATA_HOST` is unset.
    pub gce_metadata_ip: Option<String>,
    /// `GCE_METADATA_TIMEOUT`: seconds one probe of the metadata server waits (default 3).
    pub gce_metadata_timeout: Option<u64>,
    /// `GOOGLE_CLOUD_QUOTA_PROJECT`: the project billed for requests (requester pays).
    pub quota_project: Option<String>,
}

impl GcsAuthEnv {
    /// Read the process environment (empty values count as unset).
    pub fn from_process() -> GcsAuthEnv {
        GcsAuthEnv::from_lookup(|k| std::env::var(k).ok())
    }

    /// Read the chain's variables through `lookup` (empty values count as unset).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> GcsAuthEnv {
        let var = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        GcsAuthEnv {
            google_application_credentials: var("GOOGLE_APPLICATION_CREDENTIALS")
                .map(PathBuf::from),
            cloudsdk_config: var("CLOUDSDK_CONFIG").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
            gce_metadata_host: var("GCE_METADATA_HOST"),
            gce_metadata_ip: var("GCE_METADATA_IP"),
            gce_metadata_timeout: var("GCE_METADATA_TIMEOUT").and_then(|v| v.trim().parse().ok()),
            quota_project: var("GOOGLE_CLOUD_QUOTA_PROJECT"),
        }
    }

    /// gcloud's application-default credentials file: below `CLOUDSDK_CONFIG`, else below
    /// `~/.config/gcloud`.
    pub fn gcloud_adc_path(&self) -> Option<PathBuf> {
        match (&self.cloudsdk_config, &self.home) {
            (Some(dir), _) => Some(dir.join(ADC_FILE)),
            (None, Some(home)) => Some(home.join(".config/gcloud").join(ADC_FILE)),
            (None, None) => None,
        }
    }
}

/// Where a credentials file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialsOrigin {
    /// `GOOGLE_APPLICATION_CREDENTIALS`.
    EnvVar,
    /// gcloud's application-default credentials file (`gcloud auth application-default
    /// login`).
    Gcloud,
}

/// The `type` of a credentials file, as far as the chain supports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialsKind {
    /// `service_account`: a service-account key.
    ServiceAccount,
    /// `authorized_user`: a user's refresh token (`gcloud auth application-default login`).
    AuthorizedUser,
    /// `impersonated_service_account` (`gcloud auth application-default login
    /// --impersonate-service-account`).
    ImpersonatedServiceAccount,
    /// `external_account`: workload or workforce identity federation.
    ExternalAccount,
    /// `external_account_authorized_user`: workforce identity federation, signed in through
    /// `gcloud auth application-default login --login-config`.
    ExternalAccountAuthorizedUser,
}

impl CredentialsKind {
    /// The kind for a file's `type`, or a refusal that names the type and what to use.
    fn of(type_: &str) -> Result<CredentialsKind, String> {
        Ok(match type_ {
            "service_account" => CredentialsKind::ServiceAccount,
            "authorized_user" => CredentialsKind::AuthorizedUser,
            "impersonated_service_account" => CredentialsKind::ImpersonatedServiceAccount,
            "external_account" => CredentialsKind::ExternalAccount,
            "external_account_authorized_user" => CredentialsKind::ExternalAccountAuthorizedUser,
            "gdch_service_account" => {
                return Err("credentials of type `gdch_service_account` (Google Distributed Cloud Hosted) are not supported; use a service-account key, or run `gcloud auth application-default login`".into());
            }
            other => {
                return Err(format!(
                    "credentials of type `{other}` are not supported (supported: service_account, authorized_user, impersonated_service_account, external_account, external_account_authorized_user); use a service-account key, or run `gcloud auth application-default login`"
                ));
            }
        })
    }

    /// How a user says it.
    fn describe(self) -> &'static str {
        match self {
            CredentialsKind::ServiceAccount => "service-account key",
            CredentialsKind::AuthorizedUser => "authorized user",
            CredentialsKind::ImpersonatedServiceAccount => "impersonated service account",
            CredentialsKind::ExternalAccount => "workload identity federation (external_account)",
            CredentialsKind::ExternalAccountAuthorizedUser => {
                "workforce identity federation (external_account_authorized_user)"
            }
        }
    }
}

/// A credentials file's contents; its `Debug` never shows them.
#[derive(Clone, PartialEq)]
pub struct CredentialsJson(serde_json::Value);

impl std::fmt::Debug for CredentialsJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CredentialsJson(<redacted>)")
    }
}

/// The credentials the chain chose.
#[derive(Debug, Clone, PartialEq)]
pub enum GcsCredentials {
    /// A credentials file.
    File {
        /// The file.
        path: PathBuf,
        /// Where it was found.
        origin: CredentialsOrigin,
        /// Its `type`.
        kind: CredentialsKind,
        /// Who it signs in as, when the file says (a service account's `client_email`, an
        /// impersonation's target); no secret.
        principal: Option<String>,
        /// Its contents.
        json: CredentialsJson,
    },
    /// The metadata server at this base URL (`http://host[:port]`).
    MetadataServer {
        /// Base URL.
        url: String,
    },
    /// None: requests are not signed (public buckets).
    Anonymous,
}

impl GcsCredentials {
    /// Follow the chain over `env`: `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's
    /// application-default file, the metadata server (probed), else anonymous. A file that
    /// cannot be read or is of an unsupported type is refused (the chain does not go on past
    /// a file the user named).
    pub async fn detect(env: &GcsAuthEnv) -> Result<GcsCredentials, String> {
        if let Some(path) = &env.google_application_credentials {
            return GcsCredentials::from_file(path, CredentialsOrigin::EnvVar);
        }
        if let Some(path) = env.gcloud_adc_path()
            && path.is_file()
        {
            return GcsCredentials::from_file(&path, CredentialsOrigin::Gcloud);
        }
        if let Some(url) = probe_metadata_server(env).await {
            return Ok(GcsCredentials::MetadataServer { url });
        }
        Ok(GcsCredentials::Anonymous)
    }

    /// A credentials file, read and checked now.
    pub fn from_file(path: &Path, origin: CredentialsOrigin) -> Result<GcsCredentials, String> {
        let named = match origin {
            CredentialsOrigin::EnvVar => {
                format!("GOOGLE_APPLICATION_CREDENTIALS names {}", path.display())
            }
            CredentialsOrigin::Gcloud => {
                format!(
                    "gcloud's application-default credentials {}",
                    path.display()
                )
            }
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{named}, which cannot be read: {e}"))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            // The category and the line only: the text could quote a secret.
            let what = match e.classify() {
                serde_json::error::Category::Eof => "cut short",
                _ => "not valid JSON",
            };
            format!(
                "{named}, which is not a credentials file (JSON {what} at line {})",
                e.line()
            )
        })?;
        let type_ = value
            .get("type")
            .and_then(|t| t.as_str())
            .ok_or_else(|| format!("{named}, which has no `type` field"))?;
        let kind = CredentialsKind::of(type_).map_err(|e| format!("{named}: {e}"))?;
        let principal = match kind {
            CredentialsKind::ServiceAccount => value
                .get("client_email")
                .and_then(|v| v.as_str())
                .map(str::to_string),
            CredentialsKind::ImpersonatedServiceAccount => value
                .get("service_account_impersonation_url")
                .and_then(|v| v.as_str())
                .and_then(impersonation_target),
            _ => None,
        };
        Ok(GcsCredentials::File {
            path: path.to_path_buf(),
            origin,
            kind,
            principal,
            json: CredentialsJson(value),
        })
    }

    /// Which credentials, for a user (never a secret): e.g. `service-account key
    /// /keys/sa.json (GOOGLE_APPLICATION_CREDENTIALS) as sa@p.iam.gserviceaccount.com`.
    pub fn label(&self) -> String {
        match self {
            GcsCredentials::File {
                path,
                origin,
                kind,
                principal,
                ..
            } => {
                let from = match origin {
                    CredentialsOrigin::EnvVar => "GOOGLE_APPLICATION_CREDENTIALS",
                    CredentialsOrigin::Gcloud => "gcloud application-default credentials",
                };
                let who = principal
                    .as_deref()
                    .map(|p| format!(" as {p}"))
                    .unwrap_or_default();
                format!("{} {} ({from}){who}", kind.describe(), path.display())
            }
            GcsCredentials::MetadataServer { url } => format!("the metadata server at {url}"),
            GcsCredentials::Anonymous => "no credentials (unsigned requests)".into(),
        }
    }

    /// The user project a credentials file names (`quota_project_id`), if any.
    pub fn file_quota_project(&self) -> Option<&str> {
        match self {
            GcsCredentials::File { json, .. } => json
                .0
                .get("quota_project_id")
                .and_then(|v| v.as_str())
                .filter(|v| !v.trim().is_empty()),
            _ => None,
        }
    }

    /// The token provider for object_store; `None` for anonymous requests. Built inside a
    /// tokio runtime: google-cloud-auth refreshes its tokens in a task of it.
    pub(crate) fn provider(&self) -> Result<Option<Arc<GoogleAuthProvider>>, String> {
        if *self != GcsCredentials::Anonymous && tokio::runtime::Handle::try_current().is_err() {
            return Err("GCS clients with credentials must be built inside a tokio runtime".into());
        }
        let built = match self {
            GcsCredentials::Anonymous => return Ok(None),
            GcsCredentials::MetadataServer { url } => mds::Builder::default()
                .with_endpoint(url.clone())
                .build_access_token_credentials(),
            GcsCredentials::File { json, kind, .. } => {
                let json = json.0.clone();
                match kind {
                    CredentialsKind::ServiceAccount => {
                        service_account::Builder::new(json).build_access_token_credentials()
                    }
                    CredentialsKind::AuthorizedUser => {
                        user_account::Builder::new(json).build_access_token_credentials()
                    }
                    CredentialsKind::ImpersonatedServiceAccount => {
                        impersonated::Builder::new(json).build_access_token_credentials()
                    }
                    CredentialsKind::ExternalAccount => {
                        external_account::Builder::new(json).build_access_token_credentials()
                    }
                    CredentialsKind::ExternalAccountAuthorizedUser => {
                        external_account_authorized_user::Builder::new(json)
                            .build_access_token_credentials()
                    }
                }
            }
        };
        let credentials = built.map_err(|e| format!("{}: {e}", self.label()))?;
        Ok(Some(Arc::new(GoogleAuthProvider {
            credentials,
            label: self.label(),
        })))
    }
}

/// `sa@p.iam.gserviceaccount.com` of `.../serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken`.
fn impersonation_target(url: &str) -> Option<String> {
    let tail = url.rsplit("/serviceAccounts/").next()?;
    let target = tail.split(':').next()?;
    (!target.is_empty() && target != url).then(|| target.to_string())
}

/// Probe the metadata server as google-auth does: `GET /` with `Metadata-Flavor: Google`,
/// answered `200` with the same header. `GCE_METADATA_HOST` is probed when set (and is then
/// where tokens are asked); otherwise `GCE_METADATA_IP` (default 169.254.169.254), and tokens
/// are asked at `metadata.google.internal`. Each probe waits `GCE_METADATA_TIMEOUT` seconds
/// (default 3) at most; a timed-out probe is not repeated, so off GCE the chain waits a few
/// seconds at most.
async fn probe_metadata_server(env: &GcsAuthEnv) -> Option<String> {
    let (url, probe) = match &env.gce_metadata_host {
        Some(host) => (format!("http://{host}"), format!("http://{host}/")),
        None => (
            format!("http://{METADATA_HOST}"),
            format!(
                "http://{}/",
                env.gce_metadata_ip.as_deref().unwrap_or(METADATA_IP)
            ),
        ),
    };
    let timeout = env
        .gce_metadata_timeout
        .map(Duration::from_secs)
        .unwrap_or(METADATA_PROBE_TIMEOUT);
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        .timeout(timeout)
        .build()
        .ok()?;
    for _ in 0..METADATA_PROBE_ATTEMPTS {
        match client
            .get(&probe)
            .header("Metadata-Flavor", "Google")
            .send()
            .await
        {
            Ok(answer) => {
                let flavor = answer
                    .headers()
                    .get("metadata-flavor")
                    .and_then(|v| v.to_str().ok());
                let is_metadata_server = answer.status().is_success() && flavor == Some("Google");
                tracing::debug!(%probe, status = %answer.status(), is_metadata_server, "metadata server probe");
                return is_metadata_server.then_some(url);
            }
            Err(e) if e.is_timeout() => {
                tracing::debug!(%probe, "metadata server probe timed out");
                return None;
            }
            Err(e) => tracing::debug!(%probe, error = %e, "metadata server probe failed"),
        }
    }
    None
}

/// Getting a token failed (a refresh refused, the metadata server silent, a subject token
/// file missing, ...).
#[derive(Debug, thiserror::Error)]
#[error("could not get an access token from {from}: {detail}")]
pub struct GcsTokenError {
    /// The credentials' label.
    pub from: String,
    /// google-cloud-auth's error text.
    pub detail: String,
}

/// google-cloud-auth's tokens as object_store credentials (cached and refreshed by
/// google-cloud-auth).
#[derive(Debug)]
pub(crate) struct GoogleAuthProvider {
    credentials: AccessTokenCredentials,
    label: String,
}

#[async_trait::async_trait]
impl CredentialProvider for GoogleAuthProvider {
    type Credential = GcpCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<GcpCredential>> {
        match self.credentials.access_token().await {
            Ok(token) => Ok(Arc::new(GcpCredential {
                bearer: token.token,
            })),
            Err(e) => Err(object_store::Error::Generic {
                store: "GCS",
                source: Box::new(GcsTokenError {
                    from: self.label.clone(),
                    detail: chain_text(&e),
                }),
            }),
        }
    }
}

/// An error and its causes, one line.
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cause = c.source();
    }
    parts.join(": ").replace('\n', " ")
}

/// The user project billed for requests (requester pays), sent as `x-goog-user-project`:
/// `GOOGLE_CLOUD_QUOTA_PROJECT` wins (as in Google's clients), else the configured one
/// (`sources.gcs.user_project`), else the credentials file's `quota_project_id`.
pub fn user_project(
    env: &GcsAuthEnv,
    configured: Option<&str>,
    credentials: &GcsCredentials,
) -> Option<String> {
    env.quota_project
        .as_deref()
        .or(configured)
        .or_else(|| credentials.file_quota_project())
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

/// What kind of refusal a GCS answer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// HTTP 401: the credentials (or the token) were not accepted.
    Unauthenticated,
    /// HTTP 403: the credentials' principal may not read the object or list the bucket.
    PermissionDenied,
    /// HTTP 404 `NoSuchBucket`: the bucket does not exist.
    NoSuchBucket,
    /// HTTP 400 `UserProjectMissing`: a requester-pays bucket, and no user project was sent.
    UserProjectMissing,
    /// The user project sent was refused (HTTP 400 `UserProjectInvalid` /
    /// `UserProjectAccountProblem`, or 403 without `serviceusage.services.use` on it).
    UserProjectRefused,
    /// No token could be obtained from the credentials.
    NoToken,
}

/// A refusal by GCS (or by the credentials before any request), with the credentials and
/// user project the request was made with, for a one-line message and a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcsRefusal {
    /// The kind.
    pub kind: RefusalKind,
    /// The HTTP status (none for [`RefusalKind::NoToken`]).
    pub status: Option<u16>,
    /// GCS's error code (`AccessDenied`, `UserProjectMissing`, ...), when it gave one.
    pub code: Option<String>,
    /// GCS's message (its `Details` when it gave them), or the token error.
    pub message: String,
    /// The bucket asked.
    pub bucket: String,
    /// The credentials' label ([`GcsCredentials::label`]).
    pub credentials: String,
    /// Whether the requests were unsigned.
    pub anonymous: bool,
    /// The user project sent, if any.
    pub user_project: Option<String>,
}

impl std::fmt::Display for GcsRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let answer = match (self.status, &self.code) {
            (Some(s), Some(c)) => format!("HTTP {s} {c}"),
            (Some(s), None) => format!("HTTP {s}"),
            (None, _) => String::new(),
        };
        let project = match &self.user_project {
            Some(p) => format!(", user project `{p}`"),
            None => String::new(),
        };
        let what = match self.kind {
            RefusalKind::Unauthenticated => "GCS did not accept the credentials",
            RefusalKind::PermissionDenied => "access denied",
            RefusalKind::NoSuchBucket => "the bucket does not exist",
            RefusalKind::UserProjectMissing => {
                "the bucket is a requester-pays bucket and no user project was given"
            }
            RefusalKind::UserProjectRefused => "GCS refused the user project",
            RefusalKind::NoToken => {
                return write!(
                    f,
                    "bucket `{}`: {} (credentials: {}{project})",
                    self.bucket, self.message, self.credentials
                );
            }
        };
        write!(
            f,
            "bucket `{}`: {what} ({answer}: {}; credentials: {}{project})",
            self.bucket, self.message, self.credentials
        )
    }
}

impl GcsRefusal {
    /// What to do, naming what to set.
    pub fn hint(&self) -> String {
        match self.kind {
            RefusalKind::Unauthenticated if self.anonymous => "the bucket needs credentials: run `gcloud auth application-default login`, or export GOOGLE_APPLICATION_CREDENTIALS=/path/to/key.json (on GCE/GKE the metadata server is used when nothing else is set)".into(),
            RefusalKind::Unauthenticated => format!(
                "the token from {} was refused (expired or revoked?): renew it (`gcloud auth application-default login`), or point GOOGLE_APPLICATION_CREDENTIALS at valid credentials",
                self.credentials
            ),
            RefusalKind::PermissionDenied if self.anonymous => "the bucket is not public: run `gcloud auth application-default login`, or export GOOGLE_APPLICATION_CREDENTIALS=/path/to/key.json, with an account that may read it".into(),
            RefusalKind::PermissionDenied => format!(
                "grant the principal of {} roles/storage.objectViewer on gs://{} (listing needs storage.objects.list too), or use other credentials (GOOGLE_APPLICATION_CREDENTIALS)",
                self.credentials, self.bucket
            ),
            RefusalKind::NoSuchBucket => "check the bucket name (gcs_bucket in the manifest, or --gcs)".into(),
            RefusalKind::UserProjectMissing => "name a project to bill: set sources.gcs.user_project in pipeline.yaml or export GOOGLE_CLOUD_QUOTA_PROJECT=PROJECT (the requests then carry x-goog-user-project); the credentials need serviceusage.services.use on it".into(),
            RefusalKind::UserProjectRefused => format!(
                "the user project must exist, have billing enabled, and the principal of {} needs serviceusage.services.use on it (roles/serviceusage.serviceUsageConsumer); change sources.gcs.user_project or GOOGLE_CLOUD_QUOTA_PROJECT",
                self.credentials
            ),
            RefusalKind::NoToken => "check the credentials: renew a login with `gcloud auth application-default login`, or point GOOGLE_APPLICATION_CREDENTIALS at a valid file; on GCE/GKE check the VM's service account".into(),
        }
    }

    /// The refusal an object_store error carries, if it is one (401, 403, 404 of a
    /// bucket, a requester-pays refusal, a token that could not be had); `None` for every
    /// other error (transport faults, other statuses).
    pub fn classify(e: &object_store::Error, asked: &RefusalContext<'_>) -> Option<GcsRefusal> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(c) = cause {
            if let Some(t) = c.downcast_ref::<GcsTokenError>() {
                return Some(asked.refusal(RefusalKind::NoToken, None, None, t.to_string()));
            }
            cause = c.source();
        }
        // object_store keeps the status in an error type it does not export; its text
        // carries the status and the answer's body ("... status code: 400 Bad Request:
        // <body>").
        let text = chain_text(e);
        let status = match e {
            object_store::Error::Unauthenticated { .. } => 401,
            object_store::Error::PermissionDenied { .. } => 403,
            object_store::Error::NotFound { .. } => 404,
            _ => status_in(&text)?,
        };
        GcsRefusal::classify_answer(status, &text, asked)
    }

    /// The refusal an answer of GCS is (its status and body, XML or JSON), if it is one;
    /// `None` for every other status.
    pub fn classify_answer(
        status: u16,
        body_text: &str,
        asked: &RefusalContext<'_>,
    ) -> Option<GcsRefusal> {
        let user_project = asked.user_project;
        let body = ErrorBody::parse(body_text);
        let code = body.code.clone();
        let message = body.message();
        let about_user_project = code
            .as_deref()
            .is_some_and(|c| c.starts_with("UserProject"))
            || message.contains("serviceusage.services.use")
            || message.contains("user project");
        let kind = match status {
            400 if code.as_deref() == Some("UserProjectMissing")
                || message.contains("requester pays bucket but no user project") =>
            {
                RefusalKind::UserProjectMissing
            }
            400 if about_user_project => RefusalKind::UserProjectRefused,
            401 => RefusalKind::Unauthenticated,
            403 if about_user_project && user_project.is_some() => RefusalKind::UserProjectRefused,
            403 => RefusalKind::PermissionDenied,
            404 if code.as_deref() == Some("NoSuchBucket")
                || message.contains("bucket does not exist") =>
            {
                RefusalKind::NoSuchBucket
            }
            _ => return None,
        };
        Some(asked.refusal(kind, Some(status), code, message))
    }
}

/// What a refused request carried, to name in the refusal.
#[derive(Debug, Clone, Copy)]
pub struct RefusalContext<'a> {
    /// The bucket asked.
    pub bucket: &'a str,
    /// The credentials' label ([`GcsCredentials::label`]).
    pub credentials: &'a str,
    /// Whether the request was unsigned.
    pub anonymous: bool,
    /// The user project sent, if any.
    pub user_project: Option<&'a str>,
}

impl RefusalContext<'_> {
    fn refusal(
        &self,
        kind: RefusalKind,
        status: Option<u16>,
        code: Option<String>,
        message: String,
    ) -> GcsRefusal {
        GcsRefusal {
            kind,
            status,
            code,
            message,
            bucket: self.bucket.to_string(),
            credentials: self.credentials.to_string(),
            anonymous: self.anonymous,
            user_project: self.user_project.map(str::to_string),
        }
    }
}

/// The status in object_store's text of a failed request.
fn status_in(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// GCS's error body: XML (`<Error><Code>..</Code><Message>..</Message><Details>..</Details>`,
/// the XML API object_store reads through) or JSON (`{"error": {"message": .., "errors":
/// [{"reason": ..}]}}`, the JSON API).
#[derive(Debug, Default, PartialEq, Eq)]
struct ErrorBody {
    code: Option<String>,
    text: Option<String>,
    details: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlError {
    code: Option<String>,
    message: Option<String>,
    details: Option<String>,
}

impl ErrorBody {
    fn parse(text: &str) -> ErrorBody {
        if let Some(start) = text.find("<Error>")
            && let Some(end) = text[start..].find("</Error>")
            && let Ok(x) =
                quick_xml::de::from_str::<XmlError>(&text[start..start + end + "</Error>".len()])
        {
            return ErrorBody {
                code: x.code,
                text: x.message,
                details: x.details,
            };
        }
        if let Some(start) = text.find('{')
            && let Some(v) = serde_json::Deserializer::from_str(&text[start..])
                .into_iter::<serde_json::Value>()
                .next()
                .and_then(Result::ok)
        {
            let error = &v["error"];
            return ErrorBody {
                code: error["errors"][0]["reason"].as_str().map(str::to_string),
                text: error["message"].as_str().map(str::to_string),
                details: None,
            };
        }
        ErrorBody::default()
    }

    /// The most telling text: the details, else the message, else a placeholder.
    fn message(&self) -> String {
        self.details
            .as_deref()
            .or(self.text.as_deref())
            .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| "no error text in the answer".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_both_apis() {
        let xml = "Error performing GET http://h/b/o in 1ms - Server returned non-2xx status code: 400 Bad Request: <?xml version='1.0' encoding='UTF-8'?><Error><Code>UserProjectMissing</Code><Message>Bucket is a requester pays bucket but no user project provided.</Message></Error>";
        assert_eq!(status_in(xml), Some(400));
        let b = ErrorBody::parse(xml);
        assert_eq!(b.code.as_deref(), Some("UserProjectMissing"));
        assert_eq!(
            b.message(),
            "Bucket is a requester pays bucket but no user project provided."
        );
        let json = r#"status code: 403 Forbidden: {"error": {"code": 403, "message": "a@b does not have storage.objects.list access.", "errors": [{"reason": "forbidden"}]}}"#;
        let b = ErrorBody::parse(json);
        assert_eq!(b.code.as_deref(), Some("forbidden"));
        assert_eq!(
            b.message(),
            "a@b does not have storage.objects.list access."
        );
        assert_eq!(
            ErrorBody::parse("nothing").message(),
            "no error text in the answer"
        );
    }

    #[test]
    fn impersonation_targets_and_adc_paths() {
        assert_eq!(
            impersonation_target("https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken").as_deref(),
            Some("sa@p.iam.gserviceaccount.com")
        );
        assert_eq!(impersonation_target("nonsense"), None);
        let env = GcsAuthEnv {
            home: Some("/home/u".into()),
            ..GcsAuthEnv::default()
        };
        assert_eq!(
            env.gcloud_adc_path().unwrap(),
            Path::new("/home/u/.config/gcloud/application_default_credentials.json")
        );
        let env = GcsAuthEnv {
            cloudsdk_config: Some("/cfg".into()),
            ..env
        };
        assert_eq!(
            env.gcloud_adc_path().unwrap(),
            Path::new("/cfg/application_default_credentials.json")
        );
    }
}
