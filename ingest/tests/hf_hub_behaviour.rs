//! The Hub as the real one behaves, through the local Hub: its refusals told apart by
//! `X-Error-Code` (a gated dataset, a mistyped repository, a missing revision, a missing
//! file), the token file `hf auth login` writes, `HF_HUB_OFFLINE`, rate limits over a real
//! time window waited out as the `RateLimit` header says (and given up past
//! `ingest.rate_limit_patience_s`), a renamed repository's relative redirect, revisions and
//! shard names that need percent-encoding, and content URLs that expire by time.

mod common;

use common::*;
use ingest::progress::ProgressSink;
use ingest::{EnvOverrides, FetchError, HfToken, IngestOptions, Verdict};
use model::config::LocationKind::Hf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::{HubFaults, HubRateLimit, HubRole};

fn revision() -> String {
    demo::write::demo_hf_revision(demo::DEFAULT_SEED)
}

const REPO: &str = demo::write::DEMO_HF_REPO;

/// Progress notes, kept.
#[derive(Default)]
struct Notes(Mutex<Vec<String>>);

impl ProgressSink for Notes {
    fn note(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_string());
    }
}

/// The failure line of an archive (problem and hint).
fn failure_of(report: &ingest::IngestReport, archive: &str) -> String {
    report
        .failures
        .iter()
        .find(|f| f.archive_id == archive)
        .map(|f| f.to_string())
        .unwrap_or_else(|| panic!("no failure for {archive}"))
}

#[test]
fn a_gated_dataset_a_mistyped_repo_a_missing_revision_and_a_missing_file_are_told_apart() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    // A gated copy of the dataset whose terms no token has accepted.
    let gated = "agentrace-demo/gated-traces";
    let shard0 = c.root().join("shards/shard-00000.tar");
    hub.add_file(gated, &revision(), "raw/shard-00000.tar", &shard0)
        .unwrap();
    hub.set_gated(gated, &[]);
    let mut rows = c.rows();
    rows.truncate(4);
    for r in &mut rows {
        r.hf_shard = Some("raw/shard-00000.tar".into());
    }
    rows[0].hf_repo = Some(gated.into());
    rows[1].hf_repo = Some("agentrace-demo/agent-workload-tracse".into());
    let other = "0123456789abcdef0123456789abcdef01234567";
    rows[2].hf_revision = Some(other.into());
    rows[3].hf_shard = Some("raw/shard-99999.tar".into());
    let cfg = c.pipeline("hf-refusals", &rows, &[Hf], None, Some(hub.endpoint()));
    let with_token = IngestOptions {
        env: EnvOverrides {
            hf_token: Some(HfToken::new("hf_someone")),
            ..EnvOverrides::default()
        },
        ..opts()
    };
    let report = failed_report(ingest::run(&cfg, &with_token));
    assert_eq!(report.verified_archives, 0);
    let ids: Vec<String> = c.archives()[..4]
        .iter()
        .map(|a| a.archive_id.clone())
        .collect();
    let uri = |i: usize| report.ledger[i].uri.clone();
    assert_eq!(
        report.ledger[0].error.as_deref(),
        Some(format!("{}: dataset `{gated}` is gated and its terms have not been accepted for this request (the token from HF_TOKEN was sent; GatedRepo, HTTP 403: Access to dataset {gated} is restricted and you are not in the authorized list. Visit https://huggingface.co/datasets/{gated} to ask for access.)", uri(0)).as_str())
    );
    assert!(
        failure_of(&report, &ids[0]).ends_with(&format!(
            "(hint: accept the dataset's terms at {}/datasets/{gated} with the account the token belongs to)",
            hub.endpoint()
        )),
        "{}",
        failure_of(&report, &ids[0])
    );
    assert_eq!(
        report.ledger[1].error.as_deref(),
        Some(format!("{}: the Hub has no dataset `agentrace-demo/agent-workload-tracse` that this request may read: it does not exist or is private (the token from HF_TOKEN was sent; RepoNotFound, HTTP 401: Repository not found)", uri(1)).as_str())
    );
    assert!(
        failure_of(&report, &ids[1]).contains("(hint: check the repository name `agentrace-demo/agent-workload-tracse` for a typo; if it is private, the token from HF_TOKEN must belong to an account that can read it)"),
        "{}",
        failure_of(&report, &ids[1])
    );
    assert_eq!(
        report.ledger[2].error.as_deref(),
        Some(
            format!(
                "{}: dataset `{REPO}` has no revision `{other}` (RevisionNotFound, HTTP 404)",
                uri(2)
            )
            .as_str()
        )
    );
    assert!(failure_of(&report, &ids[2]).contains(&format!("(hint: check hf_revision `{other}`")));
    assert_eq!(
        report.ledger[3].error.as_deref(),
        Some(
            format!(
                "{}: dataset `{REPO}` has no `raw/shard-99999.tar` at revision {} (EntryNotFound, HTTP 404)",
                uri(3),
                revision()
            )
            .as_str()
        )
    );
    assert!(failure_of(&report, &ids[3]).contains("(hint: check hf_shard `raw/shard-99999.tar`"));
    // Without a token, the gated dataset says how to get one too.
    let cfg = c.pipeline(
        "hf-gated-no-token",
        &rows[..1],
        &[Hf],
        None,
        Some(hub.endpoint()),
    );
    let report = failed_report(ingest::run(&cfg, &opts()));
    assert!(
        report.ledger[0]
            .error
            .as_deref()
            .unwrap()
            .contains("(no token was sent; GatedRepo, HTTP 401: Access to dataset"),
        "{:?}",
        report.ledger[0].error
    );
    assert!(failure_of(&report, &ids[0]).ends_with(
        "with the account the token belongs to, then set HF_TOKEN or run `hf auth login`)"
    ));
    // Granted access, the gated dataset is read.
    hub.set_gated(gated, &["hf_someone"]);
    let cfg = c.pipeline(
        "hf-gated-granted",
        &rows[..1],
        &[Hf],
        None,
        Some(hub.endpoint()),
    );
    let report = ingest::run(&cfg, &with_token).expect("access granted");
    assert_eq!(report.ledger[0].verdict, Verdict::Verified);
}

