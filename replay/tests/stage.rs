//! The whole stage on audit frames in a temporary run directory: byte-identical outputs for
//! the same config and for 1 vs 4 threads, the RNG evolution recorded and changed by
//! `search.order`, `replay validate` on the written and on a tampered schedules file, the
//! binary's error rendering, and the frames' agreement with their JSON schemas.

mod common;

use common::*;
use model::WorkloadId;
use replay::ReplayOptions;
use schedule::WorkloadInstance;
use schedule::synthetic::{SyntheticShape, synthetic_instance};
use std::path::{Path, PathBuf};

const BUDGET: &str = "{ perturbations: 8, perturbation_spread: 0.3, local_moves: 64, group_starts: 6, duty_orders: 8, blob_group_orders: 16, lns_rounds: 2, lns_chains: 2, lns_moves: 60, adaptive_batches: 10 }";

fn instances() -> Vec<WorkloadInstance> {
    let mut tmax = SyntheticShape::tmax();
    tmax.tasks = 40;
    tmax.requests_per_attempt = 12;
    let mut deepswe = SyntheticShape::deepswe();
    deepswe.tasks = 24;
    deepswe.repos = 5;
    deepswe.requests_per_attempt = 12;
    vec![
        synthetic_instance(&tmax).unwrap(),
        synthetic_instance(&deepswe).unwrap(),
    ]
}

fn setup(dir: &Path, order: &[WorkloadId]) -> PathBuf {
    let inst = instances();
    write_audit_frames(&dir.join("run"), &inst);
    write_config(dir, &inst, order, 20261129, BUDGET)
}

fn outputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    replay::output::output_files()
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(dir.join("run").join(&f)).unwrap();
            (f, bytes)
        })
        .collect()
}

fn run(config: &Path, threads: usize) -> replay::ReplayReport {
    let cfg = model::load_config(config).unwrap();
    replay::run(
        &cfg,
        &ReplayOptions {
            threads: Some(threads),
        },
    )
    .unwrap()
}

fn json(dir: &Path) -> replay::output::ReplayDocument {
    replay::output::read_replay_json(&dir.join("run/replay.json")).unwrap()
}

#[test]
fn kicks_stall_transfers_and_restarts_give_the_same_outputs_with_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let inst = instances();
    write_audit_frames(&dir.path().join("run"), &inst);
    let budget = BUDGET
        .replace(
            "lns_rounds: 2,",
            "lns_rounds: 4, lns_kick_after: 8, lns_kick_removed: 5, lns_stall_rounds: 1, lns_restart_rounds: 2,",
        )
        .replace("adaptive_batches: 10", "adaptive_batches: 16");
    let config = write_config(dir.path(), &inst, &WorkloadId::ALL, 20261129, &budget);
    let report = run(&config, 1);
    assert_eq!(report.budget.lns_kick_after, 8, "the budget sets it");
    let first = outputs(dir.path());
    run(&config, 4);
    for ((name, a), (_, b)) in first.iter().zip(outputs(dir.path())) {
        assert!(*a == b, "{name} differs between 1 and 4 threads");
    }
    // Restart rounds ran, from the other families' bests.
    for w in &report.workloads {
        let restarts: u64 = w
            .adaptive
            .operators
            .iter()
            .filter(|o| o.operator.starts_with("lns_restart_"))
            .map(|o| o.batches)
            .sum();
        assert!(restarts > 0, "{}: no restart round", w.workload);
    }
    // The tiny instances stall, and the record says when.
    let stalls: Vec<_> = report
        .workloads
        .iter()
        .flat_map(|w| &w.adaptive.stalls)
        .collect();
    assert!(!stalls.is_empty(), "no stall recorded");
    for w in &report.workloads {
        for s in &w.adaptive.stalls {
            assert!(s.rounds >= 1 && s.rounds <= 4, "{s:?}");
        }
        for s in &w.selected {
            assert!(s.validated, "{} {}", w.workload, s.schedule);
        }
    }
}

