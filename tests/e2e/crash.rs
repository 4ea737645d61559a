//! Crash consistency of the audit and replay outputs: a stage killed with SIGKILL at any
//! moment never leaves a half-written frame under its final name, and a rerun completes.

mod common;

use common::bin;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Every file under its final name is complete: frames read back whole, JSON parses.
fn assert_no_torn_outputs(run: &Path) {
    for e in std::fs::read_dir(run).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') || !p.is_file() {
            continue; // temporary names are never taken for outputs
        }
        if let Some(stem) = name.strip_suffix(".parquet") {
            frames::read_frame(&p, stem, 1)
                .unwrap_or_else(|e| panic!("{name} is torn after a kill: {e}"));
        } else if name.ends_with(".json") {
            serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{name} is torn after a kill: {e}"));
        }
    }
}

fn kill_at(mut cmd: Command, after: Duration) -> bool {
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(after);
    let finished = child.try_wait().unwrap().is_some();
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    finished
}

#[test]
fn killed_audit_and_replay_leave_no_torn_frames() {
    let (audit, replay) = (bin("audit"), bin("replay"));
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let cfg_path = d.path().join("pipeline.yaml");
    let cfg = model::load_config(&cfg_path).unwrap();
    ingest::run(&cfg, &ingest::IngestOptions::default()).unwrap();
    let run = d.path().join("run");
    for (i, stage) in [&audit, &replay, &audit, &replay].iter().enumerate() {
        for ms in [1u64, 5, 20, 60, 150, 400] {
            let mut c = Command::new(stage);
            c.arg("--config")
                .arg(&cfg_path)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            kill_at(c, Duration::from_millis(ms + i as u64));
            assert_no_torn_outputs(&run);
        }
        // A rerun after the kills completes.
        common::run_ok(Command::new(stage).arg("--config").arg(&cfg_path));
        assert_no_torn_outputs(&run);
    }
    // And the replay's outputs agree with a clean in-process run's.
    let before = std::fs::read(run.join("bounds.parquet")).unwrap();
    replay::run(&cfg, &replay::ReplayOptions::default()).unwrap();
    assert_eq!(before, std::fs::read(run.join("bounds.parquet")).unwrap());
}
