//! The report: `report.md` and a self-contained `report.html` (SVG charts inline) built only
//! from the run directory's outputs, with no wall-clock times (it is re-derivable).

use anyhow::{Context, Result};
use model::LoadedConfig;
use model::run_dir::{FRAME_SCHEMA_VERSION, RunDir};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use polars::prelude::DataFrame;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// What the accounting model assumes; printed in every report.
pub const ASSUMPTIONS: &str = "Fixed trace model: every attempt keeps its recorded duration and its model-request intervals relative to its start; scheduling changes only admission. \
The baseline is an offline FIFO admission replay in historical start order with all attempts ready at time 0, not a measurement of the original cluster's wall-clock run. \
\"Ideal\" values assume zero cost to pause and resume sandboxes, offload and restore RAM, transfer model state, and evict and reload image blobs: CPU and RAM are counted only outside model requests, the GPUs only while some request is pending (all of them, as one group), and a blob only while an attempt using it runs. \
FIFO holding values hold CPU and RAM for whole attempts, the GPUs for the whole batch, and each blob from its first use to the batch end. \
Not counted: model-server and harness host CPU/RAM, GPU memory, expanded image layers, writable files, outputs, RAM-offload storage. \
Request time includes queueing, transport and server processing; it is not GPU kernel busy time. \
Lower bounds are bounds, not attained schedules, and different minima need not coexist; joint_schedules.csv lists values that do.";

/// A frame read from the run directory, with the path its errors name.
struct Frame {
    path: PathBuf,
    df: DataFrame,
}

impl Frame {
    /// String values (null as empty).
    fn strs(&self, c: &str) -> Result<Vec<String>> {
        Ok(frames::str_values(&self.df, &self.path, c)?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect())
    }
    fn opt_strs(&self, c: &str) -> Result<Vec<Option<String>>> {
        Ok(frames::str_values(&self.df, &self.path, c)?)
    }
    fn f64s(&self, c: &str) -> Result<Vec<Option<f64>>> {
        Ok(frames::f64_values(&self.df, &self.path, c)?)
    }
    fn u64s(&self, c: &str) -> Result<Vec<Option<u64>>> {
        Ok(frames::u64_values(&self.df, &self.path, c)?)
    }
}

fn read(run: &RunDir, name: &str) -> Result<Frame> {
    let path = run.file(&format!("{name}.parquet"));
    let df = frames::read_frame(&path, name, FRAME_SCHEMA_VERSION)?;
    Ok(Frame { path, df })
}

fn fmt_h(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into())
}

/// A blob's digest, its GiB and the segments of its lifetime union.
type BlobSegments = (String, f64, Vec<(f64, f64)>);

/// One schedule of one workload: attempt -> start seconds.
type Starts = BTreeMap<String, f64>;

struct RunData {
    ledger: Option<Frame>,
    audit: serde_json::Value,
    exclusions: Frame,
    bounds: Frame,
    schedules: Frame,
    trace: Frame,
    requests: Frame,
    blobs: Frame,
    attempt_blobs: Frame,
    pareto: Option<Frame>,
    /// joint_schedules.csv: its header and rows.
    joint: (Vec<String>, Vec<Vec<String>>),
}

/// Read a CSV with a header: its header and its rows (every row as long as the header).
fn read_csv(path: &std::path::Path) -> Result<(Vec<String>, Vec<Vec<String>>)> {
    let mut r =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let header: Vec<String> = r
        .headers()
        .with_context(|| format!("cannot read {}", path.display()))?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for record in r.records() {
        let record = record.with_context(|| format!("cannot read {}", path.display()))?;
        rows.push(record.iter().map(str::to_string).collect());
    }
    Ok((header, rows))
}

