//! The whole small demo corpus ingested from files, the real fake-gcs-server (pinned
//! generations, some objects overwritten) and the local Hub (pinned revision, member
//! ranges): every archive verified, the ledger exact, cross-source identity recorded; a
//! rerun downloads nothing; `--offline` works from the store; same inputs, same ledger bytes.

mod common;

use common::*;
use ingest::{IngestOptions, Verdict};
use model::config::LocationKind::{File, Gcs, Hf};
use testkit::HubRole;

#[test]
fn corpus_from_files_gcs_and_hub_is_verified_then_served_from_the_store() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let hub = hub_with_corpus(&c);
    let n = c.archives().len();
    assert!(n >= 5, "the small corpus has {n} archives");

    // Only the pinned generation has the original bytes of an overwritten object.
    let overwritten: Vec<_> = published
        .iter()
        .filter(|p| p.overwritten_by.is_some())
        .collect();
    assert_eq!(overwritten.len(), n / 3);
    for p in &overwritten {
        assert_eq!(
            gcs.generations(BUCKET, &p.object).unwrap(),
            vec![p.generation, p.overwritten_by.unwrap()]
        );
    }

    let rows = c.rows_with_gcs(&published);
    let cfg = c.pipeline(
        "all",
        &rows,
        &[File, Gcs, Hf],
        Some(gcs.url()),
        Some(hub.endpoint()),
    );
    let report = ingest::run(&cfg, &opts()).expect("all archives verify");
    let total: u64 = c.archives().iter().map(|a| a.bytes).sum();
    assert_eq!(report.archives, n);
    assert_eq!(report.verified_archives, n);
    assert_eq!(report.failures, vec![]);
    assert_eq!(report.fetches, 3 * n);
    assert_eq!(report.downloaded_bytes, 3 * total);
    assert_eq!(report.served_from_store, 0);
    assert!(!report.nothing_downloaded());

    // Ledger rows: manifest order, then file, gcs, hf.
    assert_eq!(report.ledger.len(), 3 * n);
    let revision = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    for (i, a) in c.archives().iter().enumerate() {
        let r = &report.ledger[3 * i..3 * i + 3];
        let kinds: Vec<&str> = r.iter().map(|x| x.location_kind.as_str()).collect();
        assert_eq!(kinds, vec!["file", "gcs", "hf"]);
        for row in r {
            assert_eq!(row.archive_id, a.archive_id);
            assert_eq!(row.verdict, Verdict::Verified, "{row:?}");
            assert_eq!(row.actual_sha256.as_deref(), Some(a.sha256.as_str()));
            assert_eq!(row.actual_bytes, Some(a.bytes));
            assert_eq!(row.cross_source_identical, Some(true));
            assert!(!row.served_from_store);
            assert_eq!(row.error, None);
            assert_eq!(row.quarantine_path, None);
        }
        assert_eq!(r[0].method.as_deref(), Some("full_object"));
        assert_eq!(
            r[0].uri,
            format!("file:{}", a.file.as_ref().unwrap().relative)
        );
        assert_eq!(r[1].method.as_deref(), Some("full_object"));
        assert_eq!(r[1].generation, Some(published[i].generation));
        assert_eq!(
            r[1].uri,
            format!(
                "gs://{BUCKET}/{}#{}",
                published[i].object, published[i].generation
            )
        );
        assert_eq!(r[2].method.as_deref(), Some("member_range"));
        assert_eq!(r[2].revision.as_deref(), Some(revision.as_str()));
        assert_eq!(r[2].resolved_commit.as_deref(), Some(revision.as_str()));
        assert_eq!(r[1].resolved_commit, None);
    }
    let df = ledger_df(&cfg);
    assert_eq!(df.height(), 3 * n);
    let verdicts: Vec<Option<&str>> = df
        .column("verdict")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(verdicts, vec![Some("verified"); 3 * n]);
    assert_store_exactly(&cfg, &shas(c.archives()));
    assert_eq!(quarantine_files(&cfg), Vec::<String>::new());

    // The Hub client: HEAD on the Hub, ranged GETs on the content host, no token anywhere.
    let log = hub.requests();
    assert!(
        log.iter()
            .filter(|r| r.role == HubRole::Hub)
            .all(|r| r.method == "HEAD" && r.status == 302)
    );
    let content: Vec<_> = log.iter().filter(|r| r.role == HubRole::Content).collect();
    assert!(
        content
            .iter()
            .all(|r| r.range.is_some() && r.status == 206 && r.authorization.is_none())
    );
    assert_eq!(log.iter().filter(|r| r.role == HubRole::Hub).count(), n);

    // Rerun: the store answers, nothing is downloaded, the Hub is not contacted.
    hub.clear_requests();
    let again = ingest::run(&cfg, &opts()).expect("rerun");
    assert!(again.nothing_downloaded());
    assert_eq!(again.fetches, 0);
    assert_eq!(again.downloaded_bytes, 0);
    assert_eq!(again.served_from_store, n);
    assert_eq!(again.verified_archives, n);
    assert_eq!(
        again.summary_line(),
        format!("{n} of {n} archives verified; store complete, nothing downloaded")
    );
    // Each location answers by its own record: the Hub commit its fetch resolved and the
    // identity of the three locations are kept.
    assert!(again.ledger.iter().all(|r| r.verdict == Verdict::InStore
        && r.served_from_store
        && r.method.as_deref() == Some("store")
        && r.cross_source_identical == Some(true)));
    assert!(
        again
            .ledger
            .iter()
            .filter(|r| r.location_kind == "hf")
            .all(|r| r.resolved_commit.as_deref() == Some(revision.as_str()))
    );
    assert_eq!(hub.requests(), vec![]);

    // Offline works from the store alone (the servers are gone).
    drop(gcs);
    drop(hub);
    let offline = ingest::run(
        &cfg,
        &IngestOptions {
            offline: true,
            ..opts()
        },
    )
    .expect("offline rerun");
    assert!(offline.nothing_downloaded());
    assert_eq!(offline.served_from_store, n);
    assert_store_exactly(&cfg, &shas(c.archives()));
}

