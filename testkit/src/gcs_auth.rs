//! A strict stand-in for GCS's authorization, in front of fake-gcs-server (which checks no
//! credentials at all): every request must carry a bearer token the stand-in issued (or a
//! service account's self-signed JWT it can verify), the token's principal must be allowed to
//! read the bucket, and a requester-pays bucket needs a user project the principal may bill.
//! Refusals are GCS's: 401 `AuthenticationRequired` for a missing or unknown token on a
//! private bucket, 403 `AccessDenied` naming the principal and the permission, 404
//! `NoSuchBucket`, 400 `UserProjectMissing`, 403 without `serviceusage.services.use`; XML
//! bodies on the XML API, JSON bodies on `/storage/v1/` and `/download/storage/v1/`.
//!
//! Tokens come from the stand-in's own issuers, each on its own loopback port:
//! - a metadata server (for `GCE_METADATA_HOST`): `GET /` answers the probe, and
//!   `/computeMetadata/v1/instance/service-accounts/default/{token,email}` the VM's service
//!   account, only with `Metadata-Flavor: Google` (403 without, as the real one);
//! - an OAuth token endpoint (`token_uri` of an authorized-user file): `POST /token` with
//!   `grant_type=refresh_token` for registered users (400 `invalid_grant` otherwise);
//! - an STS endpoint (`token_url` of an `external_account` file): `POST /v1/token` with
//!   `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` for registered subject
//!   tokens;
//! - IAM credentials (`service_account_impersonation_url`): `POST
//!   /v1/projects/-/serviceAccounts/{email}:generateAccessToken` with a bearer token whose
//!   principal may impersonate `email` (403 otherwise).

use crate::TestkitError;
use crate::http::{RequestHead, read_request_with_body, write_simple};
use base64::Engine;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The test service account's private key (PKCS#8 PEM), for a `service_account` key file;
/// a key made for these tests only, trusted by nothing but [`GcsAuthGate`].
pub const TEST_SERVICE_ACCOUNT_KEY_PEM: &str =
    include_str!("../fixtures/service-account-test-key.pem");
/// Its public key (PKCS#1 DER), with which the gate verifies self-signed JWTs.
const TEST_SERVICE_ACCOUNT_PUBLIC_KEY: &[u8] =
    include_bytes!("../fixtures/service-account-test-key.pub.der");
/// The key id written into the key file (`private_key_id`) and expected in the JWT header.
pub const TEST_SERVICE_ACCOUNT_KEY_ID: &str = "testkit-key-1";

/// Largest request body the issuers read.
const MAX_BODY: u64 = 64 * 1024;

/// One request the authorizing proxy answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRequest {
    /// Method.
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    /// Whose token it carried (`None`: no `Authorization`, or a token not issued here).
    pub principal: Option<String>,
    /// The user project it named (`x-goog-user-project` or `userProject`).
    pub user_project: Option<String>,
    /// Whether the gate let it through to fake-gcs-server.
    pub admitted: bool,
    /// Status answered (0 while an admitted request is still being answered: every entry is
    /// logged before its answer is sent, so a client that has its answer sees its entry).
    pub status: u16,
}

/// One request to an issuer (metadata server, OAuth, STS, IAM credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerRequest {
    /// Which issuer: `metadata`, `oauth`, `sts`, `iam`.
    pub issuer: &'static str,
    /// Method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Status answered.
    pub status: u16,
}

#[derive(Debug, Default)]
struct Bucket {
    /// `allUsers` may read.
    public: bool,
    /// Principals that may read (get and list).
    readers: BTreeSet<String>,
    /// Requests must name a user project.
    requester_pays: bool,
}

#[derive(Debug, Default)]
struct GateState {
    buckets: BTreeMap<String, Bucket>,
    /// Project -> principals with `serviceusage.services.use` on it.
    billing: BTreeMap<String, BTreeSet<String>>,
    /// Issued access tokens -> principal.
    tokens: BTreeMap<String, String>,
    /// (client_id, client_secret, refresh_token) -> principal.
    users: BTreeMap<(String, String, String), String>,
    /// Subject tokens of workload identity federation -> principal.
    subjects: BTreeMap<String, String>,
    /// (caller, target service account) pairs allowed to impersonate.
    impersonators: BTreeSet<(String, String)>,
    /// The service-account email whose self-signed JWTs (by the test key) are accepted.
    service_account: Option<String>,
    /// The VM's service account, served by the metadata server (`None`: no account).
    metadata_account: Option<String>,
    issued: u64,
    log: Vec<GateRequest>,
    issuer_log: Vec<IssuerRequest>,
}

