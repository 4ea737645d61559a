//! `audit show`: one attempt re-derived from its verified archive by the audit's own code,
//! with the archive evidence behind every figure, and checked against the audit's frames.
//!
//! The attempt is found in `attempts.parquet` ([`crate::extract::find_attempt`]); its one
//! archive is streamed and re-verified ([`crate::archive::scan_archive`]: SHA256 and size
//! against the manifest, as the audit does); every member goes through the audit's
//! [`AttemptCollector`], the attempt's evidence through [`audit_attempt`], and the cohort
//! rules through [`cohort::apply_cohort_rules`] with the attempt's other copies (same
//! workload and id) taken from `attempts.parquet`. The re-derived attempt is turned into
//! frame rows by the writer's own builders ([`crate::output`]) and compared value by value
//! with its rows in `attempts`, `requests`, `clipping` and `exclusions.parquet`.

use crate::archive::{ArchiveLimits, MemberKind, scan_archive};
use crate::attempt::{
    AttemptCollector, AuditedAttempt, LayoutMatcher, MemberRole, audit_attempt, parse_timer_lines,
};
use crate::error::AuditError;
use crate::extract::{AttemptRow, attempt_rows, find_attempt};
use crate::intervals::{ClipRecord, RequestPiece, RequestReconstruction};
use crate::{cohort, output, schema};
use frames::schema::FrameSpec;
use model::run_dir::{FRAME_SCHEMA_VERSION, JSON_FORMAT_VERSION, RunDir};
use model::{LoadedConfig, RunKind, WorkloadId};
use polars::prelude::{AnyValue, BooleanChunked, DataFrame, NewChunkedArray};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// What `audit show` prints for one attempt (`--json`: this document; `schemas/show.schema.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowDocument {
    /// Version of this document's layout.
    pub format_version: u32,
    /// Attempt (trial) id, from the attempt directory.
    pub attempt_id: String,
    /// `tmax` or `deepswe`.
    pub workload: String,
    /// Task id (identity file, else the directory).
    pub task_id: Option<String>,
    /// `census` or `pilot` (null when the identity file is unreadable).
    pub run: Option<String>,
    /// Manifest id of the archive the attempt was read from.
    pub archive_id: String,
    /// Its SHA256, re-verified while the archive was streamed.
    pub archive_sha256: String,
    /// The attempt directory inside the archive.
    pub member_prefix: String,
    /// The generation lifetime and the members it comes from.
    pub lifetime: ShowLifetime,
    /// In the workload's cohort.
    pub included: bool,
    /// Why not (null when included).
    pub exclusion_reason: Option<String>,
    /// The exclusion's detail, as in `exclusions.parquet`.
    pub exclusion_detail: Option<String>,
    /// The member (or attempt directory) that shows the exclusion.
    pub exclusion_member: Option<String>,
    /// deepswe: the result's `termination` as written.
    pub termination: Option<String>,
    /// Why the attempt is kept but flagged (`llm_query_error`), else null.
    pub flag_reason: Option<String>,
    /// A pilot attempt, superseded by the census.
    pub superseded_by_census: bool,
    /// The other copies of this (workload, attempt id), as `archive_id:member_prefix`
    /// (from `attempts.parquet`); two or more census copies make every copy a duplicate.
    pub duplicates: Vec<String>,
    /// Request-start files found.
    pub request_start_files: u32,
    /// One entry per kept request interval (clipped, merged), in start order.
    pub requests: Vec<ShowRequest>,
    /// The requests were reconstructed: the generation start and the timers file (an
    /// absent one is no timers) are readable. When not, the attempt has no rows in
    /// `requests` or `clipping.parquet` and `unplaced` lists what was found, without offsets.
    pub reconstructed: bool,
    /// Requests with no kept interval: dropped by clipping, orphan timers, a missing timer
    /// without a generation end; every request-start file and timer line found when the
    /// requests were not reconstructed.
    pub unplaced: Vec<RequestEvidence>,
    /// Every clipping record of the attempt, in the order of `clipping.parquet`.
    pub clipping: Vec<ShowClip>,
    /// The re-derived attempt equals its rows in the frames.
    pub consistent: bool,
    /// Each difference between the frames and the re-derivation, in words.
    pub differences: Vec<String>,
}

