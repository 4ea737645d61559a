//! Fidelity of the local Hub: the real `huggingface_hub` Python client downloads a raw shard
//! from it with `HF_ENDPOINT` pointed at it, reading the 302's metadata and fetching the bytes
//! from the content host (with the token sent to the Hub only), and reads its listing API
//! (`HfApi.dataset_info`, `HfApi.list_repo_tree` across pages, and the errors of an unknown
//! revision and repository); and the strict Hub's behaviour is what the client knows: its
//! refusals raise the client's own errors, it follows a renamed repository's relative
//! redirect, quotes an odd shard name as ingest does, and parses and waits out the
//! `RateLimit` headers. The client is the one `scripts/test` installs (`AGENTRACE_PYTHON`);
//! without it every test fails and says so.

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

const REFUSALS: &str = r#"
import json, sys
from huggingface_hub import hf_hub_download
endpoint, repo, rev, token, cache, gated, old, odd = sys.argv[1:9]
def download(repo_id, filename, revision=rev, tok=token):
    return hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset",
                           revision=revision, cache_dir=cache, token=tok, endpoint=endpoint)
def refusal(f):
    try:
        f()
        return None
    except Exception as e:
        response = getattr(e, "response", None)
        return [type(e).__name__, response.status_code if response is not None else None]
shard = "raw/shard-00000.tar"
print(json.dumps({
    "errors": {
        "gated": refusal(lambda: download(gated, shard)),
        "gated_no_token": refusal(lambda: download(gated, shard, tok=False)),
        "unknown_repo": refusal(lambda: download("agentrace-demo/agent-workload-tracse", shard)),
        "missing_revision": refusal(lambda: download(repo, shard, revision="0" * 40)),
        "missing_file": refusal(lambda: download(repo, "raw/shard-99999.tar")),
    },
    "renamed": download(old, shard),
    "odd": download(repo, odd),
}))
"#;

const RATE_LIMITED: &str = r#"
import json, sys, time
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import http_backoff, parse_ratelimit_headers
endpoint, repo, rev, token = sys.argv[1:5]
api = HfApi(endpoint=endpoint, token=token)
served = 0
while True:
    try:
        api.dataset_info(repo, revision=rev)
        served += 1
    except HfHubHTTPError as e:
        refused = e
        break
info = parse_ratelimit_headers(refused.response.headers)
start = time.monotonic()
again = http_backoff("GET", f"{endpoint}/api/datasets/{repo}/revision/{rev}",
                     headers={"authorization": f"Bearer {token}"}, max_retries=3)
print(json.dumps({
    "served": served,
    "status": refusal_status if (refusal_status := refused.response.status_code) else None,
    "message_names_the_limit": "you have reached your 'api' rate limit" in str(refused),
    "remaining": info.remaining,
    "limit": info.limit,
    "window_seconds": info.window_seconds,
    "reset_in_seconds": info.reset_in_seconds,
    "after_wait": again.status_code,
    "waited_s": time.monotonic() - start,
}))
"#;

