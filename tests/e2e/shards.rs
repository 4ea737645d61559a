//! Sharded ingest and audit (`--shard I/N`, then `merge`) give the one-process bytes, and
//! the merge refuses shards that are not exactly the N parts of this config's manifest.

mod common;

use std::path::Path;
use std::process::{Command, Output};

/// What a merge must reproduce byte for byte: the ingest ledger and every audit output,
/// as the stages declare them.
fn merged_files() -> Vec<String> {
    std::iter::once(ingest::LEDGER_FILE.to_string())
        .chain(audit::output::audit_outputs())
        .collect()
}

fn demo(dir: &Path) -> std::path::PathBuf {
    demo::generate(dir, demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    dir.join("pipeline.yaml")
}

fn stage(bin: &str, cfg: &Path, args: &[&str]) -> Output {
    Command::new(common::bin(bin))
        .arg("--config")
        .arg(cfg)
        .args(args)
        .output()
        .unwrap()
}

fn run_shards(cfg: &Path, n: u32) {
    for i in 0..n {
        let shard = format!("{i}/{n}");
        common::succeeded(stage("ingest", cfg, &["--quiet", "--shard", &shard]));
        common::succeeded(stage("audit", cfg, &["--shard", &shard]));
    }
}

/// (`--quiet` is taken after the subcommand as before it.)
fn merge(cfg: &Path) -> (Output, Output) {
    (
        stage("ingest", cfg, &["merge", "--quiet"]),
        stage("audit", cfg, &["merge"]),
    )
}

#[test]
fn shards_merge_to_the_bytes_of_a_one_process_run() {
    let one = tempfile::tempdir().unwrap();
    let cfg = demo(one.path());
    common::succeeded(stage("ingest", &cfg, &["--quiet"]));
    let whole = common::succeeded(stage("audit", &cfg, &[]));
    let totals = |out: &Output| -> String {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.contains(" archives read: "))
            .unwrap_or_else(|| panic!("no totals line in {}", String::from_utf8_lossy(&out.stdout)))
            .to_string()
    };
    // The small demo's 5 archives; the members and bytes read are the same however split.
    assert!(
        totals(&whole).starts_with("5 archives read: "),
        "{}",
        totals(&whole)
    );
    for n in [1u32, 2, 4] {
        let d = tempfile::tempdir().unwrap();
        let scfg = demo(d.path());
        run_shards(&scfg, n);
        let (i, a) = merge(&scfg);
        common::succeeded(i);
        let a = common::succeeded(a);
        assert_eq!(totals(&a), totals(&whole), "{n} shards");
        assert!(
            String::from_utf8_lossy(&a.stdout).contains("deepswe: 40 audited, 38 included"),
            "{}",
            String::from_utf8_lossy(&a.stdout)
        );
        for f in merged_files() {
            assert_eq!(
                std::fs::read(one.path().join("run").join(&f)).unwrap(),
                std::fs::read(d.path().join("run").join(&f)).unwrap(),
                "{f} with {n} shards"
            );
        }
        // The replay runs on the merged frames.
        common::succeeded(
            Command::new(common::bin("replay"))
                .arg("--config")
                .arg(&scfg)
                .output()
                .unwrap(),
        );
    }
}

