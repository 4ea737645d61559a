//! `audit`: the audit stage's command line (arguments, exit codes, error rendering).

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Audit verified archives: attempts, request intervals, clipping records, cohort audit.
#[derive(Debug, Parser)]
#[command(name = "audit", version, about)]
struct Cli {
    /// The pipeline.yaml.
    #[arg(long, default_value = "pipeline.yaml", global = true)]
    config: PathBuf,
    /// Worker threads (results do not depend on it).
    #[arg(long, value_parser = model::threads::parse_thread_count)]
    threads: Option<usize>,
    /// Replace files the audit writes (its frames, `audit.json`) in a directory no command
    /// of this toolkit has written to.
    #[arg(long)]
    force: bool,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Materialize one attempt's files, with their original mtimes, into a directory.
    Extract {
        /// Attempt id.
        #[arg(long)]
        attempt: String,
        /// Workload, when the id is ambiguous.
        #[arg(long)]
        workload: Option<String>,
        /// Target directory.
        #[arg(long)]
        to: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, e)) => {
            eprintln!(
                "{}",
                model::error_chain::render_error_chain(&*e, model::error_chain::CauseLayout::Block)
            );
            ExitCode::from(code)
        }
    }
}

fn run(cli: Cli) -> Result<(), (u8, anyhow::Error)> {
    let cfg = model::load_config(&cli.config).map_err(|e| (2, e.into()))?;
    match cli.command {
        None => {
            let written = model::stage::written_files(&audit::AuditStage, &cfg);
            model::run_dir::refuse_foreign_files(&cfg.run_dir, &written, cli.force, |_, _| false)
                .map_err(|e| (2, e.into()))?;
            let r = audit::run(
                &cfg,
                &audit::AuditOptions {
                    threads: cli.threads,
                },
            )
            .context("audit failed")
            .map_err(|e| (1, e))?;
            for (w, s) in &r.document.workloads {
                println!(
                    "{w}: {} audited, {} included, {} excluded, {} pilot, {} flagged",
                    s.audited,
                    s.included,
                    s.excluded,
                    s.pilot,
                    s.flagged.len()
                );
            }
            Ok(())
        }
        Some(Cmd::Extract {
            attempt,
            workload,
            to,
        }) => {
            let (archive, prefix) =
                audit::extract::locate_attempt(&cfg, &attempt, workload.as_deref())
                    .map_err(|e| (1, e.into()))?;
            let x = audit::extract::extract_attempt(&cfg, &archive, &prefix, &to)
                .map_err(|e| (1, e.into()))?;
            println!(
                "extracted {} files of {} from {} into {}",
                x.files.len(),
                prefix,
                archive,
                to.display()
            );
            Ok(())
        }
    }
}
