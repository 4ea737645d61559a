//! The recipes of docs/ANALYSIS.md, run verbatim (DuckDB, Polars and pandas of the test
//! tools' Python) on a small demo run whose every pilot attempt carries the id of a census
//! attempt (so a join on (workload, attempt_id) alone is wrong), and on its partitioned
//! export; every number is compared with `audit.json`, `replay.json`, `report.md` or the
//! single frame files, and every tool's answer with the others'.

mod common;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One code block of the page.
#[derive(Debug, Clone, serde::Serialize)]
struct Recipe {
    name: String,
    tool: String,
    code: String,
}

/// The recipes of a Markdown page: fenced blocks whose info string is `sql recipe=NAME`
/// (DuckDB) or `python recipe=NAME tool=polars|pandas`.
fn recipes_of(text: &str) -> Vec<Recipe> {
    let mut out = Vec::new();
    let mut open: Option<(String, String, String)> = None;
    for e in Parser::new(text) {
        match e {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let mut words = info.split_whitespace();
                let lang = words.next().unwrap_or("").to_string();
                let kv: BTreeMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
                if let Some(name) = kv.get("recipe") {
                    let tool = match (lang.as_str(), kv.get("tool")) {
                        ("sql", None) => "duckdb".to_string(),
                        ("python", Some(t)) => t.to_string(),
                        other => panic!("recipe {name}: unknown language or tool {other:?}"),
                    };
                    open = Some((name.to_string(), tool, String::new()));
                }
            }
            Event::Text(t) => {
                if let Some((_, _, code)) = open.as_mut() {
                    code.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((name, tool, code)) = open.take() {
                    out.push(Recipe { name, tool, code });
                }
            }
            _ => {}
        }
    }
    out
}

/// A recipe's answer.
#[derive(Debug, Clone, serde::Deserialize)]
struct Answer {
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
}

impl Answer {
    fn col(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns))
    }
    /// Each row as column -> value.
    fn maps(&self) -> Vec<BTreeMap<&str, &Value>> {
        self.rows
            .iter()
            .map(|r| self.columns.iter().map(|c| c.as_str()).zip(r).collect())
            .collect()
    }
    fn f(&self, row: usize, name: &str) -> f64 {
        self.rows[row][self.col(name)]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} of row {row} is not a number"))
    }
    fn s(&self, row: usize, name: &str) -> String {
        match &self.rows[row][self.col(name)] {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        }
    }
}

/// `a` and `b` agree to `rel` relative (or 1e-12 absolute near 0).
fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()) || (a - b).abs() <= 1e-12
}

/// Two cells agree: numbers to 1e-9 relative, anything else exactly.
fn same_cell(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => close(x, y, 1e-9),
        _ => a == b,
    }
}

/// The tables of a Markdown text, each with the heading above it: (heading, header, rows).
fn markdown_tables(text: &str) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let mut out = Vec::new();
    let (mut heading, mut in_heading) = (String::new(), false);
    let mut table: Option<(Vec<String>, Vec<Vec<String>>)> = None;
    let mut row: Vec<String> = Vec::new();
    let mut cell: Option<String> = None;
    for e in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match e {
            Event::Start(Tag::Heading { .. }) => {
                heading.clear();
                in_heading = true;
            }
            Event::End(TagEnd::Heading(_)) => in_heading = false,
            Event::Start(Tag::Table(_)) => table = Some((Vec::new(), Vec::new())),
            Event::End(TagEnd::Table) => {
                let (h, rows) = table.take().unwrap();
                out.push((heading.clone(), h, rows));
            }
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => row.push(cell.take().unwrap_or_default()),
            Event::End(TagEnd::TableHead) => {
                table.as_mut().unwrap().0 = std::mem::take(&mut row);
            }
            Event::End(TagEnd::TableRow) => {
                table.as_mut().unwrap().1.push(std::mem::take(&mut row))
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(c) = cell.as_mut() {
                    c.push_str(&t);
                } else if in_heading {
                    heading.push_str(&t);
                }
            }
            _ => {}
        }
    }
    out
}

