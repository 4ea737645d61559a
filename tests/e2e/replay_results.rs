//! The small demo's replay results pinned: every figure the replay writes (`replay.json`'s
//! per-workload records: bounds, baselines, selected schedules, search counts, the adaptive
//! record, the RNG record; and `joint_schedules.csv`) and a digest of every selected
//! schedule and of every deterministic output file. A change that alters a result must
//! update these snapshots in the same commit (`cargo insta review`), visibly.

mod common;

use sha2::Digest as _;
use std::fmt::Write as _;
use std::path::Path;

/// The replay's deterministic outputs below the run directory.
const OUTPUTS: [&str; 6] = [
    "schedules.parquet",
    "joint_schedules.csv",
    "bounds.parquet",
    "search_trace.parquet",
    "pareto.parquet",
    "replay.json",
];

fn sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The small demo through ingest, audit and replay, once per test binary.
fn small_demo_run() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        common::run_quiet(&common::small_demo(d.path()));
        d
    })
    .path()
}

#[test]
fn small_demo_replay_figures() {
    let run = small_demo_run().join("run");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("replay.json")).unwrap()).unwrap();
    let mut out = String::new();
    writeln!(out, "rng: {}", doc["rng"]).unwrap();
    writeln!(out, "budget: {}", doc["budget"]).unwrap();
    writeln!(
        out,
        "workloads: {}",
        serde_json::to_string_pretty(&doc["workloads"]).unwrap()
    )
    .unwrap();
    writeln!(out, "joint_schedules.csv:").unwrap();
    out.push_str(&std::fs::read_to_string(run.join("joint_schedules.csv")).unwrap());
    insta::assert_snapshot!(out);
}

#[test]
fn small_demo_replay_digests() {
    let run = small_demo_run().join("run");
    let mut out = String::new();
    for f in OUTPUTS {
        writeln!(out, "{f}: {}", sha256(&std::fs::read(run.join(f)).unwrap())).unwrap();
    }
    // Each selected schedule: its rows (attempt, start, end) in file order, digested.
    let rows = replay::validate::read_schedules_file(&run.join("schedules.parquet")).unwrap();
    let mut groups: Vec<((String, String), String)> = Vec::new();
    for (w, s, r) in rows {
        let line = format!("{},{:?},{:?}\n", r.attempt_id, r.start_s, r.end_s);
        match groups.iter_mut().find(|(k, _)| k.0 == w && k.1 == s) {
            Some((_, text)) => text.push_str(&line),
            None => groups.push(((w, s), line)),
        }
    }
    for ((w, s), text) in &groups {
        writeln!(
            out,
            "{w}/{s}: {} rows, {}",
            text.lines().count(),
            sha256(text.as_bytes())
        )
        .unwrap();
    }
    insta::assert_snapshot!(out);
}
