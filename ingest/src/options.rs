//! How a run is asked for: command-line choices and the environment the ecosystems define
//! (`STORAGE_EMULATOR_HOST`, the GCS credential chain's variables, `HF_ENDPOINT`, the Hub
//! token and `HF_HUB_OFFLINE`), captured once so tests can pass their own values without
//! touching the process environment.
//!
//! The Hub token is found as `huggingface_hub`'s `get_token` finds it: `HF_TOKEN`, else
//! `HUGGING_FACE_HUB_TOKEN`, else the token file `hf auth login` writes (`HF_TOKEN_PATH`,
//! default `$HF_HOME/token`, `HF_HOME` default `$XDG_CACHE_HOME/huggingface`, that default
//! `~/.cache/huggingface`), each cleaned of newlines and surrounding blanks (empty counts as
//! unset).

use crate::progress::{NoProgress, ProgressSink};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where a Hub token came from (named in messages; never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// An environment variable (`HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`).
    Env(&'static str),
    /// The token file (`HF_TOKEN_PATH`, default `$HF_HOME/token`).
    File(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Env(name) => f.write_str(name),
            TokenSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A Hugging Face token and where it came from. Its `Debug` never shows the value; it is
/// sent only to the Hub.
#[derive(Clone, PartialEq, Eq)]
pub struct HfToken {
    value: String,
    source: TokenSource,
}

impl HfToken {
    /// Wrap a token given as `HF_TOKEN`.
    pub fn new(token: impl Into<String>) -> HfToken {
        HfToken::from_source(token, TokenSource::Env("HF_TOKEN"))
    }
    /// Wrap a token found in `source`.
    pub fn from_source(token: impl Into<String>, source: TokenSource) -> HfToken {
        HfToken {
            value: token.into(),
            source,
        }
    }
    /// Where it came from.
    pub fn source(&self) -> &TokenSource {
        &self.source
    }
    /// Why the token cannot be sent as an HTTP header value (a newline or other control
    /// character, as `echo` into a file leaves), without showing the token; `None` when it
    /// can.
    pub fn header_problem(&self) -> Option<String> {
        let bad = self.value.bytes().any(|b| b < 0x20 || b == 0x7f);
        bad.then(|| format!("{} contains a newline or another control character, which is not allowed in an HTTP header (check how it was set; it was not sent)", self.source))
    }
    /// The secret itself, for the `Authorization` header only.
    pub(crate) fn expose(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for HfToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HfToken(<redacted> from {})", self.source)
    }
}

/// Environment overrides of endpoints and credentials.
#[derive(Debug, Clone, Default)]
pub struct EnvOverrides {
    /// `STORAGE_EMULATOR_HOST` (`host:port` or a URL): GCS reads go to this emulator.
    pub storage_emulator_host: Option<String>,
    /// What the GCS credential chain reads (`GOOGLE_APPLICATION_CREDENTIALS`,
    /// `CLOUDSDK_CONFIG`, `HOME`, `GCE_METADATA_HOST`, `GOOGLE_CLOUD_QUOTA_PROJECT`, ...).
    pub gcs_auth: crate::source::gcs_auth::GcsAuthEnv,
    /// `HF_ENDPOINT`: Hub reads go to this mirror.
    pub hf_endpoint: Option<String>,
    /// The Hub's bearer token: `HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN` or the token file.
    pub hf_token: Option<HfToken>,
    /// `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) is true (`1`, `ON`, `YES`, `TRUE`): an
    /// ingest run works from the store alone, as with `--offline`; `pipeline pin --hf`
    /// refuses.
    pub hf_hub_offline: bool,
}

impl EnvOverrides {
    /// Read the process environment (empty values count as unset).
    pub fn from_process() -> EnvOverrides {
        EnvOverrides::from_lookup(|k| std::env::var(k).ok())
    }

    /// Read the environment through `lookup` (a variable's value, `None` when unset; empty
    /// values count as unset), the token file included.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> EnvOverrides {
        let var = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let is_true = |k: &str| {
            var(k).is_some_and(|v| {
                ["1", "ON", "YES", "TRUE"].contains(&v.trim().to_ascii_uppercase().as_str())
            })
        };
        EnvOverrides {
            storage_emulator_host: var("STORAGE_EMULATOR_HOST"),
            gcs_auth: crate::source::gcs_auth::GcsAuthEnv::from_lookup(&lookup),
            hf_endpoint: var("HF_ENDPOINT"),
            hf_token: hub_token(&var),
            hf_hub_offline: is_true("HF_HUB_OFFLINE") || is_true("TRANSFORMERS_OFFLINE"),
        }
    }
}

/// `huggingface_hub`'s `_clean_token`: newlines removed, blanks trimmed, empty is none.
fn clean_token(raw: &str) -> Option<String> {
    let t = raw.replace(['\r', '\n'], "");
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// `~` or `~/...` expanded with `HOME` (as Python's `expanduser` does on POSIX).
fn expand_home(path: &str, home: Option<&str>) -> PathBuf {
    match (path.strip_prefix('~'), home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            PathBuf::from(format!("{}{rest}", home.trim_end_matches('/')))
        }
        _ => PathBuf::from(path),
    }
}

/// The token file's path: `HF_TOKEN_PATH`, else `$HF_HOME/token`, `HF_HOME` defaulting to
/// `$XDG_CACHE_HOME/huggingface`, that to `~/.cache/huggingface`.
pub fn hub_token_path(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let home = var("HOME");
    if let Some(p) = var("HF_TOKEN_PATH") {
        return Some(expand_home(p.trim(), home.as_deref()));
    }
    let hf_home = match var("HF_HOME") {
        Some(h) => expand_home(h.trim(), home.as_deref()),
        None => {
            let cache = match var("XDG_CACHE_HOME") {
                Some(x) => expand_home(x.trim(), home.as_deref()),
                None => PathBuf::from(home?).join(".cache"),
            };
            cache.join("huggingface")
        }
    };
    Some(hf_home.join("token"))
}

/// The Hub token of the environment `var` reads, found as `huggingface_hub` finds it.
fn hub_token(var: &dyn Fn(&str) -> Option<String>) -> Option<HfToken> {
    for name in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
        if let Some(t) = var(name).as_deref().and_then(clean_token) {
            return Some(HfToken::from_source(t, TokenSource::Env(name)));
        }
    }
    let path = hub_token_path(var)?;
    match std::fs::read_to_string(&path) {
        Ok(text) => clean_token(&text).map(|t| HfToken::from_source(t, TokenSource::File(path))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "the Hub token file cannot be read; no token is sent");
            None
        }
    }
}

