//! Hub faults against the local Hub server: a commit that differs from the pin, an unknown
//! revision, 429 then success, a body dropped mid-way then resumed by range, a wrong
//! announced size, tampered bytes, a required token (sent to the Hub only), a content host
//! that ignores Range (shard scan), signed content URLs that expire (re-resolved; refused
//! when the content host never accepts them or the Hub's answer changes), and the ledger row
//! of a fetch that failed after its resolve. Each leaves only verified blobs in the store.

mod common;

use common::*;
use ingest::{EnvOverrides, FetchError, HfToken, IngestOptions, Verdict};
use model::config::LocationKind::Hf;
use testkit::{HubFaults, HubRole, ResolveChange};

fn revision() -> String {
    demo::write::demo_hf_revision(demo::DEFAULT_SEED)
}

/// A ledger row of a fetch that failed after the Hub resolved the pin: verdict error, the
/// one-line error `{uri}: {detail}`, and the resolved commit kept.
fn assert_failed_after_resolve(row: &ingest::LedgerRow, detail: &str, case: &str) {
    assert_eq!(row.verdict, Verdict::Error, "{case}");
    assert_eq!(
        row.error.as_deref(),
        Some(format!("{}: {detail}", row.uri).as_str()),
        "{case}"
    );
    assert!(!row.error.as_deref().unwrap().contains('\n'), "{case}");
    assert_eq!(
        row.resolved_commit.as_deref(),
        Some(revision().as_str()),
        "{case}"
    );
}

#[test]
fn a_commit_other_than_the_pin_and_an_unknown_revision_are_refused() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let mut rows = c.rows();
    let other = "0123456789abcdef0123456789abcdef01234567".to_string();
    // Archive 1 pins a revision the Hub does not have.
    rows[1].hf_revision = Some(other.clone());
    let cfg = c.pipeline("hf-pins", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = failed_report(ingest::run(&cfg, &opts()));
    assert_eq!(report.verified_archives, rows.len() - 1);
    let r1 = &report.ledger[1];
    assert_eq!(r1.verdict, Verdict::Error);
    assert_eq!(
        r1.error.as_deref(),
        Some(
            format!(
                "{}: dataset `{}` has no revision `{other}` (RevisionNotFound, HTTP 404)",
                r1.uri,
                demo::write::DEMO_HF_REPO
            )
            .as_str()
        )
    );

    // The Hub answers another commit for every resolve.
    hub.clear_requests();
    hub.set_faults(HubFaults {
        wrong_commit: Some(other.clone()),
        ..HubFaults::default()
    });
    let cfg = c.pipeline(
        "hf-wrong-commit",
        &c.rows(),
        &[Hf],
        None,
        Some(hub.endpoint()),
    );
    let report = failed_report(ingest::run(&cfg, &opts()));
    assert_eq!(report.verified_archives, 0);
    for r in &report.ledger {
        assert_eq!(r.verdict, Verdict::Error);
        assert_eq!(r.resolved_commit.as_deref(), Some(other.as_str()));
        assert_eq!(r.revision.as_deref(), Some(revision().as_str()));
        assert_eq!(
            r.error.as_deref(),
            Some(
                format!(
                    "{}: the Hub served commit {other} for the pinned revision {}",
                    r.uri,
                    revision()
                )
                .as_str()
            )
        );
    }
    // No bytes were read from the content host, nothing entered the store or quarantine.
    let log = hub.requests();
    assert_eq!(log.len(), rows.len());
    assert!(
        log.iter()
            .all(|r| r.role == HubRole::Hub && r.status == 302)
    );
    assert_store_exactly(&cfg, &[]);
    assert_eq!(quarantine_files(&cfg), Vec::<String>::new());
}

