//! Deterministic demo corpus generator: original archives in the exact layout of
//! docs/FORMAT.md, raw shards, a manifest, a `pipeline.yaml` and the `expected.json` an auditor
//! must reproduce. Same seed, same bytes.

pub mod knobs;
pub mod plan;
pub mod rng;
pub mod write;
pub mod zoo;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use knobs::CorpusKnobs;
pub use plan::{CorpusPlan, plan_corpus, plan_corpus_with};
pub use write::{write_corpus, write_corpus_with};
pub use zoo::{ZooError, ZooInstance};

/// The default seed of the demo corpus.
pub const DEFAULT_SEED: u64 = 20_261_129;
/// Version of `expected.json`.
pub const EXPECTED_FORMAT_VERSION: u32 = 1;

/// Corpus size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// A few dozen attempts per workload, for fast tests.
    Small,
    /// The study's cohort: tmax 267 trials, deepswe 2,000 census + 100 pilot attempts.
    Full,
    /// Ten times the study: tmax 2,670, deepswe 20,000 census + 1,000 pilot.
    X10,
    /// A hundred times the study: tmax 26,700, deepswe 200,000 census + 10,000 pilot.
    X100,
}

impl Scale {
    /// Every scale, smallest first.
    pub const ALL: [Scale; 4] = [Scale::Small, Scale::Full, Scale::X10, Scale::X100];

    /// Every scale's name, smallest first (the command line's choices).
    pub const NAMES: [&'static str; 4] = ["small", "full", "x10", "x100"];

    /// Parse a scale's name (one of [`Scale::NAMES`]).
    pub fn parse(s: &str) -> Option<Scale> {
        Scale::ALL.into_iter().find(|x| x.as_str() == s)
    }
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        Scale::NAMES[self as usize]
    }
}

/// What an auditor must find in one workload of the corpus.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkloadExpectation {
    /// Census attempts audited.
    pub audited: u64,
    /// Census attempts in the cohort.
    pub included: u64,
    /// Census exclusions by reason.
    pub excluded: BTreeMap<String, u64>,
    /// Pilot attempts (superseded by the census).
    pub pilot: u64,
    /// Attempt ids kept in the cohort but flagged (`llm_query_error`).
    pub flagged: Vec<String>,
    /// tmax: included trials with reward 0.
    pub wrong_answers: u64,
    /// Clipping rows by reason (census attempts; pilot attempts have none).
    pub clipping: BTreeMap<String, u64>,
    /// How many of the `merged_overlap` rows are touching pairs (0 s removed).
    pub merged_touching: u64,
    /// Request-start files in census attempts.
    pub start_files: u64,
}

/// One written archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WrittenArchive {
    /// Archive id.
    pub archive_id: String,
    /// Workload.
    pub workload: String,
    /// Path relative to the output directory.
    pub file: String,
    /// SHA256 (hex).
    pub sha256: String,
    /// Byte count.
    pub bytes: u64,
    /// Raw shard (relative path) holding it.
    pub shard: String,
}

/// What `write_corpus` produced.
#[derive(Debug, Clone, Serialize)]
pub struct DemoSummary {
    /// Output directory.
    pub out: PathBuf,
    /// Scale.
    pub scale: Scale,
    /// Seed.
    pub seed: u64,
    /// Archives.
    pub archives: Vec<WrittenArchive>,
    /// Per-workload expectations.
    pub expected: BTreeMap<String, WorkloadExpectation>,
}

/// Errors writing the corpus; each names the path.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// Filesystem failure.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl DemoError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DemoError + '_ {
        move |source| DemoError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Plan and write a corpus into `out`.
pub fn generate(out: &Path, scale: Scale, seed: u64) -> Result<DemoSummary, DemoError> {
    let plan = plan_corpus(scale, seed);
    write_corpus(&plan, out, scale, seed)
}