#[test]
fn same_config_and_any_thread_count_give_byte_identical_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path(), &[WorkloadId::Tmax, WorkloadId::Deepswe]);
    let report = run(&config, 1);
    // The budget the search ran with is the config's, count for count.
    let cfg = model::load_config(&config).unwrap();
    assert_eq!(report.budget.counts, cfg.config.search.budget_counts());
    assert_eq!(report.budget.local_moves, 64, "BUDGET sets it");
    let first = outputs(dir.path());
    run(&config, 4);
    let four = outputs(dir.path());
    run(&config, 1);
    let again = outputs(dir.path());
    for ((name, a), ((_, b), (_, c))) in first.iter().zip(four.iter().zip(&again)) {
        assert!(a == b, "{name} differs between 1 and 4 threads");
        assert!(a == c, "{name} differs between two runs of the same config");
    }
    // Wall-clock facts live only in replay.run.json.
    assert!(dir.path().join("run/replay.run.json").exists());
    // Every selected schedule validated and is feasible against the recorded deadline.
    for w in &report.workloads {
        assert_eq!(
            w.attempts,
            if w.workload == WorkloadId::Tmax {
                40
            } else {
                96
            }
        );
        for s in &w.selected {
            assert!(s.validated);
            assert!(s.makespan_s <= w.deadline_s);
            assert_eq!(s.ideal.cpu, w.fifo_ideal.cpu);
            assert_eq!(s.ideal.ram, w.fifo_ideal.ram);
        }
        let families: Vec<&str> = w.families.iter().map(|f| f.family.as_str()).collect();
        assert_eq!(
            families,
            [
                "priority_order",
                "random_order",
                "task_grouping",
                "perturbation",
                "local_move_gpu",
                "local_move_cache",
                "group_start",
                "first_fit_order",
                "duty_order",
                "blob_group_order",
                "order_move_gpu",
                "order_move_cache",
                "lns_gpu",
                "lns_cache"
            ]
        );
        let evaluated: u64 = w.families.iter().map(|f| f.evaluated).sum();
        assert_eq!(evaluated, w.candidates_evaluated);
        // The seed phase: every order (the fixed priority orders, then the budget's random
        // orders, task groupings, perturbations and local moves per objective, GPU and
        // cache) decoded both ways; then one operator per adaptive batch.
        let b = &report.budget;
        let seed_orders = search::PRIORITY_ORDERS.len() as u64
            + u64::from(b.random_orders)
            + u64::from(b.task_groupings)
            + u64::from(b.perturbations)
            + 2 * u64::from(b.local_moves);
        assert_eq!(w.adaptive.seed_candidates, 2 * seed_orders);
        assert_eq!(
            evaluated,
            w.adaptive.seed_candidates + w.adaptive.candidates
        );
        assert_eq!(w.adaptive.choices.len(), b.adaptive_batches as usize);
        assert!(w.best_found.gpu <= w.seed_profile_best.0);
        assert!(w.best_found.cache <= w.seed_profile_best.1);
        // The seed profile's bests are selected schedules of their own, validated, and
        // carry exactly the values reported as seed_profile_best.
        let names: Vec<&str> = w.selected.iter().map(|s| s.schedule).collect();
        assert_eq!(names, replay::SCHEDULE_NAMES);
        let pick = |name: &str| w.selected.iter().find(|s| s.schedule == name).unwrap();
        assert!(w.selected.iter().all(|s| s.validated));
        assert_eq!(pick("seed_best_gpu").ideal.gpu, w.seed_profile_best.0);
        assert_eq!(pick("seed_best_cache").ideal.cache, w.seed_profile_best.1);
        assert!(pick("seed_best_gpu").candidate <= w.adaptive.seed_candidates);
        assert!(pick("seed_best_cache").candidate <= w.adaptive.seed_candidates);
        // The best valid bound is at least the study's and at most the best found; the
        // Pareto front is validated and holds best_joint.
        for r in schedule::Resource::ALL {
            assert!(w.best_bounds.get(r) >= w.lower_bounds.get(r));
            assert!(w.best_bounds.get(r) <= w.best_found.get(r) * (1.0 + 1e-9));
        }
        assert!(!w.pareto.is_empty());
        assert!(w.pareto.iter().all(|p| p.validated));
        assert_eq!(w.pareto.iter().filter(|p| p.best_joint).count(), 1);
        assert!(
            w.pareto
                .windows(2)
                .all(|p| p[0].gpu_h < p[1].gpu_h && p[0].cache_h > p[1].cache_h)
        );
        let joint = &w.selected[4];
        let jp = w.pareto.iter().find(|p| p.best_joint).unwrap();
        assert_eq!((joint.ideal.gpu, joint.ideal.cache), (jp.gpu_h, jp.cache_h));
    }
    // joint_schedules.csv: header and one row per (workload, schedule), all validated.
    let (header, rows) = read_csv(&first[1].1);
    assert_eq!(
        header,
        [
            "workload",
            "schedule",
            "makespan_s",
            "deadline_s",
            "cpu_ideal_h",
            "ram_ideal_h",
            "gpu_ideal_h",
            "cache_ideal_h",
            "validated"
        ]
    );
    let per_workload = replay::SCHEDULE_NAMES.len();
    assert_eq!(rows.len(), 2 * per_workload);
    assert_eq!(rows[0][..2], ["tmax", "fifo"]);
    assert_eq!(rows[per_workload][..2], ["deepswe", "fifo"]);
    assert!(rows.iter().all(|r| r[8] == "true"));
}