#[test]
fn a_branch_name_resolves_to_its_commit_which_the_pin_check_reports() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let source = ingest::source::HfSource::new(ingest::source::hf::HfSettings {
        endpoint: hub.endpoint(),
        token: None,
        retries: 0,
        request_timeout: std::time::Duration::from_secs(10),
        initial_backoff: std::time::Duration::from_millis(5),
        ..Default::default()
    })
    .unwrap();
    let mut loc = c.archives()[0].hf.clone().unwrap();
    loc.revision = "main".into();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut info = ingest::source::FetchInfo::full_object();
    let err = rt
        .block_on(source.resolve("u", &loc, &mut info))
        .unwrap_err();
    match err {
        FetchError::CommitMismatch { pinned, served, .. } => {
            assert_eq!(pinned, "main");
            assert_eq!(served, revision());
        }
        other => panic!("expected CommitMismatch, got {other}"),
    }
}

#[test]
fn a_429_then_success_and_a_member_body_dropped_then_resumed_by_range() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let rows = vec![c.rows()[0].clone()];
    let a = &c.archives()[0];
    hub.set_faults(HubFaults {
        too_many_requests: 1,
        drop_content_after: Some(2000),
        ..HubFaults::default()
    });
    let cfg = c.pipeline("hf-transient", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = ingest::run(&cfg, &opts()).expect("transient faults are retried and resumed");
    assert_eq!(report.ledger[0].verdict, Verdict::Verified);
    assert_eq!(report.ledger[0].method.as_deref(), Some("member_range"));
    // The first member of shard 0 starts after its 512-byte header.
    let (start, end) = (512u64, 512 + a.bytes - 1);
    let seen: Vec<(HubRole, String, Option<String>, u16)> = hub
        .requests()
        .into_iter()
        .map(|r| (r.role, r.method, r.range, r.status))
        .collect();
    assert_eq!(
        seen,
        vec![
            (HubRole::Hub, "HEAD".into(), None, 429),
            (HubRole::Hub, "HEAD".into(), None, 302),
            (
                HubRole::Content,
                "GET".into(),
                Some("bytes=0-511".into()),
                206
            ),
            (
                HubRole::Content,
                "GET".into(),
                Some(format!("bytes={start}-{end}")),
                206
            ),
            (
                HubRole::Content,
                "GET".into(),
                Some(format!("bytes={}-{end}", start + 2000)),
                206
            ),
        ]
    );
    let facts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report.run_json_path).unwrap()).unwrap();
    assert_eq!(facts["fetch_facts"][0]["resumes"], 1);
    assert_eq!(facts["fetch_facts"][0]["retries"], 1);
    assert_store_exactly(&cfg, std::slice::from_ref(&a.sha256));
}

#[test]
fn a_wrong_announced_size_and_tampered_bytes_are_caught() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let rows = c.rows();
    hub.set_faults(HubFaults {
        size_delta: 7,
        ..HubFaults::default()
    });
    let cfg = c.pipeline("hf-size", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = failed_report(ingest::run(&cfg, &opts()));
    let shard_len = std::fs::metadata(c.root().join("shards/shard-00000.tar"))
        .unwrap()
        .len();
    for r in &report.ledger {
        assert_eq!(r.verdict, Verdict::Error);
        assert_eq!(
            r.error.as_deref(),
            Some(
                format!(
                    "{}: the content host has {shard_len} bytes, the Hub announced {} (X-Linked-Size)",
                    r.uri,
                    shard_len + 7
                )
                .as_str()
            )
        );
    }
    assert_store_exactly(&cfg, &[]);

    // One byte of archive 0's data is flipped on the content host.
    hub.set_faults(HubFaults {
        tamper_at: Some(512 + 100),
        ..HubFaults::default()
    });
    let cfg = c.pipeline("hf-tamper", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = failed_report(ingest::run(&cfg, &opts()));
    let a = &c.archives()[0];
    let mut bytes = std::fs::read(&a.file.as_ref().unwrap().path).unwrap();
    bytes[100] ^= 0xff;
    let bad = testkit::hub::sha256_hex(&bytes);
    assert_eq!(report.ledger[0].verdict, Verdict::Mismatch);
    assert_eq!(
        report.ledger[0].actual_sha256.as_deref(),
        Some(bad.as_str())
    );
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.verified_archives, rows.len() - 1);
    assert_eq!(
        quarantine_files(&cfg),
        vec![format!("{bad}-{}-hf", a.archive_id)]
    );
    let mut good = shas(c.archives());
    good.retain(|s| *s != a.sha256);
    assert_store_exactly(&cfg, &good);
}

