//! The Markdown sections of `report.md`, each a pure function of the data it shows. Every
//! section ends with the blank line that separates it from the next, so the report is their
//! concatenation. Strings from the data go through `md_text` (or `md_code`); numbers are
//! formatted here.

use crate::ReportError;
use crate::charts::Figure;
use crate::data::{BoundRow, Exclusion, LedgerSummary, Table};
use crate::render::{md_code, md_text};
use crate::{ASSUMPTIONS, CAVEATS};
use audit::cohort::WorkloadAudit;
use model::WorkloadId;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The exclusion reason of the pilot attempts the census superseded (counted, not listed).
const SUPERSEDED: &str = "superseded_by_census";

/// Hours with three decimals, `-` when absent.
fn fmt_h(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into())
}

/// A percentage with two decimals, `-` when absent.
fn fmt_pct(v: Option<f64>) -> String {
    v.map(|g| format!("{g:.2}")).unwrap_or_else(|| "-".into())
}

/// The title and the run's identity: config hash, seed, RNG order (the workloads' fixed
/// names, as a Rust list), tool version.
pub(crate) fn title(config_sha256: &str, seed: u64, order: &[WorkloadId]) -> String {
    let order: Vec<&str> = order.iter().map(|w| w.as_str()).collect();
    format!(
        "# Provenance, audit and replay report\n\nConfig SHA256 {}; seed {seed}; RNG order {order:?}; tool {}.\n\n",
        md_code(config_sha256),
        model::TOOL_VERSION
    )
}

/// The ingest ledger: archives, bytes, rows by (location, verdict).
pub(crate) fn ledger(summary: Option<&LedgerSummary>, total_bytes: u64) -> String {
    let mut md = String::from("## Ingest ledger\n\n");
    let Some(l) = summary else {
        md.push_str("No ledger in this run directory.\n\n");
        return md;
    };
    let _ = writeln!(
        md,
        "{} archives, {total_bytes} bytes, {} (archive, location) rows.\n\n| location | verdict | rows |\n|---|---|---|",
        l.archives, l.rows
    );
    for ((kind, verdict), n) in &l.by_verdict {
        let _ = writeln!(md, "| {} | {} | {n} |", md_text(kind), md_text(verdict));
    }
    md.push('\n');
    md
}

/// The cohort audit, one row per workload of `audit.json`.
pub(crate) fn cohort_audit(workloads: &BTreeMap<String, WorkloadAudit>) -> String {
    let mut md = String::from(
        "## Cohort audit\n\n| workload | audited | included | excluded | pilot | flagged | pass |\n|---|---|---|---|---|---|---|\n",
    );
    for (w, s) in workloads {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            md_text(w),
            s.audited,
            s.included,
            s.excluded,
            s.pilot,
            s.flagged.len(),
            s.pass
        );
    }
    md.push('\n');
    md
}

/// The excluded attempts (the pilot's only counted) and the pilot count.
pub(crate) fn exclusions(rows: &[Exclusion]) -> String {
    let mut md = String::from(
        "### Excluded attempts (pilot attempts counted, not listed)\n\n| workload | attempt | reason | detail |\n|---|---|---|---|\n",
    );
    let mut pilots = 0;
    for e in rows {
        if e.reason == SUPERSEDED {
            pilots += 1;
            continue;
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            md_text(&e.workload),
            md_text(&e.attempt_id),
            md_text(&e.reason),
            md_text(&e.detail)
        );
    }
    let _ = writeln!(md, "\n{pilots} pilot attempts superseded by the census.\n");
    md
}

/// The flagged attempts (kept in the cohort), with why.
pub(crate) fn flagged(workloads: &BTreeMap<String, WorkloadAudit>) -> String {
    let mut md = String::from("### Flagged (kept in the cohort)\n\n");
    for (w, s) in workloads {
        for (id, why) in &s.flagged {
            let _ = writeln!(md, "- {} {}: {}", md_text(w), md_code(id), md_text(why));
        }
    }
    md.push('\n');
    md
}

/// The clipping summary: rows and seconds removed per workload and reason.
pub(crate) fn clipping(workloads: &BTreeMap<String, WorkloadAudit>) -> String {
    let mut md = String::from(
        "## Clipping summary\n\n| workload | reason | rows | seconds removed |\n|---|---|---|---|\n",
    );
    for (w, s) in workloads {
        for (reason, v) in &s.clipping {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.3} |",
                md_text(w),
                md_text(reason),
                v.rows,
                v.seconds_removed
            );
        }
    }
    md.push('\n');
    md
}

