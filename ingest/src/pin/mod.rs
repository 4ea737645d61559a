//! Pinning real sources into a manifest (`pipeline pin`): list the objects under a GCS prefix
//! with their current generations and the archives inside every raw shard of a Hub dataset at
//! a revision resolved to its commit, stream every archive once to record its SHA256 and byte
//! count, match each to a workload, and check that an archive found in both places has the
//! same bytes in both.
//!
//! An object (or shard member) is an archive when its first bytes are gzip's or zstd's
//! ([`model::compression::ArchiveCompression`]); every other one (a README, a checksum
//! file, `_SUCCESS`), a console folder object, a name the GCS client cannot address and a
//! name the [`ObjectFilter`] leaves out is skipped and listed with its reason
//! ([`SkippedObject`]), never silently and never fatally. An archive's `archive_id` is its
//! file name (the base name of a GCS object, of a shard member) without its archive suffix
//! ([`ARCHIVE_SUFFIXES`]). Workloads are matched by [`WorkloadRule`]s (`GLOB=NAME`, globs on
//! the file name, first match wins); without any, each workload's name followed by anything
//! (`tmax*=tmax`, `deepswe*=deepswe`). An archive no rule matches is refused with the rule
//! that would take it; archives with the same bytes under two ids are reported
//! ([`SameBytes`]).
//!
//! Nothing is written here: [`pin`] returns a [`PinReport`] (rows of the manifest, the
//! pinning report and the shards' member tables), or a [`PinError`] naming every refused
//! archive.

mod gcs;
mod gcs_list;
mod hub;

use crate::error::FetchError;
use crate::options::{EnvOverrides, HfToken};
use crate::source::gcs::GcsAuthEnv;
use model::WorkloadId;
use model::manifest::{ManifestRow, write_manifest_csv};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Archive suffixes stripped from a file name to make its `archive_id`, longest first.
pub const ARCHIVE_SUFFIXES: [&str; 8] = [
    ".tar.zstd",
    ".tar.zst",
    ".tar.gz",
    ".tzst",
    ".tgz",
    ".zst",
    ".gz",
    ".tar",
];

/// `gs://BUCKET[/PREFIX]`: every object under `PREFIX/` (the whole bucket without one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcsPrefix {
    /// Bucket.
    pub bucket: String,
    /// Object-name prefix, a "directory" (no leading or trailing `/`); empty for all.
    pub prefix: String,
}

impl FromStr for GcsPrefix {
    type Err = PinError;
    fn from_str(s: &str) -> Result<GcsPrefix, PinError> {
        let usage =
            |why: &str| PinError::Usage(format!("--gcs `{s}`: {why}, expected gs://BUCKET/PREFIX"));
        let rest = s
            .strip_prefix("gs://")
            .ok_or_else(|| usage("not a gs:// URL"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(usage("no bucket"));
        }
        Ok(GcsPrefix {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        })
    }
}

impl fmt::Display for GcsPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gs://{}/{}", self.bucket, self.prefix)
    }
}

/// `REPO[@REVISION][:PATH]`: the `.tar` shards under `PATH` (all of them without one) of
/// dataset `REPO` at `REVISION` (default `main`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HubTarget {
    /// Dataset repository, `owner/name`.
    pub repo: String,
    /// Branch, tag or commit asked for.
    pub revision: String,
    /// Folder of the shards in the repository; empty for the whole repository.
    pub path: String,
}

/// The revision pinned when `--hf` names none.
pub const DEFAULT_REVISION: &str = "main";

impl FromStr for HubTarget {
    type Err = PinError;
    fn from_str(s: &str) -> Result<HubTarget, PinError> {
        let usage = |why: &str| {
            PinError::Usage(format!(
                "--hf `{s}`: {why}, expected REPO[@REVISION][:PATH]"
            ))
        };
        let (repo_rev, path) = s.split_once(':').unwrap_or((s, ""));
        let (repo, revision) = repo_rev
            .split_once('@')
            .unwrap_or((repo_rev, DEFAULT_REVISION));
        let valid_name = |n: &str| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        };
        match repo.split_once('/') {
            Some((owner, name)) if valid_name(owner) && valid_name(name) => {}
            _ => return Err(usage("the repository must be owner/name")),
        }
        if revision.is_empty() {
            return Err(usage("empty revision"));
        }
        Ok(HubTarget {
            repo: repo.to_string(),
            revision: revision.to_string(),
            path: path.trim_matches('/').to_string(),
        })
    }
}

