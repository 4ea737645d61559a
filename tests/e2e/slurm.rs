//! The sharded chain on a real single-node Slurm cluster (Debian's slurm-wlm, munge,
//! slurmdbd and MariaDB, installed by scripts/test-tools), with accounting and a MinJobAge of
//! 2 s: `scripts/slurm/run.sh CONFIG 4` submits the array of 4 ingest + audit shards, the
//! dependent merge and the final `pipeline run --from-shards` (replay, report, provenance);
//! every merged frame equals a one-process run's byte for byte, and `pipeline verify` passes
//! the sharded run; `run.sh --resume` then resubmits only the shards whose finished records
//! are gone.
//! The shell-level checks of the scripts (stand-in binaries: failures, requeues, limits,
//! MaxArraySize, the run lock, sacct and its absence) are `scripts/slurm/selftest`, run here
//! too. Each cluster is started in a scratch directory and stopped afterwards, even when the
//! test fails.

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
    /// A cluster with slurmdbd accounting that forgets finished jobs after 2 s.
    fn start(state: &Path) -> Cluster {
        let out = Command::new(root().join("scripts/slurm/cluster"))
            .arg("start")
            .arg(state)
            .env("CLUSTER_ACCOUNTING", "slurmdbd")
            .env("CLUSTER_MIN_JOB_AGE", "2")
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

/// Every file in `dir`, each under its path, for a failure message.
fn logs_of(dir: &Path) -> String {
    std::fs::read_dir(dir)
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
        .unwrap_or_default()
}

/// The array task ids of the shard logs (`shard-<array id>_<task>.out`) in `dir`, sorted.
fn shard_tasks_logged(dir: &Path) -> Vec<u32> {
    let mut tasks: Vec<u32> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let rest = name.strip_prefix("shard-")?.strip_suffix(".out")?;
            rest.split_once('_')?.1.parse().ok()
        })
        .collect();
    tasks.sort_unstable();
    tasks
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
    common::bin("pipeline");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run_sh = |args: &[&str], log_dir: &str| {
        Command::new(root().join("scripts/slurm/run.sh"))
            .args(args)
            .current_dir(&study)
            .env("SLURM_CONF", &cluster.slurm_conf)
            .env("PATH", &path)
            .env("RUN_POLL", "1")
            .env("SLURM_LOG_DIR", log_dir)
            .output()
            .unwrap()
    };
    let out = run_sh(&["pipeline.yaml", "4"], "slurm-logs");
    let logs = logs_of(&study.join("slurm-logs"));
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
    let same_as_one_process = |when: &str, skip: &str| {
        for f in declared.iter().filter(|f| f.as_str() != skip) {
            assert_eq!(
                std::fs::read(one.path().join("run").join(f)).unwrap(),
                std::fs::read(study.join("run").join(f)).unwrap(),
                "{f} ({when})"
            );
        }
    };
    same_as_one_process("first run", "");
    assert_eq!(shard_tasks_logged(&study.join("slurm-logs")), [0, 1, 2, 3]);
    // The sharded run has the provenance of a one-process run, and verifies.
    assert!(study.join("run/provenance.json").is_file(), "{logs}");
    let verify = Command::new(common::bin("pipeline"))
        .arg("verify")
        .arg(study.join("run"))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "pipeline verify of the sharded run failed:\n{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );

    // Shards 1 and 3 lose their finished records: --resume submits just those two (their
    // records, as the real binaries write them, are what run.sh reads), then merges and
    // replays to the same bytes.
    for i in [1, 3] {
        std::fs::remove_file(study.join(format!("run/shards/{i}-of-4/audit.shard.json"))).unwrap();
    }
    let out = run_sh(&["--resume", "pipeline.yaml", "4"], "resume-logs");
    let logs = logs_of(&study.join("resume-logs"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "run.sh --resume failed:\n{stderr}\n{logs}"
    );
    assert!(
        stderr.contains("shards without a finished record: 1,3 (2 of 4 done)"),
        "{stderr}"
    );
    assert_eq!(
        shard_tasks_logged(&study.join("resume-logs")),
        [1, 3],
        "{stderr}"
    );
    // The rerun shards' ingest found their archives in the store, which their ledger rows
    // say (as a second one-process ingest's would); every audit and replay output is the same.
    same_as_one_process("after --resume", ingest::LEDGER_FILE);
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

/// The scripts' own checks with stand-in binaries (scripts/slurm/selftest): a failed shard
/// leaves the others running and the merge unrun, `--resume` reruns it alone, preempted
/// shards are requeued and waited for, every job gets its own limits and the common sbatch
/// options, N above MaxArraySize is refused, the run lock refuses a second run.sh and takes
/// over a dead one's, and forgotten jobs are read from sacct, or without it from disk.
#[test]
fn slurm_scripts_selftest_passes() {
    let out = Command::new(root().join("scripts/slurm/selftest"))
        .env_remove("SLURM_CONF")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("selftest: all checks passed"),
        "scripts/slurm/selftest failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