impl GateState {
    fn issue(&mut self, principal: &str) -> String {
        self.issued += 1;
        let token = format!("ya29.testkit-{}-{}", self.issued, principal.len());
        self.tokens.insert(token.clone(), principal.to_string());
        token
    }
}

/// The running stand-in: the authorizing proxy and its four issuers. Dropping it stops them.
#[derive(Debug)]
pub struct GcsAuthGate {
    proxy: SocketAddr,
    metadata: SocketAddr,
    issuer: SocketAddr,
    state: Arc<Mutex<GateState>>,
    rt: Option<tokio::runtime::Runtime>,
}

fn bind(
    rt: &tokio::runtime::Runtime,
    what: &str,
) -> Result<(TcpListener, SocketAddr), TestkitError> {
    let l = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| TestkitError::Io(format!("binding the {what}"), e))?;
    let a = l
        .local_addr()
        .map_err(|e| TestkitError::Io(format!("{what} address"), e))?;
    Ok((l, a))
}

impl GcsAuthGate {
    /// Start the stand-in in front of fake-gcs-server at `upstream` (`http://host:port`).
    /// Every bucket is unknown (404 `NoSuchBucket`) until [`GcsAuthGate::add_bucket`].
    pub fn start(upstream: &str) -> Result<GcsAuthGate, TestkitError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("testkit-gcs-auth")
            .build()
            .map_err(|e| TestkitError::Io("starting the GCS auth runtime".into(), e))?;
        let (proxy_l, proxy) = bind(&rt, "authorizing proxy")?;
        let (metadata_l, metadata) = bind(&rt, "metadata server")?;
        let (issuer_l, issuer) = bind(&rt, "token issuer")?;
        let state = Arc::new(Mutex::new(GateState::default()));
        let up = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let serve_all = |l: TcpListener, role: Role| {
            let state = state.clone();
            let up = up.clone();
            rt.spawn(async move {
                while let Ok((sock, _)) = l.accept().await {
                    let state = state.clone();
                    let up = up.clone();
                    tokio::spawn(async move {
                        let _ = serve(sock, role, &up, &state).await;
                    });
                }
            });
        };
        serve_all(proxy_l, Role::Proxy);
        serve_all(metadata_l, Role::Metadata);
        serve_all(issuer_l, Role::Issuer);
        Ok(GcsAuthGate {
            proxy,
            metadata,
            issuer,
            state,
            rt: Some(rt),
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut GateState) -> T) -> T {
        f(&mut self.state.lock().expect("gate state"))
    }

