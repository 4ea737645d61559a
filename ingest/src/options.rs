//! How a run is asked for: command-line choices and the environment the ecosystems define
//! (`STORAGE_EMULATOR_HOST`, the GCS credential chain's variables, `HF_ENDPOINT`, `HF_TOKEN`),
//! captured once so tests can pass their own values without touching the process
//! environment.

use crate::progress::{NoProgress, ProgressSink};
use std::sync::Arc;
use std::time::Duration;

/// A Hugging Face token. Its `Debug` never shows the value; it is sent only to the Hub.
#[derive(Clone, PartialEq, Eq)]
pub struct HfToken(String);

impl HfToken {
    /// Wrap a token.
    pub fn new(token: impl Into<String>) -> HfToken {
        HfToken(token.into())
    }
    /// Why the token cannot be sent as an HTTP header value (a newline or other control
    /// character, as `echo` into a file leaves), without showing the token; `None` when it
    /// can.
    pub fn header_problem(&self) -> Option<&'static str> {
        let bad = self.0.bytes().any(|b| b < 0x20 || b == 0x7f);
        bad.then_some("HF_TOKEN contains a newline or another control character, which is not allowed in an HTTP header (check how it was set; it was not sent)")
    }
    /// The secret itself, for the `Authorization` header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for HfToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HfToken(<redacted>)")
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
    /// `HF_TOKEN`: bearer token for the Hub.
    pub hf_token: Option<HfToken>,
}

impl EnvOverrides {
    /// Read the process environment (empty values count as unset).
    pub fn from_process() -> EnvOverrides {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        EnvOverrides {
            storage_emulator_host: var("STORAGE_EMULATOR_HOST"),
            gcs_auth: crate::source::gcs_auth::GcsAuthEnv::from_process(),
            hf_endpoint: var("HF_ENDPOINT"),
            hf_token: var("HF_TOKEN").map(HfToken::new),
        }
    }
}

/// Choices of one ingest run.
#[derive(Clone)]
pub struct IngestOptions {
    /// Work from the store alone; never contact a location.
    pub offline: bool,
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