/// The resource-hours table: FIFO, the searches' bests, the bounds and the gaps.
pub(crate) fn resource_hours(rows: &[BoundRow]) -> String {
    let mut md = String::from(
        "## Resource-hours\n\nHours: core-hours (CPU), GiB-hours (RAM, cache), GPU-hours. `lower bound` and `gap %` are the study's (the replay model of docs/FORMAT.md); `best valid bound` is the strongest bound of docs/BOUNDS.md (the LP bounds included), and `certified gap %` says how far the best found can be from optimal. `seed profile best` is what the study's method finds (the seed profile of docs/REPLAY.md, run as the default search's first phase), beside this project's `best found`. `LP bound` is the certified value of the HiGHS LP (GPU configuration LP, cache fluid LP) with how it ended: converged, budget exhausted (still valid, only weaker) or skipped.\n\n| workload | resource | FIFO holding | FIFO ideal | seed profile best | best found | lower bound | gap % | best valid bound | certified gap % | LP bound |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for b in rows {
        let lp = match (b.lp_bound, b.lp_status.as_deref()) {
            (Some(v), Some(status)) => {
                format!(
                    "{} ({})",
                    fmt_h(Some(v)),
                    md_text(&status.replace('_', " "))
                )
            }
            (None, Some(status)) => md_text(&status.replace('_', " ")),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {lp} |",
            md_text(&b.workload),
            md_text(&b.resource),
            fmt_h(b.fifo_holding),
            fmt_h(b.fifo_ideal),
            fmt_h(b.seed_profile_best),
            fmt_h(b.best_found),
            fmt_h(b.lower_bound),
            fmt_pct(b.gap_pct),
            fmt_h(b.best_bound),
            fmt_pct(b.certified_gap_pct),
        );
    }
    md.push('\n');
    md
}

/// The published figures of `pipeline.yaml` against the rerun (nothing when none is given).
pub(crate) fn published(checks: &[replay::published::FigureCheck]) -> String {
    if checks.is_empty() {
        return String::new();
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    format!(
        "## Published figures\n\nThe figures `workloads.<workload>.published` of pipeline.yaml states, against this rerun: `value` within `atol + rtol * |value|`, or at most `max` / at least `min`. {}\n\n{}\n",
        if failed == 0 {
            format!("All {} reproduced.", checks.len())
        } else {
            format!("{failed} of {} **not reproduced**.", checks.len())
        },
        replay::published::markdown_table(checks)
    )
}

/// The selected schedules of `joint_schedules.csv`: the values that coexist in one schedule,
/// and the deadline. A cell that should be a number but does not parse is shown as it is.
pub(crate) fn selected_schedules(joint: &Table) -> Result<String, ReportError> {
    use replay::schemas::JOINT_SCHEDULES as J;
    // The shown columns, named through the replay's declaration of the file.
    let cols = [
        const { J.column("workload") },
        const { J.column("schedule") },
        const { J.column("makespan_s") },
        const { J.column("deadline_s") },
        const { J.column("cpu_ideal_h") },
        const { J.column("ram_ideal_h") },
        const { J.column("gpu_ideal_h") },
        const { J.column("cache_ideal_h") },
        const { J.column("validated") },
    ]
    .iter()
    .map(|n| joint.column(n))
    .collect::<Result<Vec<usize>, ReportError>>()?;
    let mut md = String::from(
        "## Selected schedules\n\nEach row is one schedule and the ideal values it has at once (joint_schedules.csv); `D` is the deadline, the FIFO makespan. Every selected schedule is checked by the independent validator.\n\n| workload | schedule | makespan (s) | D (s) | CPU | RAM | GPU | cache | validated |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &joint.rows {
        let cells: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let v = &r[*c];
                let number = v.parse::<f64>().ok();
                match (k, number) {
                    (2 | 3, Some(x)) => format!("{x:.1}"),
                    (4..=7, Some(x)) => fmt_h(Some(x)),
                    _ => md_text(v),
                }
            })
            .collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    md.push('\n');
    Ok(md)
}