    /// The GCS base URL (XML and JSON API) behind the gate: `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.proxy)
    }

    /// `127.0.0.1:<port>` of the metadata server, for `GCE_METADATA_HOST`.
    pub fn metadata_host(&self) -> String {
        self.metadata.to_string()
    }

    /// The OAuth token endpoint (`token_uri` of an authorized-user file).
    pub fn token_uri(&self) -> String {
        format!("http://{}/token", self.issuer)
    }

    /// The STS token-exchange endpoint (`token_url` of an `external_account` file).
    pub fn sts_url(&self) -> String {
        format!("http://{}/v1/token", self.issuer)
    }

    /// The IAM credentials URL that mints tokens for `service_account`
    /// (`service_account_impersonation_url`).
    pub fn impersonation_url(&self, service_account: &str) -> String {
        format!(
            "http://{}/v1/projects/-/serviceAccounts/{service_account}:generateAccessToken",
            self.issuer
        )
    }

    /// Serve `bucket` (it must exist upstream): readable by `readers` (principals, or
    /// `allUsers` for a public bucket); `requester_pays` requires a user project.
    pub fn add_bucket(&self, bucket: &str, readers: &[&str], requester_pays: bool) {
        self.with(|s| {
            let b = s.buckets.entry(bucket.to_string()).or_default();
            for r in readers {
                if *r == "allUsers" {
                    b.public = true;
                } else {
                    b.readers.insert((*r).to_string());
                }
            }
            b.requester_pays = requester_pays;
        });
    }

    /// `principals` may bill `project` (`serviceusage.services.use`).
    pub fn add_billing_project(&self, project: &str, principals: &[&str]) {
        self.with(|s| {
            s.billing
                .entry(project.to_string())
                .or_default()
                .extend(principals.iter().map(|p| p.to_string()))
        });
    }

    /// The metadata server serves `email`'s tokens (the VM's service account).
    pub fn set_metadata_account(&self, email: &str) {
        self.with(|s| s.metadata_account = Some(email.to_string()));
    }

    /// The OAuth endpoint accepts this refresh token (of an authorized-user file) for
    /// `principal`.
    pub fn add_user(
        &self,
        client_id: &str,
        client_secret: &str,
        refresh_token: &str,
        principal: &str,
    ) {
        self.with(|s| {
            s.users.insert(
                (
                    client_id.to_string(),
                    client_secret.to_string(),
                    refresh_token.to_string(),
                ),
                principal.to_string(),
            )
        });
    }

    /// Forget every access token issued so far (expired or revoked tokens); refresh tokens
    /// still work.
    pub fn revoke_access_tokens(&self) {
        self.with(|s| s.tokens.clear());
    }

    /// Forget every refresh token (a revoked login); access tokens issued stay valid.
    pub fn revoke_refresh_tokens(&self) {
        self.with(|s| s.users.clear());
    }

    /// The STS endpoint exchanges this subject token for `principal`'s access token.
    pub fn add_subject_token(&self, subject_token: &str, principal: &str) {
        self.with(|s| {
            s.subjects
                .insert(subject_token.to_string(), principal.to_string())
        });
    }

    /// `caller` may mint tokens for `target` (`iam.serviceAccounts.getAccessToken`).
    pub fn allow_impersonation(&self, caller: &str, target: &str) {
        self.with(|s| {
            s.impersonators
                .insert((caller.to_string(), target.to_string()))
        });
    }

    /// Self-signed JWTs of `email`, signed with [`TEST_SERVICE_ACCOUNT_KEY_PEM`], are
    /// accepted as `email`'s.
    pub fn trust_service_account(&self, email: &str) {
        self.with(|s| s.service_account = Some(email.to_string()));
    }

    /// A `service_account` key file's contents for `email`, signed by the test key.
    pub fn service_account_key(email: &str) -> serde_json::Value {
        serde_json::json!({
            "type": "service_account",
            "project_id": "testkit-project",
            "private_key_id": TEST_SERVICE_ACCOUNT_KEY_ID,
            "private_key": TEST_SERVICE_ACCOUNT_KEY_PEM,
            "client_email": email,
            "client_id": "100000000000000000001",
            "token_uri": "https://oauth2.googleapis.com/token",
        })
    }

    /// Every request the proxy answered.
    pub fn requests(&self) -> Vec<GateRequest> {
        self.with(|s| s.log.clone())
    }

    /// Every request the issuers answered.
    pub fn issuer_requests(&self) -> Vec<IssuerRequest> {
        self.with(|s| s.issuer_log.clone())
    }
}

impl Drop for GcsAuthGate {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Proxy,
    Metadata,
    Issuer,
}

async fn serve(
    sock: TcpStream,
    role: Role,
    upstream: &str,
    state: &Mutex<GateState>,
) -> std::io::Result<()> {
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    // One request per connection: every answer says `Connection: close`.
    let Some((head, body)) = read_request_with_body(&mut r, MAX_BODY).await? else {
        return Ok(());
    };
    match role {
        Role::Proxy => gate(&head, &mut w, upstream, state).await?,
        Role::Metadata => {
            let (status, headers, body) = metadata(&head, state);
            log_issuer(state, "metadata", &head, status);
            write_answer(&mut w, &head, status, headers, body).await?;
        }
        Role::Issuer => {
            let (issuer, status, body) = issue(&head, &body, state);
            log_issuer(state, issuer, &head, status);
            let headers = vec![(
                "Content-Type",
                "application/json; charset=utf-8".to_string(),
            )];
            write_answer(
                &mut w,
                &head,
                status,
                headers,
                body.to_string().into_bytes(),
            )
            .await?;
        }
    }
    let _ = w.shutdown().await;
    Ok(())
}

fn log_issuer(state: &Mutex<GateState>, issuer: &'static str, head: &RequestHead, status: u16) {
    state
        .lock()
        .expect("gate state")
        .issuer_log
        .push(IssuerRequest {
            issuer,
            method: head.method.clone(),
            target: head.target.clone(),
            status,
        });
}

