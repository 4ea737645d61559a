//! `pipeline run`: ingest, audit, replay and report in order, skipping unchanged stages,
//! then `provenance.json` and `run.json`.

use crate::provenance;
use crate::stages::{
    STAGES, StageOutcome, StageRecord, can_skip, fingerprint, hash_outputs, read_record,
    stage_outputs, timed, write_record,
};
use anyhow::{Context, Result, anyhow};
use model::LoadedConfig;
use model::run_dir::RunDir;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The embedded default run (the repository's `pipeline.yaml`).
pub const EMBEDDED_PIPELINE_YAML: &str = include_str!("../../pipeline.yaml");
/// Where the embedded run expects (and generates) its demo corpus.
pub const EMBEDDED_CORPUS_DIR: &str = "runs/demo-corpus";

/// Choices of one `pipeline run`.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Rerun every stage even if unchanged.
    pub force: bool,
    /// Ingest from the store alone.
    pub offline: bool,
    /// Worker threads for audit and replay (results do not depend on it).
    pub threads: Option<usize>,
    /// No progress output.
    pub quiet: bool,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// The config file.
    pub config: PathBuf,
    /// The run directory.
    pub run_dir: PathBuf,
    /// Each stage.
    pub stages: Vec<StageOutcome>,
    /// Headline figures per workload (cohort counts from `audit.json`).
    pub workloads: BTreeMap<String, serde_json::Value>,
}

/// Load the embedded default config, generating the demo corpus under `base` if absent.
pub fn embedded_config(base: &Path, quiet: bool) -> Result<LoadedConfig> {
    let corpus = base.join(EMBEDDED_CORPUS_DIR);
    if !corpus.join("manifest.csv").is_file() {
        if !quiet {
            eprintln!(
                "pipeline: generating the demo corpus in {} (full scale, seed {})",
                corpus.display(),
                demo::DEFAULT_SEED
            );
        }
        demo::generate(&corpus, demo::Scale::Full, demo::DEFAULT_SEED)
            .with_context(|| format!("writing the demo corpus to {}", corpus.display()))?;
    }
    Ok(model::config::load_config_str(
        &base.join("pipeline.yaml"),
        EMBEDDED_PIPELINE_YAML,
    )?)
}

struct Progress {
    quiet: bool,
}

impl ingest::ProgressSink for Progress {
    fn begin(&self, archives: u64, bytes: u64) {
        if !self.quiet {
            eprintln!("ingest: {archives} archives, up to {bytes} bytes to verify");
        }
    }
    fn archive_done(&self, archive_id: &str, status: &str) {
        if !self.quiet && status != "verified" && status != "in_store" {
            eprintln!("ingest: {archive_id}: {status}");
        }
    }
    fn note(&self, line: &str) {
        if !self.quiet {
            eprintln!("ingest: {line}");
        }
    }
}

