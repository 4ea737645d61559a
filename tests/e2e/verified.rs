//! What a run calls verified stays true against careless and hostile handling of its
//! directory: links planted in it are refused rather than written through, and a reader
//! that stops reading standard output does not stop the run.

mod common;

use std::process::{Command, Stdio};

use common::small_demo;

fn run(cfg: &model::LoadedConfig) -> anyhow::Result<pipeline::run::RunSummary> {
    pipeline::run::run_all(
        cfg,
        &pipeline::run::RunOptions {
            quiet: true,
            force: true,
            ..Default::default()
        },
    )
}

/// `run/.lock` replaced by a link to a user's file, and `run/.stages/` by a link to a
/// user's directory: the next run refuses each, naming the link, and writes nothing
/// through it.
#[cfg(unix)]
#[test]
fn links_planted_in_the_run_directory_are_refused_and_their_targets_untouched() {
    let d = tempfile::tempdir().unwrap();
    let cfg = small_demo(d.path());
    run(&cfg).unwrap();
    let run_dir = d.path().join("run");
    let users_file = d.path().join("notes.txt");
    std::fs::write(&users_file, "my notes\n").unwrap();
    std::fs::remove_file(run_dir.join(".lock")).unwrap();
    std::os::unix::fs::symlink(&users_file, run_dir.join(".lock")).unwrap();
    let e = format!("{:#}", run(&cfg).unwrap_err());
    assert!(e.contains(".lock is a symbolic link"), "{e}");
    assert_eq!(std::fs::read_to_string(&users_file).unwrap(), "my notes\n");
    std::fs::remove_file(run_dir.join(".lock")).unwrap();

    let users_dir = d.path().join("my-records");
    std::fs::create_dir(&users_dir).unwrap();
    std::fs::remove_dir_all(run_dir.join(".stages")).unwrap();
    std::os::unix::fs::symlink(&users_dir, run_dir.join(".stages")).unwrap();
    let e = format!("{:#}", run(&cfg).unwrap_err());
    assert!(e.contains(".stages is a symbolic link"), "{e}");
    assert_eq!(std::fs::read_dir(&users_dir).unwrap().count(), 0);
    std::fs::remove_file(run_dir.join(".stages")).unwrap();

    // An output replaced by a link is not replaced through it.
    std::fs::remove_file(run_dir.join("report.md")).unwrap();
    std::os::unix::fs::symlink(&users_file, run_dir.join("report.md")).unwrap();
    let e = format!("{:#}", run(&cfg).unwrap_err());
    assert!(
        e.contains("report.md") && e.contains("is a symbolic link"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&users_file).unwrap(), "my notes\n");
    std::fs::remove_file(run_dir.join("report.md")).unwrap();
    run(&cfg).unwrap();
}

/// `pipeline run CONFIG | head -1`: the reader goes away before the summary is printed;
/// the run still finishes, writes its report and provenance, and exits 0.
#[test]
fn a_reader_that_closes_standard_output_does_not_stop_the_run() {
    let d = tempfile::tempdir().unwrap();
    small_demo(d.path());
    let mut child = Command::new(common::bin("pipeline"))
        .arg("run")
        .arg(d.path().join("pipeline.yaml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["report.html", "provenance.json"] {
        assert!(d.path().join("run").join(f).is_file(), "{f}");
    }
}