fn load(run: &RunDir) -> Result<RunData> {
    let audit_path = run.file("audit.json");
    let audit: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&audit_path)
            .with_context(|| format!("cannot read {}", audit_path.display()))?,
    )?;
    Ok(RunData {
        ledger: read(run, "ledger").ok(),
        audit,
        exclusions: read(run, "exclusions")?,
        bounds: read(run, "bounds")?,
        schedules: read(run, "schedules")?,
        trace: read(run, "search_trace")?,
        requests: read(run, "requests")?,
        blobs: read(run, "blobs")?,
        attempt_blobs: read(run, "attempt_blobs")?,
        pareto: read(run, "pareto").ok(),
        joint: read_csv(&run.file("joint_schedules.csv"))?,
    })
}

fn schedule_starts(
    d: &RunData,
    workload: &str,
    schedule: &str,
) -> Result<(Starts, BTreeMap<String, f64>)> {
    let w = d.schedules.strs("workload")?;
    let s = d.schedules.strs("schedule")?;
    let a = d.schedules.strs("attempt_id")?;
    let st = d.schedules.f64s("start_s")?;
    let en = d.schedules.f64s("end_s")?;
    let mut starts = BTreeMap::new();
    let mut ends = BTreeMap::new();
    for i in 0..w.len() {
        if w[i] == workload && s[i] == schedule {
            starts.insert(a[i].clone(), st[i].unwrap_or(0.0));
            ends.insert(a[i].clone(), en[i].unwrap_or(0.0));
        }
    }
    Ok((starts, ends))
}

fn svg_error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}

/// A chart drawn on an SVG string with f64 axes.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The frame of a chart: title, size, axis ranges and descriptions.
struct ChartFrame<'t> {
    title: &'t str,
    size: (u32, u32),
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    x_desc: &'t str,
    y_desc: &'t str,
    /// Horizontal grid lines (off for charts with one row per item).
    y_mesh: bool,
    /// Draw the legend of the labelled series.
    legend: bool,
}

/// Draw a chart: the shared frame, then `draw` puts the series on it.
fn draw_chart(f: ChartFrame, draw: impl FnOnce(&mut Chart) -> Result<()>) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, f.size).into_drawing_area();
        root.fill(&WHITE).map_err(svg_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(f.title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(f.x, f.y)
            .map_err(svg_error)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(f.x_desc).y_desc(f.y_desc);
        if !f.y_mesh {
            mesh.disable_y_mesh();
        }
        mesh.draw().map_err(svg_error)?;
        draw(&mut chart)?;
        if f.legend {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(svg_error)?;
        }
        root.present().map_err(svg_error)?;
    }
    Ok(svg)
}

/// Named lines with a legend.
fn draw_lines(chart: &mut Chart, lines: &[(String, Vec<(f64, f64)>)], width: u32) -> Result<()> {
    let colors = [RED, BLUE, GREEN, MAGENTA];
    for (i, (name, pts)) in lines.iter().enumerate() {
        let c = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(width)))
            .map_err(svg_error)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
    }
    Ok(())
}

/// Gantt chart: one bar per attempt (rows in FIFO start order).
fn gantt_svg(
    title: &str,
    fifo: &Starts,
    starts: &Starts,
    ends: &BTreeMap<String, f64>,
) -> Result<String> {
    let mut order: Vec<(&String, f64)> = fifo.iter().map(|(k, v)| (k, *v)).collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
    let n = order.len().max(1);
    let tmax = ends.values().copied().fold(1.0f64, f64::max) / 3600.0;
    let frame = ChartFrame {
        title,
        size: (900, 360),
        x: 0.0..tmax * 1.02,
        y: 0.0..n as f64,
        x_desc: "hours",
        y_desc: "attempt (FIFO order)",
        y_mesh: false,
        legend: false,
    };
    draw_chart(frame, |chart| {
        let bars = order.iter().enumerate().filter_map(|(i, (id, _))| {
            let s = starts.get(*id)? / 3600.0;
            let e = ends.get(*id)? / 3600.0;
            Some(Rectangle::new(
                [(s, i as f64), (e, i as f64 + 0.9)],
                BLUE.mix(0.6).filled(),
            ))
        });
        chart.draw_series(bars).map_err(svg_error)?;
        Ok(())
    })
}

