//! `pipeline diff RUN_A RUN_B`: what differs between two finished runs, at the level a
//! reviewer reads: the build, the config key by key, the archives and their pins, every
//! audit frame row by row (keyed by attempt identity, with the changed columns and the
//! `audit show` command that explains the attempt), the cohort and clipping counts, every
//! replay figure with its delta, and every output file, identical ones listed as such.

use crate::provenance::{CONFIG_SNAPSHOT, Provenance, read_provenance};
use crate::stages::config_keys;
use anyhow::{Context, Result};
use frames::schema::FrameSpec;
use model::run_dir::{FRAME_SCHEMA_VERSION, RunDir};
use polars::prelude::{AnyValue, DataFrame};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Format version of `pipeline diff --json`.
pub const DIFF_FORMAT_VERSION: u32 = 1;

/// At most this many rows per frame are listed (the counts cover them all).
pub const ROWS_LISTED: usize = 50;

/// `pipeline diff --json` (schemas/diff.schema.json).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DiffDocument {
    /// [`DIFF_FORMAT_VERSION`].
    pub format_version: u32,
    /// The first run directory.
    pub run_a: String,
    /// The second run directory.
    pub run_b: String,
    /// No input, config or output differs (exit 0; otherwise 1). Another build alone is
    /// not a difference: its outputs are what is compared.
    pub equal: bool,
    /// The builds, when their executables differ.
    pub build: Option<BuildChange>,
    /// Config keys that differ (dotted paths; values as JSON, null when absent).
    pub config: Vec<ValueChange>,
    /// Archives only in one run, with other bytes, or with other pins.
    pub archives: Vec<ArchiveChange>,
    /// Per audit frame: row counts and the rows added, removed and changed.
    pub frames: Vec<FrameDiff>,
    /// Cohort and clipping counts per workload that differ.
    pub cohort: Vec<CountChange>,
    /// Every replay figure of both runs, changed or not.
    pub figures: Vec<FigureChange>,
    /// Every output file of either run: `identical`, `different`, `only_a` or `only_b`.
    pub files: Vec<FileCompare>,
}

/// Two builds.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BuildChange {
    /// The first run's build, described.
    pub a: String,
    /// The second run's.
    pub b: String,
}

/// A value in both runs (null where absent).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ValueChange {
    /// What it is.
    pub key: String,
    /// In the first run.
    pub a: Option<String>,
    /// In the second run.
    pub b: Option<String>,
}

/// An archive that differs.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ArchiveChange {
    /// Archive id.
    pub archive_id: String,
    /// `added` (only in the second run), `removed` (only in the first), `other_bytes`
    /// (SHA256 or size) or `other_pins` (its locations, generations or commits).
    pub change: String,
    /// The first run's `<sha256> <bytes>` and locations, in words.
    pub a: Option<String>,
    /// The second run's.
    pub b: Option<String>,
}

/// One audit frame compared.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FrameDiff {
    /// The frame's file.
    pub file: String,
    /// Its key columns (the attempt identity, then what tells its rows apart).
    pub key: Vec<String>,
    /// Rows in the first run.
    pub rows_a: usize,
    /// Rows in the second run.
    pub rows_b: usize,
    /// Rows only in the second run.
    pub added: usize,
    /// Rows only in the first run.
    pub removed: usize,
    /// Rows in both whose other columns differ.
    pub changed: usize,
    /// The first [`ROWS_LISTED`] of them, in key order.
    pub rows: Vec<RowChange>,
}

/// One row added, removed or changed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RowChange {
    /// `added`, `removed` or `changed`.
    pub change: String,
    /// The key columns' values.
    pub key: BTreeMap<String, String>,
    /// A changed row's columns that differ, with both values.
    pub columns: Vec<ValueChange>,
    /// The command that shows the attempt from its archive's bytes up, in the run that has it.
    pub audit_show: Option<String>,
}

/// A count of `audit.json` that differs.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CountChange {
    /// Workload.
    pub workload: String,
    /// `audited`, `included`, `pilot`, `excluded.<reason>`, `flagged`,
    /// `clipping.<reason>.rows`, `clipping.<reason>.seconds_removed`, ...
    pub count: String,
    /// In the first run.
    pub a: Option<f64>,
    /// In the second run.
    pub b: Option<f64>,
}

