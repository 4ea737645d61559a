//! A reviewer's instruments on the small demo. `pipeline status` against `pipeline run`:
//! over a series of edits (a config key, a comment, a manifest row, a stored archive's byte,
//! an output, an old record, another build) status names every cause, and run reruns
//! exactly the stages status says will run (and of those it says may run, the ones whose
//! inputs came out different); a no-op check reads no recorded output whose file status
//! vouches for its hash. Published figures: a rerun within tolerance passes, a changed
//! figure fails the run naming it.

mod common;

use pipeline::stages::RunReason;
use pipeline::status::{StatusDocument, StatusWord, status};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn load(cfg: &Path) -> model::LoadedConfig {
    model::load_config(cfg).unwrap()
}

/// Status, then a run: every stage status says will run ran, every up-to-date one was
/// skipped, and the reasons the run gives are those status gave (status names an input an
/// earlier stage rewrites where the run names the bytes that changed). Returns the status.
fn status_then_run(cfg: &Path) -> (StatusDocument, Vec<bool>) {
    let c = load(cfg);
    let st = status(&c).unwrap();
    let ran = common::run_quiet(&c);
    let mut skipped = Vec::new();
    for (s, r) in st.stages.iter().zip(&ran.stages) {
        assert_eq!(s.stage, r.stage);
        match s.status {
            StatusWord::WillRun => assert!(!r.skipped, "{} was to run: {st:#?}", s.stage),
            StatusWord::UpToDate => assert!(r.skipped, "{} was up to date: {st:#?}", s.stage),
            StatusWord::MayRun => {}
        }
        if !r.skipped {
            let named: Vec<&RunReason> = s
                .reasons
                .iter()
                .filter(|x| !matches!(x, RunReason::InputRewritten { .. }))
                .collect();
            let given: Vec<&RunReason> = r
                .reasons
                .iter()
                .filter(|x| !matches!(x, RunReason::InputChanged { .. }))
                .collect();
            assert_eq!(named, given, "{}", s.stage);
        }
        skipped.push(r.skipped);
    }
    let after = status(&c).unwrap();
    assert!(after.up_to_date, "after the run: {after:#?}");
    (st, skipped)
}

fn words(st: &StatusDocument) -> Vec<StatusWord> {
    st.stages.iter().map(|s| s.status).collect()
}

fn reasons<'a>(st: &'a StatusDocument, stage: &str) -> &'a [RunReason] {
    &st.stages.iter().find(|s| s.stage == stage).unwrap().reasons
}

use StatusWord::{MayRun, UpToDate, WillRun};