impl fmt::Display for HubTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hf://datasets/{}@{}/{}",
            self.repo, self.revision, self.path
        )
    }
}

/// `GLOB=NAME`: an archive whose file name matches the glob belongs to workload `NAME`.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadRule {
    /// The glob (`*`, `?`, `[...]`), matched against the whole file name.
    pub pattern: glob::Pattern,
    /// The workload.
    pub workload: WorkloadId,
}

impl FromStr for WorkloadRule {
    type Err = PinError;
    fn from_str(s: &str) -> Result<WorkloadRule, PinError> {
        let usage = |why: String| PinError::Usage(format!("--workload `{s}`: {why}"));
        let (glob_text, name) = s
            .rsplit_once('=')
            .ok_or_else(|| usage("expected GLOB=NAME".into()))?;
        let workload = WorkloadId::parse(name.trim()).ok_or_else(|| {
            usage(format!(
                "unknown workload `{name}`, expected one of {}",
                workload_names()
            ))
        })?;
        let pattern = glob::Pattern::new(glob_text).map_err(|e| usage(format!("bad glob: {e}")))?;
        Ok(WorkloadRule { pattern, workload })
    }
}

impl fmt::Display for WorkloadRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.pattern.as_str(), self.workload)
    }
}

fn workload_names() -> String {
    WorkloadId::ALL.map(|w| w.as_str()).join(", ")
}

impl WorkloadRule {
    /// The rules used when none is given: each workload's name followed by anything.
    pub fn defaults() -> Vec<WorkloadRule> {
        WorkloadId::ALL
            .iter()
            .map(|w| WorkloadRule {
                pattern: glob::Pattern::new(&format!("{}*", w.as_str())).expect("valid glob"),
                workload: *w,
            })
            .collect()
    }

    /// The workload of the first rule matching `file_name`.
    pub fn first_match(rules: &[WorkloadRule], file_name: &str) -> Option<WorkloadId> {
        rules
            .iter()
            .find(|r| r.pattern.matches(file_name))
            .map(|r| r.workload)
    }
}

/// The `archive_id` of a file name: the name without its archive suffix, if it is a valid
/// id (letters, digits, `.`, `_`, `-`) and not empty.
pub fn archive_id_of(file_name: &str) -> Option<String> {
    let lower = file_name.to_ascii_lowercase();
    let stem = ARCHIVE_SUFFIXES
        .iter()
        .find(|s| lower.ends_with(*s))
        .map(|s| &file_name[..file_name.len() - s.len()])
        .unwrap_or(file_name);
    let valid = !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    valid.then(|| stem.to_string())
}

/// The last path segment.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `--include GLOB` / `--exclude GLOB`: which objects a pin reads, by their name below the
/// pinned place (a GCS object's name below the prefix, a shard member's name in its shard;
/// `*` matches `/` too). An exclude wins over an include; with no include, everything not
/// excluded is read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectFilter {
    /// Names to read; empty for all.
    pub include: Vec<glob::Pattern>,
    /// Names to leave out.
    pub exclude: Vec<glob::Pattern>,
}

