//! Fidelity of the local Hub: the real `huggingface_hub` Python client downloads a raw shard
//! from it with `HF_ENDPOINT` pointed at it, reading the 302's metadata and fetching the bytes
//! from the content host (with the token sent to the Hub only). Skipped, with the reason
//! printed, when python3 or huggingface_hub is not installed.

mod common;

use common::*;
use ingest::testkit::{HubFaults, HubRole};
use std::process::Command;

const SCRIPT: &str = r#"
import sys
from huggingface_hub import hf_hub_download
path = hf_hub_download(repo_id=sys.argv[1], filename=sys.argv[2], repo_type="dataset",
                       revision=sys.argv[3], cache_dir=sys.argv[4])
print(path)
"#;

fn client_available() -> Result<String, String> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import huggingface_hub; print(huggingface_hub.__version__)",
        ])
        .output()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "huggingface_hub not importable: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ))
    }
}

#[test]
fn the_real_huggingface_hub_client_downloads_a_shard_from_the_local_hub() {
    let version = match client_available() {
        Ok(v) => v,
        Err(reason) => {
            println!("SKIPPED: {reason} (pip install huggingface_hub to run this test)");
            return;
        }
    };
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let secret = "hf_fidelity_token";
    hub.set_faults(HubFaults {
        require_token: Some(secret.into()),
        ..HubFaults::default()
    });
    let cache = tempfile::tempdir().unwrap();
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    let out = Command::new("python3")
        .args([
            "-c",
            SCRIPT,
            demo::write::DEMO_HF_REPO,
            "raw/shard-00000.tar",
            &rev,
            &cache.path().display().to_string(),
        ])
        .env("HF_ENDPOINT", hub.endpoint())
        .env("HF_TOKEN", secret)
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_XET", "1")
        .env("HF_HOME", cache.path().join("home"))
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "huggingface_hub {version} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let got = std::fs::read(&path).unwrap();
    let want = std::fs::read(c.root().join("shards/shard-00000.tar")).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "downloaded shard differs");
    // The client stored it under the pinned commit.
    assert!(path.contains(&rev), "{path}");
    let log = hub.requests();
    let hub_reqs: Vec<_> = log.iter().filter(|r| r.role == HubRole::Hub).collect();
    let content: Vec<_> = log.iter().filter(|r| r.role == HubRole::Content).collect();
    assert!(!hub_reqs.is_empty() && hub_reqs.iter().all(|r| r.status == 302));
    assert!(
        hub_reqs
            .iter()
            .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {secret}")[..]))
    );
    assert!(
        !content.is_empty()
            && content
                .iter()
                .all(|r| r.method == "GET" && r.authorization.is_none())
    );
}
