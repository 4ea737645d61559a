//! The study's domain vocabulary: workloads, attempts, lifetimes, intervals, blobs and reasons.
//!
//! These types cross crate boundaries (demo writes the records, audit reads them, replay
//! consumes what audit derived). They carry no I/O.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Bytes in one GiB (2^30); blob and memory sizes in the study use binary units.
pub const GIB: f64 = 1_073_741_824.0;

/// One batch that was run. The set is closed: the cohort rules differ per workload.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadId {
    /// 267 Teacher trials, 16 concurrent.
    Tmax,
    /// 500 tasks x 4 attempts, 32 concurrent (plus a superseded 100-attempt pilot).
    Deepswe,
}

impl WorkloadId {
    /// Every workload, in a fixed order.
    pub const ALL: [WorkloadId; 2] = [WorkloadId::Tmax, WorkloadId::Deepswe];

    /// The lowercase name used in files and frames.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadId::Tmax => "tmax",
            WorkloadId::Deepswe => "deepswe",
        }
    }

    /// Parse the lowercase name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "tmax" => Some(WorkloadId::Tmax),
            "deepswe" => Some(WorkloadId::Deepswe),
            _ => None,
        }
    }
}

impl fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which run of a workload an attempt belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// The full census whose cohort is audited.
    Census,
    /// The earlier pilot, superseded by the census.
    Pilot,
}

impl RunKind {
    /// The lowercase name used in files and frames.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Census => "census",
            RunKind::Pilot => "pilot",
        }
    }
}

/// The resources an attempt's sandbox reserved for its whole life. Extra keys (a GPU count,
/// a disk size) are tolerated, like everywhere in the records read from archives.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quota {
    /// CPU cores.
    pub cores: f64,
    /// RAM in GiB.
    pub mem_gib: f64,
}

/// One compressed container-image layer used by an attempt.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BlobRef {
    /// `sha256:<64 hex>`.
    pub digest: String,
    /// Compressed size in bytes.
    pub compressed_bytes: u64,
}

/// The container image an attempt ran in, as its layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// Compressed layers.
    pub blobs: Vec<BlobRef>,
}

/// The identity file of an attempt (`identity.json` / `trial.json`); its mtime starts the
/// generation lifetime. Extra keys are tolerated: real records carry more than we read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdentityRecord {
    /// Benchmark problem id.
    pub task_id: String,
    /// Attempt (trial) id, unique within a workload.
    pub attempt_id: String,
    /// `census` or `pilot`.
    pub run: RunKind,
    /// Reserved resources.
    pub quota: Quota,
    /// Image layers.
    pub image: ImageRecord,
}

/// What a tmax trial raised, if it failed to execute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionInfo {
    /// Exception type name.
    #[serde(rename = "type")]
    pub kind: String,
    /// Exception message (empty when the record has none).
    #[serde(default)]
    pub message: String,
}

/// The result file of an attempt. Fields not used by a workload are absent or null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ResultRecord {
    /// RFC 3339 UTC completion time, or null when the generation never completed.
    pub completed_utc: Option<String>,
    /// deepswe: how the agent stopped (`submitted`, `max_steps`, `llm_query_error`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination: Option<String>,
    /// deepswe: infrastructure failure text, or null.
    #[serde(default)]
    pub infra_error: Option<String>,
    /// tmax: the exception the trial raised, or null.
    #[serde(default)]
    pub exception_info: Option<ExceptionInfo>,
    /// tmax: the score (0 for a wrong answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
}

impl ResultRecord {
    /// Serialize with exactly the keys the workload's layout uses (explicit nulls kept).
    pub fn to_json_for(&self, workload: WorkloadId) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert(
            "completed_utc".into(),
            serde_json::to_value(&self.completed_utc).unwrap_or_default(),
        );
        match workload {
            WorkloadId::Deepswe => {
                m.insert(
                    "termination".into(),
                    serde_json::to_value(&self.termination).unwrap_or_default(),
                );
                m.insert(
                    "infra_error".into(),
                    serde_json::to_value(&self.infra_error).unwrap_or_default(),
                );
            }
            WorkloadId::Tmax => {
                m.insert(
                    "exception_info".into(),
                    serde_json::to_value(&self.exception_info).unwrap_or_default(),
                );
                m.insert(
                    "reward".into(),
                    serde_json::to_value(self.reward).unwrap_or_default(),
                );
            }
        }
        serde_json::Value::Object(m)
    }
}

/// One line of a timers file: a request's elapsed time on a monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRecord {
    /// Request sequence number (matches the start file's name).
    pub seq: u64,
    /// Elapsed nanoseconds.
    pub elapsed_ns: u64,
}

/// `[identity-file mtime, completed_utc]`; the end is absent when generation never completed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenerationLifetime {
    /// Epoch seconds (identity-file mtime).
    pub start: f64,
    /// Epoch seconds (completed_utc), if any.
    pub end: Option<f64>,
}

