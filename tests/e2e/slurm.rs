//! The sharded chain on a real single-node Slurm cluster (Debian's slurm-wlm and munge,
//! installed by scripts/test-tools): `scripts/slurm/run.sh CONFIG 4` submits the array of 4
//! ingest + audit shards and the dependent merge and replay; every merged frame equals a
//! one-process run's byte for byte. The cluster is started in a scratch directory and
//! stopped afterwards, even when the test fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A running cluster, stopped on drop.
struct Cluster {
    state: PathBuf,
    slurm_conf: String,
}

impl Cluster {
    fn start(state: &Path) -> Cluster {
        let out = Command::new(root().join("scripts/slurm/cluster"))
            .arg("start")
            .arg(state)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/slurm/cluster start failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let slurm_conf = stdout
            .lines()
            .find_map(|l| l.strip_prefix("export SLURM_CONF="))
            .map(|v| v.trim_matches(|c| c == '\'' || c == '"').to_string())
            .unwrap_or_else(|| panic!("no SLURM_CONF in: {stdout}"));
        Cluster {
            state: state.to_path_buf(),
            slurm_conf,
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/slurm/cluster"))
            .arg("stop")
            .arg(&self.state)
            .status();
    }
}

#[test]
fn four_shards_on_slurm_merge_to_the_bytes_of_a_one_process_run() {
    let one = tempfile::tempdir().unwrap();
    demo::generate(one.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let cfg_one = one.path().join("pipeline.yaml");
    for bin in ["ingest", "audit", "replay"] {
        common::succeeded(
            Command::new(common::bin(bin))
                .arg("--config")
                .arg(&cfg_one)
                .output()
                .unwrap(),
        );
    }
    let d = tempfile::tempdir().unwrap();
    let study = d.path().join("study");
    demo::generate(&study, demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let cluster = Cluster::start(&d.path().join("slurm-state"));
    // The jobs take the binaries from PATH (here: the ones this test was built with).
    let bin_dir = common::bin("ingest").parent().unwrap().to_path_buf();
    common::bin("audit");
    common::bin("replay");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(root().join("scripts/slurm/run.sh"))
        .arg("pipeline.yaml")
        .arg("4")
        .current_dir(&study)
        .env("SLURM_CONF", &cluster.slurm_conf)
        .env("PATH", path)
        .env("RUN_POLL", "1")
        .output()
        .unwrap();
    let logs = std::fs::read_dir(study.join("slurm-logs"))
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    format!(
                        "--- {}\n{}",
                        e.path().display(),
                        std::fs::read_to_string(e.path()).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    assert!(
        out.status.success(),
        "run.sh failed:\n{}{}\n{logs}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Four shards ran, each with its record, and the merge's frames are the one-process ones.
    for i in 0..4 {
        for stage in ["ingest", "audit"] {
            let record = study.join(format!("run/shards/{i}-of-4/{stage}.shard.json"));
            assert!(record.is_file(), "{} missing\n{logs}", record.display());
        }
    }
    // The ledger, every audit output and every replay output, as the stages declare them.
    let cfg = model::load_config(&study.join("pipeline.yaml")).unwrap();
    let declared: Vec<String> = std::iter::once(ingest::LEDGER_FILE.to_string())
        .chain(audit::output::audit_outputs())
        .chain(model::Stage::outputs(&replay::ReplayStage, &cfg))
        .collect();
    for f in &declared {
        assert_eq!(
            std::fs::read(one.path().join("run").join(f)).unwrap(),
            std::fs::read(study.join("run").join(f)).unwrap(),
            "{f}"
        );
    }
    drop(cluster);
    // Nothing of the cluster is left running.
    let left = Command::new("pgrep")
        .args(["-f", &d.path().join("slurm-state").display().to_string()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "daemons left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}