#[test]
fn the_token_goes_to_the_hub_only_and_is_never_written() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let secret = "hf_s3cr3t_token_value";
    hub.set_faults(HubFaults {
        require_token: Some(secret.into()),
        ..HubFaults::default()
    });
    let rows = c.rows();
    // Without a token: refused with a hint, nothing stored.
    let cfg = c.pipeline("hf-no-token", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = failed_report(ingest::run(&cfg, &opts()));
    assert_eq!(
        report.ledger[0].error.as_deref(),
        Some(
            format!(
                "{}: the Hub has no dataset `{}` that this request may read: it does not exist or is private (no token was sent; RepoNotFound, HTTP 401: Repository not found)",
                report.ledger[0].uri,
                demo::write::DEMO_HF_REPO
            )
            .as_str()
        )
    );
    assert_store_exactly(&cfg, &[]);

    hub.clear_requests();
    let with_token = IngestOptions {
        env: EnvOverrides {
            hf_token: Some(HfToken::new(secret)),
            ..EnvOverrides::default()
        },
        ..opts()
    };
    assert!(!format!("{with_token:?}").contains(secret));
    // A token with a trailing newline is refused up front with the
    // cause (not reqwest's "builder error" with a connectivity hint), never showing it.
    let cfg = c.pipeline("hf-token-newline", &rows, &[Hf], None, Some(hub.endpoint()));
    let with_newline = IngestOptions {
        env: EnvOverrides {
            hf_token: Some(HfToken::new(format!("{secret}\n"))),
            ..EnvOverrides::default()
        },
        ..opts()
    };
    let e = ingest::run(&cfg, &with_newline).unwrap_err().to_string();
    assert!(
        e.contains("HF_TOKEN contains a newline or another control character")
            && !e.contains(secret),
        "{e}"
    );
    let cfg = c.pipeline("hf-token", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = ingest::run(&cfg, &with_token).expect("token accepted");
    assert_eq!(report.verified_archives, rows.len());
    for r in hub.requests() {
        match r.role {
            HubRole::Hub => assert_eq!(r.authorization, Some(format!("Bearer {secret}"))),
            HubRole::Content => {
                assert_eq!(r.authorization, None, "token leaked to the content host")
            }
        }
    }
    for f in ["ledger.parquet", "ingest.run.json"] {
        let bytes = std::fs::read(cfg.run_dir.join(f)).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{f} holds the token"
        );
    }
}

#[test]
fn a_content_host_ignoring_range_is_read_by_shard_scan() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    hub.set_faults(HubFaults {
        ignore_range: true,
        drop_content_after: Some(30_000),
        ..HubFaults::default()
    });
    let rows = c.rows();
    let cfg = c.pipeline("hf-scan", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = ingest::run(
        &cfg,
        &IngestOptions {
            parallel: Some(1),
            ..opts()
        },
    )
    .expect("shard scan");
    assert!(
        report
            .ledger
            .iter()
            .all(|r| r.verdict == Verdict::Verified && r.method.as_deref() == Some("shard_scan"))
    );
    assert_store_exactly(&cfg, &shas(c.archives()));
    let facts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report.run_json_path).unwrap()).unwrap();
    let resumes: u64 = facts["fetch_facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["resumes"].as_u64().unwrap())
        .sum();
    assert_eq!(resumes, 1, "the dropped scan restarted once");
}

