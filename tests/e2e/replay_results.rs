//! The small demo's replay results pinned: every figure the replay writes (`replay.json`'s
//! per-workload records: bounds, baselines, selected schedules, search counts, the adaptive
//! record, the RNG record; and `joint_schedules.csv`) and a digest of every selected
//! schedule and of every deterministic output file. A change that alters a result must
//! update these snapshots in the same commit (`cargo insta review`), visibly.

mod common;

use sha2::Digest as _;
use std::fmt::Write as _;
use std::path::Path;

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
fn small_demo_blob_bounds_add_up_to_the_workloads_cache_figures() {
    use polars::prelude::*;
    let run = small_demo_run().join("run");
    let read = |f: &str| {
        ParquetReader::new(std::fs::File::open(run.join(f)).unwrap())
            .finish()
            .unwrap()
    };
    let (blobs, bounds) = (read("blob_bounds.parquet"), read("bounds.parquet"));
    let strs = |df: &DataFrame, c: &str| -> Vec<String> {
        let s = df.column(c).unwrap().str().unwrap();
        (0..s.len())
            .map(|i| s.get(i).unwrap().to_string())
            .collect()
    };
    let f64s = |df: &DataFrame, c: &str| -> Vec<Option<f64>> {
        let s = df.column(c).unwrap().f64().unwrap();
        (0..s.len()).map(|i| s.get(i)).collect()
    };
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("replay.json")).unwrap()).unwrap();
    let close = |a: f64, b: f64, what: &str| {
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "{what}: {a} vs {b}"
        );
    };
    let (bw, br) = (strs(&bounds, "workload"), strs(&bounds, "resource"));
    let cache_figure = |w: &str, c: &str| {
        let i = (0..bw.len())
            .find(|&i| bw[i] == w && br[i] == "cache")
            .unwrap();
        f64s(&bounds, c)[i].unwrap()
    };
    let workload = strs(&blobs, "workload");
    let columns = ["best_cache_h", "fifo_h", "per_blob_bound_h", "lp_open_h"];
    for w in ["tmax", "deepswe"] {
        let rows: Vec<usize> = (0..workload.len()).filter(|&i| workload[i] == w).collect();
        assert!(!rows.is_empty(), "{w}: no blob rows");
        let [best, fifo, own, lp] = columns.map(|c| {
            let v = f64s(&blobs, c);
            rows.iter().map(|&i| v[i]).collect::<Vec<_>>()
        });
        let sum = |v: &[Option<f64>]| v.iter().map(|x| x.unwrap_or(0.0)).sum::<f64>();
        close(
            sum(&best),
            cache_figure(w, "best_found_h"),
            &format!("{w} best_cache_h"),
        );
        close(
            sum(&fifo),
            cache_figure(w, "fifo_ideal_h"),
            &format!("{w} fifo_h"),
        );
        // Each blob relaxed on its own is a valid bound: never above the best bound, and per
        // blob never above what a schedule holds.
        assert!(
            sum(&own) <= cache_figure(w, "best_bound_h") * (1.0 + 1e-9),
            "{w}"
        );
        for i in 0..rows.len() {
            let (b, f, p) = (best[i].unwrap(), fifo[i].unwrap(), own[i].unwrap());
            assert!(
                p <= b * (1.0 + 1e-9) && p <= f * (1.0 + 1e-9),
                "{w}: {p} > {b} or {f}"
            );
        }
        // The LP's blobs and the others' per-blob bounds add up to the LP's master value.
        let wr = doc["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["workload"] == w)
            .unwrap();
        let master = wr["lp_bounds_h"]["cache"]["master_h"].as_f64().unwrap();
        let shares: f64 = lp
            .iter()
            .zip(&own)
            .map(|(l, p)| l.unwrap_or(p.unwrap()))
            .sum();
        close(shares, master, &format!("{w} LP shares"));
        assert!(lp.iter().any(Option::is_some), "{w}: no blob in the LP");
    }
}

#[test]
fn small_demo_replay_digests() {
    let run = small_demo_run().join("run");
    let mut out = String::new();
    for f in replay::output::output_files() {
        writeln!(
            out,
            "{f}: {}",
            sha256(&std::fs::read(run.join(&f)).unwrap())
        )
        .unwrap();
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