/// A replay figure in both runs.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FigureChange {
    /// Workload.
    pub workload: String,
    /// `fifo_ideal_h`, `best_found_h`, `best_bounds_h` or `certified_gap`.
    pub figure: String,
    /// `cpu`, `ram`, `gpu` or `cache`.
    pub resource: String,
    /// In the first run.
    pub a: Option<f64>,
    /// In the second run.
    pub b: Option<f64>,
    /// b - a.
    pub delta: Option<f64>,
    /// (b - a) / |a| (null when a is 0 or absent).
    pub relative_delta: Option<f64>,
    /// Whether the values differ.
    pub changed: bool,
}

/// One output file of either run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FileCompare {
    /// Path relative to the run directory.
    pub path: String,
    /// `identical`, `different`, `only_a` or `only_b`.
    pub status: String,
}

/// Everything one run offers the diff.
struct Side {
    dir: std::path::PathBuf,
    run: RunDir,
    prov: Provenance,
    config: BTreeMap<String, String>,
}

impl Side {
    fn open(dir: &Path) -> Result<Side> {
        let run = RunDir::new(dir);
        let prov = read_provenance(&run)?;
        let snapshot = run.file(CONFIG_SNAPSHOT);
        let text = std::fs::read_to_string(&snapshot)
            .with_context(|| format!("cannot read {}", snapshot.display()))?;
        Ok(Side {
            dir: dir.to_path_buf(),
            run,
            config: config_keys(&text),
            prov,
        })
    }
}

/// Compare two finished runs. An unreadable run (no provenance, an unreadable frame or
/// document) is an error.
pub fn diff(a: &Path, b: &Path) -> Result<DiffDocument> {
    let (sa, sb) = (Side::open(a)?, Side::open(b)?);
    let build =
        (sa.prov.build.executable_sha256 != sb.prov.build.executable_sha256).then(|| BuildChange {
            a: sa.prov.build.describe(),
            b: sb.prov.build.describe(),
        });
    let config = map_changes(&sa.config, &sb.config);
    let archives = archive_changes(&sa.prov, &sb.prov);
    let files = file_compares(&sa.prov, &sb.prov);
    let mut frames = Vec::new();
    for spec in audit::schema::AUDIT_FRAME_SPECS {
        frames.push(frame_diff(spec, &sa, &sb)?);
    }
    let cohort = cohort_changes(&sa.run, &sb.run)?;
    let figures = figure_changes(&sa.run, &sb.run)?;
    let equal = config.is_empty()
        && archives.is_empty()
        && files.iter().all(|f| f.status == "identical")
        && sa.prov.pipeline_yaml_sha256 == sb.prov.pipeline_yaml_sha256;
    Ok(DiffDocument {
        format_version: DIFF_FORMAT_VERSION,
        run_a: a.display().to_string(),
        run_b: b.display().to_string(),
        equal,
        build,
        config,
        archives,
        frames,
        cohort,
        figures,
        files,
    })
}

