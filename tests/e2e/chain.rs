//! End to end: the small demo corpus through ingest, audit, replay and report; skipping,
//! provenance, verification and tampering.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pipeline binary, built.
fn pipeline_bin() -> PathBuf {
    common::bin("pipeline")
}

fn demo(dir: &Path) -> PathBuf {
    demo::generate(dir, demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    dir.join("pipeline.yaml")
}

fn run(cfg: &Path) -> pipeline::run::RunSummary {
    common::run_quiet(&model::load_config(cfg).unwrap())
}

#[test]
fn small_demo_runs_end_to_end_then_skips_and_verifies() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    let first = run(&cfg);
    assert!(
        first.stages.iter().all(|s| !s.skipped),
        "{:?}",
        first.stages
    );
    let run_dir = d.path().join("run");
    for f in [
        "ledger.parquet",
        "attempts.parquet",
        "requests.parquet",
        "clipping.parquet",
        "exclusions.parquet",
        "blobs.parquet",
        "attempt_blobs.parquet",
        "audit.json",
        "schedules.parquet",
        "joint_schedules.csv",
        "bounds.parquet",
        "search_trace.parquet",
        "report.html",
        "report.md",
        "provenance.json",
        "run.json",
    ] {
        assert!(run_dir.join(f).is_file(), "{f} missing");
    }
    let second = run(&cfg);
    let skipped: Vec<bool> = second.stages.iter().map(|s| s.skipped).collect();
    assert_eq!(skipped, vec![true, true, true, true]);
    let ok = pipeline::provenance::verify(&run_dir, true).unwrap();
    assert!(ok.differences.is_empty(), "{:?}", ok.differences);
    assert!(ok.checked > 20);
    // The report's coexistence line per workload agrees with joint_schedules.csv: the best
    // GPU and cache values coexist exactly when one selected schedule reaches both.
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    let mut csv = csv::Reader::from_path(run_dir.join("joint_schedules.csv")).unwrap();
    let header = csv.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (w, s, g, c) = (
        col("workload"),
        col("schedule"),
        col("gpu_ideal_h"),
        col("cache_ideal_h"),
    );
    let rows: Vec<csv::StringRecord> = csv.records().map(|r| r.unwrap()).collect();
    for workload in ["tmax", "deepswe"] {
        let mine: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[w] == workload).collect();
        let value = |r: &csv::StringRecord, k: usize| r[k].parse::<f64>().unwrap();
        let best = |name: &str, k: usize| value(mine.iter().find(|r| &r[s] == name).unwrap(), k);
        let (bg, bc) = (best("best_gpu", g), best("best_cache", c));
        let coexist = mine
            .iter()
            .any(|r| value(r, g) <= bg * (1.0 + 1e-9) && value(r, c) <= bc * (1.0 + 1e-9));
        let line = report
            .lines()
            .find(|l| l.starts_with(&format!("- {workload}: the best GPU and cache values")))
            .unwrap_or_else(|| panic!("no coexistence line for {workload}"));
        assert_eq!(line.contains("do **not** coexist"), !coexist, "{line}");
        if !coexist {
            assert!(line.ends_with("this does not prove a joint optimum impossible."));
        }
    }
}

/// The run keeps the config text it was loaded from as its snapshot, not a later read of
/// the file at the config's path: the embedded run started in a directory that holds
/// another `pipeline.yaml` snapshots (and hashes) the embedded text, and verifies.
#[test]
fn a_run_keeps_the_config_it_ran_even_when_the_file_at_its_path_differs() {
    let d = tempfile::tempdir().unwrap();
    let cfg_path = demo(d.path());
    let ran = std::fs::read_to_string(&cfg_path).unwrap();
    let other = format!("# another study's config, not the one that runs\n{ran}");
    std::fs::write(&cfg_path, &other).unwrap();
    common::run_quiet(&model::config::load_config_str(&cfg_path, &ran).unwrap());
    let run_dir = d.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run_dir.join("pipeline.yaml")).unwrap(),
        ran
    );
    let rep = pipeline::provenance::verify(&run_dir, true).unwrap();
    assert!(rep.differences.is_empty(), "{:?}", rep.differences);
    // The provenance names the build that wrote it: this test's own executable.
    let prov: pipeline::provenance::Provenance =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("provenance.json")).unwrap())
            .unwrap();
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert_eq!(
        prov.build.executable_sha256,
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&me))
    );
    assert!(
        rep.build.contains("verified by the same executable"),
        "{}",
        rep.build
    );
    let head = Command::new("git")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    if head.status.success() {
        let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
        assert_eq!(prov.build.git_commit.as_deref(), Some(head.as_str()));
        assert!(prov.build.git_dirty.is_some());
    }
}