/// Per workload, whether the best GPU and the best cache values found coexist in one
/// selected schedule of `joint_schedules.csv` (values within relative 1e-9 of a best count
/// as reaching it, the replay's tie rule). Different minima need not coexist; when they do
/// not, the line says so and that this does not prove a joint optimum impossible.
pub(crate) fn coexistence(joint: &Table) -> Result<String, ReportError> {
    use replay::schemas::JOINT_SCHEDULES as J;
    let [w, sched, gpu, cache] = [
        const { J.column("workload") },
        const { J.column("schedule") },
        const { J.column("gpu_ideal_h") },
        const { J.column("cache_ideal_h") },
    ]
    .map(|n| joint.column(n));
    let (w, sched, gpu, cache) = (w?, sched?, gpu?, cache?);
    let mut workloads: Vec<&str> = Vec::new();
    for r in &joint.rows {
        if !workloads.contains(&r[w].as_str()) {
            workloads.push(&r[w]);
        }
    }
    let mut md = String::from(
        "## Do the best values coexist?\n\nDifferent resource minima need not coexist in one schedule. CPU and RAM minima coexist with every selected ideal schedule (their totals do not depend on the order). For GPU and cache, per workload (joint_schedules.csv):\n\n",
    );
    for name in workloads {
        let rows: Vec<&Vec<String>> = joint.rows.iter().filter(|r| r[w] == name).collect();
        let value = |r: &Vec<String>, c: usize| r[c].parse::<f64>().ok();
        let best_of = |schedule: &str, c: usize| {
            rows.iter()
                .find(|r| r[sched] == schedule)
                .and_then(|r| value(r, c))
        };
        let (Some(best_gpu), Some(best_cache)) =
            (best_of("best_gpu", gpu), best_of("best_cache", cache))
        else {
            let _ = writeln!(
                md,
                "- {}: no `best_gpu` and `best_cache` rows with values to compare.",
                md_text(name)
            );
            continue;
        };
        let reaches = |v: Option<f64>, best: f64| {
            v.is_some_and(|v| v <= best + 1e-9 * best.abs().max(f64::MIN_POSITIVE))
        };
        let both: Vec<&str> = rows
            .iter()
            .filter(|r| reaches(value(r, gpu), best_gpu) && reaches(value(r, cache), best_cache))
            .map(|r| r[sched].as_str())
            .collect();
        let values = format!(
            "best GPU {} h, best cache {} h",
            fmt_h(Some(best_gpu)),
            fmt_h(Some(best_cache))
        );
        if both.is_empty() {
            let _ = writeln!(
                md,
                "- {}: the best GPU and cache values found do **not** coexist in a selected schedule ({values}); this does not prove a joint optimum impossible.",
                md_text(name)
            );
        } else {
            let named: Vec<String> = both.iter().map(|s| format!("`{}`", md_text(s))).collect();
            let _ = writeln!(
                md,
                "- {}: the best GPU and cache values found coexist ({values}), in {}.",
                md_text(name),
                named.join(", ")
            );
        }
    }
    md.push('\n');
    Ok(md)
}

/// The accounting model's assumptions.
pub(crate) fn assumptions() -> String {
    format!("## Assumptions of the accounting model\n\n{ASSUMPTIONS}\n\n")
}

/// What the study says its replay model leaves out, in its own terms.
pub(crate) fn caveats() -> String {
    let mut md = String::from("## Caveats of the study's model\n\n");
    for c in CAVEATS {
        let _ = writeln!(md, "- {c}");
    }
    md.push('\n');
    md
}

