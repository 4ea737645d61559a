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

/// The result file of an attempt as the writers lay it out (the demo writes it). Fields not
/// used by a workload are absent or null. The audit reads result files with the tolerant
/// [`ResultFields`] instead.
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

/// A result file as the audit reads it: field by field, so that an unexpected shape of one
/// field neither hides the others nor the rule it triggers (docs/FORMAT.md, "The cohort": a tmax
/// trial with `exception_info` is excluded; a deepswe attempt with an `infra_error` is not
/// generation-complete). Text fields take a string as written and any other non-null value
/// as its compact JSON text; `reward` is a JSON number or null.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultFields {
    /// `completed_utc` as written (a non-string value as its JSON text, which then fails to
    /// parse as a time and makes the record malformed).
    pub completed_utc: Option<String>,
    /// deepswe: how the agent stopped.
    pub termination: Option<String>,
    /// deepswe: the infrastructure failure; any non-null value (even `""`, `{}` or `false`).
    pub infra_error: Option<String>,
    /// tmax: the exception; any non-null value.
    pub exception: Option<ExceptionFields>,
    /// tmax: the score when it is a JSON number; any other value is taken as absent.
    pub reward: Option<f64>,
}

/// A non-null `exception_info` of any shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionFields {
    /// `type` of an object (text); null when the value is not an object or has no `type`.
    pub kind: Option<String>,
    /// `message` of an object (text; null when absent); for a value that is not an object,
    /// the value itself (a string as written, anything else as its JSON text).
    pub message: Option<String>,
    /// The whole value as compact JSON text.
    pub json: String,
}

impl ExceptionFields {
    /// One line for an exclusion's detail: `Type: message`, or the JSON text without a type.
    pub fn detail(&self) -> String {
        match &self.kind {
            Some(k) => format!("{k}: {}", self.message.as_deref().unwrap_or("")),
            None => format!("exception_info {}", self.json),
        }
    }
}