/// `verify` re-derives the ledger from the store: a ledger whose row for an archive no
/// longer carries the stored bytes' hash (rewritten, with provenance's hash of it updated
/// to match) is named; and provenance's pins must be the ledger's.
#[test]
fn verify_rederives_the_ledger_from_the_store_and_checks_the_pins() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    run(&cfg);
    let run_dir = d.path().join("run");
    let ledger_path = run_dir.join("ledger.parquet");
    let prov_path = run_dir.join("provenance.json");
    let original_prov = std::fs::read_to_string(&prov_path).unwrap();
    let mut rows = ingest::ledger::read_ledger(&ledger_path).unwrap();
    let victim = rows[0].archive_id.clone();
    rows[0].actual_sha256 = Some("0".repeat(64));
    ingest::ledger::write_ledger(&ledger_path, &rows).unwrap();
    let mut prov: pipeline::provenance::Provenance = serde_json::from_str(&original_prov).unwrap();
    let new_hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        std::fs::read(&ledger_path).unwrap(),
    ));
    for o in &mut prov.outputs {
        if o.path == "ledger.parquet" {
            o.sha256 = new_hash.clone();
        }
    }
    std::fs::write(&prov_path, serde_json::to_string_pretty(&prov).unwrap()).unwrap();
    let rep = pipeline::provenance::verify(&run_dir, true).unwrap();
    assert_eq!(rep.differences.len(), 1, "{:?}", rep.differences);
    assert!(
        rep.differences[0].contains(&format!(
            "archive `{victim}` is verified in the store, but the ledger has no good row"
        )),
        "{:?}",
        rep.differences
    );
    // Pins: a provenance whose archive names another location than the ledger's.
    let mut prov: pipeline::provenance::Provenance = serde_json::from_str(&original_prov).unwrap();
    // (the ledger restored: written again from its original rows, it hashes as before)
    rows[0].actual_sha256 = Some(rows[0].expected_sha256.clone());
    ingest::ledger::write_ledger(&ledger_path, &rows).unwrap();
    prov.archives[0].locations[0].uri = "file:elsewhere.tar.gz".into();
    std::fs::write(&prov_path, serde_json::to_string_pretty(&prov).unwrap()).unwrap();
    let rep = pipeline::provenance::verify(&run_dir, false).unwrap();
    assert_eq!(rep.differences.len(), 1, "{:?}", rep.differences);
    assert!(
        rep.differences[0].contains(&format!(
            "archive `{}`: its locations and pins differ from the ledger's",
            prov.archives[0].archive_id
        )),
        "{:?}",
        rep.differences
    );
}

fn flip_byte(p: &Path) {
    let mut b = std::fs::read(p).unwrap();
    let i = b.len() / 2;
    b[i] ^= 0x01;
    std::fs::write(p, b).unwrap();
}

