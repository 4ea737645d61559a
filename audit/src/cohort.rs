//! The cohort audit: exclusion rules per workload, the pilot superseded by the census,
//! duplicates, and the comparison against the expected counts of `pipeline.yaml`.

use crate::attempt::AuditedAttempt;
use model::config::Expectations;
use model::{ClipReason, ExclusionReason, WorkloadId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An attempt as the duplicate rule sees it (its record is not needed).
#[derive(Debug, Clone, Copy)]
pub struct CopyKey<'a> {
    /// Workload.
    pub workload: WorkloadId,
    /// Attempt id.
    pub attempt_id: &'a str,
    /// Archive id.
    pub archive_id: &'a str,
    /// Attempt directory inside the archive.
    pub member_prefix: &'a str,
    /// A pilot attempt (pilots are superseded, never duplicates).
    pub pilot: bool,
}

impl<'a> CopyKey<'a> {
    /// The key of an audited attempt.
    pub fn of(a: &'a AuditedAttempt) -> Self {
        CopyKey {
            workload: a.workload,
            attempt_id: &a.attempt_id,
            archive_id: &a.archive_id,
            member_prefix: &a.member_prefix,
            pilot: a.is_pilot(),
        }
    }
}

/// The duplicate rule over the whole corpus: the same (workload, attempt id) twice among
/// non-pilot attempts. Every copy is excluded, since nothing tells which one is genuine.
/// `keys` come in corpus order; the result maps a key's position to the exclusion's detail,
/// which lists the copies in that order.
pub fn duplicate_details<'a>(
    keys: impl IntoIterator<Item = CopyKey<'a>>,
) -> BTreeMap<usize, String> {
    let mut seen: BTreeMap<(WorkloadId, &'a str), Vec<(usize, CopyKey<'a>)>> = BTreeMap::new();
    for (i, k) in keys.into_iter().enumerate() {
        if !k.pilot {
            seen.entry((k.workload, k.attempt_id))
                .or_default()
                .push((i, k));
        }
    }
    let mut duplicate_of: BTreeMap<usize, String> = BTreeMap::new();
    for copies in seen.values().filter(|v| v.len() > 1) {
        let places: Vec<String> = copies
            .iter()
            .map(|(_, k)| format!("{}:{}", k.archive_id, k.member_prefix))
            .collect();
        for (i, k) in copies {
            duplicate_of.insert(
                *i,
                format!(
                    "attempt id `{}` appears {} times: {}",
                    k.attempt_id,
                    copies.len(),
                    places.join(", ")
                ),
            );
        }
    }
    duplicate_of
}

/// Apply the cohort rules to every attempt (all workloads), setting `exclusion` and `flag`.
///
/// Precedence: `superseded_by_census` > `duplicate_attempt` > `missing_file` /
/// `malformed_record` > the workload's own rule.
pub fn apply_cohort_rules(attempts: &mut [AuditedAttempt]) {
    let duplicate_of = duplicate_details(attempts.iter().map(CopyKey::of));
    for (i, a) in attempts.iter_mut().enumerate() {
        apply_rules(a, duplicate_of.get(&i).map(String::as_str));
    }
}

/// The cohort rules for one attempt, given the duplicate rule's detail for it (from
/// [`duplicate_details`] over the whole corpus).
pub fn apply_rules(a: &mut AuditedAttempt, duplicate: Option<&str>) {
    let prefix = a.member_prefix.clone();
    a.flag = None;
    a.exclusion = if a.is_pilot() {
        Some((
            ExclusionReason::SupersededByCensus,
            "pilot attempt; the census supersedes the pilot".to_string(),
            prefix,
        ))
    } else if let Some(d) = duplicate {
        Some((ExclusionReason::DuplicateAttempt, d.to_string(), prefix))
    } else if let Some(p) = &a.problem {
        Some(p.clone())
    } else {
        workload_rule(a)
    };
    if a.exclusion.is_none()
        && let Some(r) = &a.result
        && r.termination.as_deref() == Some("llm_query_error")
    {
        a.flag = Some("llm_query_error".into());
    }
}

fn workload_rule(a: &AuditedAttempt) -> Option<(ExclusionReason, String, String)> {
    let r = a.result.as_ref()?;
    let result_member = a.member_prefix.clone();
    match a.workload {
        WorkloadId::Tmax => {
            if let Some(e) = &r.exception {
                return Some((
                    ExclusionReason::ExecutionException,
                    e.detail(),
                    result_member,
                ));
            }
            if a.gen_end.is_none() {
                // Not a rule of the study; a trial without completed_utc cannot be replayed.
                return Some((
                    ExclusionReason::InfrastructureFailure,
                    "no completed_utc (generation never completed)".into(),
                    result_member,
                ));
            }
            None
        }
        WorkloadId::Deepswe => match (&r.infra_error, a.gen_end) {
            (Some(e), _) => Some((
                ExclusionReason::InfrastructureFailure,
                format!("infra_error: {e}"),
                result_member,
            )),
            (None, None) => Some((
                ExclusionReason::InfrastructureFailure,
                "no completed_utc (generation never completed)".into(),
                result_member,
            )),
            (None, Some(_)) => None,
        },
    }
}

/// Seconds removed and rows per clipping reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClipSummary {
    /// Rows.
    pub rows: u64,
    /// Seconds removed.
    pub seconds_removed: f64,
}

