//! Regression tests of docs/ROBUSTNESS.md (the decisions taken for careless and hostile
//! input), one per decision, across the binaries.

mod common;

use std::process::Command;

/// Item 9: `--threads` (and ingest's `--parallel`) are bounded: 0 and absurd counts are
/// refused by every binary with exit 2 and the accepted range, before any work starts.
#[test]
fn thread_counts_out_of_range_are_refused_by_every_binary() {
    let cases: [(&str, &[&str], &str); 4] = [
        ("pipeline", &["run", "--threads"], "--threads"),
        ("audit", &["--threads"], "--threads"),
        (
            "replay",
            &["--config", "pipeline.yaml", "--threads"],
            "--threads",
        ),
        (
            "ingest",
            &["--config", "pipeline.yaml", "--parallel"],
            "--parallel",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, args, flag) in cases {
        let exe = common::bin(name);
        for bad in ["0", "100000"] {
            let out = Command::new(&exe)
                .args(args)
                .arg(bad)
                .current_dir(dir.path())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{name} {flag} {bad}: {err}");
            assert!(
                err.contains(&format!("{bad} is out of range (1 to 256)")) && err.contains(flag),
                "{name} {flag} {bad}: {err}"
            );
        }
    }
}

/// The small demo corpus written into `dir` and run once, quietly: its config and the
/// options it ran with.
fn run_small_demo(dir: &std::path::Path) -> (model::LoadedConfig, pipeline::run::RunOptions) {
    demo::generate(dir, demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let cfg = model::load_config(&dir.join("pipeline.yaml")).unwrap();
    let opts = pipeline::run::RunOptions {
        quiet: true,
        ..Default::default()
    };
    pipeline::run::run_all(&cfg, &opts).unwrap();
    (cfg, opts)
}

/// A process id that is not running (checked), for planting leftovers of a "killed" run.
fn dead_pid() -> u32 {
    let pid = 4_194_000;
    assert!(!std::path::Path::new("/proc").join(pid.to_string()).exists());
    pid
}

/// Item 7: temporary files of a killed run (a frame's `.NAME.tmp-PID`, a partial download
/// `store/tmp/*.PID.part`) are removed by the next run, even one that skips every stage;
/// those of a process still running are kept; the outputs are untouched.
#[test]
fn leftovers_of_a_killed_run_are_removed_by_the_next_run() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, opts) = run_small_demo(d.path());
    let run_dir = d.path().join("run");
    let ledger = std::fs::read(run_dir.join("ledger.parquet")).unwrap();
    let dead = dead_pid();
    let planted = [
        run_dir.join(format!(".ledger.parquet.tmp-{dead}")),
        run_dir.join(format!(".requests.parquet.tmp-{dead}-7")),
        run_dir.join(format!("store/tmp/arc-1.gcs.{dead}.part")),
    ];
    // pid 1 is always running: its files are somebody's write in progress.
    let live = [
        run_dir.join(".bounds.parquet.tmp-1-0"),
        run_dir.join("store/tmp/arc-1.hf.1.part"),
    ];
    for p in planted.iter().chain(&live) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, vec![0u8; 4096]).unwrap();
    }
    let second = pipeline::run::run_all(&cfg, &opts).unwrap();
    assert!(
        second.stages.iter().all(|s| s.skipped),
        "{:?}",
        second.stages
    );
    for p in &planted {
        assert!(!p.exists(), "{} survived the next run", p.display());
    }
    for p in &live {
        assert!(
            p.exists(),
            "{} of a running process was removed",
            p.display()
        );
    }
    assert_eq!(
        std::fs::read(run_dir.join("ledger.parquet")).unwrap(),
        ledger
    );
}