#[test]
fn status_names_every_cause_and_run_reruns_exactly_those_stages() {
    let d = tempfile::tempdir().unwrap();
    common::small_demo(d.path());
    let cfg = d.path().join("pipeline.yaml");

    // Nothing ran yet.
    let (st, _) = status_then_run(&cfg);
    assert_eq!(words(&st), vec![WillRun; 4]);
    assert_eq!(reasons(&st, "audit"), &[RunReason::NoRecord]);

    // A config key: every stage reads the config.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let seed_line = text
        .lines()
        .skip_while(|l| !l.starts_with("search:"))
        .find(|l| l.trim_start().starts_with("seed:"))
        .unwrap()
        .to_string();
    let old_seed = seed_line.split(':').nth(1).unwrap().trim().to_string();
    std::fs::write(&cfg, text.replacen(&seed_line, "  seed: 424242", 1)).unwrap();
    let (st, _) = status_then_run(&cfg);
    assert_eq!(words(&st), vec![WillRun; 4]);
    assert_eq!(
        reasons(&st, "replay"),
        &[RunReason::ConfigKey {
            key: "search.seed".into(),
            old: Some(old_seed),
            new: Some("424242".into()),
        }]
    );

    // A comment: no key changed, but the text (whose hash the outputs record) did.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("# a reviewer's note\n{text}")).unwrap();
    let (st, _) = status_then_run(&cfg);
    assert_eq!(words(&st), vec![WillRun; 4]);
    assert_eq!(reasons(&st, "ingest"), &[RunReason::ConfigText]);

    // A manifest row moved to another file location (same bytes): ingest and audit read
    // the manifest; replay and report read only what audit rewrites.
    let manifest = d.path().join("manifest.csv");
    let mtext = std::fs::read_to_string(&manifest).unwrap();
    let row = mtext.lines().nth(1).unwrap();
    let archive_id = row.split(',').next().unwrap().to_string();
    let old = row.rsplit(',').next().unwrap().to_string();
    let new = format!("moved/{old}");
    std::fs::create_dir_all(d.path().join(&new).parent().unwrap()).unwrap();
    std::fs::copy(d.path().join(&old), d.path().join(&new)).unwrap();
    let edited = row.replace(&format!(",{old}"), &format!(",{new}"));
    std::fs::write(&manifest, mtext.replacen(row, &edited, 1)).unwrap();
    let (st, _) = status_then_run(&cfg);
    assert_eq!(words(&st), vec![WillRun, WillRun, MayRun, MayRun]);
    assert_eq!(
        reasons(&st, "audit"),
        &[RunReason::ManifestRowChanged {
            archive_id: archive_id.clone()
        }]
    );
    assert!(
        reasons(&st, "replay")
            .iter()
            .all(|r| matches!(r, RunReason::InputRewritten { stage, .. } if stage == "audit")),
        "{st:#?}"
    );

    // One byte of a stored archive, its size and modification time kept: the change time
    // still differs, so the blob is read, and ingest runs (and repairs the store) while
    // audit, whose input comes out as recorded, may run.
    let c = load(&cfg);
    let stored = model::run_dir::stored_archive_relative(&c.archives[0].sha256);
    let path = c.run_dir.join(&stored);
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0xff;
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (st, skipped) = status_then_run(&cfg);
    assert_eq!(words(&st), vec![WillRun, MayRun, MayRun, MayRun]);
    assert_eq!(
        reasons(&st, "ingest"),
        &[RunReason::OutputChanged { file: stored }]
    );
    assert!(skipped[1], "the repaired blob has the recorded bytes");

    // An output of replay: replay runs, report may.
    let replay_json = c.run_dir.join("replay.json");
    let t = std::fs::read_to_string(&replay_json).unwrap();
    std::fs::write(&replay_json, t.replacen('{', "{ ", 1)).unwrap();
    let (st, _) = status_then_run(&cfg);
    assert_eq!(words(&st), vec![UpToDate, UpToDate, WillRun, MayRun]);
    assert_eq!(
        reasons(&st, "replay"),
        &[RunReason::OutputChanged {
            file: "replay.json".into()
        }]
    );

    // A record of an older format.
    let record = c.run_dir.join(".stages/report.json");
    let r = std::fs::read_to_string(&record).unwrap();
    std::fs::write(
        &record,
        r.replacen(
            &format!(
                "\"format_version\": {}",
                pipeline::stages::STAGE_RECORD_VERSION
            ),
            "\"format_version\": 1",
            1,
        ),
    )
    .unwrap();
    let (st, _) = status_then_run(&cfg);
    assert_eq!(words(&st), vec![UpToDate, UpToDate, UpToDate, WillRun]);
    assert_eq!(
        reasons(&st, "report"),
        &[RunReason::RecordFormat {
            found: Some(1),
            expected: pipeline::stages::STAGE_RECORD_VERSION
        }]
    );
}

/// Once a check has read an output (its hash taken well after its last change), the next
/// check trusts its file status and reads nothing; a file rewritten in place with the same
/// size and its old modification time is still read, by its change time.
#[test]
fn a_no_op_check_reads_no_output_its_status_vouches_for() {
    let d = tempfile::tempdir().unwrap();
    let c = common::small_demo(d.path());
    common::run_quiet(&c);
    // Past the racy margin, so the run that re-reads the outputs stamps them for good.
    std::thread::sleep(std::time::Duration::from_nanos(
        pipeline::stages::RACY_MARGIN_NS as u64 + 100_000_000,
    ));
    let again = common::run_quiet(&c);
    assert!(again.stages.iter().all(|s| s.skipped));
    let st = status(&c).unwrap();
    assert!(st.up_to_date);
    for s in &st.stages {
        assert_eq!(s.outputs_hashed, 0, "{s:?}");
        assert!(s.outputs_trusted_by_status > 0, "{s:?}");
    }
    let attempts = c.run_dir.join("attempts.parquet");
    let mtime = std::fs::metadata(&attempts).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&attempts).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 1;
    std::fs::write(&attempts, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&attempts)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let st = status(&c).unwrap();
    assert_eq!(words(&st), vec![UpToDate, WillRun, MayRun, MayRun]);
    assert_eq!(
        reasons(&st, "audit"),
        &[RunReason::OutputChanged {
            file: "attempts.parquet".into()
        }]
    );
}