fn json_text(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

impl ResultFields {
    /// Read a result file. Only invalid JSON, or a top level that is not an object, is an
    /// error: every field is read on its own (extra keys are ignored).
    pub fn from_json(bytes: &[u8]) -> Result<ResultFields, String> {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let m = match v {
            serde_json::Value::Object(m) => m,
            other => {
                let what = match other {
                    serde_json::Value::Array(_) => "an array",
                    serde_json::Value::String(_) => "a string",
                    serde_json::Value::Number(_) => "a number",
                    serde_json::Value::Bool(_) => "a boolean",
                    _ => "null",
                };
                return Err(format!("expected a JSON object, got {what}"));
            }
        };
        let exception = match m.get("exception_info") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Object(o)) => Some(ExceptionFields {
                kind: json_text(o.get("type")),
                message: json_text(o.get("message")),
                json: serde_json::Value::Object(o.clone()).to_string(),
            }),
            Some(other) => Some(ExceptionFields {
                kind: None,
                message: json_text(Some(other)),
                json: other.to_string(),
            }),
        };
        Ok(ResultFields {
            completed_utc: json_text(m.get("completed_utc")),
            termination: json_text(m.get("termination")),
            infra_error: json_text(m.get("infra_error")),
            exception,
            reward: m.get("reward").and_then(serde_json::Value::as_f64),
        })
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
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
    /// Every reason, in order of precedence where several apply (the workload rules last).
    pub const ALL: [ExclusionReason; 6] = [
        ExclusionReason::SupersededByCensus,
        ExclusionReason::DuplicateAttempt,
        ExclusionReason::MissingFile,
        ExclusionReason::MalformedRecord,
        ExclusionReason::ExecutionException,
        ExclusionReason::InfrastructureFailure,
    ];

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
    fn result_fields_are_read_one_by_one() {
        let r = |j: &str| ResultFields::from_json(j.as_bytes());
        // The shapes the writers use.
        let t = r(r#"{"completed_utc":"2025-09-01T00:00:00Z","exception_info":{"type":"E","message":"m"},"reward":1}"#).unwrap();
        assert_eq!(t.completed_utc.as_deref(), Some("2025-09-01T00:00:00Z"));
        let e = t.exception.unwrap();
        assert_eq!(
            (e.kind.as_deref(), e.message.as_deref()),
            (Some("E"), Some("m"))
        );
        assert_eq!(e.detail(), "E: m");
        assert_eq!(t.reward, Some(1.0));
        let d =
            r(r#"{"completed_utc":null,"termination":"submitted","infra_error":null}"#).unwrap();
        assert_eq!(
            d,
            ResultFields {
                termination: Some("submitted".into()),
                ..Default::default()
            }
        );
        // exception_info of any non-null shape is an exception.
        let e = r(r#"{"exception_info":{"message":"boom"}}"#)
            .unwrap()
            .exception
            .unwrap();
        assert_eq!(
            (e.kind.as_deref(), e.message.as_deref()),
            (None, Some("boom"))
        );
        assert_eq!(e.detail(), r#"exception_info {"message":"boom"}"#);
        let e = r(r#"{"exception_info":{"type":"E","traceback":"x"}}"#)
            .unwrap()
            .exception
            .unwrap();
        assert_eq!((e.kind.as_deref(), e.message.as_deref()), (Some("E"), None));
        assert_eq!(e.detail(), "E: ");
        let e = r(r#"{"exception_info":"Timeout"}"#)
            .unwrap()
            .exception
            .unwrap();
        assert_eq!(
            (e.kind, e.message.as_deref(), e.json.as_str()),
            (None, Some("Timeout"), r#""Timeout""#)
        );
        let e = r(r#"{"exception_info":137}"#).unwrap().exception.unwrap();
        assert_eq!((e.kind, e.message.as_deref()), (None, Some("137")));
        let e = r(r#"{"exception_info":{"type":["A","B"],"message":null}}"#)
            .unwrap()
            .exception
            .unwrap();
        assert_eq!((e.kind.as_deref(), e.message), (Some(r#"["A","B"]"#), None));
        assert!(r(r#"{"exception_info":{}}"#).unwrap().exception.is_some());
        assert!(
            r(r#"{"exception_info":false}"#)
                .unwrap()
                .exception
                .is_some()
        );
        assert!(r(r#"{"exception_info":null}"#).unwrap().exception.is_none());
        // infra_error: text as written, anything else as its JSON text.
        assert_eq!(
            r(r#"{"infra_error":""}"#).unwrap().infra_error.as_deref(),
            Some("")
        );
        assert_eq!(
            r(r#"{"infra_error":{"code":503}}"#)
                .unwrap()
                .infra_error
                .as_deref(),
            Some(r#"{"code":503}"#)
        );
        assert_eq!(
            r(r#"{"infra_error":true}"#).unwrap().infra_error.as_deref(),
            Some("true")
        );
        // A non-numeric reward is absent; a non-string completed_utc keeps its JSON text.
        assert_eq!(r(r#"{"reward":"1.0"}"#).unwrap().reward, None);
        assert_eq!(r(r#"{"reward":[1]}"#).unwrap().reward, None);
        assert_eq!(
            r(r#"{"completed_utc":5}"#)
                .unwrap()
                .completed_utc
                .as_deref(),
            Some("5")
        );
        // Only invalid JSON or a top level that is not an object is refused.
        assert!(
            r("{not json")
                .unwrap_err()
                .starts_with("key must be a string")
        );
        assert_eq!(
            r("[1]").unwrap_err(),
            "expected a JSON object, got an array"
        );
    }

    /// `ALL` lists every variant once: the matches below stop compiling when a variant is
    /// added (extend `ALL` with it), and the counts catch a variant listed twice or left out.
    #[test]
    fn every_reason_is_listed_once_in_all() {
        let clip_index = |r: ClipReason| match r {
            ClipReason::MissingTimer => 0,
            ClipReason::OrphanTimer => 1,
            ClipReason::BeforeGenerationStart => 2,
            ClipReason::AfterGenerationEnd => 3,
            ClipReason::OutsideGeneration => 4,
            ClipReason::MergedOverlap => 5,
        };
        let mut seen: Vec<usize> = ClipReason::ALL.iter().map(|r| clip_index(*r)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..6).collect::<Vec<_>>());
        let exclusion_index = |r: ExclusionReason| match r {
            ExclusionReason::ExecutionException => 0,
            ExclusionReason::InfrastructureFailure => 1,
            ExclusionReason::SupersededByCensus => 2,
            ExclusionReason::DuplicateAttempt => 3,
            ExclusionReason::MalformedRecord => 4,
            ExclusionReason::MissingFile => 5,
        };
        let mut seen: Vec<usize> = ExclusionReason::ALL
            .iter()
            .map(|r| exclusion_index(*r))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..6).collect::<Vec<_>>());
        // The frame spelling is serde's (what audit.json's keys use).
        for r in ExclusionReason::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        for r in ClipReason::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
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
