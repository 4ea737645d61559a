//! `pipeline pin` refusals, through the binary against the real GCS emulator and the local
//! Hub serving the small demo corpus: bytes that differ between GCS and the Hub, an unknown
//! revision or dataset, a shard member that matches no workload, unreachable endpoints (a
//! closed port, a listener that never answers) and an existing output. Each refusal is one
//! clear message, exit code 1 (2 for usage), and no manifest is written.

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
    let other = b"not the archive the shard holds\n".to_vec();
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
      archive `tmax-001.tar.zst` differs between GCS and the Hub: gs://agentrace-demo/archives/tmax-001.tar.zst#<generation> has sha256 5d5bc617df5f6fe38d6c24b0850e0b31c8c39edb04c41a360735b47143e9e671 (32 bytes), hf://datasets/agentrace-demo/agent-workload-traces@ca6373eb25e72e36b58884f6635a0611ac944d56/raw/shard-00000.tar#tmax-001.tar.zst has sha256 41f467ae0d89506d7a693e8a752fe295a322b1d668bde6473bb41c35047dd777 (28550 bytes)
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
      archive `notes-2026.tar.gz` (hf://datasets/agentrace-demo/agent-workload-traces@0123456789abcdef0123456789abcdef01234567/extra/shard-00000.tar#notes-2026.tar.gz) matches no workload; give --workload GLOB=NAME
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    silent gcs: error: <silent>: no answer from GCS after 2 attempt(s): error sending request: operation timed out; check the endpoint and the network
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