async fn write_answer<W: AsyncWriteExt + Unpin>(
    w: &mut W,
    head: &RequestHead,
    status: u16,
    mut headers: Vec<(&str, String)>,
    body: Vec<u8>,
) -> std::io::Result<()> {
    headers.push(("Connection", "close".into()));
    write_simple(w, status, headers, &body, head.method == "HEAD").await
}

/// The metadata server: the probe, the default service account's token and email.
fn metadata(
    head: &RequestHead,
    state: &Mutex<GateState>,
) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
    let flavor = vec![("Metadata-Flavor", "Google".to_string())];
    if head.header("metadata-flavor") != Some("Google") {
        return (
            403,
            vec![("Content-Type", "text/html; charset=UTF-8".into())],
            b"Missing Metadata-Flavor:Google header.".to_vec(),
        );
    }
    let path = head.path();
    let mut s = state.lock().expect("gate state");
    let account = s.metadata_account.clone();
    match (path, account) {
        ("/", _) => (200, flavor, b"computeMetadata/\n".to_vec()),
        ("/computeMetadata/v1/instance/service-accounts/default/token", Some(email)) => {
            let token = s.issue(&email);
            let body = serde_json::json!({
                "access_token": token,
                "expires_in": 3599,
                "token_type": "Bearer",
            });
            let mut h = flavor;
            h.push(("Content-Type", "application/json".into()));
            (200, h, body.to_string().into_bytes())
        }
        ("/computeMetadata/v1/instance/service-accounts/default/email", Some(email)) => {
            (200, flavor, email.into_bytes())
        }
        ("/computeMetadata/v1/universe/universe-domain", _) => {
            (200, flavor, b"googleapis.com".to_vec())
        }
        _ => (404, flavor, b"Not Found".to_vec()),
    }
}

