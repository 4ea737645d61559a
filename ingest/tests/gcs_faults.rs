//! GCS faults against the real fake-gcs-server (and a fault proxy in front of it for the
//! faults it cannot produce): each gives the documented verdict, the other archives are still
//! fetched and verified, and only verified blobs are in the store.

mod common;

use common::*;
use ingest::Verdict;
use model::config::LocationKind::{File, Gcs};
use testkit::{FaultProxy, ProxyFaults};

fn sha_hex(b: &[u8]) -> String {
    testkit::hub::sha256_hex(b)
}

#[test]
fn wrong_generation_tampered_short_and_missing_objects_fail_alone() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let archives = c.archives();
    let mut rows = c.rows_with_gcs(&published);

    // 0: a tampered object (same size, one byte flipped), uploaded as its own object.
    let a0 = &archives[0];
    let mut tampered = std::fs::read(&a0.file.as_ref().unwrap().path).unwrap();
    tampered[100] ^= 0xff;
    let tampered_gen = gcs
        .upload_bytes(BUCKET, "tampered/a0", tampered.clone())
        .unwrap();
    rows[0].gcs_object = Some("tampered/a0".into());
    rows[0].gcs_generation = Some(tampered_gen);
    // 1: a short object (first half).
    let a1 = &archives[1];
    let full1 = std::fs::read(&a1.file.as_ref().unwrap().path).unwrap();
    let short = full1[..full1.len() / 2].to_vec();
    let short_gen = gcs.upload_bytes(BUCKET, "short/a1", short.clone()).unwrap();
    rows[1].gcs_object = Some("short/a1".into());
    rows[1].gcs_generation = Some(short_gen);
    // 2: the overwritten object pinned to the overwrite's generation (the wrong one).
    let p2 = &published[2];
    let wrong_gen = p2
        .overwritten_by
        .expect("every third object is overwritten");
    rows[2].gcs_generation = Some(wrong_gen);
    let overwrite_bytes =
        format!("overwritten copy of {} (not the original)\n", p2.object).into_bytes();
    // 3: a generation that does not exist.
    let missing_gen = published[3].generation + 12_345;
    rows[3].gcs_generation = Some(missing_gen);
    // 4: untouched.

    let cfg = c.pipeline("gcs-faults", &rows, &[Gcs], Some(gcs.url()), None);
    let err = ingest::run(&cfg, &opts()).unwrap_err();
    assert_eq!(
        model::exit::Classify::failure_kind(&err),
        model::stage::FailureKind::Failed
    );
    let text = err.to_string();
    let report = failed_report(Err(err));

    assert_eq!(report.verified_archives, 1);
    let verdicts: Vec<Verdict> = report.ledger.iter().map(|r| r.verdict).collect();
    assert_eq!(
        verdicts,
        vec![
            Verdict::Mismatch,
            Verdict::Mismatch,
            Verdict::Mismatch,
            Verdict::Error,
            Verdict::Verified
        ]
    );
    let r = &report.ledger;
    assert_eq!(
        r[0].actual_sha256.as_deref(),
        Some(sha_hex(&tampered).as_str())
    );
    assert_eq!(r[0].actual_bytes, Some(a0.bytes));
    assert_eq!(
        r[1].actual_sha256.as_deref(),
        Some(sha_hex(&short).as_str())
    );
    assert_eq!(r[1].actual_bytes, Some(short.len() as u64));
    assert_eq!(
        r[2].actual_sha256.as_deref(),
        Some(sha_hex(&overwrite_bytes).as_str())
    );
    assert_eq!(r[2].generation, Some(wrong_gen));
    assert_eq!(r[3].actual_sha256, None);
    assert_eq!(
        r[3].error.as_deref(),
        Some(
            format!(
                "gs://{BUCKET}/{}#{missing_gen}: not found: object `{}` has no generation {missing_gen} in bucket `{BUCKET}`",
                published[3].object, published[3].object
            )
            .as_str()
        )
    );
    // Mismatching bytes are kept aside under their actual hash; the store holds only the
    // verified archive.
    let mut q = vec![
        format!("{}-{}-gcs", sha_hex(&tampered), a0.archive_id),
        format!("{}-{}-gcs", sha_hex(&short), a1.archive_id),
        format!(
            "{}-{}-gcs",
            sha_hex(&overwrite_bytes),
            archives[2].archive_id
        ),
    ];
    q.sort();
    assert_eq!(quarantine_files(&cfg), q);
    for name in &q {
        let (sha, _) = ingest::sink::hash_file(&cfg.run_dir.join("quarantine").join(name)).unwrap();
        assert!(name.starts_with(&sha), "quarantined {name} hashes to {sha}");
    }
    assert_store_exactly(&cfg, &[archives[4].sha256.clone()]);

    // One line per failure: id, location, expected vs actual, hint.
    assert_eq!(report.failures.len(), 4);
    assert_eq!(
        report.failures[1].to_string(),
        format!(
            "{} at gs://{BUCKET}/short/a1#{short_gen}: expected sha256 {} ({} bytes), got sha256 {} ({} bytes) (hint: the location holds fewer bytes: a truncated object, or the wrong generation/revision)",
            a1.archive_id,
            a1.sha256,
            a1.bytes,
            sha_hex(&short),
            short.len()
        )
    );
    assert!(
        text.starts_with("4 of 5 archives failed verification"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(report.failures[0].hint.contains("tampered"));
}

#[test]
fn wrong_manifest_sha256_is_caught_by_every_location_and_blamed_on_the_manifest() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let mut rows = c.rows_with_gcs(&published);
    let real = rows[0].sha256.clone();
    rows[0].sha256 = "ab".repeat(32);
    let cfg = c.pipeline("bad-sha", &rows, &[File, Gcs], Some(gcs.url()), None);
    let report = failed_report(ingest::run(&cfg, &opts()));
    let a = rows_of(&report.ledger, &rows[0].archive_id);
    assert_eq!(a.len(), 2);
    for r in &a {
        assert_eq!(r.verdict, Verdict::Mismatch);
        assert_eq!(r.actual_sha256.as_deref(), Some(real.as_str()));
        assert_eq!(r.cross_source_identical, Some(true));
    }
    assert_eq!(report.failures.len(), 2);
    for f in &report.failures {
        assert_eq!(
            f.hint,
            format!(
                "all 2 locations agree on sha256 {real}; the manifest's sha256/bytes are probably wrong"
            )
        );
    }
    let mut others = shas(c.archives());
    others.retain(|s| *s != real);
    assert_store_exactly(&cfg, &others);
}

