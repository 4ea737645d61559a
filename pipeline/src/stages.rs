//! The registry of stages and skip-when-unchanged: each stage's declared inputs (the build,
//! the config, the manifest, the input files' hashes) form a fingerprint recorded part by
//! part beside its outputs' hashes in `.stages/<name>.json`, and one decision ([`decide`])
//! says whether a stage is up to date and why not, for `pipeline run` and `pipeline status`.

use crate::provenance::BuildIdentity;
use anyhow::{Context, Result};
use model::LoadedConfig;
use model::run_dir::RunDir;
use model::stage::{Stage, StageInput};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The stages, in the order `pipeline run` runs them: the one list (adding a stage is one
/// line here and an implementation of [`Stage`] in its crate).
pub static STAGES: [&dyn Stage; 4] = [
    &ingest::IngestStage,
    &audit::AuditStage,
    &replay::ReplayStage,
    &report::ReportStage,
];

/// The stage's names, in order.
pub fn stage_names() -> Vec<&'static str> {
    STAGES.iter().map(|s| s.name()).collect()
}

/// Format version of `.stages/<stage>.json`; a record of another version is no record
/// (the stage runs again, and `status` says why).
pub const STAGE_RECORD_VERSION: u32 = 2;

/// What a stage recorded the last time it completed: the parts of its fingerprint (so a
/// later run can name what changed), the fingerprint, and its outputs' hashes with the
/// file status each hash was taken under (so an unchanged file is not read again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRecord {
    /// [`STAGE_RECORD_VERSION`].
    pub format_version: u32,
    /// Stage name.
    pub stage: String,
    /// SHA256 of the inputs (of `inputs`, serialized).
    pub fingerprint: String,
    /// What the fingerprint covers, part by part.
    pub inputs: StageInputs,
    /// Output file (relative to run_dir) -> SHA256.
    pub outputs: BTreeMap<String, String>,
    /// Output file -> the file status its hash was taken under (absent: never trusted).
    pub output_stats: BTreeMap<String, FileStat>,
    /// When the stage's run that wrote these outputs started (RFC 3339, UTC, seconds).
    pub started_utc: String,
    /// When it finished.
    pub finished_utc: String,
}

/// A wall-clock instant as the records and the RO-Crate write it: RFC 3339, UTC, whole
/// seconds (`2026-12-04T18:17:53+00:00`).
pub fn utc_seconds(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}

/// Everything a stage's fingerprint covers, part by part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageInputs {
    /// The build that ran the stage (its executable's SHA256 and git commit).
    pub build: BuildIdentity,
    /// SHA256 of the `pipeline.yaml` text.
    pub config_sha256: String,
    /// Every key of the config (dotted path) -> its value as JSON.
    pub config: BTreeMap<String, String>,
    /// The manifest, for a stage that reads it.
    pub manifest: Option<ManifestInputs>,
    /// Source archive id -> `<sha256> <bytes>` as the manifest declares it.
    pub archives: BTreeMap<String, String>,
    /// Input file (relative to run_dir) -> its SHA256 (`missing` when absent).
    pub files: BTreeMap<String, String>,
}

/// The manifest as a fingerprint part: every row in order, and each row by archive id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestInputs {
    /// [`manifest_identity`]: every column of every row, in manifest order.
    pub sha256: String,
    /// Archive id -> SHA256 of its row's columns.
    pub rows: BTreeMap<String, String>,
}

/// A file's status when its hash was taken. The hash is trusted again without reading the
/// file when size, device, inode, modification and change times are all the same, and the
/// file had not been modified within [`RACY_MARGIN_NS`] before the hash was taken (a write
/// in the same clock tick would leave the times unchanged: git's "racily clean" entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileStat {
    /// Size in bytes.
    pub bytes: u64,
    /// Device number.
    pub device: u64,
    /// Inode number.
    pub inode: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the Unix epoch (no call sets it back).
    pub ctime_ns: i64,
    /// When the hash was taken (the clock before reading), nanoseconds since the epoch.
    pub hashed_at_ns: i64,
}