/// Requests in flight over time (averaged per bin) for several schedules.
fn occupancy_svg(title: &str, series: &[(&str, Vec<(f64, f64)>)], horizon: f64) -> Result<String> {
    let bins = 400usize;
    let width = horizon.max(1.0) / bins as f64;
    let mut lines = Vec::new();
    let mut ymax = 1.0f64;
    for (name, ivs) in series {
        let mut acc = vec![0.0f64; bins];
        for (s, e) in ivs {
            let (mut a, b) = (*s, *e);
            while a < b {
                let k = ((a / width) as usize).min(bins - 1);
                let edge = ((k + 1) as f64 * width).min(b);
                let edge = if edge <= a { b } else { edge };
                acc[k] += edge - a;
                a = edge;
            }
        }
        let pts: Vec<(f64, f64)> = acc
            .iter()
            .enumerate()
            .map(|(k, v)| ((k as f64 + 0.5) * width / 3600.0, v / width))
            .collect();
        ymax = pts.iter().map(|p| p.1).fold(ymax, f64::max);
        lines.push((name.to_string(), pts));
    }
    let frame = ChartFrame {
        title,
        size: (900, 300),
        x: 0.0..horizon / 3600.0,
        y: 0.0..ymax * 1.05,
        x_desc: "hours",
        y_desc: "requests in flight",
        y_mesh: true,
        legend: true,
    };
    draw_chart(frame, |chart| draw_lines(chart, &lines, 1))
}

/// Lifetimes (union of attempt intervals) of the largest blobs under one schedule.
fn blob_lifetimes_svg(title: &str, rows: &[BlobSegments], horizon: f64) -> Result<String> {
    let n = rows.len().max(1);
    let frame = ChartFrame {
        title,
        size: (900, 40 + 14 * n as u32),
        x: 0.0..horizon / 3600.0,
        y: 0.0..n as f64,
        x_desc: "hours",
        y_desc: "blob (largest first)",
        y_mesh: false,
        legend: false,
    };
    draw_chart(frame, |chart| {
        for (i, (_, _, segs)) in rows.iter().enumerate() {
            chart
                .draw_series(segs.iter().map(|(s, e)| {
                    Rectangle::new(
                        [(s / 3600.0, i as f64 + 0.1), (e / 3600.0, i as f64 + 0.9)],
                        GREEN.mix(0.7).filled(),
                    )
                }))
                .map_err(svg_error)?;
        }
        Ok(())
    })
}

/// Best-so-far against candidates evaluated.
fn convergence_svg(title: &str, lines: &[(String, Vec<(f64, f64)>)]) -> Result<String> {
    let xmax = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let ymax = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .fold(1e-9, f64::max);
    let frame = ChartFrame {
        title,
        size: (900, 300),
        x: 0.0..xmax,
        y: 0.0..ymax * 1.05,
        x_desc: "candidates evaluated",
        y_desc: "best so far (hours)",
        y_mesh: true,
        legend: true,
    };
    draw_chart(frame, |chart| draw_lines(chart, lines, 2))
}

/// The Pareto front of (GPU, cache) ideal values.
fn pareto_svg(title: &str, pts: &[(f64, f64)]) -> Result<String> {
    let span = |f: fn(&(f64, f64)) -> f64| {
        let (lo, hi) = pts
            .iter()
            .map(f)
            .fold((f64::MAX, f64::MIN), |a, v| (a.0.min(v), a.1.max(v)));
        let (lo, hi) = if pts.is_empty() { (0.0, 1.0) } else { (lo, hi) };
        let pad = ((hi - lo).abs() * 0.05).max(1e-3);
        (lo - pad)..(hi + pad)
    };
    let frame = ChartFrame {
        title,
        size: (900, 300),
        x: span(|p| p.0),
        y: span(|p| p.1),
        x_desc: "GPU ideal (GPU-hours)",
        y_desc: "cache ideal (GiB-hours)",
        y_mesh: true,
        legend: false,
    };
    draw_chart(frame, |chart| {
        let mut line = pts.to_vec();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(line, BLUE.stroke_width(1)))
            .map_err(svg_error)?;
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, RED.filled())))
            .map_err(svg_error)?;
        Ok(())
    })
}