/// The cohort audit of one workload (a section of `audit.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadAudit {
    /// Census attempts audited (pilot attempts not counted).
    pub audited: u64,
    /// In the cohort.
    pub included: u64,
    /// Census exclusions (pilot not counted here).
    pub excluded: u64,
    /// Exclusions by reason, the pilot's `superseded_by_census` included.
    pub excluded_by_reason: BTreeMap<String, u64>,
    /// Pilot attempts superseded by the census.
    pub pilot: u64,
    /// Kept but flagged: attempt id -> why.
    pub flagged: BTreeMap<String, String>,
    /// tmax: included trials whose reward is 0 (wrong answers stay in the cohort).
    pub wrong_answers: u64,
    /// Clipping rows by reason (all attempts of the workload, pilot and excluded too).
    pub clipping: BTreeMap<String, ClipSummary>,
    /// What `pipeline.yaml` expects.
    pub expected: Option<Expectations>,
    /// Each difference from the expectation, in words.
    pub differences: Vec<String>,
    /// No differences.
    pub pass: bool,
}

/// A difference per key whose count differs between `expected` (complete) and `found`:
/// `{w}: excluded {reason}: found {n}, expected {m}`.
fn compare_by_key(
    differences: &mut Vec<String>,
    w: WorkloadId,
    what: &str,
    expected: &BTreeMap<String, u64>,
    found: &BTreeMap<String, u64>,
) {
    let keys: std::collections::BTreeSet<&String> = expected.keys().chain(found.keys()).collect();
    for k in keys {
        let (e, f) = (
            expected.get(k).copied().unwrap_or(0),
            found.get(k).copied().unwrap_or(0),
        );
        if e != f {
            differences.push(format!("{w}: {what} {k}: found {f}, expected {e}"));
        }
    }
}

/// One workload's cohort audit, counted attempt by attempt (in the frames' row order, so the
/// sums of clipped seconds come out the same however the attempts were read).
#[derive(Debug, Clone)]
pub struct WorkloadTally {
    workload: WorkloadId,
    s: WorkloadAudit,
}

impl WorkloadTally {
    /// Nothing counted yet.
    pub fn new(workload: WorkloadId) -> Self {
        let mut s = WorkloadAudit::default();
        for r in ClipReason::ALL {
            s.clipping.insert(r.as_str().into(), ClipSummary::default());
        }
        WorkloadTally { workload, s }
    }

    /// Count one attempt (one of another workload is ignored).
    pub fn add(&mut self, a: &AuditedAttempt) {
        if a.workload != self.workload {
            return;
        }
        let s = &mut self.s;
        for c in &a.requests.records {
            let e = s.clipping.entry(c.reason.as_str().into()).or_default();
            e.rows += 1;
            e.seconds_removed += c.seconds_removed;
        }
        if let Some((reason, _, _)) = &a.exclusion {
            *s.excluded_by_reason
                .entry(reason.as_str().into())
                .or_default() += 1;
        }
        if a.is_pilot() {
            s.pilot += 1;
            return;
        }
        s.audited += 1;
        match &a.exclusion {
            None => {
                s.included += 1;
                if let Some(f) = &a.flag {
                    s.flagged.insert(a.attempt_id.clone(), f.clone());
                }
                if a.result.as_ref().and_then(|r| r.reward) == Some(0.0) {
                    s.wrong_answers += 1;
                }
            }
            Some(_) => s.excluded += 1,
        }
    }

    /// The workload's audit, compared with its expectations.
    pub fn finish(self, expected: Option<Expectations>) -> WorkloadAudit {
        let w = self.workload;
        let mut s = self.s;
        s.expected = expected.clone();
        if let Some(e) = &expected {
            if s.audited != e.audited {
                s.differences.push(format!(
                    "{w}: audited {} attempts, expected {}",
                    s.audited, e.audited
                ));
            }
            if s.included != e.included {
                s.differences.push(format!(
                    "{w}: included {} attempts, expected {}",
                    s.included, e.included
                ));
            }
            if let Some(p) = e.pilot
                && s.pilot != p
            {
                s.differences.push(format!(
                    "{w}: found {} pilot attempts, expected {p}",
                    s.pilot
                ));
            }
            if let Some(expected) = &e.excluded {
                // Census exclusions only: the pilot's `superseded_by_census` is `pilot`'s.
                let found: BTreeMap<String, u64> = s
                    .excluded_by_reason
                    .iter()
                    .filter(|(r, _)| r.as_str() != ExclusionReason::SupersededByCensus.as_str())
                    .map(|(r, n)| (r.clone(), *n))
                    .collect();
                let expected: BTreeMap<String, u64> = expected
                    .iter()
                    .map(|(r, n)| (r.as_str().to_string(), *n))
                    .collect();
                compare_by_key(&mut s.differences, w, "excluded", &expected, &found);
            }
            if let Some(expected) = &e.flagged {
                let mut found: BTreeMap<String, u64> = BTreeMap::new();
                for kind in s.flagged.values() {
                    *found.entry(kind.clone()).or_default() += 1;
                }
                compare_by_key(&mut s.differences, w, "flagged", expected, &found);
            }
        }
        s.pass = s.differences.is_empty();
        s
    }
}