/// The generation lifetime and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowLifetime {
    /// The identity file's member path.
    pub identity_member: String,
    /// Its mtime as written in the archive (the PAX `mtime` value, else the ustar seconds);
    /// null when the file is missing.
    pub identity_mtime: Option<String>,
    /// The result file's member path.
    pub result_member: String,
    /// `completed_utc` as written (null when missing or the result is unreadable).
    pub completed_utc: Option<String>,
    /// Generation start, UTC epoch seconds (`attempts.gen_start`).
    pub gen_start: Option<f64>,
    /// Generation end, UTC epoch seconds (`attempts.gen_end`).
    pub gen_end: Option<f64>,
    /// `gen_end - gen_start`, seconds.
    pub duration_s: Option<f64>,
}

/// One kept request interval (a row of `requests.parquet`) and how it was built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowRequest {
    /// Position among the attempt's kept intervals, from 1.
    pub line: usize,
    /// Request sequence numbers merged into it.
    pub seqs: Vec<u64>,
    /// Start, seconds after gen_start.
    pub start_offset_s: f64,
    /// End (exclusive), seconds after gen_start.
    pub end_offset_s: f64,
    /// `end_offset_s - start_offset_s`.
    pub length_s: f64,
    /// Each request merged into it, with its archive evidence.
    pub evidence: Vec<RequestEvidence>,
}

/// One request (one seq): the members it comes from and its interval before and after
/// clipping (before merging), as offsets after gen_start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestEvidence {
    /// Sequence number.
    pub seq: u64,
    /// The request-start member (null for an orphan timer).
    pub start_member: Option<String>,
    /// Its mtime as written in the archive.
    pub start_mtime: Option<String>,
    /// The timer record paired with it (null for a missing timer).
    pub timer: Option<TimerEvidence>,
    /// Start as recorded, seconds after gen_start.
    pub raw_start_offset_s: Option<f64>,
    /// End as recorded (start + timer, or the generation end for a missing timer).
    pub raw_end_offset_s: Option<f64>,
    /// `raw_end_offset_s - raw_start_offset_s`.
    pub raw_length_s: Option<f64>,
    /// Start after clipping to the lifetime (null when dropped).
    pub clipped_start_offset_s: Option<f64>,
    /// End after clipping to the lifetime (null when dropped).
    pub clipped_end_offset_s: Option<f64>,
    /// `clipped_end_offset_s - clipped_start_offset_s`.
    pub clipped_length_s: Option<f64>,
    /// The clipping records (their `index`) that concern this request.
    pub clipping: Vec<usize>,
}

/// A line of the timers file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimerEvidence {
    /// The timers file's member path.
    pub member: String,
    /// Line number, from 1.
    pub line: usize,
    /// The line as written.
    pub record: String,
    /// Its `elapsed_ns`.
    pub elapsed_ns: u64,
}

/// One clipping record (a row of `clipping.parquet`) and the request lines it touched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowClip {
    /// Position among the attempt's clipping records, from 1.
    pub index: usize,
    /// `missing_timer`, `orphan_timer`, `before_generation_start`, `after_generation_end`,
    /// `outside_generation` or `merged_overlap`.
    pub reason: String,
    /// Request sequence numbers concerned.
    pub seqs: Vec<u64>,
    /// Interval start before the change, UTC epoch seconds (null for an orphan timer).
    pub raw_start: Option<f64>,
    /// Interval end before the change (null for an orphan timer, or a missing timer
    /// without generation end).
    pub raw_end: Option<f64>,
    /// Interval start after the change (null when dropped).
    pub kept_start: Option<f64>,
    /// Interval end after the change (null when dropped).
    pub kept_end: Option<f64>,
    /// Request seconds removed by this change.
    pub seconds_removed: f64,
    /// The kept request intervals (their `line`) it touched; empty when it dropped the
    /// request.
    pub request_lines: Vec<usize>,
}

