//! Crash consistency of the audit and replay outputs: a stage killed with SIGKILL while one
//! of its writes is under way (the kill is aimed at its first, second, ... write by watching
//! for the write's temporary file, and must land while that file exists) never leaves a
//! half-written frame under its final name; a rerun completes, sweeps the leftovers and
//! writes every output byte for byte as a run that was never killed.

mod common;

use common::bin;

use std::path::Path;
use std::process::Command;

/// Every file under its final name is complete: frames read back whole, JSON parses.
fn assert_no_torn_outputs(run: &Path) {
    for e in std::fs::read_dir(run).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') || !p.is_file() {
            continue; // temporary names are never taken for outputs
        }
        if let Some(stem) = name.strip_suffix(".parquet") {
            frames::read_frame(&p, stem, model::run_dir::FRAME_SCHEMA_VERSION)
                .unwrap_or_else(|e| panic!("{name} is torn after a kill: {e}"));
        } else if name.ends_with(".json") {
            serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{name} is torn after a kill: {e}"));
        }
    }
}

/// The temporary files of process `pid` in `dir` (atomic writes and streamed frames are
/// written as `.NAME.tmp-PID-SEQ`, see `frames::temp`): a write of that process under way.
fn writes_of(dir: &Path, pid: u32) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| frames::temp::temp_name_pid(n) == Some(pid))
                .collect()
        })
        .unwrap_or_default()
}

/// Start `cmd` and SIGKILL it while its `nth` write (1-based, counting distinct temporary
/// files seen) is under way. Returns the temporary file the kill interrupted (still there
/// after the kill, so the kill landed during that write), or `None` when the write was
/// missed (it finished between two looks) or the command ended first.
fn kill_during_write(mut cmd: Command, dir: &Path, nth: usize) -> Option<String> {
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut seen: Vec<String> = Vec::new();
    let interrupted = loop {
        if child.try_wait().unwrap().is_some() {
            break None;
        }
        for w in writes_of(dir, pid) {
            if !seen.contains(&w) {
                seen.push(w);
            }
        }
        if seen.len() >= nth {
            let target = seen[nth - 1].clone();
            let _ = child.kill(); // SIGKILL
            break Some(target);
        }
        std::thread::yield_now();
    };
    let _ = child.wait();
    interrupted.filter(|t| dir.join(t).exists())
}

/// Every declared output of the audit and the replay, byte for byte, in two run directories.
fn assert_outputs_equal(cfg: &model::LoadedConfig, run: &Path, clean: &Path) {
    let declared: Vec<String> = audit::output::audit_outputs()
        .into_iter()
        .chain(model::Stage::outputs(&replay::ReplayStage, cfg))
        .collect();
    assert!(declared.len() >= 10, "{declared:?}");
    for f in &declared {
        assert_eq!(
            std::fs::read(run.join(f)).unwrap_or_default(),
            std::fs::read(clean.join(f)).unwrap(),
            "{f} differs from a run that was never killed"
        );
    }
}

#[test]
fn killed_audit_and_replay_leave_no_torn_frames() {
    let (audit, replay) = (bin("audit"), bin("replay"));
    // A run that is never killed, for the bytes every rerun must give.
    let clean = tempfile::tempdir().unwrap();
    demo::generate(clean.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let clean_cfg = model::load_config(&clean.path().join("pipeline.yaml")).unwrap();
    ingest::run(&clean_cfg, &ingest::IngestOptions::default()).unwrap();
    for stage in [&audit, &replay] {
        common::run_ok(
            Command::new(stage)
                .arg("--config")
                .arg(clean.path().join("pipeline.yaml")),
        );
    }
    let d = tempfile::tempdir().unwrap();
    demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let cfg_path = d.path().join("pipeline.yaml");
    let cfg = model::load_config(&cfg_path).unwrap();
    ingest::run(&cfg, &ingest::IngestOptions::default()).unwrap();
    let run = d.path().join("run");
    // Each stage is killed during its first, second, ... fourth write (a write is missed
    // when it ends between two looks; it is tried again, and every kill must land).
    for (stage, writes) in [(&audit, 4), (&replay, 4)] {
        for nth in 1..=writes {
            let mut landed = None;
            for _ in 0..20 {
                let mut c = Command::new(stage);
                c.arg("--config")
                    .arg(&cfg_path)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null());
                landed = kill_during_write(c, &run, nth);
                assert_no_torn_outputs(&run);
                if landed.is_some() {
                    break;
                }
            }
            assert!(
                landed.is_some(),
                "{}: no kill landed during write {nth} in 20 tries",
                stage.display()
            );
        }
        // A rerun after the kills completes (and sweeps the killed writes' leftovers).
        common::run_ok(Command::new(stage).arg("--config").arg(&cfg_path));
        assert_no_torn_outputs(&run);
    }
    // Every output of the reruns is the never-killed run's, byte for byte.
    assert_outputs_equal(&cfg, &run, clean.path().join("run").as_path());
    assert!(
        std::fs::read_dir(&run)
            .unwrap()
            .flatten()
            .all(|e| frames::temp::temp_name_pid(&e.file_name().to_string_lossy()).is_none()),
        "leftovers of the killed writes remain after the reruns"
    );
}
