//! The same conformance checks ([`testkit::conformance::check_source`]) against every backend:
//! local files, GCS through the real fake-gcs-server, and the local Hub server.

mod common;

use common::*;
use ingest::source::gcs::GcsSettings;
use ingest::source::hf::HfSettings;
use ingest::source::{ArchiveSource, FileSource, GcsSource, HfSource};
use model::ArchiveSpec;
use std::time::Duration;
use testkit::conformance::check_source;

fn check(source: &dyn ArchiveSource, good: &ArchiveSpec, missing: &ArchiveSpec) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let report = rt
        .block_on(check_source(source, good, missing))
        .unwrap_or_else(|e| panic!("conformance: {e}"));
    assert_eq!(report.sha256, good.sha256);
    assert_eq!(report.bytes, good.bytes);
    assert_eq!(report.continued_from, good.bytes / 3);
}

#[test]
fn file_backend_conforms() {
    let c = small_corpus();
    let good = c.archives()[0].clone();
    let mut missing = good.clone();
    let f = missing.file.as_mut().unwrap();
    f.path = c.root().join("no-such-file.tar.gz");
    check(&FileSource, &good, &missing);
}

#[test]
fn gcs_backend_conforms() {
    let c = small_corpus();
    let (gcs, published) = gcs_with_corpus(&c);
    let specs: Vec<ArchiveSpec> = c
        .archives()
        .iter()
        .zip(&published)
        .map(|(a, p)| {
            let mut a = a.clone();
            a.gcs = Some(model::manifest::GcsLocation {
                bucket: BUCKET.into(),
                object: p.object.clone(),
                generation: p.generation,
            });
            a
        })
        .collect();
    // Archive 2 is overwritten: only its pinned generation has the original bytes.
    assert!(published[2].overwritten_by.is_some());
    let good = specs[2].clone();
    let mut missing = good.clone();
    missing.gcs.as_mut().unwrap().generation += 1;
    let source = GcsSource::new(
        [BUCKET],
        GcsSettings {
            endpoint: Some(gcs.url()),
            service_url: None,
            credentials: ingest::source::gcs::GcsCredentials::Anonymous,
            user_project: None,
            retries: 1,
            request_timeout: Duration::from_secs(30),
            initial_backoff: Duration::from_millis(5),
        },
    )
    .unwrap();
    check(&source, &good, &missing);
}

#[test]
fn hub_backend_conforms() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let good = c.archives()[3].clone();
    let mut missing = good.clone();
    missing.hf.as_mut().unwrap().member = "not-in-the-shard.tar.gz".into();
    let source = HfSource::new(HfSettings {
        endpoint: hub.endpoint(),
        token: None,
        retries: 1,
        request_timeout: Duration::from_secs(30),
        initial_backoff: Duration::from_millis(5),
        ..Default::default()
    })
    .unwrap();
    check(&source, &good, &missing);
}

#[test]
fn hub_backend_conforms_when_the_content_host_ignores_range() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    hub.set_faults(testkit::HubFaults {
        ignore_range: true,
        ..Default::default()
    });
    let good = c.archives()[4].clone();
    let mut missing = good.clone();
    missing.hf.as_mut().unwrap().member = "not-in-the-shard.tar.gz".into();
    let source = HfSource::new(HfSettings {
        endpoint: hub.endpoint(),
        token: None,
        retries: 1,
        request_timeout: Duration::from_secs(30),
        initial_backoff: Duration::from_millis(5),
        ..Default::default()
    })
    .unwrap();
    check(&source, &good, &missing);
}
