//! `pipeline pin` through the binary against the real GCS emulator and the local Hub serving
//! the small demo corpus. A bucket as real buckets are (a README, `_SUCCESS`, a checksum
//! file, a text file named like an archive, console folder objects, a key with `//`, an old
//! folder left out by `--exclude`, two ids with the same bytes) pins its archives and lists
//! every other object with its reason. Refusals: bytes that differ between GCS and the Hub,
//! an unknown revision or dataset, a shard member that matches no workload (with the rule to
//! add), unreachable endpoints (a closed port, a listener that never answers) and an existing
//! output. Each refusal is one clear message, exit code 1 (2 for usage), and no manifest is
//! written.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use testkit::{DemoSources, DemoSourcesOptions};

const REPO: &str = demo::write::DEMO_HF_REPO;

struct Fixture {
    dir: tempfile::TempDir,
    sources: DemoSources,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        demo::generate(
            &dir.path().join("corpus"),
            demo::Scale::Small,
            demo::DEFAULT_SEED,
        )
        .unwrap();
        let sources =
            DemoSources::start(&dir.path().join("corpus"), &DemoSourcesOptions::default())
                .expect("fake-gcs-server and the local Hub (scripts/test installs the emulator)");
        Fixture { dir, sources }
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("pinned/manifest.csv")
    }

    /// Run `pipeline pin ARGS --out <dir>/pinned/manifest.csv` against the stand-ins.
    fn pin(&self, args: &[&str]) -> Output {
        pin_with(
            args,
            &self.out(),
            &self.sources.gcs.url(),
            &self.sources.hub.endpoint(),
        )
    }

    /// Output text with the endpoints, the directory and GCS generations made stable.
    fn stable(&self, text: &[u8]) -> String {
        let mut s = String::from_utf8_lossy(text)
            .replace(&self.sources.gcs.url(), "<gcs>")
            .replace(&self.sources.hub.endpoint(), "<hub>")
            .replace(&self.dir.path().display().to_string(), "<dir>");
        // `gs://bucket/object#<generation>`.
        let mut from = 0;
        while let Some(at) = s[from..].find("gs://").map(|i| i + from) {
            let end = s[at..]
                .find(char::is_whitespace)
                .map_or(s.len(), |i| i + at);
            if let Some(hash) = s[at..end].find('#').map(|i| i + at + 1) {
                let digits = s[hash..].chars().take_while(char::is_ascii_digit).count();
                s.replace_range(hash..hash + digits, "<generation>");
            }
            from = at + 5;
        }
        s.trim_end().to_string()
    }
}

/// The pipeline binary, built once (so the build is not timed with a command).
fn pipeline() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| common::bin("pipeline"))
}