/// Item 3: one writer per run directory. A run directory whose lock another process holds
/// (here util-linux `flock`, which writes nothing, then a holder that says who it is) is
/// refused by `pipeline run` and by each stage binary, naming the holder, with nothing
/// written; once the holder is killed (SIGKILL: no clean-up), the lock is gone with it and
/// the run goes through.
#[test]
fn a_run_directory_is_written_by_one_process_at_a_time() {
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let config = d.path().join("pipeline.yaml");
    let run_dir = d.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let lock = run_dir.join(model::run_lock::LOCK_FILE);
    std::fs::write(
        &lock,
        "pid 31337: pipeline run since 2026-12-01T00:00:00Z\n",
    )
    .unwrap();
    // `-o`: the lock is held by `flock` itself, not inherited by its `sleep` (long enough
    // for a loaded machine; the holder is killed below), so killing
    // `flock` releases it (the kernel's doing, as for a killed `pipeline run`).
    let mut holder = Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "900"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("flock, of util-linux (essential on Debian)");
    // Wait until the holder has the lock (a probe with -n fails while it is held).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while Command::new("flock")
        .args(["-n"])
        .arg(&lock)
        .arg("true")
        .status()
        .unwrap()
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "flock never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let commands: [(&str, Vec<String>); 4] = [
        ("pipeline", vec!["run".into(), config.display().to_string()]),
        (
            "ingest",
            vec!["--config".into(), config.display().to_string()],
        ),
        (
            "audit",
            vec!["--config".into(), config.display().to_string()],
        ),
        (
            "replay",
            vec!["--config".into(), config.display().to_string()],
        ),
    ];
    for (name, args) in &commands {
        let out = Command::new(common::bin(name)).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} ran beside the holder: {err}");
        assert!(
            err.contains(&format!(
                "run directory {} is in use by pid 31337: pipeline run",
                run_dir.display()
            )),
            "{name}: {err}"
        );
    }
    let written: Vec<_> = std::fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        written,
        vec![model::run_lock::LOCK_FILE.to_string()],
        "written while locked"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = Command::new(common::bin("pipeline"))
        .args(["run", "--quiet"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = std::fs::read_to_string(&lock).unwrap();
    assert!(
        said.starts_with("pid ") && said.contains(": pipeline run since "),
        "{said}"
    );
}

/// Item 5: no command replaces a file it did not write without `--force`. `pipeline run`
/// with `run_dir: .` beside a user's own files refuses (naming them) and leaves them as they
/// were; with `--force` it runs, and from then on the directory is a run's (its `.stages/`)
/// and later runs go through. `pipeline demo --out` refuses a non-empty directory (exit 2,
/// the edited files untouched) unless `--force`.
#[test]
fn user_files_are_not_replaced_without_force() {
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let text = std::fs::read_to_string(d.path().join("pipeline.yaml")).unwrap();
    let other = text.replace("run_dir: run", "run_dir: .");
    assert_ne!(other, text, "the demo config names run_dir: run");
    std::fs::write(d.path().join("other.yaml"), &other).unwrap();
    let user_report = "my own notes, not a report\n";
    std::fs::write(d.path().join("report.md"), user_report).unwrap();
    let run = |extra: &[&str]| {
        Command::new(common::bin("pipeline"))
            .args(["run", "--quiet"])
            .args(extra)
            .arg(d.path().join("other.yaml"))
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("already holds files that no run wrote there")
            && err.contains("report.md, pipeline.yaml")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("pipeline.yaml")).unwrap(),
        text
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("report.md")).unwrap(),
        user_report
    );
    assert!(!d.path().join("ledger.parquet").exists());
    let out = run(&["--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("pipeline.yaml")).unwrap(),
        other
    );
    let out = run(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // pipeline demo --out: an edited config in the target directory is kept.
    let corpus = tempfile::tempdir().unwrap();
    let demo = |extra: &[&str]| {
        Command::new(common::bin("pipeline"))
            .args(["demo", "--scale", "small", "--out"])
            .arg(corpus.path())
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(demo(&[]).status.success(), "an empty directory is fine");
    let edited = "# my edits\n";
    std::fs::write(corpus.path().join("pipeline.yaml"), edited).unwrap();
    let out = demo(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not empty; pass --force"), "{err}");
    assert_eq!(
        std::fs::read_to_string(corpus.path().join("pipeline.yaml")).unwrap(),
        edited
    );
    assert!(demo(&["--force"]).status.success());
    assert_ne!(
        std::fs::read_to_string(corpus.path().join("pipeline.yaml")).unwrap(),
        edited
    );
}

/// Item 1: a stage's fingerprint covers every input it declares. After `ingest` alone
/// rewrites the ledger (its rows become `in_store`), `pipeline run` reruns ingest and the
/// report, which reads the ledger (its inputs are the ledger and the audit's and replay's
/// outputs), so `verify` passes on the result; the audit (manifest and stored archives) and
/// the replay (audit frames), whose inputs did not change, are skipped.
#[test]
fn a_rerun_after_ingest_alone_refreshes_every_stage_that_reads_the_ledger() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, opts) = run_small_demo(d.path());
    let run_dir = d.path().join("run");
    let ledger_before = std::fs::read(run_dir.join("ledger.parquet")).unwrap();
    ingest::run(&cfg, &ingest::IngestOptions::default()).unwrap();
    assert_ne!(
        std::fs::read(run_dir.join("ledger.parquet")).unwrap(),
        ledger_before,
        "the second ingest should record in_store rows"
    );
    let second = pipeline::run::run_all(&cfg, &opts).unwrap();
    let ran: Vec<(&str, bool)> = second
        .stages
        .iter()
        .map(|s| (s.stage.as_str(), !s.skipped))
        .collect();
    assert_eq!(
        ran,
        [
            ("ingest", true),
            ("audit", false),
            ("replay", false),
            ("report", true)
        ]
    );
    let verified = pipeline::provenance::verify(&run_dir, true).unwrap();
    assert!(
        verified.differences.is_empty(),
        "{:?}",
        verified.differences
    );
}

/// Item 5 for the stage binaries: `ingest`, `audit` and `replay` run alone do not replace a
/// file they would write in a directory no command of this toolkit has written to (exit 2,
/// naming it, the file intact); `--force` does, and once a command has written there (its
/// `.lock` marks the directory) the others go ahead.
#[test]
fn stage_binaries_do_not_replace_files_they_did_not_write() {
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let text = std::fs::read_to_string(d.path().join("pipeline.yaml")).unwrap();
    std::fs::write(
        d.path().join("other.yaml"),
        text.replace("run_dir: run", "run_dir: mine"),
    )
    .unwrap();
    let mine = d.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    let planted = [
        ("ingest", "ledger.parquet"),
        ("audit", "audit.json"),
        ("replay", "replay.run.json"),
    ];
    for (_, file) in planted {
        std::fs::write(mine.join(file), "a user's file\n").unwrap();
    }
    let stage = |name: &str, extra: &[&str]| {
        Command::new(common::bin(name))
            .arg("--config")
            .arg(d.path().join("other.yaml"))
            .args(extra)
            .output()
            .unwrap()
    };
    for (name, file) in planted {
        let out = stage(name, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains("no run wrote there") && err.contains(file) && err.contains("--force"),
            "{name}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(mine.join(file)).unwrap(),
            "a user's file\n",
            "{name} replaced {file}"
        );
    }
    assert!(!mine.join(".lock").exists(), "a refusal writes nothing");
    let out = stage("ingest", &["--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(mine.join(".lock").exists());
    let out = stage("audit", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(
        std::fs::read_to_string(mine.join("audit.json")).unwrap(),
        "a user's file\n"
    );
}

/// Every binary ends the same way (`model::exit`): a bad flag and a refused config exit
/// with [`model::exit::Exit::Refused`]'s code, a failure with `Failed`'s, and every error
/// prints in one layout (`error:`, a blank line, `Caused by:`, one indented line a cause).
#[test]
fn every_binary_ends_with_the_codes_of_one_exit_type_and_one_error_layout() {
    use model::exit::Exit;
    let d = tempfile::tempdir().unwrap();
    let cfg = common::small_demo(d.path());
    let good = cfg.path.display().to_string();
    let bad = d.path().join("bad.yaml");
    let text = std::fs::read_to_string(&cfg.path).unwrap();
    std::fs::write(
        &bad,
        text.replace("run_dir: run", "run_dir: run\ncolour: red"),
    )
    .unwrap();
    let bad = bad.display().to_string();
    let binaries = ["pipeline", "ingest", "audit", "replay"];
    let config_args = |name: &str, config: &str| -> Vec<String> {
        match name {
            "pipeline" => vec!["run".into(), "--quiet".into(), config.into()],
            "ingest" => vec!["--quiet".into(), "--config".into(), config.into()],
            _ => vec!["--config".into(), config.into()],
        }
    };
    let run = |name: &str, args: &[String]| {
        let out = Command::new(common::bin(name))
            .args(args)
            .current_dir(d.path())
            .env_remove("HF_TOKEN")
            .output()
            .unwrap();
        let err =
            String::from_utf8_lossy(&out.stderr).replace(&*d.path().to_string_lossy(), "<dir>");
        (out.status.code(), err)
    };
    let refused = Some(i32::from(Exit::Refused.code()));
    let failed = Some(i32::from(Exit::Failed.code()));
    let mut seen = Vec::new();
    for name in binaries {
        let (code, err) = run(name, &["--no-such-flag".into()]);
        assert_eq!(code, refused, "{name} --no-such-flag: {err}");
        let (code, err) = run(name, &config_args(name, &bad));
        assert_eq!(code, refused, "{name} with a refused config: {err}");
        seen.push(format!("{name} (refused config): {}", err.trim_end()));
    }
    // Usage the parser lets through is refused as clap refuses a bad flag.
    let (code, err) = run("replay", &[]);
    assert_eq!(code, refused, "replay without --config: {err}");
    seen.push(format!("replay (no --config): {}", err.trim_end()));
    // One archive's bytes changed after the manifest pinned them: ingest fails it, and the
    // stages after it have no verified input.
    let archive = &cfg.archives[0];
    let file = archive
        .file
        .as_ref()
        .expect("the demo's archives are local files")
        .path
        .clone();
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    for name in ["ingest", "audit", "replay", "pipeline"] {
        let (code, err) = run(name, &config_args(name, &good));
        assert_eq!(code, failed, "{name} after a changed archive: {err}");
        seen.push(format!("{name} (failed): {}", err.trim_end()));
    }
    insta::assert_snapshot!(seen.join("\n\n"));
}