/// The command: text output (snapshot), exit 1 with the stages named when something would
/// run, exit 0 when nothing would; another build is named with both executables' hashes.
#[test]
fn the_status_command_prints_reasons_and_exits_by_them() {
    let d = tempfile::tempdir().unwrap();
    common::small_demo(d.path());
    let cfg = d.path().join("pipeline.yaml");
    let bin = common::bin("pipeline");
    let status_of = |bin: &Path, json: bool| {
        let mut cmd = Command::new(bin);
        cmd.arg("status").arg(&cfg);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    common::succeeded(
        Command::new(&bin)
            .args(["run", "--quiet"])
            .arg(&cfg)
            .output()
            .unwrap(),
    );
    let up = status_of(&bin, false);
    assert_eq!(up.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8_lossy(&up.stdout), @r"
    ingest   up to date
    audit    up to date
    replay   up to date
    report   up to date
    ");

    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replacen("order: [tmax, deepswe]", "order: [deepswe, tmax]", 1),
    )
    .unwrap();
    let out = status_of(&bin, false);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout), @r#"
    ingest   will run
             - config key search.order: ["tmax","deepswe"] -> ["deepswe","tmax"]
    audit    will run
             - config key search.order: ["tmax","deepswe"] -> ["deepswe","tmax"]
    replay   will run
             - config key search.order: ["tmax","deepswe"] -> ["deepswe","tmax"]
    report   will run
             - config key search.order: ["tmax","deepswe"] -> ["deepswe","tmax"]
    "#);
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stderr).trim_end(), @"error: not up to date: ingest (will run), audit (will run), replay (will run), report (will run)");
    std::fs::write(&cfg, text).unwrap();

    // Another build: the executable's bytes differ.
    let other = d.path().join("pipeline-other-build");
    let mut bytes = std::fs::read(&bin).unwrap();
    bytes.push(0);
    std::fs::write(&other, bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = status_of(&other, true);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (old_sha, new_sha) = (common::sha256_of(&bin), common::sha256_of(&other));
    for s in doc["stages"].as_array().unwrap() {
        assert_eq!(s["status"], "will_run", "{s}");
        let r = &s["reasons"][0];
        assert_eq!(r["reason"], "build", "{s}");
        assert_eq!(r["old_executable_sha256"], old_sha.as_str());
        assert_eq!(r["new_executable_sha256"], new_sha.as_str());
    }
    assert_eq!(status_of(&bin, true).status.code(), Some(0));
}