#[test]
fn verify_names_the_changed_file() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    run(&cfg);
    let run_dir = d.path().join("run");
    let targets: Vec<PathBuf> = {
        let store = std::fs::read_dir(run_dir.join("store/sha256"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .next()
            .unwrap();
        // Every declared output of every stage (the registry's list) is covered.
        let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
        let mut files: Vec<PathBuf> = pipeline::stages::STAGES
            .iter()
            .flat_map(|s| s.outputs(&cfg))
            .filter(|o| !o.starts_with("store/"))
            .map(|o| run_dir.join(o))
            .collect();
        for named in [
            "replay.json",
            "pareto.parquet",
            "audit.json",
            "ledger.parquet",
        ] {
            assert!(
                files.contains(&run_dir.join(named)),
                "{named} is not hashed"
            );
        }
        files.push(store);
        files
    };
    for t in targets {
        let keep = std::fs::read(&t).unwrap();
        flip_byte(&t);
        let r = pipeline::provenance::verify(&run_dir, false).unwrap();
        assert_eq!(r.differences.len(), 1, "{:?}", r.differences);
        assert!(
            r.differences[0].starts_with(&t.display().to_string()),
            "{:?} should name {}",
            r.differences,
            t.display()
        );
        std::fs::write(&t, keep).unwrap();
    }
    let r = pipeline::provenance::verify(&run_dir, false).unwrap();
    assert!(r.differences.is_empty());
}

#[test]
fn two_run_directories_give_identical_output_hashes() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    run(&demo(a.path()));
    run(&demo(b.path()));
    let outputs = |d: &Path| -> Vec<(String, String)> {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("run/provenance.json")).unwrap())
                .unwrap();
        v["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["path"].as_str().unwrap().to_string(),
                    o["sha256"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (oa, ob) = (outputs(a.path()), outputs(b.path()));
    let differing: Vec<&String> = oa
        .iter()
        .zip(&ob)
        .filter(|(x, y)| x != y)
        .map(|(x, _)| &x.0)
        .collect();
    assert!(
        differing.is_empty(),
        "outputs differ between run directories: {differing:?}"
    );
    assert_eq!(oa.len(), ob.len());
    assert_eq!(
        std::fs::read(a.path().join("run/provenance.json")).unwrap(),
        std::fs::read(b.path().join("run/provenance.json")).unwrap()
    );
}

#[test]
fn cli_errors_are_one_line_with_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("run_dir: run", "run_dir: run\ncolour: red");
    std::fs::write(&cfg, text).unwrap();
    let out = Command::new(pipeline_bin())
        .arg("run")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err =
        String::from_utf8_lossy(&out.stderr).replace(&d.path().display().to_string(), "<dir>");
    insta::assert_snapshot!(err.trim_end(), @"error: <dir>/pipeline.yaml:4: field `colour`: unknown field `colour`, expected one of `version`, `run_dir`, `sources`, `workloads`, `search`, `ingest`, `audit`");
    let out = Command::new(pipeline_bin())
        .args(["verify"])
        .arg(d.path().join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err =
        String::from_utf8_lossy(&out.stderr).replace(&d.path().display().to_string(), "<dir>");
    insta::assert_snapshot!(err.trim_end(), @r"
    error: cannot read <dir>/nowhere/provenance.json

    Caused by:
        No such file or directory (os error 2)
    ");
}

/// Every frame opens in pyarrow (an independent Parquet reader) with the checked-in schema.
#[test]
fn frames_open_in_pyarrow_with_the_documented_schema() {
    let d = tempfile::tempdir().unwrap();
    run(&demo(d.path()));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(testkit::python())
        .arg(root.join("tests/e2e/read_frames.py"))
        .arg(d.path().join("run"))
        .arg(root.join("schemas"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pyarrow check failed (scripts/test installs pyarrow): {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    // The six audit frames at least; every frame with a schema under schemas/ is checked.
    let n: usize = stdout
        .lines()
        .last()
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(n >= 6, "{stdout}");
}

/// `pipeline --help` lists exactly the stages `pipeline run` runs (`pipeline::stages::STAGES`),
/// in their order, each explained on one line of its own.
#[test]
fn help_explains_each_stage_in_a_line() {
    let out = common::run_ok(Command::new(pipeline_bin()).arg("--help"));
    let text = String::from_utf8_lossy(&out.stdout);
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.ends_with("stage by stage:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let named: Vec<(&str, &str)> = block
        .iter()
        .map(|l| {
            let l = l.trim_start();
            let (name, rest) = l.split_once(' ').unwrap_or((l, ""));
            (name, rest.trim())
        })
        .collect();
    let names: Vec<&str> = named.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, pipeline::stages::stage_names(), "{text}");
    for (name, what) in &named {
        assert!(
            what.split_whitespace().count() >= 5,
            "stage `{name}` is not explained: `{what}`"
        );
    }
}

/// Stages are fingerprinted with the build identity (the executable's SHA256): the same
/// binary skips a finished run, a different build (here the same binary with one byte
/// appended, which still runs) reruns every stage instead of keeping another build's
/// outputs.
#[test]
fn a_different_build_reruns_the_stages() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    let bin = pipeline_bin();
    let stages_skipped = |exe: &Path| -> Vec<bool> {
        let out = common::run_ok(
            Command::new(exe)
                .args(["run", "--quiet", "--json"])
                .arg(&cfg),
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["skipped"].as_bool().unwrap())
            .collect()
    };
    assert_eq!(stages_skipped(&bin), vec![false; 4]);
    assert_eq!(stages_skipped(&bin), vec![true; 4]);
    let other = d.path().join("pipeline-other-build");
    let mut bytes = std::fs::read(&bin).unwrap();
    bytes.push(0);
    std::fs::write(&other, bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(stages_skipped(&other), vec![false; 4]);
    assert_eq!(stages_skipped(&other), vec![true; 4]);
}

/// The ingest and audit fingerprints cover every manifest column, not only each archive's
/// id, SHA256 and size: moving an archive to another file location (same bytes) reruns
/// ingest, and an unchanged manifest skips again.
#[test]
fn an_edited_manifest_location_reruns_ingest() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    let skipped = |s: &pipeline::run::RunSummary| -> Vec<bool> {
        s.stages.iter().map(|s| s.skipped).collect()
    };
    assert_eq!(skipped(&run(&cfg)), vec![false; 4]);
    let manifest = d.path().join("manifest.csv");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let row = text.lines().nth(1).unwrap();
    let old = row.rsplit(',').next().unwrap().to_string();
    let new = format!("moved/{old}");
    std::fs::create_dir_all(d.path().join(&new).parent().unwrap()).unwrap();
    std::fs::copy(d.path().join(&old), d.path().join(&new)).unwrap();
    let edited = row.replace(&format!(",{old}"), &format!(",{new}"));
    std::fs::write(&manifest, text.replacen(row, &edited, 1)).unwrap();
    let second = run(&cfg);
    assert!(!second.stages[0].skipped, "{:?}", second.stages);
    assert_eq!(skipped(&run(&cfg)), vec![true; 4]);
}

/// Every file a run writes and every key of its JSON documents is described in
/// docs/FORMAT.md: the names come from a real run, not from a copied list. Keys are checked
/// at the top level and one level into lists of objects (`stages`, `outputs`, ...) and maps
/// of objects (`workloads` of audit.json).
#[test]
fn every_output_file_and_json_key_is_documented() {
    let d = tempfile::tempdir().unwrap();
    run(&demo(d.path()));
    let run_dir = d.path().join("run");
    let format_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/FORMAT.md");
    let format = std::fs::read_to_string(&format_path).unwrap();
    let documented = |name: &str| format.contains(&format!("`{name}`"));
    let mut missing = Vec::new();
    let mut json_files = Vec::new();
    for e in std::fs::read_dir(&run_dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            if !format.contains(&format!("`{name}/")) {
                missing.push(format!("directory {name}/"));
            }
        } else {
            if !documented(&name) {
                missing.push(format!("file {name}"));
            }
            if name.ends_with(".json") {
                json_files.push(name);
            }
        }
    }
    json_files.sort();
    assert!(json_files.len() >= 6, "{json_files:?}");
    let mut keys_checked = 0;
    for file in &json_files {
        let text = std::fs::read_to_string(run_dir.join(file)).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut check = |key: &str, place: String| {
            keys_checked += 1;
            if !documented(key) {
                missing.push(place);
            }
        };
        for (key, value) in doc.as_object().unwrap() {
            check(key, format!("{file}: {key}"));
            let children: Vec<&serde_json::Value> = match value {
                serde_json::Value::Array(items) => items.iter().take(1).collect(),
                serde_json::Value::Object(m) if m.values().all(|v| v.is_object()) => {
                    m.values().collect()
                }
                _ => Vec::new(),
            };
            for child in children.iter().filter_map(|c| c.as_object()) {
                for k in child.keys() {
                    check(k, format!("{file}: {key}.{k}"));
                }
            }
        }
    }
    assert!(keys_checked > 60, "only {keys_checked} keys seen");
    assert!(
        missing.is_empty(),
        "docs/FORMAT.md does not describe: {missing:#?}"
    );
}

/// The registry is the one list of outputs: a run writes exactly the files its stages
/// declare (outputs and run facts) plus the pipeline's own, nothing else below the run
/// directory besides `.stages/` (one record per stage), the lock and the store's location
/// records (one per verified location, `store/locations/`: store metadata checked on read,
/// whose loss only makes a rerun fetch that location again).
#[test]
fn a_run_writes_exactly_the_files_the_registry_declares() {
    let d = tempfile::tempdir().unwrap();
    let config = demo(d.path());
    run(&config);
    let cfg = model::load_config(&config).unwrap();
    let run_dir = d.path().join("run");
    let mut written = Vec::new();
    let mut stack = vec![run_dir.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                written.push(p.strip_prefix(&run_dir).unwrap().display().to_string());
            }
        }
    }
    let records: Vec<&String> = written
        .iter()
        .filter(|f| f.starts_with("store/locations/"))
        .collect();
    assert_eq!(records.len(), cfg.archives.len(), "{records:?}");
    written.retain(|f| f != ".lock" && !f.starts_with("store/locations/"));
    written.sort();
    let mut declared: Vec<String> = pipeline::run::run_files(&cfg);
    for stage in pipeline::stages::STAGES {
        declared.extend(stage.outputs(&cfg));
        declared.push(format!(".stages/{}.json", stage.name()));
    }
    declared.sort();
    declared.dedup();
    assert_eq!(written, declared);
}

/// `pipeline verify` checks `provenance.json`'s format version before reading it: a
/// document of another version is refused as such, naming the file and both versions.
#[test]
fn verify_refuses_a_provenance_document_of_another_version() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("provenance.json"),
        r#"{"format_version": 9, "outputs": []}"#,
    )
    .unwrap();
    let e = pipeline::provenance::verify(d.path(), false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("provenance.json") && e.contains("format_version 9, this build reads version 1"),
        "{e}"
    );
}