/// The `ingest` binary, with no Hub variables of the calling process.
fn ingest_command(config: &std::path::Path, home: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ingest"));
    cmd.args(["--config", &config.display().to_string(), "--quiet"])
        .env("HOME", home)
        .env("RUST_LOG", "info");
    for v in [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_TOKEN_PATH",
        "HF_HOME",
        "XDG_CACHE_HOME",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_ENDPOINT",
    ] {
        cmd.env_remove(v);
    }
    cmd
}

/// The local Hub serving `c`, answering only requests that carry `secret`.
fn hub_requiring_token(c: &Corpus, secret: &str) -> testkit::HubServer {
    let hub = hub_with_corpus(c);
    hub.set_faults(HubFaults {
        require_token: Some(secret.into()),
        ..HubFaults::default()
    });
    hub
}

#[test]
fn the_token_file_that_hf_auth_login_writes_is_sent_to_the_hub() {
    let c = small_corpus();
    let secret = "hf_from_the_token_file";
    let hub = hub_requiring_token(&c, secret);
    let rows = vec![c.rows()[0].clone()];
    let home = tempfile::tempdir().unwrap();
    // `hf auth login` writes `$HF_HOME/token`, default `~/.cache/huggingface/token`.
    let default_file = home.path().join(".cache/huggingface/token");
    std::fs::create_dir_all(default_file.parent().unwrap()).unwrap();
    std::fs::write(&default_file, format!("{secret}\n")).unwrap();
    let cfg = c.pipeline("hf-token-file", &rows, &[Hf], None, Some(hub.endpoint()));
    let out = ingest_command(&cfg.path, home.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hub_auth: Vec<Option<String>> = hub
        .requests()
        .into_iter()
        .filter(|r| r.role == HubRole::Hub)
        .map(|r| r.authorization)
        .collect();
    assert_eq!(hub_auth, vec![Some(format!("Bearer {secret}"))]);
    for f in ["ledger.parquet", "ingest.run.json"] {
        let bytes = std::fs::read(cfg.run_dir.join(f)).unwrap();
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
    }

    // HF_HOME moves the file; HF_TOKEN_PATH names it; HF_TOKEN comes before either.
    let hf_home = home.path().join("elsewhere");
    std::fs::create_dir_all(&hf_home).unwrap();
    std::fs::write(hf_home.join("token"), secret).unwrap();
    std::fs::remove_file(&default_file).unwrap();
    let cfg = c.pipeline("hf-token-home", &rows, &[Hf], None, Some(hub.endpoint()));
    let out = ingest_command(&cfg.path, home.path())
        .env("HF_HOME", &hf_home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = c.pipeline("hf-token-stale", &rows, &[Hf], None, Some(hub.endpoint()));
    let out = ingest_command(&cfg.path, home.path())
        .env("HF_HOME", &hf_home)
        .env("HF_TOKEN", "hf_stale")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the Hub refused the token (the token from HF_TOKEN was sent; HTTP 401: Invalid credentials in Authorization header)")
            && stderr.contains("make a new one at https://huggingface.co/settings/tokens"),
        "{stderr}"
    );
    let named = home.path().join("named-token");
    std::fs::write(&named, secret).unwrap();
    let env = EnvOverrides::from_lookup(|k| match k {
        "HOME" => Some(home.path().display().to_string()),
        "HF_HOME" => Some("/nonexistent".into()),
        "HF_TOKEN_PATH" => Some(named.display().to_string()),
        _ => None,
    });
    let token = env.hf_token.expect("token from HF_TOKEN_PATH");
    assert_eq!(
        token.source(),
        &ingest::options::TokenSource::File(named.clone())
    );
    assert!(!format!("{token:?}").contains(secret));
    let none = EnvOverrides::from_lookup(|k| match k {
        "HOME" => Some(home.path().display().to_string()),
        _ => None,
    });
    assert!(none.hf_token.is_none(), "no file, no variable: no token");
}

#[test]
fn hf_hub_offline_works_from_the_store_alone_as_offline_does() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let rows = vec![c.rows()[0].clone(), c.rows()[1].clone()];
    let home = tempfile::tempdir().unwrap();
    let cfg = c.pipeline("hf-hub-offline", &rows, &[Hf], None, Some(hub.endpoint()));
    let out = ingest_command(&cfg.path, home.path())
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not in the store (offline) (hint: unset HF_HUB_OFFLINE (and run without --offline) to fetch it)"),
        "{stderr}"
    );
    assert_eq!(
        hub.requests(),
        Vec::new(),
        "HF_HUB_OFFLINE contacts no location"
    );
    // Fetched once, the store serves the archives offline.
    let out = ingest_command(&cfg.path, home.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    hub.clear_requests();
    let out = ingest_command(&cfg.path, home.path())
        .env("HF_HUB_OFFLINE", "yes")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(hub.requests(), Vec::new());
    let facts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cfg.run_dir.join("ingest.run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(facts["offline"], true);
}

#[test]
fn a_rate_limited_hub_is_waited_out_as_its_ratelimit_header_says() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    // The stand-in counts requests in a fixed window of real time and says so.
    hub.set_rate_limit(Some(HubRateLimit {
        quota: 2,
        window: Duration::from_secs(2),
    }));
    let url = format!(
        "{}/datasets/{REPO}/resolve/{}/raw/shard-00000.tar",
        hub.endpoint(),
        revision()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answers: Vec<(u16, String, String)> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..3 {
            let r = client.head(&url).send().await.unwrap();
            let h = |n: &str| r.headers()[n].to_str().unwrap().to_string();
            v.push((r.status().as_u16(), h("ratelimit"), h("ratelimit-policy")));
        }
        v
    });
    assert_eq!(
        answers.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![302, 302, 429]
    );
    assert!(answers[1].1.starts_with("\"api\";r=0;t="), "{answers:?}");
    assert_eq!(answers[2].2, "\"fixed window\";\"api\";q=2;w=2");
    let t: u64 = answers[2].1.rsplit("t=").next().unwrap().parse().unwrap();
    assert!((1..=2).contains(&t), "{answers:?}");
    std::thread::sleep(Duration::from_secs(t) + Duration::from_millis(100));
    let after = rt.block_on(async { client.head(&url).send().await.unwrap().status() });
    assert_eq!(after, 302, "a new window serves again");

    let rows = c.rows();
    let quota = (rows.len() as u32 / 3).max(1);
    let window = Duration::from_secs(2);
    hub.set_rate_limit(Some(HubRateLimit { quota, window }));
    hub.clear_requests();
    assert!(
        rows.len() > 2 * quota as usize,
        "more fetches than two windows allow"
    );
    let cfg = c.pipeline("hf-rate-limited", &rows, &[Hf], None, Some(hub.endpoint()));
    let notes = Arc::new(Notes::default());
    let with_notes = IngestOptions {
        progress: notes.clone(),
        ..opts()
    };
    let report = ingest::run(&cfg, &with_notes).expect("rate limits are waited out");
    assert_eq!(report.verified_archives, rows.len());
    let log: Vec<_> = hub
        .requests()
        .into_iter()
        .filter(|r| r.role == HubRole::Hub)
        .collect();
    let limited = log.iter().filter(|r| r.status == 429).count();
    assert!(limited >= 1, "the window was exceeded: {log:?}");
    // While one request waited, the others waited too: about one 429 per window (at most
    // the requests in flight, 3, more than one per fetch), not one per fetch and retry.
    assert!(
        limited <= rows.len() + 3,
        "{limited} 429s for {} fetches",
        rows.len()
    );
    let notes = notes.0.lock().unwrap().clone();
    let waits: Vec<&String> = notes
        .iter()
        .filter(|n| n.contains("rate limited"))
        .collect();
    assert!(!waits.is_empty(), "{notes:?}");
    assert!(
        waits.iter().all(|n| n.starts_with(&format!("{}: rate limited (HTTP 429, RateLimit: 'api' limit ({quota} requests per 2 s window), 0 left, reset in ", hub.endpoint()))
            && n.contains(" s); waiting ")
            && n.ends_with(" s patience used)")),
        "{waits:?}"
    );

    // With less patience than the window's reset, the fetches that are told to wait fail,
    // saying why and what to change.
    hub.set_rate_limit(Some(HubRateLimit {
        quota: 1,
        window: Duration::from_secs(5),
    }));
    let mut cfg = c.pipeline(
        "hf-rate-impatient",
        &rows[..2],
        &[Hf],
        None,
        Some(hub.endpoint()),
    );
    cfg.config.ingest.rate_limit_patience_s = 1;
    let report = failed_report(ingest::run(&cfg, &opts()));
    assert_eq!(report.verified_archives, 1);
    let failed = report
        .ledger
        .iter()
        .find(|r| r.verdict == Verdict::Error)
        .unwrap();
    let e = failed.error.as_deref().unwrap();
    assert!(
        e.starts_with(&format!("{}: rate limited: ", failed.uri))
            && e.contains("would pass the patience of 1 s (ingest.rate_limit_patience_s)"),
        "{e}"
    );
    assert!(failure_of(&report, &failed.archive_id).contains(
        "(hint: the Hub limits requests per 5-minute window: raise ingest.rate_limit_patience_s"
    ));
}

