//! The audit of the demo corpus, and of a subset of the search's zoo (docs/ZOO.md),
//! reproduces the generator's `expected.json` exactly.

use demo::Scale;
use std::path::Path;

/// Put the corpus's archives into the run's verified store, as ingest would.
fn stage_store(cfg: &model::LoadedConfig) {
    let run = model::run_dir::RunDir::new(&cfg.run_dir);
    std::fs::create_dir_all(run.store_dir()).unwrap();
    for a in &cfg.archives {
        let src = &a.file.as_ref().unwrap().path;
        std::fs::copy(src, run.stored_archive(&a.sha256)).unwrap();
    }
}

fn check(dir: &Path, scale: Scale) {
    check_written(
        dir,
        &demo::generate(dir, scale, demo::DEFAULT_SEED).unwrap(),
    );
}

fn check_written(dir: &Path, summary: &demo::DemoSummary) {
    let cfg = model::load_config(&dir.join("pipeline.yaml")).unwrap();
    stage_store(&cfg);
    let report = audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
    for (w, exp) in &summary.expected {
        let got = &report.document.workloads[w];
        assert_eq!(got.audited, exp.audited, "{w} audited");
        assert_eq!(got.included, exp.included, "{w} included");
        assert_eq!(got.pilot, exp.pilot, "{w} pilot");
        assert_eq!(got.wrong_answers, exp.wrong_answers, "{w} wrong answers");
        let mut excluded = exp.excluded.clone();
        if exp.pilot > 0 {
            excluded.insert("superseded_by_census".into(), exp.pilot);
        }
        assert_eq!(got.excluded_by_reason, excluded, "{w} exclusions");
        assert_eq!(
            got.flagged.keys().cloned().collect::<Vec<_>>(),
            exp.flagged,
            "{w} flagged"
        );
        for (reason, rows) in &exp.clipping {
            assert_eq!(got.clipping[reason].rows, *rows, "{w} clipping {reason}");
        }
        assert!(got.pass);
    }
    // Touching merges remove exactly 0 s; every other merge removes some.
    let clip = frames::read_frame(
        &cfg.run_dir.join("clipping.parquet"),
        "clipping",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let reasons = clip.column("reason").unwrap().str().unwrap().clone();
    let removed = clip
        .column("seconds_removed")
        .unwrap()
        .f64()
        .unwrap()
        .clone();
    let touching = reasons
        .iter()
        .zip(removed.iter())
        .filter(|(r, s)| *r == Some("merged_overlap") && *s == Some(0.0))
        .count() as u64;
    let expected_touching: u64 = summary.expected.values().map(|e| e.merged_touching).sum();
    assert_eq!(touching, expected_touching);
    // Census start files equal n_requests summed over census attempts.
    let att = frames::read_frame(
        &cfg.run_dir.join("attempts.parquet"),
        "attempts",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let runs = att.column("run").unwrap().str().unwrap().clone();
    let n = att.column("n_requests").unwrap().u32().unwrap().clone();
    let census_starts: u64 = runs
        .iter()
        .zip(n.iter())
        .filter(|(r, _)| *r == Some("census"))
        .map(|(_, n)| n.unwrap() as u64)
        .sum();
    assert_eq!(
        census_starts,
        summary
            .expected
            .values()
            .map(|e| e.start_files)
            .sum::<u64>()
    );
}

/// Knobs that reshape the requests, durations and blobs; the bench audits every instance.
#[test]
fn zoo_instances_match_their_expected_json() {
    for name in ["long-setup", "bursty", "heavy-tail", "many-small-blobs"] {
        let d = tempfile::tempdir().unwrap();
        let summary = demo::zoo::find(name).unwrap().generate(d.path()).unwrap();
        check_written(d.path(), &summary);
    }
}

#[test]
fn small_demo_matches_expected_json() {
    check(tempfile::tempdir().unwrap().path(), Scale::Small);
}

#[test]
fn full_demo_matches_expected_json() {
    check(tempfile::tempdir().unwrap().path(), Scale::Full);
}

#[test]
fn frames_are_byte_identical_across_runs() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for d in [&a, &b] {
        demo::generate(d.path(), Scale::Small, 3).unwrap();
        let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
        stage_store(&cfg);
        audit::run(
            &cfg,
            &audit::AuditOptions {
                threads: Some(if d.path() == a.path() { 1 } else { 3 }),
            },
        )
        .unwrap();
    }
    for f in [
        "attempts.parquet",
        "requests.parquet",
        "clipping.parquet",
        "exclusions.parquet",
        "blobs.parquet",
        "attempt_blobs.parquet",
        "audit.json",
    ] {
        assert_eq!(
            std::fs::read(a.path().join("run").join(f)).unwrap(),
            std::fs::read(b.path().join("run").join(f)).unwrap(),
            "{f}"
        );
    }
}
