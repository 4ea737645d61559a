//! `ingest --config pipeline.yaml [--offline] [--parallel N] [--quiet]`: fetch and verify
//! every archive (docs/INGEST.md). Parses arguments, calls [`ingest::run`], and ends with
//! [`model::exit::finish`]: 1 for failed archives or I/O, 2 for usage and configuration errors.

mod cli_progress;

use clap::Parser;
use model::exit::{Exit, Failure};
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
    /// With --offline: use stored bytes even for locations that never delivered them
    /// (their ledger rows say `unchecked`) instead of failing those archives.
    #[arg(long, requires = "offline")]
    accept_unchecked: bool,
    /// Archives fetched at once (default: `ingest.parallel` of the config).
    #[arg(long, value_parser = model::threads::parse_thread_count)]
    parallel: Option<usize>,
    /// No progress output, only errors and the final line.
    #[arg(long, global = true)]
    quiet: bool,
    /// Replace files this command writes (the ledger, `ingest.run.json`) in a directory no
    /// command of this toolkit has written to.
    #[arg(long)]
    force: bool,
    /// Process only shard I of N (`I/N`, 0-based) of the manifest's archives, writing the
    /// ledger part below `run_dir/shards/I-of-N/`; the store is shared with the other
    /// shards. Then `ingest --config F merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<model::shard::Shard>,
    /// Print the ledger frame's JSON schema and exit.
    #[arg(long, hide = true)]
    print_ledger_schema: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Merge the finished shards' ledger parts into `ledger.parquet` (refused when a shard
    /// is missing, of another count, or ran another config or manifest).
    Merge,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Refused.into()
            } else {
                Exit::Success.into()
            };
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    model::exit::finish(run(args))
}

fn run(args: Args) -> Result<(), Failure> {
    if args.print_ledger_schema {
        model::out!(
            "{}",
            ingest::ledger::LEDGER.json_schema_text(model::run_dir::FRAME_SCHEMA_VERSION)
        );
        return Ok(());
    }
    let config = args.config.expect("clap requires --config");
    let cfg = model::load_config(&config)?;
    if let Some(Command::Merge) = args.command {
        let rows = ingest::engine::merge_shards(&cfg).map_err(Failure::of)?;
        model::outln!(
            "ingest: merged {} ledger rows of {} archives into {}",
            rows.len(),
            cfg.archives.len(),
            cfg.run_dir.join(ingest::LEDGER_FILE).display()
        );
        return Ok(());
    }
    let written = model::stage::written_files(&ingest::IngestStage, &cfg);
    model::run_dir::refuse_foreign_files(&cfg.run_dir, &written, args.force, |_, _| false)?;
    let opts = ingest::IngestOptions {
        offline: args.offline,
        accept_unchecked: args.accept_unchecked,
        parallel: args.parallel,
        progress: Arc::new(cli_progress::CliProgress::new(args.quiet)),
        shard: args.shard,
        ..ingest::IngestOptions::from_process_env()
    };
    let report = ingest::run(&cfg, &opts).map_err(Failure::of)?;
    model::outln!("ingest: {}", report.summary_line());
    Ok(())
}