/// Absolute request intervals of a schedule (start + offsets).
fn shifted_requests(d: &RunData, workload: &str, starts: &Starts) -> Result<Vec<(f64, f64)>> {
    let w = d.requests.strs("workload")?;
    let a = d.requests.strs("attempt_id")?;
    let s = d.requests.f64s("start_offset_s")?;
    let e = d.requests.f64s("end_offset_s")?;
    Ok((0..w.len())
        .filter(|&i| w[i] == workload)
        .filter_map(|i| {
            let st = starts.get(&a[i])?;
            Some((st + s[i]?, st + e[i]?))
        })
        .collect())
}

fn blob_rows(
    d: &RunData,
    workload: &str,
    starts: &Starts,
    ends: &BTreeMap<String, f64>,
) -> Result<Vec<BlobSegments>> {
    let digests = d.blobs.strs("digest")?;
    let gib = d.blobs.f64s("compressed_gib")?;
    let size: BTreeMap<&str, f64> = digests
        .iter()
        .zip(gib.iter())
        .map(|(k, v)| (k.as_str(), v.unwrap_or(0.0)))
        .collect();
    let w = d.attempt_blobs.strs("workload")?;
    let a = d.attempt_blobs.strs("attempt_id")?;
    let g = d.attempt_blobs.strs("digest")?;
    let mut by_blob: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for i in 0..w.len() {
        if w[i] != workload {
            continue;
        }
        if let (Some(s), Some(e)) = (starts.get(&a[i]), ends.get(&a[i])) {
            by_blob.entry(g[i].clone()).or_default().push((*s, *e));
        }
    }
    let mut rows: Vec<BlobSegments> = by_blob
        .into_iter()
        .map(|(dg, mut iv)| {
            iv.sort_by(|x, y| x.0.total_cmp(&y.0));
            let mut segs: Vec<(f64, f64)> = Vec::new();
            for (s, e) in iv {
                match segs.last_mut() {
                    Some(l) if s <= l.1 => l.1 = l.1.max(e),
                    _ => segs.push((s, e)),
                }
            }
            let gib = size.get(dg.as_str()).copied().unwrap_or(0.0);
            (dg, gib, segs)
        })
        .collect();
    rows.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    rows.truncate(25);
    Ok(rows)
}