/// Run every stage of `cfg`.
pub fn run_all(cfg: &LoadedConfig, opts: &RunOptions) -> Result<RunSummary> {
    let run = RunDir::new(&cfg.run_dir);
    std::fs::create_dir_all(run.root())
        .with_context(|| format!("cannot create {}", run.root().display()))?;
    let _lock = model::RunLock::acquire(run.root(), "pipeline run")?;
    refuse_foreign_files(cfg, &run, opts.force)?;
    // Leftovers of a killed earlier run go even when every stage is then skipped.
    ingest::store::remove_leftovers(run.root())?;
    let started = chrono::Utc::now();
    let mut outcomes = Vec::new();
    let mut prior: BTreeMap<String, String> = BTreeMap::new();
    for stage in STAGES {
        let fp = fingerprint(cfg, stage, &prior);
        let say = |msg: &str| {
            if !opts.quiet {
                eprintln!("{stage}: {msg}");
            }
        };
        if !opts.force && can_skip(&run, stage, &fp) {
            let rec = read_record(&run, stage).expect("can_skip read it");
            say("inputs and config unchanged, skipped");
            outcomes.push(StageOutcome {
                stage: stage.into(),
                skipped: true,
                seconds: 0.0,
                summary: "unchanged, skipped".into(),
            });
            prior = rec.outputs;
            continue;
        }
        say("running");
        let spinner = stage_spinner(stage, opts.quiet);
        let result = timed(|| run_stage(stage, cfg, opts));
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        let (summary, seconds) = result?;
        let outputs = hash_outputs(&run, &stage_outputs(stage, cfg))?;
        write_record(
            &run,
            &StageRecord {
                format_version: model::run_dir::JSON_FORMAT_VERSION,
                stage: stage.into(),
                fingerprint: fp,
                outputs: outputs.clone(),
            },
        )?;
        say(&summary);
        outcomes.push(StageOutcome {
            stage: stage.into(),
            skipped: false,
            seconds,
            summary,
        });
        prior = outputs;
    }
    provenance::write_provenance(cfg, &run)?;
    provenance::write_run_json(cfg, &run, started, &outcomes)?;
    Ok(RunSummary {
        config: cfg.path.clone(),
        run_dir: cfg.run_dir.clone(),
        stages: outcomes,
        workloads: headline_from_files(&run),
    })
}

/// The files directly below `run_dir` a run writes besides the stages' outputs.
const RUN_FILES: [&str; 6] = [
    provenance::CONFIG_SNAPSHOT,
    provenance::PROVENANCE_FILE,
    provenance::RUN_JSON_FILE,
    replay::output::REPLAY_JSON_FILE,
    ingest::RUN_JSON_FILE,
    replay::output::RUN_JSON_FILE,
];

/// A run directory is this toolkit's once `.stages/` exists (created before the first
/// stage of the first run, so a run killed early still owns it). Otherwise any file a run
/// would write that is already there belongs to someone else (`run_dir: .` beside a user's
/// own `pipeline.yaml`, say) and is not replaced without `--force`; a config snapshot equal
/// to the config being run is not a conflict.
fn refuse_foreign_files(cfg: &LoadedConfig, run: &RunDir, force: bool) -> Result<()> {
    let stages_dir = run.root().join(".stages");
    if !force && !stages_dir.is_dir() {
        let ours = provenance::config_text(cfg)?;
        let foreign: Vec<String> = STAGES
            .iter()
            .flat_map(|s| crate::stages::stage_files(s))
            .chain(RUN_FILES)
            .filter(|name| {
                let path = run.file(name);
                path.exists()
                    && !(*name == provenance::CONFIG_SNAPSHOT
                        && std::fs::read_to_string(&path).ok().as_deref() == Some(ours.as_str()))
            })
            .map(str::to_string)
            .collect();
        if !foreign.is_empty() {
            return Err(anyhow!(
                "run directory {} already holds {} that no run wrote there (it has no .stages/): {}; \
                 pass --force to replace them, or choose another run_dir",
                run.root().display(),
                if foreign.len() == 1 {
                    "a file"
                } else {
                    "files"
                },
                foreign.join(", ")
            ));
        }
    }
    std::fs::create_dir_all(&stages_dir)
        .with_context(|| format!("cannot create {}", stages_dir.display()))?;
    Ok(())
}

/// A spinner with elapsed time while a stage runs, on a terminal only.
fn stage_spinner(stage: &str, quiet: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .expect("valid template"),
    );
    pb.set_message(format!("{stage} running"));
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(pb)
}