/// The keys whose values differ between two maps, in key order.
fn map_changes(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<ValueChange> {
    crate::stages::map_changes(a, b)
        .into_iter()
        .map(|(key, a, b)| ValueChange { key, a, b })
        .collect()
}

fn archive_changes(a: &Provenance, b: &Provenance) -> Vec<ArchiveChange> {
    let bytes = |x: &crate::provenance::ProvenanceArchive| format!("{} {}", x.sha256, x.bytes);
    let pins = |x: &crate::provenance::ProvenanceArchive| {
        x.locations
            .iter()
            .map(|l| {
                let mut s = format!("{} {}", l.location_kind, l.uri);
                if let Some(c) = &l.resolved_commit {
                    let _ = write!(s, " (commit {c})");
                }
                s
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let index = |p: &Provenance| -> BTreeMap<String, crate::provenance::ProvenanceArchive> {
        p.archives
            .iter()
            .map(|x| (x.archive_id.clone(), x.clone()))
            .collect()
    };
    let (ia, ib) = (index(a), index(b));
    let ids: BTreeSet<&String> = ia.keys().chain(ib.keys()).collect();
    let mut out = Vec::new();
    for id in ids {
        let (x, y) = (ia.get(id), ib.get(id));
        let change = match (x, y) {
            (None, Some(_)) => "added",
            (Some(_), None) => "removed",
            (Some(x), Some(y)) if bytes(x) != bytes(y) => "other_bytes",
            (Some(x), Some(y)) if pins(x) != pins(y) => "other_pins",
            _ => continue,
        };
        let words = |v: Option<&crate::provenance::ProvenanceArchive>| {
            v.map(|v| format!("{}; {}", bytes(v), pins(v)))
        };
        out.push(ArchiveChange {
            archive_id: id.clone(),
            change: change.into(),
            a: words(x),
            b: words(y),
        });
    }
    out
}

fn file_compares(a: &Provenance, b: &Provenance) -> Vec<FileCompare> {
    let index = |p: &Provenance| -> BTreeMap<String, String> {
        p.outputs
            .iter()
            .map(|o| (o.path.clone(), o.sha256.clone()))
            .collect()
    };
    let (ia, ib) = (index(a), index(b));
    let paths: BTreeSet<&String> = ia.keys().chain(ib.keys()).collect();
    paths
        .into_iter()
        .map(|p| FileCompare {
            path: p.clone(),
            status: match (ia.get(p), ib.get(p)) {
                (Some(x), Some(y)) if x == y => "identical",
                (Some(_), Some(_)) => "different",
                (Some(_), None) => "only_a",
                _ => "only_b",
            }
            .into(),
        })
        .collect()
}

/// The attempt identity, then the columns that tell one attempt's rows of a frame apart.
const KEY_COLUMNS: [&str; 8] = [
    "workload",
    "attempt_id",
    "archive_sha256",
    "member_prefix",
    "member_path",
    "digest",
    "seqs",
    "reason",
];

/// A frame's key: the [`KEY_COLUMNS`] it has (a frame whose rows they do not tell apart
/// gets the row's rank among equal keys as well).
fn key_of(spec: &FrameSpec) -> Vec<&'static str> {
    KEY_COLUMNS
        .iter()
        .copied()
        .filter(|k| spec.columns.iter().any(|c| c.name == *k))
        .collect()
}

/// One cell of a frame as text (floats in their shortest exact form, null as `null`).
pub(crate) fn cell(df: &DataFrame, column: &str, row: usize) -> String {
    match df.column(column).ok().and_then(|c| c.get(row).ok()) {
        None | Some(AnyValue::Null) => "null".into(),
        Some(AnyValue::Float64(x)) => format!("{x}"),
        Some(AnyValue::String(s)) => s.to_string(),
        Some(AnyValue::StringOwned(s)) => s.to_string(),
        Some(AnyValue::Datetime(v, unit, _)) | Some(AnyValue::DatetimeOwned(v, unit, _)) => {
            datetime_text(v, unit)
        }
        Some(v) => format!("{v}"),
    }
}

/// A datetime cell as RFC 3339 in UTC (the frames store UTC instants).
fn datetime_text(v: i64, unit: polars::prelude::TimeUnit) -> String {
    use polars::prelude::TimeUnit;
    let ns = match unit {
        TimeUnit::Nanoseconds => v,
        TimeUnit::Microseconds => v.saturating_mul(1_000),
        TimeUnit::Milliseconds => v.saturating_mul(1_000_000),
    };
    chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// Rows by key (key values joined by a NUL, then the rank among equal keys).
fn rows_by_key(df: &DataFrame, key: &[&str]) -> BTreeMap<(String, usize), usize> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for row in 0..df.height() {
        let k: Vec<String> = key.iter().map(|c| cell(df, c, row)).collect();
        let k = k.join("\u{0}");
        let rank = seen.entry(k.clone()).or_insert(0);
        out.insert((k, *rank), row);
        *rank += 1;
    }
    out
}

fn frame_diff(spec: &'static FrameSpec, a: &Side, b: &Side) -> Result<FrameDiff> {
    let file = spec.parquet_file();
    let read = |s: &Side| -> Result<DataFrame> {
        let p = s.run.file(&file);
        Ok(frames::read_declared(&p, spec, FRAME_SCHEMA_VERSION)?)
    };
    let (da, db) = (read(a)?, read(b)?);
    let key = key_of(spec);
    let (ka, kb) = (rows_by_key(&da, &key), rows_by_key(&db, &key));
    let mut d = FrameDiff {
        file: file.clone(),
        key: key.iter().map(|k| k.to_string()).collect(),
        rows_a: da.height(),
        rows_b: db.height(),
        added: 0,
        removed: 0,
        changed: 0,
        rows: Vec::new(),
    };
    let keys: BTreeSet<&(String, usize)> = ka.keys().chain(kb.keys()).collect();
    for k in keys {
        let (ra, rb) = (ka.get(k).copied(), kb.get(k).copied());
        let (change, columns, side, row) = match (ra, rb) {
            (Some(ra), Some(rb)) => {
                let cols: Vec<ValueChange> = spec
                    .columns
                    .iter()
                    .filter(|c| !key.contains(&c.name))
                    .filter_map(|c| {
                        let (x, y) = (cell(&da, c.name, ra), cell(&db, c.name, rb));
                        (x != y).then(|| ValueChange {
                            key: c.name.to_string(),
                            a: Some(x),
                            b: Some(y),
                        })
                    })
                    .collect();
                if cols.is_empty() {
                    continue;
                }
                d.changed += 1;
                ("changed", cols, b, rb)
            }
            (None, Some(rb)) => {
                d.added += 1;
                ("added", Vec::new(), b, rb)
            }
            (Some(ra), None) => {
                d.removed += 1;
                ("removed", Vec::new(), a, ra)
            }
            (None, None) => continue,
        };
        if d.rows.len() < ROWS_LISTED {
            let df = if std::ptr::eq(side, a) { &da } else { &db };
            let key_values: BTreeMap<String, String> = key
                .iter()
                .map(|c| (c.to_string(), cell(df, c, row)))
                .collect();
            d.rows.push(RowChange {
                change: change.into(),
                audit_show: audit_show(side, df, row),
                key: key_values,
                columns,
            });
        }
    }
    Ok(d)
}

/// `audit --config RUN/pipeline.yaml show --attempt ID --workload W --archive A` for a row
/// that names an attempt (and its archive, when the frame has it).
fn audit_show(side: &Side, df: &DataFrame, row: usize) -> Option<String> {
    df.column("attempt_id").ok()?;
    let id = cell(df, "attempt_id", row);
    let workload = cell(df, "workload", row);
    let sha = cell(df, "archive_sha256", row);
    let archive = side
        .prov
        .archives
        .iter()
        .find(|x| x.sha256 == sha)
        .map(|x| format!(" --archive {}", x.archive_id))
        .unwrap_or_default();
    Some(format!(
        "audit --config {} show --attempt {id} --workload {workload}{archive}",
        side.dir.join(CONFIG_SNAPSHOT).display()
    ))
}

fn cohort_changes(a: &RunDir, b: &RunDir) -> Result<Vec<CountChange>> {
    let read = |r: &RunDir| {
        audit::output::read_audit_json(&r.file(audit::output::AUDIT_JSON_FILE)).with_context(|| {
            format!(
                "reading {}",
                r.file(audit::output::AUDIT_JSON_FILE).display()
            )
        })
    };
    let counts = |doc: &audit::output::AuditDocument| -> BTreeMap<(String, String), f64> {
        let mut m = BTreeMap::new();
        for (w, s) in &doc.workloads {
            let mut put = |k: String, v: f64| {
                m.insert((w.clone(), k), v);
            };
            put("audited".into(), s.audited as f64);
            put("included".into(), s.included as f64);
            put("excluded".into(), s.excluded as f64);
            put("pilot".into(), s.pilot as f64);
            put("flagged".into(), s.flagged.len() as f64);
            put("wrong_answers".into(), s.wrong_answers as f64);
            for (r, n) in &s.excluded_by_reason {
                put(format!("excluded.{r}"), *n as f64);
            }
            for (r, c) in &s.clipping {
                put(format!("clipping.{r}.rows"), c.rows as f64);
                put(format!("clipping.{r}.seconds_removed"), c.seconds_removed);
            }
        }
        m
    };
    let (ca, cb) = (counts(&read(a)?), counts(&read(b)?));
    let keys: BTreeSet<&(String, String)> = ca.keys().chain(cb.keys()).collect();
    Ok(keys
        .into_iter()
        .filter(|k| ca.get(*k) != cb.get(*k))
        .map(|k| CountChange {
            workload: k.0.clone(),
            count: k.1.clone(),
            a: ca.get(k).copied(),
            b: cb.get(k).copied(),
        })
        .collect())
}

fn figure_changes(a: &RunDir, b: &RunDir) -> Result<Vec<FigureChange>> {
    let read = |r: &RunDir| {
        let p = r.file(replay::output::REPLAY_JSON_FILE);
        replay::output::read_replay_json(&p).with_context(|| format!("reading {}", p.display()))
    };
    let figures = |doc: &replay::output::ReplayDocument| {
        let mut m: BTreeMap<(String, String, String), f64> = BTreeMap::new();
        for w in &doc.workloads {
            for (figure, h) in [
                ("fifo_ideal_h", &w.fifo_ideal_h),
                ("best_found_h", &w.best_found_h),
                ("best_bounds_h", &w.best_bounds_h),
            ] {
                for (r, v) in [
                    ("cpu", h.cpu),
                    ("ram", h.ram),
                    ("gpu", h.gpu),
                    ("cache", h.cache),
                ] {
                    m.insert((w.workload.to_string(), figure.into(), r.into()), v);
                }
            }
            for (r, found, bound) in [
                ("gpu", w.best_found_h.gpu, w.best_bounds_h.gpu),
                ("cache", w.best_found_h.cache, w.best_bounds_h.cache),
            ] {
                if bound > 0.0 {
                    m.insert(
                        (w.workload.to_string(), "certified_gap".into(), r.into()),
                        found / bound - 1.0,
                    );
                }
            }
        }
        m
    };
    let (fa, fb) = (figures(&read(a)?), figures(&read(b)?));
    let keys: BTreeSet<&(String, String, String)> = fa.keys().chain(fb.keys()).collect();
    Ok(keys
        .into_iter()
        .map(|k| {
            let (x, y) = (fa.get(k).copied(), fb.get(k).copied());
            let delta = x.zip(y).map(|(x, y)| y - x);
            FigureChange {
                workload: k.0.clone(),
                figure: k.1.clone(),
                resource: k.2.clone(),
                a: x,
                b: y,
                delta,
                relative_delta: x
                    .zip(delta)
                    .and_then(|(x, d)| (x != 0.0).then(|| d / x.abs())),
                changed: x.map(f64::to_bits) != y.map(f64::to_bits),
            }
        })
        .collect())
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(absent)")
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.4}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:+.3}%", x * 100.0))
}

/// The text output: a headline, then one section per kind of difference; identical
/// outputs are counted, not listed.
pub fn diff_text(d: &DiffDocument) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} and {}: {}",
        d.run_a,
        d.run_b,
        if d.equal { "equal" } else { "different" }
    );
    if let Some(b) = &d.build {
        let _ = writeln!(s, "build\n  a: {}\n  b: {}", b.a, b.b);
    }
    if !d.config.is_empty() {
        let _ = writeln!(s, "config");
        for c in &d.config {
            let _ = writeln!(s, "  {}: {} -> {}", c.key, opt(&c.a), opt(&c.b));
        }
    }
    if !d.archives.is_empty() {
        let _ = writeln!(s, "archives");
        for x in &d.archives {
            let _ = writeln!(
                s,
                "  {} {}: {} -> {}",
                x.archive_id,
                x.change,
                opt(&x.a),
                opt(&x.b)
            );
        }
    }
    let _ = writeln!(s, "frames");
    for f in &d.frames {
        let _ = writeln!(
            s,
            "  {}: {} -> {} rows; {} added, {} removed, {} changed",
            f.file, f.rows_a, f.rows_b, f.added, f.removed, f.changed
        );
        for r in &f.rows {
            let key: Vec<String> = r.key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(s, "    {} {}", r.change, key.join(" "));
            for c in &r.columns {
                let _ = write!(s, "; {}: {} -> {}", c.key, opt(&c.a), opt(&c.b));
            }
            let _ = writeln!(s);
            if let Some(cmd) = &r.audit_show {
                let _ = writeln!(s, "      {cmd}");
            }
        }
        let shown = f.rows.len();
        let total = f.added + f.removed + f.changed;
        if total > shown {
            let _ = writeln!(
                s,
                "    and {} more rows (--json lists the first {ROWS_LISTED})",
                total - shown
            );
        }
    }
    if !d.cohort.is_empty() {
        let _ = writeln!(s, "cohort");
        for c in &d.cohort {
            let _ = writeln!(
                s,
                "  {} {}: {} -> {}",
                c.workload,
                c.count,
                num(c.a),
                num(c.b)
            );
        }
    }
    let _ = writeln!(s, "figures (changed)");
    for f in d.figures.iter().filter(|f| f.changed) {
        let _ = writeln!(
            s,
            "  {} {} {}: {} -> {} ({}, {})",
            f.workload,
            f.resource,
            f.figure,
            num(f.a),
            num(f.b),
            f.delta.map_or("-".into(), |x| format!("{x:+.4}")),
            pct(f.relative_delta)
        );
    }
    let same = d.files.iter().filter(|f| f.status == "identical").count();
    let _ = writeln!(s, "files: {same} identical");
    for f in d.files.iter().filter(|f| f.status != "identical") {
        let _ = writeln!(s, "  {} {}", f.status.replace('_', " "), f.path);
    }
    s
}

