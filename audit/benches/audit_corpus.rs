//! Benchmark: the whole audit of a demo corpus against `zstd -dc | tar -t` / `gzip -dc | tar -t`
//! over the same archives, in the same run. Run with
//! `cargo bench -p audit --bench audit_corpus -- [small|full|x10]`.

use std::process::Command;
use std::time::Instant;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|v| v.parse().unwrap_or(0)))
        })
        .unwrap_or(0)
}

fn main() {
    let scale = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "full".into());
    let scale = demo::Scale::parse(&scale).expect("scale: small, full or x10");
    let dir = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    demo::generate(dir.path(), scale, demo::DEFAULT_SEED).expect("demo corpus");
    let gen_s = t.elapsed().as_secs_f64();
    let cfg = model::load_config(&dir.path().join("pipeline.yaml")).expect("config");
    let run = model::run_dir::RunDir::new(&cfg.run_dir);
    std::fs::create_dir_all(run.store_dir()).expect("store");
    for a in &cfg.archives {
        std::fs::copy(
            &a.file.as_ref().expect("file").path,
            run.stored_archive(&a.sha256),
        )
        .expect("stage");
    }
    // Reference: decompress and list every archive with the command-line tools.
    let t = Instant::now();
    for a in &cfg.archives {
        let p = run.stored_archive(&a.sha256);
        let name = &a.file.as_ref().expect("file").relative;
        let tool = if name.ends_with(".gz") {
            "gzip"
        } else {
            "zstd"
        };
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("{tool} -dc '{}' | tar -t > /dev/null", p.display()))
            .status()
            .expect("sh");
        assert!(status.success(), "{tool} | tar failed");
    }
    let ref_s = t.elapsed().as_secs_f64();
    let rss_before = peak_rss_kib();
    let t = Instant::now();
    let report = audit::run(&cfg, &audit::AuditOptions::default()).expect("audit");
    let audit_s = t.elapsed().as_secs_f64();
    let unc: u64 = report
        .archives
        .iter()
        .map(|a| a.stats.uncompressed_bytes)
        .sum();
    let comp: u64 = report
        .archives
        .iter()
        .map(|a| a.stats.compressed_bytes)
        .sum();
    let members: u64 = report.archives.iter().map(|a| a.stats.members).sum();
    println!(
        "scale: {}  archives: {}  members: {members}",
        scale.as_str(),
        cfg.archives.len()
    );
    println!(
        "compressed: {:.1} MB  uncompressed: {:.1} MB",
        comp as f64 / 1e6,
        unc as f64 / 1e6
    );
    println!("corpus generation: {gen_s:.2} s");
    println!("reference (decompress + tar -t, sequential): {ref_s:.2} s");
    println!(
        "audit (parallel, all frames written): {audit_s:.2} s = {:.2}x reference, {:.1} MB/s uncompressed, {:.1} ms/archive",
        audit_s / ref_s,
        unc as f64 / 1e6 / audit_s,
        audit_s * 1e3 / cfg.archives.len() as f64
    );
    println!(
        "peak RSS: {} MiB (before audit: {} MiB)",
        peak_rss_kib() / 1024,
        rss_before / 1024
    );
}