/// The demo's own figures as published figures: within tolerance the run passes and shows
/// the table; one figure moved out of tolerance exits 1 naming it, with run.json and the
/// report saying the same, and every output still written.
#[test]
fn published_figures_pass_within_tolerance_and_a_changed_one_fails_the_run() {
    let d = tempfile::tempdir().unwrap();
    let c = common::small_demo(d.path());
    common::run_quiet(&c);
    let doc = replay::output::read_replay_json(&c.run_dir.join("replay.json")).unwrap();
    let tmax = doc
        .workloads
        .iter()
        .find(|w| w.workload == model::WorkloadId::Tmax)
        .unwrap();
    let (gpu, fifo_cache, bound) = (
        tmax.best_found_h.gpu,
        tmax.fifo_ideal_h.cache,
        tmax.best_bounds_h.gpu,
    );
    let cfg = d.path().join("pipeline.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let replay_line = text
        .lines()
        .skip_while(|l| !l.starts_with("  tmax:"))
        .find(|l| l.trim_start().starts_with("replay:"))
        .unwrap()
        .to_string();
    let publish = |best_found: f64| {
        // Within tolerance: the value off by half its tolerance.
        let figures = format!(
            "{replay_line}\n    published:\n      gpu: {{ best_found_h: {{ value: {best_found}, atol: 0.001 }}, best_bounds_h: {{ min: {} }} }}\n      cache: {{ fifo_ideal_h: {{ value: {}, rtol: 0.0001 }} }}",
            bound - 0.01,
            fifo_cache * (1.0 + 0.00005),
        );
        std::fs::write(&cfg, text.replacen(&replay_line, &figures, 1)).unwrap();
    };
    let bin = common::bin("pipeline");
    let run = || Command::new(&bin).args(["run"]).arg(&cfg).output().unwrap();
    publish(gpu + 0.0005);
    let ok = run();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains("tmax gpu best_found_h"), "{stdout}");
    assert!(!stdout.contains(" NO"), "{stdout}");
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.run_dir.join("run.json")).unwrap())
            .unwrap();
    let published = run_json["published"].as_array().unwrap();
    assert_eq!(published.len(), 3);
    assert!(published.iter().all(|p| p["ok"] == true), "{published:?}");
    let report = std::fs::read_to_string(c.run_dir.join("report.md")).unwrap();
    assert!(report.contains("## Published figures"), "{report}");
    assert!(report.contains("All 3 reproduced."), "{report}");

    // The published best found 1% below the rerun's.
    publish(gpu * 0.99);
    let bad = run();
    assert_eq!(bad.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    let line = stderr.lines().last().unwrap();
    assert!(
        line.starts_with(
            "error: 1 published figure(s) not reproduced: tmax gpu best_found_h (rerun "
        ),
        "{stderr}"
    );
    assert!(
        line.contains(&format!("published {} (atol 0.001)", gpu * 0.99)),
        "{line}"
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.run_dir.join("run.json")).unwrap())
            .unwrap();
    let failed: Vec<&serde_json::Value> = run_json["published"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["ok"] == false)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["figure"], "best_found_h");
    let rel = failed[0]["relative_delta"].as_f64().unwrap();
    assert!((rel - (1.0 / 0.99 - 1.0)).abs() < 1e-9, "{rel}");
    let report = std::fs::read_to_string(c.run_dir.join("report.md")).unwrap();
    assert!(report.contains("1 of 3 **not reproduced**."), "{report}");
    assert!(c.run_dir.join("provenance.json").is_file());
}

/// Rewrite every workload's `expect:` line of a config to the counts its run's audit.json
/// found (a corpus with an archive removed has other counts).
fn expect_what_was_found(cfg: &Path, run_dir: &Path) {
    let doc = audit::output::read_audit_json(&run_dir.join("audit.json")).unwrap();
    let text = std::fs::read_to_string(cfg).unwrap();
    let mut out = Vec::new();
    let mut workload = String::new();
    for line in text.lines() {
        if let Some(w) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':'))
            && !w.starts_with(' ')
        {
            workload = w.to_string();
        }
        if line.trim_start().starts_with("expect:") {
            let s = &doc.workloads[&workload];
            out.push(format!(
                "    expect: {{ audited: {}, included: {} }}",
                s.audited, s.included
            ));
        } else {
            out.push(line.to_string());
        }
    }
    std::fs::write(cfg, out.join("\n") + "\n").unwrap();
}

