//! The `ingest` binary: exit codes (0 ok, 1 failed archives, 2 usage/config), the summary
//! line, the failure lines, `--offline`, `--quiet`, plain progress lines off a terminal.

mod common;

use common::*;
use model::config::LocationKind::File;
use std::process::{Command, Output};

fn ingest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ingest"))
        .args(args)
        .env_remove("STORAGE_EMULATOR_HOST")
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_TOKEN")
        .output()
        .expect("ingest runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn usage_and_config_errors_exit_2() {
    let o = ingest(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--config"), "{}", text(&o.stderr));
    let o = ingest(&["--config", "/nonexistent/pipeline.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr).lines().next(),
        Some(
            "error: cannot read /nonexistent/pipeline.yaml: No such file or directory (os error 2)"
        )
    );
    let o = ingest(&["--config", "x.yaml", "--parallel", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn success_rerun_offline_and_failure_exit_codes() {
    let c = small_corpus();
    let n = c.archives().len();
    let cfg = c.pipeline("cli", &c.rows(), &[File], None, None);
    let path = cfg.path.display().to_string();

    let o = ingest(&["--config", &path, "--parallel", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mib = c.archives().iter().map(|a| a.bytes).sum::<u64>() as f64 / (1u64 << 20) as f64;
    assert_eq!(
        text(&o.stdout),
        format!(
            "ingest: {n} of {n} archives verified; 0 from the store, {n} location fetches, {mib:.1} MiB downloaded\n"
        )
    );
    // Off a terminal: one plain line per archive on stderr.
    assert_eq!(
        text(&o.stderr)
            .lines()
            .filter(|l| l.contains("] ") && l.ends_with(": verified"))
            .count(),
        n
    );

    let o = ingest(&["--config", &path, "--quiet"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        text(&o.stdout),
        format!("ingest: {n} of {n} archives verified; store complete, nothing downloaded\n")
    );
    assert_eq!(text(&o.stderr), "");

    let o = ingest(&["--config", &path, "--offline", "--quiet"]);
    assert_eq!(o.status.code(), Some(0));

    // A missing file: exit 1, one error line plus one line per failure.
    let mut rows = c.rows();
    rows[2].file_path = Some("archives/missing.tar.gz".into());
    let bad = c.pipeline("cli-bad", &rows, &[File], None, None);
    let o = ingest(&["--config", &bad.path.display().to_string(), "--quiet"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0],
        format!(
            "error: 1 of {n} archives failed verification (all others were fetched and verified; ledger: {}):",
            bad.run_dir.join("ledger.parquet").display()
        )
    );
    let a = &c.archives()[2];
    let missing = c.root().join("archives/missing.tar.gz");
    assert_eq!(
        lines[1],
        format!(
            "  {} at file:{}: expected sha256 {} ({} bytes), got no verified bytes: not found: no file at {} (hint: check the manifest's generation / revision / path: pins are exact and never fall back to the latest version)",
            a.archive_id,
            "archives/missing.tar.gz",
            a.sha256,
            a.bytes,
            missing.display()
        )
    );
}

/// Run `ingest` and fail (instead of hanging the suite) if it takes more than a minute.
fn ingest_within_a_minute(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ingest"))
        .args(args)
        .env_remove("STORAGE_EMULATOR_HOST")
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ingest starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("ingest {args:?} still running after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A `file_path` that leaves the manifest's directory is refused when the
/// manifest is read (exit 2, line and field named); one naming a FIFO is refused without
/// being opened (it would block forever), naming what it is, and nothing enters the store
/// or quarantine for it.
#[test]
fn file_paths_outside_the_manifest_dir_or_not_regular_files_are_refused() {
    let c = small_corpus();
    // A good config whose manifest then gets an escaping path (the test helper would
    // refuse to load it, as ingest must).
    let escaping = c.pipeline("cli-escape", &c.rows(), &[File], None, None);
    let manifest = c.root().join("manifest-cli-escape.csv");
    let csv = std::fs::read_to_string(&manifest).unwrap();
    let first = c.rows()[0].file_path.clone().unwrap();
    assert!(csv.contains(&first), "{csv}");
    std::fs::write(
        &manifest,
        csv.replacen(&first, "../../../../../etc/passwd", 1),
    )
    .unwrap();
    let o = ingest(&["--config", &escaping.path.display().to_string()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("file_path") && err.contains("leaves the manifest's directory (`..`)"),
        "{err}"
    );
    assert!(!escaping.run_dir.join("quarantine").exists());

    let fifo = c.root().join("archives/a-fifo.tar.gz");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut rows = c.rows();
    rows[1].file_path = Some("archives/a-fifo.tar.gz".into());
    let n = rows.len();
    let cfg = c.pipeline("cli-fifo", &rows, &[File], None, None);
    let o = ingest_within_a_minute(&["--config", &cfg.path.display().to_string(), "--quiet"]);
    std::fs::remove_file(&fifo).unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.starts_with(&format!("error: 1 of {n} archives failed verification")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{} is a FIFO, not a regular file", fifo.display())),
        "{err}"
    );
    let quarantine = cfg.run_dir.join("quarantine");
    assert!(!quarantine.exists() || std::fs::read_dir(&quarantine).unwrap().count() == 0);
}
