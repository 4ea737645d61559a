//! `audit`: the audit stage's command line (arguments, exit codes, error rendering).

use anyhow::Context;
use clap::{Parser, Subcommand};
use model::exit::Failure;
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
    /// Audit only shard I of N (`I/N`, 0-based) of the manifest's archives, writing its
    /// parts below `run_dir/shards/I-of-N/`; then `audit --config F merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<model::shard::Shard>,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Merge the finished shards' parts into the frames and `audit.json`, byte-identical
    /// to a one-process audit (refused when a shard is missing, of another count, or ran
    /// another config or manifest).
    Merge,
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
    /// Show how one attempt's figures derive from its archive's bytes, and check them
    /// against the frames.
    ///
    /// Reads `attempts.parquet` to find the attempt, streams its one archive from the
    /// verified store (re-checking its SHA256 and size against the manifest), re-derives the
    /// attempt with the audit's own code and prints: identity; lifetime (the identity file's
    /// mtime and `completed_utc` as written); cohort outcome (exclusion reason and detail,
    /// termination, flag, pilot, other copies); one line per kept request interval with each
    /// request's start member and mtime as written, its timer line, and its interval before
    /// and after clipping (seconds after the generation start); every clipping record with
    /// the request lines it touched; and whether the attempt's rows in attempts, requests,
    /// clipping and exclusions.parquet equal the re-derivation.
    ///
    /// An excluded attempt is shown the same way: its exclusion record and whatever evidence
    /// exists (an attempt without a readable generation start or timers file has no
    /// intervals and no rows in requests or clipping.parquet: its start files and timer
    /// lines are listed without offsets). See docs/FORMAT.md, "Auditing one attempt".
    ///
    /// Exit 0 when consistent, 1 when a frame differs (each difference printed) or the
    /// archive fails verification, 2 for an unknown or ambiguous id (candidates listed).
    Show {
        /// Attempt id.
        #[arg(long)]
        attempt: String,
        /// Workload, when the id is in several workloads.
        #[arg(long)]
        workload: Option<String>,
        /// Archive id, when the id is in several archives (a duplicate).
        #[arg(long)]
        archive: Option<String>,
        /// Print one JSON document (schemas/show.schema.json) instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    model::exit::finish(run(cli))
}

fn run(cli: Cli) -> Result<(), Failure> {
    let cfg = model::load_config(&cli.config)?;
    match cli.command {
        None if cli.shard.is_some() => {
            let shard = cli.shard.expect("checked");
            let archives = audit::run_shard(
                &cfg,
                shard,
                &audit::AuditOptions {
                    threads: cli.threads,
                },
            )
            .map_err(Failure::of)?;
            model::outln!(
                "audit shard {shard}: {}, {} attempts, parts in {}",
                read_totals(&archives),
                archives.iter().map(|a| a.attempts).sum::<usize>(),
                shard.dir(&cfg.run_dir).display()
            );
            Ok(())
        }
        Some(Cmd::Merge) => {
            let r = audit::merge_shards(&cfg).map_err(Failure::of)?;
            print_cohorts(&r);
            Ok(())
        }
        None => {
            let written = model::stage::written_files(&audit::AuditStage, &cfg);
            model::run_dir::refuse_foreign_files(&cfg.run_dir, &written, cli.force, |_, _| false)?;
            let r = audit::run(
                &cfg,
                &audit::AuditOptions {
                    threads: cli.threads,
                },
            )
            .context("audit failed")
            .map_err(Failure::failed)?;
            print_cohorts(&r);
            Ok(())
        }
        Some(Cmd::Extract {
            attempt,
            workload,
            to,
        }) => {
            let (archive, prefix) =
                audit::extract::locate_attempt(&cfg, &attempt, workload.as_deref())
                    .map_err(Failure::of)?;
            let x = audit::extract::extract_attempt(&cfg, &archive, &prefix, &to)
                .map_err(Failure::failed)?;
            model::outln!(
                "extracted {} files of {} from {} into {}",
                x.files.len(),
                prefix,
                archive,
                to.display()
            );
            Ok(())
        }
        Some(Cmd::Show {
            attempt,
            workload,
            archive,
            json,
        }) => {
            let doc =
                audit::show::show_attempt(&cfg, &attempt, workload.as_deref(), archive.as_deref())
                    .map_err(Failure::of)?;
            let text = if json {
                serde_json::to_string_pretty(&doc).expect("show document serializes") + "\n"
            } else {
                audit::show::render_text(&doc)
            };
            // A closed pipe (`| head`) ends the output quietly.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
            if doc.consistent {
                Ok(())
            } else {
                Err(Failure::failed(anyhow::anyhow!(
                    "attempt `{}` as re-derived from archive `{}` differs from the frames in {} value(s)",
                    doc.attempt_id,
                    doc.archive_id,
                    doc.differences.len()
                )))
            }
        }
    }
}

fn print_cohorts(r: &audit::AuditReport) {
    model::outln!("{}", read_totals(&r.archives));
    for (w, s) in &r.document.workloads {
        model::outln!(
            "{w}: {} audited, {} included, {} excluded, {} pilot, {} flagged",
            s.audited,
            s.included,
            s.excluded,
            s.pilot,
            s.flagged.len()
        );
    }
}

/// `N archives read: M members, X MB compressed, Y MB uncompressed` (MB = 10^6 bytes).
fn read_totals(archives: &[audit::ArchiveAudit]) -> String {
    let sum = |f: fn(&audit::archive::ScanStats) -> u64| -> u64 {
        archives.iter().map(|a| f(&a.stats)).sum()
    };
    format!(
        "{} archives read: {} members, {:.1} MB compressed, {:.1} MB uncompressed",
        archives.len(),
        sum(|s| s.members),
        sum(|s| s.compressed_bytes) as f64 / 1e6,
        sum(|s| s.uncompressed_bytes) as f64 / 1e6
    )
}