/// `pipeline diff` of a run against its rerun with another search seed (the config key and
/// the replay's figures and files differ, every audit frame is the same), and against a
/// run with one archive removed (the archive, its attempts' rows with the `audit show`
/// command of each, the cohort counts); a run against itself is equal; an unreadable run
/// exits 2.
#[test]
fn diff_names_what_another_seed_and_a_removed_archive_change() {
    let bin = common::bin("pipeline");
    let (da, db, dc) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    for d in [&da, &db, &dc] {
        common::small_demo(d.path());
    }
    let seed_line = |cfg: &Path| {
        std::fs::read_to_string(cfg)
            .unwrap()
            .lines()
            .skip_while(|l| !l.starts_with("search:"))
            .find(|l| l.trim_start().starts_with("seed:"))
            .unwrap()
            .to_string()
    };
    let cfg_b = db.path().join("pipeline.yaml");
    let text = std::fs::read_to_string(&cfg_b).unwrap();
    std::fs::write(&cfg_b, text.replacen(&seed_line(&cfg_b), "  seed: 99", 1)).unwrap();
    // C: the last archive of the workload with the most archives gone.
    let manifest = dc.path().join("manifest.csv");
    let m = std::fs::read_to_string(&manifest).unwrap();
    let rows: Vec<&str> = m.lines().skip(1).collect();
    let workload_of = |r: &str| r.split(',').nth(1).unwrap().to_string();
    let count = |w: &str| rows.iter().filter(|r| workload_of(r) == w).count();
    let largest = rows
        .iter()
        .map(|r| workload_of(r))
        .max_by_key(|w| count(w))
        .unwrap();
    assert!(count(&largest) > 1);
    let removed_row = rows
        .iter()
        .rev()
        .find(|r| workload_of(r) == largest)
        .unwrap()
        .to_string();
    let removed_id = removed_row.split(',').next().unwrap().to_string();
    std::fs::write(&manifest, m.replacen(&format!("{removed_row}\n"), "", 1)).unwrap();
    let cfg_c = dc.path().join("pipeline.yaml");
    let c = model::load_config(&cfg_c).unwrap();
    let first = pipeline::run::run_all(
        &c,
        &pipeline::run::RunOptions {
            quiet: true,
            ..Default::default()
        },
    );
    assert!(first.is_err(), "the cohort counts no longer hold");
    expect_what_was_found(&cfg_c, &c.run_dir);
    for d in [&da, &db, &dc] {
        common::run_quiet(&model::load_config(&d.path().join("pipeline.yaml")).unwrap());
    }
    let (ra, rb, rc) = (
        da.path().join("run"),
        db.path().join("run"),
        dc.path().join("run"),
    );

    let seed = pipeline::diff::diff(&ra, &rb).unwrap();
    assert!(!seed.equal);
    assert!(seed.build.is_none());
    let keys: Vec<&str> = seed.config.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["search.seed"]);
    assert_eq!(seed.config[0].b.as_deref(), Some("99"));
    assert!(seed.archives.is_empty());
    assert!(seed.cohort.is_empty());
    for f in &seed.frames {
        assert_eq!((f.added, f.removed, f.changed), (0, 0, 0), "{}", f.file);
    }
    let status = |d: &pipeline::diff::DiffDocument, path: &str| {
        d.files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.status.clone())
            .unwrap()
    };
    assert_eq!(status(&seed, "attempts.parquet"), "identical");
    assert_eq!(status(&seed, "replay.json"), "different");
    assert!(
        seed.figures
            .iter()
            .filter(|f| f.figure == "fifo_ideal_h")
            .all(|f| !f.changed)
    );

    let gone = pipeline::diff::diff(&ra, &rc).unwrap();
    assert!(!gone.equal);
    assert_eq!(gone.archives.len(), 1, "{:?}", gone.archives);
    assert_eq!(gone.archives[0].archive_id, removed_id);
    assert_eq!(gone.archives[0].change, "removed");
    let attempts = gone
        .frames
        .iter()
        .find(|f| f.file == "attempts.parquet")
        .unwrap();
    assert!(attempts.removed > 0 && attempts.added == 0, "{attempts:?}");
    assert_eq!(attempts.rows_a - attempts.rows_b, attempts.removed);
    let row = &attempts.rows[0];
    assert_eq!(row.change, "removed");
    let cmd = row.audit_show.as_deref().unwrap();
    assert!(
        cmd.starts_with(&format!(
            "audit --config {}",
            ra.join("pipeline.yaml").display()
        )) && cmd.contains(&format!("--attempt {}", row.key["attempt_id"]))
            && cmd.ends_with(&format!("--archive {removed_id}")),
        "{cmd}"
    );
    assert!(
        !gone.cohort.is_empty() && gone.cohort.iter().all(|c| c.workload == largest),
        "{:?}",
        gone.cohort
    );

    // The command: exit codes, and the text's first lines.
    let run = |a: &Path, b: &Path, flag: Option<&str>| {
        let mut cmd = Command::new(&bin);
        cmd.arg("diff").arg(a).arg(b);
        if let Some(f) = flag {
            cmd.arg(f);
        }
        cmd.output().unwrap()
    };
    let same = run(&ra, &ra, None);
    assert_eq!(same.status.code(), Some(0));
    let text = String::from_utf8_lossy(&same.stdout).replace(&ra.display().to_string(), "<a>");
    assert!(text.starts_with("<a> and <a>: equal\n"), "{text}");
    let out = run(&ra, &rb, None);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout)
        .replace(&ra.display().to_string(), "<a>")
        .replace(&rb.display().to_string(), "<b>");
    let head: String = text
        .lines()
        .take_while(|l| !l.starts_with("figures"))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!(head, @r"
    <a> and <b>: different
    config
      search.seed: 20261129 -> 99
    frames
      attempts.parquet: 72 -> 72 rows; 0 added, 0 removed, 0 changed
      requests.parquet: 4943 -> 4943 rows; 0 added, 0 removed, 0 changed
      clipping.parquet: 19 -> 19 rows; 0 added, 0 removed, 0 changed
      exclusions.parquet: 12 -> 12 rows; 0 added, 0 removed, 0 changed
      blobs.parquet: 55 -> 55 rows; 0 added, 0 removed, 0 changed
      attempt_blobs.parquet: 268 -> 268 rows; 0 added, 0 removed, 0 changed
    ");
    let md = run(&ra, &rc, Some("--md"));
    assert_eq!(md.status.code(), Some(1));
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("## Archives") && md.contains(&removed_id),
        "{md}"
    );
    let json = run(&ra, &rc, Some("--json"));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["equal"], false);
    assert_eq!(doc["format_version"], 1);
    let unreadable = run(&ra, &da.path().join("no-such-run"), None);
    assert_eq!(unreadable.status.code(), Some(2));
    let err = String::from_utf8_lossy(&unreadable.stderr);
    assert!(
        err.starts_with("error: cannot read ") && err.contains("provenance.json"),
        "{err}"
    );
}

