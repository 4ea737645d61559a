//! `pipeline run`: ingest, audit, replay and report in order, skipping unchanged stages,
//! then `provenance.json` and `run.json`.

use crate::provenance;
use crate::stages::{
    HashedOutputs, REASON_LINES, STAGE_RECORD_VERSION, STAGES, StageOutcome, StageRecord, decide,
    fingerprint, hash_outputs, reason_lines, timed, utc_seconds, write_record,
};
use anyhow::{Context, Result};
use model::LoadedConfig;
use model::run_dir::RunDir;
use replay::published::FigureCheck;
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
    /// With `offline`: use stored bytes for locations that never delivered them.
    pub accept_unchecked: bool,
    /// Worker threads for audit and replay (results do not depend on it).
    pub threads: Option<usize>,
    /// No progress output.
    pub quiet: bool,
    /// Stages that ran as shards are merged from them instead of run here.
    pub from_shards: bool,
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
    /// The published figures of `pipeline.yaml` against the rerun.
    pub published: Vec<FigureCheck>,
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

/// Load the embedded default config when its demo corpus exists under `base` (a command
/// that writes nothing, such as `status`, does not generate it).
pub fn embedded_config_if_generated(base: &Path) -> Result<LoadedConfig> {
    let corpus = base.join(EMBEDDED_CORPUS_DIR);
    anyhow::ensure!(
        corpus.join("manifest.csv").is_file(),
        "the embedded demo run has no corpus in {} yet (`pipeline run` generates it)",
        corpus.display()
    );
    Ok(model::config::load_config_str(
        &base.join("pipeline.yaml"),
        EMBEDDED_PIPELINE_YAML,
    )?)
}

/// Progress lines on standard error, prefixed by the stage (none when quiet).
struct Progress {
    quiet: bool,
}

impl model::stage::StageProgress for Progress {
    fn note(&self, stage: &str, line: &str) {
        if !self.quiet {
            eprintln!("{stage}: {line}");
        }
    }
}

/// Run every stage of `cfg`.
pub fn run_all(cfg: &LoadedConfig, opts: &RunOptions) -> Result<RunSummary> {
    let run = RunDir::new(&cfg.run_dir);
    std::fs::create_dir_all(run.root())
        .with_context(|| format!("cannot create {}", run.root().display()))?;
    // Checked before the lock, which leaves `.lock` and so marks the directory as ours.
    refuse_foreign_files(cfg, &run, opts.force)?;
    let _lock = model::RunLock::acquire(run.root(), "pipeline run")?;
    let stages_dir = run.root().join(".stages");
    model::run_dir::create_dir_below(run.root(), ".stages")
        .with_context(|| format!("cannot create {}", stages_dir.display()))?;
    // Leftovers of a killed earlier run go even when every stage is then skipped.
    ingest::store::remove_leftovers(run.root())?;
    let started = chrono::Utc::now();
    let mut outcomes = Vec::new();
    // Output hashes of the stages so far (recorded when run or checked for a skip).
    let mut known: BTreeMap<String, String> = BTreeMap::new();
    let ctx = model::StageContext {
        offline: opts.offline,
        accept_unchecked: opts.accept_unchecked,
        threads: opts.threads,
        progress: Arc::new(Progress { quiet: opts.quiet }),
    };
    for stage in STAGES {
        let name = stage.name();
        let decision = decide(cfg, stage, &known, &BTreeMap::new(), &run, opts.force)?;
        let say = |msg: &str| {
            if !opts.quiet {
                eprintln!("{name}: {msg}");
            }
        };
        let record = |outputs: &HashedOutputs, times: (String, String)| StageRecord {
            format_version: STAGE_RECORD_VERSION,
            stage: name.into(),
            fingerprint: fingerprint(name, &decision.inputs),
            inputs: decision.inputs.clone(),
            outputs: outputs.sha256.clone(),
            output_stats: outputs.stats.clone(),
            started_utc: times.0,
            finished_utc: times.1,
        };
        if decision.up_to_date() {
            // Outputs that had to be read are stamped again, so the next check trusts
            // them by their file status; the record keeps when its outputs were written.
            if decision.trusted_by_status < decision.outputs.sha256.len()
                && let Some(old) = &decision.recorded
            {
                let times = (old.started_utc.clone(), old.finished_utc.clone());
                write_record(&run, &record(&decision.outputs, times))?;
            }
            say("inputs and config unchanged, skipped");
            outcomes.push(StageOutcome {
                stage: name.into(),
                skipped: true,
                seconds: 0.0,
                summary: "unchanged, skipped".into(),
                reasons: Vec::new(),
                started_utc: None,
                finished_utc: None,
            });
            known.extend(decision.outputs.sha256);
            continue;
        }
        for line in reason_lines(&decision.reasons, REASON_LINES) {
            say(&format!("runs: {line}"));
        }
        say("running");
        let stage_started = utc_seconds(chrono::Utc::now());
        let spinner = stage_spinner(name, opts.quiet);
        let result = timed(|| {
            let merged = if opts.from_shards {
                stage.merge_shards(cfg, &ctx)
            } else {
                None
            };
            Ok(merged.unwrap_or_else(|| stage.run(cfg, &ctx))?)
        });
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        let (summary, seconds) = result?;
        let stage_finished = utc_seconds(chrono::Utc::now());
        let outputs = hash_outputs(&run, &stage.outputs(cfg))?;
        write_record(
            &run,
            &record(&outputs, (stage_started.clone(), stage_finished.clone())),
        )?;
        say(&summary);
        outcomes.push(StageOutcome {
            stage: name.into(),
            skipped: false,
            seconds,
            summary,
            reasons: decision.reasons.clone(),
            started_utc: Some(stage_started),
            finished_utc: Some(stage_finished),
        });
        known.extend(outputs.sha256);
    }
    let published = replay::published::check_run(cfg).context("checking the published figures")?;
    provenance::write_provenance(cfg, &run)?;
    provenance::write_run_json(cfg, &run, started, &outcomes, &published)?;
    Ok(RunSummary {
        config: cfg.path.clone(),
        run_dir: cfg.run_dir.clone(),
        stages: outcomes,
        workloads: headline_from_files(&run)?,
        published,
    })
}

