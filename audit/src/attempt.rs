//! Attempt reconstruction: match archive members to the layout, collect each attempt's
//! evidence, and derive its generation lifetime, requests and record problems.

use crate::archive::{Member, MemberKind, MemberTime, read_capped, resolve_link};
use crate::intervals::{RequestReconstruction, reconstruct};
use model::config::Layout;
use model::{
    BlobRef, ExclusionReason, GenerationLifetime, IdentityRecord, Quota, ResultFields, RunKind,
    TimerRecord, WorkloadId,
};
use std::collections::BTreeMap;

/// Largest identity, result or timers file read into memory.
pub const MAX_RECORD_BYTES: u64 = 64 * 1024 * 1024;

/// One path segment pattern: literal prefix, optional placeholder, literal suffix.
#[derive(Debug, Clone)]
struct SegmentPattern {
    prefix: String,
    placeholder: Option<Placeholder>,
    suffix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placeholder {
    Task,
    Attempt,
}

/// What a member is to its attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberRole {
    /// The identity file.
    Identity,
    /// The timers file.
    Timers,
    /// The result file.
    Result,
    /// A request-start file with its seq (or the bad seq text).
    RequestStart(Result<u64, String>),
    /// Anything the layout does not name.
    Other,
}

/// Matches member paths against a workload's attempt layout.
#[derive(Debug, Clone)]
pub struct LayoutMatcher {
    dir: Vec<SegmentPattern>,
    layout: Layout,
    start_prefix: String,
    start_suffix: String,
}

/// Where a member sits: its attempt directory and the ids the directory names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptLocation {
    /// The attempt directory, with a trailing `/`.
    pub dir: String,
    /// `{task_id}` from the directory, if the pattern has it.
    pub task_id: Option<String>,
    /// `{attempt_id}` from the directory.
    pub attempt_id: String,
    /// The member path relative to the attempt directory.
    pub relative: String,
}

impl LayoutMatcher {
    /// Compile a resolved layout.
    pub fn new(layout: &Layout) -> Self {
        let dir = layout
            .attempt_dir
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|seg| {
                for (ph, name) in [
                    (Placeholder::Task, "{task_id}"),
                    (Placeholder::Attempt, "{attempt_id}"),
                ] {
                    if let Some((p, s)) = seg.split_once(name) {
                        return SegmentPattern {
                            prefix: p.to_string(),
                            placeholder: Some(ph),
                            suffix: s.to_string(),
                        };
                    }
                }
                SegmentPattern {
                    prefix: seg.to_string(),
                    placeholder: None,
                    suffix: String::new(),
                }
            })
            .collect();
        let (start_prefix, start_suffix) = layout
            .request_start
            .split_once("{seq}")
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .unwrap_or_default();
        LayoutMatcher {
            dir,
            layout: layout.clone(),
            start_prefix,
            start_suffix,
        }
    }

    /// The attempt directory a member path lies in, if any.
    pub fn locate(&self, path: &str) -> Option<AttemptLocation> {
        let segs: Vec<&str> = path.split('/').collect();
        if segs.len() < self.dir.len() {
            return None;
        }
        let mut task_id = None;
        let mut attempt_id = None;
        for (seg, pat) in segs.iter().zip(&self.dir) {
            match pat.placeholder {
                None => {
                    if *seg != pat.prefix {
                        return None;
                    }
                }
                Some(ph) => {
                    let v = seg
                        .strip_prefix(pat.prefix.as_str())?
                        .strip_suffix(pat.suffix.as_str())?;
                    if v.is_empty() {
                        return None;
                    }
                    match ph {
                        Placeholder::Task => task_id = Some(v.to_string()),
                        Placeholder::Attempt => attempt_id = Some(v.to_string()),
                    }
                }
            }
        }
        let n = self.dir.len();
        let dir = segs[..n].join("/") + "/";
        Some(AttemptLocation {
            dir,
            task_id,
            attempt_id: attempt_id?,
            relative: segs[n..].join("/"),
        })
    }

    /// The role of a path relative to its attempt directory.
    pub fn role(&self, relative: &str) -> MemberRole {
        if relative == self.layout.identity {
            return MemberRole::Identity;
        }
        if relative == self.layout.timers {
            return MemberRole::Timers;
        }
        if relative == self.layout.result {
            return MemberRole::Result;
        }
        if let Some(mid) = relative
            .strip_prefix(self.start_prefix.as_str())
            .and_then(|r| r.strip_suffix(self.start_suffix.as_str()))
            && !mid.contains('/')
        {
            if !mid.is_empty() && mid.bytes().all(|b| b.is_ascii_digit()) {
                return MemberRole::RequestStart(
                    mid.parse::<u64>()
                        .map_err(|_| format!("sequence number `{mid}` is out of range")),
                );
            }
            return MemberRole::RequestStart(Err(format!(
                "`{relative}` has no decimal sequence number"
            )));
        }
        MemberRole::Other
    }
}