#[test]
fn a_renamed_repository_is_followed_by_its_relative_redirect() {
    let c = small_corpus();
    let secret = "hf_renamed";
    let hub = hub_requiring_token(&c, secret);
    hub.rename_repo(REPO, "agentrace-demo/renamed-traces");
    let rows = vec![c.rows()[0].clone()];
    let cfg = c.pipeline("hf-renamed", &rows, &[Hf], None, Some(hub.endpoint()));
    let with_token = IngestOptions {
        env: EnvOverrides {
            hf_token: Some(HfToken::new(secret)),
            ..EnvOverrides::default()
        },
        ..opts()
    };
    let report = ingest::run(&cfg, &with_token).expect("the rename is followed");
    assert_eq!(report.ledger[0].verdict, Verdict::Verified);
    let hub_reqs: Vec<(u16, String, Option<String>)> = hub
        .requests()
        .into_iter()
        .filter(|r| r.role == HubRole::Hub)
        .map(|r| (r.status, r.target, r.authorization))
        .collect();
    let shard = "raw/shard-00000.tar";
    let bearer = Some(format!("Bearer {secret}"));
    assert_eq!(
        hub_reqs,
        vec![
            (
                307,
                format!("/datasets/{REPO}/resolve/{}/{shard}", revision()),
                bearer.clone()
            ),
            (
                302,
                format!(
                    "/datasets/agentrace-demo/renamed-traces/resolve/{}/{shard}",
                    revision()
                ),
                bearer
            ),
        ]
    );
    assert!(
        hub.requests()
            .iter()
            .filter(|r| r.role == HubRole::Content)
            .all(|r| r.authorization.is_none())
    );
}