impl GenerationLifetime {
    /// The attempt's fixed duration `d`, if the generation completed.
    pub fn duration(&self) -> Option<f64> {
        self.end.map(|e| e - self.start)
    }
}

/// A closed-open model-request interval `[start, end)` in epoch seconds, with the request
/// sequence numbers it was built from (several after a merge).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestInterval {
    /// Sequence numbers, ascending.
    pub seqs: Vec<u64>,
    /// Start, epoch seconds.
    pub start: f64,
    /// End, epoch seconds.
    pub end: f64,
}

impl RequestInterval {
    /// Length in seconds.
    pub fn len(&self) -> f64 {
        self.end - self.start
    }

    /// True when the interval has no length.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// Why a clipping row exists: every clip, drop, merge and timing anomaly has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClipReason {
    /// A start file without a timer: the request is taken to run to the generation end.
    MissingTimer,
    /// A timer without a start file: no interval can be placed.
    OrphanTimer,
    /// The interval began before the identity mtime; the part before was cut.
    BeforeGenerationStart,
    /// The interval ended after completed_utc; the part after was cut.
    AfterGenerationEnd,
    /// The interval lay wholly outside the lifetime and was dropped.
    OutsideGeneration,
    /// Overlapping or touching intervals were merged into one.
    MergedOverlap,
}

impl ClipReason {
    /// Every reason, in the order they are applied.
    pub const ALL: [ClipReason; 6] = [
        ClipReason::MissingTimer,
        ClipReason::OrphanTimer,
        ClipReason::BeforeGenerationStart,
        ClipReason::AfterGenerationEnd,
        ClipReason::OutsideGeneration,
        ClipReason::MergedOverlap,
    ];

    /// The snake_case name used in frames.
    pub fn as_str(self) -> &'static str {
        match self {
            ClipReason::MissingTimer => "missing_timer",
            ClipReason::OrphanTimer => "orphan_timer",
            ClipReason::BeforeGenerationStart => "before_generation_start",
            ClipReason::AfterGenerationEnd => "after_generation_end",
            ClipReason::OutsideGeneration => "outside_generation",
            ClipReason::MergedOverlap => "merged_overlap",
        }
    }
}

impl fmt::Display for ClipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an attempt is not in its workload's cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionReason {
    /// tmax: the trial raised an exception (wrong answers are not excluded).
    ExecutionException,
    /// deepswe: no completed_utc, or an infra_error.
    InfrastructureFailure,
    /// deepswe pilot attempt; the census supersedes it (wins over every other reason).
    SupersededByCensus,
    /// The attempt id was seen before in the same workload.
    DuplicateAttempt,
    /// Unparseable JSON, a bad field, or ids that disagree with the directory.
    MalformedRecord,
    /// The identity or result file is absent.
    MissingFile,
}

impl ExclusionReason {
    /// The snake_case name used in frames.
    pub fn as_str(self) -> &'static str {
        match self {
            ExclusionReason::ExecutionException => "execution_exception",
            ExclusionReason::InfrastructureFailure => "infrastructure_failure",
            ExclusionReason::SupersededByCensus => "superseded_by_census",
            ExclusionReason::DuplicateAttempt => "duplicate_attempt",
            ExclusionReason::MalformedRecord => "malformed_record",
            ExclusionReason::MissingFile => "missing_file",
        }
    }
}

impl fmt::Display for ExclusionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_json_has_workload_keys_with_nulls() {
        let r = ResultRecord {
            completed_utc: None,
            ..Default::default()
        };
        let d = r.to_json_for(WorkloadId::Deepswe).to_string();
        assert_eq!(
            d,
            r#"{"completed_utc":null,"infra_error":null,"termination":null}"#
        );
        let t = r.to_json_for(WorkloadId::Tmax).to_string();
        assert_eq!(
            t,
            r#"{"completed_utc":null,"exception_info":null,"reward":null}"#
        );
    }

    #[test]
    fn records_tolerate_extra_keys_and_a_missing_message() {
        let q: Quota = serde_json::from_str(r#"{"cores":1,"mem_gib":2,"gpus":0}"#).unwrap();
        assert_eq!((q.cores, q.mem_gib), (1.0, 2.0));
        let r: ResultRecord = serde_json::from_str(
            r#"{"completed_utc":null,"exception_info":{"type":"E","traceback":"x"},"reward":1}"#,
        )
        .unwrap();
        assert_eq!(r.exception_info.unwrap().message, "");
        assert_eq!(r.reward, Some(1.0));
    }

    #[test]
    fn identity_parses_with_extra_keys() {
        let j = r#"{"task_id":"t","attempt_id":"a","run":"census","quota":{"cores":2.0,"mem_gib":4.5},
                  "image":{"blobs":[{"digest":"sha256:00","compressed_bytes":12}]},"extra":1}"#;
        let r: IdentityRecord = serde_json::from_str(j).unwrap();
        assert_eq!(r.quota.mem_gib, 4.5);
        assert_eq!(r.image.blobs[0].compressed_bytes, 12);
    }
}
