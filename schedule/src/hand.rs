//! Hand-built instances for tests and benches (feature `synthetic`): attempts, caps and
//! blobs from plain values, an instance that must be valid, and the closeness of hour
//! values computed through different float paths.

use crate::instance::{AttemptInput, BlobInput, WorkloadInstance};
use model::WorkloadId;
use model::config::ReplayCaps;

/// An attempt with integer-second values.
pub fn attempt(
    id: &str,
    gen_start: f64,
    d: f64,
    requests: &[(f64, f64)],
    cores: f64,
    mem_gib: f64,
    blobs: &[u32],
) -> AttemptInput {
    AttemptInput {
        attempt_id: id.to_string(),
        task_id: format!("task-{id}"),
        gen_start,
        duration_s: d,
        requests: requests.to_vec(),
        cores,
        mem_gib,
        blobs: blobs.to_vec(),
    }
}

/// Caps.
pub fn caps(concurrency: u32, cpu_cores: f64, ram_gib: f64, gpus: u32) -> ReplayCaps {
    ReplayCaps {
        concurrency,
        cpu_cores,
        ram_gib,
        gpus,
    }
}

/// A blob of `bytes`.
pub fn blob(digest: &str, bytes: u64) -> BlobInput {
    BlobInput {
        digest: digest.to_string(),
        compressed_bytes: bytes,
    }
}

/// Build an instance (panics on invalid input: tests build valid ones).
pub fn instance(
    w: WorkloadId,
    caps: ReplayCaps,
    attempts: Vec<AttemptInput>,
    blobs: Vec<BlobInput>,
) -> WorkloadInstance {
    WorkloadInstance::new(w, caps, attempts, blobs, None).expect("valid instance")
}

/// Relative closeness for hour values computed through different float paths.
pub fn assert_close(actual: f64, expected: f64, what: &str) {
    let tol = 1e-12 * expected.abs().max(1e-300);
    assert!(
        (actual - expected).abs() <= tol,
        "{what}: got {actual}, expected {expected}"
    );
}