#[test]
fn search_order_is_recorded_and_changes_the_rng_evolution() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    run(
        &setup(a.path(), &[WorkloadId::Tmax, WorkloadId::Deepswe]),
        2,
    );
    run(
        &setup(b.path(), &[WorkloadId::Deepswe, WorkloadId::Tmax]),
        2,
    );
    let (ja, jb) = (json(a.path()), json(b.path()));
    assert_eq!(ja.rng.order, [WorkloadId::Tmax, WorkloadId::Deepswe]);
    assert_eq!(jb.rng.order, [WorkloadId::Deepswe, WorkloadId::Tmax]);
    assert_eq!(ja.rng.seed, 20261129);
    let of = |j: &replay::output::ReplayDocument, w: WorkloadId| {
        j.workloads
            .iter()
            .find(|x| x.workload == w)
            .unwrap()
            .clone()
    };
    // The first workload in the order starts at word 0 of the shared stream; the second
    // continues after it. Swapping the order swaps which workload gets which draws.
    assert_eq!(of(&ja, WorkloadId::Tmax).rng.word_pos_before, 0);
    assert_eq!(of(&jb, WorkloadId::Deepswe).rng.word_pos_before, 0);
    assert_ne!(of(&ja, WorkloadId::Deepswe).rng.word_pos_before, 0);
    assert_eq!(
        of(&ja, WorkloadId::Tmax).rng.family_seeds,
        of(&jb, WorkloadId::Deepswe).rng.family_seeds
    );
    assert_ne!(
        of(&ja, WorkloadId::Tmax).rng.family_seeds,
        of(&jb, WorkloadId::Tmax).rng.family_seeds
    );
    // The order and seed are also in every frame's metadata.
    let md = frames::read_metadata(&b.path().join("run/schedules.parquet")).unwrap();
    assert!(md.contains(&("agentrace.search_order".into(), "deepswe,tmax".into())));
    assert!(md.contains(&("agentrace.seed".into(), "20261129".into())));
    // FIFO and bounds do not depend on the RNG.
    assert_eq!(
        of(&ja, WorkloadId::Deepswe).fifo_ideal_h,
        of(&jb, WorkloadId::Deepswe).fifo_ideal_h
    );
    assert_eq!(
        of(&ja, WorkloadId::Deepswe).best_bounds_h,
        of(&jb, WorkloadId::Deepswe).best_bounds_h
    );
}

