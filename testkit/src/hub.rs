//! A local Hugging Face Hub for tests: two loopback listeners on ephemeral ports, the Hub
//! (resolve protocol) and a content host on another origin (LFS bytes, honouring Range),
//! with switches for the faults a real deployment shows.
//!
//! `HEAD|GET /datasets/{owner}/{name}/resolve/{revision}/{path}` (revision and path
//! percent-decoded, the revision one segment: `refs%2Fpr%2F1`): an unknown repository is a
//! 401 (`X-Error-Code: RepoNotFound`: the real Hub answers 401, not 404, for a repository
//! that does not exist and for a private one alike), a gated one without access a 401
//! without a token and a 403 with one (`GatedRepo`), an unknown revision a 404
//! (`RevisionNotFound`), a branch resolves to its commit, an unknown path is a 404
//! (`EntryNotFound`); a known file answers 302 with `X-Repo-Commit`, `X-Linked-Etag`
//! (quoted SHA256), `X-Linked-Size`, `ETag` and a `Location` on the content host, which
//! expires by time ([`HubServer::set_content_url_ttl`], an hour by default, as the real
//! Hub's signed URLs do). A renamed repository ([`HubServer::rename_repo`]) answers every
//! request under its old name with a 307 to a relative `Location` under the new one. The
//! real `huggingface_hub` client downloads from it (see the fidelity test).
//!
//! Every answer waits [`HubServer::set_latency`] first (2 ms by default). With
//! [`HubServer::set_rate_limit`], the Hub counts its requests in fixed windows of real
//! time, sends `RateLimit: "api";r=<left>;t=<seconds to the window's end>` and
//! `RateLimit-Policy: "fixed window";"api";q=<quota>;w=<seconds>` on every answer, as the
//! real Hub does, and answers 429 past the quota until the window ends.
//!
//! The listing API, as `HfApi.dataset_info` and `HfApi.list_repo_tree` read it:
//! `GET /api/datasets/{owner}/{name}/revision/{revision}` (or `/api/datasets/{owner}/{name}`
//! for `main`) answers JSON with `id`, `sha` (the commit the revision resolves to) and
//! `siblings` (`rfilename` per file);
//! `GET /api/datasets/{owner}/{name}/tree/{revision}[/{path}][?recursive=true]` answers a JSON
//! list of entries under `path` (`type` "file" or "directory", `path`, `size`, `oid`, and for
//! files `lfs: {oid: <sha256>, size, pointerSize}`), sorted by path, at most
//! [`HubServer::set_tree_page_size`] entries a page with the next page in a `Link` header
//! (`rel="next"`, a `cursor` parameter) as the real Hub paginates. An unknown repository is a
//! 401 with `X-Error-Code: RepoNotFound`, a gated one `GatedRepo`, an unknown revision a 404
//! `RevisionNotFound`, a path with nothing under it `EntryNotFound`. The `oid` values are stand-ins (40 hex derived from the
//! content's SHA256), not git object ids.
//!
//! Signed content URLs ([`HubFaults::signed_url_uses`]): like the real Hub's, whose
//! `Location` is a signed URL that expires, each resolve then mints a fresh signature
//! (`&sig=N` in the `Location`'s query), and the content host answers 403 (`Request has
//! expired`) to a request whose signature is missing, unknown, or has already served that
//! many requests. [`HubFaults::changed_after_resolves`] makes later resolves announce
//! another commit, etag or size than the first ones (a Hub whose answer changes between
//! two resolves of one fetch).

use crate::TestkitError;
use crate::http::{
    RequestHead, parse_range, percent_decode, read_request, write_head, write_simple,
};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Fault switches of the Hub and its content host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HubFaults {
    /// Answer this `X-Repo-Commit` instead of the real one.
    pub wrong_commit: Option<String>,
    /// Answer this many resolve requests with 429 (`Retry-After: 0`) before serving.
    pub too_many_requests: u32,
    /// Once: close a content connection after this many body bytes (the first answer
    /// longer than that fires it).
    pub drop_content_after: Option<u64>,
    /// Announce `X-Linked-Size` = real size + this.
    pub size_delta: i64,
    /// Flip the byte at this file offset in every content answer covering it.
    pub tamper_at: Option<u64>,
    /// Every repository is private to this token: without `Authorization` the Hub answers
    /// 401 `RepoNotFound` (as for a private repository), with another token 401 `Invalid
    /// credentials in Authorization header`.
    pub require_token: Option<String>,
    /// The content host ignores Range and always answers 200 with the whole file.
    pub ignore_range: bool,
    /// Signed, expiring content URLs: every resolve mints a new signature, good for this
    /// many content requests (`Some(0)`: every content request is refused with 403).
    pub signed_url_uses: Option<u32>,
    /// After this many resolve answers (302) have been served, later ones announce the
    /// given change.
    pub changed_after_resolves: Option<(u32, ResolveChange)>,
}