/// (role, method, range, status, sig) of every request the Hub saw.
type Seen = (HubRole, String, Option<String>, u16, Option<String>);

fn seen(hub: &testkit::HubServer) -> Vec<Seen> {
    hub.requests()
        .into_iter()
        .map(|r| {
            let sig = r
                .target
                .split_once("sig=")
                .map(|(_, v)| v.split('&').next().unwrap_or("").to_string());
            (r.role, r.method, r.range, r.status, sig)
        })
        .collect()
}

fn run_facts(report_run_json: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(report_run_json).unwrap()).unwrap()
}

#[test]
fn expired_content_urls_are_re_resolved_and_the_fetch_continues_where_it_was() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    // Archive 2 is the third member of shard 0: three header reads, then its body.
    let a = &c.archives()[2];
    assert_eq!(c.summary.archives[2].shard, "raw/shard-00000.tar");
    let rows = vec![c.rows()[2].clone()];
    let secret = "hf_signed_url_token";
    hub.set_faults(HubFaults {
        signed_url_uses: Some(2),
        drop_content_after: Some(2000),
        require_token: Some(secret.into()),
        ..HubFaults::default()
    });
    let cfg = c.pipeline("hf-signed", &rows, &[Hf], None, Some(hub.endpoint()));
    let with_token = IngestOptions {
        env: EnvOverrides {
            hf_token: Some(HfToken::new(secret)),
            ..EnvOverrides::default()
        },
        ..opts()
    };
    let report = ingest::run(&cfg, &with_token).expect("expired URLs are re-resolved");
    let row = &report.ledger[0];
    assert_eq!(row.verdict, Verdict::Verified);
    assert_eq!(row.method.as_deref(), Some("member_range"));
    assert_eq!(row.actual_sha256.as_deref(), Some(a.sha256.as_str()));
    assert_eq!(row.actual_bytes, Some(a.bytes));
    assert_eq!(row.resolved_commit.as_deref(), Some(revision().as_str()));
    assert_store_exactly(&cfg, std::slice::from_ref(&a.sha256));
    assert_eq!(quarantine_files(&cfg), Vec::<String>::new());

    // Headers of members 0 and 1 (sizes padded to 512), then member 2's header and body.
    let shard = std::fs::read(c.root().join("shards/shard-00000.tar")).unwrap();
    let padded = |n: u64| n.div_ceil(512) * 512;
    let h1 = 512 + padded(c.archives()[0].bytes);
    let h2 = h1 + 512 + padded(c.archives()[1].bytes);
    let (start, end) = (h2 + 512, h2 + 512 + a.bytes - 1);
    assert_eq!(
        &shard[start as usize..=end as usize],
        std::fs::read(&a.file.as_ref().unwrap().path).unwrap()
    );
    let hub_ok = (HubRole::Hub, "HEAD".to_string(), None, 302, None);
    let get = |range: String, status: u16, sig: &str| {
        (
            HubRole::Content,
            "GET".to_string(),
            Some(range),
            status,
            Some(sig.to_string()),
        )
    };
    assert_eq!(
        seen(&hub),
        vec![
            hub_ok.clone(),
            get("bytes=0-511".into(), 206, "1"),
            get(format!("bytes={h1}-{}", h1 + 511), 206, "1"),
            // Signature 1 has served its two requests: re-resolve, same range again.
            get(format!("bytes={h2}-{}", h2 + 511), 403, "1"),
            hub_ok.clone(),
            get(format!("bytes={h2}-{}", h2 + 511), 206, "2"),
            // The body breaks after 2000 bytes; the resume finds signature 2 used up.
            get(format!("bytes={start}-{end}"), 206, "2"),
            get(format!("bytes={}-{end}", start + 2000), 403, "2"),
            hub_ok,
            // The resume continues from the bytes the sink holds, at the new URL.
            get(format!("bytes={}-{end}", start + 2000), 206, "3"),
        ]
    );
    // The token went to every resolve and to no content request.
    for r in hub.requests() {
        match r.role {
            HubRole::Hub => assert_eq!(r.authorization, Some(format!("Bearer {secret}"))),
            HubRole::Content => assert_eq!(r.authorization, None, "token sent to the content host"),
        }
    }
    let facts = run_facts(&report.run_json_path);
    assert_eq!(facts["fetch_facts"][0]["retries"], 2, "two re-resolves");
    assert_eq!(facts["fetch_facts"][0]["resumes"], 1);
}

