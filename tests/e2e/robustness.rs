//! Regression tests of issue 16 (what a hostile and careless user found), one per item
//! fixed, across the binaries.

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
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
    let opts = pipeline::run::RunOptions {
        quiet: true,
        ..Default::default()
    };
    pipeline::run::run_all(&cfg, &opts).unwrap();
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
