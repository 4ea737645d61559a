//! Shared fixtures of the ingest tests: a small demo corpus, the real fake-gcs-server seeded
//! with it (some objects overwritten), the local Hub serving its raw shards, and helpers that
//! write pipelines and read back the ledger and the store.
#![allow(dead_code)]

use ingest::{IngestOptions, LedgerRow};
use model::config::{IngestConfig, LocationKind};
use model::manifest::ManifestRow;
use model::{ArchiveSpec, LoadedConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;
use testkit::{
    FakeGcsServer, HubServer, PublishedObject, SourcesSpec, manifest_row, write_pipeline,
};

/// Bucket the tests publish to.
pub(crate) const BUCKET: &str = "agentrace-demo";

/// A generated small demo corpus.
pub(crate) struct Corpus {
    pub dir: tempfile::TempDir,
    pub summary: demo::DemoSummary,
    pub base: LoadedConfig,
}

impl Corpus {
    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }
    pub(crate) fn archives(&self) -> &[ArchiveSpec] {
        &self.base.archives
    }
    pub(crate) fn rows(&self) -> Vec<ManifestRow> {
        self.archives().iter().map(manifest_row).collect()
    }
    /// Rows with GCS locations (pinned generations) added.
    pub(crate) fn rows_with_gcs(&self, published: &[PublishedObject]) -> Vec<ManifestRow> {
        self.rows()
            .into_iter()
            .zip(published)
            .map(|(mut r, p)| {
                r.gcs_bucket = Some(BUCKET.into());
                r.gcs_object = Some(p.object.clone());
                r.gcs_generation = Some(p.generation);
                r
            })
            .collect()
    }
    /// Write a pipeline and load it.
    pub(crate) fn pipeline(
        &self,
        name: &str,
        rows: &[ManifestRow],
        locations: &[LocationKind],
        gcs: Option<String>,
        hf: Option<String>,
    ) -> LoadedConfig {
        let spec = SourcesSpec {
            locations: locations.to_vec(),
            gcs_endpoint: gcs,
            hf_endpoint: hf,
            ingest: IngestConfig {
                parallel: 3,
                retries: 3,
                request_timeout_s: 60,
                ..Default::default()
            },
            run_dir: format!("run-{name}"),
        };
        let p = write_pipeline(
            &self.root().join("pipeline.yaml"),
            self.root(),
            name,
            rows,
            &spec,
        )
        .expect("write pipeline");
        model::load_config(&p).expect("load written pipeline")
    }
}

pub(crate) fn small_corpus() -> Corpus {
    let dir = tempfile::tempdir().expect("tempdir");
    let summary = demo::generate(dir.path(), demo::Scale::Small, demo::DEFAULT_SEED).expect("demo");
    let base = model::load_config(&dir.path().join("pipeline.yaml")).expect("demo pipeline");
    Corpus { dir, summary, base }
}

/// The real fake-gcs-server with a versioned bucket holding every archive; every third
/// object is overwritten afterwards. Fails loudly when the binary is missing.
pub(crate) fn gcs_with_corpus(c: &Corpus) -> (FakeGcsServer, Vec<PublishedObject>) {
    let gcs = FakeGcsServer::start().unwrap_or_else(|e| {
        panic!("fake-gcs-server is required for the GCS tests (the test command installs it): {e}")
    });
    gcs.create_bucket(BUCKET, true).expect("bucket");
    let items: Vec<(String, PathBuf)> = c
        .archives()
        .iter()
        .map(|a| {
            let f = a.file.as_ref().expect("demo archives have files");
            (
                format!("archives/{}", f.relative.trim_start_matches("archives/")),
                f.path.clone(),
            )
        })
        .collect();
    let published = gcs.publish(BUCKET, &items, 3).expect("publish");
    (gcs, published)
}

/// The local Hub serving the corpus's raw shards at the demo revision (branch `main`).
pub(crate) fn hub_with_corpus(c: &Corpus) -> HubServer {
    let hub = HubServer::start().expect("hub");
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    let mut shards: Vec<&str> = c
        .summary
        .archives
        .iter()
        .map(|a| a.shard.as_str())
        .collect();
    shards.dedup();
    for s in shards {
        let local = c.root().join("shards").join(s.trim_start_matches("raw/"));
        hub.add_file(demo::write::DEMO_HF_REPO, &rev, s, &local)
            .expect("add shard");
    }
    hub.set_branch(demo::write::DEMO_HF_REPO, "main", &rev);
    hub
}

