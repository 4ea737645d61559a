//! Helpers shared by the integration tests: hand-built instances and audit frames written
//! into a temporary run directory with a pipeline.yaml that points at it.

#![allow(dead_code)]

use model::WorkloadId;
use polars::prelude::*;
use schedule::WorkloadInstance;
// Not every test binary uses every helper.
#[allow(unused_imports)]
pub(crate) use schedule::hand::{assert_close, attempt, blob, caps, instance};
use std::path::{Path, PathBuf};

/// Write the four audit frames for `instances` (plus one excluded attempt per workload,
/// which the replay must ignore) into `run_dir`.
pub(crate) fn write_audit_frames(run_dir: &Path, instances: &[WorkloadInstance]) {
    write_audit_frames_with(run_dir, instances, false, &[]);
}

/// As [`write_audit_frames`]; the frames named in `trace_in` (of attempts, requests,
/// attempt_blobs) also carry the audit's trace columns (`archive_sha256`, `member_prefix`),
/// and with `pilot_twins` each workload's first attempt has an excluded pilot twin with the
/// same id in another member prefix, with a request and a 1 GiB blob of its own (the audit
/// allows a pilot and a census attempt to share an id).
pub(crate) fn write_audit_frames_with(
    run_dir: &Path,
    instances: &[WorkloadInstance],
    pilot_twins: bool,
    trace_in: &[&str],
) {
    std::fs::create_dir_all(run_dir).unwrap();
    let v = model::run_dir::FRAME_SCHEMA_VERSION;
    let mut rows = AuditRows::default();
    for inst in instances {
        let w = inst.workload.as_str();
        let origin = |prefix: String| (format!("sha-{w}"), prefix);
        for a in &inst.attempts {
            let o = origin(format!("{w}/{}/", a.attempt_id));
            let (task, id) = (&a.task_id, &a.attempt_id);
            let quota = (a.cores, a.mem_gib);
            rows.attempt(
                w,
                task,
                id,
                (a.gen_start, Some(a.duration_s)),
                a.request_seconds(),
                quota,
                true,
                &o,
            );
            for &r in &a.requests {
                rows.request(w, id, r, &o);
            }
            for &b in &a.blobs {
                let blob = &inst.blobs[b as usize];
                rows.blob(w, id, &blob.digest, blob.compressed_bytes, &o);
            }
        }
        if pilot_twins && let Some(a) = inst.attempts.first() {
            let o = origin(format!("{w}/pilot/{}/", a.attempt_id));
            let (task, id) = (&a.task_id, &a.attempt_id);
            let quota = (a.cores, a.mem_gib);
            rows.attempt(
                w,
                task,
                id,
                (a.gen_start, Some(a.duration_s)),
                0.5,
                quota,
                false,
                &o,
            );
            rows.request(w, id, (0.0, 0.5), &o);
            rows.blob(w, id, "sha256:pilot-twin", 1 << 30, &o);
        }
        // An excluded attempt with a huge quota: it must not be replayed.
        let o = origin(format!("{w}/excluded/"));
        let id = format!("{w}-excluded");
        rows.attempt(
            w,
            "excluded-task",
            &id,
            (0.0, None),
            1.0,
            (1e6, 1e6),
            false,
            &o,
        );
        rows.request(w, &id, (0.0, 1.0), &o);
    }
    let r = &rows;
    let mut attempts = df!(
        "workload" => r.a.iter().map(|x| x.workload.clone()).collect::<Vec<_>>(),
        "task_id" => r.a.iter().map(|x| x.task_id.clone()).collect::<Vec<_>>(),
        "attempt_id" => r.a.iter().map(|x| x.attempt_id.clone()).collect::<Vec<_>>(),
        "gen_start" => r.a.iter().map(|x| x.gen_start).collect::<Vec<_>>(),
        "duration_s" => r.a.iter().map(|x| x.duration_s).collect::<Vec<_>>(),
        "request_s" => r.a.iter().map(|x| x.request_s).collect::<Vec<_>>(),
        "quota_cores" => r.a.iter().map(|x| x.quota.0).collect::<Vec<_>>(),
        "quota_gib" => r.a.iter().map(|x| x.quota.1).collect::<Vec<_>>(),
        "included" => r.a.iter().map(|x| x.included).collect::<Vec<_>>(),
    )
    .unwrap();
    let mut requests = df!(
        "workload" => r.r.iter().map(|x| x.0.clone()).collect::<Vec<_>>(),
        "attempt_id" => r.r.iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
        "start_offset_s" => r.r.iter().map(|x| x.2.0).collect::<Vec<_>>(),
        "end_offset_s" => r.r.iter().map(|x| x.2.1).collect::<Vec<_>>(),
    )
    .unwrap();
    let (digests, bytes): (Vec<String>, Vec<u64>) =
        r.sizes.iter().map(|(d, b)| (d.clone(), *b)).unzip();
    let mut blobs = df!("digest" => digests, "compressed_bytes" => bytes).unwrap();
    let mut attempt_blobs = df!(
        "workload" => r.b.iter().map(|x| x.0.clone()).collect::<Vec<_>>(),
        "attempt_id" => r.b.iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
        "digest" => r.b.iter().map(|x| x.2.clone()).collect::<Vec<_>>(),
    )
    .unwrap();
    let origins = [
        r.a.iter().map(|x| x.origin.clone()).collect::<Vec<_>>(),
        r.r.iter().map(|x| x.3.clone()).collect(),
        r.b.iter().map(|x| x.3.clone()).collect(),
    ];
    for ((name, df), origin) in [
        ("attempts", &mut attempts),
        ("requests", &mut requests),
        ("attempt_blobs", &mut attempt_blobs),
    ]
    .into_iter()
    .zip(origins)
    {
        if trace_in.contains(&name) {
            let (sha, prefix): (Vec<String>, Vec<String>) = origin.into_iter().unzip();
            df.with_column(Column::new("archive_sha256".into(), sha))
                .unwrap();
            df.with_column(Column::new("member_prefix".into(), prefix))
                .unwrap();
        }
    }
    for (name, df) in [
        ("attempts", &mut attempts),
        ("requests", &mut requests),
        ("blobs", &mut blobs),
        ("attempt_blobs", &mut attempt_blobs),
    ] {
        frames::write_frame(
            &run_dir.join(format!("{name}.parquet")),
            df,
            &frames::FrameMeta::new(name, v),
        )
        .unwrap();
    }
}