/// What a later resolve answer announces differently ([`HubFaults::changed_after_resolves`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveChange {
    /// `X-Repo-Commit` names this commit.
    Commit(String),
    /// `X-Linked-Etag` and `ETag` name this (unquoted) value.
    Etag(String),
    /// `X-Linked-Size` is off by this many bytes (on top of [`HubFaults::size_delta`]).
    SizeDelta(i64),
}

/// Which listener answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubRole {
    /// The Hub (resolve).
    Hub,
    /// The content host (bytes).
    Content,
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRequest {
    /// Which listener.
    pub role: HubRole,
    /// Method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// `Range` header.
    pub range: Option<String>,
    /// `Authorization` header.
    pub authorization: Option<String>,
    /// Status answered.
    pub status: u16,
    /// When the answer was given.
    pub at: std::time::Instant,
}

/// A Hub rate limit: at most `quota` requests in each fixed window of `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubRateLimit {
    /// Requests a window allows.
    pub quota: u32,
    /// The window's length (whole seconds, as the headers say it).
    pub window: std::time::Duration,
}

#[derive(Debug)]
struct RateWindow {
    limit: HubRateLimit,
    started: std::time::Instant,
    used: u32,
}

#[derive(Debug, Clone)]
struct HubFile {
    local: PathBuf,
    sha256: String,
    size: u64,
}

#[derive(Debug, Default)]
struct HubState {
    /// (repo, commit, path) -> file
    files: HashMap<(String, String, String), HubFile>,
    /// (repo, branch) -> commit
    branches: HashMap<(String, String), String>,
    faults: HubFaults,
    log: Vec<HubRequest>,
    /// Resolve answers (302) served so far.
    resolves: u32,
    /// Signature -> content requests it has served.
    signatures: HashMap<u64, u32>,
    /// Tree entries per page (0: the real Hub's 1,000).
    tree_page_size: usize,
    /// Gated repository -> tokens granted access.
    gated: HashMap<String, Vec<String>>,
    /// Old repository name -> new name.
    renamed: HashMap<String, String>,
    /// The rate limit and its current window.
    rate: Option<RateWindow>,
    /// Wait before every answer.
    latency: std::time::Duration,
    /// How long a content URL is good for.
    content_url_ttl: std::time::Duration,
}

/// Entries a tree page holds by default, as on the real Hub.
pub const TREE_PAGE_SIZE: usize = 1000;
/// The wait before every answer unless [`HubServer::set_latency`] says otherwise.
pub const DEFAULT_LATENCY: std::time::Duration = std::time::Duration::from_millis(2);
/// How long a content URL is good for unless [`HubServer::set_content_url_ttl`] says
/// otherwise (the real Hub's signed URLs last about an hour).
pub const DEFAULT_CONTENT_URL_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// The running Hub and content host. Dropping it stops both.
#[derive(Debug)]
pub struct HubServer {
    hub: SocketAddr,
    content: SocketAddr,
    state: Arc<Mutex<HubState>>,
    rt: Option<tokio::runtime::Runtime>,
}

impl HubServer {
    /// Start both listeners on 127.0.0.1 with ephemeral ports.
    pub fn start() -> Result<HubServer, TestkitError> {
        HubServer::start_on(0)
    }