/// The Markdown output: the same sections as tables, every figure listed.
pub fn diff_markdown(d: &DiffDocument) -> String {
    let esc = |t: &str| t.replace('|', "\\|");
    let mut s = format!(
        "# {} against {}\n\n{}\n\n",
        esc(&d.run_a),
        esc(&d.run_b),
        if d.equal { "Equal." } else { "**Different.**" }
    );
    if let Some(b) = &d.build {
        let _ = writeln!(s, "## Build\n\n- a: {}\n- b: {}\n", esc(&b.a), esc(&b.b));
    }
    if !d.config.is_empty() {
        s.push_str("## Config\n\n| key | a | b |\n|---|---|---|\n");
        for c in &d.config {
            let _ = writeln!(
                s,
                "| `{}` | {} | {} |",
                c.key,
                esc(opt(&c.a)),
                esc(opt(&c.b))
            );
        }
        s.push('\n');
    }
    if !d.archives.is_empty() {
        s.push_str("## Archives\n\n| archive | change | a | b |\n|---|---|---|---|\n");
        for x in &d.archives {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                esc(&x.archive_id),
                x.change,
                esc(opt(&x.a)),
                esc(opt(&x.b))
            );
        }
        s.push('\n');
    }
    s.push_str("## Frames\n\n| frame | rows a | rows b | added | removed | changed |\n|---|---|---|---|---|---|\n");
    for f in &d.frames {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            f.file, f.rows_a, f.rows_b, f.added, f.removed, f.changed
        );
    }
    s.push('\n');
    for f in d.frames.iter().filter(|f| !f.rows.is_empty()) {
        let _ = writeln!(
            s,
            "### {}\n\n| change | key | columns | explain |\n|---|---|---|---|",
            f.file
        );
        for r in &f.rows {
            let key: Vec<String> = r.key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let cols: Vec<String> = r
                .columns
                .iter()
                .map(|c| format!("{}: {} -> {}", c.key, opt(&c.a), opt(&c.b)))
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                r.change,
                esc(&key.join(" ")),
                esc(&cols.join("; ")),
                r.audit_show
                    .as_deref()
                    .map_or(String::new(), |c| format!("`{}`", esc(c)))
            );
        }
        s.push('\n');
    }
    if !d.cohort.is_empty() {
        s.push_str("## Cohort\n\n| workload | count | a | b |\n|---|---|---|---|\n");
        for c in &d.cohort {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                c.workload,
                c.count,
                num(c.a),
                num(c.b)
            );
        }
        s.push('\n');
    }
    s.push_str("## Figures\n\n| workload | resource | figure | a | b | delta | relative |\n|---|---|---|---|---|---|---|\n");
    for f in &d.figures {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            f.workload,
            f.resource,
            f.figure,
            num(f.a),
            num(f.b),
            f.delta.map_or("-".into(), |x| format!("{x:+.4}")),
            pct(f.relative_delta)
        );
    }
    s.push_str("\n## Files\n\n| file | status |\n|---|---|\n");
    for f in &d.files {
        let _ = writeln!(s, "| {} | {} |", esc(&f.path), f.status.replace('_', " "));
    }
    s
}
