//! Helpers shared by the integration tests: hand-built instances and audit frames written
//! into a temporary run directory with a pipeline.yaml that points at it.

#![allow(dead_code)]

use model::WorkloadId;
use model::config::ReplayCaps;
use polars::prelude::*;
use replay::{AttemptInput, BlobInput, WorkloadInstance};
use std::path::{Path, PathBuf};

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

/// Write the four audit frames for `instances` (plus one excluded attempt per workload,
/// which the replay must ignore) into `run_dir`.
pub fn write_audit_frames(run_dir: &Path, instances: &[WorkloadInstance]) {
    write_audit_frames_with(run_dir, instances, false, &[]);
}

/// As [`write_audit_frames`]; the frames named in `trace_in` (of attempts, requests,
/// attempt_blobs) also carry the audit's trace columns (`archive_sha256`, `member_prefix`),
/// and with `pilot_twins` each workload's first attempt has an excluded pilot twin with the
/// same id in another member prefix, with a request and a 1 GiB blob of its own (the audit
/// allows a pilot and a census attempt to share an id).
pub fn write_audit_frames_with(
    run_dir: &Path,
    instances: &[WorkloadInstance],
    pilot_twins: bool,
    trace_in: &[&str],
) {
    std::fs::create_dir_all(run_dir).unwrap();
    let v = model::run_dir::FRAME_SCHEMA_VERSION;
    let (mut aw, mut at, mut ai, mut ags, mut ad, mut areq, mut ac, mut am, mut ainc) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    let (mut rw, mut ri, mut rs, mut re) = (vec![], vec![], vec![], vec![]);
    let (mut bw, mut bi, mut bd) = (vec![], vec![], vec![]);
    // Trace columns: (archive_sha256, member_prefix) per row of attempts, requests, blobs.
    let (mut a_tr, mut r_tr, mut b_tr): (Vec<(String, String)>, Vec<_>, Vec<_>) =
        (vec![], vec![], vec![]);
    let mut blob_rows: std::collections::BTreeMap<String, u64> = Default::default();
    for inst in instances {
        let w = inst.workload.as_str().to_string();
        let sha = format!("sha-{w}");
        for a in &inst.attempts {
            let tr = (sha.clone(), format!("{w}/{}/", a.attempt_id));
            a_tr.push(tr.clone());
            aw.push(w.clone());
            at.push(a.task_id.clone());
            ai.push(a.attempt_id.clone());
            ags.push(a.gen_start);
            ad.push(Some(a.duration_s));
            areq.push(a.request_seconds());
            ac.push(a.cores);
            am.push(a.mem_gib);
            ainc.push(true);
            for &(s, e) in &a.requests {
                r_tr.push(tr.clone());
                rw.push(w.clone());
                ri.push(a.attempt_id.clone());
                rs.push(s);
                re.push(e);
            }
            for &b in &a.blobs {
                let blob = &inst.blobs[b as usize];
                b_tr.push(tr.clone());
                bw.push(w.clone());
                bi.push(a.attempt_id.clone());
                bd.push(blob.digest.clone());
                blob_rows.insert(blob.digest.clone(), blob.compressed_bytes);
            }
        }
        if pilot_twins && let Some(a) = inst.attempts.first() {
            let tr = (sha.clone(), format!("{w}/pilot/{}/", a.attempt_id));
            a_tr.push(tr.clone());
            aw.push(w.clone());
            at.push(a.task_id.clone());
            ai.push(a.attempt_id.clone());
            ags.push(a.gen_start);
            ad.push(Some(a.duration_s));
            areq.push(0.5);
            ac.push(a.cores);
            am.push(a.mem_gib);
            ainc.push(false);
            r_tr.push(tr.clone());
            rw.push(w.clone());
            ri.push(a.attempt_id.clone());
            rs.push(0.0);
            re.push(0.5);
            b_tr.push(tr);
            bw.push(w.clone());
            bi.push(a.attempt_id.clone());
            bd.push("sha256:pilot-twin".to_string());
            blob_rows.insert("sha256:pilot-twin".into(), 1 << 30);
        }
        // An excluded attempt with a huge quota: it must not be replayed.
        a_tr.push((sha.clone(), format!("{w}/excluded/")));
        aw.push(w.clone());
        at.push("excluded-task".into());
        ai.push(format!("{w}-excluded"));
        ags.push(0.0);
        ad.push(None);
        areq.push(1.0);
        ac.push(1e6);
        am.push(1e6);
        ainc.push(false);
        r_tr.push((sha.clone(), format!("{w}/excluded/")));
        rw.push(w.clone());
        ri.push(format!("{w}-excluded"));
        rs.push(0.0);
        re.push(1.0);
    }
    let mut attempts = df!(
        "workload" => aw,
        "task_id" => at,
        "attempt_id" => ai,
        "gen_start" => ags,
        "duration_s" => ad,
        "request_s" => areq,
        "quota_cores" => ac,
        "quota_gib" => am,
        "included" => ainc,
    )
    .unwrap();
    let mut requests = df!(
        "workload" => rw,
        "attempt_id" => ri,
        "start_offset_s" => rs,
        "end_offset_s" => re,
    )
    .unwrap();
    let (digests, bytes): (Vec<String>, Vec<u64>) = blob_rows.into_iter().unzip();
    let mut blobs = df!("digest" => digests, "compressed_bytes" => bytes).unwrap();
    let mut attempt_blobs = df!("workload" => bw, "attempt_id" => bi, "digest" => bd).unwrap();
    for (name, df, tr) in [
        ("attempts", &mut attempts, &a_tr),
        ("requests", &mut requests, &r_tr),
        ("attempt_blobs", &mut attempt_blobs, &b_tr),
    ] {
        if trace_in.contains(&name) {
            let (sha, prefix): (Vec<String>, Vec<String>) = tr.iter().cloned().unzip();
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

/// Write a pipeline.yaml (and a one-archive-per-workload manifest) in `dir` whose run_dir
/// is `dir/run`; returns the yaml path.
pub fn write_config(
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
