//! Fidelity of the local Hub: the real `huggingface_hub` Python client downloads a raw shard
//! from it with `HF_ENDPOINT` pointed at it, reading the 302's metadata and fetching the bytes
//! from the content host (with the token sent to the Hub only), and reads its listing API
//! (`HfApi.dataset_info`, `HfApi.list_repo_tree` across pages, and the errors of an unknown
//! revision and repository). The client is the one `scripts/test` installs
//! (`AGENTRACE_PYTHON`); without it both tests fail and say so.

mod common;

use common::*;
use std::process::Command;
use testkit::{HubFaults, HubRole};

const SCRIPT: &str = r#"
import sys
from huggingface_hub import hf_hub_download
path = hf_hub_download(repo_id=sys.argv[1], filename=sys.argv[2], repo_type="dataset",
                       revision=sys.argv[3], cache_dir=sys.argv[4])
print(path)
"#;

#[test]
fn the_real_huggingface_hub_client_downloads_a_shard_from_the_local_hub() {
    // A missing client fails the test (with how to install it): never a silent pass.
    let version = testkit::require_python_modules(&["huggingface_hub"])
        .unwrap_or_else(|e| panic!("the Hub fidelity test needs huggingface_hub: {e}"));
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let secret = "hf_fidelity_token";
    hub.set_faults(HubFaults {
        require_token: Some(secret.into()),
        ..HubFaults::default()
    });
    let cache = tempfile::tempdir().unwrap();
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    let out = Command::new(testkit::python())
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

const LISTING: &str = r#"
import json, sys
from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
api = HfApi(endpoint=sys.argv[1], token=sys.argv[3])
repo = sys.argv[2]
info = api.dataset_info(repo, revision="main")
default = api.dataset_info(repo)
tree = list(api.list_repo_tree(repo, path_in_repo="raw", recursive=True, revision=info.sha,
                               repo_type="dataset"))
top = list(api.list_repo_tree(repo, revision=info.sha, repo_type="dataset"))
errors = []
try:
    api.dataset_info(repo, revision="no-such-branch")
except RevisionNotFoundError:
    errors.append("RevisionNotFound")
try:
    api.dataset_info("nobody/nothing")
except RepositoryNotFoundError:
    errors.append("RepoNotFound")
print(json.dumps({
    "sha": info.sha,
    "default_sha": default.sha,
    "siblings": [s.rfilename for s in info.siblings],
    "files": [[e.path, e.size, e.lfs.sha256 if e.lfs else None]
              for e in tree if type(e).__name__ == "RepoFile"],
    "top": [[type(e).__name__, e.path] for e in top],
    "errors": errors,
}))
"#;

/// `HfApi` accepts the local Hub's listing API: the revision resolves to the demo commit,
/// the tree (two entries a page, so the client follows `Link` headers) lists every shard
/// with its size and LFS SHA256, a non-recursive listing shows the folder, and an unknown
/// revision or repository raises the client's own errors. Fails when the client is missing.
#[test]
fn the_real_huggingface_hub_client_reads_the_listing_api() {
    testkit::require_python_modules(&["huggingface_hub"])
        .unwrap_or_else(|e| panic!("the Hub listing test needs huggingface_hub: {e}"));
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    // More files than a page: copies of the first shard in a subfolder.
    let first = c.root().join("shards/shard-00000.tar");
    let mut shards: Vec<String> = c.summary.archives.iter().map(|a| a.shard.clone()).collect();
    shards.dedup();
    for i in 0..3 {
        let path = format!("raw/more/copy-{i}.tar");
        hub.add_file(demo::write::DEMO_HF_REPO, &rev, &path, &first)
            .unwrap();
        shards.push(path);
    }
    shards.sort();
    hub.set_tree_page_size(2);
    let secret = "hf_listing_token";
    hub.set_faults(HubFaults {
        require_token: Some(secret.into()),
        ..HubFaults::default()
    });
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(testkit::python())
        .args([
            "-c",
            LISTING,
            &hub.endpoint(),
            demo::write::DEMO_HF_REPO,
            secret,
        ])
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HOME", home.path())
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "HfApi failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["sha"], rev);
    assert_eq!(v["default_sha"], rev);
    let siblings: Vec<&str> = v["siblings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(siblings, shards);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), shards.len());
    for (f, shard) in files.iter().zip(&shards) {
        let local = match shard.strip_prefix("raw/more/") {
            Some(_) => first.clone(),
            None => c
                .root()
                .join("shards")
                .join(shard.trim_start_matches("raw/")),
        };
        let (sha, size) = ingest::sink::hash_file(&local).unwrap();
        assert_eq!(f[0], *shard);
        assert_eq!(f[1], size);
        assert_eq!(f[2], sha);
    }
    assert_eq!(v["top"], serde_json::json!([["RepoFolder", "raw"]]));
    assert_eq!(
        v["errors"],
        serde_json::json!(["RevisionNotFound", "RepoNotFound"])
    );
    // The client followed the pages and sent the token to every API request.
    let api: Vec<_> = hub
        .requests()
        .into_iter()
        .filter(|r| r.target.starts_with("/api/"))
        .collect();
    assert!(
        api.iter().filter(|r| r.target.contains("cursor=")).count() >= 1,
        "{api:?}"
    );
    assert!(
        api.iter()
            .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {secret}")[..]))
    );
}