/// The exit-code contract of all four binaries (README, docs/ROBUSTNESS.md): a refused
/// configuration exits 2, a stage that runs and fails exits 1, for each binary alone and
/// for `pipeline run`, which maps a stage's refusal (an ingest config error) to 2 as well.
#[test]
fn the_exit_code_contract_holds_for_every_binary() {
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let text = std::fs::read_to_string(d.path().join("pipeline.yaml")).unwrap();
    std::fs::write(d.path().join("bad.yaml"), format!("{text}bogus_key: 1\n")).unwrap();
    let hf = text.replace("locations: [file]", "locations: [hf]");
    assert_ne!(hf, text);
    std::fs::write(d.path().join("hf.yaml"), hf).unwrap();
    let code = |bin: &str, args: &[&str], env: Option<(&str, &str)>| {
        let mut c = Command::new(common::bin(bin));
        c.args(args).current_dir(d.path());
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let not_a_url = Some(("HF_ENDPOINT", "not a url"));
    // (what, binary, arguments, environment, expected exit code)
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a [&'a str],
        Option<(&'a str, &'a str)>,
        i32,
    );
    let table: [Case; 10] = [
        ("unknown key", "ingest", &["--config", "bad.yaml"], None, 2),
        ("unknown key", "audit", &["--config", "bad.yaml"], None, 2),
        ("unknown key", "replay", &["--config", "bad.yaml"], None, 2),
        ("unknown key", "pipeline", &["run", "bad.yaml"], None, 2),
        (
            "endpoint not a URL",
            "ingest",
            &["--config", "hf.yaml"],
            not_a_url,
            2,
        ),
        (
            "endpoint not a URL",
            "pipeline",
            &["run", "hf.yaml"],
            not_a_url,
            2,
        ),
        (
            "empty store",
            "audit",
            &["--config", "pipeline.yaml"],
            None,
            1,
        ),
        (
            "no audit frames",
            "replay",
            &["--config", "pipeline.yaml"],
            None,
            1,
        ),
        (
            "offline, empty store",
            "ingest",
            &["--config", "pipeline.yaml", "--offline"],
            None,
            1,
        ),
        (
            "offline, empty store",
            "pipeline",
            &["run", "pipeline.yaml", "--offline"],
            None,
            1,
        ),
    ];
    for (what, bin, args, env, want) in table {
        let (got, err) = code(bin, args, env);
        assert_eq!(got, Some(want), "{bin} ({what}): {err}");
        assert!(err.contains("error: "), "{bin} ({what}) says why: {err}");
    }
}

/// `verify` derives what must be listed from the registry and the run's own config, not from
/// the document it checks: a provenance pruned to the ingest's outputs (with the pruned
/// files then replaced by garbage), one that lists nothing, and one whose seed was changed
/// are each named, not "ok".
#[test]
fn verify_holds_provenance_to_the_registry_and_the_config_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    run(&cfg);
    let run_dir = d.path().join("run");
    let prov_path = run_dir.join("provenance.json");
    let good = std::fs::read_to_string(&prov_path).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        f(&mut v);
        std::fs::write(&prov_path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        let rep = pipeline::provenance::verify(&run_dir, true).unwrap();
        std::fs::write(&prov_path, &good).unwrap();
        rep.differences
    };
    let attempts = std::fs::read(run_dir.join("attempts.parquet")).unwrap();
    let replay_json = std::fs::read(run_dir.join("replay.json")).unwrap();
    std::fs::write(run_dir.join("attempts.parquet"), b"garbage").unwrap();
    std::fs::write(run_dir.join("replay.json"), b"garbage").unwrap();
    let pruned = edit(&|v| {
        let keep: Vec<serde_json::Value> = v["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["stage"] == "ingest")
            .cloned()
            .collect();
        v["outputs"] = serde_json::Value::Array(keep);
    });
    for missing in ["attempts.parquet", "replay.json", "report.html"] {
        assert!(
            pruned
                .iter()
                .any(|e| e.contains(&format!("does not list `{missing}`"))),
            "{pruned:?}"
        );
    }
    let empty = edit(&|v| v["outputs"] = serde_json::json!([]));
    assert!(
        empty
            .iter()
            .any(|e| e.contains("does not list `ledger.parquet`, an output of the ingest stage")),
        "{empty:?}"
    );
    std::fs::write(run_dir.join("attempts.parquet"), &attempts).unwrap();
    std::fs::write(run_dir.join("replay.json"), &replay_json).unwrap();
    let seed = edit(&|v| v["seed"] = serde_json::json!(v["seed"].as_u64().unwrap() + 1));
    assert!(
        seed.iter()
            .any(|e| e.contains("seed is") && e.contains("the run's pipeline.yaml says")),
        "{seed:?}"
    );
    let moved = edit(&|v| v["outputs"][0]["stage"] = serde_json::json!("report"));
    assert!(
        moved.iter().any(|e| e.contains("the registry says")),
        "{moved:?}"
    );
    let rep = pipeline::provenance::verify(&run_dir, true).unwrap();
    assert!(rep.differences.is_empty(), "{:?}", rep.differences);
}
