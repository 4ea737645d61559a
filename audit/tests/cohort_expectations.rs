//! The cohort check compares exclusions by reason and flagged attempts by
//! kind, not totals only. On the small demo corpus, an expectation that moves one exclusion
//! from its reason to any other census reason (same totals), or that misses the flagged
//! attempt, fails the stage naming workload, reason, found and expected, after writing the
//! frames; the exact expectations pass.

use model::ExclusionReason;
use model::config::Expectations;
use std::collections::BTreeMap;

/// The census exclusion reasons (the pilot's `superseded_by_census` is `pilot`'s).
const CENSUS_REASONS: [ExclusionReason; 5] = [
    ExclusionReason::ExecutionException,
    ExclusionReason::InfrastructureFailure,
    ExclusionReason::DuplicateAttempt,
    ExclusionReason::MalformedRecord,
    ExclusionReason::MissingFile,
];

fn small_demo() -> (tempfile::TempDir, model::LoadedConfig) {
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
    let run = model::run_dir::RunDir::new(&cfg.run_dir);
    std::fs::create_dir_all(run.store_dir()).unwrap();
    for a in &cfg.archives {
        std::fs::copy(
            &a.file.as_ref().unwrap().path,
            run.stored_archive(&a.sha256),
        )
        .unwrap();
    }
    (d, cfg)
}

fn differences(cfg: &model::LoadedConfig) -> Vec<String> {
    for f in audit::output::audit_outputs() {
        let _ = std::fs::remove_file(cfg.run_dir.join(f));
    }
    let r = audit::run(cfg, &audit::AuditOptions::default());
    for f in audit::output::audit_outputs() {
        assert!(cfg.run_dir.join(&f).is_file(), "{f} not written");
    }
    match r {
        Ok(_) => Vec::new(),
        Err(audit::AuditError::Expectations { differences }) => differences,
        Err(e) => panic!("{e}"),
    }
}

fn expect_mut(cfg: &mut model::LoadedConfig, w: model::WorkloadId) -> &mut Expectations {
    let slot = match w {
        model::WorkloadId::Tmax => &mut cfg.config.workloads.tmax,
        model::WorkloadId::Deepswe => &mut cfg.config.workloads.deepswe,
    };
    &mut slot.as_mut().unwrap().expect
}

#[test]
fn the_demo_configs_complete_expectations_pass() {
    let (_d, cfg) = small_demo();
    for w in model::WorkloadId::ALL {
        let e = &cfg.config.workloads.get(w).unwrap().expect;
        assert!(e.excluded.is_some() && e.flagged.is_some(), "{w}: {e:?}");
    }
    assert_eq!(differences(&cfg), Vec::<String>::new());
}

#[test]
fn an_exclusion_under_another_reason_is_a_difference_for_every_reason() {
    let (_d, base) = small_demo();
    for w in model::WorkloadId::ALL {
        let found = base
            .config
            .workloads
            .get(w)
            .unwrap()
            .expect
            .excluded
            .clone()
            .unwrap();
        let (&from, &n) = found.iter().next().expect("the small demo excludes some");
        for to in CENSUS_REASONS.into_iter().filter(|r| *r != from) {
            let mut cfg = base.clone();
            let mut moved: BTreeMap<ExclusionReason, u64> = found.clone();
            if n == 1 {
                moved.remove(&from);
            } else {
                moved.insert(from, n - 1);
            }
            *moved.entry(to).or_default() += 1;
            expect_mut(&mut cfg, w).excluded = Some(moved.clone());
            let diffs = differences(&cfg);
            assert_eq!(
                diffs,
                {
                    let mut want = vec![
                        format!("{w}: excluded {from}: found {n}, expected {}", n - 1),
                        format!(
                            "{w}: excluded {to}: found {}, expected {}",
                            found.get(&to).copied().unwrap_or(0),
                            moved[&to]
                        ),
                    ];
                    want.sort();
                    want
                },
                "{w}: {from} -> {to}"
            );
        }
    }
}

#[test]
fn a_missing_or_unlisted_flag_is_a_difference() {
    let (_d, base) = small_demo();
    let w = model::WorkloadId::Deepswe;
    let flagged = base
        .config
        .workloads
        .get(w)
        .unwrap()
        .expect
        .flagged
        .clone()
        .unwrap();
    assert_eq!(flagged.get("llm_query_error"), Some(&1), "{flagged:?}");
    let mut cfg = base.clone();
    expect_mut(&mut cfg, w).flagged = Some(BTreeMap::new());
    assert_eq!(
        differences(&cfg),
        ["deepswe: flagged llm_query_error: found 1, expected 0"]
    );
    // Without `excluded` and `flagged`, only the totals are compared (as before).
    let mut cfg = base.clone();
    for w in model::WorkloadId::ALL {
        let e = expect_mut(&mut cfg, w);
        e.excluded = None;
        e.flagged = None;
    }
    assert_eq!(differences(&cfg), Vec::<String>::new());
}
