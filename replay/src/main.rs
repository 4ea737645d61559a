//! `replay`: the replay stage's command line. Parses arguments, calls the library, prints a
//! summary or `error: ...` with `Caused by:` lines, and exits non-zero on failure.

use anyhow::Context;
use clap::{Parser, Subcommand};
use model::exit::Failure;
use std::path::PathBuf;
use std::process::ExitCode;

/// Replays the audited attempts: FIFO baseline, resource-hour accounting, bounds, a seeded
/// schedule search and an independent validator.
#[derive(Debug, Parser)]
#[command(name = "replay", version, about, long_about = None)]
struct Cli {
    /// The pipeline.yaml (required unless a subcommand is given).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Threads of the search's pool (results do not depend on it).
    #[arg(long, value_parser = model::threads::parse_thread_count)]
    threads: Option<usize>,
    /// Replace files the replay writes (its frames, `replay.json`, `replay.run.json`) in a
    /// directory no command of this toolkit has written to.
    #[arg(long)]
    force: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate every schedule of a schedules file against the audit frames.
    Validate {
        /// schedules.parquet (or a CSV with columns workload,schedule,attempt_id,start_s,end_s).
        #[arg(long)]
        schedules: PathBuf,
        /// The pipeline.yaml naming the run directory.
        #[arg(long, default_value = "pipeline.yaml")]
        config: PathBuf,
        /// Validate only the schedules the file holds; by default every selected schedule
        /// of every configured workload must be present.
        #[arg(long)]
        partial: bool,
    },
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Some(Command::Validate {
            schedules,
            config,
            partial,
        }) => {
            let cfg = model::load_config(&config)?;
            let coverage = if partial {
                replay::validate::FileCoverage::AsGiven
            } else {
                replay::validate::FileCoverage::EverySelected
            };
            let checks = replay::validate::validate_schedules_file(&cfg, &schedules, coverage)
                .with_context(|| format!("validating {}", schedules.display()))?;
            for c in checks {
                model::outln!(
                    "ok {}/{}: {} attempts, makespan {} s (deadline {} s), ideal cpu {} h, ram {} h, gpu {} h, cache {} h",
                    c.workload,
                    c.schedule,
                    c.rows,
                    c.values.makespan_s,
                    c.deadline_s,
                    c.values.cpu_h,
                    c.values.ram_h,
                    c.values.gpu_h,
                    c.values.cache_h
                );
            }
            Ok(())
        }
        None => {
            let config = cli
                .config
                .context("missing --config pipeline.yaml (or a subcommand)")
                .map_err(Failure::refused)?;
            let cfg = model::load_config(&config)?;
            let written = model::stage::written_files(&replay::ReplayStage, &cfg);
            model::run_dir::refuse_foreign_files(&cfg.run_dir, &written, cli.force, |_, _| false)?;
            let opts = replay::ReplayOptions {
                threads: cli.threads,
            };
            let report = replay::run(&cfg, &opts)
                .map_err(|e| Failure::of(e).context(format!("replay of {}", config.display())))?;
            for w in &report.workloads {
                model::outln!(
                    "{}: {} attempts, deadline {} s, {} candidates",
                    w.workload,
                    w.attempts,
                    w.deadline_s,
                    w.candidates_evaluated
                );
                for s in &w.selected {
                    model::outln!(
                        "  {:<13} makespan {:>12.3} s  gpu {:>10.3} h  cache {:>10.3} h  ({})",
                        s.schedule,
                        s.makespan_s,
                        s.ideal.gpu,
                        s.ideal.cache,
                        s.found_by
                    );
                }
            }
            for p in &report.outputs {
                model::outln!("wrote {}", p.display());
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    model::exit::finish(run(Cli::parse()))
}