/// `replay.json` is read through its type: what was written reads back as the report's
/// records (and re-writes to the same bytes); a renamed field, an unknown schedule name and
/// another format version are refused, naming the file and what was wrong.
#[test]
fn replay_json_reads_through_its_type_and_refuses_drift() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path(), &[WorkloadId::Tmax, WorkloadId::Deepswe]);
    let report = run(&config, 2);
    let path = dir.path().join("run/replay.json");
    let doc = json(dir.path());
    assert_eq!(doc.budget, report.budget);
    assert_eq!(doc.rng.seed, report.seed);
    for (d, w) in doc.workloads.iter().zip(&report.workloads) {
        assert_eq!(d.workload, w.workload);
        assert_eq!(
            d.selected,
            w.selected
                .iter()
                .map(|s| replay::SelectedSchedule {
                    starts_ns: Vec::new(),
                    ..s.clone()
                })
                .collect::<Vec<_>>()
        );
        assert_eq!(d.rng, w.rng);
        assert_eq!(d.adaptive, w.adaptive);
        assert_eq!(d.lp_bounds_h, w.lp_bounds);
        assert_eq!(d.strong_bounds_h, w.strong_bounds);
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let again = tempfile::tempdir().unwrap();
    let rewritten =
        replay::output::write_replay_json(&model::run_dir::RunDir::new(again.path()), &doc)
            .unwrap();
    assert_eq!(std::fs::read_to_string(rewritten).unwrap(), text);
    for (from, to, says) in [
        ("\"deadline_s\"", "\"deadline\"", "deadline"),
        (
            "\"best_gpu\"",
            "\"best_gpu_v2\"",
            "unknown schedule `best_gpu_v2`",
        ),
        (
            "\"format_version\": 1",
            "\"format_version\": 2",
            "format_version 2, this build reads version 1",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
        let e = replay::output::read_replay_json(&path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("replay.json") && e.contains(says), "{e}");
    }
}

#[test]
fn replay_validate_accepts_the_written_file_and_rejects_a_tampered_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path(), &[WorkloadId::Tmax, WorkloadId::Deepswe]);
    run(&config, 2);
    let cfg = model::load_config(&config).unwrap();
    let schedules = dir.path().join("run/schedules.parquet");
    let checks = replay::validate::validate_schedules_file(&cfg, &schedules, EVERY).unwrap();
    assert_eq!(checks.len(), 2 * replay::SCHEDULE_NAMES.len());
    // The recomputed values equal the ones in joint_schedules.csv.
    let (_, rows) = read_csv(&std::fs::read(dir.path().join("run/joint_schedules.csv")).unwrap());
    assert_eq!(rows.len(), checks.len());
    for (c, f) in checks.iter().zip(&rows) {
        let line = f.join(",");
        assert_eq!((&*f[0], &*f[1]), (c.workload.as_str(), c.schedule.as_str()));
        assert_eq!(f[3].parse::<f64>().unwrap(), c.deadline_s);
        for (k, v) in [
            (4, c.values.cpu_h),
            (5, c.values.ram_h),
            (6, c.values.gpu_h),
            (7, c.values.cache_h),
        ] {
            let want: f64 = f[k].parse().unwrap();
            assert!(
                (want - v).abs() <= 1e-9 * want.abs(),
                "{line}: column {k} {want} vs {v}"
            );
        }
    }

    // A CSV copy with one attempt dropped from best_gpu and one duration stretched in fifo.
    let mut rows = schedule_rows(&schedules);
    let mut dropped = None;
    let mut stretched = None;
    rows.retain_mut(|r| {
        if r.workload == "deepswe" && r.schedule == "best_gpu" && dropped.is_none() {
            dropped = Some(r.attempt_id.clone());
            return false;
        }
        if r.workload == "tmax" && r.schedule == "fifo" && stretched.is_none() {
            stretched = Some(r.attempt_id.clone());
            r.end_s += 1.0;
        }
        true
    });
    let text = schedules_csv(&rows);
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, text).unwrap();
    let err = replay::validate::validate_schedules_file(&cfg, &bad, EVERY)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("2 schedule(s) failed validation: tmax/fifo: attempt `"),
        "{err}"
    );
    assert!(
        err.contains(&format!("attempt `{}` runs", stretched.unwrap())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "deepswe/best_gpu: attempt `{}` is missing from the schedule",
            dropped.unwrap()
        )),
        "{err}"
    );

    // The binary: success prints a summary; failure prints `error:` and `Caused by:` and
    // exits non-zero.
    let bin = env!("CARGO_BIN_EXE_replay");
    let ok = std::process::Command::new(bin)
        .args(["validate", "--schedules"])
        .arg(&schedules)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout).lines().count(),
        2 * replay::SCHEDULE_NAMES.len()
    );
    let fail = std::process::Command::new(bin)
        .args(["validate", "--schedules"])
        .arg(&bad)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!fail.status.success());
    let stderr = String::from_utf8_lossy(&fail.stderr);
    assert!(stderr.starts_with("error: validating "), "{stderr}");
    assert!(
        stderr.contains("Caused by:\n    2 schedule(s) failed validation"),
        "{stderr}"
    );
}