/// What the scan noted about the attempt's members, beside the audit's own collection.
#[derive(Debug, Default)]
struct MemberNotes {
    identity_mtime: Option<String>,
    /// seq -> (member path, mtime as written).
    starts: BTreeMap<u64, (String, String)>,
}

/// Re-derive one attempt from its archive and compare it with the frames. An unknown or
/// ambiguous id is refused with [`AuditError::Lookup`]; an archive that fails verification
/// fails as the audit does. A difference from the frames is no error: it is in
/// `differences` (and `consistent` is false).
pub fn show_attempt(
    cfg: &LoadedConfig,
    attempt_id: &str,
    workload: Option<&str>,
    archive: Option<&str>,
) -> Result<ShowDocument, AuditError> {
    let row = find_attempt(cfg, attempt_id, workload, archive)?;
    let spec = cfg
        .archives
        .iter()
        .find(|a| a.archive_id == row.archive_id)
        .ok_or_else(|| {
            AuditError::Show(format!(
                "attempts.parquet names archive `{}`, which is not in the manifest",
                row.archive_id
            ))
        })?;
    let layout = cfg
        .layout(spec.workload)
        .expect("config validation ties archives to configured workloads");
    let run = RunDir::new(&cfg.run_dir);
    let path = run.stored_archive(&spec.sha256);
    if !path.is_file() {
        return Err(AuditError::NotInStore {
            archive_id: spec.archive_id.clone(),
            path,
        });
    }
    let limits = ArchiveLimits::of(cfg);
    // Every member goes to the audit's collector (the archive's refusals are the audit's);
    // the attempt's own members are also noted with their mtimes as written.
    let matcher = LayoutMatcher::new(&layout);
    let mut collector = AttemptCollector::new(&layout);
    let mut notes = MemberNotes::default();
    scan_archive(
        &path,
        &spec.archive_id,
        &spec.sha256,
        spec.bytes,
        limits,
        |m, data| {
            if m.kind == MemberKind::File
                && let Some(loc) = matcher.locate(&m.path)
                && loc.dir == row.member_prefix
            {
                match matcher.role(&loc.relative) {
                    MemberRole::Identity => notes.identity_mtime = Some(m.mtime_text.clone()),
                    MemberRole::RequestStart(Ok(seq)) => {
                        notes
                            .starts
                            .insert(seq, (m.path.clone(), m.mtime_text.clone()));
                    }
                    _ => {}
                }
            }
            collector
                .visit(m, data)
                .map_err(|r| r.into_error(&spec.archive_id))
        },
    )?;
    let ev = collector
        .finish()
        .into_iter()
        .find(|e| e.dir == row.member_prefix)
        .ok_or_else(|| {
            AuditError::Show(format!(
                "archive `{}` holds no attempt directory `{}`, which attempts.parquet names",
                spec.archive_id, row.member_prefix
            ))
        })?;
    let timers_member = format!("{}{}", ev.dir, layout.timers);
    let timer_text = ev.timers.clone();
    let target = audit_attempt(spec.workload, &layout, &spec.archive_id, &spec.sha256, ev);
    // The cohort rules over this attempt and its other copies (duplicates and pilot
    // precedence need them); only this attempt's outcome is used.
    let others: Vec<AttemptRow> = attempt_rows(cfg, attempt_id)?
        .into_iter()
        .filter(|r| r.workload == row.workload)
        .filter(|r| (&r.archive_id, &r.member_prefix) != (&row.archive_id, &row.member_prefix))
        .collect();
    let mut group = vec![target];
    group.extend(others.iter().map(|r| copy_of(spec.workload, r)));
    // In the audit's order (archives in manifest order, then attempt directories), which
    // is the order a duplicate's detail lists the copies in.
    let manifest_position = |id: &str| cfg.archives.iter().position(|a| a.archive_id == id);
    group.sort_by(|x, y| {
        (manifest_position(&x.archive_id), &x.member_prefix)
            .cmp(&(manifest_position(&y.archive_id), &y.member_prefix))
    });
    cohort::apply_cohort_rules(&mut group);
    let a = group
        .into_iter()
        .find(|x| (&x.archive_id, &x.member_prefix) == (&row.archive_id, &row.member_prefix))
        .expect("the attempt itself");

    let parsed = timer_text
        .as_deref()
        .map(|b| parse_timer_lines(b, &timers_member));
    // The audit reconstructs the requests when the generation start and the timers file
    // (an absent one is no timers) are readable.
    let reconstructed = a.gen_start.is_some() && !matches!(parsed, Some(Err(_)));
    let timers = parsed.and_then(Result::ok).unwrap_or_default();
    let timer_evidence = |seq: u64| {
        let (elapsed_ns, line) = *timers.get(&seq)?;
        let text = std::str::from_utf8(timer_text.as_deref()?).ok()?;
        Some(TimerEvidence {
            member: timers_member.clone(),
            line,
            record: text.lines().nth(line - 1)?.to_string(),
            elapsed_ns,
        })
    };
    let gs = a.gen_start.map(|t| t.seconds);
    let records = &a.requests.records;
    let clip_refs = |seq: u64| -> Vec<usize> {
        records
            .iter()
            .enumerate()
            .filter(|(_, c)| c.seqs.contains(&seq))
            .map(|(i, _)| i + 1)
            .collect()
    };
    let evidence = |p: &RequestPiece| {
        let off = |x: f64| x - gs.expect("pieces exist only with a generation start");
        let raw_end = p.raw.and_then(|r| r.1);
        let (start_member, start_mtime) = notes
            .starts
            .get(&p.seq)
            .cloned()
            .map_or((None, None), |(m, t)| (Some(m), Some(t)));
        RequestEvidence {
            seq: p.seq,
            start_member,
            start_mtime,
            timer: timer_evidence(p.seq),
            raw_start_offset_s: p.raw.map(|r| off(r.0)),
            raw_end_offset_s: raw_end.map(off),
            raw_length_s: p.raw.and_then(|(s, e)| Some(e? - s)),
            clipped_start_offset_s: p.clipped.map(|c| off(c.0)),
            clipped_end_offset_s: p.clipped.map(|c| off(c.1)),
            clipped_length_s: p.clipped.map(|(s, e)| e - s),
            clipping: clip_refs(p.seq),
        }
    };
    let RequestReconstruction {
        intervals, pieces, ..
    } = &a.requests;
    let requests: Vec<ShowRequest> = intervals
        .iter()
        .enumerate()
        .map(|(i, iv)| {
            let gs = gs.expect("intervals exist only with a generation start");
            ShowRequest {
                line: i + 1,
                seqs: iv.seqs.clone(),
                start_offset_s: iv.start - gs,
                end_offset_s: iv.end - gs,
                length_s: (iv.end - gs) - (iv.start - gs),
                evidence: pieces
                    .iter()
                    .filter(|p| iv.seqs.contains(&p.seq))
                    .map(evidence)
                    .collect(),
            }
        })
        .collect();
    let unplaced: Vec<RequestEvidence> = if reconstructed {
        pieces
            .iter()
            .filter(|p| p.clipped.is_none())
            .map(evidence)
            .collect()
    } else {
        // Nothing was reconstructed: every start file and readable timer line, without
        // offsets.
        let mut seqs: Vec<u64> = notes.starts.keys().chain(timers.keys()).copied().collect();
        seqs.sort_unstable();
        seqs.dedup();
        seqs.into_iter()
            .map(|seq| {
                let (start_member, start_mtime) = notes
                    .starts
                    .get(&seq)
                    .cloned()
                    .map_or((None, None), |(m, t)| (Some(m), Some(t)));
                RequestEvidence {
                    seq,
                    start_member,
                    start_mtime,
                    timer: timer_evidence(seq),
                    raw_start_offset_s: None,
                    raw_end_offset_s: None,
                    raw_length_s: None,
                    clipped_start_offset_s: None,
                    clipped_end_offset_s: None,
                    clipped_length_s: None,
                    clipping: Vec::new(),
                }
            })
            .collect()
    };
    let clipping: Vec<ShowClip> = records
        .iter()
        .enumerate()
        .map(|(i, c)| show_clip(i + 1, c, &requests))
        .collect();
    let differences = compare_with_frames(&run, &a)?;
    Ok(ShowDocument {
        format_version: JSON_FORMAT_VERSION,
        attempt_id: a.attempt_id.clone(),
        workload: a.workload.as_str().to_string(),
        task_id: a.task_id.clone(),
        run: a.run.map(|r| r.as_str().to_string()),
        archive_id: a.archive_id.clone(),
        archive_sha256: a.archive_sha256.clone(),
        member_prefix: a.member_prefix.clone(),
        lifetime: ShowLifetime {
            identity_member: format!("{}{}", a.member_prefix, layout.identity),
            identity_mtime: notes.identity_mtime.clone(),
            result_member: format!("{}{}", a.member_prefix, layout.result),
            completed_utc: a.result.as_ref().and_then(|r| r.completed_utc.clone()),
            gen_start: gs,
            gen_end: a.gen_end.map(|t| t.seconds),
            duration_s: a.duration(),
        },
        included: a.exclusion.is_none(),
        exclusion_reason: a.exclusion.as_ref().map(|e| e.0.as_str().to_string()),
        exclusion_detail: a.exclusion.as_ref().map(|e| e.1.clone()),
        exclusion_member: a.exclusion.as_ref().map(|e| e.2.clone()),
        termination: a.result.as_ref().and_then(|r| r.termination.clone()),
        flag_reason: a.flag.clone(),
        superseded_by_census: a.is_pilot(),
        duplicates: others
            .iter()
            .map(|r| format!("{}:{}", r.archive_id, r.member_prefix))
            .collect(),
        request_start_files: a.n_requests,
        requests,
        reconstructed,
        unplaced,
        clipping,
        consistent: differences.is_empty(),
        differences,
    })
}

