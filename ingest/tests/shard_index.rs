//! One member table per raw shard, through the local Hub: the first ingest walks each
//! shard's tar headers once and stores the table in `run_dir/shard-index/`; a later process
//! (a rerun that must fetch again, another shard task) reads no header at all; a table
//! written by `pipeline pin` beside the manifest serves the very first ingest; a damaged
//! table is not used (the headers are walked again) and the fetch still verifies.

mod common;

use common::*;
use ingest::Verdict;
use ingest::source::hf::shard_index::SHARD_INDEX_DIR;
use model::config::LocationKind::Hf;

/// Every Hub row of the report verified.
fn all_verified(report: &ingest::IngestReport) {
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(
        report.ledger.iter().all(|r| r.verdict == Verdict::Verified),
        "{:?}",
        report.ledger
    );
}

/// Forget the verified bytes, so that the next run fetches every archive again.
fn forget_store(cfg: &model::LoadedConfig) {
    std::fs::remove_dir_all(cfg.run_dir.join("store")).unwrap();
    let _ = std::fs::remove_file(cfg.run_dir.join("ledger.parquet"));
}

#[test]
fn the_first_fetch_builds_the_table_and_later_processes_read_no_header() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let cfg = c.pipeline("index", &c.rows(), &[Hf], None, Some(hub.endpoint()));
    all_verified(&ingest::run(&cfg, &opts()).expect("first run"));
    let first = header_reads(&hub.requests());
    assert!(first > 0, "the first run walks the headers");
    let tables: Vec<_> = std::fs::read_dir(cfg.run_dir.join(SHARD_INDEX_DIR))
        .expect("the run directory has a shard index")
        .collect();
    let shards: std::collections::BTreeSet<_> =
        c.rows().iter().map(|r| r.hf_shard.clone()).collect();
    assert_eq!(tables.len(), shards.len());

    forget_store(&cfg);
    hub.clear_requests();
    all_verified(&ingest::run(&cfg, &opts()).expect("second process"));
    assert_eq!(
        header_reads(&hub.requests()),
        0,
        "a later process reads the stored tables"
    );

    // A damaged table: every member moved by one block. It fails its check, the headers
    // are walked again, and every archive still verifies.
    for t in std::fs::read_dir(cfg.run_dir.join(SHARD_INDEX_DIR)).unwrap() {
        let path = t.unwrap().path();
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for m in doc["members"].as_array_mut().unwrap() {
            let off = m["data_offset"].as_u64().unwrap();
            m["data_offset"] = serde_json::json!(off + 1);
        }
        std::fs::write(&path, doc.to_string()).unwrap();
    }
    forget_store(&cfg);
    hub.clear_requests();
    all_verified(&ingest::run(&cfg, &opts()).expect("run with damaged tables"));
    // Parallel fetches of one shard may walk some headers twice, so the count is not exact.
    assert!(
        header_reads(&hub.requests()) > 0,
        "a damaged table is not used: the headers are walked again"
    );
}

#[test]
fn a_table_written_by_pin_beside_the_manifest_serves_the_first_ingest() {
    let c = small_corpus();
    let hub = hub_with_corpus(&c);
    let cfg = c.pipeline("pinned", &c.rows(), &[Hf], None, Some(hub.endpoint()));
    assert!(pin_shard_tables_beside(&cfg, &hub) > 0);
    hub.clear_requests();
    all_verified(&ingest::run(&cfg, &opts()).expect("ingest after pin"));
    assert_eq!(header_reads(&hub.requests()), 0, "{:?}", hub.requests());
}