#[test]
fn a_content_host_refusing_every_url_ends_in_denied_after_bounded_re_resolves() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    hub.set_faults(HubFaults {
        signed_url_uses: Some(0),
        ..HubFaults::default()
    });
    let rows = vec![c.rows()[0].clone()];
    // The pipeline's `ingest.retries` is 3: one resolve plus three re-resolves.
    let cfg = c.pipeline("hf-expired", &rows, &[Hf], None, Some(hub.endpoint()));
    assert_eq!(cfg.config.ingest.retries, 3);
    let report = failed_report(ingest::run(&cfg, &opts()));
    let row = &report.ledger[0];
    assert_failed_after_resolve(
        row,
        "access denied (HTTP 403): the content host refused the request (Request has expired) after the URL was re-resolved 3 time(s)",
        "",
    );
    assert_eq!(row.actual_sha256, None);
    let log = seen(&hub);
    let resolves = log.iter().filter(|r| r.0 == HubRole::Hub).count();
    assert_eq!(resolves, 4, "1 + retries resolves");
    let content: Vec<_> = log.iter().filter(|r| r.0 == HubRole::Content).collect();
    assert_eq!(content.len(), 4);
    assert!(
        content
            .iter()
            .all(|r| r.3 == 403 && r.2.as_deref() == Some("bytes=0-511"))
    );
    // Every request used the signature of the resolve just before it.
    let sigs: Vec<&str> = content.iter().map(|r| r.4.as_deref().unwrap()).collect();
    assert_eq!(sigs, vec!["1", "2", "3", "4"]);
    let facts = run_facts(&report.run_json_path);
    assert_eq!(facts["fetch_facts"][0]["verdict"], "error");
    assert_eq!(facts["fetch_facts"][0]["retries"], 3);
    assert_store_exactly(&cfg, &[]);
    assert_eq!(quarantine_files(&cfg), Vec::<String>::new());
}

#[test]
fn a_re_resolve_announcing_another_commit_etag_or_size_is_refused() {
    let c = small_corpus();
    let a = &c.archives()[0];
    let rows = vec![c.rows()[0].clone()];
    let shard_len = std::fs::metadata(c.root().join("shards/shard-00000.tar"))
        .unwrap()
        .len();
    let shard_sha = ingest::sink::hash_file(&c.root().join("shards/shard-00000.tar"))
        .unwrap()
        .0;
    let other_commit = "0123456789abcdef0123456789abcdef01234567";
    let other_etag = "f".repeat(64);
    let cases = [
        (
            "size",
            ResolveChange::SizeDelta(7),
            format!("X-Linked-Size {shard_len} -> {}", shard_len + 7),
        ),
        (
            "etag",
            ResolveChange::Etag(other_etag.clone()),
            format!("X-Linked-Etag {shard_sha} -> {other_etag}"),
        ),
        (
            "commit",
            ResolveChange::Commit(other_commit.into()),
            format!("commit {} -> {other_commit}", revision()),
        ),
    ];
    for (name, change, what) in cases {
        let hub = hub_with_corpus(&c);
        // Each URL serves one request; the second resolve announces the change.
        hub.set_faults(HubFaults {
            signed_url_uses: Some(1),
            changed_after_resolves: Some((1, change)),
            ..HubFaults::default()
        });
        let cfg = c.pipeline(
            &format!("hf-changed-{name}"),
            &rows,
            &[Hf],
            None,
            Some(hub.endpoint()),
        );
        let report = failed_report(ingest::run(&cfg, &opts()));
        let row = &report.ledger[0];
        // With the commit of the first resolve, under which the fetch started.
        assert_failed_after_resolve(
            row,
            &format!(
                "the Hub's answer changed when the expired content URL was re-resolved ({what}); the bytes under a pinned commit must not change"
            ),
            name,
        );
        // Refused right after the second resolve: no request went to its URL.
        let log = seen(&hub);
        assert_eq!(
            log.iter().map(|r| (r.0, r.3)).collect::<Vec<_>>(),
            vec![
                (HubRole::Hub, 302),
                (HubRole::Content, 206),
                (HubRole::Content, 403),
                (HubRole::Hub, 302),
            ],
            "{name}"
        );
        assert_eq!(
            log[2].2.as_deref(),
            Some(format!("bytes=512-{}", 512 + a.bytes - 1).as_str())
        );
        assert_store_exactly(&cfg, &[]);
        assert_eq!(quarantine_files(&cfg), Vec::<String>::new());
    }
}

