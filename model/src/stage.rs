//! The stage contract: each stage of the chain declares its name, what it reads and what it
//! writes, and runs from the config alone; `pipeline` derives fingerprints, provenance,
//! verification and its summary from these declarations (docs/ARCHITECTURE.md).

use crate::LoadedConfig;

/// Something a stage reads besides the config (every stage reads `pipeline.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum StageInput {
    /// Every column of every manifest row (locations, workload, hashes, sizes).
    Manifest,
    /// An archive fetched from its declared locations, by archive id.
    SourceArchive(String),
    /// A file below the run directory, by its path relative to it (another stage's output).
    File(String),
}

impl StageInput {
    /// How provenance names the input: `archive:<id>` for a source archive, the path for
    /// a file; the manifest is covered by the config and is not listed.
    pub fn provenance_name(&self) -> Option<String> {
        match self {
            StageInput::Manifest => None,
            StageInput::SourceArchive(id) => Some(format!("archive:{id}")),
            StageInput::File(path) => Some(path.clone()),
        }
    }
}

/// Where a stage reports progress lines (the pipeline prints them, prefixed by the stage).
pub trait StageProgress: Send + Sync {
    /// A line worth showing while the stage runs.
    fn note(&self, stage: &str, line: &str);
}

/// A progress sink that drops every line.
#[derive(Debug, Default, Clone, Copy)]
pub struct SilentProgress;

impl StageProgress for SilentProgress {
    fn note(&self, _stage: &str, _line: &str) {}
}

/// The run-wide choices a stage may use; results never depend on them.
#[derive(Clone)]
pub struct StageContext {
    /// Ingest from the verified store alone (no network).
    pub offline: bool,
    /// With `offline`: stored bytes are used even for locations that never delivered them
    /// (ledger rows `unchecked`) instead of failing those archives.
    pub accept_unchecked: bool,
    /// Worker threads (None: one per core).
    pub threads: Option<usize>,
    /// Where progress lines go.
    pub progress: std::sync::Arc<dyn StageProgress>,
}

impl std::fmt::Debug for StageContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageContext")
            .field("offline", &self.offline)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

/// Whether a failed stage refused its input (a config or manifest it cannot run: exit 2)
/// or ran and found a failure (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The config, manifest or a file named by them was refused before any work.
    Refused,
    /// The stage ran and failed (verification, cohort mismatch, I/O).
    Failed,
}

/// A stage that did not complete, with its cause.
#[derive(Debug, thiserror::Error)]
#[error("{stage} failed")]
pub struct StageError {
    /// The stage's name.
    pub stage: &'static str,
    /// Refused or failed.
    pub kind: FailureKind,
    /// What went wrong (its own chain of causes).
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl StageError {
    /// A stage error of `kind` caused by `source`.
    pub fn new(
        stage: &'static str,
        kind: FailureKind,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StageError {
            stage,
            kind,
            source: Box::new(source),
        }
    }
}

/// One stage of the chain. Implemented once, in the stage's own crate; the pipeline holds
/// the ordered list of stages and nothing else about them.
pub trait Stage: Sync {
    /// The stage's name (`ingest`, `audit`, ...): its record is `.stages/<name>.json`.
    fn name(&self) -> &'static str;
    /// One line on what the stage does.
    fn about(&self) -> &'static str;
    /// Everything the stage reads besides the config; the stage's fingerprint covers
    /// exactly these (and the config, the tool and the build).
    fn inputs(&self, cfg: &LoadedConfig) -> Vec<StageInput>;
    /// Every file the stage writes whose bytes are a result (hashed into provenance and
    /// re-derived by `verify`), relative to the run directory.
    fn outputs(&self, cfg: &LoadedConfig) -> Vec<String>;
    /// The config keys the stage uses, as dotted paths where `*` stands for one key (a
    /// workload's name, say) and a key stands for everything below it. The fingerprint
    /// covers the whole config; lineage names these.
    fn config_keys(&self) -> Vec<&'static str>;
    /// Files the stage writes that hold wall-clock facts (times, host): never hashed.
    fn run_facts(&self) -> Vec<&'static str> {
        Vec::new()
    }
    /// Run the stage; on success, a one-line summary of what it did.
    fn run(&self, cfg: &LoadedConfig, ctx: &StageContext) -> Result<String, StageError>;
    /// For a stage that runs as shards (`--shard I/N`): merge its finished shards below
    /// `run_dir/shards/` into the outputs [`Stage::run`] writes, byte for byte, after
    /// checking every part against its shard's record. `None`: the stage has no shards.
    fn merge_shards(
        &self,
        _cfg: &LoadedConfig,
        _ctx: &StageContext,
    ) -> Option<Result<String, StageError>> {
        None
    }
}

/// Whether the dotted config key `key` falls under the pattern `pattern` of
/// [`Stage::config_keys`] (`*` matches one key; a pattern covers the keys below it).
pub fn config_key_matches(pattern: &str, key: &str) -> bool {
    let (p, k): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), key.split('.').collect());
    p.len() <= k.len() && p.iter().zip(&k).all(|(p, k)| *p == "*" || p == k)
}

/// The files directly below the run directory a stage writes (its outputs and run facts),
/// the content-addressed store aside (a blob there is named by its own hash, so one already
/// present is the same bytes): what a command must not replace in a directory it does not
/// own ([`crate::run_dir::refuse_foreign_files`]).
pub fn written_files(stage: &dyn Stage, cfg: &LoadedConfig) -> Vec<String> {
    stage
        .outputs(cfg)
        .into_iter()
        .filter(|o| !o.starts_with("store/"))
        .chain(stage.run_facts().into_iter().map(str::to_string))
        .collect()
}