/// The evidence one attempt directory holds, as collected from the stream.
#[derive(Debug, Clone, Default)]
pub struct AttemptEvidence {
    /// The attempt directory.
    pub dir: String,
    /// Task id from the directory.
    pub dir_task_id: Option<String>,
    /// Attempt id from the directory.
    pub dir_attempt_id: String,
    /// Identity bytes and mtime.
    pub identity: Option<(Vec<u8>, Result<MemberTime, String>)>,
    /// Result bytes.
    pub result: Option<Vec<u8>>,
    /// Timers bytes.
    pub timers: Option<Vec<u8>>,
    /// seq -> start mtime.
    pub starts: BTreeMap<u64, f64>,
    /// Request-start files seen (including malformed ones).
    pub start_files: u32,
    /// Seqs whose start file exists but whose mtime cannot be read.
    pub unreadable_starts: std::collections::BTreeSet<u64>,
    /// Problems found while collecting (make the attempt a `malformed_record`).
    pub problems: Vec<String>,
}

/// Collects attempts from the members of one archive.
#[derive(Debug)]
pub struct AttemptCollector {
    matcher: LayoutMatcher,
    attempts: BTreeMap<String, AttemptEvidence>,
    order: Vec<String>,
}

/// A refused member (docs/FORMAT.md, "Container"): the archive must not be audited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedMember {
    /// Member path.
    pub member: String,
    /// Why.
    pub detail: String,
}

impl RefusedMember {
    /// The audit error naming the archive and the member.
    pub fn into_error(self, archive_id: &str) -> crate::AuditError {
        crate::AuditError::Archive {
            archive_id: archive_id.to_string(),
            member: Some(self.member),
            detail: self.detail,
        }
    }
}