#[test]
fn a_member_missing_from_its_shard_leaves_the_resolved_commit_in_the_ledger() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let mut rows = vec![c.rows()[0].clone()];
    rows[0].hf_member = Some("not-in-the-shard.tar.gz".into());
    let cfg = c.pipeline("hf-no-member", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = failed_report(ingest::run(&cfg, &opts()));
    let row = &report.ledger[0];
    assert_failed_after_resolve(
        row,
        "not found: raw shard `raw/shard-00000.tar` has no member `not-in-the-shard.tar.gz`",
        "",
    );
    assert_eq!(row.method, None);
    // As written to ledger.parquet.
    let df = ledger_df(&cfg);
    let col = |name: &str| -> Vec<Option<String>> {
        df.column(name)
            .unwrap()
            .str()
            .unwrap()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect()
    };
    assert_eq!(col("verdict"), vec![Some("error".to_string())]);
    assert_eq!(col("resolved_commit"), vec![Some(revision())]);
    assert_eq!(col("revision"), vec![Some(revision())]);
    assert_eq!(col("error"), vec![row.error.clone()]);
    assert_store_exactly(&cfg, &[]);
}

#[test]
fn a_shard_scan_restarted_after_its_url_expired_is_re_resolved() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let a = &c.archives()[1];
    let rows = vec![c.rows()[1].clone()];
    // One request per URL; the first (whole-shard) answer breaks mid-way.
    hub.set_faults(HubFaults {
        ignore_range: true,
        signed_url_uses: Some(1),
        drop_content_after: Some(30_000),
        ..HubFaults::default()
    });
    let cfg = c.pipeline("hf-scan-signed", &rows, &[Hf], None, Some(hub.endpoint()));
    let report = ingest::run(&cfg, &opts()).expect("the scan restarts at a new URL");
    assert_eq!(report.ledger[0].verdict, Verdict::Verified);
    assert_eq!(report.ledger[0].method.as_deref(), Some("shard_scan"));
    assert_store_exactly(&cfg, std::slice::from_ref(&a.sha256));
    let log: Vec<(HubRole, u16, Option<String>)> =
        seen(&hub).into_iter().map(|r| (r.0, r.3, r.4)).collect();
    assert_eq!(
        log,
        vec![
            (HubRole::Hub, 302, None),
            (HubRole::Content, 200, Some("1".into())),
            (HubRole::Content, 403, Some("1".into())),
            (HubRole::Hub, 302, None),
            (HubRole::Content, 200, Some("2".into())),
        ]
    );
    let facts = run_facts(&report.run_json_path);
    assert_eq!(facts["fetch_facts"][0]["resumes"], 1);
    assert_eq!(facts["fetch_facts"][0]["retries"], 1);
}