/// Another copy of the attempt as the cohort rules need it: its identity and place, from
/// its row of `attempts.parquet`.
fn copy_of(workload: WorkloadId, r: &AttemptRow) -> AuditedAttempt {
    AuditedAttempt {
        workload,
        task_id: None,
        attempt_id: r.attempt_id.clone(),
        run: match r.run.as_deref() {
            Some("census") => Some(RunKind::Census),
            Some("pilot") => Some(RunKind::Pilot),
            _ => None,
        },
        archive_id: r.archive_id.clone(),
        archive_sha256: String::new(),
        member_prefix: r.member_prefix.clone(),
        gen_start: None,
        gen_end: None,
        n_requests: 0,
        quota: None,
        blobs: Vec::new(),
        result: None,
        requests: RequestReconstruction::default(),
        n_intervals: 0,
        request_s: 0.0,
        problem: None,
        exclusion: None,
        flag: None,
    }
}

fn show_clip(index: usize, c: &ClipRecord, requests: &[ShowRequest]) -> ShowClip {
    ShowClip {
        index,
        reason: c.reason.as_str().to_string(),
        seqs: c.seqs.clone(),
        raw_start: c.raw.map(|r| r.0),
        raw_end: c.raw.and_then(|r| r.1),
        kept_start: c.kept.map(|k| k.0),
        kept_end: c.kept.map(|k| k.1),
        seconds_removed: c.seconds_removed,
        request_lines: requests
            .iter()
            .filter(|r| r.seqs.iter().any(|s| c.seqs.contains(s)))
            .map(|r| r.line)
            .collect(),
    }
}

