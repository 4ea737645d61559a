//! A location is verified or it is not: the store answers "are these bytes known", and a
//! (archive, location) pair without a verified record of its own (new, changed in the
//! manifest, or whose fetch never finished) is fetched and checked even when the store holds
//! the bytes; cross-source identity is recorded for every archive with two locations, from
//! this run's bytes or the locations' records; `--offline` names the locations it could not
//! check and fails unless told to accept them.

mod common;

use common::*;
use ingest::{IngestOptions, Verdict};
use model::config::LocationKind::{File, Gcs, Hf};

fn offline() -> IngestOptions {
    IngestOptions {
        offline: true,
        ..opts()
    }
}

#[test]
fn a_file_location_changed_in_the_manifest_is_checked_again_not_taken_from_the_store() {
    let c = small_corpus();
    let mut rows = c.rows();
    let cfg = c.pipeline("changed", &rows, &[File], None, None);
    ingest::run(&cfg, &opts()).expect("first run verifies");
    let again = ingest::run(&cfg, &opts()).expect("rerun");
    assert!(again.nothing_downloaded());

    // The first archive's row now points at a file that does not exist.
    let id = rows[0].archive_id.clone();
    rows[0].file_path = Some("archives/nowhere.tar.gz".into());
    let cfg = c.pipeline("changed", &rows, &[File], None, None);
    let report = failed_report(ingest::run(&cfg, &opts()));
    let row = rows_of(&report.ledger, &id)[0].clone();
    assert_eq!(row.verdict, Verdict::Error, "{row:?}");
    assert!(!row.served_from_store);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].archive_id, id);
    assert!(
        report.failures[0]
            .location
            .ends_with("archives/nowhere.tar.gz"),
        "{}",
        report.failures[0]
    );
    // The others still answer from the store; the stored bytes are kept.
    assert_eq!(report.fetches, 1);
    assert_eq!(report.served_from_store, rows.len() - 1);
    assert_store_exactly(&cfg, &shas(c.archives()));

    // Offline, the changed location is named as unchecked and fails its archive...
    let report = failed_report(ingest::run(&cfg, &offline()));
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let line = report.failures[0].to_string();
    assert!(
        line.contains("archives/nowhere.tar.gz")
            && line.contains("never delivered them")
            && line.contains("--accept-unchecked"),
        "{line}"
    );
    assert_eq!(
        rows_of(&report.ledger, &id)[0].verdict,
        Verdict::SkippedOffline
    );
    // ... unless the user accepts it: the row says so, the summary too.
    let accepted = ingest::run(
        &cfg,
        &IngestOptions {
            accept_unchecked: true,
            ..offline()
        },
    )
    .expect("accepted offline run");
    assert_eq!(
        rows_of(&accepted.ledger, &id)[0].verdict,
        Verdict::Unchecked
    );
    assert_eq!(accepted.verified_archives, rows.len());
    assert!(
        accepted
            .summary_line()
            .contains("(1 location never checked, accepted offline)"),
        "{}",
        accepted.summary_line()
    );
}

#[test]
fn a_hub_location_whose_fetch_never_finished_is_fetched_on_the_rerun_and_compared() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let hub = hub_with_corpus(&c);
    let rows = c.rows_with_gcs(&published);
    let n = rows.len();
    // A first run that stored every archive from GCS but never finished a Hub fetch (as a
    // run killed while its Hub downloads were partial leaves it).
    let gcs_only = c.pipeline(
        "resume",
        &rows,
        &[Gcs],
        Some(gcs.url()),
        Some(hub.endpoint()),
    );
    ingest::run(&gcs_only, &opts()).expect("GCS run");
    hub.clear_requests();

    let both = c.pipeline(
        "resume",
        &rows,
        &[Gcs, Hf],
        Some(gcs.url()),
        Some(hub.endpoint()),
    );
    let report = ingest::run(&both, &opts()).expect("rerun with the Hub");
    assert_eq!(report.fetches, n, "one Hub fetch per archive");
    assert!(!hub.requests().is_empty(), "the Hub was never asked");
    let revision = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    for a in c.archives() {
        let r = rows_of(&report.ledger, &a.archive_id);
        assert_eq!(r[0].location_kind, "gcs");
        assert_eq!(r[0].verdict, Verdict::InStore, "{:?}", r[0]);
        assert_eq!(r[1].location_kind, "hf");
        assert_eq!(r[1].verdict, Verdict::Verified, "{:?}", r[1]);
        assert_eq!(r[1].resolved_commit.as_deref(), Some(revision.as_str()));
        assert!(r.iter().all(|x| x.cross_source_identical == Some(true)));
    }

    // The next rerun serves both from the store and keeps what the records say: the Hub
    // commit resolved by the fetch, and the identity of the two locations.
    hub.clear_requests();
    let again = ingest::run(&both, &opts()).expect("rerun");
    assert!(again.nothing_downloaded());
    assert_eq!(hub.requests(), vec![]);
    for a in c.archives() {
        let r = rows_of(&again.ledger, &a.archive_id);
        assert!(
            r.iter()
                .all(|x| x.verdict == Verdict::InStore && x.cross_source_identical == Some(true))
        );
        assert_eq!(r[1].resolved_commit.as_deref(), Some(revision.as_str()));
    }

    // A GCS generation changed in the manifest is a location never verified: fetched, and
    // the pin that does not exist fails that archive.
    let mut changed = rows.clone();
    changed[1].gcs_generation = Some(1);
    let cfg = c.pipeline(
        "resume",
        &changed,
        &[Gcs, Hf],
        Some(gcs.url()),
        Some(hub.endpoint()),
    );
    let report = failed_report(ingest::run(&cfg, &opts()));
    assert_eq!(report.fetches, 1);
    let r = rows_of(&report.ledger, &changed[1].archive_id);
    assert_eq!(r[0].verdict, Verdict::Error, "{:?}", r[0]);
    assert_eq!(r[0].generation, Some(1));
    assert_eq!(r[1].verdict, Verdict::InStore);
    assert_eq!(report.failures.len(), 1);
    assert!(
        report.failures[0].location.ends_with("#1"),
        "{}",
        report.failures[0]
    );
}

#[test]
fn a_location_record_that_does_not_match_its_location_is_ignored_and_the_location_fetched() {
    let c = small_corpus();
    let rows = c.rows();
    let cfg = c.pipeline("records", &rows, &[File], None, None);
    ingest::run(&cfg, &opts()).expect("first run");
    let records = cfg.run_dir.join("store").join("locations");
    let mut files: Vec<_> = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(
        files.len(),
        rows.len(),
        "one record per (archive, location)"
    );
    // Edit one record to be about another location, and another into garbage.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["uri"] = "file:elsewhere.tar.gz".into();
    std::fs::write(&files[0], serde_json::to_string(&doc).unwrap()).unwrap();
    std::fs::write(&files[1], b"{not json").unwrap();
    let report = ingest::run(&cfg, &opts()).expect("rerun");
    assert_eq!(report.fetches, 2, "the two locations are checked again");
    assert_eq!(report.served_from_store, rows.len() - 2);
    assert_eq!(
        report.rows_with(Verdict::Verified).count(),
        2,
        "{:?}",
        report.ledger
    );
    // ... and their records are written anew.
    let again = ingest::run(&cfg, &opts()).expect("third run");
    assert!(again.nothing_downloaded());
}