#[test]
fn revisions_and_shard_names_are_percent_encoded_as_the_hub_client_does() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let odd = "raw/shard #0?é.tar";
    let shard0 = c.root().join("shards/shard-00000.tar");
    hub.add_file(REPO, &revision(), odd, &shard0).unwrap();
    hub.set_branch(REPO, "refs/pr/1", &revision());
    let mut rows = vec![c.rows()[0].clone()];
    rows[0].hf_shard = Some(odd.into());
    let cfg = c.pipeline("hf-odd-names", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = ingest::run(&cfg, &opts()).expect("an odd shard name is quoted");
    assert_eq!(report.ledger[0].verdict, Verdict::Verified);
    let targets: Vec<String> = hub
        .requests()
        .into_iter()
        .filter(|r| r.role == HubRole::Hub)
        .map(|r| r.target)
        .collect();
    assert_eq!(
        targets,
        vec![format!(
            "/datasets/{REPO}/resolve/{}/raw/shard%20%230%3F%C3%A9.tar",
            revision()
        )]
    );
    // A pull request's ref is one segment (`refs%2Fpr%2F1`): it resolves to its commit,
    // which the pin check then names.
    let source = ingest::source::HfSource::new(ingest::source::hf::HfSettings {
        endpoint: hub.endpoint(),
        retries: 0,
        initial_backoff: Duration::from_millis(5),
        ..Default::default()
    })
    .unwrap();
    let mut loc = c.archives()[0].hf.clone().unwrap();
    loc.revision = "refs/pr/1".into();
    assert_eq!(
        source.resolve_url(&loc),
        format!(
            "{}/datasets/{REPO}/resolve/refs%2Fpr%2F1/raw/shard-00000.tar",
            hub.endpoint()
        )
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut info = ingest::source::FetchInfo::full_object();
    match rt
        .block_on(source.resolve("u", &loc, &mut info))
        .unwrap_err()
    {
        FetchError::CommitMismatch { pinned, served, .. } => {
            assert_eq!(pinned, "refs/pr/1");
            assert_eq!(served, revision());
        }
        other => panic!("expected CommitMismatch, got {other}"),
    }
}

#[test]
fn content_urls_expire_by_time_and_an_expired_one_is_resolved_again() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let ttl = Duration::from_millis(450);
    hub.set_content_url_ttl(ttl);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = format!(
        "{}/datasets/{REPO}/resolve/{}/raw/shard-00000.tar",
        hub.endpoint(),
        revision()
    );
    let (fresh, stale, body) = rt.block_on(async {
        let head = client.head(&url).send().await.unwrap();
        assert_eq!(head.status(), 302);
        let location = head.headers()["location"].to_str().unwrap().to_string();
        let fresh = client
            .get(&location)
            .header("Range", "bytes=0-511")
            .send()
            .await
            .unwrap()
            .status();
        tokio::time::sleep(ttl + Duration::from_millis(100)).await;
        let stale = client.get(&location).send().await.unwrap();
        let status = stale.status();
        (fresh, status, stale.text().await.unwrap())
    });
    assert_eq!(fresh, 206);
    assert_eq!(
        (stale.as_u16(), body.as_str()),
        (403, "Request has expired")
    );

    // Ingest re-resolves a URL that expired between two of its requests.
    hub.set_latency(Duration::from_millis(300));
    hub.clear_requests();
    let rows = vec![c.rows()[0].clone()];
    let cfg = c.pipeline("hf-expiring", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = ingest::run(&cfg, &opts()).expect("expired URLs are resolved again");
    assert_eq!(report.ledger[0].verdict, Verdict::Verified);
    let statuses: Vec<(HubRole, u16)> = hub
        .requests()
        .into_iter()
        .map(|r| (r.role, r.status))
        .collect();
    assert!(
        statuses.contains(&(HubRole::Content, 403))
            && statuses
                .iter()
                .filter(|s| **s == (HubRole::Hub, 302))
                .count()
                >= 2,
        "{statuses:?}"
    );
}
