//! Hardening: a SIGKILLed ingest never leaves an unverified file in the store,
//! two ingests on one store at once both finish correctly, and secrets never leak into
//! logs, errors, run facts, frames or the report.

mod common;

use common::bin;

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Deterministic pseudo-random bytes (xorshift), fast to make.
fn big_file(path: &Path, mib: usize, seed: u64) -> (String, u64) {
    let mut x = seed | 1;
    let mut buf = Vec::with_capacity(mib << 20);
    while buf.len() < mib << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, &buf).unwrap();
    (hex::encode(Sha256::digest(&buf)), buf.len() as u64)
}

/// A config whose archives are big local files (ingest verifies bytes, not content).
fn big_config(dir: &Path, n: usize, mib: usize) -> PathBuf {
    let mut rows = String::from(
        "archive_id,workload,sha256,bytes,gcs_bucket,gcs_object,gcs_generation,hf_repo,hf_revision,hf_shard,hf_member,file_path\n",
    );
    for i in 0..n {
        let name = format!("big-{i}.tar.zst");
        let (sha, bytes) = big_file(&dir.join(&name), mib, 2 * i as u64 + 7);
        rows.push_str(&format!("big-{i},tmax,{sha},{bytes},,,,,,,,{name}\n"));
    }
    std::fs::write(dir.join("manifest.csv"), rows).unwrap();
    let yaml = "version: 1\nrun_dir: run\nsources:\n  manifest: manifest.csv\n  locations: [file]\nworkloads:\n  tmax:\n    expect: { audited: 0, included: 0 }\n    replay: { concurrency: 16, cpu_cores: 27, ram_gib: 66, gpus: 8 }\nsearch:\n  seed: 1\n  order: [tmax]\ningest: { parallel: 2 }\n";
    std::fs::write(dir.join("pipeline.yaml"), yaml).unwrap();
    dir.join("pipeline.yaml")
}

/// Every file in store/sha256 hashes to its name; nothing else is there.
fn assert_store_verified(run: &Path) -> usize {
    let dir = run.join("store/sha256");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut n = 0;
    for e in rd {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            name,
            "unverified file {} in the store",
            p.display()
        );
        n += 1;
    }
    n
}

/// The partial downloads of process `pid` in `store/tmp/` (`ARCHIVE.KIND.PID.part`), with
/// their sizes.
fn parts_of(run: &Path, pid: u32) -> Vec<(PathBuf, u64)> {
    let suffix = format!(".{pid}.part");
    let Ok(rd) = std::fs::read_dir(run.join("store/tmp")) else {
        return Vec::new();
    };
    rd.filter_map(|e| {
        let p = e.ok()?.path();
        let name = p.file_name()?.to_string_lossy().into_owned();
        let len = std::fs::metadata(&p).ok()?.len();
        name.ends_with(&suffix).then_some((p, len))
    })
    .collect()
}

/// Each kill lands mid-transfer: the ingest is killed while one of its partial downloads
/// holds some but not all of an archive's bytes, at a few delays after that point.
#[test]
fn killed_ingest_leaves_only_verified_files_and_reruns_cleanly() {
    use std::os::unix::process::ExitStatusExt;
    let ingest = bin("ingest");
    let d = tempfile::tempdir().unwrap();
    let cfg = big_config(d.path(), 3, 96);
    let run = d.path().join("run");
    let archive_bytes = 96u64 << 20;
    for extra_ms in [0u64, 5, 20] {
        let mut child = Command::new(&ingest)
            .arg("--config")
            .arg(&cfg)
            .arg("--quiet")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let t0 = std::time::Instant::now();
        // Wait until a transfer has begun (a partial file with bytes in it).
        while !parts_of(&run, pid).iter().any(|(_, n)| *n > 0) {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the ingest finished before a transfer could be interrupted"
            );
            assert!(t0.elapsed() < Duration::from_secs(60), "no transfer began");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(extra_ms));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "killed, not finished: {status:?}");
        // The kill interrupted a transfer: its partial file is left, short of the archive.
        let parts = parts_of(&run, pid);
        assert!(
            parts.iter().any(|(_, n)| *n < archive_bytes),
            "no interrupted transfer left behind: {parts:?}"
        );
        assert_store_verified(&run);
    }
    common::run_ok(
        Command::new(&ingest)
            .arg("--config")
            .arg(&cfg)
            .arg("--quiet"),
    );
    assert_eq!(assert_store_verified(&run), 3);
    // A second rerun finds everything in the store.
    let out = common::run_ok(Command::new(&ingest).arg("--config").arg(&cfg));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("nothing downloaded"), "{text}");
}

/// Two ingests started at once on one run directory: the run directory's lock
/// (docs/ROBUSTNESS.md, "One writer per run directory") lets one write; the other either finds it
/// free (the first already done) and finishes, or is refused at once naming the holder. Either way
/// the store holds exactly the verified archives and the ledger is whole.
#[test]
fn two_ingests_on_one_store_at_once_one_writes_at_a_time() {
    let ingest = bin("ingest");
    let d = tempfile::tempdir().unwrap();
    let cfg = big_config(d.path(), 4, 48);
    let spawn = || {
        Command::new(&ingest)
            .arg("--config")
            .arg(&cfg)
            .arg("--quiet")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (oa, ob) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let run_dir = d.path().join("run");
    let mut finished = 0;
    for (name, o) in [("first", &oa), ("second", &ob)] {
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.success() {
            finished += 1;
        } else {
            assert!(
                err.contains(&format!(
                    "run directory {} is in use by pid ",
                    run_dir.display()
                )) && err.contains(": ingest since "),
                "{name}: {err}"
            );
        }
    }
    assert!(finished >= 1, "neither ingest finished");
    assert_eq!(assert_store_verified(&run_dir), 4);
    // The ledger is whole and readable.
    let ledger = frames::read_frame(
        &run_dir.join("ledger.parquet"),
        "ledger",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    assert_eq!(ledger.height(), 4);
}

fn grep_tree(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        } else if let Ok(b) = std::fs::read(&p)
            && b.windows(needle.len()).any(|w| w == needle.as_bytes())
        {
            hits.push(p);
        }
    }
    hits
}