/// One row of `schedules.parquet`, as `replay validate` reads it from a CSV.
#[derive(Debug, Clone)]
struct ScheduleCsvRow {
    workload: String,
    schedule: String,
    attempt_id: String,
    start_s: f64,
    end_s: f64,
}

/// The rows of a written `schedules.parquet`, in file order.
fn schedule_rows(path: &Path) -> Vec<ScheduleCsvRow> {
    let df = frames::read_frame(path, "schedules", model::run_dir::FRAME_SCHEMA_VERSION).unwrap();
    let col = |n: &str| df.column(n).unwrap().clone();
    let (w, s, a, st, en) = (
        col("workload"),
        col("schedule"),
        col("attempt_id"),
        col("start_s"),
        col("end_s"),
    );
    let (w, s, a) = (w.str().unwrap(), s.str().unwrap(), a.str().unwrap());
    let (st, en) = (st.f64().unwrap(), en.f64().unwrap());
    (0..df.height())
        .map(|i| ScheduleCsvRow {
            workload: w.get(i).unwrap().to_string(),
            schedule: s.get(i).unwrap().to_string(),
            attempt_id: a.get(i).unwrap().to_string(),
            start_s: st.get(i).unwrap(),
            end_s: en.get(i).unwrap(),
        })
        .collect()
}

/// A CSV's header and rows, read with the csv crate.
fn read_csv(bytes: &[u8]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_reader(bytes);
    let header = r.headers().unwrap().iter().map(str::to_string).collect();
    let rows = r
        .records()
        .map(|rec| rec.unwrap().iter().map(str::to_string).collect())
        .collect();
    (header, rows)
}

/// A schedules CSV (the columns `replay validate` reads) holding `rows`.
fn schedules_csv(rows: &[ScheduleCsvRow]) -> String {
    let mut text = String::from("workload,schedule,attempt_id,start_s,end_s\n");
    for r in rows {
        text.push_str(&format!(
            "{},{},{},{},{}\n",
            r.workload, r.schedule, r.attempt_id, r.start_s, r.end_s
        ));
    }
    text
}

const EVERY: replay::validate::FileCoverage = replay::validate::FileCoverage::EverySelected;