/// The real client, run with `HF_ENDPOINT` pointed at the local Hub and no Hub variables of
/// the calling process.
fn python_client(script: &str, args: &[&str], home: &std::path::Path) -> serde_json::Value {
    let out = Command::new(testkit::python())
        .arg("-c")
        .arg(script)
        .args(args)
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_XET", "1")
        .env("HF_HOME", home)
        .env_remove("HF_TOKEN")
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "huggingface_hub failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The strict Hub's refusals, redirects and names are the ones the real client knows: a
/// gated dataset raises `GatedRepoError` (403 with a token, 401 without), a mistyped
/// repository `RepositoryNotFoundError` (401, as the real Hub answers), an unknown revision
/// `RevisionNotFoundError` and a missing file `RemoteEntryNotFoundError` (404 each); the
/// client follows a renamed repository's relative redirect, and quotes an odd shard name
/// exactly as ingest does. Fails when the client is missing.
#[test]
fn the_real_huggingface_hub_client_knows_the_strict_hubs_refusals_redirects_and_names() {
    testkit::require_python_modules(&["huggingface_hub"])
        .unwrap_or_else(|e| panic!("the Hub refusals test needs huggingface_hub: {e}"));
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let repo = demo::write::DEMO_HF_REPO;
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    let shard0 = c.root().join("shards/shard-00000.tar");
    let gated = "agentrace-demo/gated-traces";
    hub.add_file(gated, &rev, "raw/shard-00000.tar", &shard0)
        .unwrap();
    hub.set_gated(gated, &[]);
    let old = "agentrace-demo/old-traces";
    hub.add_file(old, &rev, "raw/shard-00000.tar", &shard0)
        .unwrap();
    hub.rename_repo(old, "agentrace-demo/renamed-traces");
    let odd = "raw/shard #0?é.tar";
    hub.add_file(repo, &rev, odd, &shard0).unwrap();
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("cache");
    let endpoint = hub.endpoint();
    let v = python_client(
        REFUSALS,
        &[
            &endpoint,
            repo,
            &rev,
            "hf_someone",
            &cache.display().to_string(),
            gated,
            old,
            odd,
        ],
        home.path(),
    );
    assert_eq!(
        v["errors"],
        serde_json::json!({
            "gated": ["GatedRepoError", 403],
            "gated_no_token": ["GatedRepoError", 401],
            "unknown_repo": ["RepositoryNotFoundError", 401],
            "missing_revision": ["RevisionNotFoundError", 404],
            "missing_file": ["RemoteEntryNotFoundError", 404],
        })
    );
    let want = std::fs::read(&shard0).unwrap();
    for case in ["renamed", "odd"] {
        let got = std::fs::read(v[case].as_str().unwrap()).unwrap();
        assert!(got == want, "{case}: the downloaded shard differs");
    }
    let hub_reqs: Vec<(u16, String)> = hub
        .requests()
        .into_iter()
        .filter(|r| r.role == HubRole::Hub && r.status < 400)
        .map(|r| (r.status, r.target))
        .collect();
    assert_eq!(
        hub_reqs,
        vec![
            (
                307,
                format!("/datasets/{old}/resolve/{rev}/raw/shard-00000.tar")
            ),
            (
                302,
                format!(
                    "/datasets/agentrace-demo/renamed-traces/resolve/{rev}/raw/shard-00000.tar"
                )
            ),
            // The same quoting as ingest's (`revisions_and_shard_names_are_percent_encoded...`).
            (
                302,
                format!("/datasets/{repo}/resolve/{rev}/raw/shard%20%230%3F%C3%A9.tar")
            ),
        ]
    );
}

/// The strict Hub's rate limit reads as the real client reads it: `RateLimit` and
/// `RateLimit-Policy` parse to the quota, the window and the seconds left, the 429's message
/// names the limit, and the client's own backoff, waiting as the header says, is served
/// once the window has passed. Fails when the client is missing.
#[test]
fn the_real_huggingface_hub_client_reads_the_strict_hubs_rate_limit_and_waits_it_out() {
    testkit::require_python_modules(&["huggingface_hub"])
        .unwrap_or_else(|e| panic!("the Hub rate-limit test needs huggingface_hub: {e}"));
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let window = std::time::Duration::from_secs(2);
    hub.set_rate_limit(Some(testkit::HubRateLimit { quota: 3, window }));
    let home = tempfile::tempdir().unwrap();
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    let v = python_client(
        RATE_LIMITED,
        &[
            &hub.endpoint(),
            demo::write::DEMO_HF_REPO,
            &rev,
            "hf_someone",
        ],
        home.path(),
    );
    assert_eq!(v["served"], 3, "{v}");
    assert_eq!(v["status"], 429, "{v}");
    assert_eq!(v["message_names_the_limit"], true, "{v}");
    assert_eq!(v["remaining"], 0, "{v}");
    assert_eq!(v["limit"], 3, "{v}");
    assert_eq!(v["window_seconds"], 2, "{v}");
    let reset = v["reset_in_seconds"].as_u64().unwrap();
    assert!((1..=2).contains(&reset), "{v}");
    assert_eq!(v["after_wait"], 200, "{v}");
    // The client slept the header's seconds (plus its own one) before the retry.
    assert!(v["waited_s"].as_f64().unwrap() >= reset as f64, "{v}");
}
