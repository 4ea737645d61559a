//! `audit show` on the full demo corpus (plus an archive of a duplicate, a malformed and an
//! incomplete attempt): one attempt per clip reason and per exclusion reason, the flagged
//! llm_query_error attempt, a pilot attempt and a duplicate, each with its reason and
//! evidence; expected figures come from the generator's plan and the archive's time texts,
//! not from the tool. On the small demo: a one-value change in `requests.parquet` is caught.

use audit::show::{RequestEvidence, ShowDocument, show_attempt};
use demo::plan::{NS, PlannedAttempt};
use demo::write::{pax_time, rfc3339_micros};
use demo::{DEFAULT_SEED, Scale};
use model::config::Layout;
use model::{RunKind, WorkloadId};
use std::path::Path;
use std::process::Command;

/// Put the corpus's archives into the run's verified store, as ingest would.
fn stage_store(cfg: &model::LoadedConfig) {
    let run = model::run_dir::RunDir::new(&cfg.run_dir);
    std::fs::create_dir_all(run.store_dir()).unwrap();
    for a in &cfg.archives {
        let src = &a.file.as_ref().unwrap().path;
        std::fs::copy(src, run.stored_archive(&a.sha256)).unwrap();
    }
}

/// Epoch seconds of a PAX time text: the nearest f64 to the decimal as written.
fn secs(ns: u64) -> f64 {
    pax_time(ns).parse().unwrap()
}

/// Epoch seconds of a `completed_utc` the generator wrote (whole microseconds).
fn completed_secs(ns: u64) -> f64 {
    assert_eq!(ns % 1000, 0);
    secs(ns)
}

fn prefix(a: &PlannedAttempt) -> String {
    Layout::default_for(a.workload)
        .attempt_dir
        .replace("{task_id}", &a.task_id)
        .replace("{attempt_id}", &a.attempt_id)
}

fn end_ns(a: &PlannedAttempt, i: usize) -> Option<u64> {
    Some(a.requests[i].start_ns? + a.requests[i].elapsed_ns?)
}

/// The extra archive's id.
const EXTRA: &str = "deepswe-extra-000";

/// Append a regular file with a PAX `mtime` record.
fn append_file(b: &mut tar::Builder<impl std::io::Write>, path: &str, data: &[u8], mtime: &str) {
    b.append_pax_extensions([("mtime", mtime.as_bytes())])
        .unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_path(path).unwrap();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(mtime.split('.').next().unwrap().parse().unwrap());
    h.set_cksum();
    b.append(&h, data).unwrap();
}