/// Write `report.md` and `report.html` into the run directory; returns the HTML path.
pub fn write_report(cfg: &LoadedConfig) -> Result<PathBuf> {
    let run = RunDir::new(&cfg.run_dir);
    let d = load(&run)?;
    let mut md = String::new();
    let mut html_body = String::new();
    let _ = writeln!(md, "# Provenance, audit and replay report\n");
    let _ = writeln!(
        md,
        "Config SHA256 `{}`; seed {}; RNG order {:?}; tool {}.\n",
        cfg.sha256,
        cfg.config.search.seed,
        cfg.config
            .search
            .order
            .iter()
            .map(|w| w.as_str())
            .collect::<Vec<_>>(),
        model::TOOL_VERSION
    );
    // Ledger.
    let _ = writeln!(md, "## Ingest ledger\n");
    match &d.ledger {
        Some(l) => {
            let ids = l.strs("archive_id")?;
            let kinds = l.strs("location_kind")?;
            let verdicts = l.strs("verdict")?;
            let mut by: BTreeMap<(String, String), usize> = BTreeMap::new();
            for i in 0..ids.len() {
                *by.entry((kinds[i].clone(), verdicts[i].clone()))
                    .or_default() += 1;
            }
            let archives: std::collections::BTreeSet<&String> = ids.iter().collect();
            let total: u64 = cfg.archives.iter().map(|a| a.bytes).sum();
            let _ = writeln!(
                md,
                "{} archives, {} bytes, {} (archive, location) rows.\n\n| location | verdict | rows |\n|---|---|---|",
                archives.len(),
                total,
                ids.len()
            );
            for ((k, v), n) in &by {
                let _ = writeln!(md, "| {k} | {v} | {n} |");
            }
            md.push('\n');
        }
        None => {
            let _ = writeln!(md, "No ledger in this run directory.\n");
        }
    }
    // Cohort audit.
    let _ = writeln!(md, "## Cohort audit\n");
    let _ = writeln!(
        md,
        "| workload | audited | included | excluded | pilot | flagged | pass |\n|---|---|---|---|---|---|---|"
    );
    let ws = d.audit["workloads"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (w, s) in &ws {
        let _ = writeln!(
            md,
            "| {w} | {} | {} | {} | {} | {} | {} |",
            s["audited"],
            s["included"],
            s["excluded"],
            s["pilot"],
            s["flagged"].as_object().map(|m| m.len()).unwrap_or(0),
            s["pass"]
        );
    }
    md.push('\n');
    let ex_w = d.exclusions.strs("workload")?;
    let ex_a = d.exclusions.strs("attempt_id")?;
    let ex_r = d.exclusions.strs("reason")?;
    let ex_d = d.exclusions.strs("detail")?;
    let _ = writeln!(
        md,
        "### Excluded attempts (pilot attempts counted, not listed)\n\n| workload | attempt | reason | detail |\n|---|---|---|---|"
    );
    let mut pilots = 0;
    for i in 0..ex_w.len() {
        if ex_r[i] == "superseded_by_census" {
            pilots += 1;
            continue;
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            ex_w[i],
            ex_a[i],
            ex_r[i],
            ex_d[i].replace('|', "/")
        );
    }
    let _ = writeln!(
        md,
        "\n{pilots} pilot attempts superseded by the census.\n\n### Flagged (kept in the cohort)\n"
    );
    for (w, s) in &ws {
        if let Some(f) = s["flagged"].as_object() {
            for (id, why) in f {
                let _ = writeln!(md, "- {w} `{id}`: {}", why.as_str().unwrap_or(""));
            }
        }
    }
    let _ = writeln!(
        md,
        "\n## Clipping summary\n\n| workload | reason | rows | seconds removed |\n|---|---|---|---|"
    );
    for (w, s) in &ws {
        if let Some(c) = s["clipping"].as_object() {
            for (reason, v) in c {
                let _ = writeln!(
                    md,
                    "| {w} | {reason} | {} | {:.3} |",
                    v["rows"],
                    v["seconds_removed"].as_f64().unwrap_or(0.0)
                );
            }
        }
    }
    // Bounds.
    let _ = writeln!(
        md,
        "\n## Resource-hours\n\nHours: core-hours (CPU), GiB-hours (RAM, cache), GPU-hours. `lower bound` and `gap %` are SPEC 2.3's; `best valid bound` is the strongest bound of docs/BOUNDS.md (the LP bounds included), and `certified gap %` says how far the best found can be from optimal. `seed profile best` is what the study's method finds (the seed profile of docs/REPLAY.md, run as the default search's first phase), beside this project's `best found`. `LP bound` is the certified value of the HiGHS LP (GPU configuration LP, cache fluid LP) with how it ended: converged, budget exhausted (still valid, only weaker) or skipped.\n\n| workload | resource | FIFO holding | FIFO ideal | seed profile best | best found | lower bound | gap % | best valid bound | certified gap % | LP bound |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let bw = d.bounds.strs("workload")?;
    let br = d.bounds.strs("resource")?;
    let (lb, fh, fi, bf, gp) = (
        d.bounds.f64s("lower_bound_h")?,
        d.bounds.f64s("fifo_holding_h")?,
        d.bounds.f64s("fifo_ideal_h")?,
        d.bounds.f64s("best_found_h")?,
        d.bounds.f64s("gap_pct")?,
    );
    let (vb, cg, lpb) = (
        d.bounds.f64s("best_bound_h")?,
        d.bounds.f64s("certified_gap_pct")?,
        d.bounds.f64s("lp_bound_h")?,
    );
    let lps = d.bounds.opt_strs("lp_status")?;
    // Absent in runs written before the seed profile existed: shown as "-".
    let seed_best = d
        .bounds
        .f64s("seed_profile_best_h")
        .unwrap_or_else(|_| vec![None; bw.len()]);
    for i in 0..bw.len() {
        let lp = match (lpb[i], lps[i].as_deref()) {
            (Some(v), Some(status)) => format!("{} ({})", fmt_h(Some(v)), status.replace('_', " ")),
            (None, Some(status)) => status.replace('_', " "),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            bw[i],
            br[i],
            fmt_h(fh[i]),
            fmt_h(fi[i]),
            fmt_h(seed_best[i]),
            fmt_h(bf[i]),
            fmt_h(lb[i]),
            gp[i]
                .map(|g| format!("{g:.2}"))
                .unwrap_or_else(|| "-".into()),
            fmt_h(vb[i]),
            cg[i]
                .map(|g| format!("{g:.2}"))
                .unwrap_or_else(|| "-".into()),
            lp
        );
    }
    // Selected schedules: the values that coexist in one schedule, and the deadline.
    let (header, rows) = &d.joint;
    let col = |name: &str| -> Result<usize> {
        header
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("joint_schedules.csv has no `{name}` column"))
    };
    let cols = [
        "workload",
        "schedule",
        "makespan_s",
        "deadline_s",
        "cpu_ideal_h",
        "ram_ideal_h",
        "gpu_ideal_h",
        "cache_ideal_h",
        "validated",
    ]
    .iter()
    .map(|n| col(n))
    .collect::<Result<Vec<usize>>>()?;
    let _ = writeln!(
        md,
        "\n## Selected schedules\n\nEach row is one schedule and the ideal values it has at once (joint_schedules.csv); `D` is the deadline, the FIFO makespan. Every selected schedule is checked by the independent validator.\n\n| workload | schedule | makespan (s) | D (s) | CPU | RAM | GPU | cache | validated |\n|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let mut cells = Vec::with_capacity(cols.len());
        for (k, c) in cols.iter().enumerate() {
            let v = &r[*c];
            cells.push(match k {
                2 | 3 => v.parse::<f64>().map_or(v.clone(), |x| format!("{x:.1}")),
                4..=7 => v.parse::<f64>().map_or(v.clone(), |x| fmt_h(Some(x))),
                _ => v.clone(),
            });
        }
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    let _ = writeln!(
        md,
        "\n## Assumptions of the accounting model\n\n{ASSUMPTIONS}\n"
    );
    // Charts.
    let mut charts: Vec<(String, String)> = Vec::new();
    let mut workloads: Vec<String> = bw.clone();
    workloads.dedup();
    for w in &workloads {
        let (fifo, fifo_end) = schedule_starts(&d, w, "fifo")?;
        let (gpu, gpu_end) = schedule_starts(&d, w, "best_gpu")?;
        let (cache, cache_end) = schedule_starts(&d, w, "best_cache")?;
        if fifo.is_empty() {
            continue;
        }
        let horizon = fifo_end.values().copied().fold(1.0, f64::max);
        charts.push((
            format!("{w}: Gantt of the FIFO schedule"),
            gantt_svg(&format!("{w}: FIFO"), &fifo, &fifo, &fifo_end)?,
        ));
        charts.push((
            format!("{w}: Gantt of the best-GPU schedule"),
            gantt_svg(&format!("{w}: best GPU"), &fifo, &gpu, &gpu_end)?,
        ));
        let series = vec![
            ("FIFO", shifted_requests(&d, w, &fifo)?),
            ("best GPU", shifted_requests(&d, w, &gpu)?),
        ];
        charts.push((
            format!("{w}: GPU request occupancy"),
            occupancy_svg(&format!("{w}: model requests in flight"), &series, horizon)?,
        ));
        let rows = blob_rows(&d, w, &cache, &cache_end)?;
        charts.push((
            format!("{w}: cache blob lifetimes (best-cache schedule, 25 largest blobs)"),
            blob_lifetimes_svg(&format!("{w}: blob lifetimes, best cache"), &rows, horizon)?,
        ));
        let tw = d.trace.strs("workload")?;
        let to = d.trace.strs("objective")?;
        let tc = d.trace.u64s("candidates_evaluated")?;
        let tb = d.trace.f64s("best_so_far_h")?;
        let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for i in 0..tw.len() {
            if &tw[i] == w && (to[i] == "gpu" || to[i] == "cache") {
                lines
                    .entry(to[i].clone())
                    .or_default()
                    .push((tc[i].unwrap_or(0) as f64, tb[i].unwrap_or(0.0)));
            }
        }
        let lines: Vec<(String, Vec<(f64, f64)>)> = lines.into_iter().collect();
        charts.push((
            format!("{w}: search convergence"),
            convergence_svg(&format!("{w}: best so far"), &lines)?,
        ));
        if let Some(p) = &d.pareto {
            let pw = p.strs("workload")?;
            let pg = p.f64s("gpu_ideal_h")?;
            let pc = p.f64s("cache_ideal_h")?;
            let pts: Vec<(f64, f64)> = (0..pw.len())
                .filter(|&i| &pw[i] == w)
                .filter_map(|i| Some((pg[i]?, pc[i]?)))
                .collect();
            charts.push((
                format!("{w}: Pareto front of GPU vs cache"),
                pareto_svg(&format!("{w}: Pareto front (validated schedules)"), &pts)?,
            ));
        }
    }
    let _ = writeln!(md, "## Charts\n\nThe charts are in report.html:\n");
    for (t, _) in &charts {
        let _ = writeln!(md, "- {t}");
    }
    for (t, svg) in &charts {
        let _ = writeln!(
            html_body,
            "<figure><figcaption>{}</figcaption>{}</figure>",
            esc(t),
            svg
        );
    }
    let md_path = run.file("report.md");
    frames::atomic_write(&md_path, md.as_bytes())?;
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>agentrace report</title>\n<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto;padding:0 1em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}td:first-child,th:first-child{{text-align:left}}pre{{white-space:pre-wrap}}figure{{margin:1em 0}}</style></head><body>\n{}\n{}</body></html>\n",
        md_to_html(&md),
        html_body
    );
    let html_path = run.file("report.html");
    frames::atomic_write(&html_path, html.as_bytes())?;
    Ok(html_path)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A small Markdown-to-HTML rendering of the report's own Markdown (headings, tables, lists,
/// paragraphs, inline code).
fn md_to_html(md: &str) -> String {
    let mut out = String::new();
    let mut in_table = false;
    let mut in_list = false;
    for line in md.lines() {
        let inline = |s: &str| {
            let e = esc(s);
            let mut r = String::new();
            for (i, part) in e.split('`').enumerate() {
                if i % 2 == 1 {
                    let _ = write!(r, "<code>{part}</code>");
                } else {
                    r.push_str(part);
                }
            }
            r
        };
        if line.starts_with('|') {
            if line.starts_with("|---") {
                continue;
            }
            if !in_table {
                out.push_str("<table>\n");
                in_table = true;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
            out.push_str("<tr>");
            for c in cells {
                let _ = write!(out, "<td>{}</td>", inline(c.trim()));
            }
            out.push_str("</tr>\n");
            continue;
        } else if in_table {
            out.push_str("</table>\n");
            in_table = false;
        }
        if let Some(item) = line.strip_prefix("- ") {
            if !in_list {
                out.push_str("<ul>\n");
                in_list = true;
            }
            let _ = writeln!(out, "<li>{}</li>", inline(item));
            continue;
        } else if in_list {
            out.push_str("</ul>\n");
            in_list = false;
        }
        if let Some(h) = line.strip_prefix("### ") {
            let _ = writeln!(out, "<h3>{}</h3>", inline(h));
        } else if let Some(h) = line.strip_prefix("## ") {
            let _ = writeln!(out, "<h2>{}</h2>", inline(h));
        } else if let Some(h) = line.strip_prefix("# ") {
            let _ = writeln!(out, "<h1>{}</h1>", inline(h));
        } else if !line.trim().is_empty() {
            let _ = writeln!(out, "<p>{}</p>", inline(line));
        }
    }
    if in_table {
        out.push_str("</table>\n");
    }
    if in_list {
        out.push_str("</ul>\n");
    }
    out
}