/// Choices of one ingest run.
#[derive(Clone)]
pub struct IngestOptions {
    /// Work from the store alone; never contact a location.
    pub offline: bool,
    /// With `offline`: a location that never delivered its archive's bytes does not fail
    /// the archive when the store holds them (the row says `unchecked`).
    pub accept_unchecked: bool,
    /// Archives fetched at once; `None` takes `ingest.parallel` from the config.
    pub parallel: Option<usize>,
    /// Endpoint and credential overrides.
    pub env: EnvOverrides,
    /// First pause before retrying a transient fault; doubles per retry (capped at 8 s).
    pub initial_backoff: Duration,
    /// Where progress goes.
    pub progress: Arc<dyn ProgressSink>,
    /// Process only this shard's archives, writing the ledger part below
    /// `run_dir/shards/I-of-N/` ([`model::shard`]); `None` is the one-process run.
    pub shard: Option<model::shard::Shard>,
}

impl std::fmt::Debug for IngestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestOptions")
            .field("offline", &self.offline)
            .field("accept_unchecked", &self.accept_unchecked)
            .field("parallel", &self.parallel)
            .field("env", &self.env)
            .field("initial_backoff", &self.initial_backoff)
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            offline: false,
            accept_unchecked: false,
            parallel: None,
            env: EnvOverrides::default(),
            initial_backoff: Duration::from_millis(200),
            progress: Arc::new(NoProgress),
            shard: None,
        }
    }
}

impl IngestOptions {
    /// Defaults with the process environment captured.
    pub fn from_process_env() -> IngestOptions {
        IngestOptions {
            env: EnvOverrides::from_process(),
            ..IngestOptions::default()
        }
    }
}