impl ObjectFilter {
    /// Parse the globs of `--include` and `--exclude`.
    pub fn parse(include: &[String], exclude: &[String]) -> Result<ObjectFilter, PinError> {
        let parse = |flag: &str, globs: &[String]| {
            globs
                .iter()
                .map(|g| {
                    glob::Pattern::new(g)
                        .map_err(|e| PinError::Usage(format!("--{flag} `{g}`: bad glob: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(ObjectFilter {
            include: parse("include", include)?,
            exclude: parse("exclude", exclude)?,
        })
    }

    /// Why the object named `name` (below the pinned place) is left out, if it is.
    pub fn leaves_out(&self, name: &str) -> Option<String> {
        if let Some(p) = self.exclude.iter().find(|p| p.matches(name)) {
            return Some(format!("excluded by --exclude {}", p.as_str()));
        }
        if !self.include.is_empty() && !self.include.iter().any(|p| p.matches(name)) {
            return Some("matched by no --include".into());
        }
        None
    }
}

/// An object (or shard member) a pin did not take, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedObject {
    /// `gs://bucket/object#generation`, or `hf://datasets/repo@commit/shard#member`.
    pub at: String,
    /// Its size.
    pub bytes: u64,
    /// Why: not an archive (with what its first bytes are), a folder object, a name the
    /// GCS client cannot address, or the filter rule that left it out.
    pub reason: String,
}

/// Why bytes starting with `head` are not an archive.
fn not_archive_reason(head: &[u8]) -> String {
    if head.is_empty() {
        return "not an archive: it is empty".into();
    }
    format!(
        "not an archive: its first bytes are {}, not gzip's (1f 8b) or zstd's (28 b5 2f fd)",
        model::compression::ArchiveCompression::describe(head)
    )
}

/// Two or more archive ids whose bytes are the same (the audit reads each of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SameBytes {
    /// The shared SHA256.
    pub sha256: String,
    /// The archive ids, sorted.
    pub archive_ids: Vec<String>,
}

impl fmt::Display for SameBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "archives {} have the same bytes (sha256 {}); each is pinned and audited as its own archive, so check that this is meant",
            self.archive_ids.join(", "),
            self.sha256
        )
    }
}

/// What to pin.
#[derive(Debug, Clone)]
pub struct PinRequest {
    /// Objects under a GCS prefix.
    pub gcs: Option<GcsPrefix>,
    /// Raw shards of a Hub dataset.
    pub hf: Option<HubTarget>,
    /// Workload rules; empty means [`WorkloadRule::defaults`].
    pub rules: Vec<WorkloadRule>,
    /// Which objects are read.
    pub filter: ObjectFilter,
}

/// How to reach the sources, and the retry budget.
#[derive(Clone)]
pub struct PinSettings {
    /// GCS emulator base URL (`STORAGE_EMULATOR_HOST`); `None` for the real service.
    pub gcs_endpoint: Option<String>,
    /// The real service's base URL; `None` is `https://storage.googleapis.com` (another one:
    /// a private endpoint, or a stand-in).
    pub gcs_service_url: Option<String>,
    /// What the GCS credential chain reads (used only for the real service).
    pub gcs_auth: GcsAuthEnv,
    /// Hub base URL (`HF_ENDPOINT`, default the real Hub).
    pub hf_endpoint: String,
    /// The Hub token (`HF_TOKEN`, or the token file `hf auth login` writes).
    pub hf_token: Option<HfToken>,
    /// `HF_HUB_OFFLINE` is set: `--hf` is refused (the Hub must be asked).
    pub hf_hub_offline: bool,
    /// Retries of a transient fault (connection refused or reset, timeout, 5xx, 429) per
    /// request, and resumes of a broken transfer.
    pub retries: u32,
    /// Bound on connecting, and on each wait for the next bytes of an answer.
    pub timeout: Duration,
    /// First pause before a retry; doubles per retry (capped at 8 s).
    pub initial_backoff: Duration,
    /// Archives (GCS objects, Hub shards) read at once.
    pub parallel: usize,
    /// Longest one Hub request waits in total while the Hub answers 429.
    pub rate_limit_patience: Duration,
    /// Where rate-limit waits are announced.
    pub progress: std::sync::Arc<dyn crate::progress::ProgressSink>,
}

impl fmt::Debug for PinSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinSettings")
            .field("gcs_endpoint", &self.gcs_endpoint)
            .field("gcs_service_url", &self.gcs_service_url)
            .field("gcs_auth", &self.gcs_auth)
            .field("hf_endpoint", &self.hf_endpoint)
            .field("hf_token", &self.hf_token)
            .field("hf_hub_offline", &self.hf_hub_offline)
            .field("retries", &self.retries)
            .field("timeout", &self.timeout)
            .field("initial_backoff", &self.initial_backoff)
            .field("parallel", &self.parallel)
            .field("rate_limit_patience", &self.rate_limit_patience)
            .finish_non_exhaustive()
    }
}

