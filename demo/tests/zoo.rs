//! The instance zoo: every instance plans, and each knob changes what it says it changes
//! (compared with `study-1`, which the knob instances share their seed with).

use demo::zoo::{PlanStats, ZooInstance, find, zoo};
use model::WorkloadId;

fn stats(name: &str) -> Vec<PlanStats> {
    find(name).unwrap().stats()
}

fn of(s: &[PlanStats], w: WorkloadId) -> &PlanStats {
    s.iter().find(|x| x.workload == w).unwrap()
}

/// Apply `check(instance, study)` to both workloads.
fn both(name: &str, check: impl Fn(&PlanStats, &PlanStats)) {
    let (s, base) = (stats(name), stats("study-1"));
    for w in WorkloadId::ALL {
        check(of(&s, w), of(&base, w));
    }
}

#[test]
fn the_zoo_has_the_instances_the_search_needs() {
    let all = zoo().unwrap();
    assert!(all.len() >= 12, "{} instances", all.len());
    for name in [
        "study-1",
        "study-2",
        "study-3",
        "tight-cpu",
        "tight-ram",
        "concurrency-only",
        "long-setup",
        "bursty",
        "heavy-tail",
        "few-large-blobs",
        "many-small-blobs",
        "deepswe-5000",
    ] {
        find(name).unwrap();
    }
    let seeds: std::collections::BTreeSet<u64> = ["study-1", "study-2", "study-3"]
        .iter()
        .map(|n| find(n).unwrap().seed)
        .collect();
    assert_eq!(seeds.len(), 3);
    assert!(!seeds.contains(&demo::DEFAULT_SEED));
}

#[test]
fn every_instance_plans_with_consistent_expectations() {
    for inst in zoo().unwrap() {
        let plan = inst.plan();
        for w in WorkloadId::ALL {
            let e = plan.expected.get(&w);
            assert_eq!(e.is_some(), inst.knobs.has(w), "{} {w}", inst.name);
            if let Some(e) = e {
                let census = plan
                    .attempts
                    .iter()
                    .filter(|a| a.workload == w && a.run == model::RunKind::Census)
                    .count() as u64;
                assert_eq!(e.audited, census, "{} {w}", inst.name);
                assert!(e.included > 0 && e.included <= e.audited, "{}", inst.name);
            }
        }
    }
}

#[test]
fn study_instances_have_the_demo_shape_and_caps() {
    let demo = demo::zoo::plan_stats(
        &demo::plan_corpus(demo::Scale::Full, demo::DEFAULT_SEED),
        WorkloadId::Deepswe,
        model::config::ReplayCaps::study(WorkloadId::Deepswe),
    );
    for name in ["study-1", "study-2", "study-3"] {
        let s = stats(name);
        assert_eq!(s.len(), 2);
        let d = of(&s, WorkloadId::Deepswe);
        assert_eq!(d.attempts, demo.attempts);
        assert_eq!(d.caps, demo.caps);
        assert_eq!(d.blobs, demo.blobs);
        assert!(
            (d.duty - demo.duty).abs() < 0.03,
            "{name}: {} vs {}",
            d.duty,
            demo.duty
        );
        assert_eq!(d.late_first_request, 0.0);
    }
}

#[test]
fn cap_knobs_change_only_the_caps() {
    let base = find("study-1").unwrap().plan();
    for name in ["tight-cpu", "tight-ram", "concurrency-only", "caps-only"] {
        let plan = find(name).unwrap().plan();
        assert_eq!(plan.attempts.len(), base.attempts.len());
        for (a, b) in plan.attempts.iter().zip(&base.attempts) {
            assert_eq!(
                (&a.attempt_id, a.gen_start_ns, &a.requests, &a.blobs),
                (&b.attempt_id, b.gen_start_ns, &b.requests, &b.blobs),
                "{name}"
            );
        }
    }
    both("tight-cpu", |s, b| {
        assert!(s.cpu_tightness < 0.6 && b.cpu_tightness > 0.65, "{s:?}");
        assert_eq!(s.ram_tightness, b.ram_tightness);
    });
    both("tight-ram", |s, b| {
        assert!(s.ram_tightness < 0.45 && b.ram_tightness > 0.5, "{s:?}");
    });
    both("concurrency-only", |s, _| {
        let k = s.caps.concurrency as f64;
        assert!(s.caps.cpu_cores >= k * s.max_quota[0], "{s:?}");
        assert!(s.caps.ram_gib >= k * s.max_quota[1], "{s:?}");
    });
    both("caps-only", |s, b| {
        assert!(s.caps.concurrency >= 4 * b.caps.concurrency);
        assert!(s.cpu_tightness < 0.25 && s.ram_tightness < 0.25, "{s:?}");
    });
}

