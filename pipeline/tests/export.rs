//! `pipeline export --dataset DIR RUN`: the parts hold exactly the single frames' rows (in
//! their order within a partition) with the same schemas and key-value metadata, the
//! manifest's hashes and counts are the files', a second export gives the same bytes, and
//! every refusal is one line with exit code 2.

use pipeline::export::{DatasetManifest, MANIFEST_FILE, export_dataset, exported_frames};
use polars::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A finished small demo run, made once per test binary: (the corpus directory, kept).
fn demo_run() -> &'static Path {
    static RUN: OnceLock<tempfile::TempDir> = OnceLock::new();
    RUN.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
        let cfg = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
        pipeline::run::run_all(
            &cfg,
            &pipeline::run::RunOptions {
                quiet: true,
                ..Default::default()
            },
        )
        .unwrap();
        d
    })
    .path()
}

fn run_dir() -> PathBuf {
    demo_run().join("run")
}

/// A copy of the run directory (for the tests that break it).
fn copy_of_run(to: &Path) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), &target).unwrap();
            }
        }
    }
    let dest = to.join("run");
    copy(&run_dir(), &dest);
    dest
}

fn manifest(dir: &Path) -> DatasetManifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap()).unwrap()
}

fn read(path: &Path) -> DataFrame {
    ParquetReader::new(std::fs::File::open(path).unwrap())
        .finish()
        .unwrap()
}

/// The rows of `df` stably sorted by the partition columns (the order of the parts).
fn by_partition(df: &DataFrame, by: &[String]) -> DataFrame {
    if by.is_empty() {
        return df.clone();
    }
    df.sort(
        by.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        SortMultipleOptions::default().with_maintain_order(true),
    )
    .unwrap()
}

#[test]
fn the_parts_are_the_frames_rows_with_their_schema_and_metadata() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("dataset");
    let summary = export_dataset(&run_dir(), &out, false).unwrap();
    let m = manifest(&out);
    assert_eq!(m, summary.manifest);
    assert_eq!(m.frame_schema_version, model::run_dir::FRAME_SCHEMA_VERSION);
    let names: Vec<&str> = m.frames.iter().map(|f| f.frame.as_str()).collect();
    let want: Vec<&str> = exported_frames().iter().map(|f| f.spec.name).collect();
    assert_eq!(names, want);
    let mut listed = std::collections::BTreeSet::new();
    for (f, decl) in m.frames.iter().zip(exported_frames()) {
        let source = run_dir().join(&f.source);
        assert_eq!(
            model::run_dir::hash_file(&source).unwrap().0,
            f.source_sha256,
            "{}",
            f.frame
        );
        let whole = read(&source);
        assert_eq!(f.rows, whole.height() as u64, "{}", f.frame);
        let source_meta = frames::read_metadata(&source).unwrap();
        let mut parts = Vec::new();
        for p in &f.parts {
            let path = out.join(&p.path);
            listed.insert(path.clone());
            let (sha, bytes) = model::run_dir::hash_file(&path).unwrap();
            assert_eq!(
                (sha.as_str(), bytes),
                (p.sha256.as_str(), p.bytes),
                "{}",
                p.path
            );
            // A part alone is a valid frame: the declared columns, the same metadata.
            let df = frames::read_declared(&path, &decl.spec, m.frame_schema_version).unwrap();
            assert_eq!(df.height() as u64, p.rows, "{}", p.path);
            assert_eq!(
                frames::read_metadata(&path).unwrap(),
                source_meta,
                "{}",
                p.path
            );
            // Its rows are the partition's, as the path says.
            let mut expected_path = f.frame.clone();
            for c in &f.partition_by {
                let v = &p.partition[c];
                expected_path.push_str(&format!("/{c}={v}"));
                let col = df.column(c).unwrap().str().unwrap();
                assert!(col.iter().all(|x| x == Some(v.as_str())), "{}: {c}", p.path);
            }
            assert_eq!(p.path, format!("{expected_path}/part-0.parquet"));
            parts.push(df);
        }
        // Together, in manifest order, the parts are the frame's rows sorted (stably) by
        // the partition columns.
        let mut joined = parts.remove(0);
        for p in &parts {
            joined.vstack_mut(p).unwrap();
        }
        assert!(
            joined.equals_missing(&by_partition(&whole, &f.partition_by)),
            "{}: the parts differ from the frame",
            f.frame
        );
    }
    // Nothing but the manifest and the listed parts.
    let mut found = std::collections::BTreeSet::new();
    let mut stack = vec![out.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p != out.join(MANIFEST_FILE) {
                found.insert(p);
            }
        }
    }
    assert_eq!(found, listed);
    // The per-attempt frames are split by workload and archive.
    let requests = m.frames.iter().find(|f| f.frame == "requests").unwrap();
    assert_eq!(requests.partition_by, ["workload", "archive_sha256"]);
    assert!(requests.parts.len() >= 4, "{:?}", requests.parts);
}