impl PinSettings {
    /// Endpoints and credentials from the environment, with default limits: 3 retries,
    /// 30 s timeout, 200 ms first backoff, 4 at once, ingest's rate-limit patience, no
    /// progress.
    pub fn from_env(env: &EnvOverrides) -> PinSettings {
        PinSettings {
            gcs_endpoint: model::config::gcs_endpoint(None, env.storage_emulator_host.as_deref()),
            gcs_service_url: None,
            gcs_auth: env.gcs_auth.clone(),
            hf_endpoint: model::config::hf_endpoint(None, env.hf_endpoint.as_deref()),
            hf_token: env.hf_token.clone(),
            hf_hub_offline: env.hf_hub_offline,
            retries: 3,
            timeout: Duration::from_secs(30),
            initial_backoff: Duration::from_millis(200),
            parallel: 4,
            rate_limit_patience: Duration::from_secs(
                model::config::IngestConfig::default().rate_limit_patience_s,
            ),
            progress: std::sync::Arc::new(crate::progress::NoProgress),
        }
    }
}

/// One archive as read from GCS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcsFound {
    /// Bucket.
    pub bucket: String,
    /// Object name.
    pub object: String,
    /// The generation whose bytes were read (the object's live generation).
    pub generation: i64,
    /// SHA256 of the bytes read, hex.
    pub sha256: String,
    /// Bytes read.
    pub bytes: u64,
}

impl GcsFound {
    /// `gs://bucket/object#generation`.
    pub fn uri(&self) -> String {
        format!("gs://{}/{}#{}", self.bucket, self.object, self.generation)
    }
}

/// One archive as read from a raw shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HfFound {
    /// Shard path in the repository.
    pub shard: String,
    /// Member name in the shard.
    pub member: String,
    /// SHA256 of the member's bytes, hex.
    pub sha256: String,
    /// Member size.
    pub bytes: u64,
}

/// One raw shard read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardPin {
    /// Path in the repository.
    pub path: String,
    /// Size.
    pub bytes: u64,
    /// Regular members it holds.
    pub members: usize,
}

/// The Hub side of a pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HubPin {
    /// Endpoint asked.
    pub endpoint: String,
    /// Dataset repository.
    pub repo: String,
    /// Revision asked for.
    pub revision: String,
    /// The 40-hex commit it resolved to (recorded as `hf_revision`).
    pub commit: String,
    /// Folder listed.
    pub path: String,
    /// Shards read, by path.
    pub shards: Vec<ShardPin>,
}

/// The GCS side of a pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcsPin {
    /// Emulator endpoint, or `null` for the real service.
    pub endpoint: Option<String>,
    /// Bucket.
    pub bucket: String,
    /// Prefix listed.
    pub prefix: String,
    /// Objects read.
    pub objects: usize,
    /// The credentials and user project the requests carried
    /// ([`crate::source::gcs::GcsClients::describe`]); for the user, not the report (it
    /// differs between users of the same sources).
    #[serde(skip)]
    pub credentials: String,
}

/// One pinned archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedArchive {
    /// Archive id (the file name without its archive suffix).
    pub archive_id: String,
    /// Workload.
    pub workload: WorkloadId,
    /// File name (GCS object base name, shard member base name).
    pub file_name: String,
    /// SHA256, hex.
    pub sha256: String,
    /// Byte count.
    pub bytes: u64,
    /// Where GCS holds it.
    pub gcs: Option<GcsFound>,
    /// Where the Hub holds it.
    pub hf: Option<HfFound>,
}

