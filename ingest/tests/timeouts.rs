//! An endpoint that accepts connections and never answers ends the fetch after about
//! `ingest.read_timeout_s` (not retried), with an error naming the endpoint, for GCS and for
//! the Hub alike; without the bound, each would wait the whole-request timeout (an hour by
//! default) per retry. Once one request to the endpoint has timed out, the run's circuit
//! breaker ends the other archives' fetches of that endpoint at once: the run ends after
//! about one read timeout, not one per archive.

mod common;

use common::*;
use model::config::{IngestConfig, LocationKind};
use std::net::TcpListener;
use std::time::{Duration, Instant};
use testkit::{SourcesSpec, write_pipeline};

/// A loopback listener that accepts every connection and never writes a byte (the
/// connections stay open as long as the listener thread runs).
fn silent_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    format!("http://{addr}")
}

fn fetch_from_silent(kind: LocationKind) -> (String, String, Duration) {
    fetch_many_from_silent(kind, 1, 1)
}

fn fetch_many_from_silent(
    kind: LocationKind,
    archives: usize,
    parallel: u32,
) -> (String, String, Duration) {
    fetch_many_from(kind, silent_endpoint(), archives, parallel)
}

/// A loopback address nothing listens on (a port bound, then released): connecting is
/// refused.
fn closed_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

fn fetch_many_from(
    kind: LocationKind,
    endpoint: String,
    archives: usize,
    parallel: u32,
) -> (String, String, Duration) {
    let c = small_corpus();
    let rev = demo::write::demo_hf_revision(demo::DEFAULT_SEED);
    let rows: Vec<_> = c
        .rows()
        .into_iter()
        .take(archives)
        .map(|mut r| {
            r.file_path = None;
            match kind {
                LocationKind::Gcs => {
                    r.gcs_bucket = Some(BUCKET.into());
                    r.gcs_object = Some(format!("archives/{}", r.archive_id));
                    r.gcs_generation = Some(1);
                }
                _ => {
                    r.hf_repo = Some("agentrace/demo".into());
                    r.hf_revision = Some(rev.clone());
                    r.hf_shard = Some("raw/shard-000.tar".into());
                    r.hf_member = Some(format!("{}.tar.gz", r.archive_id));
                }
            }
            r
        })
        .collect();
    let (gcs, hf) = match kind {
        LocationKind::Gcs => (Some(endpoint.clone()), None),
        _ => (None, Some(endpoint.clone())),
    };
    let spec = SourcesSpec {
        locations: vec![kind],
        gcs_endpoint: gcs,
        hf_endpoint: hf,
        ingest: IngestConfig {
            parallel,
            retries: 3,
            connect_timeout_s: 2,
            read_timeout_s: 2,
            ..Default::default()
        },
        run_dir: "run-silent".into(),
    };
    let p = write_pipeline(
        &c.root().join("pipeline.yaml"),
        c.root(),
        "silent",
        &rows,
        &spec,
    )
    .unwrap();
    let cfg = model::load_config(&p).unwrap();
    let started = Instant::now();
    let err = ingest::run(&cfg, &opts()).unwrap_err();
    let took = started.elapsed();
    let tmp = cfg.run_dir.join("store/tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", tmp.display());
    let report = failed_report(Err(err));
    let detail = report
        .failures
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    (endpoint, detail, took)
}

#[test]
fn a_silent_gcs_endpoint_fails_after_the_read_timeout_naming_it() {
    let (endpoint, detail, took) = fetch_from_silent(LocationKind::Gcs);
    assert!(detail.contains(&endpoint), "{detail}");
    // Two seconds of read timeout, not retried: far below the retries' worth (4 x 2 s) and
    // the hour of the whole-request bound.
    assert!(took < Duration::from_secs(7), "{took:?}: {detail}");
}

#[test]
fn a_silent_hub_endpoint_fails_after_the_read_timeout_naming_it() {
    let (endpoint, detail, took) = fetch_from_silent(LocationKind::Hf);
    assert!(
        detail.contains(&format!(
            "no answer from {endpoint} within the read timeout"
        )),
        "{detail}"
    );
    assert!(took < Duration::from_secs(7), "{took:?}: {detail}");
}

/// Five archives, two fetched at once, on an endpoint that never answers: the first two
/// time out together, the breaker opens, and the three others fail at once naming the
/// first failure; the whole run takes about one read timeout (without the breaker: three).
fn the_breaker_ends_a_silent_endpoints_run_after_one_read_timeout(kind: LocationKind) {
    let (endpoint, detail, took) = fetch_many_from_silent(kind, 5, 2);
    let lines: Vec<&str> = detail.lines().collect();
    assert_eq!(lines.len(), 5, "{detail}");
    let broken_off = |l: &&&str| {
        l.contains(": not tried: archive ") || l.contains(": stopped waiting: archive ")
    };
    let timed_out = lines
        .iter()
        .filter(|l| l.contains(&endpoint) && !broken_off(l))
        .count();
    let others: Vec<&&str> = lines.iter().filter(|l| broken_off(l)).collect();
    assert!(timed_out >= 1, "{detail}");
    assert_eq!(timed_out + others.len(), 5, "{detail}");
    // At least the archives that had to wait for a free slot were never started.
    assert!(
        others
            .iter()
            .filter(|l| l.contains(": not tried: "))
            .count()
            >= 3,
        "{detail}"
    );
    assert!(others.iter().all(|l| l.contains(&endpoint)), "{detail}");
    assert!(took < Duration::from_millis(4500), "{took:?}: {detail}");
}

#[test]
fn a_silent_gcs_endpoint_opens_the_breaker_for_the_other_archives() {
    the_breaker_ends_a_silent_endpoints_run_after_one_read_timeout(LocationKind::Gcs);
}

#[test]
fn a_silent_hub_endpoint_opens_the_breaker_for_the_other_archives() {
    the_breaker_ends_a_silent_endpoints_run_after_one_read_timeout(LocationKind::Hf);
}

/// A Hub endpoint that refuses connections: the first archive fetched (whichever the
/// tasks start first; the report lists archives in manifest order) fails after its
/// retries as unreachable, which opens the breaker; the others are not tried.
#[test]
fn a_hub_endpoint_that_refuses_connections_opens_the_breaker() {
    let (endpoint, detail, _) = fetch_many_from(LocationKind::Hf, closed_endpoint(), 5, 1);
    let lines: Vec<&str> = detail.lines().collect();
    assert_eq!(lines.len(), 5, "{detail}");
    let (not_tried, tried): (Vec<&str>, Vec<&str>) = lines
        .iter()
        .partition(|l| l.contains(": not tried: archive "));
    assert_eq!(tried.len(), 1, "{detail}");
    assert!(
        tried[0].contains(&format!("{endpoint} cannot be reached")),
        "{detail}"
    );
    // Every archive not tried names the one whose failure opened the breaker.
    let failed_id = tried[0].split(" at ").next().unwrap().trim();
    assert!(
        not_tried.iter().all(|l| l.contains("cannot be reached")
            && l.contains(&format!(": not tried: archive {failed_id} at "))),
        "{detail}"
    );
}