impl AttemptCollector {
    /// A collector for one workload's layout.
    pub fn new(layout: &Layout) -> Self {
        AttemptCollector {
            matcher: LayoutMatcher::new(layout),
            attempts: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    /// Take one member.
    pub fn visit(&mut self, m: &Member, data: &mut dyn std::io::Read) -> Result<(), RefusedMember> {
        // Only a member inside an attempt directory, or the directory's own entry, belongs
        // to an attempt: a file or link named like an attempt directory (`tmax/notes.txt`,
        // `tmax/latest -> t1`) lies in no attempt directory, and the layout does not name it.
        let loc = self
            .matcher
            .locate(&m.path)
            .filter(|l| !l.relative.is_empty() || m.kind == MemberKind::Directory);
        if let MemberKind::Link { target, hard } = &m.kind {
            let base = if *hard {
                String::new()
            } else {
                m.path
                    .rsplit_once('/')
                    .map(|(d, _)| d.to_string())
                    .unwrap_or_default()
            };
            let resolved = resolve_link(&base, target);
            let refused = match (&resolved, &loc) {
                (None, Some(_)) => Some("leaves its attempt directory"),
                (None, None) => Some("leaves the archive"),
                (Some(r), Some(l)) if !format!("{r}/").starts_with(&l.dir) => {
                    Some("leaves its attempt directory")
                }
                (Some(_), _) => None,
            };
            if let Some(why) = refused {
                return Err(RefusedMember {
                    member: m.path.clone(),
                    detail: format!("refused member: link to `{target}` {why}"),
                });
            }
            // A link never stands in for a layout file.
            if let Some(l) = loc
                && self.matcher.role(&l.relative) != MemberRole::Other
            {
                let ev = self.evidence(&l);
                ev.problems
                    .push(format!("`{}` is a link, not a regular file", m.path));
            }
            return Ok(());
        }
        let Some(loc) = loc else { return Ok(()) };
        if m.kind == MemberKind::Directory {
            if loc.relative.is_empty() {
                self.evidence(&loc);
            }
            return Ok(());
        }
        let role = self.matcher.role(&loc.relative);
        let ev = self.evidence(&loc);
        let path = &m.path;
        match role {
            MemberRole::Other => {}
            MemberRole::Identity => {
                let bytes = read_capped(data, MAX_RECORD_BYTES);
                if ev.identity.is_some() {
                    ev.problems.push(format!("`{path}` appears twice"));
                }
                match bytes {
                    Ok(b) => ev.identity = Some((b, m.mtime.clone())),
                    Err(e) => ev.problems.push(format!("`{path}` {e}")),
                }
            }
            MemberRole::Result | MemberRole::Timers => {
                let bytes = read_capped(data, MAX_RECORD_BYTES);
                let slot = if role == MemberRole::Result {
                    &mut ev.result
                } else {
                    &mut ev.timers
                };
                if slot.is_some() {
                    ev.problems.push(format!("`{path}` appears twice"));
                }
                match bytes {
                    Ok(b) => *slot = Some(b),
                    Err(e) => ev.problems.push(format!("`{path}` {e}")),
                }
            }
            MemberRole::RequestStart(seq) => {
                ev.start_files += 1;
                match (seq, &m.mtime) {
                    (Ok(seq), Ok(t)) => {
                        if ev.starts.insert(seq, t.seconds).is_some()
                            || ev.unreadable_starts.contains(&seq)
                        {
                            ev.problems
                                .push(format!("request seq {seq} has two start files (`{path}`)"));
                        }
                    }
                    (Ok(seq), Err(e)) => {
                        // The start file exists: its timer is no orphan, but no interval
                        // can be placed (the attempt is a malformed_record).
                        if !ev.unreadable_starts.insert(seq) || ev.starts.contains_key(&seq) {
                            ev.problems
                                .push(format!("request seq {seq} has two start files (`{path}`)"));
                        }
                        ev.problems.push(format!("`{path}`: {e}"));
                    }
                    (Err(e), _) => ev.problems.push(e),
                }
            }
        }
        Ok(())
    }

    fn evidence(&mut self, loc: &AttemptLocation) -> &mut AttemptEvidence {
        if !self.attempts.contains_key(&loc.dir) {
            self.order.push(loc.dir.clone());
        }
        self.attempts
            .entry(loc.dir.clone())
            .or_insert_with(|| AttemptEvidence {
                dir: loc.dir.clone(),
                dir_task_id: loc.task_id.clone(),
                dir_attempt_id: loc.attempt_id.clone(),
                ..Default::default()
            })
    }

    /// The attempts found, in first-seen order.
    pub fn finish(mut self) -> Vec<AttemptEvidence> {
        self.order
            .iter()
            .filter_map(|d| self.attempts.remove(d))
            .collect()
    }
}

/// One attempt after reconstruction, before the cohort rules.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AuditedAttempt {
    /// Workload.
    pub workload: WorkloadId,
    /// Task id (identity, else directory).
    pub task_id: Option<String>,
    /// Attempt id (from the directory).
    pub attempt_id: String,
    /// Run, when the identity was readable.
    pub run: Option<RunKind>,
    /// Archive id.
    pub archive_id: String,
    /// Archive SHA256.
    pub archive_sha256: String,
    /// Attempt directory inside the archive.
    pub member_prefix: String,
    /// Identity mtime.
    pub gen_start: Option<MemberTime>,
    /// completed_utc as epoch seconds and nanoseconds.
    pub gen_end: Option<MemberTime>,
    /// Request-start files.
    pub n_requests: u32,
    /// Quota.
    pub quota: Option<Quota>,
    /// Image layers.
    pub blobs: Vec<BlobRef>,
    /// The result record, when readable (field by field; see `ResultFields`).
    pub result: Option<ResultFields>,
    /// Requests and clipping records. The intervals are released once written to the
    /// requests frame (the counts below keep what the attempts frame needs).
    pub requests: RequestReconstruction,
    /// Kept request intervals after clipping and merging.
    pub n_intervals: u32,
    /// Length of their union, seconds.
    pub request_s: f64,
    /// A structural problem: missing file or malformed record, with detail and member.
    pub problem: Option<(ExclusionReason, String, String)>,
    /// Cohort exclusion (set by the cohort rules).
    pub exclusion: Option<(ExclusionReason, String, String)>,
    /// Why the attempt is flagged while kept (e.g. `llm_query_error`).
    pub flag: Option<String>,
}

impl AuditedAttempt {
    /// A pilot attempt, superseded by the census. tmax has no pilot (always
    /// census): a tmax trial that says `pilot` is a malformed_record instead.
    pub fn is_pilot(&self) -> bool {
        self.run == Some(RunKind::Pilot) && self.workload != WorkloadId::Tmax
    }

