//! `ingest --config pipeline.yaml [--offline] [--parallel N] [--quiet]`: fetch and verify
//! every archive (SPEC 2.1). Parses arguments, calls [`ingest::run`], maps errors to exit
//! codes: 1 for failed archives or I/O, 2 for usage and configuration errors.

mod cli_progress;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Fetch every archive of the manifest from its pinned locations and verify it.
#[derive(Debug, Parser)]
#[command(name = "ingest", version)]
struct Args {
    /// The run's pipeline.yaml.
    #[arg(long, required_unless_present = "print_ledger_schema")]
    config: Option<PathBuf>,
    /// Use only the verified store; contact no location.
    #[arg(long)]
    offline: bool,
    /// Archives fetched at once (default: `ingest.parallel` of the config).
    #[arg(long, value_parser = model::threads::parse_thread_count)]
    parallel: Option<usize>,
    /// No progress output, only errors and the final line.
    #[arg(long)]
    quiet: bool,
    /// Replace files this command writes (the ledger, `ingest.run.json`) in a directory no
    /// command of this toolkit has written to.
    #[arg(long)]
    force: bool,
    /// Print the ledger frame's JSON schema and exit.
    #[arg(long, hide = true)]
    print_ledger_schema: bool,
}

fn print_error(e: &anyhow::Error) {
    eprintln!(
        "{}",
        model::error_chain::render_error_chain(&**e, model::error_chain::CauseLayout::Inline)
    );
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    if args.print_ledger_schema {
        print!(
            "{}",
            ingest::ledger::LEDGER.json_schema_text(model::run_dir::FRAME_SCHEMA_VERSION)
        );
        return ExitCode::SUCCESS;
    }
    let config = args.config.expect("clap requires --config");
    let cfg = match model::load_config(&config) {
        Ok(c) => c,
        Err(e) => {
            print_error(&anyhow::Error::new(e));
            return ExitCode::from(2);
        }
    };
    let written = model::stage::written_files(&ingest::IngestStage, &cfg);
    if let Err(e) =
        model::run_dir::refuse_foreign_files(&cfg.run_dir, &written, args.force, |_, _| false)
    {
        print_error(&anyhow::Error::new(e));
        return ExitCode::from(2);
    }
    let opts = ingest::IngestOptions {
        offline: args.offline,
        parallel: args.parallel,
        progress: Arc::new(cli_progress::CliProgress::new(args.quiet)),
        ..ingest::IngestOptions::from_process_env()
    };
    match ingest::run(&cfg, &opts) {
        Ok(report) => {
            println!("ingest: {}", report.summary_line());
            ExitCode::SUCCESS
        }
        Err(e) => {
            let code = e.exit_code() as u8;
            print_error(&anyhow::Error::new(e));
            ExitCode::from(code)
        }
    }
}