/// The parameters of a token request: a JSON object or a form body (Google's token
/// endpoints take both).
fn form(head: &RequestHead, body: &[u8]) -> BTreeMap<String, String> {
    if head
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json"))
    {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        return v
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
    }
    let text = String::from_utf8_lossy(body);
    reqwest::Url::parse(&format!("http://form/?{text}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

/// The OAuth, STS and IAM credentials endpoints.
fn issue(
    head: &RequestHead,
    body: &[u8],
    state: &Mutex<GateState>,
) -> (&'static str, u16, serde_json::Value) {
    let mut s = state.lock().expect("gate state");
    let path = head.path();
    let invalid_grant =
        |what: &str| serde_json::json!({"error": "invalid_grant", "error_description": what});
    if head.method != "POST" {
        return (
            "oauth",
            405,
            serde_json::json!({"error": "method not allowed"}),
        );
    }
    if path == "/token" {
        let f = form(head, body);
        if f.get("grant_type").map(String::as_str) != Some("refresh_token") {
            return (
                "oauth",
                400,
                serde_json::json!({"error": "unsupported_grant_type"}),
            );
        }
        let key = (
            f.get("client_id").cloned().unwrap_or_default(),
            f.get("client_secret").cloned().unwrap_or_default(),
            f.get("refresh_token").cloned().unwrap_or_default(),
        );
        return match s.users.get(&key).cloned() {
            Some(principal) => {
                let token = s.issue(&principal);
                (
                    "oauth",
                    200,
                    serde_json::json!({
                        "access_token": token,
                        "expires_in": 3599,
                        "scope": "https://www.googleapis.com/auth/cloud-platform",
                        "token_type": "Bearer",
                    }),
                )
            }
            None => (
                "oauth",
                400,
                invalid_grant("Token has been expired or revoked."),
            ),
        };
    }
    if path == "/v1/token" {
        let f = form(head, body);
        if f.get("grant_type").map(String::as_str)
            != Some("urn:ietf:params:oauth:grant-type:token-exchange")
        {
            return (
                "sts",
                400,
                serde_json::json!({"error": "unsupported_grant_type"}),
            );
        }
        let subject = f.get("subject_token").cloned().unwrap_or_default();
        return match s.subjects.get(&subject).cloned() {
            Some(principal) => {
                let token = s.issue(&principal);
                (
                    "sts",
                    200,
                    serde_json::json!({
                        "access_token": token,
                        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                        "token_type": "Bearer",
                        "expires_in": 3599,
                    }),
                )
            }
            None => ("sts", 400, invalid_grant("The subject token is invalid.")),
        };
    }
    if let Some(rest) = path.strip_prefix("/v1/projects/-/serviceAccounts/")
        && let Some(target) = rest.strip_suffix(":generateAccessToken")
    {
        let caller = bearer(head).and_then(|t| s.tokens.get(t).cloned());
        let allowed = caller
            .as_ref()
            .is_some_and(|c| s.impersonators.contains(&(c.clone(), target.to_string())));
        return match (caller, allowed) {
            (None, _) => (
                "iam",
                401,
                serde_json::json!({"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}),
            ),
            (Some(_), false) => (
                "iam",
                403,
                serde_json::json!({"error": {"code": 403, "message": "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).", "status": "PERMISSION_DENIED"}}),
            ),
            (Some(_), true) => {
                let token = s.issue(target);
                (
                    "iam",
                    200,
                    serde_json::json!({"accessToken": token, "expireTime": "2099-01-01T00:00:00Z"}),
                )
            }
        };
    }
    ("oauth", 404, serde_json::json!({"error": "not found"}))
}

fn bearer(head: &RequestHead) -> Option<&str> {
    let v = head.header("authorization")?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The principal of a self-signed service-account JWT signed by the test key, if it is one
/// and valid now.
fn jwt_principal(token: &str, trusted: &str) -> Option<String> {
    let mut parts = token.split('.');
    let (h, p, sig) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header: serde_json::Value = serde_json::from_slice(&b64.decode(h).ok()?).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&b64.decode(p).ok()?).ok()?;
    if header["alg"] != "RS256" || header["kid"] != TEST_SERVICE_ACCOUNT_KEY_ID {
        return None;
    }
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        TEST_SERVICE_ACCOUNT_PUBLIC_KEY,
    );
    key.verify(format!("{h}.{p}").as_bytes(), &b64.decode(sig).ok()?)
        .ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    let exp = claims["exp"].as_u64()?;
    let iss = claims["iss"].as_str()?;
    (iss == trusted && exp > now).then(|| iss.to_string())
}

/// The bucket a GCS request names: `/storage/v1/b/{bucket}/...`,
/// `/download/storage/v1/b/{bucket}/...` (JSON API) or `/{bucket}/...` (XML API).
fn bucket_of(path: &str) -> (Option<String>, bool) {
    for json_prefix in ["/storage/v1/b/", "/download/storage/v1/b/"] {
        if let Some(rest) = path.strip_prefix(json_prefix) {
            let b = rest.split('/').next().unwrap_or("");
            return (
                (!b.is_empty()).then(|| crate::http::percent_decode(b)),
                true,
            );
        }
    }
    let b = path.trim_start_matches('/').split('/').next().unwrap_or("");
    (
        (!b.is_empty()).then(|| crate::http::percent_decode(b)),
        false,
    )
}

fn query_param(target: &str, name: &str) -> Option<String> {
    let q = target.split_once('?')?.1;
    reqwest::Url::parse(&format!("http://q/?{q}"))
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A GCS error answer in the API's own format.
struct Refusal {
    status: u16,
    code: &'static str,
    message: String,
    details: Option<String>,
}

impl Refusal {
    fn body(&self, json: bool) -> (String, Vec<u8>) {
        if json {
            let reason = match self.status {
                401 => "required",
                403 => "forbidden",
                404 => "notFound",
                _ => "required",
            };
            let message = self.details.clone().unwrap_or_else(|| self.message.clone());
            let body = serde_json::json!({"error": {"code": self.status, "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}]}});
            (
                "application/json; charset=UTF-8".into(),
                body.to_string().into_bytes(),
            )
        } else {
            let details = self
                .details
                .as_ref()
                .map(|d| format!("<Details>{d}</Details>"))
                .unwrap_or_default();
            let body = format!(
                "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{}</Code><Message>{}</Message>{details}</Error>",
                self.code, self.message
            );
            ("application/xml; charset=UTF-8".into(), body.into_bytes())
        }
    }
}

/// Decide as GCS would; `None` lets the request through to fake-gcs-server.
fn authorize(
    head: &RequestHead,
    s: &GateState,
) -> (Option<String>, Option<String>, Option<Refusal>) {
    let token = bearer(head);
    let principal = token.and_then(|t| {
        s.tokens.get(t).cloned().or_else(|| {
            s.service_account
                .as_deref()
                .and_then(|sa| jwt_principal(t, sa))
        })
    });
    let user_project = head
        .header("x-goog-user-project")
        .map(str::to_string)
        .or_else(|| query_param(&head.target, "userProject"));
    let (bucket, _) = bucket_of(head.path());
    let refuse = |r| (principal.clone(), user_project.clone(), Some(r));
    if token.is_some() && principal.is_none() {
        return refuse(Refusal {
            status: 401,
            code: "AuthenticationRequired",
            message: "Invalid Credentials".into(),
            details: None,
        });
    }
    let Some(b) = bucket.as_deref().and_then(|name| s.buckets.get(name)) else {
        return refuse(Refusal {
            status: 404,
            code: "NoSuchBucket",
            message: "The specified bucket does not exist.".into(),
            details: None,
        });
    };
    let who = principal
        .clone()
        .unwrap_or_else(|| "Anonymous caller".into());
    if b.requester_pays {
        let Some(project) = &user_project else {
            return refuse(Refusal {
                status: 400,
                code: "UserProjectMissing",
                message: "Bucket is a requester pays bucket but no user project provided.".into(),
                details: None,
            });
        };
        let may_bill = principal
            .as_ref()
            .is_some_and(|p| s.billing.get(project).is_some_and(|ps| ps.contains(p)));
        if !may_bill {
            return refuse(Refusal {
                status: 403,
                code: "UserProjectAccessDenied",
                message: "Access denied.".into(),
                details: Some(format!(
                    "{who} does not have serviceusage.services.use access to the Google Cloud project {project}. Permission 'serviceusage.services.use' denied on resource (or it may not exist)."
                )),
            });
        }
    }
    let may_read = b.public || principal.as_ref().is_some_and(|p| b.readers.contains(p));
    if !may_read {
        let listing = head.target.contains("list-type=") || head.path().ends_with("/o");
        let (permission, what) = if listing {
            ("storage.objects.list", "bucket")
        } else {
            ("storage.objects.get", "object")
        };
        if principal.is_none() {
            // GCS answers an unsigned request for a private resource 401 on the JSON API
            // and 403 on the XML API; both name the anonymous caller.
            let json = bucket_of(head.path()).1;
            return refuse(Refusal {
                status: if json { 401 } else { 403 },
                code: "AccessDenied",
                message: "Access denied.".into(),
                details: Some(format!(
                    "Anonymous caller does not have {permission} access to the Google Cloud Storage {what}. Permission '{permission}' denied on resource (or it may not exist)."
                )),
            });
        }
        return refuse(Refusal {
            status: 403,
            code: "AccessDenied",
            message: "Access denied.".into(),
            details: Some(format!(
                "{who} does not have {permission} access to the Google Cloud Storage {what}. Permission '{permission}' denied on resource (or it may not exist)."
            )),
        });
    }
    (principal, user_project, None)
}

async fn gate<W: AsyncWriteExt + Unpin>(
    head: &RequestHead,
    w: &mut W,
    upstream: &str,
    state: &Mutex<GateState>,
) -> std::io::Result<()> {
    let (principal, user_project, refusal) = authorize(head, &state.lock().expect("gate state"));
    let entry = {
        let mut s = state.lock().expect("gate state");
        s.log.push(GateRequest {
            method: head.method.clone(),
            target: head.target.clone(),
            principal,
            user_project,
            admitted: refusal.is_none(),
            status: refusal.as_ref().map_or(0, |r| r.status),
        });
        s.log.len() - 1
    };
    match refusal {
        Some(r) => {
            let (content_type, body) = r.body(bucket_of(head.path()).1);
            let mut headers = vec![("Content-Type", content_type)];
            if r.status == 401 {
                headers.push((
                    "WWW-Authenticate",
                    "Bearer realm=\"https://accounts.google.com/\"".into(),
                ));
            }
            write_answer(w, head, r.status, headers, body).await?;
        }
        None => {
            let status = crate::proxy::forward(head, w, upstream, None).await?.0;
            state.lock().expect("gate state").log[entry].status = status;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_of_both_apis() {
        assert_eq!(bucket_of("/b1/o/x.tar"), (Some("b1".into()), false));
        assert_eq!(bucket_of("/storage/v1/b/b2/o"), (Some("b2".into()), true));
        assert_eq!(
            bucket_of("/download/storage/v1/b/b3/o/x"),
            (Some("b3".into()), true)
        );
        assert_eq!(bucket_of("/"), (None, false));
        assert_eq!(
            query_param("/b?userProject=p%2D1&x=2", "userProject").as_deref(),
            Some("p-1")
        );
    }
}