/// An empty schedules file, one lacking tmax's `best_gpu`, and one with
/// tmax rows only are refused (naming what is missing), by the library and by the binary
/// (exit 1); `--partial` validates what a file holds, still refusing an empty file.
#[test]
fn replay_validate_refuses_incomplete_files() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path(), &[WorkloadId::Tmax, WorkloadId::Deepswe]);
    run(&config, 2);
    let cfg = model::load_config(&config).unwrap();
    let rows = schedule_rows(&dir.path().join("run/schedules.parquet"));
    let write = |name: &str, keep: &dyn Fn(&str, &str) -> bool| {
        let kept: Vec<ScheduleCsvRow> = rows
            .iter()
            .filter(|r| keep(&r.workload, &r.schedule))
            .cloned()
            .collect();
        let p = dir.path().join(name);
        std::fs::write(&p, schedules_csv(&kept)).unwrap();
        p
    };
    let empty = write("empty.csv", &|_, _| false);
    let no_tmax_gpu = write("no_tmax_gpu.csv", &|w, s| !(w == "tmax" && s == "best_gpu"));
    let tmax_only = write("tmax_only.csv", &|w, _| w == "tmax");
    let check = |p: &std::path::Path, coverage| {
        replay::validate::validate_schedules_file(&cfg, p, coverage).map_err(|e| e.to_string())
    };
    let e = check(&empty, EVERY).unwrap_err();
    assert!(
        e.ends_with("holds no schedule rows; nothing to validate"),
        "{e}"
    );
    let e = check(&empty, replay::validate::FileCoverage::AsGiven).unwrap_err();
    assert!(
        e.ends_with("holds no schedule rows; nothing to validate"),
        "{e}"
    );
    let e = check(&no_tmax_gpu, EVERY).unwrap_err();
    assert!(
        e.contains("lacks 1 selected schedule(s) of the config: tmax/best_gpu ("),
        "{e}"
    );
    let e = check(&tmax_only, EVERY).unwrap_err();
    assert!(
        e.contains(&format!(
            "lacks {} selected schedule(s) of the config: {}",
            replay::SCHEDULE_NAMES.len(),
            replay::SCHEDULE_NAMES
                .iter()
                .map(|n| format!("deepswe/{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        "{e}"
    );
    let ok = check(&tmax_only, replay::validate::FileCoverage::AsGiven).unwrap();
    assert_eq!(ok.len(), replay::schemas::SCHEDULE_NAMES.len());

    let bin = env!("CARGO_BIN_EXE_replay");
    let cli = |p: &std::path::Path, extra: &[&str]| {
        std::process::Command::new(bin)
            .args(["validate", "--schedules"])
            .arg(p)
            .arg("--config")
            .arg(&config)
            .args(extra)
            .output()
            .unwrap()
    };
    for p in [&empty, &no_tmax_gpu, &tmax_only] {
        let out = cli(p, &[]);
        assert_eq!(out.status.code(), Some(1), "{}", p.display());
    }
    assert!(cli(&tmax_only, &["--partial"]).status.success());
}

#[test]
fn an_excluded_pilot_sharing_an_included_attempts_id_is_not_attached_to_it() {
    // The same attempts with and without an excluded pilot twin of each workload's first
    // attempt (same id, another member prefix, a request and a 1 GiB blob of its own): the
    // twin's rows must not reach the replay, so every value is the same.
    let mut out = Vec::new();
    for twins in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let inst = instances();
        write_audit_frames_with(
            &dir.path().join("run"),
            &inst,
            twins,
            &["attempts", "requests", "attempt_blobs"],
        );
        let config = write_config(dir.path(), &inst, &WorkloadId::ALL, 20261129, BUDGET);
        run(&config, 1);
        out.push(
            ["schedules.parquet", "bounds.parquet", "joint_schedules.csv"]
                .map(|f| std::fs::read(dir.path().join("run").join(f)).unwrap()),
        );
    }
    assert!(out[0] == out[1], "the pilot twin changed the replay");
}

#[test]
fn frames_without_the_trace_columns_match_by_id_unless_an_id_is_shared() {
    // attempts.parquet with the trace columns, requests and attempt_blobs without them (only
    // the columns the replay needs): matched by id, the same values as with them everywhere.
    let mut out = Vec::new();
    for trace_in in [
        &["attempts", "requests", "attempt_blobs"][..],
        &["attempts"][..],
        &[][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let inst = instances();
        write_audit_frames_with(&dir.path().join("run"), &inst, false, trace_in);
        let config = write_config(dir.path(), &inst, &WorkloadId::ALL, 20261129, BUDGET);
        run(&config, 1);
        out.push(
            ["schedules.parquet", "bounds.parquet", "joint_schedules.csv"]
                .map(|f| std::fs::read(dir.path().join("run").join(f)).unwrap()),
        );
    }
    assert!(
        out[0] == out[1] && out[0] == out[2],
        "the matching changed the replay"
    );
    // With a pilot sharing an id, rows without the trace columns cannot be attributed.
    let dir = tempfile::tempdir().unwrap();
    let inst = instances();
    write_audit_frames_with(&dir.path().join("run"), &inst, true, &["attempts"]);
    let config = write_config(dir.path(), &inst, &WorkloadId::ALL, 20261129, BUDGET);
    let cfg = model::load_config(&config).unwrap();
    let err = replay::run(&cfg, &ReplayOptions { threads: Some(1) })
        .unwrap_err()
        .to_string();
    let first = &inst[0].attempts[0].attempt_id;
    assert!(
        err.ends_with(&format!(
            "requests.parquet: column `member_prefix`: tmax attempt `{first}` has 2 rows in attempts.parquet; without `archive_sha256` and `member_prefix` in both frames its rows cannot be told apart"
        )),
        "{err}"
    );
}

#[test]
fn the_binary_runs_the_stage_and_refuses_a_missing_frame() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path(), &[WorkloadId::Tmax, WorkloadId::Deepswe]);
    let bin = env!("CARGO_BIN_EXE_replay");
    let ok = std::process::Command::new(bin)
        .arg("--config")
        .arg(&config)
        .args(["--threads", "2"])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    std::fs::remove_file(dir.path().join("run/requests.parquet")).unwrap();
    let fail = std::process::Command::new(bin)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!fail.status.success());
    let stderr = String::from_utf8_lossy(&fail.stderr);
    assert!(stderr.starts_with("error: replay of "), "{stderr}");
    assert!(stderr.contains("requests.parquet"), "{stderr}");
}