    /// The fixed duration `d`, when both ends are known.
    pub fn duration(&self) -> Option<f64> {
        Some(self.gen_end?.seconds - self.gen_start?.seconds)
    }
}

/// Parse `completed_utc` (RFC 3339) to the nearest f64 epoch seconds and exact nanoseconds.
pub fn parse_completed_utc(s: &str) -> Result<MemberTime, String> {
    // RFC 3339 with an offset; a timestamp without one (as Python's naive isoformat()
    // writes) is taken as UTC, which the field's name promises.
    let dt = match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(dt) => dt.with_timezone(&chrono::Utc),
        Err(e) => chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
            .or_else(|_| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f"))
            .map(|n| n.and_utc())
            .map_err(|_| format!("completed_utc `{s}` is not RFC 3339: {e}"))?,
    };
    // chrono keeps a leap second (`23:59:60.5`) as a sub-second part of 1.5e9 ns: the exact
    // nanosecond count normalizes it (to the next minute's 0.5 s), and the f64 is the nearest
    // one to that count's decimal, so both columns name the same instant.
    let nanos = dt
        .timestamp()
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(dt.timestamp_subsec_nanos() as i64))
        .ok_or_else(|| format!("completed_utc `{s}` out of range"))?;
    let (sign, abs) = if nanos < 0 {
        ("-", -(nanos as i128))
    } else {
        ("", nanos as i128)
    };
    let text = format!("{sign}{}.{:09}", abs / 1_000_000_000, abs % 1_000_000_000);
    let seconds: f64 = text.parse().map_err(|_| format!("completed_utc `{s}`"))?;
    Ok(MemberTime { seconds, nanos })
}

/// The timers file, seq -> (elapsed nanoseconds, 1-based line number); a malformed line or
/// a seq twice is refused, naming the member and line.
pub fn parse_timer_lines(
    bytes: &[u8],
    member: &str,
) -> Result<BTreeMap<u64, (u64, usize)>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("`{member}` is not UTF-8"))?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let t: TimerRecord =
            serde_json::from_str(line).map_err(|e| format!("`{member}` line {}: {e}", i + 1))?;
        if out.insert(t.seq, (t.elapsed_ns, i + 1)).is_some() {
            return Err(format!(
                "`{member}` line {}: seq {} appears twice",
                i + 1,
                t.seq
            ));
        }
    }
    Ok(out)
}

fn parse_timers(bytes: &[u8], member: &str) -> Result<BTreeMap<u64, u64>, String> {
    Ok(parse_timer_lines(bytes, member)?
        .into_iter()
        .map(|(seq, (elapsed, _))| (seq, elapsed))
        .collect())
}