/// How long before its hash a file must have last changed for the status to be trusted.
pub const RACY_MARGIN_NS: i64 = 1_000_000_000;

impl FileStat {
    /// The status of `path` now, stamped with `hashed_at_ns` (None where the platform has no
    /// inode numbers, or the file cannot be read).
    fn of(path: &Path, hashed_at_ns: i64) -> Option<FileStat> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::symlink_metadata(path).ok()?;
            Some(FileStat {
                bytes: m.len(),
                device: m.dev(),
                inode: m.ino(),
                mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
                hashed_at_ns,
            })
        }
        #[cfg(not(unix))]
        {
            let _ = (path, hashed_at_ns);
            None
        }
    }

    /// Whether `now` shows the file as it was when this status was taken, and the hash
    /// taken then still holds.
    fn vouches_for(&self, now: &FileStat) -> bool {
        let same = (
            self.bytes,
            self.device,
            self.inode,
            self.mtime_ns,
            self.ctime_ns,
        ) == (now.bytes, now.device, now.inode, now.mtime_ns, now.ctime_ns);
        same && self.mtime_ns.max(self.ctime_ns) < self.hashed_at_ns - RACY_MARGIN_NS
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// A file's SHA256 and the status it was taken under (None when the file changed while
/// it was read, so the hash is never trusted by status alone).
fn hash_with_stat(path: &Path) -> Result<(String, Option<FileStat>)> {
    let at = now_ns();
    let before = FileStat::of(path, at);
    let sha = sha256_file(path)?;
    let after = FileStat::of(path, at);
    let stat = match (before, after) {
        (Some(b), Some(a)) if b == a => Some(a),
        _ => None,
    };
    Ok((sha, stat))
}

/// SHA256 of a file, streaming (the same hashing ingest verifies with).
pub fn sha256_file(path: &Path) -> Result<String> {
    let (sha, _bytes) =
        ingest::sink::hash_file(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(sha)
}

fn record_path(run: &RunDir, stage: &str) -> PathBuf {
    run.root().join(".stages").join(format!("{stage}.json"))
}

/// The outputs of a stage that exist now: their hashes, and the status each was taken under.
pub fn hash_outputs(run: &RunDir, names: &[String]) -> Result<HashedOutputs> {
    let mut out = HashedOutputs::default();
    for n in names {
        let p = run.file(n);
        if p.is_file() {
            let (sha, stat) = hash_with_stat(&p)?;
            out.sha256.insert(n.clone(), sha);
            if let Some(stat) = stat {
                out.stats.insert(n.clone(), stat);
            }
        }
    }
    Ok(out)
}

/// Output hashes and the file status each was taken under.
#[derive(Debug, Clone, Default)]
pub struct HashedOutputs {
    /// File -> SHA256.
    pub sha256: BTreeMap<String, String>,
    /// File -> status (files that changed while read have none).
    pub stats: BTreeMap<String, FileStat>,
}

/// The fingerprint parts of a stage now: the build, the config (its text's hash and every
/// key), then its declared inputs: the manifest's every column, a source archive's id,
/// SHA256 and size, a file's SHA256 (from `known`, the hashes the run's earlier stages
/// recorded, else hashed now; `missing` when absent).
pub fn stage_inputs(
    cfg: &LoadedConfig,
    stage: &dyn Stage,
    known: &BTreeMap<String, String>,
    run: &RunDir,
) -> Result<StageInputs> {
    let mut parts = StageInputs {
        build: BuildIdentity::current()?,
        config_sha256: cfg.sha256.clone(),
        config: config_keys(&cfg.text),
        manifest: None,
        archives: BTreeMap::new(),
        files: BTreeMap::new(),
    };
    for input in stage.inputs(cfg) {
        match input {
            StageInput::Manifest => {
                parts.manifest = Some(ManifestInputs {
                    sha256: manifest_identity(cfg),
                    rows: cfg
                        .archives
                        .iter()
                        .map(|a| (a.archive_id.clone(), manifest_row_sha256(a)))
                        .collect(),
                })
            }
            StageInput::SourceArchive(id) => {
                let a = cfg.archives.iter().find(|a| a.archive_id == id);
                parts.archives.insert(
                    id,
                    format!(
                        "{} {}",
                        a.map(|a| a.sha256.as_str()).unwrap_or("unknown"),
                        a.map(|a| a.bytes).unwrap_or(0)
                    ),
                );
            }
            StageInput::File(path) => {
                let sha = match known.get(&path) {
                    Some(sha) => sha.clone(),
                    None => sha256_file(&run.file(&path)).unwrap_or_else(|_| "missing".into()),
                };
                parts.files.insert(path, sha);
            }
        }
    }
    Ok(parts)
}

/// The fingerprint of a stage's inputs: SHA256 of its parts, serialized (maps in key
/// order), prefixed by the tool, the record version and the stage's name.
pub fn fingerprint(stage: &str, parts: &StageInputs) -> String {
    let mut h = Sha256::new();
    h.update(format!(
        "agentrace {} stage {stage} record {STAGE_RECORD_VERSION}\n",
        model::TOOL_VERSION
    ));
    h.update(serde_json::to_string(parts).expect("fingerprint parts serialize"));
    hex::encode(h.finalize())
}

/// Every key of a config text as a dotted path (mappings are walked; a list or a scalar is
/// one value) -> its value as JSON. Unparsable text has no keys (the text's hash still
/// differs).
pub fn config_keys(text: &str) -> BTreeMap<String, String> {
    fn walk(prefix: &str, v: &serde_yaml::Value, out: &mut BTreeMap<String, String>) {
        match v {
            serde_yaml::Value::Mapping(m) if !m.is_empty() => {
                for (k, v) in m {
                    let key = match k {
                        serde_yaml::Value::String(s) => s.clone(),
                        other => serde_json::to_string(other).unwrap_or_default(),
                    };
                    let path = if prefix.is_empty() {
                        key
                    } else {
                        format!("{prefix}.{key}")
                    };
                    walk(&path, v, out);
                }
            }
            serde_yaml::Value::Tagged(t) => walk(prefix, &t.value, out),
            leaf => {
                out.insert(
                    prefix.to_string(),
                    serde_json::to_string(leaf).unwrap_or_default(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Ok(v) = serde_yaml::from_str::<serde_yaml::Value>(text) {
        walk("", &v, &mut out);
    }
    out
}

/// The columns of one manifest row as validated (a file location as written, relative to
/// the manifest, so moving a whole run does not change it).
fn manifest_row(a: &model::ArchiveSpec) -> serde_json::Value {
    serde_json::json!([
        a.archive_id,
        a.workload,
        a.sha256,
        a.bytes,
        a.gcs,
        a.hf,
        a.file.as_ref().map(|f| &f.relative),
    ])
}

fn manifest_row_sha256(a: &model::ArchiveSpec) -> String {
    hex::encode(Sha256::digest(manifest_row(a).to_string()))
}

/// SHA256 of every manifest row as validated, in manifest order.
pub fn manifest_identity(cfg: &LoadedConfig) -> String {
    let mut h = Sha256::new();
    for a in &cfg.archives {
        h.update(manifest_row(a).to_string());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// What a stage's record says of it now.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The stage's fingerprint parts now.
    pub inputs: StageInputs,
    /// Why it runs (empty: up to date).
    pub reasons: Vec<RunReason>,
    /// Of an up-to-date stage's recorded outputs: the hashes confirmed and the statuses to
    /// record again (outputs that had to be read are re-stamped, so the next check
    /// trusts them by status).
    pub outputs: HashedOutputs,
    /// Recorded outputs whose status vouched for their hash (not read).
    pub trusted_by_status: usize,
    /// The record the decision read (None: none of this build's format).
    pub recorded: Option<StageRecord>,
}

impl Decision {
    /// Whether the stage can be skipped.
    pub fn up_to_date(&self) -> bool {
        self.reasons.is_empty()
    }
}

/// Why a stage runs: one fact each, as `pipeline status` and `pipeline run` name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum RunReason {
    /// `--force`.
    Forced,
    /// The stage never completed in this run directory.
    NoRecord,
    /// Its record is unreadable or of another format version.
    RecordFormat {
        /// The version found (null when unreadable).
        found: Option<u32>,
        /// This build's version.
        expected: u32,
    },
    /// Another build (executable bytes) runs it now.
    Build {
        /// The recorded executable's SHA256.
        old_executable_sha256: String,
        /// This executable's SHA256.
        new_executable_sha256: String,
        /// The recorded build's git commit (with `+dirty`), if known.
        old_git_commit: Option<String>,
        /// This build's git commit (with `+dirty`), if known.
        new_git_commit: Option<String>,
    },
    /// A config key was added, removed or changed.
    ConfigKey {
        /// Dotted path.
        key: String,
        /// The recorded value as JSON (null: absent).
        old: Option<String>,
        /// The value now as JSON (null: absent).
        new: Option<String>,
    },
    /// The config text changed without a key changing (comments, formatting): the run
    /// records the text's hash.
    ConfigText,
    /// A manifest row was added.
    ManifestRowAdded {
        /// Its archive id.
        archive_id: String,
    },
    /// A manifest row was removed.
    ManifestRowRemoved {
        /// Its archive id.
        archive_id: String,
    },
    /// A manifest row's columns changed.
    ManifestRowChanged {
        /// Its archive id.
        archive_id: String,
    },
    /// The manifest's rows are the same but in another order.
    ManifestOrder,
    /// A source archive was added, removed or declared with other bytes.
    Archive {
        /// Its archive id.
        archive_id: String,
    },
    /// An input file's bytes differ from those the stage read.
    InputChanged {
        /// Path relative to the run directory.
        file: String,
        /// SHA256 read then (`missing` when absent).
        old: String,
        /// SHA256 now (`missing` when absent).
        new: String,
    },
    /// An input file is rewritten by an earlier stage that will run (`status` only: the
    /// stage runs if those bytes come out different).
    InputRewritten {
        /// Path relative to the run directory.
        file: String,
        /// The stage that writes it.
        stage: String,
    },
    /// A recorded output is missing or its bytes differ from those recorded.
    OutputChanged {
        /// Path relative to the run directory.
        file: String,
    },
    /// The record lists no outputs.
    NoOutputs,
}

impl std::fmt::Display for RunReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
        let commit = |c: &Option<String>| c.clone().unwrap_or_else(|| "no git commit".into());
        match self {
            RunReason::Forced => write!(f, "--force"),
            RunReason::NoRecord => write!(f, "no record of an earlier run"),
            RunReason::RecordFormat { found, expected } => match found {
                Some(v) => write!(
                    f,
                    "its record is of format {v}, this build writes {expected}"
                ),
                None => write!(f, "its record is unreadable"),
            },
            RunReason::Build {
                old_executable_sha256,
                new_executable_sha256,
                old_git_commit,
                new_git_commit,
            } => write!(
                f,
                "the build changed: executable sha256 {} ({}) -> {} ({})",
                short(old_executable_sha256),
                commit(old_git_commit),
                short(new_executable_sha256),
                commit(new_git_commit)
            ),
            RunReason::ConfigKey { key, old, new } => {
                write!(f, "config key {key}: {} -> {}", value(old), value(new))
            }
            RunReason::ConfigText => {
                write!(f, "the config text changed (comments or formatting only)")
            }
            RunReason::ManifestRowAdded { archive_id } => {
                write!(f, "manifest row {archive_id} added")
            }
            RunReason::ManifestRowRemoved { archive_id } => {
                write!(f, "manifest row {archive_id} removed")
            }
            RunReason::ManifestRowChanged { archive_id } => {
                write!(f, "manifest row {archive_id} changed")
            }
            RunReason::ManifestOrder => write!(f, "the manifest rows were reordered"),
            RunReason::Archive { archive_id } => {
                write!(f, "source archive {archive_id} changed")
            }
            RunReason::InputChanged { file, old, new } => {
                write!(
                    f,
                    "input {file} changed: sha256 {} -> {}",
                    short(old),
                    short(new)
                )
            }
            RunReason::InputRewritten { file, stage } => write!(
                f,
                "input {file} is rewritten by {stage}, which will run (this stage runs if its bytes change)"
            ),
            RunReason::OutputChanged { file } => {
                write!(f, "output {file} is missing or changed")
            }
            RunReason::NoOutputs => write!(f, "its record lists no outputs"),
        }
    }
}

/// The first 12 hex digits of a hash (a word like `missing` as it is).
fn short(sha: &str) -> &str {
    if sha.len() == 64 { &sha[..12] } else { sha }
}

/// At most this many reasons are printed per stage (the JSON has them all).
pub const REASON_LINES: usize = 12;

/// The reasons as lines, at most `limit` of them, then how many more there are.
pub fn reason_lines(reasons: &[RunReason], limit: usize) -> Vec<String> {
    let mut lines: Vec<String> = reasons.iter().take(limit).map(|r| r.to_string()).collect();
    if reasons.len() > limit {
        lines.push(format!("and {} more", reasons.len() - limit));
    }
    lines
}

/// Whether `stage` can be skipped, and every reason it cannot: the one decision of both
/// `pipeline run` and `pipeline status`. `known` holds the hashes of the earlier stages'
/// outputs (recorded, or just written); `rewritten` the files of earlier stages that will
/// run (`status`; empty for `run`, which decides after they ran). Outputs are checked by
/// status where it vouches for the recorded hash, else read.
pub fn decide(
    cfg: &LoadedConfig,
    stage: &dyn Stage,
    known: &BTreeMap<String, String>,
    rewritten: &BTreeMap<String, String>,
    run: &RunDir,
    force: bool,
) -> Result<Decision> {
    let inputs = stage_inputs(cfg, stage, known, run)?;
    let mut d = Decision {
        inputs,
        reasons: Vec::new(),
        outputs: HashedOutputs::default(),
        trusted_by_status: 0,
        recorded: None,
    };
    if force {
        d.reasons.push(RunReason::Forced);
    }
    let rec = match read_record_checked(run, stage.name()) {
        Ok(Some(rec)) => rec,
        Ok(None) => {
            d.reasons.push(RunReason::NoRecord);
            return Ok(d);
        }
        Err(found) => {
            d.reasons.push(RunReason::RecordFormat {
                found,
                expected: STAGE_RECORD_VERSION,
            });
            return Ok(d);
        }
    };
    input_reasons(&rec.inputs, &d.inputs, rewritten, &mut d.reasons);
    // A stage that runs anyway need not say which of its inputs an earlier stage rewrites.
    if d.reasons
        .iter()
        .any(|r| !matches!(r, RunReason::InputRewritten { .. }))
    {
        d.reasons
            .retain(|r| !matches!(r, RunReason::InputRewritten { .. }));
    }
    if rec.outputs.is_empty() {
        d.reasons.push(RunReason::NoOutputs);
    }
    for (name, sha) in &rec.outputs {
        let path = run.file(name);
        let now = FileStat::of(&path, now_ns());
        let trusted = match (rec.output_stats.get(name), &now) {
            (Some(then), Some(now)) => then.vouches_for(now),
            _ => false,
        };
        if trusted {
            d.trusted_by_status += 1;
            d.outputs.sha256.insert(name.clone(), sha.clone());
            d.outputs
                .stats
                .insert(name.clone(), rec.output_stats[name].clone());
            continue;
        }
        match path.is_file().then(|| hash_with_stat(&path)).transpose() {
            Ok(Some((actual, stat))) if &actual == sha => {
                d.outputs.sha256.insert(name.clone(), actual);
                if let Some(stat) = stat {
                    d.outputs.stats.insert(name.clone(), stat);
                }
            }
            _ => d
                .reasons
                .push(RunReason::OutputChanged { file: name.clone() }),
        }
    }
    if d.reasons.is_empty() && fingerprint(stage.name(), &d.inputs) != rec.fingerprint {
        // Parts equal but the fingerprint differs: another tool version hashed them.
        d.reasons.push(RunReason::RecordFormat {
            found: Some(rec.format_version),
            expected: STAGE_RECORD_VERSION,
        });
    }
    d.recorded = Some(rec);
    Ok(d)
}

/// The reasons the recorded fingerprint parts `old` and those of now, `new`, differ.
fn input_reasons(
    old: &StageInputs,
    new: &StageInputs,
    rewritten: &BTreeMap<String, String>,
    out: &mut Vec<RunReason>,
) {
    if old.build.executable_sha256 != new.build.executable_sha256
        || old.build.tool_version != new.build.tool_version
    {
        out.push(RunReason::Build {
            old_executable_sha256: old.build.executable_sha256.clone(),
            new_executable_sha256: new.build.executable_sha256.clone(),
            old_git_commit: old.build.commit(),
            new_git_commit: new.build.commit(),
        });
    }
    let mut keys_changed = false;
    for (key, old_v, new_v) in map_changes(&old.config, &new.config) {
        keys_changed = true;
        out.push(RunReason::ConfigKey {
            key,
            old: old_v,
            new: new_v,
        });
    }
    if !keys_changed && old.config_sha256 != new.config_sha256 {
        out.push(RunReason::ConfigText);
    }
    let mut archives_named = std::collections::BTreeSet::new();
    match (&old.manifest, &new.manifest) {
        (Some(o), Some(n)) if o.sha256 != n.sha256 => {
            let mut any = false;
            for (id, was, now) in map_changes(&o.rows, &n.rows) {
                any = true;
                archives_named.insert(id.clone());
                out.push(match (was, now) {
                    (None, _) => RunReason::ManifestRowAdded { archive_id: id },
                    (_, None) => RunReason::ManifestRowRemoved { archive_id: id },
                    _ => RunReason::ManifestRowChanged { archive_id: id },
                });
            }
            if !any {
                out.push(RunReason::ManifestOrder);
            }
        }
        _ => {}
    }
    for (id, _, _) in map_changes(&old.archives, &new.archives) {
        if !archives_named.contains(&id) {
            out.push(RunReason::Archive { archive_id: id });
        }
    }
    for (file, was, now) in map_changes(&old.files, &new.files) {
        if let Some(stage) = rewritten.get(&file) {
            out.push(RunReason::InputRewritten {
                file,
                stage: stage.clone(),
            });
            continue;
        }
        out.push(RunReason::InputChanged {
            file,
            old: was.unwrap_or_else(|| "missing".into()),
            new: now.unwrap_or_else(|| "missing".into()),
        });
    }
    // Inputs an earlier stage will rewrite, even where their bytes are the same now.
    for file in new.files.keys() {
        if let Some(stage) = rewritten.get(file)
            && old.files.get(file) == new.files.get(file)
        {
            out.push(RunReason::InputRewritten {
                file: file.clone(),
                stage: stage.clone(),
            });
        }
    }
}

/// The keys of two maps whose values differ (absent on one side: None), in key order.
pub(crate) fn map_changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<(String, Option<String>, Option<String>)> {
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| (k.clone(), old.get(k).cloned(), new.get(k).cloned()))
        .collect()
}

/// Read a stage's record: `Ok(None)` when there is none, `Err(version)` when it is
/// unreadable (None) or of another format version.
fn read_record_checked(
    run: &RunDir,
    stage: &str,
) -> std::result::Result<Option<StageRecord>, Option<u32>> {
    let path = record_path(run, stage);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return if path.exists() { Err(None) } else { Ok(None) };
    };
    #[derive(Deserialize)]
    struct Versioned {
        format_version: Option<u32>,
    }
    let version = serde_json::from_str::<Versioned>(&text)
        .ok()
        .and_then(|v| v.format_version);
    if version != Some(STAGE_RECORD_VERSION) {
        return Err(version);
    }
    serde_json::from_str(&text).map(Some).map_err(|_| version)
}

/// Read a stage's record, if any. A record of another format version (or unreadable) is
/// no record: the stage runs again and writes one of this build's version.
pub fn read_record(run: &RunDir, stage: &str) -> Option<StageRecord> {
    read_record_checked(run, stage).ok().flatten()
}

/// Record a completed (or confirmed) stage.
pub fn write_record(run: &RunDir, rec: &StageRecord) -> Result<()> {
    let p = record_path(run, &rec.stage);
    let text = serde_json::to_string_pretty(rec)? + "\n";
    frames::atomic_write(&p, text.as_bytes())?;
    Ok(())
}

/// How one stage went.
#[derive(Debug, Clone, Serialize)]
pub struct StageOutcome {
    /// Stage name.
    pub stage: String,
    /// Skipped because nothing changed.
    pub skipped: bool,
    /// Wall seconds.
    pub seconds: f64,
    /// One-line summary.
    pub summary: String,
    /// Why it ran (empty when skipped).
    pub reasons: Vec<RunReason>,
    /// When it started (RFC 3339, UTC, seconds; null when skipped).
    pub started_utc: Option<String>,
    /// When it finished (null when skipped).
    pub finished_utc: Option<String>,
}

/// Time a closure.
pub fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let t = Instant::now();
    let v = f()?;
    Ok((v, t.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mtime_ns: i64, hashed_at_ns: i64) -> FileStat {
        FileStat {
            bytes: 10,
            device: 1,
            inode: 2,
            mtime_ns,
            ctime_ns: mtime_ns,
            hashed_at_ns,
        }
    }

    #[test]
    fn a_status_vouches_only_for_an_unchanged_file_hashed_well_after_its_last_change() {
        let then = stat(0, RACY_MARGIN_NS + 1);
        assert!(then.vouches_for(&then.clone()));
        // Hashed within the margin of its last change: a write in the same tick would not
        // have moved the times.
        let racy = stat(0, RACY_MARGIN_NS);
        assert!(!racy.vouches_for(&racy.clone()));
        for changed in [
            FileStat {
                bytes: 11,
                ..then.clone()
            },
            FileStat {
                inode: 3,
                ..then.clone()
            },
            FileStat {
                device: 9,
                ..then.clone()
            },
            FileStat {
                mtime_ns: 1,
                ..then.clone()
            },
            // Bytes rewritten in place with the old size and modification time.
            FileStat {
                ctime_ns: 5,
                ..then.clone()
            },
        ] {
            assert!(!then.vouches_for(&changed), "{changed:?}");
        }
    }

    #[test]
    fn config_keys_are_dotted_paths_with_json_values() {
        let keys = config_keys(
            "version: 1\nsearch:\n  seed: 7\n  order: [tmax, deepswe]\n  budget: {}\nworkloads:\n  tmax:\n    replay: { gpus: 8 }\n",
        );
        let got: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("search.budget", "{}"),
                ("search.order", "[\"tmax\",\"deepswe\"]"),
                ("search.seed", "7"),
                ("version", "1"),
                ("workloads.tmax.replay.gpus", "8"),
            ]
        );
        assert!(config_keys(": not yaml: [").is_empty());
    }
}