/// The rows of the report table under the heading starting with `heading`.
fn report_table(report: &str, heading: &str) -> Vec<Vec<String>> {
    markdown_tables(report)
        .into_iter()
        .find(|(h, _, _)| h.starts_with(heading))
        .unwrap_or_else(|| panic!("report.md has no table under `{heading}`"))
        .2
}

/// The small demo corpus with every pilot attempt renamed to the id of the census attempt
/// of its task and number (`..__pilot2` -> `..__a2`): the audit keeps both, the pilot
/// excluded, in another archive under the same member prefix.
fn twin_pilot_demo(dir: &Path) -> model::LoadedConfig {
    let mut plan = demo::plan_corpus(demo::Scale::Small, demo::DEFAULT_SEED);
    let census: BTreeSet<String> = plan
        .attempts
        .iter()
        .filter(|a| a.run == model::RunKind::Census)
        .map(|a| a.attempt_id.clone())
        .collect();
    let mut twins = 0;
    for a in plan
        .attempts
        .iter_mut()
        .filter(|a| a.run == model::RunKind::Pilot)
    {
        a.attempt_id = a.attempt_id.replace("__pilot", "__a");
        assert!(census.contains(&a.attempt_id), "{}", a.attempt_id);
        twins += 1;
    }
    assert!(twins > 0);
    demo::write_corpus(&plan, dir, demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    model::load_config(&dir.join("pipeline.yaml")).unwrap()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every recipe name of the page and what its answers are held to.
const CHECKED: &[&str] = &[
    "identity_unique",
    "ids_shared",
    "cohort",
    "exclusions_by_reason",
    "excluded_attempts",
    "flagged",
    "clipping_summary",
    "request_seconds",
    "request_totals",
    "schedule_gpu_hours",
    "schedule_cpu_ram_hours",
    "schedule_cache_hours",
    "schedule_makespan",
    "timestamp_types",
    "holding_from_timestamps",
    "starts_per_day",
    "format_version",
    "dataset_rows",
    "dataset_request_seconds",
    "dataset_one_archive",
    "dataset_pruned_plan",
];

/// Recipes whose answer is about the tool itself, so tools differ.
const TOOL_SPECIFIC: &[&str] = &["timestamp_types", "dataset_pruned_plan"];

/// The civil date (UTC) of epoch seconds, `YYYY-MM-DD`.
fn utc_day(epoch_s: f64) -> String {
    let z = (epoch_s / 86_400.0).floor() as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[test]
fn utc_days_are_civil_dates() {
    assert_eq!(utc_day(0.0), "1970-01-01");
    assert_eq!(utc_day(1_756_684_800.6), "2025-09-01");
    assert_eq!(utc_day(951_782_400.0), "2000-02-29");
    assert_eq!(utc_day(1_755_647_999.9), "2025-08-19");
}

#[test]
fn the_page_has_a_checked_duckdb_and_polars_recipe_for_every_name() {
    let text = std::fs::read_to_string(repo().join("docs/ANALYSIS.md")).unwrap();
    let recipes = recipes_of(&text);
    let names: BTreeSet<&str> = recipes.iter().map(|r| r.name.as_str()).collect();
    let checked: BTreeSet<&str> = CHECKED.iter().copied().collect();
    assert_eq!(
        names, checked,
        "recipes of docs/ANALYSIS.md against the checks"
    );
    for n in CHECKED {
        for tool in ["duckdb", "polars"] {
            assert!(
                recipes.iter().any(|r| r.name == *n && r.tool == tool),
                "{n} has no {tool} recipe"
            );
        }
    }
    let mut seen = BTreeSet::new();
    for r in &recipes {
        assert!(
            seen.insert((&r.name, &r.tool)),
            "{}/{} twice",
            r.name,
            r.tool
        );
    }
    // The extraction sees blocks as written (a sample).
    let sample = recipes_of(
        "x\n\n```sql recipe=a\nSELECT 1;\n```\n\n```python recipe=a tool=polars\n1\n```\n\n```sql\nnot a recipe\n```\n",
    );
    assert_eq!(sample.len(), 2);
    assert_eq!(sample[0].code, "SELECT 1;\n");
    assert_eq!(sample[1].tool, "polars");
}

/// Everything the checks compare with.
struct Truth {
    audit: Value,
    replay: Value,
    report: String,
    run_dir: PathBuf,
    manifest: pipeline::export::DatasetManifest,
    twins: BTreeSet<(String, String)>,
}

impl Truth {
    fn workload_audit(&self, w: &str) -> &Value {
        &self.audit["workloads"][w]
    }
    fn replay_workload(&self, w: &str) -> &Value {
        self.replay["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["workload"] == w)
            .unwrap_or_else(|| panic!("replay.json has no workload {w}"))
    }
    fn selected(&self, w: &str, schedule: &str) -> &Value {
        self.replay_workload(w)["selected"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["schedule"] == schedule)
            .unwrap_or_else(|| panic!("replay.json: {w} has no selected {schedule}"))
    }
    fn selected_count(&self) -> usize {
        self.replay["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["selected"].as_array().unwrap().len())
            .sum()
    }
    fn frame(&self, name: &str) -> polars::prelude::DataFrame {
        frames::read_frame(
            &self.run_dir.join(format!("{name}.parquet")),
            name,
            model::run_dir::FRAME_SCHEMA_VERSION,
        )
        .unwrap()
    }
}

/// The checks of one recipe's answer from one tool; each failure is a line.
fn check(
    name: &str,
    tool: &str,
    a: &Answer,
    t: &Truth,
    all: &BTreeMap<String, Answer>,
) -> Vec<String> {
    let mut bad = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            bad.push(format!("{name}/{tool}: {what}"));
        }
    };
    let n = a.rows.len();
    match name {
        "identity_unique" => expect(n == 0, format!("{n} identities name several rows")),
        "ids_shared" => {
            let got: BTreeSet<(String, String)> = (0..n)
                .map(|i| (a.s(i, "workload"), a.s(i, "attempt_id")))
                .collect();
            expect(
                got == t.twins,
                format!("ids {got:?}, the pilot twins are {:?}", t.twins),
            );
            let pilot = t.workload_audit("deepswe")["pilot"].as_u64().unwrap() as usize;
            expect(
                n == pilot,
                format!("{n} shared ids, audit.json pilot {pilot}"),
            );
            for i in 0..n {
                expect(
                    a.f(i, "attempts") == 2.0 && a.f(i, "included") <= 1.0,
                    format!("row {i}: {:?}", a.rows[i]),
                );
            }
        }
        "cohort" => {
            let report = report_table(&t.report, "Cohort audit");
            expect(
                n == report.len(),
                format!("{n} workloads, report.md {}", report.len()),
            );
            for i in 0..n {
                let w = a.s(i, "workload");
                let s = t.workload_audit(&w);
                let flagged = s["flagged"].as_object().unwrap().len() as f64;
                for (c, want) in [
                    ("audited", s["audited"].as_f64().unwrap()),
                    ("included", s["included"].as_f64().unwrap()),
                    ("excluded", s["excluded"].as_f64().unwrap()),
                    ("pilot", s["pilot"].as_f64().unwrap()),
                    ("flagged", flagged),
                ] {
                    expect(
                        a.f(i, c) == want,
                        format!("{w} {c} {}, audit.json {want}", a.f(i, c)),
                    );
                }
                let row = report.iter().find(|r| r[0] == w);
                let cells: Vec<String> = ["audited", "included", "excluded", "pilot", "flagged"]
                    .iter()
                    .map(|c| format!("{}", a.f(i, c)))
                    .collect();
                expect(
                    row.is_some_and(|r| r[1..6] == cells[..]),
                    format!("{w}: {cells:?}, report.md {row:?}"),
                );
            }
        }
        "exclusions_by_reason" => {
            let mut want = BTreeMap::new();
            for (w, s) in t.audit["workloads"].as_object().unwrap() {
                for (r, c) in s["excluded_by_reason"].as_object().unwrap() {
                    if c.as_u64() != Some(0) {
                        want.insert((w.clone(), r.clone()), c.as_f64().unwrap());
                    }
                }
            }
            let got: BTreeMap<(String, String), f64> = (0..n)
                .map(|i| ((a.s(i, "workload"), a.s(i, "reason")), a.f(i, "attempts")))
                .collect();
            expect(got == want, format!("{got:?}, audit.json {want:?}"));
        }
        "excluded_attempts" => {
            let report: BTreeSet<Vec<String>> = report_table(&t.report, "Excluded attempts")
                .into_iter()
                .collect();
            let got: BTreeSet<Vec<String>> = (0..n)
                .map(|i| {
                    ["workload", "attempt_id", "reason", "detail"]
                        .iter()
                        .map(|c| a.s(i, c))
                        .collect()
                })
                .collect();
            expect(got == report, format!("{got:?}, report.md {report:?}"));
            let census: u64 = t.audit["workloads"]
                .as_object()
                .unwrap()
                .values()
                .map(|s| s["excluded"].as_u64().unwrap())
                .sum();
            expect(
                n as u64 == census,
                format!("{n} rows, audit.json excluded {census}"),
            );
        }
        "flagged" => {
            let mut want = BTreeSet::new();
            for (w, s) in t.audit["workloads"].as_object().unwrap() {
                for (id, why) in s["flagged"].as_object().unwrap() {
                    want.insert((w.clone(), id.clone(), why.as_str().unwrap().to_string()));
                }
            }
            let got: BTreeSet<(String, String, String)> = (0..n)
                .map(|i| {
                    (
                        a.s(i, "workload"),
                        a.s(i, "attempt_id"),
                        a.s(i, "flag_reason"),
                    )
                })
                .collect();
            expect(
                !want.is_empty() && got == want,
                format!("{got:?}, audit.json {want:?}"),
            );
        }
        "clipping_summary" => {
            let report = report_table(&t.report, "Clipping summary");
            let mut seen = 0;
            for (w, s) in t.audit["workloads"].as_object().unwrap() {
                for (reason, v) in s["clipping"].as_object().unwrap() {
                    let rows = v["rows"].as_f64().unwrap();
                    let secs = v["seconds_removed"].as_f64().unwrap();
                    let i =
                        (0..n).find(|&i| a.s(i, "workload") == *w && a.s(i, "reason") == *reason);
                    match i {
                        None => expect(
                            rows == 0.0,
                            format!("{w} {reason}: no row, audit.json {rows} rows"),
                        ),
                        Some(i) => {
                            seen += 1;
                            expect(
                                a.f(i, "rows") == rows
                                    && close(a.f(i, "seconds_removed"), secs, 1e-9),
                                format!(
                                    "{w} {reason}: {:?}, audit.json {rows} rows {secs} s",
                                    a.rows[i]
                                ),
                            );
                            let line = vec![
                                w.clone(),
                                reason.clone(),
                                format!("{}", a.f(i, "rows")),
                                format!("{:.3}", a.f(i, "seconds_removed")),
                            ];
                            expect(
                                report.contains(&line),
                                format!("report.md has no row {line:?}"),
                            );
                        }
                    }
                }
            }
            expect(seen == n && n > 0, format!("{n} rows, {seen} matched"));
        }
        "request_seconds" => {
            let mut per_workload: BTreeMap<String, (u64, f64)> = BTreeMap::new();
            for i in 0..n {
                let (r, want) = (a.f(i, "request_s"), a.f(i, "attempts_request_s"));
                expect(
                    close(r, want, 1e-9),
                    format!(
                        "{} {}: request_s {r}, attempts.request_s {want}",
                        a.s(i, "workload"),
                        a.s(i, "attempt_id")
                    ),
                );
                let e = per_workload.entry(a.s(i, "workload")).or_default();
                e.0 += 1;
                e.1 += a.f(i, "intervals");
            }
            for (w, (attempts, intervals)) in per_workload {
                let s = t.workload_audit(&w);
                let r = t.replay_workload(&w);
                expect(
                    Some(attempts) == s["included"].as_u64(),
                    format!(
                        "{w}: {attempts} attempts, audit.json included {}",
                        s["included"]
                    ),
                );
                expect(
                    Some(intervals) == r["request_intervals"].as_f64(),
                    format!(
                        "{w}: {intervals} intervals, replay.json {}",
                        r["request_intervals"]
                    ),
                );
            }
        }
        "request_totals" | "dataset_request_seconds" => {
            for i in 0..n {
                let w = a.s(i, "workload");
                let r = t.replay_workload(&w);
                expect(
                    Some(a.f(i, "attempts")) == r["attempts"].as_f64()
                        && Some(a.f(i, "intervals")) == r["request_intervals"].as_f64(),
                    format!(
                        "{w}: {:?}, replay.json attempts {} request_intervals {}",
                        a.rows[i], r["attempts"], r["request_intervals"]
                    ),
                );
                if name == "request_totals" {
                    let lb = r["lower_bounds_h"]["gpu"].as_f64().unwrap();
                    expect(
                        close(a.f(i, "gpu_lower_bound_h"), lb, 1e-9),
                        format!(
                            "{w}: GPU lower bound {}, replay.json {lb}",
                            a.f(i, "gpu_lower_bound_h")
                        ),
                    );
                } else {
                    let single = &all["request_totals/duckdb"];
                    let j = (0..single.rows.len()).find(|&j| single.s(j, "workload") == w);
                    expect(
                        j.is_some_and(|j| {
                            close(single.f(j, "request_s"), a.f(i, "request_s"), 1e-9)
                        }),
                        format!(
                            "{w}: {} s through the dataset, the single files' request_totals differ",
                            a.f(i, "request_s")
                        ),
                    );
                }
            }
            expect(n == 2, format!("{n} workloads"));
        }
        "schedule_gpu_hours" | "schedule_cpu_ram_hours" | "schedule_cache_hours" => {
            expect(
                n == t.selected_count(),
                format!("{n} schedules, replay.json {}", t.selected_count()),
            );
            let cols: &[(&str, &str)] = match name {
                "schedule_gpu_hours" => &[("gpu_h", "gpu")],
                "schedule_cpu_ram_hours" => &[("cpu_h", "cpu"), ("ram_h", "ram")],
                _ => &[("cache_h", "cache")],
            };
            for i in 0..n {
                let (w, s) = (a.s(i, "workload"), a.s(i, "schedule"));
                let ideal = &t.selected(&w, &s)["ideal"];
                for (c, key) in cols {
                    let want = ideal[key].as_f64().unwrap();
                    expect(
                        close(a.f(i, c), want, 1e-9),
                        format!("{w} {s} {c} {}, replay.json {want}", a.f(i, c)),
                    );
                }
            }
        }
        "schedule_makespan" => {
            expect(n == t.selected_count(), format!("{n} schedules"));
            for i in 0..n {
                let (w, s) = (a.s(i, "workload"), a.s(i, "schedule"));
                let want = t.selected(&w, &s)["makespan_s"].as_f64().unwrap();
                let r = t.replay_workload(&w);
                expect(
                    close(a.f(i, "makespan_s"), want, 1e-12),
                    format!("{w} {s}: {}, replay.json {want}", a.f(i, "makespan_s")),
                );
                expect(
                    Some(a.f(i, "attempts")) == r["attempts"].as_f64(),
                    format!("{w} {s}: {} attempts", a.f(i, "attempts")),
                );
                if s == "fifo" {
                    let d = r["deadline_s"].as_f64().unwrap();
                    expect(
                        close(a.f(i, "makespan_s"), d, 1e-12),
                        format!(
                            "{w}: FIFO makespan {}, deadline_s {d}",
                            a.f(i, "makespan_s")
                        ),
                    );
                }
            }
        }
        "timestamp_types" => {
            let want = match tool {
                "duckdb" => "TIMESTAMPTZ_NS",
                "polars" => "Datetime(time_unit='ns', time_zone='UTC')",
                _ => "datetime64[ns, UTC]",
            };
            expect(
                n == 1 && a.s(0, "type") == want,
                format!("{:?}, expected {want}", a.rows),
            );
        }
        "holding_from_timestamps" => {
            expect(n == 2, format!("{n} workloads"));
            for i in 0..n {
                let w = a.s(i, "workload");
                let h = &t.replay_workload(&w)["fifo_holding_h"];
                for (c, key) in [("cpu_holding_h", "cpu"), ("ram_holding_h", "ram")] {
                    let want = h[key].as_f64().unwrap();
                    expect(
                        close(a.f(i, c), want, 1e-7),
                        format!("{w} {c} {}, replay.json {want}", a.f(i, c)),
                    );
                }
                expect(
                    a.f(i, "max_difference_s") < 1e-6,
                    format!("{w}: durations differ by {} s", a.f(i, "max_difference_s")),
                );
            }
        }
        "starts_per_day" => {
            let df = t.frame("attempts");
            let path = t.run_dir.join("attempts.parquet");
            let ws = frames::str_values(&df, &path, "workload").unwrap();
            let starts = frames::f64_values(&df, &path, "gen_start").unwrap();
            let mut want: BTreeMap<(String, String), f64> = BTreeMap::new();
            for (w, s) in ws.into_iter().zip(starts) {
                if let (Some(w), Some(s)) = (w, s) {
                    *want.entry((w, utc_day(s))).or_default() += 1.0;
                }
            }
            let got: BTreeMap<(String, String), f64> = (0..n)
                .map(|i| ((a.s(i, "workload"), a.s(i, "day")), a.f(i, "attempts")))
                .collect();
            expect(
                got == want && want.len() > 1,
                format!("{got:?}, from gen_start {want:?}"),
            );
        }
        "format_version" => {
            let frames: BTreeSet<String> = pipeline::export::exported_frames()
                .iter()
                .map(|f| f.spec.name.to_string())
                .collect();
            let mut got = BTreeSet::new();
            for i in 0..n {
                let file = a.s(i, "file_name");
                let stem = file
                    .trim_start_matches("run/")
                    .trim_end_matches(".parquet")
                    .to_string();
                expect(
                    a.s(i, "frame") == stem,
                    format!("{file} names itself {}", a.s(i, "frame")),
                );
                expect(
                    a.s(i, "schema_version") == model::run_dir::FRAME_SCHEMA_VERSION.to_string(),
                    format!("{file}: version {}", a.s(i, "schema_version")),
                );
                got.insert(stem);
            }
            expect(
                got == frames,
                format!("{got:?}, the run's frames {frames:?}"),
            );
        }
        "dataset_rows" => {
            expect(
                n == t.manifest.frames.len(),
                format!("{n} frames, the manifest {}", t.manifest.frames.len()),
            );
            for i in 0..n {
                let f = a.s(i, "frame");
                let m = t.manifest.frames.iter().find(|x| x.frame == f);
                let single = t.frame(&f).height() as f64;
                expect(
                    m.is_some_and(|m| m.rows as f64 == a.f(i, "rows")) && single == a.f(i, "rows"),
                    format!(
                        "{f}: {} rows through the dataset, {single} in the single file, manifest {:?}",
                        a.f(i, "rows"),
                        m.map(|m| m.rows)
                    ),
                );
            }
        }
        "dataset_one_archive" => {
            let sha = t.audit["archives"]["deepswe-001"]
                .as_str()
                .unwrap()
                .to_string();
            let df = t.frame("requests");
            let path = t.run_dir.join("requests.parquet");
            let shas = frames::str_values(&df, &path, "archive_sha256").unwrap();
            let s = frames::f64_values(&df, &path, "start_offset_s").unwrap();
            let e = frames::f64_values(&df, &path, "end_offset_s").unwrap();
            let (mut rows, mut secs) = (0.0, 0.0);
            for i in 0..df.height() {
                if shas[i].as_deref() == Some(sha.as_str()) {
                    rows += 1.0;
                    secs += e[i].unwrap() - s[i].unwrap();
                }
            }
            expect(
                n == 1
                    && a.s(0, "archive_sha256") == sha
                    && a.f(0, "intervals") == rows
                    && close(a.f(0, "request_s"), secs, 1e-9),
                format!(
                    "{:?}; the single file has {rows} rows, {secs} s for {sha}",
                    a.rows
                ),
            );
        }
        "dataset_pruned_plan" => {
            let text: String = a
                .rows
                .iter()
                .map(|r| r.last().and_then(Value::as_str).unwrap_or(""))
                .collect();
            let sha = t.audit["archives"]["deepswe-001"].as_str().unwrap();
            match tool {
                "duckdb" => expect(
                    text.contains("Scanning Files: 1/") && text.contains("Total Files Read: 1"),
                    format!("the plan does not read one file: {text}"),
                ),
                _ => expect(
                    text.matches("part-0.parquet").count() == 1
                        && text.contains(&format!("archive_sha256={sha}/part-0.parquet")),
                    format!("the plan does not scan the one part: {text}"),
                ),
            }
        }
        other => expect(false, format!("no check for {other}")),
    }
    bad
}

/// Every recipe of docs/ANALYSIS.md, verbatim, on the twin-pilot demo run and its export.
#[test]
fn every_recipe_of_the_analysis_page_reproduces_the_runs_figures() {
    let d = tempfile::tempdir().unwrap();
    let cfg = twin_pilot_demo(d.path());
    common::run_quiet(&cfg);
    let run_dir = d.path().join("run");
    let summary =
        pipeline::export::export_dataset(&run_dir, &d.path().join("dataset"), false).unwrap();

    let text = std::fs::read_to_string(repo().join("docs/ANALYSIS.md")).unwrap();
    let recipes = recipes_of(&text);
    let recipes_json = d.path().join("recipes.json");
    std::fs::write(&recipes_json, serde_json::to_string(&recipes).unwrap()).unwrap();
    let out_json = d.path().join("answers.json");
    let out = Command::new(testkit::python())
        .arg(repo().join("tests/e2e/run_recipes.py"))
        .arg(&recipes_json)
        .arg(&out_json)
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the recipe runner failed (scripts/test-tools installs duckdb, polars and pandas): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let raw: BTreeMap<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    let mut failures = Vec::new();
    let mut answers: BTreeMap<String, Answer> = BTreeMap::new();
    for (k, v) in raw {
        match v.get("error") {
            Some(e) => failures.push(format!("{k}: failed to run:\n{}", e.as_str().unwrap_or(""))),
            None => {
                answers.insert(k, serde_json::from_value(v).unwrap());
            }
        }
    }
    let attempts = frames::read_frame(
        &run_dir.join("attempts.parquet"),
        "attempts",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let path = run_dir.join("attempts.parquet");
    let runs = frames::str_values(&attempts, &path, "run").unwrap();
    let ids = frames::str_values(&attempts, &path, "attempt_id").unwrap();
    let twins = runs
        .iter()
        .zip(&ids)
        .filter(|(r, _)| r.as_deref() == Some("pilot"))
        .map(|(_, id)| ("deepswe".to_string(), id.clone().unwrap()))
        .collect();
    let read = |f: &str| std::fs::read_to_string(run_dir.join(f)).unwrap();
    let truth = Truth {
        audit: serde_json::from_str(&read("audit.json")).unwrap(),
        replay: serde_json::from_str(&read("replay.json")).unwrap(),
        report: read("report.md"),
        run_dir: run_dir.clone(),
        manifest: summary.manifest,
        twins,
    };
    for r in &recipes {
        let key = format!("{}/{}", r.name, r.tool);
        let Some(a) = answers.get(&key) else { continue };
        failures.extend(check(&r.name, &r.tool, a, &truth, &answers));
        // Every tool gives the same answer as DuckDB (sorted, numbers to 1e-9).
        if r.tool != "duckdb"
            && !TOOL_SPECIFIC.contains(&r.name.as_str())
            && let Some(sql) = answers.get(&format!("{}/duckdb", r.name))
        {
            let sorted = |x: &Answer| {
                let mut rows: Vec<String> = x.maps().iter().map(|m| format!("{m:?}")).collect();
                rows.sort();
                rows
            };
            let same = a.columns == sql.columns && a.rows.len() == sql.rows.len() && {
                let key = |x: &Answer| {
                    let mut rows = x.rows.clone();
                    rows.sort_by_key(|r| {
                        r.iter()
                            .filter(|v| v.is_string())
                            .map(|v| v.to_string())
                            .collect::<Vec<_>>()
                    });
                    rows
                };
                key(a).iter().zip(key(sql).iter()).all(|(x, y)| {
                    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_cell(p, q))
                })
            };
            if !same {
                failures.push(format!(
                    "{key}: differs from {}/duckdb:\n  {:?}\n  {:?}",
                    r.name,
                    sorted(a),
                    sorted(sql)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} recipe failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(answers.len(), recipes.len());
}