/// The result of a pin: every archive and where it was found. No times: the same sources
/// give the same report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinReport {
    /// The GCS side.
    pub gcs: Option<GcsPin>,
    /// The Hub side.
    pub hf: Option<HubPin>,
    /// The workload rules applied, in order.
    pub rules: Vec<String>,
    /// The `--include` globs.
    pub include: Vec<String>,
    /// The `--exclude` globs.
    pub exclude: Vec<String>,
    /// Archives by archive id.
    pub archives: Vec<PinnedArchive>,
    /// Objects and members not taken, by place.
    pub skipped: Vec<SkippedObject>,
    /// Archive ids sharing their bytes.
    pub same_bytes: Vec<SameBytes>,
    /// The member table of every shard read, for the run directory's shard index (not in
    /// the report: it is written beside the manifest, one file per shard).
    #[serde(skip)]
    pub shard_indexes: Vec<crate::source::hf::ShardIndexRecord>,
}

impl PinReport {
    /// The manifest rows, by archive id.
    pub fn manifest_rows(&self) -> Vec<ManifestRow> {
        let commit = self.hf.as_ref().map(|h| h.commit.clone());
        let repo = self.hf.as_ref().map(|h| h.repo.clone());
        self.archives
            .iter()
            .map(|a| ManifestRow {
                archive_id: a.archive_id.clone(),
                workload: a.workload.as_str().to_string(),
                sha256: a.sha256.clone(),
                bytes: a.bytes,
                gcs_bucket: a.gcs.as_ref().map(|g| g.bucket.clone()),
                gcs_object: a.gcs.as_ref().map(|g| g.object.clone()),
                gcs_generation: a.gcs.as_ref().map(|g| g.generation),
                hf_repo: a.hf.as_ref().and(repo.clone()),
                hf_revision: a.hf.as_ref().and(commit.clone()),
                hf_shard: a.hf.as_ref().map(|h| h.shard.clone()),
                hf_member: a.hf.as_ref().map(|h| h.member.clone()),
                file_path: None,
            })
            .collect()
    }

    /// The manifest CSV.
    pub fn manifest_csv(&self) -> String {
        write_manifest_csv(&self.manifest_rows())
    }

    /// The pinning report as pretty JSON (with a final newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serializable") + "\n"
    }

    /// One line per archive: id, workload, where found with the pin, bytes, sha256.
    pub fn archive_lines(&self) -> Vec<String> {
        self.archives
            .iter()
            .map(|a| {
                let mut places = Vec::new();
                if let Some(g) = &a.gcs {
                    places.push(format!("gcs generation {}", g.generation));
                }
                if let Some(h) = &a.hf {
                    places.push(format!("hf {}#{}", h.shard, h.member));
                }
                format!(
                    "{} ({}): {}; {} bytes, sha256 {}",
                    a.archive_id,
                    a.workload,
                    places.join(" + "),
                    a.bytes,
                    a.sha256
                )
            })
            .collect()
    }
}

/// Why an archive cannot be pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No workload rule matches the file name.
    NoWorkload {
        /// File name.
        name: String,
        /// Where it was found.
        at: String,
    },
    /// GCS and the Hub hold different bytes under the same file name.
    BytesDiffer {
        /// File name.
        name: String,
        /// The GCS side.
        gcs: GcsFound,
        /// The Hub side's URI.
        hf_uri: String,
        /// The Hub side.
        hf: HfFound,
    },
    /// The file name gives no valid archive id.
    BadName {
        /// File name.
        name: String,
        /// Where it was found.
        at: String,
    },
    /// One source holds two files of that name, or two names give the same archive id.
    Duplicate {
        /// File name or archive id.
        name: String,
        /// The first place.
        first: String,
        /// The second place.
        second: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoWorkload { name, at } => write!(
                f,
                "archive `{name}` ({at}) matches no workload rule; add one, e.g. --workload '{}=NAME' with NAME one of {}, or leave it out with --exclude '{name}'",
                suggested_glob(name),
                workload_names()
            ),
            Refusal::BytesDiffer {
                name,
                gcs,
                hf_uri,
                hf,
            } => write!(
                f,
                "archive `{name}` differs between GCS and the Hub: {} has sha256 {} ({} bytes), {hf_uri} has sha256 {} ({} bytes)",
                gcs.uri(),
                gcs.sha256,
                gcs.bytes,
                hf.sha256,
                hf.bytes
            ),
            Refusal::BadName { name, at } => write!(
                f,
                "archive `{name}` ({at}): its name without the archive suffix is not a valid archive id (letters, digits, '.', '_', '-')"
            ),
            Refusal::Duplicate {
                name,
                first,
                second,
            } => write!(f, "archive `{name}` is found twice: {first} and {second}"),
        }
    }
}

