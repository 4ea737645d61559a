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

fn merge(cfg: &Path) -> (Output, Output) {
    (
        stage("ingest", cfg, &["merge"]),
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