/// Reconstruct one attempt from its evidence.
pub fn audit_attempt(
    workload: WorkloadId,
    layout: &Layout,
    archive_id: &str,
    archive_sha256: &str,
    ev: AttemptEvidence,
) -> AuditedAttempt {
    let member = |f: &str| format!("{}{}", ev.dir, f);
    let mut a = AuditedAttempt {
        workload,
        task_id: ev.dir_task_id.clone(),
        attempt_id: ev.dir_attempt_id.clone(),
        run: None,
        archive_id: archive_id.to_string(),
        archive_sha256: archive_sha256.to_string(),
        member_prefix: ev.dir.clone(),
        gen_start: None,
        gen_end: None,
        n_requests: ev.start_files,
        quota: None,
        blobs: Vec::new(),
        result: None,
        requests: RequestReconstruction::default(),
        n_intervals: 0,
        request_s: 0.0,
        problem: None,
        exclusion: None,
        flag: None,
    };
    let mut malformed: Vec<(String, String)> = ev
        .problems
        .iter()
        .map(|p| (p.clone(), ev.dir.clone()))
        .collect();
    let mut missing: Vec<String> = Vec::new();
    // Identity.
    match &ev.identity {
        None => missing.push(member(&layout.identity)),
        Some((bytes, mtime)) => {
            let path = member(&layout.identity);
            match mtime {
                Ok(t) => a.gen_start = Some(*t),
                Err(e) => malformed.push((format!("`{path}`: {e}"), path.clone())),
            }
            match serde_json::from_slice::<IdentityRecord>(bytes) {
                Err(e) => malformed.push((format!("`{path}`: {e}"), path.clone())),
                Ok(id) => {
                    if id.attempt_id != ev.dir_attempt_id {
                        malformed.push((
                            format!(
                                "`{path}`: attempt_id `{}` disagrees with its directory `{}`",
                                id.attempt_id, ev.dir_attempt_id
                            ),
                            path.clone(),
                        ));
                    }
                    if let Some(t) = &ev.dir_task_id
                        && *t != id.task_id
                    {
                        malformed.push((
                            format!(
                                "`{path}`: task_id `{}` disagrees with its directory `{t}`",
                                id.task_id
                            ),
                            path.clone(),
                        ));
                    }
                    if !(id.quota.cores.is_finite()
                        && id.quota.cores >= 0.0
                        && id.quota.mem_gib.is_finite()
                        && id.quota.mem_gib >= 0.0)
                    {
                        malformed.push((
                            format!("`{path}`: quota must be non-negative numbers"),
                            path.clone(),
                        ));
                    }
                    if workload == WorkloadId::Tmax && id.run == RunKind::Pilot {
                        // A tmax trial is always census; there is no tmax pilot.
                        malformed.push((
                            format!("`{path}`: run `pilot`, but tmax trials are always census"),
                            path.clone(),
                        ));
                    }
                    a.task_id = Some(id.task_id);
                    a.run = Some(id.run);
                    a.quota = Some(id.quota);
                    a.blobs = id.image.blobs;
                }
            }
        }
    }
    // Result.
    match &ev.result {
        None => missing.push(member(&layout.result)),
        Some(bytes) => {
            let path = member(&layout.result);
            match ResultFields::from_json(bytes) {
                Err(e) => malformed.push((format!("`{path}`: {e}"), path.clone())),
                Ok(r) => {
                    if let Some(c) = &r.completed_utc {
                        match parse_completed_utc(c) {
                            Ok(t) => a.gen_end = Some(t),
                            Err(e) => malformed.push((format!("`{path}`: {e}"), path.clone())),
                        }
                    }
                    a.result = Some(r);
                }
            }
        }
    }
    if let (Some(s), Some(e)) = (a.gen_start, a.gen_end)
        && e.seconds < s.seconds
    {
        malformed.push((
            format!(
                "completed_utc ({}) precedes the identity mtime ({})",
                e.seconds, s.seconds
            ),
            member(&layout.result),
        ));
    }
    // Timers: absent file means no timers (every start file is a missing_timer).
    let timers = match &ev.timers {
        None => Some(BTreeMap::new()),
        Some(bytes) => {
            let path = member(&layout.timers);
            match parse_timers(bytes, &path) {
                Ok(t) => Some(t),
                Err(e) => {
                    malformed.push((e, path));
                    None
                }
            }
        }
    };
    // A timer whose start file exists but has no readable mtime is no orphan: the seq gets
    // no interval and no row (the attempt is a malformed_record naming the start file).
    let timers = timers.map(|mut t| {
        t.retain(|seq, _| !ev.unreadable_starts.contains(seq));
        t
    });
    if let (Some(gs), Some(timers)) = (a.gen_start, &timers) {
        let lifetime = GenerationLifetime {
            start: gs.seconds,
            end: a.gen_end.map(|t| t.seconds),
        };
        a.requests = reconstruct(lifetime, &ev.starts, timers);
        a.n_intervals = a.requests.intervals.len() as u32;
        a.request_s = a.requests.union_seconds();
    }
    a.problem = if !missing.is_empty() {
        Some((
            ExclusionReason::MissingFile,
            format!("missing {}", missing.join(", ")),
            missing[0].clone(),
        ))
    } else if !malformed.is_empty() {
        let detail = malformed
            .iter()
            .map(|(d, _)| d.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        Some((
            ExclusionReason::MalformedRecord,
            detail,
            malformed[0].1.clone(),
        ))
    } else {
        None
    };
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matching() {
        let m = LayoutMatcher::new(&Layout::default_for(WorkloadId::Deepswe));
        let l = m.locate("deepswe/t1/a1/requests/00042.start").unwrap();
        assert_eq!(l.dir, "deepswe/t1/a1/");
        assert_eq!(l.task_id.as_deref(), Some("t1"));
        assert_eq!(l.attempt_id, "a1");
        assert_eq!(m.role(&l.relative), MemberRole::RequestStart(Ok(42)));
        assert!(m.locate("deepswe/t1").is_none());
        assert!(m.locate("other/t1/a1/x").is_none());
        assert_eq!(m.role("identity.json"), MemberRole::Identity);
        assert_eq!(m.role("patch.diff"), MemberRole::Other);
        assert!(matches!(
            m.role("requests/x.start"),
            MemberRole::RequestStart(Err(_))
        ));
        let t = LayoutMatcher::new(&Layout::default_for(WorkloadId::Tmax));
        let l = t.locate("tmax/tr-1/agent/requests/7.start").unwrap();
        assert_eq!((l.task_id, l.attempt_id.as_str()), (None, "tr-1"));
        assert_eq!(t.role(&l.relative), MemberRole::RequestStart(Ok(7)));
    }

    #[test]
    fn completed_utc_is_exact() {
        let t = parse_completed_utc("2025-09-01T00:00:00.123456Z").unwrap();
        assert_eq!(t.nanos, 1_756_684_800_123_456_000);
        assert_eq!(t.seconds, 1756684800.123456f64);
        let t = parse_completed_utc("2025-09-01T02:00:00.5+02:00").unwrap();
        assert_eq!(t.seconds, 1756684800.5);
        assert!(parse_completed_utc("yesterday").is_err());
        // No offset: UTC.
        let t = parse_completed_utc("2025-09-01T00:00:00.123456").unwrap();
        assert_eq!(t.nanos, 1_756_684_800_123_456_000);
        let t = parse_completed_utc("2025-09-01 00:00:01").unwrap();
        assert_eq!(t.seconds, 1_756_684_801.0);
        // A leap second is the next minute's start plus its fraction, in both columns.
        let t = parse_completed_utc("2016-12-31T23:59:60.5Z").unwrap();
        assert_eq!(t.nanos, 1_483_228_800_500_000_000);
        assert_eq!(t.seconds, 1_483_228_800.5);
        // Before 1970: the nearest f64 to the exact decimal too.
        let t = parse_completed_utc("1969-12-31T23:59:59.9Z").unwrap();
        assert_eq!((t.nanos, t.seconds), (-100_000_000, -0.1));
    }
}