/// The glob of a rule that would take `file_name` and its siblings: the name's leading
/// letters (up to the first character that is not one) followed by `*`, or the whole name.
pub fn suggested_glob(file_name: &str) -> String {
    let stem: String = file_name
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    if stem.is_empty() {
        file_name.to_string()
    } else {
        format!("{stem}*")
    }
}

/// Why a pin failed.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// Some archives were refused; nothing is pinned.
    #[error("{}", refusal_summary(.0))]
    Refused(Vec<Refusal>),
    /// An endpoint did not answer (refused, reset or silent) within the retry budget.
    #[error(
        "{endpoint}: no answer from {service} after {attempts} attempt(s): {detail}; check the endpoint and the network"
    )]
    Unreachable {
        /// The endpoint.
        endpoint: String,
        /// `the Hub` or `GCS`.
        service: &'static str,
        /// Requests made.
        attempts: u32,
        /// The last transport error.
        detail: String,
    },
    /// A request to the Hub or its content host failed (after retries where transient); a
    /// refusal of the Hub or a rate limit carries its hint.
    #[error("{}", hub_failure(.0))]
    Hub(FetchError),
    /// A GCS request failed (after retries where transient).
    #[error("{uri}: {detail}")]
    Gcs {
        /// What was asked.
        uri: String,
        /// What went wrong.
        detail: String,
    },
    /// The sources hold no archive.
    #[error("no archive found under {0}")]
    Empty(String),
    /// The async runtime could not be started.
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl PinError {
    /// A request to `service` at `endpoint` that got no answer within its retries (refused,
    /// reset, timed out) as [`PinError::Unreachable`]; any other error is handed back.
    pub(crate) fn unreachable(
        e: FetchError,
        endpoint: &str,
        service: &'static str,
    ) -> Result<PinError, FetchError> {
        let (attempts, detail) = match e {
            FetchError::Transport {
                attempts, detail, ..
            }
            | FetchError::Unreachable {
                attempts: Some(attempts),
                detail,
                ..
            } => (attempts, detail),
            FetchError::TimedOut { attempts, .. } => (
                attempts,
                "it accepted the connection but did not answer within the timeout (not retried)"
                    .into(),
            ),
            other => return Err(other),
        };
        Ok(PinError::Unreachable {
            endpoint: endpoint.to_string(),
            service,
            attempts,
            detail,
        })
    }
}

/// The arguments at fault are a refusal (exit 2); the sources failing is a failure (1).
impl model::exit::Classify for PinError {
    fn failure_kind(&self) -> model::stage::FailureKind {
        match self {
            PinError::Usage(_) => model::stage::FailureKind::Refused,
            _ => model::stage::FailureKind::Failed,
        }
    }
}

fn hub_failure(e: &FetchError) -> String {
    match e {
        FetchError::Hub { .. } | FetchError::RateLimited { .. } => {
            format!("{e} (hint: {})", e.hint())
        }
        _ => e.to_string(),
    }
}

fn refusal_summary(refusals: &[Refusal]) -> String {
    let mut s = format!("{} archive(s) refused, nothing pinned:", refusals.len());
    for r in refusals {
        s.push_str("\n  ");
        s.push_str(&r.to_string());
    }
    s
}

/// Pin the sources (own tokio runtime).
pub fn pin(request: &PinRequest, settings: &PinSettings) -> Result<PinReport, PinError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(PinError::Runtime)?
        .block_on(pin_async(request, settings))
}