#[test]
fn two_locations_disagreeing_is_an_error_naming_both() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let mut rows = c.rows_with_gcs(&published);
    // The file copy of archive 1 has one byte changed; GCS holds the original.
    let a = &c.archives()[1];
    let mut bytes = std::fs::read(&a.file.as_ref().unwrap().path).unwrap();
    bytes[7] ^= 0x20;
    std::fs::write(c.root().join("altered.bin"), &bytes).unwrap();
    rows[1].file_path = Some("altered.bin".into());
    let cfg = c.pipeline("disagree", &rows, &[File, Gcs], Some(gcs.url()), None);
    let report = failed_report(ingest::run(&cfg, &opts()));
    let r = rows_of(&report.ledger, &a.archive_id);
    assert_eq!(r[0].verdict, Verdict::Mismatch);
    assert_eq!(r[1].verdict, Verdict::Verified);
    assert_eq!(r[0].cross_source_identical, Some(false));
    assert_eq!(r[1].cross_source_identical, Some(false));
    let file_uri = "file:altered.bin".to_string();
    let gcs_uri = format!(
        "gs://{BUCKET}/{}#{}",
        published[1].object, published[1].generation
    );
    assert_eq!(report.failures.len(), 2);
    let d = &report.failures[1];
    assert_eq!(d.location, format!("{file_uri} vs {gcs_uri}"));
    assert_eq!(
        d.problem,
        format!(
            "locations disagree: {file_uri} gives sha256 {} ({} bytes), {gcs_uri} gives sha256 {} ({} bytes)",
            sha_hex(&bytes),
            a.bytes,
            a.sha256,
            a.bytes
        )
    );
    // The verified GCS copy is in the store; the altered one is in quarantine.
    assert_store_exactly(&cfg, &shas(c.archives()));
    assert_eq!(
        quarantine_files(&cfg),
        vec![format!("{}-{}-file", sha_hex(&bytes), a.archive_id)]
    );
}

#[test]
fn a_429_then_success_and_a_body_dropped_mid_way_then_resumed() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let proxy = FaultProxy::start(&gcs.url()).unwrap();
    let rows = c.rows_with_gcs(&published);

    // 429 once on archive 0's object.
    let obj0 = published[0].object.clone();
    proxy.set_faults(ProxyFaults {
        only_paths_containing: obj0.clone(),
        fail_next: 1,
        fail_status: 429,
        drop_after_body_bytes: None,
    });
    let cfg = c.pipeline("gcs-429", &rows, &[Gcs], Some(proxy.url()), None);
    let report = ingest::run(&cfg, &opts()).expect("429 is retried");
    assert_eq!(report.verified_archives, c.archives().len());
    let seen: Vec<u16> = proxy
        .requests()
        .iter()
        .filter(|r| r.target.contains(&obj0))
        .map(|r| r.status)
        .collect();
    assert_eq!(seen, vec![429, 200]);
    assert_store_exactly(&cfg, &shas(c.archives()));

    // The connection drops after 1000 body bytes of archive 3; the read resumes at byte 1000.
    let obj3 = published[3].object.clone();
    let len3 = c.archives()[3].bytes;
    assert!(len3 > 1000);
    proxy.set_faults(ProxyFaults {
        only_paths_containing: obj3.clone(),
        fail_next: 0,
        fail_status: 0,
        drop_after_body_bytes: Some(1000),
    });
    let before = proxy.requests().len();
    let cfg = c.pipeline("gcs-drop", &rows, &[Gcs], Some(proxy.url()), None);
    let report = ingest::run(&cfg, &opts()).expect("a dropped body resumes");
    assert_eq!(report.verified_archives, c.archives().len());
    let reqs: Vec<(Option<String>, u16, bool)> = proxy
        .requests()
        .into_iter()
        .skip(before)
        .filter(|r| r.target.contains(&obj3))
        .map(|r| (r.range, r.status, r.cut))
        .collect();
    assert_eq!(
        reqs,
        vec![
            (None, 200, true),
            (Some(format!("bytes=1000-{}", len3 - 1)), 206, false)
        ]
    );
    let row = &report.ledger[3];
    assert_eq!(row.verdict, Verdict::Verified);
    assert_eq!(row.actual_bytes, Some(len3));
    assert_store_exactly(&cfg, &shas(c.archives()));
}