#[test]
fn secrets_never_leak_through_the_whole_chain() {
    use testkit::{HubFaults, HubServer, SourcesSpec, manifest_row, write_pipeline};
    let pipeline = bin("pipeline");
    let d = tempfile::tempdir().unwrap();
    let summary = demo::generate(d.path(), demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    let base = model::load_config(&d.path().join("pipeline.yaml")).unwrap();
    let hub = HubServer::start().unwrap();
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    let mut shards: Vec<&str> = summary.archives.iter().map(|a| a.shard.as_str()).collect();
    shards.dedup();
    for s in shards {
        hub.add_file(
            demo::write::DEMO_HF_REPO,
            &rev,
            s,
            &d.path().join("shards").join(s.trim_start_matches("raw/")),
        )
        .unwrap();
    }
    const TOKEN: &str = "hf_SECRETtoken0123456789abcdef";
    const GCS_SECRET: &str = "-----BEGIN PRIVATE KEY-----SECRETgcskey987";
    hub.set_faults(HubFaults {
        require_token: Some(TOKEN.into()),
        ..Default::default()
    });
    let rows: Vec<_> = base.archives.iter().map(manifest_row).collect();
    let spec = SourcesSpec {
        locations: vec![
            model::config::LocationKind::File,
            model::config::LocationKind::Hf,
        ],
        gcs_endpoint: None,
        hf_endpoint: Some(hub.endpoint()),
        ingest: model::config::IngestConfig {
            parallel: 2,
            retries: 1,
            request_timeout_s: 30,
            ..Default::default()
        },
        run_dir: "run-secrets".into(),
    };
    let cfg = write_pipeline(
        &d.path().join("pipeline.yaml"),
        d.path(),
        "secrets",
        &rows,
        &spec,
    )
    .unwrap();
    // A whole service-account file (so it parses), whose key is the secret; its token URI
    // is a closed local port, so nothing leaves the machine.
    let creds = d.path().join("creds.json");
    std::fs::write(
        &creds,
        serde_json::json!({
            "type": "service_account",
            "project_id": "agentrace-test",
            "private_key_id": "0123456789abcdef",
            "private_key": GCS_SECRET,
            "client_email": "ingest@agentrace-test.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": "http://127.0.0.1:9/token",
        })
        .to_string(),
    )
    .unwrap();
    let out = Command::new(&pipeline)
        .arg("run")
        .arg(&cfg)
        .env("HF_TOKEN", TOKEN)
        .env("GOOGLE_APPLICATION_CREDENTIALS", &creds)
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let logs =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{logs}");
    // A failing run (wrong token, empty store) prints errors: they must not carry either secret.
    std::fs::remove_dir_all(d.path().join("run-secrets/store")).unwrap();
    hub.set_faults(HubFaults {
        require_token: Some("another".into()),
        ..Default::default()
    });
    let bad = Command::new(&pipeline)
        .args(["run", "--force"])
        .arg(&cfg)
        .env("HF_TOKEN", TOKEN)
        .env("GOOGLE_APPLICATION_CREDENTIALS", &creds)
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let bad_logs =
        String::from_utf8_lossy(&bad.stdout).to_string() + &String::from_utf8_lossy(&bad.stderr);
    // A run that reads from GCS (the real service: no emulator) signs its requests with the
    // credentials file: the key in it is refused, and the refusal must not carry it.
    let gcs_rows: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.gcs_bucket = Some("agentrace-demo".into());
            r.gcs_object = Some(format!("archives/{}", r.archive_id));
            r.gcs_generation = Some(1);
            r
        })
        .collect();
    let gcs_cfg = write_pipeline(
        &d.path().join("pipeline.yaml"),
        d.path(),
        "secrets-gcs",
        &gcs_rows,
        &SourcesSpec {
            locations: vec![model::config::LocationKind::Gcs],
            hf_endpoint: None,
            run_dir: "run-secrets-gcs".into(),
            ..spec
        },
    )
    .unwrap();
    let gcs = Command::new(&pipeline)
        .arg("run")
        .arg(&gcs_cfg)
        .env("GOOGLE_APPLICATION_CREDENTIALS", &creds)
        .env_remove("STORAGE_EMULATOR_HOST")
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let gcs_logs =
        String::from_utf8_lossy(&gcs.stdout).to_string() + &String::from_utf8_lossy(&gcs.stderr);
    assert!(!gcs.status.success(), "{gcs_logs}");
    assert!(
        gcs_logs.contains("could not get an access token from service-account key"),
        "the GCS source did not read the credentials: {gcs_logs}"
    );
    for secret in [TOKEN, GCS_SECRET] {
        assert!(!logs.contains(secret), "secret in the logs");
        assert!(!bad_logs.contains(secret), "secret in the error output");
        assert!(!gcs_logs.contains(secret), "secret in the GCS error output");
        for run in ["run-secrets", "run-secrets-gcs"] {
            let hits = grep_tree(&d.path().join(run), secret);
            assert!(hits.is_empty(), "secret written to {hits:?}");
        }
    }
    assert!(d.path().join("run-secrets/run.json").is_file());
    assert!(d.path().join("run-secrets/report.html").is_file());
}