fn run_stage(stage: &str, cfg: &LoadedConfig, opts: &RunOptions) -> Result<String> {
    match stage {
        "ingest" => {
            let mut io = ingest::IngestOptions::from_process_env();
            io.offline = opts.offline;
            io.progress = Arc::new(Progress { quiet: opts.quiet });
            let r = ingest::run(cfg, &io).context("ingest failed")?;
            Ok(r.summary_line())
        }
        "audit" => {
            let r = audit::run(
                cfg,
                &audit::AuditOptions {
                    threads: opts.threads,
                },
            )
            .context("audit failed")?;
            let parts: Vec<String> = r
                .document
                .workloads
                .iter()
                .map(|(w, s)| {
                    format!(
                        "{w} {}/{} included ({} pilot)",
                        s.included, s.audited, s.pilot
                    )
                })
                .collect();
            Ok(format!(
                "cohort matches pipeline.yaml: {}",
                parts.join(", ")
            ))
        }
        "replay" => {
            let r = replay::run(
                cfg,
                &replay::ReplayOptions {
                    threads: opts.threads,
                },
            )
            .context("replay failed")?;
            let parts: Vec<String> = r
                .workloads
                .iter()
                .map(|w| {
                    format!(
                        "{} D={:.0}s, {} candidates, {} schedules validated",
                        w.workload,
                        w.deadline_s,
                        w.candidates_evaluated,
                        w.selected.iter().filter(|s| s.validated).count()
                    )
                })
                .collect();
            Ok(parts.join("; "))
        }
        "report" => {
            let r = report::write_report(cfg).context("report failed")?;
            Ok(format!("wrote {}", r.display()))
        }
        other => Err(anyhow!("unknown stage {other}")),
    }
}

fn headline_from_files(run: &RunDir) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(run.file("audit.json"))
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
        && let Some(ws) = v["workloads"].as_object()
    {
        for (w, s) in ws {
            out.insert(
                w.clone(),
                serde_json::json!({"audited": s["audited"], "included": s["included"], "pilot": s["pilot"]}),
            );
        }
    }
    out
}

/// The terminal summary: stages, then per workload and resource the resource-hours table.
pub fn summary_table(s: &RunSummary) -> Result<String> {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "\nstage    status    seconds  summary");
    for st in &s.stages {
        let _ = writeln!(
            out,
            "{:<8} {:<9} {:>7.2}  {}",
            st.stage,
            if st.skipped { "skipped" } else { "ran" },
            st.seconds,
            st.summary
        );
    }
    let run = RunDir::new(&s.run_dir);
    let bounds = run.file("bounds.parquet");
    if let Ok(df) = frames::read_frame(&bounds, "bounds", model::run_dir::FRAME_SCHEMA_VERSION) {
        // The table is a convenience: a column this build does not know shows as blanks.
        let col_s = |c: &str| -> Vec<String> {
            frames::str_values(&df, &bounds, c)
                .map(|v| v.into_iter().map(Option::unwrap_or_default).collect())
                .unwrap_or_default()
        };
        let col_f = |c: &str| frames::f64_values(&df, &bounds, c).unwrap_or_default();
        let (w, r) = (col_s("workload"), col_s("resource"));
        let (fh, fi, bf, lb, gp) = (
            col_f("fifo_holding_h"),
            col_f("fifo_ideal_h"),
            col_f("best_found_h"),
            col_f("lower_bound_h"),
            col_f("gap_pct"),
        );
        let (vb, cg) = (col_f("best_bound_h"), col_f("certified_gap_pct"));
        let f = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "\nworkload resource  FIFO-holding   FIFO-ideal   best-found  lower-bound    gap%   best-bound  cert-gap%"
        );
        for i in 0..w.len() {
            let _ = writeln!(
                out,
                "{:<8} {:<8} {:>13} {:>12} {:>12} {:>12} {:>7} {:>12} {:>10}",
                w[i],
                r[i],
                f(fh[i]),
                f(fi[i]),
                f(bf[i]),
                f(lb[i]),
                f(gp[i]),
                f(vb.get(i).copied().flatten()),
                f(cg.get(i).copied().flatten())
            );
        }
    }
    let _ = writeln!(out, "\nreport: {}", run.file(report::REPORT_HTML).display());
    Ok(out)
}