#[test]
fn a_second_export_gives_the_same_bytes() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    export_dataset(&run_dir(), &a, false).unwrap();
    export_dataset(&run_dir(), &b, false).unwrap();
    assert_eq!(
        std::fs::read(a.join(MANIFEST_FILE)).unwrap(),
        std::fs::read(b.join(MANIFEST_FILE)).unwrap()
    );
    for f in manifest(&a).frames {
        for p in f.parts {
            assert_eq!(
                std::fs::read(a.join(&p.path)).unwrap(),
                std::fs::read(b.join(&p.path)).unwrap(),
                "{}",
                p.path
            );
        }
    }
}

/// `pipeline export` as a user runs it: (exit code, stdout, stderr).
fn export_cli(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pipeline"))
        .arg("export")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A refusal: exit code 2, one line on stderr, naming `needle`.
fn assert_refused(args: &[&std::ffi::OsStr], needle: &str) -> String {
    let (code, _, err) = export_cli(args);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: ") && err.contains(needle), "{err}");
    err
}

#[test]
fn a_non_empty_directory_is_refused_unless_force_which_replaces_only_an_export() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("dataset");
    std::fs::create_dir_all(out.join("requests/old")).unwrap();
    std::fs::write(out.join("requests/old/stale.parquet"), b"stale").unwrap();
    std::fs::write(out.join("NOTES.txt"), b"mine").unwrap();
    let run = run_dir();
    let err = assert_refused(
        &["--dataset".as_ref(), out.as_os_str(), run.as_os_str()],
        "is not empty; pass --force",
    );
    assert!(err.contains(&out.display().to_string()), "{err}");
    assert!(out.join("requests/old/stale.parquet").is_file());
    let (code, stdout, err) = export_cli(&[
        "--dataset".as_ref(),
        out.as_os_str(),
        run.as_os_str(),
        "--force".as_ref(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let frames = pipeline::export::exported_frames().len();
    assert!(
        stdout.starts_with(&format!("exported {frames} frames")),
        "{stdout}"
    );
    assert!(!out.join("requests/old").exists());
    assert_eq!(std::fs::read(out.join("NOTES.txt")).unwrap(), b"mine");
    assert_eq!(manifest(&out).frames.len(), frames);
}

#[test]
fn a_file_in_place_of_the_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("dataset");
    std::fs::write(&file, b"x").unwrap();
    let run = run_dir();
    assert_refused(
        &["--dataset".as_ref(), file.as_os_str(), run.as_os_str()],
        "is not a directory",
    );
}

#[test]
fn a_directory_that_is_not_a_finished_run_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("dataset");
    let nowhere = d.path().join("nowhere");
    assert_refused(
        &["--dataset".as_ref(), out.as_os_str(), nowhere.as_os_str()],
        "is not a finished run directory: no such directory",
    );
    let empty = d.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert_refused(
        &["--dataset".as_ref(), out.as_os_str(), empty.as_os_str()],
        "is not a finished run directory: it has no provenance.json",
    );
    // A run whose provenance does not list the replay's frames (the stage never ran).
    let run = copy_of_run(&d.path().join("partial"));
    let p = run.join("provenance.json");
    let mut prov: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    prov["outputs"]
        .as_array_mut()
        .unwrap()
        .retain(|o| o["stage"] != "replay");
    std::fs::write(&p, serde_json::to_string_pretty(&prov).unwrap()).unwrap();
    assert_refused(
        &["--dataset".as_ref(), out.as_os_str(), run.as_os_str()],
        "provenance.json lists no `schedules.parquet` (the replay stage has not finished)",
    );
    // A listed frame that is gone.
    let run = copy_of_run(&d.path().join("missing"));
    std::fs::remove_file(run.join("clipping.parquet")).unwrap();
    assert_refused(
        &["--dataset".as_ref(), out.as_os_str(), run.as_os_str()],
        "`clipping.parquet` is missing, though provenance.json lists it",
    );
    assert!(!out.exists(), "nothing is written for a refused run");
}

#[test]
fn a_frame_that_is_not_the_runs_recorded_output_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let run = copy_of_run(d.path());
    // The same frame rewritten (same rows, another row order): other bytes.
    let path = run.join("requests.parquet");
    let df = read(&path);
    let mut reversed = df.reverse();
    let meta = frames::frame_meta_of(&path).unwrap();
    frames::write_frame(&path, &mut reversed, &meta).unwrap();
    let out = d.path().join("dataset");
    let err = assert_refused(
        &["--dataset".as_ref(), out.as_os_str(), run.as_os_str()],
        "provenance.json records",
    );
    assert!(
        err.contains("requests.parquet: sha256 ") && err.contains("`pipeline verify "),
        "{err}"
    );
    assert!(!out.exists());
}