/// The list of the charts (they are in the HTML only).
pub(crate) fn chart_list(figures: &[Figure]) -> String {
    let mut md = String::from("## Charts\n\nThe charts are in report.html:\n\n");
    for f in figures {
        let _ = writeln!(md, "- {}", md_text(&f.caption));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::md_to_html;

    fn exclusion(workload: &str, attempt_id: &str, reason: &str, detail: &str) -> Exclusion {
        Exclusion {
            workload: workload.into(),
            attempt_id: attempt_id.into(),
            reason: reason.into(),
            detail: detail.into(),
        }
    }

    /// The number of cells of a Markdown table row, counting only unescaped `|`.
    fn cells(row: &str) -> usize {
        let mut n = 0;
        let mut escaped = false;
        for c in row.chars() {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '|') => n += 1,
                _ => escaped = false,
            }
        }
        n - 1
    }

    const HOSTILE: &str =
        "<script>alert(\"x\")</script> it's A&B | *x* `tick` \\ [l](javascript:y) # _u_ a\\|b";

    #[test]
    fn exclusions_section_exact_lines() {
        let md = exclusions(&[
            exclusion(
                "tmax",
                "tmax-task-0005.trial-1",
                "execution_exception",
                "AgentTimeoutError: agent exceeded its wall-clock budget",
            ),
            exclusion("deepswe", "repo01__issue-00001__a1", SUPERSEDED, "pilot"),
            exclusion(
                "deepswe",
                "repo02__issue-00002__a3",
                "infrastructure_failure",
                "infra_error: sandbox lost",
            ),
            exclusion("deepswe", "repo03__issue-00003__a1", SUPERSEDED, "pilot"),
        ]);
        let expected = [
            "### Excluded attempts (pilot attempts counted, not listed)",
            "",
            "| workload | attempt | reason | detail |",
            "|---|---|---|---|",
            "| tmax | tmax-task-0005.trial-1 | execution_exception | AgentTimeoutError: agent exceeded its wall-clock budget |",
            "| deepswe | repo02__issue-00002__a3 | infrastructure_failure | infra_error: sandbox lost |",
            "",
            "2 pilot attempts superseded by the census.",
            "",
            "",
        ];
        assert_eq!(md, expected.join("\n"));
    }

    #[test]
    fn clipping_and_cohort_sections_exact_lines() {
        use audit::cohort::ClipSummary;
        let clip = |reason: &str, rows, seconds_removed| {
            BTreeMap::from([(
                reason.to_string(),
                ClipSummary {
                    rows,
                    seconds_removed,
                },
            )])
        };
        let ws = &BTreeMap::from([
            (
                "deepswe".to_string(),
                WorkloadAudit {
                    audited: 20,
                    included: 19,
                    excluded: 1,
                    pilot: 3,
                    pass: true,
                    flagged: BTreeMap::from([("a1".into(), "llm_query_error".into())]),
                    clipping: clip("merged_overlap", 2, 1.23456),
                    ..Default::default()
                },
            ),
            (
                "tmax".to_string(),
                WorkloadAudit {
                    audited: 5,
                    included: 5,
                    pass: false,
                    clipping: clip("missing_timer", 1, 0.0),
                    ..Default::default()
                },
            ),
        ]);
        assert_eq!(
            cohort_audit(ws),
            "## Cohort audit\n\n| workload | audited | included | excluded | pilot | flagged | pass |\n|---|---|---|---|---|---|---|\n| deepswe | 20 | 19 | 1 | 3 | 1 | true |\n| tmax | 5 | 5 | 0 | 0 | 0 | false |\n\n"
        );
        assert_eq!(
            clipping(ws),
            "## Clipping summary\n\n| workload | reason | rows | seconds removed |\n|---|---|---|---|\n| deepswe | merged_overlap | 2 | 1.235 |\n| tmax | missing_timer | 1 | 0.000 |\n\n"
        );
        assert_eq!(
            flagged(ws),
            "### Flagged (kept in the cohort)\n\n- deepswe `a1`: llm_query_error\n\n"
        );
    }

    #[test]
    fn resource_hours_rows_format_numbers_and_lp_status() {
        let rows = [
            BoundRow {
                workload: "tmax".into(),
                resource: "gpu".into(),
                fifo_holding: Some(70.2954),
                fifo_ideal: Some(66.7671),
                seed_profile_best: None,
                best_found: Some(58.957),
                lower_bound: Some(12.88),
                gap_pct: Some(357.7449),
                best_bound: Some(26.384),
                certified_gap_pct: None,
                lp_bound: Some(22.5921),
                lp_status: Some("budget_exhausted".into()),
            },
            BoundRow {
                workload: "tmax".into(),
                resource: "cpu".into(),
                lp_status: Some("skipped".into()),
                ..BoundRow::default()
            },
        ];
        let md = resource_hours(&rows);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines.last(),
            Some(&""),
            "the section ends with a blank line"
        );
        assert_eq!(
            lines[lines.len() - 3..lines.len() - 1],
            [
                "| tmax | gpu | 70.295 | 66.767 | - | 58.957 | 12.880 | 357.74 | 26.384 | - | 22.592 (budget exhausted) |",
                "| tmax | cpu | - | - | - | - | - | - | - | - | skipped |",
            ]
        );
    }

    /// A workload whose `best_joint` reaches both bests coexists (named); one whose bests
    /// sit in different schedules does not, with the study's caution; a value a hair above
    /// the best (beyond the tie rule) does not reach it.
    #[test]
    fn coexistence_lines_follow_joint_schedules() {
        let row = |w: &str, s: &str, gpu: &str, cache: &str| -> Vec<String> {
            [w, s, gpu, cache].iter().map(|x| x.to_string()).collect()
        };
        let t = Table {
            path: "run/joint_schedules.csv".into(),
            header: ["workload", "schedule", "gpu_ideal_h", "cache_ideal_h"]
                .iter()
                .map(|x| x.to_string())
                .collect(),
            rows: vec![
                row("tmax", "best_gpu", "60", "9"),
                row("tmax", "best_cache", "61", "8"),
                row("tmax", "best_joint", "60.00000000001", "8"),
                row("deepswe", "best_gpu", "300", "60"),
                row("deepswe", "best_cache", "310", "50"),
                row("deepswe", "best_joint", "300.001", "50"),
            ],
        };
        let md = coexistence(&t).unwrap();
        let lines: Vec<&str> = md.lines().filter(|l| l.starts_with("- ")).collect();
        assert_eq!(
            lines,
            [
                "- tmax: the best GPU and cache values found coexist (best GPU 60.000 h, best cache 8.000 h), in `best_joint`.",
                "- deepswe: the best GPU and cache values found do **not** coexist in a selected schedule (best GPU 300.000 h, best cache 50.000 h); this does not prove a joint optimum impossible.",
            ]
        );
        let missing = Table {
            header: vec!["workload".into()],
            ..t
        };
        assert_eq!(
            coexistence(&missing).unwrap_err().to_string(),
            "run/joint_schedules.csv: has no `schedule` column"
        );
    }

    #[test]
    fn the_caveats_name_each_point_of_the_study() {
        let md = caveats();
        for needle in [
            "eight task groups of four attempts",
            "32 individual attempt slots",
            "pausing Docker alone does not free RAM",
            "safe suspension",
            "changing the real concurrency could change",
            "rerun failures or change scoring",
        ] {
            assert!(md.contains(needle), "{needle}");
        }
    }

    #[test]
    fn selected_schedules_names_a_missing_column() {
        let t = Table {
            path: "run/joint_schedules.csv".into(),
            header: vec!["workload".into(), "schedule".into()],
            rows: vec![],
        };
        let e = selected_schedules(&t).unwrap_err().to_string();
        assert_eq!(e, "run/joint_schedules.csv: has no `makespan_s` column");
    }

    /// Hostile strings in a detail, a flagged reason, an attempt id and a CSV cell: the
    /// Markdown rows keep their column count, and the HTML has no raw markup from them.
    #[test]
    fn hostile_strings_are_escaped_in_markdown_and_html() {
        let ex = exclusions(&[exclusion("tmax", HOSTILE, "execution_exception", HOSTILE)]);
        let row = ex.lines().find(|l| l.starts_with("| tmax")).unwrap();
        assert_eq!(cells(row), 4, "{row}");

        let ws = BTreeMap::from([(
            "tmax".to_string(),
            WorkloadAudit {
                flagged: BTreeMap::from([(HOSTILE.to_string(), HOSTILE.to_string())]),
                ..Default::default()
            },
        )]);
        let fl = flagged(&ws);

        let header: Vec<String> = replay::schemas::JOINT_SCHEDULES
            .columns
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        let mut cells_in = vec![String::from("1.0"); 9];
        cells_in[1] = HOSTILE.into();
        cells_in[8] = HOSTILE.into();
        let joint = Table {
            path: "joint_schedules.csv".into(),
            header,
            rows: vec![cells_in],
        };
        let sel = selected_schedules(&joint).unwrap();
        let row = sel.lines().rfind(|l| !l.is_empty()).unwrap();
        assert_eq!(cells(row), 9, "{row}");

        let md = [ex, fl, sel].concat();
        let html = md_to_html(&md);
        for raw in ["<script", "</script", "<a ", "<em>", "<h1>", "href="] {
            assert!(!html.contains(raw), "raw `{raw}` in {html}");
        }
        // The strings are there, as text (pulldown-cmark leaves `"` as it is in text):
        // once per table cell or list part.
        let text = "&lt;script&gt;alert(\"x\")&lt;/script&gt; it's A&amp;B | *x* `tick` \\ [l](javascript:y) # _u_ a\\|b";
        assert_eq!(html.matches(text).count(), 6, "{html}");
        // The table rows keep their columns in the HTML too.
        assert_eq!(html.matches("<td").count(), 4 + 9, "{html}");
        assert_eq!(
            html.matches("<th").count() - html.matches("<thead").count(),
            4 + 9
        );
    }
}