/// The command succeeded; else its stderr is the failure.
fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pin_with(args: &[&str], out: &Path, gcs: &str, hub: &str) -> Output {
    Command::new(pipeline())
        .arg("pin")
        .args(args)
        .arg("--out")
        .arg(out)
        .env("STORAGE_EMULATOR_HOST", gcs)
        .env("HF_ENDPOINT", hub)
        .env_remove("HF_TOKEN")
        .env_remove("HUGGING_FACE_HUB_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        // No token file either (`hf auth login` may have written one on this machine).
        .env("HF_TOKEN_PATH", out.with_extension("no-token"))
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .output()
        .unwrap()
}

#[test]
fn bytes_that_differ_between_gcs_and_the_hub_are_refused_with_both_hashes() {
    let f = Fixture::new();
    // Zstandard's magic, then other bytes: an archive by its first bytes, not the Hub's.
    let mut other = vec![0x28, 0xb5, 0x2f, 0xfd];
    other.extend_from_slice(b"not the archive the shard holds\n");
    f.sources
        .gcs
        .upload_bytes("agentrace-demo", "archives/tmax-001.tar.zst", other.clone())
        .unwrap();
    let out = f.pin(&[
        "--gcs",
        "gs://agentrace-demo/archives",
        "--hf",
        &format!("{REPO}:raw"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let demo_sha = model::load_config(&f.dir.path().join("corpus/pipeline.yaml"))
        .unwrap()
        .archives
        .iter()
        .find(|a| a.archive_id == "tmax-001")
        .unwrap()
        .sha256
        .clone();
    let err = f.stable(&out.stderr);
    assert!(err.contains(&testkit::hub::sha256_hex(&other)), "{err}");
    assert!(err.contains(&demo_sha), "{err}");
    insta::assert_snapshot!(err, @r"
    error: 1 archive(s) refused, nothing pinned:
      archive `tmax-001.tar.zst` differs between GCS and the Hub: gs://agentrace-demo/archives/tmax-001.tar.zst#<generation> has sha256 0c2341964d53ae5d76fe93a262c20b4f480808d4eb173fdd0d33fb77640b50c1 (36 bytes), hf://datasets/agentrace-demo/agent-workload-traces@ca6373eb25e72e36b58884f6635a0611ac944d56/raw/shard-00000.tar#tmax-001.tar.zst has sha256 41f467ae0d89506d7a693e8a752fe295a322b1d668bde6473bb41c35047dd777 (28550 bytes)
    ");
    assert!(!f.out().exists(), "no manifest after a refusal");
}

#[test]
fn an_unknown_revision_or_dataset_is_refused() {
    let f = Fixture::new();
    let out = f.pin(&["--hf", &format!("{REPO}@v9.9:raw")]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(f.stable(&out.stderr), @"error: hf://datasets/agentrace-demo/agent-workload-traces@v9.9: dataset `agentrace-demo/agent-workload-traces` has no revision `v9.9` (RevisionNotFound, HTTP 404: Invalid rev id) (hint: check hf_revision `v9.9` (pins are exact commits; `pipeline pin` writes them) and that it belongs to dataset `agentrace-demo/agent-workload-traces`)");
    let out = f.pin(&["--hf", "agentrace-demo/no-such-dataset"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(f.stable(&out.stderr), @"error: hf://datasets/agentrace-demo/no-such-dataset@main: the Hub has no dataset `agentrace-demo/no-such-dataset` that this request may read: it does not exist or is private (no token was sent; RepoNotFound, HTTP 401: Repository not found) (hint: check the repository name `agentrace-demo/no-such-dataset` for a typo; a private dataset needs a token that can read it: set HF_TOKEN or run `hf auth login`)");
    assert!(!f.out().exists());
}

/// A shard holding an archive whose name matches no workload: refused by name, unless a
/// `--workload` rule places it.
#[test]
fn a_shard_member_matching_no_workload_is_refused() {
    let f = Fixture::new();
    let corpus = f.dir.path().join("corpus");
    let shard = f.dir.path().join("stray.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&shard).unwrap());
    for (name, path) in [
        ("tmax-000.tar.gz", corpus.join("archives/tmax-000.tar.gz")),
        (
            "notes-2026.tar.gz",
            corpus.join("archives/tmax-001.tar.zst"),
        ),
    ] {
        let mut h = tar::Header::new_ustar();
        h.set_size(std::fs::metadata(&path).unwrap().len());
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, std::fs::File::open(&path).unwrap())
            .unwrap();
    }
    b.finish().unwrap();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    f.sources
        .hub
        .add_file(REPO, commit, "extra/shard-00000.tar", &shard)
        .unwrap();
    f.sources.hub.set_branch(REPO, "extra", commit);
    let out = f.pin(&["--hf", &format!("{REPO}@extra:extra")]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(f.stable(&out.stderr), @r"
    error: 1 archive(s) refused, nothing pinned:
      archive `notes-2026.tar.gz` (hf://datasets/agentrace-demo/agent-workload-traces@0123456789abcdef0123456789abcdef01234567/extra/shard-00000.tar#notes-2026.tar.gz) matches no workload rule; add one, e.g. --workload 'notes*=NAME' with NAME one of tmax, deepswe, or leave it out with --exclude 'notes-2026.tar.gz'
    ");
    assert!(!f.out().exists());
    let out = f.pin(&[
        "--hf",
        &format!("{REPO}@extra:extra"),
        "--workload",
        "notes-*=tmax",
        "--workload",
        "tmax-*=tmax",
    ]);
    assert_success(&out);
    let manifest = std::fs::read_to_string(f.out()).unwrap();
    assert!(manifest.contains(",notes-2026.tar.gz,"), "{manifest}");
    assert!(manifest.contains(&format!(",{commit},")), "{manifest}");
}

/// A listener that accepts connections and never answers.
fn silent_listener() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let held = l.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for s in held.incoming() {
            match s {
                Ok(s) => open.push(s),
                Err(_) => break,
            }
        }
    });
    (l, port)
}

fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Every unreachable endpoint ends in one clear error well within the retry budget
/// (`--retries 1 --timeout 1`: two attempts of at most about a second each, plus backoff).
#[test]
fn an_unreachable_endpoint_fails_clearly_within_the_retry_budget() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("manifest.csv");
    let closed = format!("http://127.0.0.1:{}", closed_port());
    let (_listener, port) = silent_listener();
    let silent = format!("http://127.0.0.1:{port}");
    let budget = ["--retries", "1", "--timeout", "1"];
    let mut texts = Vec::new();
    for (what, endpoint) in [("closed", &closed), ("silent", &silent)] {
        for source in ["hf", "gcs"] {
            let mut args = budget.to_vec();
            let (gcs, hub) = match source {
                "hf" => {
                    args.extend(["--hf", REPO]);
                    ("127.0.0.1:1", endpoint.as_str())
                }
                _ => {
                    args.extend(["--gcs", "gs://agentrace-demo/archives"]);
                    (endpoint.as_str(), "http://127.0.0.1:1")
                }
            };
            pipeline();
            let started = Instant::now();
            let out = pin_with(&args, &out_file, gcs, hub);
            let took = started.elapsed();
            assert_eq!(out.status.code(), Some(1), "{what} {source}");
            assert!(
                took < Duration::from_secs(15),
                "{what} {source} took {took:?}"
            );
            let err = String::from_utf8_lossy(&out.stderr)
                .replace(&closed, "<closed>")
                .replace(&silent, "<silent>");
            assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
            texts.push(format!("{what} {source}: {}", err.trim_end()));
        }
    }
    assert!(!out_file.exists());
    insta::assert_snapshot!(texts.join("\n"), @r"
    closed hf: error: <closed>: no answer from the Hub after 2 attempt(s): error sending request: client error (Connect): tcp connect error: Connection refused (os error 111); check the endpoint and the network
    closed gcs: error: <closed>: no answer from GCS after 2 attempt(s): error sending request: client error (Connect): tcp connect error: Connection refused (os error 111); check the endpoint and the network
    silent hf: error: <silent>: no answer from the Hub after 1 attempt(s): it accepted the connection but did not answer within the timeout (not retried); check the endpoint and the network
    silent gcs: error: <silent>: no answer from GCS after 1 attempt(s): it accepted the connection but did not answer within the timeout (not retried); check the endpoint and the network
    ");
}

#[test]
fn an_existing_manifest_is_kept_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("manifest.csv");
    std::fs::write(&out_file, "kept\n").unwrap();
    let out = pin_with(
        &["--hf", REPO],
        &out_file,
        "127.0.0.1:1",
        "http://127.0.0.1:1",
    );
    assert_eq!(out.status.code(), Some(2));
    let err =
        String::from_utf8_lossy(&out.stderr).replace(&dir.path().display().to_string(), "<dir>");
    insta::assert_snapshot!(err.trim_end(), @"error: <dir>/manifest.csv exists; pass --force to replace it");
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "kept\n");
}

/// The objects real buckets hold beside their archives are skipped and listed, never fatal:
/// judged by their bytes (not their names), folder objects and a `//` key included; an
/// `--exclude`d folder is left out, `--include` narrows; two ids with the same bytes are
/// reported.
#[test]
fn a_bucket_as_it_is_pins_its_archives_and_lists_everything_else() {
    let f = Fixture::new();
    let corpus = f.dir.path().join("corpus");
    let archive = std::fs::read(corpus.join("archives/tmax-000.tar.gz")).unwrap();
    let bucket = "agentrace-demo";
    for (object, bytes) in [
        ("archives/README.md", b"# The study's archives\n".to_vec()),
        ("archives/_SUCCESS", Vec::new()),
        ("archives/SHA256SUMS", b"0000  tmax-000.tar.gz\n".to_vec()),
        (
            "archives/tmax-notes.txt",
            b"notes, not an archive\n".to_vec(),
        ),
        ("archives/sub/", Vec::new()),
        ("archives/", Vec::new()),
        ("archives//tmax-000.tar.gz", archive.clone()),
        ("archives/old/tmax-900.tar.gz", archive.clone()),
        ("archives/copies/tmax-000-copy.tar.gz", archive.clone()),
    ] {
        f.sources.gcs.upload_bytes(bucket, object, bytes).unwrap();
    }
    let out = f.pin(&[
        "--gcs",
        "gs://agentrace-demo/archives",
        "--exclude",
        "old/*",
    ]);
    assert_success(&out);
    let err = f.stable(&out.stderr);
    let skipped: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("pin: skipped") || l.starts_with("warning:"))
        .collect();
    insta::assert_snapshot!(skipped.join("\n"), @r#"
    pin: skipped gs://agentrace-demo/archives/#<generation> (0 bytes): a folder object (its name ends with `/`)
    pin: skipped gs://agentrace-demo/archives//tmax-000.tar.gz#<generation> (39662 bytes): its name cannot be read through the GCS client (Path "archives//tmax-000.tar.gz" contained empty path segment); rename the object to pin it
    pin: skipped gs://agentrace-demo/archives/README.md#<generation> (23 bytes): not an archive: its first bytes are 23 20 54 68, not gzip's (1f 8b) or zstd's (28 b5 2f fd)
    pin: skipped gs://agentrace-demo/archives/SHA256SUMS#<generation> (22 bytes): not an archive: its first bytes are 30 30 30 30, not gzip's (1f 8b) or zstd's (28 b5 2f fd)
    pin: skipped gs://agentrace-demo/archives/_SUCCESS#<generation> (0 bytes): not an archive: it is empty
    pin: skipped gs://agentrace-demo/archives/old/tmax-900.tar.gz#<generation> (39662 bytes): excluded by --exclude old/*
    pin: skipped gs://agentrace-demo/archives/sub/#<generation> (0 bytes): a folder object (its name ends with `/`)
    pin: skipped gs://agentrace-demo/archives/tmax-notes.txt#<generation> (22 bytes): not an archive: its first bytes are 6e 6f 74 65, not gzip's (1f 8b) or zstd's (28 b5 2f fd)
    warning: archives tmax-000, tmax-000-copy have the same bytes (sha256 1fb97420b2863b2cc43f67b503bdae2d3b01725afecd302e5786ec3073b3c878); each is pinned and audited as its own archive, so check that this is meant
    "#);
    let manifest = std::fs::read_to_string(f.out()).unwrap();
    let ids: Vec<&str> = manifest
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    let demo = model::load_config(&corpus.join("pipeline.yaml")).unwrap();
    let mut expected: Vec<String> = demo.archives.iter().map(|a| a.archive_id.clone()).collect();
    expected.push("tmax-000-copy".into());
    expected.sort();
    assert_eq!(ids, expected);
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(f.out().with_file_name("manifest.pin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["skipped"].as_array().unwrap().len(), 8, "{report}");
    assert_eq!(report["exclude"], serde_json::json!(["old/*"]));
    assert_eq!(
        report["same_bytes"][0]["archive_ids"],
        serde_json::json!(["tmax-000", "tmax-000-copy"])
    );

    // --include narrows to the names it matches; the rest is listed as left out.
    let out = f.pin(&[
        "--gcs",
        "gs://agentrace-demo/archives",
        "--include",
        "deepswe-*",
        "--force",
        "--quiet",
    ]);
    assert_success(&out);
    let manifest = std::fs::read_to_string(f.out()).unwrap();
    assert!(
        manifest
            .lines()
            .skip(1)
            .all(|l| l.split(',').nth(1) == Some("deepswe")),
        "{manifest}"
    );
    let err = f.stable(&out.stderr);
    assert!(
        err.contains("archives/tmax-000.tar.gz#<generation> (")
            && err.contains("matched by no --include"),
        "{err}"
    );
}