/// The full demo plus `deepswe-extra-000`: a second copy of `dup`, a copy of `bad` renamed
/// whose completed_utc precedes its identity mtime, and an attempt with only an identity
/// file; `pipeline.yaml` expects them. Audited like the stage does.
fn full_corpus_with_extras(dir: &Path, dup: &PlannedAttempt, bad: &PlannedAttempt) {
    let summary = demo::generate(dir, Scale::Full, DEFAULT_SEED).unwrap();
    let mut bad = bad.clone();
    bad.task_id = "repo99__issue-99999".into();
    bad.attempt_id = "repo99__issue-99999__a0".into();
    bad.completed_ns = Some((bad.gen_start_ns - 10 * NS) / 1000 * 1000);
    let enc = zstd::Encoder::new(Vec::new(), 3).unwrap();
    let mut b = tar::Builder::new(enc);
    demo::write::write_attempt(&mut b, dup).unwrap();
    demo::write::write_attempt(&mut b, &bad).unwrap();
    let identity = model::IdentityRecord {
        task_id: "repo98__issue-99998".into(),
        attempt_id: "repo98__issue-99998__a0".into(),
        run: RunKind::Census,
        quota: model::Quota {
            cores: 2.0,
            mem_gib: 4.0,
        },
        image: model::ImageRecord { blobs: vec![] },
    };
    append_file(
        &mut b,
        "deepswe/repo98__issue-99998/repo98__issue-99998__a0/identity.json",
        &serde_json::to_vec(&identity).unwrap(),
        "1757462400.5",
    );
    // No identity or result: a start file and a timer line, never reconstructed.
    let pre = "deepswe/repo97__issue-99997/repo97__issue-99997__a0/";
    append_file(
        &mut b,
        &format!("{pre}requests/00001.start"),
        b"",
        "1757462401.25",
    );
    append_file(
        &mut b,
        &format!("{pre}timers.jsonl"),
        b"{\"seq\":1,\"elapsed_ns\":1500000000}\n",
        "1757462410",
    );
    let bytes = b.into_inner().unwrap().finish().unwrap();
    let file = format!("archives/{EXTRA}.tar.zst");
    std::fs::write(dir.join(&file), &bytes).unwrap();
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&bytes))
    };
    let manifest = dir.join("manifest.csv");
    let mut m = std::fs::read_to_string(&manifest).unwrap();
    m.push_str(&format!(
        "{EXTRA},deepswe,{sha},{},,,,,,,,{file}\n",
        bytes.len()
    ));
    std::fs::write(&manifest, m).unwrap();
    // deepswe: four more census attempts; both copies of `dup` and the three others out.
    let e = &summary.expected["deepswe"];
    let yaml_path = dir.join("pipeline.yaml");
    let yaml = std::fs::read_to_string(&yaml_path).unwrap();
    let old = format!(
        "expect: {{ audited: {}, included: {}, pilot: {}, excluded: {{ infrastructure_failure: {} }}, flagged: {{ llm_query_error: 1 }} }}",
        e.audited, e.included, e.pilot, e.excluded["infrastructure_failure"]
    );
    assert!(yaml.contains(&old), "{yaml}");
    let new = format!(
        "expect: {{ audited: {}, included: {}, pilot: {}, excluded: {{ infrastructure_failure: {}, duplicate_attempt: 2, malformed_record: 1, missing_file: 2 }}, flagged: {{ llm_query_error: 1 }} }}",
        e.audited + 4,
        e.included - 1,
        e.pilot,
        e.excluded["infrastructure_failure"]
    );
    std::fs::write(&yaml_path, yaml.replace(&old, &new)).unwrap();
    let cfg = model::load_config(&yaml_path).unwrap();
    stage_store(&cfg);
    audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
}

fn show(cfg: &model::LoadedConfig, a: &PlannedAttempt) -> ShowDocument {
    let d = show_attempt(cfg, &a.attempt_id, None, None).unwrap();
    assert!(d.consistent, "{}: {:?}", a.attempt_id, d.differences);
    assert!(d.reconstructed);
    assert_eq!(d.member_prefix, prefix(a));
    assert_eq!(d.lifetime.identity_mtime, Some(pax_time(a.gen_start_ns)));
    assert_eq!(d.lifetime.gen_start, Some(secs(a.gen_start_ns)));
    assert_eq!(
        d.lifetime.completed_utc,
        a.completed_ns.map(rfc3339_micros),
        "{}",
        a.attempt_id
    );
    assert_eq!(d.lifetime.gen_end, a.completed_ns.map(completed_secs));
    d
}

/// The evidence of request `i` (0-based in the plan) of an attempt.
fn find_evidence(d: &ShowDocument, seq: u64) -> RequestEvidence {
    d.requests
        .iter()
        .flat_map(|r| r.evidence.iter())
        .chain(&d.unplaced)
        .find(|e| e.seq == seq)
        .unwrap_or_else(|| panic!("seq {seq} of {}", d.attempt_id))
        .clone()
}

/// Request `i` of the plan, as start member, mtime text and timer line.
fn assert_member_evidence(d: &ShowDocument, a: &PlannedAttempt, i: usize) {
    let r = &a.requests[i];
    let e = find_evidence(d, r.seq);
    match r.start_ns {
        Some(s) => {
            let name = Layout::default_for(a.workload)
                .request_start
                .replace("{seq}", &format!("{:05}", r.seq));
            assert_eq!(e.start_member, Some(format!("{}{name}", prefix(a))));
            assert_eq!(e.start_mtime, Some(pax_time(s)));
        }
        None => assert_eq!((e.start_member, e.start_mtime), (None, None)),
    }
    match r.elapsed_ns {
        Some(el) => {
            let t = e.timer.expect("timer");
            let timers = Layout::default_for(a.workload).timers;
            assert_eq!(t.member, format!("{}{timers}", prefix(a)));
            assert_eq!(
                t.record,
                format!("{{\"seq\":{},\"elapsed_ns\":{el}}}", r.seq)
            );
            assert_eq!(t.elapsed_ns, el);
            // Lines are the timers in seq order, requests without a timer left out.
            let line = a.requests[..=i]
                .iter()
                .filter(|r| r.elapsed_ns.is_some())
                .count();
            assert_eq!(t.line, line);
        }
        None => assert!(e.timer.is_none()),
    }
}