/// `pipeline lineage`: a replay figure back to its workload's archives only, one attempt's
/// row back to its one archive (with its pins), every file on the way with its stage,
/// build and config keys; a file the run has not, a row no filter matches and a figure
/// replay.json does not hold exit 2.
#[test]
fn lineage_walks_a_figure_and_a_row_back_to_their_archives() {
    let d = tempfile::tempdir().unwrap();
    let c = common::small_demo(d.path());
    common::run_quiet(&c);
    let run_dir = &c.run_dir;
    let tmax_archives: Vec<&model::ArchiveSpec> = c
        .archives
        .iter()
        .filter(|a| a.workload == model::WorkloadId::Tmax)
        .collect();

    let fig = pipeline::lineage::lineage(run_dir, "replay.json#tmax.best_found_h.gpu").unwrap();
    let doc = replay::output::read_replay_json(&run_dir.join("replay.json")).unwrap();
    let gpu = doc
        .workloads
        .iter()
        .find(|w| w.workload == model::WorkloadId::Tmax)
        .unwrap()
        .best_found_h
        .gpu;
    assert_eq!(
        fig.selected.as_deref(),
        Some(serde_json::json!(gpu).to_string().as_str())
    );
    let ids: Vec<&str> = fig.archives.iter().map(|a| a.archive_id.as_str()).collect();
    let want: Vec<&str> = tmax_archives
        .iter()
        .map(|a| a.archive_id.as_str())
        .collect();
    assert_eq!(ids, want);
    assert_eq!(fig.files[0].path, "replay.json");
    assert_eq!(fig.files[0].stage, "replay");
    assert!(
        fig.files[0].config.contains_key("search.seed"),
        "{:?}",
        fig.files[0].config
    );
    assert!(
        fig.files[0]
            .config
            .keys()
            .all(|k| k.starts_with("search.") || k.starts_with("workloads."))
    );
    let stages: BTreeSet<&str> = fig.files.iter().map(|f| f.stage.as_str()).collect();
    assert_eq!(stages, BTreeSet::from(["replay", "audit", "ingest"]));
    // Only the tmax archives' stored blobs are on the way.
    for f in fig.files.iter().filter(|f| f.path.starts_with("store/")) {
        assert!(
            tmax_archives.iter().any(|a| f.path.ends_with(&a.sha256)),
            "{}",
            f.path
        );
        assert_eq!(f.archives.len(), 1, "{f:?}");
    }

    let attempts = run_dir.join("attempts.parquet");
    let df = frames::read_declared(
        &attempts,
        &audit::schema::ATTEMPTS,
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let ids = frames::str_values(&df, &attempts, "attempt_id").unwrap();
    let shas = frames::str_values(&df, &attempts, "archive_sha256").unwrap();
    let (id, sha) = (ids[0].clone().unwrap(), shas[0].clone().unwrap());
    let row =
        pipeline::lineage::lineage(run_dir, &format!("attempts.parquet#attempt_id={id}")).unwrap();
    assert_eq!(row.selected.as_deref(), Some("1 row(s)"));
    assert_eq!(row.archives.len(), 1);
    assert_eq!(row.archives[0].sha256, sha);
    assert!(
        row.archives[0].locations[0].starts_with("file file:"),
        "{:?}",
        row.archives[0]
    );

    let bin = common::bin("pipeline");
    let lineage = |target: &str| {
        Command::new(&bin)
            .arg("lineage")
            .arg(run_dir)
            .arg(target)
            .output()
            .unwrap()
    };
    let out = lineage("replay.json#tmax.best_found_h.gpu");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!(
            "replay.json#tmax.best_found_h.gpu = {}\n",
            serde_json::json!(gpu)
        )),
        "{text}"
    );
    assert!(text.contains("  written by replay, build "), "{text}");
    // The text of one attempt's lineage (the builds and the temporary directory aside).
    let out = lineage(&format!("attempts.parquet#attempt_id={id}"));
    assert_eq!(out.status.code(), Some(0));
    let text: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| match l.split_once(", build ") {
            Some((head, _)) => format!("{head}, build <build>\n"),
            None => format!("{l}\n"),
        })
        .collect::<String>()
        .replace(&id, "<attempt>");
    insta::assert_snapshot!(text, @r#"
    attempts.parquet#attempt_id=<attempt> = 1 row(s)
    config: pipeline.yaml sha256 c5583d046987493567e2099f08772e3e723e7afe09bbc2b145f31b6e18249e20 (every stage reads it)
    attempts.parquet (sha256 3dfe8a76cd7f644df75bb57ece0ecf550f3ed0d4defacb2f1ddb18754c99ba94)
      written by audit, build <build>
      config: sources.manifest="manifest.csv", workloads.deepswe.expect.audited=40, workloads.deepswe.expect.excluded.infrastructure_failure=2, workloads.deepswe.expect.flagged.llm_query_error=1, workloads.deepswe.expect.included=38, workloads.deepswe.expect.pilot=8, workloads.tmax.expect.audited=24, workloads.tmax.expect.excluded.execution_exception=2, workloads.tmax.expect.flagged={}, workloads.tmax.expect.included=22
      from: store/sha256/1fb97420b2863b2cc43f67b503bdae2d3b01725afecd302e5786ec3073b3c878
    store/sha256/1fb97420b2863b2cc43f67b503bdae2d3b01725afecd302e5786ec3073b3c878 (sha256 1fb97420b2863b2cc43f67b503bdae2d3b01725afecd302e5786ec3073b3c878)
      written by ingest, build <build>
      config: sources.gcs.endpoint=null, sources.hf.endpoint=null, sources.locations=["file"], sources.manifest="manifest.csv"
      from archives: tmax-000
    archives (1)
      tmax-000 (tmax): sha256 1fb97420b2863b2cc43f67b503bdae2d3b01725afecd302e5786ec3073b3c878, 39662 bytes
        file file:archives/tmax-000.tar.gz, verified
    "#);
    for (target, message) in [
        ("nothing.parquet", "lists no output `nothing.parquet`"),
        (
            "attempts.parquet#attempt_id=no-such-attempt",
            "no row of attempts.parquet matches `attempt_id=no-such-attempt`",
        ),
        (
            "attempts.parquet#colour=red",
            "attempts.parquet has no column `colour`",
        ),
        (
            "replay.json#tmax.best_found",
            "has no figure `tmax.best_found`",
        ),
    ] {
        let out = lineage(target);
        assert_eq!(out.status.code(), Some(2), "{target}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error: ") && err.contains(message),
            "{target}: {err}"
        );
    }
}