/// The attempt's rows of one stored frame: those whose key columns hold these values
/// (`prefix_of` names a column whose value must start with the member prefix instead).
fn stored_rows(
    run: &RunDir,
    spec: &'static FrameSpec,
    keys: &[(&str, &str)],
    prefix_of: Option<(&str, &str)>,
) -> Result<DataFrame, AuditError> {
    let p = run.file(&spec.parquet_file());
    let df = frames::read_declared(&p, spec, FRAME_SCHEMA_VERSION)?;
    let mut mask = vec![true; df.height()];
    for (col, want) in keys {
        let v = frames::str_values(&df, &p, col)?;
        for (m, v) in mask.iter_mut().zip(&v) {
            *m &= v.as_deref() == Some(*want);
        }
    }
    if let Some((col, prefix)) = prefix_of {
        let v = frames::str_values(&df, &p, col)?;
        for (m, v) in mask.iter_mut().zip(&v) {
            *m &= v.as_deref().is_some_and(|v| v.starts_with(prefix));
        }
    }
    df.filter(&BooleanChunked::from_slice("attempt".into(), &mask))
        .map_err(|e| {
            AuditError::Show(format!(
                "{}: cannot select the attempt's rows: {e}",
                p.display()
            ))
        })
}

fn same(a: &AnyValue, b: &AnyValue) -> bool {
    match (a, b) {
        (AnyValue::Float64(x), AnyValue::Float64(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    }
}

fn value_text(v: &AnyValue) -> String {
    match v {
        AnyValue::Null => "null".into(),
        AnyValue::Float64(x) => format!("{x}"),
        AnyValue::String(s) => format!("`{s}`"),
        AnyValue::StringOwned(s) => format!("`{s}`"),
        v => format!("{v}"),
    }
}

/// Compare the frame rows `derived` (built by the writer's code) with `stored`, column by
/// column as declared; each difference in words.
fn compare_rows(spec: &FrameSpec, stored: &DataFrame, derived: &DataFrame, out: &mut Vec<String>) {
    let file = spec.parquet_file();
    if stored.height() != derived.height() {
        out.push(format!(
            "{file} holds {} rows for this attempt; the archive gives {}",
            stored.height(),
            derived.height()
        ));
    }
    for c in spec.columns {
        let (Ok(s), Ok(d)) = (stored.column(c.name), derived.column(c.name)) else {
            out.push(format!("{file}: column `{}` is missing", c.name));
            continue;
        };
        for i in 0..stored.height().min(derived.height()) {
            let (Ok(sv), Ok(dv)) = (s.get(i), d.get(i)) else {
                continue;
            };
            if !same(&sv, &dv) {
                out.push(format!(
                    "{file} row {} of this attempt, `{}`: the frame has {}, the archive gives {}",
                    i + 1,
                    c.name,
                    value_text(&sv),
                    value_text(&dv)
                ));
            }
        }
    }
}

/// [`compare_rows`] for a frame that holds `copies` identical sets of the attempt's rows
/// (one per archive id with these bytes): each set is compared with `derived`.
fn compare_copies(
    spec: &FrameSpec,
    stored: &DataFrame,
    derived: &DataFrame,
    copies: usize,
    out: &mut Vec<String>,
) {
    let n = derived.height();
    if copies < 2 || stored.height() != copies * n {
        compare_rows(spec, stored, derived, out);
        return;
    }
    for k in 0..copies {
        compare_rows(spec, &stored.slice((k * n) as i64, n), derived, out);
    }
}

/// Every difference between the attempt's rows in the frames and the same rows built from
/// the re-derived attempt by the audit's writer.
fn compare_with_frames(run: &RunDir, a: &AuditedAttempt) -> Result<Vec<String>, AuditError> {
    use schema::{ATTEMPTS, CLIPPING, EXCLUSIONS, REQUESTS};
    let one = std::slice::from_ref(a);
    let w = a.workload.as_str();
    let by_archive = [
        (const { ATTEMPTS.column("workload") }, w),
        (
            const { ATTEMPTS.column("attempt_id") },
            a.attempt_id.as_str(),
        ),
        (
            const { ATTEMPTS.column("archive_id") },
            a.archive_id.as_str(),
        ),
        (
            const { ATTEMPTS.column("member_prefix") },
            a.member_prefix.as_str(),
        ),
    ];
    let by_sha = |spec: &FrameSpec| {
        [
            (spec.column("workload"), w),
            (spec.column("attempt_id"), a.attempt_id.as_str()),
            (spec.column("archive_sha256"), a.archive_sha256.as_str()),
            (spec.column("member_prefix"), a.member_prefix.as_str()),
        ]
    };
    let mut out = Vec::new();
    compare_rows(
        &ATTEMPTS,
        &stored_rows(run, &ATTEMPTS, &by_archive, None)?,
        &output::attempts_frame(one),
        &mut out,
    );
    // The per-request frames key an attempt by its bytes (archive SHA256 and member prefix),
    // not its archive id: the same bytes under several archive ids give one set of rows per
    // copy, identical, in a row.
    let copies = stored_rows(run, &ATTEMPTS, &by_sha(&ATTEMPTS), None)?
        .height()
        .max(1);
    compare_copies(
        &REQUESTS,
        &stored_rows(run, &REQUESTS, &by_sha(&REQUESTS), None)?,
        &output::requests_batch(one),
        copies,
        &mut out,
    );
    compare_copies(
        &CLIPPING,
        &stored_rows(run, &CLIPPING, &by_sha(&CLIPPING), None)?,
        &output::clipping_frame(one),
        copies,
        &mut out,
    );
    compare_rows(
        &EXCLUSIONS,
        &stored_rows(
            run,
            &EXCLUSIONS,
            &[
                (const { EXCLUSIONS.column("workload") }, w),
                (
                    const { EXCLUSIONS.column("attempt_id") },
                    a.attempt_id.as_str(),
                ),
                (
                    const { EXCLUSIONS.column("archive_id") },
                    a.archive_id.as_str(),
                ),
            ],
            Some((
                const { EXCLUSIONS.column("member_path") },
                a.member_prefix.as_str(),
            )),
        )?,
        &output::exclusions_frame(one),
        &mut out,
    );
    Ok(out)
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".to_string(), |v| v.to_string())
}

fn span(s: Option<f64>, e: Option<f64>) -> String {
    match (s, e) {
        (Some(s), Some(e)) => format!("[{s}, {e}) {} s", e - s),
        (Some(s), None) => format!("[{s}, no end)"),
        _ => "none".into(),
    }
}

fn seqs_text(seqs: &[u64]) -> String {
    seqs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn evidence_lines(s: &mut String, prefix: &str, reconstructed: bool, e: &RequestEvidence) {
    let rel = |m: &str| m.strip_prefix(prefix).unwrap_or(m).to_string();
    let start = match (&e.start_member, &e.start_mtime) {
        (Some(m), Some(t)) => format!("start {} mtime {t}", rel(m)),
        _ => "no start file".into(),
    };
    let timer = match &e.timer {
        Some(t) => format!("timer {}:{} {}", rel(&t.member), t.line, t.record),
        None => "no timer record".into(),
    };
    let _ = writeln!(s, "      seq {}: {start}; {timer}", e.seq);
    if !reconstructed {
        return;
    }
    let raw = span(e.raw_start_offset_s, e.raw_end_offset_s);
    let clipped = match (e.clipped_start_offset_s, e.clipped_end_offset_s) {
        (Some(a), Some(b)) if (Some(a), Some(b)) == (e.raw_start_offset_s, e.raw_end_offset_s) => {
            "not clipped".to_string()
        }
        (Some(a), Some(b)) => format!("clipped to {}", span(Some(a), Some(b))),
        _ => "dropped".into(),
    };
    let refs = if e.clipping.is_empty() {
        String::new()
    } else {
        format!(
            " (clipping {})",
            e.clipping
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    let _ = writeln!(s, "        raw {raw}, {clipped}{refs}");
}

/// The human rendering of a [`ShowDocument`] (what `audit show` prints without `--json`).
/// Offsets are seconds after gen_start; times are as written or UTC epoch seconds.
pub fn render_text(d: &ShowDocument) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "attempt {} ({}, task {}, run {})",
        d.attempt_id,
        d.workload,
        opt(&d.task_id),
        opt(&d.run)
    );
    let _ = writeln!(
        s,
        "  archive {} sha256 {} (re-verified)",
        d.archive_id, d.archive_sha256
    );
    let _ = writeln!(s, "  members {}", d.member_prefix);
    let l = &d.lifetime;
    let _ = writeln!(s, "lifetime");
    let _ = writeln!(
        s,
        "  start    {} = mtime {} of {}",
        opt(&l.gen_start),
        opt(&l.identity_mtime),
        l.identity_member
    );
    let _ = writeln!(
        s,
        "  end      {} = completed_utc {} in {}",
        opt(&l.gen_end),
        opt(&l.completed_utc),
        l.result_member
    );
    let _ = writeln!(s, "  duration {} s", opt(&l.duration_s));
    let _ = writeln!(s, "cohort");
    let _ = match &d.exclusion_reason {
        None => writeln!(s, "  included"),
        Some(r) => writeln!(
            s,
            "  excluded {r}: {} ({})",
            opt(&d.exclusion_detail),
            opt(&d.exclusion_member)
        ),
    };
    let _ = writeln!(
        s,
        "  termination {}; flagged {}; superseded by census {}; other copies {}",
        opt(&d.termination),
        opt(&d.flag_reason),
        if d.superseded_by_census { "yes" } else { "no" },
        if d.duplicates.is_empty() {
            "none".to_string()
        } else {
            d.duplicates.join(", ")
        }
    );
    let _ = writeln!(
        s,
        "requests ({} start files, {} kept intervals; offsets in seconds after start)",
        d.request_start_files,
        d.requests.len()
    );
    let reconstructed = d.reconstructed;
    for r in &d.requests {
        let _ = writeln!(
            s,
            "  #{} [{}, {}) {} s  seqs {}",
            r.line,
            r.start_offset_s,
            r.end_offset_s,
            r.length_s,
            seqs_text(&r.seqs)
        );
        for e in &r.evidence {
            evidence_lines(&mut s, &d.member_prefix, reconstructed, e);
        }
    }
    if !d.unplaced.is_empty() {
        let _ = writeln!(
            s,
            "  {}",
            if reconstructed {
                "without a kept interval"
            } else {
                "not reconstructed (no readable generation start or timers file)"
            }
        );
        for e in &d.unplaced {
            evidence_lines(&mut s, &d.member_prefix, reconstructed, e);
        }
    }
    let _ = writeln!(s, "clipping ({} record(s))", d.clipping.len());
    for c in &d.clipping {
        let off = |x: Option<f64>| l.gen_start.and_then(|g| Some(x? - g));
        let touched = if c.request_lines.is_empty() {
            "no kept interval".to_string()
        } else {
            c.request_lines
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            s,
            "  #{} {} seqs {}: raw {} -> kept {}, {} s removed -> requests {touched}",
            c.index,
            c.reason,
            seqs_text(&c.seqs),
            span(off(c.raw_start), off(c.raw_end)),
            match (c.kept_start, c.kept_end) {
                (Some(a), Some(b)) => span(off(Some(a)), off(Some(b))),
                _ => "dropped".into(),
            },
            c.seconds_removed
        );
    }
    let _ = writeln!(s, "consistency");
    if d.consistent {
        let _ = writeln!(
            s,
            "  attempts, requests, clipping and exclusions.parquet equal the archive's re-derivation"
        );
    } else {
        for x in &d.differences {
            let _ = writeln!(s, "  DIFFERS: {x}");
        }
    }
    s
}