/// The one clipping record of a reason.
fn clip<'a>(d: &'a ShowDocument, reason: &str) -> &'a audit::show::ShowClip {
    let v: Vec<_> = d.clipping.iter().filter(|c| c.reason == reason).collect();
    assert_eq!(v.len(), 1, "{}: {:?}", d.attempt_id, d.clipping);
    v[0]
}

#[test]
fn full_demo_every_reason_with_its_evidence() {
    let plan = demo::plan_corpus(Scale::Full, DEFAULT_SEED);
    let census = |w: WorkloadId| {
        plan.attempts
            .iter()
            .filter(move |a| a.workload == w && a.run == RunKind::Census)
    };
    let ordinary = |a: &&PlannedAttempt| {
        a.result.exception_info.is_none()
            && a.result.infra_error.is_none()
            && a.result.termination.as_deref() != Some("llm_query_error")
            && a.requests.iter().enumerate().all(|(i, r)| {
                r.start_ns.is_some()
                    && r.elapsed_ns.is_some()
                    && r.start_ns.unwrap() >= a.gen_start_ns
                    && end_ns(a, i).unwrap() <= a.completed_ns.unwrap()
                    && (i == 0 || r.start_ns.unwrap() > end_ns(a, i - 1).unwrap())
            })
    };
    let mut plain = census(WorkloadId::Deepswe).filter(ordinary);
    let dup = plain.next().unwrap().clone();
    let bad = plain.next().unwrap().clone();
    let d = tempfile::tempdir().unwrap();
    full_corpus_with_extras(d.path(), &dup, &bad);
    let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();

    // execution_exception (tmax): its detail is the exception's type and message.
    let a = census(WorkloadId::Tmax)
        .find(|a| a.result.exception_info.is_some())
        .unwrap();
    let x = show(&cfg, a);
    let info = a.result.exception_info.as_ref().unwrap();
    assert_eq!(
        (
            x.included,
            x.exclusion_reason.as_deref(),
            x.exclusion_detail.clone()
        ),
        (
            false,
            Some("execution_exception"),
            Some(format!("{}: {}", info.kind, info.message))
        )
    );
    assert_eq!(x.exclusion_member, Some(prefix(a)));
    assert_eq!(
        x.lifetime.duration_s,
        Some(completed_secs(a.completed_ns.unwrap()) - secs(a.gen_start_ns))
    );
    // Its requests are kept (an excluded attempt's intervals are in requests.parquet too),
    // one line each, built from the start file's mtime and the timer.
    assert_eq!(x.requests.len(), a.requests.len());
    assert_eq!(x.request_start_files as usize, a.requests.len());
    let (gs, r0) = (secs(a.gen_start_ns), &a.requests[0]);
    let (s0, el0) = (secs(r0.start_ns.unwrap()), r0.elapsed_ns.unwrap());
    assert_eq!(x.requests[0].seqs, vec![1]);
    assert_eq!(x.requests[0].start_offset_s, s0 - gs);
    assert_eq!(x.requests[0].end_offset_s, (s0 + el0 as f64 / 1e9) - gs);
    for i in [0, a.requests.len() / 2, a.requests.len() - 1] {
        assert_member_evidence(&x, a, i);
    }
    assert!(x.clipping.is_empty());

    // infrastructure_failure, both kinds: never completed, and completed but failed.
    let a = census(WorkloadId::Deepswe)
        .find(|a| a.result.infra_error.is_some() && a.completed_ns.is_none())
        .unwrap();
    let x = show(&cfg, a);
    assert_eq!(
        (
            x.exclusion_reason.as_deref(),
            x.exclusion_detail.as_deref(),
            x.lifetime.duration_s
        ),
        (
            Some("infrastructure_failure"),
            Some("infra_error: sandbox lost: node preempted"),
            None
        )
    );
    assert_eq!(x.requests.len(), a.requests.len());
    let a = census(WorkloadId::Deepswe)
        .find(|a| a.result.infra_error.is_some() && a.completed_ns.is_some())
        .unwrap();
    let x = show(&cfg, a);
    assert_eq!(
        (
            x.exclusion_reason.as_deref(),
            x.exclusion_detail.as_deref(),
            x.termination.as_deref()
        ),
        (
            Some("infrastructure_failure"),
            Some("infra_error: result upload failed after retries"),
            Some("submitted")
        )
    );

    // The flagged llm_query_error attempt: included, flagged.
    let a = census(WorkloadId::Deepswe)
        .find(|a| a.result.termination.as_deref() == Some("llm_query_error"))
        .unwrap();
    let x = show(&cfg, a);
    assert_eq!(
        (
            x.included,
            x.exclusion_reason.clone(),
            x.flag_reason.as_deref(),
            x.termination.as_deref()
        ),
        (true, None, Some("llm_query_error"), Some("llm_query_error"))
    );

    // A pilot attempt: superseded by the census.
    let a = plan
        .attempts
        .iter()
        .find(|a| a.run == RunKind::Pilot)
        .unwrap();
    let x = show(&cfg, a);
    assert_eq!(
        (
            x.run.as_deref(),
            x.superseded_by_census,
            x.exclusion_reason.as_deref(),
            x.exclusion_detail.as_deref()
        ),
        (
            Some("pilot"),
            true,
            Some("superseded_by_census"),
            Some("pilot attempt; the census supersedes the pilot")
        )
    );
    assert_eq!(x.archive_id, "deepswe-pilot-000");

    // A duplicate: the id alone is ambiguous (both copies listed); each copy, named by its
    // archive, is a duplicate_attempt naming both places in manifest order.
    let home = &plan.archives[dup.archive].archive_id;
    let e = show_attempt(&cfg, &dup.attempt_id, Some("deepswe"), None).unwrap_err();
    assert!(matches!(e, audit::AuditError::Lookup(_)));
    let p = prefix(&dup);
    assert_eq!(
        e.to_string(),
        format!(
            "attempt `{}` is ambiguous, 2 candidates: deepswe {home}:{p}, deepswe {EXTRA}:{p}; name one with --archive",
            dup.attempt_id
        )
    );
    let detail = format!(
        "attempt id `{}` appears 2 times: {home}:{p}, {EXTRA}:{p}",
        dup.attempt_id
    );
    for (archive, other) in [(EXTRA, home.as_str()), (home.as_str(), EXTRA)] {
        let x = show_attempt(&cfg, &dup.attempt_id, None, Some(archive)).unwrap();
        assert!(x.consistent, "{:?}", x.differences);
        assert_eq!(x.archive_id, archive);
        assert_eq!(
            (x.exclusion_reason.as_deref(), x.exclusion_detail.clone()),
            (Some("duplicate_attempt"), Some(detail.clone()))
        );
        assert_eq!(x.duplicates, vec![format!("{other}:{p}")]);
        assert_eq!(x.requests.len(), dup.requests.len());
    }

    // malformed_record: completed_utc 10 s before the identity mtime; every request is
    // dropped whole (outside_generation) and shown without a kept interval.
    let bad_id = "repo99__issue-99999__a0";
    let x = show_attempt(&cfg, bad_id, None, None).unwrap();
    assert!(x.consistent, "{:?}", x.differences);
    let (gs, ge) = (
        secs(bad.gen_start_ns),
        completed_secs((bad.gen_start_ns - 10 * NS) / 1000 * 1000),
    );
    assert_eq!(
        (x.exclusion_reason.as_deref(), x.exclusion_detail.clone()),
        (
            Some("malformed_record"),
            Some(format!(
                "completed_utc ({ge}) precedes the identity mtime ({gs})"
            ))
        )
    );
    assert_eq!(
        x.exclusion_member,
        Some("deepswe/repo99__issue-99999/repo99__issue-99999__a0/result.json".into())
    );
    assert!(x.requests.is_empty());
    assert_eq!(x.unplaced.len(), bad.requests.len());
    assert_eq!(x.clipping.len(), bad.requests.len());
    assert!(x.clipping.iter().all(|c| c.reason == "outside_generation"
        && c.kept_start.is_none()
        && c.request_lines.is_empty()));
    assert_eq!(x.unplaced[0].clipping, vec![1]);
    assert_eq!(x.unplaced[0].clipped_start_offset_s, None);

    // missing_file: only the identity file; the lifetime starts at its mtime as written.
    let x = show_attempt(&cfg, "repo98__issue-99998__a0", None, None).unwrap();
    assert!(x.consistent, "{:?}", x.differences);
    let pre = "deepswe/repo98__issue-99998/repo98__issue-99998__a0/";
    assert_eq!(
        (
            x.exclusion_reason.as_deref(),
            x.exclusion_detail.clone(),
            x.exclusion_member.clone()
        ),
        (
            Some("missing_file"),
            Some(format!("missing {pre}result.json")),
            Some(format!("{pre}result.json"))
        )
    );
    assert_eq!(x.lifetime.identity_mtime.as_deref(), Some("1757462400.5"));
    assert_eq!(x.lifetime.gen_start, Some(1_757_462_400.5));
    assert_eq!(
        (x.lifetime.completed_utc.clone(), x.lifetime.gen_end),
        (None, None)
    );
    assert!(x.requests.is_empty() && x.unplaced.is_empty() && x.clipping.is_empty());

    // missing_file without an identity: nothing reconstructed; the start file and the
    // timer line are listed without offsets.
    let x = show_attempt(&cfg, "repo97__issue-99997__a0", None, None).unwrap();
    assert!(x.consistent, "{:?}", x.differences);
    let pre = "deepswe/repo97__issue-99997/repo97__issue-99997__a0/";
    assert_eq!(
        x.exclusion_detail,
        Some(format!("missing {pre}identity.json, {pre}result.json"))
    );
    assert_eq!(
        (
            x.reconstructed,
            x.lifetime.identity_mtime.clone(),
            x.lifetime.gen_start
        ),
        (false, None, None)
    );
    assert!(x.requests.is_empty() && x.clipping.is_empty());
    assert_eq!(x.unplaced.len(), 1);
    let u = &x.unplaced[0];
    assert_eq!(
        (
            u.seq,
            u.start_member.clone(),
            u.start_mtime.as_deref(),
            u.raw_start_offset_s
        ),
        (
            1,
            Some(format!("{pre}requests/00001.start")),
            Some("1757462401.25"),
            None
        )
    );
    let t = u.timer.as_ref().unwrap();
    assert_eq!(
        (t.line, t.record.as_str(), t.elapsed_ns),
        (1, r#"{"seq":1,"elapsed_ns":1500000000}"#, 1_500_000_000)
    );
    assert!(
        audit::show::render_text(&x).contains("  not reconstructed (no readable generation start or timers file)\n      seq 1: start requests/00001.start mtime 1757462401.25; timer timers.jsonl:1 {\"seq\":1,\"elapsed_ns\":1500000000}\nclipping (0 record(s))\n")
    );

    // Clip reasons: the first census attempt (plan order) with each injected anomaly.
    let anomalous = |f: &dyn Fn(&PlannedAttempt, usize) -> bool| {
        plan.attempts
            .iter()
            .filter(|a| a.run == RunKind::Census)
            .find_map(|a| (0..a.requests.len()).find(|&i| f(a, i)).map(|i| (a, i)))
            .unwrap()
    };
    // missing_timer: the last request runs to the generation end.
    let (a, i) =
        anomalous(&|a, i| a.requests[i].start_ns.is_some() && a.requests[i].elapsed_ns.is_none());
    let x = show(&cfg, a);
    let (gs, ge) = (
        secs(a.gen_start_ns),
        completed_secs(a.completed_ns.unwrap()),
    );
    let s = secs(a.requests[i].start_ns.unwrap());
    let c = clip(&x, "missing_timer");
    assert_eq!(c.seqs, vec![a.requests[i].seq]);
    assert_eq!(
        (
            c.raw_start,
            c.raw_end,
            c.kept_start,
            c.kept_end,
            c.seconds_removed
        ),
        (Some(s), Some(ge), Some(s), Some(ge), 0.0)
    );
    assert_eq!(c.request_lines, vec![x.requests.len()]);
    let last = x.requests.last().unwrap();
    assert_eq!((last.start_offset_s, last.end_offset_s), (s - gs, ge - gs));
    assert_member_evidence(&x, a, i);
    assert_eq!(last.evidence[0].clipping, vec![c.index]);

    // orphan_timer: a timer without its start file; no interval.
    let (a, i) =
        anomalous(&|a, i| a.requests[i].start_ns.is_none() && a.requests[i].elapsed_ns.is_some());
    let x = show(&cfg, a);
    let el = a.requests[i].elapsed_ns.unwrap();
    let c = clip(&x, "orphan_timer");
    assert_eq!(
        (c.seqs.clone(), c.raw_start, c.kept_start, c.seconds_removed),
        (vec![a.requests[i].seq], None, None, el as f64 / 1e9)
    );
    assert!(c.request_lines.is_empty());
    assert_eq!(x.unplaced.len(), 1);
    assert_eq!(x.unplaced[0].seq, a.requests[i].seq);
    assert_member_evidence(&x, a, i);
    assert_eq!(x.requests.len(), a.requests.len() - 1);

    // before_generation_start: the first request started before the identity mtime.
    let (a, i) = anomalous(&|a, i| {
        let (s, e) = (a.requests[i].start_ns, end_ns(a, i));
        s.is_some_and(|s| s < a.gen_start_ns) && e.is_some_and(|e| e > a.gen_start_ns)
    });
    let x = show(&cfg, a);
    let gs = secs(a.gen_start_ns);
    let s = secs(a.requests[i].start_ns.unwrap());
    let e = s + a.requests[i].elapsed_ns.unwrap() as f64 / 1e9;
    let c = clip(&x, "before_generation_start");
    assert_eq!(
        (
            c.raw_start,
            c.raw_end,
            c.kept_start,
            c.kept_end,
            c.seconds_removed
        ),
        (Some(s), Some(e), Some(gs), Some(e), gs - s)
    );
    assert_eq!(c.request_lines, vec![1]);
    let ev = find_evidence(&x, a.requests[i].seq);
    assert_eq!(
        (
            ev.raw_start_offset_s,
            ev.clipped_start_offset_s,
            ev.clipped_end_offset_s
        ),
        (Some(s - gs), Some(0.0), Some(e - gs))
    );
    assert_eq!(x.requests[0].start_offset_s, 0.0);
    assert_member_evidence(&x, a, i);

    // after_generation_end: the last request ran past completed_utc.
    let (a, i) = anomalous(&|a, i| {
        let (s, e, c) = (a.requests[i].start_ns, end_ns(a, i), a.completed_ns);
        s.zip(c).is_some_and(|(s, c)| s < c) && e.zip(c).is_some_and(|(e, c)| e > c)
    });
    let x = show(&cfg, a);
    let (gs, ge) = (
        secs(a.gen_start_ns),
        completed_secs(a.completed_ns.unwrap()),
    );
    let s = secs(a.requests[i].start_ns.unwrap());
    let e = s + a.requests[i].elapsed_ns.unwrap() as f64 / 1e9;
    let c = clip(&x, "after_generation_end");
    assert_eq!(
        (
            c.raw_start,
            c.raw_end,
            c.kept_start,
            c.kept_end,
            c.seconds_removed
        ),
        (Some(s), Some(e), Some(s), Some(ge), e - ge)
    );
    assert_eq!(c.request_lines, vec![x.requests.len()]);
    assert_eq!(x.requests.last().unwrap().end_offset_s, ge - gs);
    assert_member_evidence(&x, a, i);

    // outside_generation: a request wholly before the lifetime, dropped.
    let (a, i) = anomalous(&|a, i| end_ns(a, i).is_some_and(|e| e <= a.gen_start_ns));
    let x = show(&cfg, a);
    let s = secs(a.requests[i].start_ns.unwrap());
    let e = s + a.requests[i].elapsed_ns.unwrap() as f64 / 1e9;
    let c = clip(&x, "outside_generation");
    assert_eq!(
        (c.raw_start, c.raw_end, c.kept_start, c.seconds_removed),
        (Some(s), Some(e), None, e - s)
    );
    assert!(c.request_lines.is_empty());
    assert_eq!(x.unplaced.len(), 1);
    assert_eq!(
        x.unplaced[0].raw_start_offset_s,
        Some(s - secs(a.gen_start_ns))
    );
    assert_member_evidence(&x, a, i);

    // merged_overlap: a pair, the second starting halfway through the first.
    let (a, i) = anomalous(&|a, i| {
        i > 0
            && a.requests[i]
                .start_ns
                .zip(end_ns(a, i - 1))
                .is_some_and(|(s, pe)| s < pe)
            && a.requests
                .get(i + 1)
                .is_none_or(|n| n.start_ns.zip(end_ns(a, i)).is_some_and(|(s, e)| s > e))
            && (i < 2 || end_ns(a, i - 2) < a.requests[i - 1].start_ns)
            && [i - 1, i].iter().all(|&k| {
                a.requests[k].start_ns >= Some(a.gen_start_ns)
                    && end_ns(a, k)
                        .zip(a.completed_ns)
                        .is_some_and(|(e, c)| e <= c)
            })
    });
    let x = show(&cfg, a);
    let gs = secs(a.gen_start_ns);
    let (s1, s2) = (
        secs(a.requests[i - 1].start_ns.unwrap()),
        secs(a.requests[i].start_ns.unwrap()),
    );
    let e1 = s1 + a.requests[i - 1].elapsed_ns.unwrap() as f64 / 1e9;
    let e2 = s2 + a.requests[i].elapsed_ns.unwrap() as f64 / 1e9;
    let seqs = vec![a.requests[i - 1].seq, a.requests[i].seq];
    let c = clip(&x, "merged_overlap");
    assert_eq!(
        (c.seqs.clone(), c.raw_start, c.raw_end, c.seconds_removed),
        (seqs.clone(), Some(s1), Some(e1.max(e2)), e1.min(e2) - s2)
    );
    assert_eq!(c.request_lines, vec![i]);
    let line = &x.requests[i - 1];
    assert_eq!(
        (line.seqs.clone(), line.start_offset_s, line.end_offset_s),
        (seqs, s1 - gs, e1.max(e2) - gs)
    );
    assert_eq!(line.evidence.len(), 2);
    assert_member_evidence(&x, a, i - 1);
    assert_member_evidence(&x, a, i);

    // The command line: an ambiguous id exits 2 naming the candidates; --json prints the
    // document with the keys the contract names.
    let bin = env!("CARGO_BIN_EXE_audit");
    let yaml = d.path().join("pipeline.yaml");
    let out = Command::new(bin)
        .arg("--config")
        .arg(&yaml)
        .args(["show", "--attempt", &dup.attempt_id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("deepswe {home}:{p}")) && err.contains(&format!("{EXTRA}:{p}")),
        "{err}"
    );
    let flagged = census(WorkloadId::Deepswe)
        .find(|a| a.result.termination.as_deref() == Some("llm_query_error"))
        .unwrap();
    let out = Command::new(bin)
        .arg("--config")
        .arg(&yaml)
        .args(["show", "--attempt", &flagged.attempt_id, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["attempt_id"], flagged.attempt_id.as_str());
    assert_eq!(v["workload"], "deepswe");
    assert_eq!(v["included"], true);
    assert_eq!(v["exclusion_reason"], serde_json::Value::Null);
    assert_eq!(v["consistent"], true);
    assert_eq!(v["clipping"], serde_json::json!([]));
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), flagged.requests.len());
    let gs = secs(flagged.gen_start_ns);
    let s = secs(flagged.requests[0].start_ns.unwrap());
    assert_eq!(reqs[0]["start_offset_s"].as_f64(), Some(s - gs));
    assert!(reqs[0]["end_offset_s"].is_f64());
    assert_eq!(
        reqs[0]["evidence"][0]["start_mtime"],
        pax_time(flagged.requests[0].start_ns.unwrap()).as_str()
    );
}

