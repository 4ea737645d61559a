//! The run report: `report.md` and a self-contained `report.html` (SVG charts inline), built
//! only from the run directory's outputs and with no wall-clock times, so it is re-derivable
//! byte for byte (`pipeline verify` re-derives it).
//!
//! The modules split the job: `data` loads the outputs, `charts` draws the plotters SVG
//! charts, `sections` writes the Markdown sections, `render` turns the Markdown into the
//! HTML page. Every string that comes from the data is escaped where it is interpolated:
//! for Markdown by `render::md_text` (and `render::md_code` inside a code span), for HTML
//! by `render::html_escape` or by pulldown-cmark, whose raw-HTML events the renderer turns
//! into text. The library never prints.

mod charts;
mod data;
mod render;
mod sections;

use model::LoadedConfig;
use model::run_dir::RunDir;
use std::path::PathBuf;

/// The Markdown report's file name in the run directory.
pub const REPORT_MD: &str = "report.md";
/// The HTML report's file name in the run directory.
pub const REPORT_HTML: &str = "report.html";
/// The files the report stage writes, in the order it writes them.
pub const OUTPUTS: [&str; 2] = [REPORT_MD, REPORT_HTML];

/// What the accounting model assumes; printed in every report.
pub const ASSUMPTIONS: &str = "Fixed trace model: every attempt keeps its recorded duration and its model-request intervals relative to its start; scheduling changes only admission. \
The baseline is an offline FIFO admission replay in historical start order with all attempts ready at time 0, not a measurement of the original cluster's wall-clock run. \
\"Ideal\" values assume zero cost to pause and resume sandboxes, offload and restore RAM, transfer model state, and evict and reload image blobs: CPU and RAM are counted only outside model requests, the GPUs only while some request is pending (all of them, as one group), and a blob only while an attempt using it runs. \
FIFO holding values hold CPU and RAM for whole attempts, the GPUs for the whole batch, and each blob from its first use to the batch end. \
Not counted: model-server and harness host CPU/RAM, GPU memory, expanded image layers, writable files, outputs, RAM-offload storage. \
Request time includes queueing, transport and server processing; it is not GPU kernel busy time. \
Lower bounds are bounds, not attained schedules, and different minima need not coexist; joint_schedules.csv lists values that do.";

/// What the study says its own replay model leaves out (the report's caveats section).
pub const CAVEATS: [&str; 5] = [
    "Dispatch: DeepSWE's original dispatch used eight task groups of four attempts each; the replay uses 32 individual attempt slots.",
    "Suspension: the ideal values assume pausing is free, but pausing Docker alone does not free RAM, and background sandbox processes would need safe suspension.",
    "Durations: changing the real concurrency could change the recorded durations and request times; the replay keeps them fixed, which is deliberately outside this first model.",
    "Outcomes: scheduling changes only admission; it does not accelerate model calls, change generated answers, rerun failures or change scoring.",
    "Baseline: the FIFO replay is an offline admission replay with every attempt ready at time 0, not a measurement of the original cluster's wall-clock run.",
];

/// Why the report could not be written; each names the file and the column or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A frame could not be read (the message names the file and the column), or a report
    /// file could not be written (the message names it).
    #[error(transparent)]
    Frame(#[from] frames::FrameError),
    /// `audit.json` could not be read as this build's document (the message names the file
    /// and the field or the versions).
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A CSV file cannot be read (the error says which record).
    #[error("{}: {source}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// The CSV reader's error.
        #[source]
        source: csv::Error,
    },
    /// A CSV file lacks a column the report shows.
    #[error("{}: has no `{column}` column", path.display())]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
    },
    /// replay.json cannot be read for the published figures.
    #[error("cannot check the published figures: {message}")]
    Published {
        /// Why (the error names the file).
        message: String,
    },
    /// plotters could not draw a chart.
    #[error("drawing the chart `{chart}`: {message}")]
    Chart {
        /// The chart's title.
        chart: String,
        /// plotters' error.
        message: String,
    },
}

/// Write `report.md` and `report.html` into the run directory (each atomically: temporary
/// name, fsync, rename); returns the HTML path.
pub fn write_report(cfg: &LoadedConfig) -> Result<PathBuf, ReportError> {
    let run = RunDir::new(&cfg.run_dir);
    let d = data::load(&run)?;
    let md = markdown(cfg, &d)?;
    let search = &cfg.config.search;
    let search = format!(
        "profile {}, effort {}",
        search.profile.name(),
        search
            .effort
            .name()
            .map_or_else(|| format!("x{}", search.effort.factor()), str::to_string)
    );
    let figures = charts::figures(&d, &search)?;
    let md = md + &sections::chart_list(&figures);
    let md_path = run.file(REPORT_MD);
    frames::atomic_write(&md_path, md.as_bytes())?;
    let html = render::page(&md, &figures);
    let html_path = run.file(REPORT_HTML);
    frames::atomic_write(&html_path, html.as_bytes())?;
    Ok(html_path)
}

/// Every Markdown section but the chart list, in the report's order.
fn markdown(cfg: &LoadedConfig, d: &data::RunData) -> Result<String, ReportError> {
    let ledger = d.ledger_summary()?;
    let total_bytes: u64 = cfg.archives.iter().map(|a| a.bytes).sum();
    let workloads = &d.audit.workloads;
    Ok([
        sections::title(
            &cfg.sha256,
            cfg.config.search.seed,
            &cfg.config.search.order,
        ),
        sections::ledger(ledger.as_ref(), total_bytes),
        sections::cohort_audit(workloads),
        sections::exclusions(&d.exclusions()?),
        sections::flagged(workloads),
        sections::clipping(workloads),
        sections::resource_hours(&d.bounds()?),
        sections::published(&replay::published::check_run(cfg).map_err(|e| {
            ReportError::Published {
                message: e.to_string(),
            }
        })?),
        sections::selected_schedules(&d.joint)?,
        sections::coexistence(&d.joint)?,
        sections::assumptions(),
        sections::caveats(),
    ]
    .concat())
}

/// The report stage as the pipeline sees it: it reads the ledger and the audit's and the
/// replay's outputs, and writes `report.md` and `report.html`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReportStage;

/// The stage's name.
pub const STAGE_NAME: &str = "report";

impl model::Stage for ReportStage {
    fn name(&self) -> &'static str {
        STAGE_NAME
    }
    fn about(&self) -> &'static str {
        "report.html / report.md with the figures, charts and the model's assumptions"
    }
    fn config_keys(&self) -> Vec<&'static str> {
        vec!["workloads", "search"]
    }
    fn inputs(&self, cfg: &LoadedConfig) -> Vec<model::StageInput> {
        std::iter::once(ingest::LEDGER_FILE.to_string())
            .chain(audit::output::audit_outputs())
            .chain(replay::ReplayStage.outputs(cfg))
            .map(model::StageInput::File)
            .collect()
    }
    fn outputs(&self, _cfg: &LoadedConfig) -> Vec<String> {
        OUTPUTS.iter().map(|f| f.to_string()).collect()
    }
    fn run(
        &self,
        cfg: &LoadedConfig,
        _ctx: &model::StageContext,
    ) -> Result<String, model::StageError> {
        let html = write_report(cfg).map_err(|e| {
            model::StageError::new(STAGE_NAME, model::stage::FailureKind::Failed, e)
        })?;
        Ok(format!("wrote {}", html.display()))
    }
}