/// Options for tests: no environment, short backoff.
pub(crate) fn opts() -> IngestOptions {
    IngestOptions {
        initial_backoff: Duration::from_millis(5),
        ..IngestOptions::default()
    }
}

/// File names under store/sha256, sorted.
pub(crate) fn store_files(cfg: &LoadedConfig) -> Vec<String> {
    names(&cfg.run_dir.join("store").join("sha256"))
}

/// File names under quarantine/, sorted.
pub(crate) fn quarantine_files(cfg: &LoadedConfig) -> Vec<String> {
    names(&cfg.run_dir.join("quarantine"))
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Sorted SHA256s of the archives.
pub(crate) fn shas(archives: &[ArchiveSpec]) -> Vec<String> {
    let mut v: Vec<String> = archives.iter().map(|a| a.sha256.clone()).collect();
    v.sort();
    v.dedup();
    v
}

/// Assert the store holds exactly the given blobs, each re-hashing to its name, and no
/// temporary files are left.
pub(crate) fn assert_store_exactly(cfg: &LoadedConfig, expected: &[String]) {
    let files = store_files(cfg);
    assert_eq!(files, expected, "store/sha256 contents");
    for f in &files {
        let (sha, _) = ingest::sink::hash_file(&cfg.run_dir.join("store/sha256").join(f)).unwrap();
        assert_eq!(&sha, f, "stored blob re-hashes to its name");
    }
    assert!(
        !cfg.run_dir.join("store/tmp").exists() || names(&cfg.run_dir.join("store/tmp")).is_empty(),
        "temporary files left in store/tmp"
    );
}

/// The ledger as written, read back through Polars.
pub(crate) fn ledger_df(cfg: &LoadedConfig) -> polars::prelude::DataFrame {
    frames::read_frame(
        &cfg.run_dir.join(ingest::LEDGER_FILE),
        "ledger",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .expect("ledger readable")
}

/// The rows of one archive.
pub(crate) fn rows_of<'a>(rows: &'a [LedgerRow], id: &str) -> Vec<&'a LedgerRow> {
    rows.iter().filter(|r| r.archive_id == id).collect()
}

/// Unwrap a failed run's report.
pub(crate) fn failed_report(
    r: Result<ingest::IngestReport, ingest::IngestError>,
) -> ingest::IngestReport {
    match r {
        Err(ingest::IngestError::ArchivesFailed { report }) => *report,
        Ok(rep) => panic!(
            "expected failures, the run succeeded: {}",
            rep.summary_line()
        ),
        Err(e) => panic!("expected ArchivesFailed, got {e}"),
    }
}

/// Content-host reads of one 512-byte tar-header block.
pub(crate) fn header_reads(requests: &[testkit::HubRequest]) -> usize {
    requests
        .iter()
        .filter(|r| r.role == testkit::HubRole::Content)
        .filter(|r| {
            r.range
                .as_deref()
                .and_then(|v| v.strip_prefix("bytes="))
                .and_then(|v| v.split_once('-'))
                .and_then(|(a, b)| Some(b.parse::<u64>().ok()? - a.parse::<u64>().ok()? + 1))
                == Some(512)
        })
        .count()
}

/// `pipeline pin` of the demo dataset's raw shards on `hub`, its shard tables written
/// beside `cfg`'s manifest (where ingest reads them); how many tables.
pub(crate) fn pin_shard_tables_beside(cfg: &LoadedConfig, hub: &HubServer) -> usize {
    let settings = ingest::pin::PinSettings {
        hf_endpoint: hub.endpoint(),
        initial_backoff: Duration::from_millis(5),
        ..ingest::pin::PinSettings::from_env(&ingest::EnvOverrides::default())
    };
    let request = ingest::pin::PinRequest {
        gcs: None,
        hf: Some(
            format!("{}:raw", demo::write::DEMO_HF_REPO)
                .parse()
                .unwrap(),
        ),
        rules: vec![],
        filter: Default::default(),
    };
    let report = ingest::pin::pin(&request, &settings).expect("pin");
    let beside = cfg
        .path
        .parent()
        .unwrap()
        .join(ingest::source::hf::shard_index::SHARD_INDEX_DIR);
    for r in &report.shard_indexes {
        ingest::source::hf::shard_index::write_record(&beside, r).unwrap();
    }
    report.shard_indexes.len()
}
