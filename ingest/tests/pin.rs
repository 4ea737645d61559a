//! `ingest::pin` against the real GCS emulator and the local Hub serving a small demo corpus:
//! the pinned rows equal the demo's own manifest (sha256, bytes, workload, shard, member, the
//! commit), with the Hub paginating its tree, breaking a shard transfer and expiring its
//! content URLs; a pin of the bucket alone records each object's live generation.

mod common;

use common::*;
use ingest::pin::{GcsPrefix, HubTarget, PinRequest, PinSettings, pin};
use std::time::Duration;
use testkit::{DemoSources, DemoSourcesOptions, HubFaults};

fn settings(sources: &DemoSources) -> PinSettings {
    PinSettings {
        retries: 3,
        timeout: Duration::from_secs(10),
        initial_backoff: Duration::from_millis(5),
        parallel: 2,
        ..PinSettings::from_env(&ingest::EnvOverrides {
            storage_emulator_host: Some(sources.gcs.url()),
            hf_endpoint: Some(sources.hub.endpoint()),
            ..ingest::EnvOverrides::default()
        })
    }
}

/// A pin of the bucket's `archives/` and/or the dataset at `main` (`hf_path`: its folder).
fn request(gcs: bool, hf_path: Option<&str>) -> PinRequest {
    PinRequest {
        gcs: gcs.then(|| "gs://agentrace-demo/archives".parse::<GcsPrefix>().unwrap()),
        hf: hf_path.map(|p| {
            format!("{}@main:{p}", demo::write::DEMO_HF_REPO)
                .parse::<HubTarget>()
                .unwrap()
        }),
        rules: vec![],
        filter: Default::default(),
    }
}

#[test]
fn pinned_rows_equal_the_demo_manifest_through_pages_breaks_and_expired_urls() {
    let c = small_corpus();
    let sources = DemoSources::start(c.root(), &DemoSourcesOptions::default()).expect("sources");
    // A file that is not a shard, at the top of the dataset; one tree entry a page.
    let readme = c.root().join("README.md");
    std::fs::write(&readme, "# demo dataset\n").unwrap();
    let commit = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    sources
        .hub
        .add_file(demo::write::DEMO_HF_REPO, &commit, "README.md", &readme)
        .unwrap();
    sources.hub.set_tree_page_size(1);
    sources.hub.set_faults(HubFaults {
        drop_content_after: Some(70_000),
        signed_url_uses: Some(1),
        ..HubFaults::default()
    });
    let report = pin(&request(true, Some("")), &settings(&sources)).expect("pin");
    let rows = report.manifest_rows();
    let mut want = c.rows();
    want.sort_by(|a, b| a.archive_id.cmp(&b.archive_id));
    assert_eq!(rows.len(), want.len());
    for (got, want) in rows.iter().zip(&want) {
        assert_eq!(got.archive_id, want.archive_id);
        assert_eq!(got.workload, want.workload, "{}", got.archive_id);
        assert_eq!(got.sha256, want.sha256, "{}", got.archive_id);
        assert_eq!(got.bytes, want.bytes, "{}", got.archive_id);
        assert_eq!(got.hf_repo, want.hf_repo);
        assert_eq!(got.hf_revision, want.hf_revision, "the resolved commit");
        assert_eq!(got.hf_shard, want.hf_shard);
        assert_eq!(got.hf_member, want.hf_member);
        assert_eq!(
            got.gcs_object.as_deref(),
            Some(format!("archives/{}", want.hf_member.as_deref().unwrap()).as_str())
        );
        assert_eq!(got.file_path, None);
    }
    // The faults fired: a broken shard was continued, expired URLs were re-resolved, and
    // the tree came in pages.
    let log = sources.hub.requests();
    assert!(
        log.iter()
            .filter(|r| r.target.contains("/tree/") && r.target.contains("cursor="))
            .count()
            >= 2,
        "the tree came in three pages"
    );
    assert!(
        log.iter().any(|r| r.status == 403),
        "an expired URL was refused"
    );
    assert!(
        log.iter().any(|r| r
            .range
            .as_deref()
            .is_some_and(|g| !g.starts_with("bytes=0-"))),
        "a broken shard continued by Range"
    );
    // The report is deterministic.
    let again = pin(&request(true, Some("")), &settings(&sources)).expect("pin again");
    assert_eq!(again.manifest_csv(), report.manifest_csv());
    assert_eq!(again.to_json(), report.to_json());
}

#[test]
fn a_bucket_pin_records_the_live_generations() {
    let c = small_corpus();
    let sources = DemoSources::start(c.root(), &DemoSourcesOptions::default()).expect("sources");
    let report = pin(&request(true, None), &settings(&sources)).expect("pin");
    assert_eq!(report.archives.len(), c.archives().len());
    let mut older = 0;
    for a in &report.archives {
        let g = a.gcs.as_ref().expect("gcs");
        let gens = sources
            .gcs
            .generations("agentrace-demo", &g.object)
            .unwrap();
        assert_eq!(gens.last(), Some(&g.generation), "{}", g.object);
        older += usize::from(gens.len() > 1);
        assert!(a.hf.is_none());
    }
    assert!(older > 0, "some objects have an older generation");
    let rows = report.manifest_rows();
    assert!(
        rows.iter()
            .all(|r| r.hf_repo.is_none() && r.hf_revision.is_none())
    );
}
