//! The requests a whole ingest over raw Hub shards makes, counted at the local Hub: a
//! measurement, not a check (`#[ignore]`d; docs/INGEST.md gives the command and the
//! figures). It prints, per scenario, the Hub's resolve answers, the content host's
//! requests and, among them, the 512-byte tar-header reads: one process; a later process
//! that must fetch again (the store forgotten); the manifest run as shard tasks one after
//! another. `MEASURE_SCALE=full` measures the study-shaped demo (default: the small one).

mod common;

use common::*;
use model::config::LocationKind::Hf;
use testkit::{HubRequest, HubRole};

/// (resolves, content requests, of which header reads) of a request log.
fn counts(requests: &[HubRequest]) -> (usize, usize, usize) {
    let role = |role| requests.iter().filter(|r| r.role == role).count();
    (
        role(HubRole::Hub),
        role(HubRole::Content),
        header_reads(requests),
    )
}

/// Every archive of the run verified.
fn all_verified(report: &ingest::IngestReport) {
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// Forget the verified bytes (not the shard index), so the next run fetches again.
fn forget_store(cfg: &model::LoadedConfig) {
    let _ = std::fs::remove_dir_all(cfg.run_dir.join("store"));
    let _ = std::fs::remove_dir_all(cfg.run_dir.join("shards"));
    let _ = std::fs::remove_file(cfg.run_dir.join("ledger.parquet"));
}

#[test]
#[ignore = "a measurement: cargo nextest run -p ingest --test hub_requests --run-ignored only --no-capture"]
fn requests_of_a_whole_ingest_over_raw_shards() {
    let scale = match std::env::var("MEASURE_SCALE").as_deref() {
        Ok("full") => demo::Scale::Full,
        _ => demo::Scale::Small,
    };
    let dir = tempfile::tempdir().unwrap();
    let summary = demo::generate(dir.path(), scale, demo::DEFAULT_SEED).expect("demo");
    let base = model::load_config(&dir.path().join("pipeline.yaml")).expect("demo pipeline");
    let c = Corpus { dir, summary, base };
    let hub = hub_with_corpus(&c);
    let rows = c.rows();
    let mut shards: Vec<_> = rows.iter().map(|r| r.hf_shard.clone()).collect();
    shards.sort();
    shards.dedup();
    let cfg = c.pipeline("requests", &rows, &[Hf], None, Some(hub.endpoint()));
    let mut table = vec![format!(
        "{scale:?} demo: {} archives in {} raw shards",
        rows.len(),
        shards.len()
    )];
    let mut measure = |what: &str, run: &mut dyn FnMut()| {
        hub.clear_requests();
        run();
        let (hub_n, content, headers) = counts(&hub.requests());
        table.push(format!(
            "{what}: {} requests ({hub_n} resolves, {content} content, of which {headers} header reads)",
            hub_n + content
        ));
    };
    measure("one process, parallel 4", &mut || {
        all_verified(&ingest::run(&cfg, &opts()).expect("first run"));
    });
    forget_store(&cfg);
    measure("a later process", &mut || {
        all_verified(&ingest::run(&cfg, &opts()).expect("later process"));
    });
    let tasks = 3;
    forget_store(&cfg);
    let _ = std::fs::remove_dir_all(cfg.run_dir.join("shard-index"));
    measure(
        &format!("{tasks} shard tasks in a row, none before"),
        &mut || {
            for index in 0..tasks {
                let o = ingest::IngestOptions {
                    shard: Some(model::shard::Shard {
                        index,
                        count: tasks,
                    }),
                    ..opts()
                };
                all_verified(&ingest::run(&cfg, &o).expect("shard task"));
            }
        },
    );
    // After `pipeline pin` wrote one table per shard beside the manifest.
    forget_store(&cfg);
    let _ = std::fs::remove_dir_all(cfg.run_dir.join("shard-index"));
    pin_shard_tables_beside(&cfg, &hub);
    measure("one process after pipeline pin", &mut || {
        all_verified(&ingest::run(&cfg, &opts()).expect("after pin"));
    });
    println!("{}", table.join("\n"));
}