#[test]
fn same_inputs_give_byte_identical_ledgers_and_offline_without_a_store_fails_cleanly() {
    let c = small_corpus();
    let rows = c.rows();
    let a = c.pipeline("det-a", &rows, &[File], None, None);
    let b = c.pipeline("det-b", &rows, &[File], None, None);
    ingest::run(&a, &opts()).unwrap();
    ingest::run(&b, &opts()).unwrap();
    let la = std::fs::read(a.run_dir.join("ledger.parquet")).unwrap();
    let lb = std::fs::read(b.run_dir.join("ledger.parquet")).unwrap();
    assert_eq!(la, lb, "ledger bytes differ between identical runs");
    let meta = frames::read_metadata(&a.run_dir.join("ledger.parquet")).unwrap();
    assert!(meta.contains(&("agentrace.frame".into(), "ledger".into())));
    assert!(meta.contains(&(
        "agentrace.schema_version".into(),
        model::run_dir::FRAME_SCHEMA_VERSION.to_string()
    )));
    // Wall-clock facts go to ingest.run.json instead.
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a.run_dir.join("ingest.run.json")).unwrap())
            .unwrap();
    assert_eq!(run_json["stage"], "ingest");
    assert_eq!(run_json["fetches"], rows.len());
    assert!(run_json["elapsed_s"].as_f64().unwrap() >= 0.0);

    // Offline with an empty store: every archive fails with a clear line, nothing is written
    // to the store.
    let empty = c.pipeline("offline-empty", &rows, &[File], None, None);
    let report = failed_report(ingest::run(
        &empty,
        &IngestOptions {
            offline: true,
            ..opts()
        },
    ));
    assert_eq!(report.failures.len(), rows.len());
    assert_eq!(report.fetches, 0);
    assert!(
        report
            .ledger
            .iter()
            .all(|r| r.verdict == Verdict::SkippedOffline)
    );
    let first = &c.archives()[0];
    assert_eq!(
        report.failures[0].to_string(),
        format!(
            "{} at store/sha256/{}: expected sha256 {} ({} bytes); not in the store (offline) (hint: run without --offline to fetch it)",
            first.archive_id, first.sha256, first.sha256, first.bytes
        )
    );
    assert_store_exactly(&empty, &[]);
}

#[test]
fn a_corrupted_store_entry_is_quarantined_and_fetched_again() {
    let c = small_corpus();
    let rows = c.rows();
    let cfg = c.pipeline("repair", &rows, &[File], None, None);
    ingest::run(&cfg, &opts()).unwrap();
    let victim = &c.archives()[1];
    let stored = cfg.run_dir.join("store/sha256").join(&victim.sha256);
    let mut bytes = std::fs::read(&stored).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&stored, &bytes).unwrap();
    let bad_sha = testkit::hub::sha256_hex(&bytes);
    let report = ingest::run(&cfg, &opts()).expect("repaired");
    assert_eq!(report.fetches, 1);
    assert_eq!(report.served_from_store, rows.len() - 1);
    assert_eq!(
        quarantine_files(&cfg),
        vec![format!("{bad_sha}-{}-store", victim.archive_id)]
    );
    assert_store_exactly(&cfg, &shas(c.archives()));
}

#[test]
fn storage_emulator_host_and_hf_endpoint_override_the_config() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let hub = hub_with_corpus(&c);
    let rows = c.rows_with_gcs(&published);
    // The config points at closed ports; the environment (as Google's and HF's clients read
    // it, STORAGE_EMULATOR_HOST in the bare host:port form) wins.
    let cfg = c.pipeline(
        "env",
        &rows,
        &[Gcs, Hf],
        Some("http://127.0.0.1:9".into()),
        Some("http://127.0.0.1:9".into()),
    );
    let options = IngestOptions {
        env: ingest::EnvOverrides {
            storage_emulator_host: Some(format!("127.0.0.1:{}", gcs.port())),
            hf_endpoint: Some(hub.endpoint()),
            hf_token: None,
            ..ingest::EnvOverrides::default()
        },
        ..opts()
    };
    let report = ingest::run(&cfg, &options).expect("environment endpoints used");
    assert_eq!(report.verified_archives, c.archives().len());
    assert_eq!(report.fetches, 2 * c.archives().len());
}
