//! Deterministic synthetic workloads of the study's shape (tasks with repeated attempts,
//! tens of requests each, shared image layers), for benchmarks and tests. Only ChaCha8 and
//! libm (portable math) are used, so a shape gives the same instance on every machine.

use crate::instance::{AttemptInput, BlobInput, InstanceError, WorkloadInstance};
use model::WorkloadId;
use model::config::ReplayCaps;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// The shape of a synthetic workload.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticShape {
    /// Which workload it imitates.
    pub workload: WorkloadId,
    /// Tasks.
    pub tasks: usize,
    /// Attempts per task.
    pub attempts_per_task: usize,
    /// Mean requests per attempt.
    pub requests_per_attempt: usize,
    /// Repositories (shared environment layers, shared quotas).
    pub repos: usize,
    /// Median attempt duration, seconds.
    pub median_duration_s: f64,
    /// Capacity.
    pub caps: ReplayCaps,
    /// Generator seed.
    pub seed: u64,
}

impl SyntheticShape {
    /// deepswe-like: the study's 500 tasks x 4 attempts and 40 repositories
    /// ([`model::study`]), ~60 requests each.
    pub fn deepswe() -> Self {
        let study = model::study::study(WorkloadId::Deepswe);
        SyntheticShape {
            workload: WorkloadId::Deepswe,
            tasks: study.tasks,
            attempts_per_task: study.attempts_per_task,
            requests_per_attempt: 60,
            repos: study.repos,
            median_duration_s: study.median_duration_s,
            caps: ReplayCaps::study(WorkloadId::Deepswe),
            seed: 7,
        }
    }

    /// tmax-like: the study's 253 included trials as single-attempt tasks
    /// ([`model::study`]), with three repositories whose quotas make both caps bind.
    pub fn tmax() -> Self {
        let study = model::study::study(WorkloadId::Tmax);
        SyntheticShape {
            workload: WorkloadId::Tmax,
            tasks: study.included,
            attempts_per_task: study.attempts_per_task,
            requests_per_attempt: 60,
            repos: 3,
            median_duration_s: study.median_duration_s,
            caps: ReplayCaps::study(WorkloadId::Tmax),
            seed: 11,
        }
    }
}

fn unit(r: &mut ChaCha8Rng) -> f64 {
    (r.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn normal(r: &mut ChaCha8Rng) -> f64 {
    let u1 = unit(r).max(1e-300);
    let u2 = unit(r);
    libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(std::f64::consts::TAU * u2)
}

/// Build the instance of a shape (same shape, same instance, on every machine).
pub fn synthetic_instance(shape: &SyntheticShape) -> Result<WorkloadInstance, InstanceError> {
    let mut r = ChaCha8Rng::seed_from_u64(shape.seed);
    let quotas = [(1.0, 4.0), (2.0, 8.0), (2.0, 12.0), (4.0, 16.0), (2.0, 6.0)];
    let repos = shape.repos.max(1);
    let mut blobs = vec![
        BlobInput {
            digest: "sha256:base-os".into(),
            compressed_bytes: 31_000_000,
        },
        BlobInput {
            digest: "sha256:base-runtime".into(),
            compressed_bytes: 333_000_000,
        },
    ];
    for k in 0..repos {
        blobs.push(BlobInput {
            digest: format!("sha256:repo-{k:03}-env"),
            compressed_bytes: 180_000_000 + (k as u64 * 97_000_000) % 1_300_000_000,
        });
    }
    let mut attempts = Vec::new();
    // Every shape's clock starts at the deepswe census's first attempt.
    let mut clock = model::study::study(WorkloadId::Deepswe).epoch_s as f64;
    for t in 0..shape.tasks {
        let repo = t % repos;
        let task_blob = blobs.len() as u32;
        blobs.push(BlobInput {
            digest: format!("sha256:task-{t:05}-layer"),
            compressed_bytes: 2_000_000 + (t as u64 * 13_700_000) % 60_000_000,
        });
        let (cores, mem) = quotas[(repo * 7 + 3) % quotas.len()];
        for k in 0..shape.attempts_per_task {
            let d =
                (shape.median_duration_s * libm::exp(0.55 * normal(&mut r))).clamp(150.0, 3600.0);
            let n = ((shape.requests_per_attempt as f64) * (0.5 + unit(&mut r)))
                .round()
                .max(1.0) as usize;
            let lead = 0.5 + 4.0 * unit(&mut r);
            let tail = 0.5 + 4.0 * unit(&mut r);
            let window = d - lead - tail;
            let weights: Vec<(f64, f64)> = (0..n)
                .map(|_| (0.2 + unit(&mut r) * 2.0, 0.3 + unit(&mut r) * 1.5))
                .collect();
            let total: f64 = weights.iter().map(|(a, b)| a + b).sum();
            let scale = window / total;
            let mut pos = lead;
            let mut requests = Vec::with_capacity(n);
            for (req, gap) in weights {
                let s = pos;
                let e = (s + req * scale).min(d);
                if e > s {
                    requests.push((s, e));
                }
                pos = e + gap * scale;
            }
            clock += 0.5 + 30.0 * unit(&mut r);
            attempts.push(AttemptInput {
                attempt_id: format!("{}-t{t:05}-a{k}", shape.workload),
                task_id: format!("task-{t:05}"),
                gen_start: clock,
                duration_s: d,
                requests,
                cores,
                mem_gib: mem,
                blobs: vec![0, 1, 2 + repo as u32, task_blob],
            });
        }
    }
    WorkloadInstance::new(shape.workload, shape.caps, attempts, blobs, None)
}