fn refused(out: Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn the_merge_refuses_missing_mixed_foreign_and_misplaced_shards() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    let shards = d.path().join("run/shards");
    // None yet.
    let e = refused(stage("audit", &cfg, &["merge"]));
    assert!(e.contains("no audit shard found"), "{e}");
    run_shards(&cfg, 4);
    // A shard that has not finished (no record).
    let record = shards.join("3-of-4/audit.shard.json");
    let saved = std::fs::read(&record).unwrap();
    std::fs::remove_file(&record).unwrap();
    let e = refused(stage("audit", &cfg, &["merge"]));
    assert!(
        e.contains("missing: shard 3-of-4 has no audit.shard.json"),
        "{e}"
    );
    std::fs::write(&record, &saved).unwrap();
    // A shard run twice under another count (stale 1-of-2 beside the 4 shards).
    common::succeeded(stage("ingest", &cfg, &["--quiet", "--shard", "1/2"]));
    let e = refused(stage("ingest", &cfg, &["merge"]));
    assert!(
        e.contains("shards of different counts (0-of-4, 1-of-2, 1-of-4, 2-of-4, 3-of-4)"),
        "{e}"
    );
    std::fs::remove_dir_all(shards.join("1-of-2")).unwrap();
    // A shard directory holding another shard's record (copied, or run under a wrong name).
    let one = shards.join("1-of-4/audit.shard.json");
    let saved_one = std::fs::read(&one).unwrap();
    std::fs::copy(shards.join("2-of-4/audit.shard.json"), &one).unwrap();
    let e = refused(stage("audit", &cfg, &["merge"]));
    assert!(
        e.contains("1-of-4: its record says audit shard 2/4, not audit shard 1/4"),
        "{e}"
    );
    std::fs::write(&one, &saved_one).unwrap();
    // Shards of another config (the config changed after they ran).
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("# edited after the shards ran\n{text}")).unwrap();
    let e = refused(stage("audit", &cfg, &["merge"]));
    assert!(e.contains("0-of-4: ran another config"), "{e}");
    let e = refused(stage("ingest", &cfg, &["merge"]));
    assert!(e.contains("0-of-4: ran another config"), "{e}");
    // Restored, the same shards merge.
    std::fs::write(&cfg, text).unwrap();
    let (i, a) = merge(&cfg);
    common::succeeded(i);
    common::succeeded(a);
    // A bad --shard value is a usage error naming it.
    let out = stage("audit", &cfg, &["--shard", "4/4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("I is not below N"));
}

/// The sharded flow ends as a one-process run does: `pipeline run --from-shards` merges the
/// shards (ingest, audit) and runs the rest, writing the same `provenance.json`, and
/// `pipeline verify` passes on it.
#[test]
fn a_sharded_run_writes_the_one_process_provenance_and_verifies() {
    let one = tempfile::tempdir().unwrap();
    let cfg = demo(one.path());
    let pipeline = common::bin("pipeline");
    common::succeeded(
        Command::new(&pipeline)
            .args(["run", "--quiet"])
            .arg(&cfg)
            .output()
            .unwrap(),
    );
    let d = tempfile::tempdir().unwrap();
    let scfg = demo(d.path());
    run_shards(&scfg, 2);
    let out = common::succeeded(
        Command::new(&pipeline)
            .args(["run", "--from-shards", "--json"])
            .arg(&scfg)
            .output()
            .unwrap(),
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        summary["stages"][0]["summary"]
            .as_str()
            .unwrap()
            .contains("from the shards"),
        "{summary}"
    );
    assert_eq!(
        std::fs::read_to_string(one.path().join("run/provenance.json")).unwrap(),
        std::fs::read_to_string(d.path().join("run/provenance.json")).unwrap()
    );
    let verified = common::succeeded(
        Command::new(&pipeline)
            .arg("verify")
            .arg(d.path().join("run"))
            .output()
            .unwrap(),
    );
    assert!(String::from_utf8_lossy(&verified.stdout).contains(": ok, "));
    // A later plain run finds every stage up to date.
    let again = common::succeeded(
        Command::new(&pipeline)
            .args(["run", "--json"])
            .arg(&scfg)
            .output()
            .unwrap(),
    );
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert!(
        again["stages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["skipped"] == true),
        "{again}"
    );
}

/// Every part a shard wrote is listed with its hash in the shard's record, and the merge
/// refuses one that changed since (an attempt edited by hand, a byte flipped in a requests
/// part or a ledger part), naming it; and refuses a shard still being written and a
/// directory named like a shard that is none.
#[test]
fn the_merge_refuses_a_part_that_changed_after_its_shard_finished() {
    let d = tempfile::tempdir().unwrap();
    let cfg = demo(d.path());
    run_shards(&cfg, 2);
    let shard0 = d.path().join("run/shards/0-of-2");
    let record: model::shard::ShardRecord =
        serde_json::from_str(&std::fs::read_to_string(shard0.join("audit.shard.json")).unwrap())
            .unwrap();
    let attempts = record
        .parts
        .iter()
        .find(|p| p.file.ends_with(".attempts.json"))
        .expect("the audit record lists its attempts parts");
    assert!(
        record
            .parts
            .iter()
            .any(|p| p.file.ends_with(".requests.parquet"))
    );
    let attempts_path = shard0.join(&attempts.file);
    let keep = std::fs::read(&attempts_path).unwrap();
    let text = String::from_utf8(keep.clone()).unwrap();
    let at = text.find("\"gen_end").expect("an attempt's gen_end");
    let digit = at + text[at..].find(|c: char| c.is_ascii_digit()).unwrap();
    let mut edited = text.into_bytes();
    edited[digit] = if edited[digit] == b'9' {
        b'8'
    } else {
        edited[digit] + 1
    };
    std::fs::write(&attempts_path, &edited).unwrap();
    let e = refused(stage("audit", &cfg, &["merge"]));
    assert!(
        e.contains(&attempts.file)
            && e.contains("its shard record says")
            && e.contains("rerun that shard"),
        "{e}"
    );
    std::fs::write(&attempts_path, &keep).unwrap();
    for part in [
        record
            .parts
            .iter()
            .find(|p| p.file.ends_with(".requests.parquet"))
            .unwrap()
            .file
            .clone(),
        "../1-of-2/ledger.parquet".to_string(),
    ] {
        let path = shard0.join(&part);
        let keep = std::fs::read(&path).unwrap();
        flip_middle_byte(&path);
        let bin = if part.ends_with("ledger.parquet") {
            "ingest"
        } else {
            "audit"
        };
        let e = refused(stage(bin, &cfg, &["merge"]));
        assert!(
            e.contains(path.file_name().unwrap().to_str().unwrap()) && e.contains("sha256"),
            "{bin}: {e}"
        );
        std::fs::write(&path, keep).unwrap();
    }
    // A shard that is being written again holds its lock.
    let held = model::RunLock::acquire(&shard0, "audit shard").unwrap();
    let e = refused(stage("audit", &cfg, &["merge"]));
    assert!(e.contains("0-of-2: is still being written"), "{e}");
    drop(held);
    // A directory named like a shard that is none (index not below the count).
    std::fs::create_dir(d.path().join("run/shards/2-of-2")).unwrap();
    let e = refused(stage("audit", &cfg, &["merge"]));
    assert!(e.contains("2-of-2: is named like a shard directory"), "{e}");
    std::fs::remove_dir(d.path().join("run/shards/2-of-2")).unwrap();
    let (i, a) = merge(&cfg);
    common::succeeded(i);
    common::succeeded(a);
}

fn flip_middle_byte(p: &Path) {
    let mut b = std::fs::read(p).unwrap();
    let i = b.len() / 2;
    b[i] ^= 0x01;
    std::fs::write(p, b).unwrap();
}