#[test]
fn request_knobs_shape_the_requests() {
    both("long-setup", |s, b| {
        assert!(s.late_first_request >= 0.75, "{s:?}");
        assert_eq!(b.late_first_request, 0.0);
    });
    both("bursty", |s, b| {
        assert!(s.gap_cv > 2.0 * b.gap_cv, "{} vs {}", s.gap_cv, b.gap_cv);
    });
    both("dense-endings", |s, b| {
        assert!(
            s.end_duty_ratio > 1.3 * b.end_duty_ratio,
            "{} vs {}",
            s.end_duty_ratio,
            b.end_duty_ratio
        );
    });
    both("high-duty", |s, b| {
        assert!(
            s.duty > 0.6 && b.duty > 0.25 && b.duty < 0.5,
            "{} / {}",
            s.duty,
            b.duty
        );
    });
    both("low-duty", |s, _| assert!(s.duty < 0.2, "{}", s.duty));
}

#[test]
fn duration_quota_and_blob_knobs_do_what_they_say() {
    both("heavy-tail", |s, b| {
        // Durations end on whole microseconds, so the body's 3,600 s clamp can end 1 us later.
        assert!(s.max_duration_s > 3700.0, "{s:?}");
        assert!(b.max_duration_s <= 3600.001, "{b:?}");
        assert!(s.p99_duration_s > 1.3 * b.p99_duration_s, "{s:?}");
    });
    both("quota-mix", |s, b| {
        assert_eq!(s.max_quota[0], 8.0);
        assert_eq!(b.max_quota[0], 4.0);
    });
    both("few-large-blobs", |s, b| {
        assert!(s.blobs <= b.blobs, "{} vs {}", s.blobs, b.blobs);
        assert!(s.top10_blob_share > 0.75, "{s:?}");
        assert!(
            s.top10_blob_share > 1.5 * b.top10_blob_share,
            "{s:?} vs {b:?}"
        );
    });
    both("many-small-blobs", |s, b| {
        assert!(s.blobs > 2 * b.blobs, "{} vs {}", s.blobs, b.blobs);
        assert!(s.blobs_per_attempt >= b.blobs_per_attempt + 2.0, "{s:?}");
        assert!(s.mean_blob_mib < b.mean_blob_mib, "{s:?}");
    });
    let big = find("deepswe-5000").unwrap();
    let s = big.stats();
    assert_eq!(s.len(), 1);
    assert!(s[0].attempts >= 5000, "{}", s[0].attempts);
}

/// `write`: a one-workload instance writes a pipeline.yaml that loads, with its caps.
#[test]
fn a_zoo_instance_writes_a_loadable_config_with_its_caps() {
    let inst: ZooInstance = serde_yaml::from_str(
        "{ name: tiny, about: x, seed: 4, scale: small, knobs: { workloads: [deepswe], \
         deepswe: { caps: { cpu_cores: 20.5, concurrency: 9 } } } }",
    )
    .unwrap();
    let d = tempfile::tempdir().unwrap();
    let s = inst.generate(d.path()).unwrap();
    assert!(s.archives.iter().all(|a| a.workload == "deepswe"));
    let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
    assert!(cfg.config.workloads.tmax.is_none());
    let dw = cfg.config.workloads.deepswe.as_ref().unwrap();
    assert_eq!(dw.replay.cpu_cores, 20.5);
    assert_eq!(dw.replay.concurrency, 9);
    assert_eq!(dw.replay.ram_gib, 256.0);
    assert_eq!(dw.expect.audited, s.expected["deepswe"].audited);
    assert_eq!(cfg.config.search.order, vec![WorkloadId::Deepswe]);
    let exp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("expected.json")).unwrap()).unwrap();
    assert_eq!(exp["zoo"]["instance"], "tiny");
}