/// A row's (archive_sha256, member_prefix).
type Origin = (String, String);

/// One row of the attempts frame, as [`write_audit_frames_with`] writes it.
struct AttemptRow {
    workload: String,
    task_id: String,
    attempt_id: String,
    gen_start: f64,
    duration_s: Option<f64>,
    request_s: f64,
    quota: (f64, f64),
    included: bool,
    origin: Origin,
}

/// The rows of the audit frames, with each row's origin (the trace columns).
#[derive(Default)]
struct AuditRows {
    a: Vec<AttemptRow>,
    /// (workload, attempt_id, (start, end) offsets, origin)
    r: Vec<(String, String, (f64, f64), Origin)>,
    /// (workload, attempt_id, digest, origin)
    b: Vec<(String, String, String, Origin)>,
    /// digest -> compressed bytes
    sizes: std::collections::BTreeMap<String, u64>,
}

impl AuditRows {
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        &mut self,
        w: &str,
        task: &str,
        id: &str,
        (gen_start, duration_s): (f64, Option<f64>),
        request_s: f64,
        quota: (f64, f64),
        included: bool,
        origin: &Origin,
    ) {
        self.a.push(AttemptRow {
            workload: w.into(),
            task_id: task.into(),
            attempt_id: id.into(),
            gen_start,
            duration_s,
            request_s,
            quota,
            included,
            origin: origin.clone(),
        });
    }

    fn request(&mut self, w: &str, id: &str, offsets: (f64, f64), origin: &Origin) {
        self.r.push((w.into(), id.into(), offsets, origin.clone()));
    }

    fn blob(&mut self, w: &str, id: &str, digest: &str, bytes: u64, origin: &Origin) {
        self.b
            .push((w.into(), id.into(), digest.into(), origin.clone()));
        self.sizes.insert(digest.into(), bytes);
    }
}

/// Write a pipeline.yaml (and a one-archive-per-workload manifest) in `dir` whose run_dir
/// is `dir/run`; returns the yaml path.
pub(crate) fn write_config(
    dir: &Path,
    instances: &[WorkloadInstance],
    order: &[WorkloadId],
    seed: u64,
    budget_yaml: &str,
) -> PathBuf {
    let mut manifest = String::from(
        "archive_id,workload,sha256,bytes,gcs_bucket,gcs_object,gcs_generation,hf_repo,hf_revision,hf_shard,hf_member,file_path\n",
    );
    let mut workloads = String::new();
    for inst in instances {
        let w = inst.workload.as_str();
        manifest.push_str(&format!(
            "arc-{w},{w},{},10,,,,,,,,archives/{w}.tar.gz\n",
            "ab".repeat(32)
        ));
        let c = inst.caps;
        workloads.push_str(&format!(
            "  {w}:\n    expect: {{ audited: {n}, included: {n} }}\n    replay: {{ concurrency: {}, cpu_cores: {}, ram_gib: {}, gpus: {} }}\n",
            c.concurrency,
            c.cpu_cores,
            c.ram_gib,
            c.gpus,
            n = inst.attempts.len()
        ));
    }
    std::fs::write(dir.join("manifest.csv"), manifest).unwrap();
    let order: Vec<&str> = order.iter().map(|w| w.as_str()).collect();
    let yaml = format!(
        "version: 1\nrun_dir: run\nsources:\n  manifest: manifest.csv\n  locations: [file]\nworkloads:\n{workloads}search:\n  seed: {seed}\n  order: [{}]\n  budget: {budget_yaml}\n",
        order.join(", ")
    );
    let p = dir.join("pipeline.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}