#[test]
fn an_included_attempt_over_a_cap_fails_the_stage_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut inst = instances();
    inst[0].attempts[3].mem_gib = 70.0;
    let bad_id = inst[0].attempts[3].attempt_id.clone();
    write_audit_frames(&dir.path().join("run"), &inst);
    let config = write_config(
        dir.path(),
        &inst,
        &[WorkloadId::Tmax, WorkloadId::Deepswe],
        1,
        BUDGET,
    );
    let cfg = model::load_config(&config).unwrap();
    let err = replay::run(&cfg, &ReplayOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "tmax attempt `{bad_id}` can never be placed: its ram_gib quota 70 exceeds the cap 66 of workloads.tmax.replay"
        )
    );
}

#[test]
fn frames_match_their_json_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path(), &[WorkloadId::Tmax, WorkloadId::Deepswe]);
    run(&config, 2);
    for spec in replay::schemas::FRAMES {
        let file = replay::schemas::file_of(&spec);
        if !file.ends_with(".parquet") {
            continue;
        }
        let df = frames::read_frame(
            &dir.path().join("run").join(&file),
            spec.name,
            model::run_dir::FRAME_SCHEMA_VERSION,
        )
        .unwrap();
        spec.check(&df).unwrap();
    }
    // The checked-in schemas/ are the generated ones (pipeline's drift test checks all).
    let schema_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    for (name, text) in replay::schemas::frame_schemas() {
        let on_disk = std::fs::read_to_string(schema_dir.join(&name)).unwrap_or_default();
        assert_eq!(
            on_disk, text,
            "{name} is stale: run `cargo run -p pipeline -- schemas`"
        );
    }
}
