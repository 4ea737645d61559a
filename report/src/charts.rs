//! The plotters SVG charts: Gantt, request occupancy, blob lifetimes, search convergence and
//! the Pareto front, six per workload.
//!
//! Titles and legend labels go to plotters unescaped: its SVG backend escapes every text and
//! attribute value itself (`&`, `<`, `>`, `"`, `'`), so escaping here would double it.

use crate::ReportError;
use crate::data::{BlobSegments, Line, RunData, Times};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// One chart of the report: its caption (plain text, escaped where it is written) and SVG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Figure {
    /// The caption, e.g. `tmax: Gantt of the FIFO schedule`.
    pub(crate) caption: String,
    /// The chart, a complete `<svg>` element.
    pub(crate) svg: String,
}

/// Every chart, workload by workload (those of `bounds.parquet`, in its order); a workload
/// without a FIFO schedule has none. `search` names the search that ran (profile and
/// effort), for the convergence chart's caption.
pub(crate) fn figures(d: &RunData, search: &str) -> Result<Vec<Figure>, ReportError> {
    let mut out = Vec::new();
    for w in d.chart_workloads()? {
        let (fifo, fifo_end) = d.schedule_times(&w, "fifo")?;
        let (gpu, gpu_end) = d.schedule_times(&w, "best_gpu")?;
        let (cache, cache_end) = d.schedule_times(&w, "best_cache")?;
        if fifo.is_empty() {
            continue;
        }
        let horizon = fifo_end.values().copied().fold(1.0, f64::max);
        let mut push = |caption: String, svg: String| out.push(Figure { caption, svg });
        push(
            format!("{w}: Gantt of the FIFO schedule"),
            gantt_svg(&format!("{w}: FIFO"), &fifo, &fifo, &fifo_end)?,
        );
        push(
            format!("{w}: Gantt of the best-GPU schedule"),
            gantt_svg(&format!("{w}: best GPU"), &fifo, &gpu, &gpu_end)?,
        );
        let series = [
            ("FIFO", d.shifted_requests(&w, &fifo)?),
            ("best GPU", d.shifted_requests(&w, &gpu)?),
        ];
        push(
            format!("{w}: GPU request occupancy"),
            occupancy_svg(&format!("{w}: model requests in flight"), &series, horizon)?,
        );
        let rows = d.blob_rows(&w, &cache, &cache_end)?;
        push(
            format!("{w}: cache blob lifetimes (best-cache schedule, 25 largest blobs)"),
            blob_lifetimes_svg(&format!("{w}: blob lifetimes, best cache"), &rows, horizon)?,
        );
        push(
            format!("{w}: search convergence ({search}): best so far against candidates evaluated"),
            convergence_svg(&format!("{w}: best so far"), &d.convergence(&w)?)?,
        );
        if let Some(pts) = d.pareto_points(&w)? {
            push(
                format!("{w}: Pareto front of GPU vs cache"),
                pareto_svg(&format!("{w}: Pareto front (validated schedules)"), &pts)?,
            );
        }
    }
    Ok(out)
}

/// A chart drawn on an SVG string with f64 axes.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What drawing on the SVG backend can fail with.
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

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

/// Draw a chart: the shared frame, then `draw` puts the series on it. An error names the
/// chart's title.
fn draw_chart(
    f: ChartFrame,
    draw: impl FnOnce(&mut Chart) -> DrawResult,
) -> Result<String, ReportError> {
    let title = f.title;
    let mut svg = String::new();
    let drawn = (|| -> DrawResult {
        let root = SVGBackend::with_string(&mut svg, f.size).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(f.title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(f.x, f.y)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(f.x_desc).y_desc(f.y_desc);
        if !f.y_mesh {
            mesh.disable_y_mesh();
        }
        mesh.draw()?;
        draw(&mut chart)?;
        if f.legend {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
        root.present()
    })();
    drawn.map_err(|e| ReportError::Chart {
        chart: title.to_string(),
        message: e.to_string(),
    })?;
    Ok(svg)
}

/// Named lines with a legend.
fn draw_lines(chart: &mut Chart, lines: &[Line], width: u32) -> DrawResult {
    let colors = [RED, BLUE, GREEN, MAGENTA];
    for (i, (name, pts)) in lines.iter().enumerate() {
        let c = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(width)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
    }
    Ok(())
}

/// Gantt chart: one bar per attempt (rows in FIFO start order).
fn gantt_svg(
    title: &str,
    fifo: &Times,
    starts: &Times,
    ends: &Times,
) -> Result<String, ReportError> {
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
        chart.draw_series(bars)?;
        Ok(())
    })
}

/// Requests in flight over time (averaged per bin) for several schedules.
fn occupancy_svg(
    title: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    horizon: f64,
) -> Result<String, ReportError> {
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
fn blob_lifetimes_svg(
    title: &str,
    rows: &[BlobSegments],
    horizon: f64,
) -> Result<String, ReportError> {
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
            chart.draw_series(segs.iter().map(|(s, e)| {
                Rectangle::new(
                    [(s / 3600.0, i as f64 + 0.1), (e / 3600.0, i as f64 + 0.9)],
                    GREEN.mix(0.7).filled(),
                )
            }))?;
        }
        Ok(())
    })
}

/// Best-so-far against candidates evaluated.
fn convergence_svg(title: &str, lines: &[Line]) -> Result<String, ReportError> {
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
fn pareto_svg(title: &str, pts: &[(f64, f64)]) -> Result<String, ReportError> {
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
        chart.draw_series(LineSeries::new(line, BLUE.stroke_width(1)))?;
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, RED.filled())))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// plotters' SVG backend escapes the title itself: a hostile title appears once,
    /// escaped once (no raw markup, no `&amp;lt;`).
    #[test]
    fn chart_titles_are_escaped_once_by_plotters() {
        let svg = pareto_svg("a<script>\"'&b", &[(1.0, 2.0), (2.0, 1.0)]).unwrap();
        assert!(!svg.contains("<script"), "{svg}");
        assert!(svg.contains("a&lt;script&gt;&quot;&apos;&amp;b"), "{svg}");
        assert!(!svg.contains("&amp;lt;"), "{svg}");
    }
}
