//! The report, looked at in headless Chromium: it renders offline, every chart is present,
//! and its tables carry the run's own figures.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    if let Ok(p) = std::env::var("CHROMIUM_BIN") {
        return PathBuf::from(p);
    }
    for c in [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ] {
        if Path::new(c).is_file() {
            return PathBuf::from(c);
        }
    }
    panic!(
        "Chromium not found: install Debian's `chromium` (scripts/test does) or set CHROMIUM_BIN"
    );
}

fn chrome(profile: &Path) -> Command {
    let mut c = Command::new(chromium());
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn report_renders_with_charts_and_figures() {
    let d = tempfile::tempdir().unwrap();
    common::run_quiet(&common::small_demo(d.path()));
    let report = d.path().join("run/report.html");
    let html = std::fs::read_to_string(&report).unwrap();
    for external in ["src=\"http", "href=\"http", "<script", "<link", "@import"] {
        assert!(
            !html.contains(external),
            "report must be self-contained: found {external}"
        );
    }
    // The run's figures are in the tables.
    let audit: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("run/audit.json")).unwrap())
            .unwrap();
    let md = std::fs::read_to_string(d.path().join("run/report.md")).unwrap();
    for w in ["tmax", "deepswe"] {
        let s = &audit["workloads"][w];
        let row = format!(
            "| {w} | {} | {} | {} | {} |",
            s["audited"], s["included"], s["excluded"], s["pilot"]
        );
        assert!(md.contains(&row), "missing cohort row {row}");
    }
    for section in [
        "## Ingest ledger",
        "## Cohort audit",
        "### Excluded attempts",
        "### Flagged",
        "## Clipping summary",
        "## Resource-hours",
        "## Selected schedules",
        "## Assumptions of the accounting model",
        "certified gap %",
        "seed profile best",
    ] {
        assert!(md.contains(section), "missing section {section}");
    }
    // One row per selected schedule, with its makespan and the deadline.
    let mut joint = csv::Reader::from_path(d.path().join("run/joint_schedules.csv")).unwrap();
    for f in joint.records() {
        let f = f.unwrap();
        let makespan: f64 = f[2].parse().unwrap();
        let deadline: f64 = f[3].parse().unwrap();
        let row = format!("| {} | {} | {makespan:.1} | {deadline:.1} |", &f[0], &f[1]);
        assert!(md.contains(&row), "missing selected-schedule row {row}");
    }
    let bounds = frames::read_frame(
        &d.path().join("run/bounds.parquet"),
        "bounds",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let best = bounds
        .column("best_found_h")
        .unwrap()
        .f64()
        .unwrap()
        .get(2)
        .unwrap();
    assert!(
        md.contains(&format!("{best:.3}")),
        "best GPU value {best:.3} not in the report"
    );

    let profile = tempfile::tempdir().unwrap();
    let png = d.path().join("report.png");
    let out = chrome(profile.path())
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1000,2400")
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    if let Ok(keep) = std::env::var("AGENTRACE_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    assert_eq!(&bytes[1..4], b"PNG");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((width, height), (1000, 2400));
    assert!(
        bytes.len() > 40_000,
        "screenshot looks empty ({} bytes)",
        bytes.len()
    );
    // The rendered DOM holds every chart.
    let dom = chrome(profile.path())
        .arg("--dump-dom")
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    let svgs = dom.matches("<svg").count();
    assert_eq!(svgs, 12, "two workloads x six charts");
    // Six tables (ledger, cohort, excluded, clipping, resource-hours, selected schedules),
    // each with its header row of `<th>` cells, and a stylesheet for print too.
    assert_eq!(dom.matches("<table>").count(), 6, "tables");
    assert_eq!(dom.matches("<thead><tr><th").count(), 6, "table headers");
    assert!(html.contains("@media print"), "no print stylesheet");
    for t in [
        "Gantt of the FIFO schedule",
        "Gantt of the best-GPU schedule",
        "GPU request occupancy",
        "cache blob lifetimes",
        "search convergence",
    ] {
        for w in ["tmax", "deepswe"] {
            let caption = format!("<figcaption>{w}: {t}");
            assert_eq!(dom.matches(&caption).count(), 1, "chart `{caption}`");
        }
    }
}