/// Pin the sources.
pub async fn pin_async(
    request: &PinRequest,
    settings: &PinSettings,
) -> Result<PinReport, PinError> {
    if request.gcs.is_none() && request.hf.is_none() {
        return Err(PinError::Usage(
            "nothing to pin: give --gcs gs://BUCKET/PREFIX and/or --hf REPO[@REVISION][:PATH]"
                .into(),
        ));
    }
    let rules = if request.rules.is_empty() {
        WorkloadRule::defaults()
    } else {
        request.rules.clone()
    };
    let gcs_side = async {
        match &request.gcs {
            Some(p) => gcs::pin_prefix(p, settings, &request.filter)
                .await
                .map(Some),
            None => Ok(None),
        }
    };
    let hf_side = async {
        match &request.hf {
            Some(t) => hub::pin_dataset(t, settings, &request.filter)
                .await
                .map(Some),
            None => Ok(None),
        }
    };
    let (gcs_found, hf_found) = futures::try_join!(gcs_side, hf_side)?;
    let mut skipped = Vec::new();
    let gcs_found = gcs_found.map(|(pin, found, s)| {
        skipped.extend(s);
        (pin, found)
    });
    let mut shard_indexes = Vec::new();
    let hf_found = hf_found.map(|side| {
        skipped.extend(side.skipped);
        shard_indexes = side.indexes;
        (side.pin, side.found)
    });
    skipped.sort_by(|a, b| a.at.cmp(&b.at));
    let mut refusals = Vec::new();
    // File name -> (GCS side, Hub side).
    let mut by_name: BTreeMap<String, (Option<GcsFound>, Option<HfFound>)> = BTreeMap::new();
    let hub_uri = |h: &HfFound| match &hf_found {
        Some((pin, _)) => format!(
            "hf://datasets/{}@{}/{}#{}",
            pin.repo, pin.commit, h.shard, h.member
        ),
        None => String::new(),
    };
    if let Some((_, objects)) = &gcs_found {
        for g in objects {
            let name = base_name(&g.object).to_string();
            let slot = by_name.entry(name).or_default();
            match &slot.0 {
                Some(first) => refusals.push(Refusal::Duplicate {
                    name: base_name(&g.object).to_string(),
                    first: first.uri(),
                    second: g.uri(),
                }),
                None => slot.0 = Some(g.clone()),
            }
        }
    }
    if let Some((_, members)) = &hf_found {
        for h in members {
            let name = base_name(&h.member).to_string();
            let slot = by_name.entry(name).or_default();
            match &slot.1 {
                Some(first) => refusals.push(Refusal::Duplicate {
                    name: base_name(&h.member).to_string(),
                    first: hub_uri(first),
                    second: hub_uri(h),
                }),
                None => slot.1 = Some(h.clone()),
            }
        }
    }
    let mut archives: BTreeMap<String, PinnedArchive> = BTreeMap::new();
    for (name, (g, h)) in by_name {
        let at = match (&g, &h) {
            (Some(g), _) => g.uri(),
            (None, Some(h)) => hub_uri(h),
            (None, None) => continue,
        };
        let Some(archive_id) = archive_id_of(&name) else {
            refusals.push(Refusal::BadName { name, at });
            continue;
        };
        let Some(workload) = WorkloadRule::first_match(&rules, &name) else {
            refusals.push(Refusal::NoWorkload { name, at });
            continue;
        };
        if let (Some(g), Some(h)) = (&g, &h)
            && (g.sha256 != h.sha256 || g.bytes != h.bytes)
        {
            refusals.push(Refusal::BytesDiffer {
                name: name.clone(),
                gcs: g.clone(),
                hf_uri: hub_uri(h),
                hf: h.clone(),
            });
            continue;
        }
        let (sha256, bytes) = match (&g, &h) {
            (Some(g), _) => (g.sha256.clone(), g.bytes),
            (None, Some(h)) => (h.sha256.clone(), h.bytes),
            (None, None) => continue,
        };
        if let Some(first) = archives.get(&archive_id) {
            refusals.push(Refusal::Duplicate {
                name: archive_id,
                first: first.file_name.clone(),
                second: name,
            });
            continue;
        }
        archives.insert(
            archive_id.clone(),
            PinnedArchive {
                archive_id,
                workload,
                file_name: name,
                sha256,
                bytes,
                gcs: g,
                hf: h,
            },
        );
    }
    if !refusals.is_empty() {
        return Err(PinError::Refused(refusals));
    }
    if archives.is_empty() {
        let mut places = Vec::new();
        if let Some(p) = &request.gcs {
            places.push(p.to_string());
        }
        if let Some(t) = &request.hf {
            places.push(t.to_string());
        }
        let mut text = places.join(" and ");
        if let Some(first) = skipped.first() {
            text.push_str(&format!(
                " ({} object(s) skipped, the first {}: {})",
                skipped.len(),
                first.at,
                first.reason
            ));
        }
        return Err(PinError::Empty(text));
    }
    let mut by_bytes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for a in archives.values() {
        by_bytes
            .entry(a.sha256.as_str())
            .or_default()
            .push(a.archive_id.clone());
    }
    let same_bytes = by_bytes
        .into_iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(sha256, archive_ids)| SameBytes {
            sha256: sha256.to_string(),
            archive_ids,
        })
        .collect();
    Ok(PinReport {
        gcs: gcs_found.map(|(pin, _)| pin),
        hf: hf_found.map(|(pin, _)| pin),
        rules: rules.iter().map(|r| r.to_string()).collect(),
        include: request
            .filter
            .include
            .iter()
            .map(|p| p.as_str().to_string())
            .collect(),
        exclude: request
            .filter
            .exclude
            .iter()
            .map(|p| p.as_str().to_string())
            .collect(),
        archives: archives.into_values().collect(),
        skipped,
        same_bytes,
        shard_indexes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_refuse() {
        let g: GcsPrefix = "gs://bucket/some/prefix/".parse().unwrap();
        assert_eq!(
            (g.bucket.as_str(), g.prefix.as_str()),
            ("bucket", "some/prefix")
        );
        let g: GcsPrefix = "gs://bucket".parse().unwrap();
        assert_eq!(g.prefix, "");
        assert!("s3://bucket/x".parse::<GcsPrefix>().is_err());
        let h: HubTarget = "org/data@v1.0:raw/shards".parse().unwrap();
        assert_eq!(
            (h.repo.as_str(), h.revision.as_str(), h.path.as_str()),
            ("org/data", "v1.0", "raw/shards")
        );
        let h: HubTarget = "org/data".parse().unwrap();
        assert_eq!((h.revision.as_str(), h.path.as_str()), ("main", ""));
        assert!("data".parse::<HubTarget>().is_err());
        assert!("org/data@".parse::<HubTarget>().is_err());
        let r: WorkloadRule = "run-7-*.tar.zst=deepswe".parse().unwrap();
        assert_eq!(r.workload, WorkloadId::Deepswe);
        assert!("x*=swebench".parse::<WorkloadRule>().is_err());
        assert!("x*".parse::<WorkloadRule>().is_err());
    }

    #[test]
    fn archive_ids_and_default_rules() {
        assert_eq!(
            archive_id_of("tmax-000.tar.gz").as_deref(),
            Some("tmax-000")
        );
        assert_eq!(
            archive_id_of("deepswe-pilot-000.tar.zst").as_deref(),
            Some("deepswe-pilot-000")
        );
        assert_eq!(archive_id_of("x.TGZ").as_deref(), Some("x"));
        assert_eq!(archive_id_of("notes.txt").as_deref(), Some("notes.txt"));
        assert_eq!(archive_id_of(".tar.gz"), None);
        assert_eq!(archive_id_of("a b.tar.gz"), None);
        let d = WorkloadRule::defaults();
        assert_eq!(
            WorkloadRule::first_match(&d, "tmax-001.tar.gz"),
            Some(WorkloadId::Tmax)
        );
        assert_eq!(
            WorkloadRule::first_match(&d, "deepswe-pilot-000.tar.zst"),
            Some(WorkloadId::Deepswe)
        );
        assert_eq!(WorkloadRule::first_match(&d, "README.md"), None);
        let custom: Vec<WorkloadRule> = ["*pilot*=deepswe", "*=tmax"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(
            WorkloadRule::first_match(&custom, "a-pilot.tar"),
            Some(WorkloadId::Deepswe)
        );
        assert_eq!(
            WorkloadRule::first_match(&custom, "a.tar"),
            Some(WorkloadId::Tmax)
        );
    }
}