    /// Start the Hub on this loopback port (0: ephemeral) and the content host on an
    /// ephemeral one.
    pub fn start_on(hub_port: u16) -> Result<HubServer, TestkitError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("testkit-hub")
            .build()
            .map_err(|e| TestkitError::Io("starting the hub runtime".into(), e))?;
        let state = Arc::new(Mutex::new(HubState {
            latency: DEFAULT_LATENCY,
            content_url_ttl: DEFAULT_CONTENT_URL_TTL,
            ..HubState::default()
        }));
        let (hub_l, content_l) = rt
            .block_on(async {
                Ok::<_, std::io::Error>((
                    TcpListener::bind(("127.0.0.1", hub_port)).await?,
                    TcpListener::bind("127.0.0.1:0").await?,
                ))
            })
            .map_err(|e| TestkitError::Io("binding the hub listeners".into(), e))?;
        let hub = hub_l
            .local_addr()
            .map_err(|e| TestkitError::Io("hub address".into(), e))?;
        let content = content_l
            .local_addr()
            .map_err(|e| TestkitError::Io("content address".into(), e))?;
        let content_origin = format!("http://{content}");
        for (listener, role) in [(hub_l, HubRole::Hub), (content_l, HubRole::Content)] {
            let state = state.clone();
            let origin = content_origin.clone();
            rt.spawn(async move {
                while let Ok((sock, _)) = listener.accept().await {
                    let state = state.clone();
                    let origin = origin.clone();
                    tokio::spawn(async move {
                        let _ = serve_connection(sock, role, state, origin).await;
                    });
                }
            });
        }
        Ok(HubServer {
            hub,
            content,
            state,
            rt: Some(rt),
        })
    }

    /// The Hub's base URL (for `HF_ENDPOINT` / `sources.hf.endpoint`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.hub)
    }

    /// The content host's origin.
    pub fn content_origin(&self) -> String {
        format!("http://{}", self.content)
    }

    /// Serve `local` as `path` of dataset `repo` at `commit` (hashing it now).
    pub fn add_file(
        &self,
        repo: &str,
        commit: &str,
        path: &str,
        local: &Path,
    ) -> Result<String, TestkitError> {
        let (sha256, size) = ingest::sink::hash_file(local)
            .map_err(|e| TestkitError::Io(format!("hashing {}", local.display()), e))?;
        let mut s = self.state.lock().expect("hub state");
        s.files.insert(
            (repo.to_string(), commit.to_string(), path.to_string()),
            HubFile {
                local: local.to_path_buf(),
                sha256: sha256.clone(),
                size,
            },
        );
        Ok(sha256)
    }

    /// Point branch `name` of `repo` at `commit`.
    pub fn set_branch(&self, repo: &str, name: &str, commit: &str) {
        let mut s = self.state.lock().expect("hub state");
        s.branches
            .insert((repo.to_string(), name.to_string()), commit.to_string());
    }

    /// Answer tree listings in pages of `n` entries (the real Hub's page is
    /// [`TREE_PAGE_SIZE`]).
    pub fn set_tree_page_size(&self, n: usize) {
        self.state.lock().expect("hub state").tree_page_size = n;
    }

    /// Gate `repo`: only these tokens have accepted its terms.
    pub fn set_gated(&self, repo: &str, granted_tokens: &[&str]) {
        self.state.lock().expect("hub state").gated.insert(
            repo.to_string(),
            granted_tokens.iter().map(|t| t.to_string()).collect(),
        );
    }

    /// Rename `old` to `new`: the files move, and requests under the old name are
    /// redirected (307, relative `Location`) to the new one.
    pub fn rename_repo(&self, old: &str, new: &str) {
        let mut s = self.state.lock().expect("hub state");
        let moved: Vec<_> = s.files.keys().filter(|k| k.0 == old).cloned().collect();
        for k in moved {
            let f = s.files.remove(&k).expect("listed");
            s.files.insert((new.to_string(), k.1, k.2), f);
        }
        let branches: Vec<_> = s.branches.keys().filter(|k| k.0 == old).cloned().collect();
        for k in branches {
            let c = s.branches.remove(&k).expect("listed");
            s.branches.insert((new.to_string(), k.1), c);
        }
        s.renamed.insert(old.to_string(), new.to_string());
    }

    /// Limit the Hub to `quota` requests per fixed window of `window` (whole seconds), or
    /// lift the limit (`None`). The first window starts now.
    pub fn set_rate_limit(&self, limit: Option<HubRateLimit>) {
        self.state.lock().expect("hub state").rate = limit.map(|limit| RateWindow {
            limit,
            started: std::time::Instant::now(),
            used: 0,
        });
    }

    /// Wait this long before every answer of either listener.
    pub fn set_latency(&self, latency: std::time::Duration) {
        self.state.lock().expect("hub state").latency = latency;
    }

    /// Content URLs minted from now on are good for this long.
    pub fn set_content_url_ttl(&self, ttl: std::time::Duration) {
        self.state.lock().expect("hub state").content_url_ttl = ttl;
    }

    /// Replace the fault switches.
    pub fn set_faults(&self, faults: HubFaults) {
        self.state.lock().expect("hub state").faults = faults;
    }

    /// The current fault switches (a once-fault that fired is cleared).
    pub fn faults(&self) -> HubFaults {
        self.state.lock().expect("hub state").faults.clone()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<HubRequest> {
        self.state.lock().expect("hub state").log.clone()
    }

    /// Forget the request log.
    pub fn clear_requests(&self) {
        self.state.lock().expect("hub state").log.clear();
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn log(state: &Mutex<HubState>, role: HubRole, head: &RequestHead, status: u16) {
    state.lock().expect("hub state").log.push(HubRequest {
        role,
        method: head.method.clone(),
        target: head.target.clone(),
        range: head.header("range").map(str::to_string),
        authorization: head.header("authorization").map(str::to_string),
        status,
        at: std::time::Instant::now(),
    });
}

/// Response headers of a Hub answer.
type Headers = Vec<(&'static str, String)>;
/// Status, headers and a fixed body.
type FixedAnswer = (u16, Headers, &'static [u8]);
/// Status, headers and a body (the listing API's JSON).
type ApiAnswer = (u16, Headers, Vec<u8>);

/// The rate limit, the 429 fault and the token check, shared by every Hub route, in the
/// real Hub's order (a request past the limit is refused before it is authenticated).
fn gate(s: &mut HubState, head: &RequestHead) -> Option<FixedAnswer> {
    if let Some(w) = s.rate.as_mut() {
        let now = std::time::Instant::now();
        let window = w.limit.window.max(std::time::Duration::from_millis(1));
        while now.duration_since(w.started) >= window {
            w.started += window;
            w.used = 0;
        }
        if w.used >= w.limit.quota {
            return Some((429, Vec::new(), b"Too Many Requests"));
        }
        w.used += 1;
    }
    if s.faults.too_many_requests > 0 {
        s.faults.too_many_requests -= 1;
        return Some((429, vec![("Retry-After", "0".into())], b"slow down"));
    }
    if let Some(tok) = &s.faults.require_token {
        match head.header("authorization") {
            None => return Some(repo_not_found()),
            Some(a) if a != format!("Bearer {tok}") => {
                return Some((
                    401,
                    vec![("X-Error-Message", INVALID_CREDENTIALS.into())],
                    b"unauthorized",
                ));
            }
            Some(_) => {}
        }
    }
    None
}

/// The headers of the rate limit's current window, sent on every Hub answer.
fn rate_headers(s: &HubState) -> Headers {
    let Some(w) = &s.rate else {
        return Vec::new();
    };
    let left = w
        .limit
        .window
        .saturating_sub(w.started.elapsed())
        .as_secs_f64()
        .ceil() as u64;
    vec![
        (
            "RateLimit",
            format!(
                "\"api\";r={};t={left}",
                w.limit.quota.saturating_sub(w.used)
            ),
        ),
        (
            "RateLimit-Policy",
            format!(
                "\"fixed window\";\"api\";q={};w={}",
                w.limit.quota,
                w.limit.window.as_secs()
            ),
        ),
    ]
}

/// `X-Error-Message` of a refused token, as the real Hub says it.
const INVALID_CREDENTIALS: &str = "Invalid credentials in Authorization header";

/// 401 `RepoNotFound`: no such repository, or a private one.
fn repo_not_found() -> FixedAnswer {
    (
        401,
        vec![
            ("X-Error-Code", "RepoNotFound".into()),
            ("X-Error-Message", "Repository not found".into()),
        ],
        b"Repository not found",
    )
}

/// `GatedRepo` for a gated repository the request's token has no access to (401 without a
/// token, 403 with one); `None` when access is granted or the repository is not gated.
fn gated_refusal(s: &HubState, repo: &str, head: &RequestHead) -> Option<(u16, Headers)> {
    let granted = s.gated.get(repo)?;
    let token = head
        .header("authorization")
        .and_then(|a| a.strip_prefix("Bearer "));
    match token {
        Some(t) if granted.iter().any(|g| g == t) => None,
        Some(_) => Some((
            403,
            vec![
                ("X-Error-Code", "GatedRepo".into()),
                (
                    "X-Error-Message",
                    format!(
                        "Access to dataset {repo} is restricted and you are not in the authorized list. Visit https://huggingface.co/datasets/{repo} to ask for access."
                    ),
                ),
            ],
        )),
        None => Some((
            401,
            vec![
                ("X-Error-Code", "GatedRepo".into()),
                (
                    "X-Error-Message",
                    format!(
                        "Access to dataset {repo} is restricted. You must have access to it and be authenticated to access it. Please log in."
                    ),
                ),
            ],
        )),
    }
}

/// The 307 of a request under a renamed repository's old name: the same path under the
/// new name, as a relative `Location`.
fn rename_redirect(s: &HubState, head: &RequestHead) -> Option<FixedAnswer> {
    let target = &head.target;
    for prefix in ["/api/datasets/", "/datasets/"] {
        let Some(rest) = target.strip_prefix(prefix) else {
            continue;
        };
        let mut parts = rest.splitn(3, '/');
        let (owner, name) = (parts.next()?, parts.next()?);
        let tail = parts.next().map(|t| format!("/{t}")).unwrap_or_default();
        let (name, query) = match name.split_once('?') {
            Some((n, q)) => (n, format!("?{q}")),
            None => (name, String::new()),
        };
        let new = s.renamed.get(&format!("{owner}/{name}"))?;
        return Some((
            307,
            vec![("Location", format!("{prefix}{new}{tail}{query}"))],
            b"",
        ));
    }
    None
}

impl HubState {
    /// The commit `revision` (a branch or a commit) of `repo` names.
    fn commit_of(&self, repo: &str, revision: &str) -> Option<String> {
        if let Some(c) = self.branches.get(&(repo.to_string(), revision.to_string())) {
            return Some(c.clone());
        }
        self.files
            .keys()
            .any(|(r, c, _)| r == repo && c == revision)
            .then(|| revision.to_string())
    }

    fn knows_repo(&self, repo: &str) -> bool {
        self.files.keys().any(|(r, _, _)| r == repo) || self.branches.keys().any(|(r, _)| r == repo)
    }
}

/// 40 hex standing in for a git object id.
fn stand_in_oid(seed: &str) -> String {
    sha256_hex(format!("oid:{seed}").as_bytes())[..40].to_string()
}

/// A JSON answer of the listing API.
fn api_json(code: u16, mut headers: Headers, body: &serde_json::Value) -> ApiAnswer {
    headers.push(("Content-Type", "application/json".into()));
    (code, headers, body.to_string().into_bytes())
}

fn api_error(code: &str, message: &str) -> ApiAnswer {
    api_json(
        404,
        vec![
            ("X-Error-Code", code.to_string()),
            ("X-Error-Message", message.to_string()),
        ],
        &serde_json::json!({ "error": message }),
    )
}

/// Answer `/api/datasets/{owner}/{name}/revision/{rev}` and `.../tree/{rev}[/{path}]`
/// (`rest` is the path after `/api/datasets/`).
fn serve_api(head: &RequestHead, rest: &str, state: &Mutex<HubState>) -> ApiAnswer {
    let mut s = state.lock().expect("hub state");
    if let Some((code, headers, body)) = gate(&mut s, head).or_else(|| rename_redirect(&s, head)) {
        return (code, headers, body.to_vec());
    }
    let mut parts: Vec<&str> = rest.splitn(5, '/').collect();
    if parts.len() == 2 {
        // `/api/datasets/{owner}/{name}`: the main branch.
        parts.extend(["revision", "main"]);
    }
    if parts.len() < 4 || !matches!(parts[2], "revision" | "tree") {
        return api_error("EntryNotFound", "unknown API route");
    }
    let repo = format!("{}/{}", parts[0], parts[1]);
    let revision = percent_decode(parts[3]);
    if !s.knows_repo(&repo) {
        let (code, headers, body) = repo_not_found();
        return api_json(
            code,
            headers,
            &serde_json::json!({ "error": String::from_utf8_lossy(body) }),
        );
    }
    if let Some((code, headers)) = gated_refusal(&s, &repo, head) {
        return api_json(code, headers, &serde_json::json!({ "error": "gated" }));
    }
    let Some(commit) = s.commit_of(&repo, &revision) else {
        return api_error("RevisionNotFound", "Invalid rev id");
    };
    let mut files: Vec<(String, HubFile)> = s
        .files
        .iter()
        .filter(|((r, c, _), _)| *r == repo && *c == commit)
        .map(|((_, _, p), f)| (p.clone(), f.clone()))
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    if parts[2] == "revision" {
        let siblings: Vec<serde_json::Value> = files
            .iter()
            .map(|(p, _)| serde_json::json!({ "rfilename": p }))
            .collect();
        let body = serde_json::json!({
            "_id": &stand_in_oid(&repo)[..24],
            "id": repo,
            "author": parts[0],
            "sha": commit,
            "private": false,
            "gated": false,
            "disabled": false,
            "tags": [],
            "siblings": siblings,
        });
        return api_json(200, vec![], &body);
    }
    let under = percent_decode(parts.get(4).copied().unwrap_or(""))
        .trim_matches('/')
        .to_string();
    let recursive = query_param(&head.target, "recursive")
        .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    let prefix = if under.is_empty() {
        String::new()
    } else {
        format!("{under}/")
    };
    let mut entries: std::collections::BTreeMap<String, serde_json::Value> = Default::default();
    for (p, f) in &files {
        let Some(rel) = p.strip_prefix(&prefix) else {
            continue;
        };
        let segments: Vec<&str> = rel.split('/').collect();
        // Directories between `under` and the file.
        let depth = if recursive {
            segments.len() - 1
        } else {
            segments.len().min(2) - 1
        };
        for d in 0..depth {
            let dir = format!("{prefix}{}", segments[..=d].join("/"));
            entries.entry(dir.clone()).or_insert_with(|| {
                serde_json::json!({
                    "type": "directory",
                    "oid": stand_in_oid(&format!("{commit}:{dir}")),
                    "size": 0,
                    "path": dir,
                })
            });
        }
        if recursive || segments.len() == 1 {
            entries.insert(
                p.clone(),
                serde_json::json!({
                    "type": "file",
                    "oid": stand_in_oid(&f.sha256),
                    "size": f.size,
                    "lfs": { "oid": f.sha256, "size": f.size, "pointerSize": 134 },
                    "path": p,
                }),
            );
        }
    }
    if entries.is_empty() && !under.is_empty() {
        return api_error(
            "EntryNotFound",
            &format!("{under} does not exist on {commit}"),
        );
    }
    let page_size = match s.tree_page_size {
        0 => TREE_PAGE_SIZE,
        n => n,
    };
    let cursor: usize = query_param(&head.target, "cursor")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let all: Vec<serde_json::Value> = entries.into_values().collect();
    let page: Vec<serde_json::Value> = all.iter().skip(cursor).take(page_size).cloned().collect();
    let mut headers = vec![];
    if cursor + page_size < all.len() {
        let host = head.header("host").unwrap_or("127.0.0.1");
        let (path, query) = head.target.split_once('?').unwrap_or((&head.target, ""));
        let mut kept: Vec<&str> = query
            .split('&')
            .filter(|kv| !kv.is_empty() && !kv.starts_with("cursor="))
            .collect();
        let next = format!("cursor={}", cursor + page_size);
        kept.push(&next);
        headers.push((
            "Link",
            format!("<http://{host}{path}?{}>; rel=\"next\"", kept.join("&")),
        ));
    }
    api_json(200, headers, &serde_json::Value::Array(page))
}

async fn serve_connection(
    sock: TcpStream,
    role: HubRole,
    state: Arc<Mutex<HubState>>,
    content_origin: String,
) -> std::io::Result<()> {
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    while let Some(head) = read_request(&mut r).await? {
        let latency = state.lock().expect("hub state").latency;
        tokio::time::sleep(latency).await;
        let keep = match role {
            HubRole::Hub => serve_hub(&mut w, &head, &state, &content_origin).await?,
            HubRole::Content => serve_content(&mut w, &head, &state).await?,
        };
        if !keep || head.wants_close() {
            break;
        }
    }
    let _ = w.shutdown().await;
    Ok(())
}

/// Answer a Hub request; returns whether to keep the connection.
async fn serve_hub<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    head: &RequestHead,
    state: &Mutex<HubState>,
    content_origin: &str,
) -> std::io::Result<bool> {
    let head_only = head.method == "HEAD";
    let json = |m: &str| ("Content-Type", m.to_string());
    let path = head.path().to_string();
    if let Some(rest) = path.strip_prefix("/api/datasets/") {
        let (code, mut headers, body) = serve_api(head, rest, state);
        headers.extend(rate_headers(&state.lock().expect("hub state")));
        log(state, HubRole::Hub, head, code);
        write_simple(w, code, headers, &body, head_only).await?;
        return Ok(true);
    }
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(6, '/').collect();
    // datasets / owner / name / resolve / revision / file path
    if parts.len() < 6 || parts[0] != "datasets" || parts[3] != "resolve" {
        log(state, HubRole::Hub, head, 404);
        write_simple(
            w,
            404,
            vec![json("text/plain")],
            b"not a resolve URL",
            head_only,
        )
        .await?;
        return Ok(true);
    }
    let repo = format!("{}/{}", parts[1], parts[2]);
    let revision = percent_decode(parts[4]);
    let file_path = percent_decode(parts[5]);
    enum Answer {
        Status(u16, Vec<(&'static str, String)>, &'static [u8]),
        Redirect(Vec<(&'static str, String)>),
    }
    let answer = {
        let mut s = state.lock().expect("hub state");
        if let Some((code, headers, body)) =
            gate(&mut s, head).or_else(|| rename_redirect(&s, head))
        {
            Answer::Status(code, headers, body)
        } else if !s.knows_repo(&repo) {
            let (code, headers, body) = repo_not_found();
            Answer::Status(code, headers, body)
        } else if let Some((code, headers)) = gated_refusal(&s, &repo, head) {
            Answer::Status(code, headers, b"gated")
        } else {
            match s.commit_of(&repo, &revision) {
                None => Answer::Status(
                    404,
                    vec![("X-Error-Code", "RevisionNotFound".into())],
                    b"revision not found",
                ),
                Some(commit) => {
                    match s
                        .files
                        .get(&(repo.clone(), commit.clone(), file_path.clone()))
                    {
                        None => Answer::Status(
                            404,
                            vec![
                                ("X-Error-Code", "EntryNotFound".into()),
                                ("X-Repo-Commit", commit.clone()),
                            ],
                            b"entry not found",
                        ),
                        Some(f) => {
                            let f = f.clone();
                            let mut served =
                                s.faults.wrong_commit.clone().unwrap_or(commit.clone());
                            let mut etag = f.sha256.clone();
                            let mut size = f.size as i64 + s.faults.size_delta;
                            if let Some((after, change)) = &s.faults.changed_after_resolves
                                && s.resolves >= *after
                            {
                                match change {
                                    ResolveChange::Commit(c) => served = c.clone(),
                                    ResolveChange::Etag(e) => etag = e.clone(),
                                    ResolveChange::SizeDelta(d) => size += d,
                                }
                            }
                            s.resolves += 1;
                            let mut location = format!(
                                "{content_origin}/lfs/{}?repo={repo}&commit={commit}",
                                f.sha256
                            );
                            let expires = std::time::SystemTime::now() + s.content_url_ttl;
                            let expires_ms = expires
                                .duration_since(std::time::UNIX_EPOCH)
                                .map(|d| d.as_millis())
                                .unwrap_or(0);
                            location.push_str(&format!("&expires_ms={expires_ms}"));
                            if s.faults.signed_url_uses.is_some() {
                                let sig = s.signatures.len() as u64 + 1;
                                s.signatures.insert(sig, 0);
                                location.push_str(&format!("&sig={sig}"));
                            }
                            Answer::Redirect(vec![
                                ("Location", location),
                                ("X-Repo-Commit", served),
                                ("X-Linked-Etag", format!("\"{etag}\"")),
                                ("X-Linked-Size", size.max(0).to_string()),
                                ("ETag", format!("\"{etag}\"")),
                            ])
                        }
                    }
                }
            }
        }
    };
    let rate = rate_headers(&state.lock().expect("hub state"));
    match answer {
        Answer::Status(code, mut headers, body) => {
            headers.extend(rate);
            log(state, HubRole::Hub, head, code);
            write_simple(w, code, headers, body, head_only).await?;
        }
        Answer::Redirect(mut headers) => {
            headers.extend(rate);
            log(state, HubRole::Hub, head, 302);
            write_simple(w, 302, headers, b"", head_only).await?;
        }
    }
    Ok(true)
}

/// The content host's answer to a signed URL past its lifetime or its uses: 403, as the
/// real content hosts answer.
async fn answer_expired<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    head: &RequestHead,
    state: &Mutex<HubState>,
    head_only: bool,
) -> std::io::Result<bool> {
    log(state, HubRole::Content, head, 403);
    write_simple(
        w,
        403,
        vec![("Content-Type", "text/plain".to_string())],
        b"Request has expired",
        head_only,
    )
    .await?;
    Ok(true)
}

/// Answer a content request; returns whether to keep the connection.
async fn serve_content<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    head: &RequestHead,
    state: &Mutex<HubState>,
) -> std::io::Result<bool> {
    let head_only = head.method == "HEAD";
    let sha = head.path().trim_start_matches("/lfs/").to_string();
    let (file, faults) = {
        let s = state.lock().expect("hub state");
        (
            s.files.values().find(|f| f.sha256 == sha).cloned(),
            s.faults.clone(),
        )
    };
    let Some(file) = file else {
        log(state, HubRole::Content, head, 404);
        write_simple(w, 404, vec![], b"no such object", head_only).await?;
        return Ok(true);
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let fresh = query_param(&head.target, "expires_ms")
        .and_then(|v| v.parse::<u128>().ok())
        .is_some_and(|expires| now_ms < expires);
    if !fresh {
        return answer_expired(w, head, state, head_only).await;
    }
    if let Some(uses) = faults.signed_url_uses {
        let sig = query_param(&head.target, "sig").and_then(|v| v.parse::<u64>().ok());
        let valid = {
            let mut s = state.lock().expect("hub state");
            match sig.and_then(|n| s.signatures.get_mut(&n)) {
                Some(served) if *served < uses => {
                    *served += 1;
                    true
                }
                _ => false,
            }
        };
        if !valid {
            return answer_expired(w, head, state, head_only).await;
        }
    }
    let range = if faults.ignore_range {
        None
    } else {
        parse_range(head.header("range"), file.size)
    };
    if head.header("range").is_some() && range.is_none() && !faults.ignore_range {
        log(state, HubRole::Content, head, 416);
        write_simple(
            w,
            416,
            vec![("Content-Range", format!("bytes */{}", file.size))],
            b"",
            head_only,
        )
        .await?;
        return Ok(true);
    }
    let (status, start, end) = match range {
        Some((a, b)) => (206u16, a, b),
        None => (200u16, 0, file.size.saturating_sub(1)),
    };
    let len = if file.size == 0 { 0 } else { end - start + 1 };
    let mut headers = vec![
        ("Content-Length", len.to_string()),
        ("Content-Type", "application/octet-stream".to_string()),
        ("Accept-Ranges", "bytes".to_string()),
        ("ETag", format!("\"{}\"", file.sha256)),
    ];
    if status == 206 {
        headers.push((
            "Content-Range",
            format!("bytes {start}-{end}/{}", file.size),
        ));
    }
    log(state, HubRole::Content, head, status);
    write_head(w, status, &headers).await?;
    if head_only || len == 0 {
        w.flush().await?;
        return Ok(true);
    }
    let drop_after = faults.drop_content_after;
    let mut f = tokio::fs::File::open(&file.local).await?;
    f.seek(std::io::SeekFrom::Start(start)).await?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    while sent < len {
        let want = ((len - sent) as usize).min(buf.len());
        let n = f.read(&mut buf[..want]).await?;
        if n == 0 {
            break;
        }
        let chunk = &mut buf[..n];
        if let Some(t) = faults.tamper_at {
            let off = start + sent;
            if t >= off && t < off + n as u64 {
                chunk[(t - off) as usize] ^= 0xff;
            }
        }
        if let Some(limit) = drop_after
            && sent + n as u64 > limit
        {
            // A once-fault: disarm it so the retry is served normally.
            state.lock().expect("hub state").faults.drop_content_after = None;
            let k = (limit - sent) as usize;
            w.write_all(&chunk[..k]).await?;
            w.flush().await?;
            return Ok(false);
        }
        w.write_all(chunk).await?;
        sent += n as u64;
    }
    w.flush().await?;
    Ok(true)
}

/// The value of `name` in the query of a request target.
fn query_param<'t>(target: &'t str, name: &str) -> Option<&'t str> {
    target
        .split_once('?')?
        .1
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// SHA256 of bytes, lowercase hex (test helper).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