/// `pipeline export --ro-crate`: the crate of a run passes the field's validator
/// (roc-validator, Provenance Run Crate 0.5, REQUIRED) offline, reads back with ro-crate-py,
/// describes every stage's execution and every file with its recorded SHA256, invents no
/// author, agent or publisher; the validator fails the crate with its workflow language
/// removed; an existing crate is replaced only with --force.
#[test]
fn the_ro_crate_of_a_run_passes_the_validator_and_reads_back() {
    let python = std::env::var("AGENTRACE_PYTHON").expect(
        "AGENTRACE_PYTHON: run the tests through scripts/test (scripts/test-tools sets it)",
    );
    let cache = std::env::var("AGENTRACE_ROCRATE_CACHE")
        .expect("AGENTRACE_ROCRATE_CACHE: run the tests through scripts/test");
    let validator = Path::new(&python).with_file_name("rocrate-validator");
    let d = tempfile::tempdir().unwrap();
    let c = common::small_demo(d.path());
    common::run_quiet(&c);
    let bin = common::bin("pipeline");
    let export = |force: bool| {
        let mut cmd = Command::new(&bin);
        cmd.args(["export", "--ro-crate"]).arg(&c.run_dir);
        if force {
            cmd.arg("--force");
        }
        cmd.output().unwrap()
    };
    common::succeeded(export(false));
    let again = export(false);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists; pass --force to replace it"));
    common::succeeded(export(true));

    let validate = |dir: &Path| {
        let report = d.path().join("validation.json");
        let out = Command::new(&validator)
            .args([
                "-y",
                "--disable-color",
                "validate",
                "--offline",
                "--cache-path",
            ])
            .arg(&cache)
            .args([
                "-p",
                "provenance-run-crate-0.5",
                "-l",
                "required",
                "--no-paging",
                "-f",
                "json",
                "-o",
            ])
            .arg(&report)
            .arg(dir)
            .output()
            .unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), doc)
    };
    let (code, report) = validate(&c.run_dir);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["passed"], true, "{report:#}");

    let crate_path = c.run_dir.join("ro-crate-metadata.json");
    let text = std::fs::read_to_string(&crate_path).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let graph = doc["@graph"].as_array().unwrap();
    let entity = |id: &str| {
        graph
            .iter()
            .find(|e| e["@id"] == id)
            .unwrap_or_else(|| panic!("no {id}"))
    };
    for stage in ["ingest", "audit", "replay", "report"] {
        let action = entity(&format!("#run-{stage}"));
        assert_eq!(action["@type"], "CreateAction");
        assert!(
            action["startTime"].as_str().unwrap().ends_with("+00:00"),
            "{action}"
        );
    }
    let prov: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.run_dir.join("provenance.json")).unwrap())
            .unwrap();
    for o in prov["outputs"].as_array().unwrap() {
        assert_eq!(
            entity(o["path"].as_str().unwrap())["sha256"],
            o["sha256"],
            "{o}"
        );
    }
    for invented in [
        "\"author\"",
        "\"publisher\"",
        "\"agent\"",
        "\"sdDatePublished\"",
    ] {
        assert!(
            !text.contains(invented),
            "{invented} is not something the run recorded"
        );
    }
    let read_back = Command::new(&python)
        .arg("-c")
        .arg(
            "import sys, warnings\nwarnings.simplefilter('error')\nfrom rocrate.rocrate import ROCrate\n\
             c = ROCrate(sys.argv[1])\nassert c.mainEntity.id == 'pipeline.yaml', c.mainEntity.id\n\
             assert 'ComputationalWorkflow' in c.mainEntity.type\n\
             print(len([e for e in c.data_entities if e.get('sha256')]))",
        )
        .arg(&c.run_dir)
        .output()
        .unwrap();
    let read_back = common::succeeded(read_back);
    let hashed: usize = String::from_utf8_lossy(&read_back.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(
        hashed > prov["outputs"].as_array().unwrap().len(),
        "{hashed}"
    );

    // Without the workflow's language the profile's REQUIRED check fails.
    let broken = d.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    for e in std::fs::read_dir(&c.run_dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), broken.join(e.file_name())).unwrap();
        }
    }
    let store = c.run_dir.join("store/sha256");
    std::fs::create_dir_all(broken.join("store/sha256")).unwrap();
    for e in std::fs::read_dir(&store).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), broken.join("store/sha256").join(e.file_name())).unwrap();
    }
    let mut doc = doc.clone();
    for e in doc["@graph"].as_array_mut().unwrap() {
        if e["@id"] == "pipeline.yaml" {
            e.as_object_mut().unwrap().remove("programmingLanguage");
        }
    }
    std::fs::write(broken.join("ro-crate-metadata.json"), doc.to_string()).unwrap();
    let (code, report) = validate(&broken);
    assert_eq!(code, Some(1), "{report:#}");
    assert!(
        report.to_string().contains("workflow-ro-crate-1.0_2.2"),
        "{report:#}"
    );
}