/// A small demo, audited.
fn small_run(dir: &Path) -> model::LoadedConfig {
    demo::generate(dir, Scale::Small, DEFAULT_SEED).unwrap();
    let cfg = model::load_config(&dir.join("pipeline.yaml")).unwrap();
    stage_store(&cfg);
    audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
    cfg
}

#[test]
fn a_one_value_change_in_requests_parquet_is_reported() {
    let d = tempfile::tempdir().unwrap();
    let cfg = small_run(d.path());
    let plan = demo::plan_corpus(Scale::Small, DEFAULT_SEED);
    let a = plan
        .attempts
        .iter()
        .find(|a| a.workload == WorkloadId::Deepswe && a.run == RunKind::Census)
        .unwrap();
    assert!(
        show_attempt(&cfg, &a.attempt_id, None, None)
            .unwrap()
            .consistent
    );
    use polars::prelude::NamedFrom;
    // Change the end of the attempt's second interval by 0.25 s, nothing else.
    use audit::schema::REQUESTS;
    let path = cfg.run_dir.join("requests.parquet");
    let mut df =
        frames::read_declared(&path, &REQUESTS, model::run_dir::FRAME_SCHEMA_VERSION).unwrap();
    let ids = frames::str_values(&df, &path, "attempt_id").unwrap();
    let row = ids
        .iter()
        .position(|i| i.as_deref() == Some(a.attempt_id.as_str()))
        .unwrap()
        + 1;
    let mut ends = frames::f64_values(&df, &path, "end_offset_s").unwrap();
    let was = ends[row].unwrap();
    ends[row] = Some(was + 0.25);
    df.replace(
        "end_offset_s",
        polars::prelude::Series::new("end_offset_s".into(), ends).into(),
    )
    .unwrap();
    let meta = frames::read_metadata(&path).unwrap();
    let mut m = frames::FrameMeta::new("requests", model::run_dir::FRAME_SCHEMA_VERSION);
    for (k, v) in meta
        .iter()
        .filter(|(k, _)| k.starts_with("agentrace.source"))
    {
        m = m.with(k, v.clone());
    }
    frames::write_declared(&path, &mut df, &REQUESTS, &m).unwrap();

    let x = show_attempt(&cfg, &a.attempt_id, None, None).unwrap();
    assert!(!x.consistent);
    assert_eq!(
        x.differences,
        vec![format!(
            "requests.parquet row 2 of this attempt, `end_offset_s`: the frame has {}, the archive gives {was}",
            was + 0.25
        )]
    );
    // The command prints the difference and exits 1.
    let out = Command::new(env!("CARGO_BIN_EXE_audit"))
        .arg("--config")
        .arg(d.path().join("pipeline.yaml"))
        .args(["show", "--attempt", &a.attempt_id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("  DIFFERS: {}", x.differences[0])),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("differs from the frames in 1 value(s)"));
    // An unknown id is refused: exit 2.
    let out = Command::new(env!("CARGO_BIN_EXE_audit"))
        .arg("--config")
        .arg(d.path().join("pipeline.yaml"))
        .args(["show", "--attempt", "no-such-attempt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("attempt `no-such-attempt` is not in attempts.parquet")
    );
}

/// The same bytes under two archive ids: both copies are audited (and excluded as
/// duplicates); `audit show` of either copy finds the attempt's rows once per copy in the
/// per-request frames, and reports no difference.
#[test]
fn the_same_bytes_under_two_archive_ids_show_without_a_false_difference() {
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), Scale::Small, DEFAULT_SEED).unwrap();
    let manifest = d.path().join("manifest.csv");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let id_col = header.iter().position(|h| *h == "archive_id").unwrap();
    let mut copy: Vec<String> = lines[1].split(',').map(str::to_string).collect();
    let original = copy[id_col].clone();
    copy[id_col] = format!("{original}-copy");
    lines.push(copy.join(","));
    std::fs::write(&manifest, lines.join("\n") + "\n").unwrap();
    let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
    stage_store(&cfg);
    // The expected cohort counts no longer hold; the frames are written all the same.
    let _ = audit::run(&cfg, &audit::AuditOptions::default());
    let path = cfg.run_dir.join("attempts.parquet");
    let df = frames::read_declared(
        &path,
        &audit::schema::ATTEMPTS,
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let archives = frames::str_values(&df, &path, "archive_id").unwrap();
    let attempts = frames::str_values(&df, &path, "attempt_id").unwrap();
    let first = attempts[archives
        .iter()
        .position(|a| a.as_deref() == Some(original.as_str()))
        .unwrap()]
    .clone()
    .unwrap();
    for archive in [original.clone(), format!("{original}-copy")] {
        let x = show_attempt(&cfg, &first, None, Some(&archive)).unwrap();
        assert_eq!(x.archive_id, archive);
        assert!(x.consistent, "{archive}: {:?}", x.differences);
        assert_eq!(x.duplicates.len(), 1, "{archive}: the other copy is named");
    }
}