/// The figures out of tolerance, as one line for the exit message (None: all reproduced).
pub fn published_failures(s: &RunSummary) -> Option<String> {
    let bad: Vec<String> = s
        .published
        .iter()
        .filter(|c| !c.ok)
        .map(|c| {
            format!(
                "{} (rerun {}, published {})",
                c.name(),
                c.rerun.map_or("missing".into(), |x| format!("{x:.4}")),
                c.published
            )
        })
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "{} published figure(s) not reproduced: {}",
            bad.len(),
            bad.join("; ")
        )
    })
}

/// The files directly below `run_dir` the pipeline itself writes (the stages' outputs and
/// run facts come from the registry).
const PIPELINE_FILES: [&str; 3] = [
    provenance::CONFIG_SNAPSHOT,
    provenance::PROVENANCE_FILE,
    provenance::RUN_JSON_FILE,
];

/// Every file a run of `cfg` writes below the run directory, store and `.stages/` aside.
pub fn run_files(cfg: &LoadedConfig) -> Vec<String> {
    STAGES
        .iter()
        .flat_map(|s| model::stage::written_files(*s, cfg))
        .chain(PIPELINE_FILES.iter().map(|f| f.to_string()))
        .collect()
}

/// Files a run would write that are already in a directory no command of this toolkit has
/// written to (`run_dir: .` beside a user's own `pipeline.yaml`, say) are not replaced
/// without `--force`; a config snapshot equal to the config being run is not a conflict.
/// The lock (and `.stages/`) are created before the first stage, so a run killed early
/// still owns the directory.
fn refuse_foreign_files(cfg: &LoadedConfig, run: &RunDir, force: bool) -> Result<()> {
    model::run_dir::refuse_foreign_files(run.root(), &run_files(cfg), force, |name, path| {
        name == provenance::CONFIG_SNAPSHOT
            && std::fs::read_to_string(path).ok().as_deref() == Some(cfg.text.as_str())
    })?;
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

/// Cohort counts per workload from `audit.json` (read through its type), when present.
fn headline_from_files(run: &RunDir) -> Result<BTreeMap<String, serde_json::Value>> {
    let path = run.file(audit::output::AUDIT_JSON_FILE);
    if !path.is_file() {
        return Ok(BTreeMap::new());
    }
    let doc = audit::output::read_audit_json(&path)?;
    Ok(doc
        .workloads
        .iter()
        .map(|(w, s)| {
            (
                w.clone(),
                serde_json::json!({"audited": s.audited, "included": s.included, "pilot": s.pilot}),
            )
        })
        .collect())
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
    use replay::schemas::BOUNDS;
    let bounds = run.file(&replay::schemas::file_of(&BOUNDS));
    if bounds.is_file() {
        let df = frames::read_declared(&bounds, &BOUNDS, model::run_dir::FRAME_SCHEMA_VERSION)?;
        let col_s = |c: &str| -> Result<Vec<String>> {
            Ok(frames::str_values(&df, &bounds, c)?
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect())
        };
        let col_f = |c: &str| frames::f64_values(&df, &bounds, c);
        let (w, r) = (
            col_s(const { BOUNDS.column("workload") })?,
            col_s(const { BOUNDS.column("resource") })?,
        );
        let (fh, fi, bf, lb, gp) = (
            col_f(const { BOUNDS.column("fifo_holding_h") })?,
            col_f(const { BOUNDS.column("fifo_ideal_h") })?,
            col_f(const { BOUNDS.column("best_found_h") })?,
            col_f(const { BOUNDS.column("lower_bound_h") })?,
            col_f(const { BOUNDS.column("gap_pct") })?,
        );
        let (vb, cg) = (
            col_f(const { BOUNDS.column("best_bound_h") })?,
            col_f(const { BOUNDS.column("certified_gap_pct") })?,
        );
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
                f(vb[i]),
                f(cg[i])
            );
        }
    }
    if !s.published.is_empty() {
        let _ = writeln!(
            out,
            "\npublished figure               published                     rerun      delta  relative  ok"
        );
        for c in &s.published {
            let [rerun, delta, relative] = c.value_cells();
            let _ = writeln!(
                out,
                "{:<30} {:<28} {rerun:>9} {delta:>10} {relative:>9}  {}",
                c.name(),
                c.published,
                if c.ok { "yes" } else { "NO" }
            );
        }
    }
    let _ = writeln!(out, "\nreport: {}", run.file("report.html").display());
    Ok(out)
}
