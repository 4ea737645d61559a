//! Command-line interface of `pipeline`: parsing, dispatch and error rendering.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

pub use model::exit::Failure;

/// Reruns the provenance chain of the agent-workload study: pinned archives -> audited
/// Parquet frames -> schedule replay and search.
#[derive(Debug, Parser)]
#[command(name = "pipeline", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The long help: the chain, one line per stage of the registry.
pub fn long_about() -> String {
    let mut text =
        String::from("Reruns the provenance chain of the agent-workload study, stage by stage:\n");
    for stage in crate::stages::STAGES {
        text.push_str(&format!("  {:<7} {}\n", stage.name(), stage.about()));
    }
    text.push_str(
        "Each stage reads only the config and its declared inputs (the archives, or earlier stages' outputs in the run directory) and is skipped when they are unchanged.",
    );
    text
}

/// Parse the process's arguments (the long help names the registry's stages).
pub fn parse() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().long_about(long_about()).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the deterministic demo corpus (archives, raw shards, manifest, pipeline.yaml,
    /// expected.json), or an instance of the search's zoo (docs/ZOO.md).
    Demo {
        /// Output directory (required unless `--zoo list`).
        #[arg(long, required_unless_present = "zoo")]
        out: Option<PathBuf>,
        /// small (a few dozen attempts), full (the study's cohort), x10 or x100 (ten and a
        /// hundred times the study, more archives of the same size).
        #[arg(long, default_value = "full", value_parser = demo::Scale::NAMES)]
        scale: String,
        /// Seed of the generator.
        #[arg(long, default_value_t = demo::DEFAULT_SEED)]
        seed: u64,
        /// Write the zoo instance NAME instead (its own seed, scale, knobs and caps), or
        /// `list` the instances.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["scale", "seed"])]
        zoo: Option<String>,
        /// Write into an output directory that is not empty (replacing the files the
        /// corpus has, such as an edited pipeline.yaml or manifest.csv).
        #[arg(long)]
        force: bool,
    },
    /// Run ingest -> audit -> replay -> report. With no config: the embedded demo run
    /// (the demo corpus is generated in runs/demo-corpus if absent), offline.
    Run {
        /// The pipeline.yaml (default: the embedded demo run in the current directory).
        config: Option<PathBuf>,
        /// Rerun every stage even when its inputs and config are unchanged.
        #[arg(long)]
        force: bool,
        /// Ingest from the verified store alone; contact no location.
        #[arg(long)]
        offline: bool,
        /// With --offline: use stored bytes even for locations that never delivered them
        /// (their ledger rows say `unchecked`) instead of failing those archives.
        #[arg(long, requires = "offline")]
        accept_unchecked: bool,
        /// Worker threads for audit and replay (results do not depend on it).
        #[arg(long, value_parser = model::threads::parse_thread_count)]
        threads: Option<usize>,
        /// No progress or summary on the terminal (errors still go to stderr).
        #[arg(long)]
        quiet: bool,
        /// Print the run summary as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Ingest and audit ran as shards (`--shard I/N` for every I): merge their finished
        /// shards instead of running those stages here (every part checked against its
        /// shard's record), then run the rest and write provenance as a one-process run
        /// does.
        #[arg(long)]
        from_shards: bool,
    },
    /// Say per stage whether `pipeline run` would run it (`up to date`, `will run`, or `may
    /// run`: only inputs an earlier stage rewrites) and every reason; writes nothing. Exit
    /// 0 when every stage is up to date, 1 otherwise.
    Status {
        /// The pipeline.yaml (default: the embedded demo run in the current directory).
        config: Option<PathBuf>,
        /// Print the status as JSON (schemas/status.schema.json).
        #[arg(long)]
        json: bool,
    },
    /// What differs between two finished runs: build, config keys, archives and pins, every
    /// audit frame row by row (with the `audit show` command of each changed attempt),
    /// cohort and clipping counts, every replay figure with its delta, and every output
    /// file. Exit 0 when equal (another build alone is not a difference), 1 when
    /// different, 2 when a run cannot be read.
    Diff {
        /// The first run directory.
        run_a: PathBuf,
        /// The second run directory.
        run_b: PathBuf,
        /// Print the difference as JSON (schemas/diff.schema.json).
        #[arg(long, conflicts_with = "md")]
        json: bool,
        /// Print the difference as Markdown tables.
        #[arg(long)]
        md: bool,
    },
    /// Walk one output of a finished run back to its archives: the stages that wrote what it
    /// derives from, each with its build and config keys, to the archives with their
    /// SHA256, size, GCS generation and Hub commit. TARGET is FILE, FILE#COLUMN=VALUE[,...]
    /// (the rows of a frame) or replay.json#WORKLOAD.FIGURE (e.g. tmax.best_found_h.gpu).
    Lineage {
        /// The run directory.
        run_dir: PathBuf,
        /// FILE, FILE#COLUMN=VALUE[,COLUMN=VALUE...] or replay.json#WORKLOAD.PATH.
        target: String,
        /// Print the lineage as JSON (schemas/lineage.schema.json).
        #[arg(long)]
        json: bool,
    },
    /// Check a run directory: recompute every output's SHA256 against provenance.json and
    /// re-derive the audit, replay and report outputs from its verified store.
    Verify {
        /// The run directory.
        run_dir: PathBuf,
        /// Only recompute hashes; do not re-derive.
        #[arg(long)]
        hashes_only: bool,
    },
    /// Write a manifest from real sources: list the archives under a GCS prefix (current
    /// generations) and inside a Hub dataset's `.tar` shards (revision resolved to its
    /// commit), stream each once for SHA256 and size, match them to workloads, refuse an
    /// archive whose bytes differ between the two. Writes the manifest and `<stem>.pin.json`.
    Pin {
        /// Objects under this GCS prefix (`STORAGE_EMULATOR_HOST` points at an emulator;
        /// credentials: `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's application-default
        /// login, the metadata server, else anonymous reads; `GOOGLE_CLOUD_QUOTA_PROJECT`
        /// for requester-pays buckets).
        #[arg(long, value_name = "gs://BUCKET/PREFIX")]
        gcs: Option<String>,
        /// The `.tar` shards under PATH of dataset REPO at REVISION (default main)
        /// (`HF_ENDPOINT` points at a mirror; `HF_TOKEN` when set).
        #[arg(long, value_name = "REPO[@REVISION][:PATH]")]
        hf: Option<String>,
        /// An archive whose file name matches GLOB belongs to workload NAME; repeatable,
        /// first match wins. Default: the file name starts with the workload's name.
        #[arg(long = "workload", value_name = "GLOB=NAME")]
        workloads: Vec<String>,
        /// Read only objects whose name below the prefix (a shard member's name in its
        /// shard) matches GLOB; repeatable (`*` matches `/` too).
        #[arg(long, value_name = "GLOB")]
        include: Vec<String>,
        /// Leave out objects whose name below the prefix (a shard member's name) matches
        /// GLOB; repeatable, wins over --include. Left-out objects are listed in the report.
        #[arg(long, value_name = "GLOB")]
        exclude: Vec<String>,
        /// The manifest to write (the report goes beside it as `<stem>.pin.json`, the
        /// shards' member tables into `shard-index/`).
        #[arg(long)]
        out: PathBuf,
        /// Replace the manifest and report if they exist.
        #[arg(long)]
        force: bool,
        /// Retries of a transient fault per request (and resumes of a broken transfer).
        #[arg(long, default_value_t = 3)]
        retries: u32,
        /// Seconds allowed for connecting, and for each wait for more bytes of an answer.
        #[arg(long, default_value_t = 30, value_name = "SECONDS")]
        timeout: u64,
        /// Archives (objects, shards) read at once.
        #[arg(long, default_value_t = 4)]
        parallel: usize,
        /// Print only the summary line.
        #[arg(long)]
        quiet: bool,
    },
    /// Validate a pipeline.yaml and its manifest, and print a summary.
    Check {
        /// The pipeline.yaml.
        config: PathBuf,
    },
    /// Write a finished run's Parquet frames as one Hive-partitioned Parquet dataset
    /// (by workload, and by archive for the frames with a row per attempt or request),
    /// with the frames' schemas and key-value metadata and a manifest of every part with
    /// its SHA256 (docs/ANALYSIS.md, "The partitioned export").
    Export {
        /// The dataset directory to write (absent or empty, unless --force).
        #[arg(long, value_name = "DIR", required_unless_present = "ro_crate")]
        dataset: Option<PathBuf>,
        /// Instead, describe the run as a Workflow Run RO-Crate (Provenance Run Crate
        /// 0.5): `ro-crate-metadata.json` in the run directory, from what the run
        /// recorded (an earlier one is replaced only with --force).
        #[arg(long, conflicts_with = "dataset")]
        ro_crate: bool,
        /// The run directory: a finished run, whose frames are the ones its
        /// provenance.json records.
        run_dir: PathBuf,
        /// Replace an earlier export in DIR (its manifest.json and frame directories;
        /// nothing else there is touched).
        #[arg(long)]
        force: bool,
    },
    /// Write the JSON schemas (pipeline.yaml and every frame) into a directory.
    Schemas {
        /// Output directory.
        #[arg(long, default_value = "schemas")]
        out: PathBuf,
        /// Also write the generated reference pages (CONFIG.md, FRAMES.md) into this
        /// directory (the repository's `docs`).
        #[arg(long)]
        docs: Option<PathBuf>,
    },
}

/// Run a parsed command.
pub fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Demo {
            out,
            scale,
            seed,
            zoo,
            force,
        } => {
            if zoo.as_deref() == Some("list") {
                for i in demo::zoo::zoo()? {
                    model::outln!("{:<18} {}", i.name, i.about);
                }
                return Ok(());
            }
            let Some(out) = out else {
                return Err(Failure::refused(anyhow::anyhow!(
                    "demo --zoo NAME needs --out DIR"
                )));
            };
            refuse_non_empty_out(&out, force)?;
            let s = match &zoo {
                Some(name) => demo::zoo::find(name)
                    .map_err(Failure::refused)?
                    .generate(&out)
                    .with_context(|| {
                        format!("writing zoo instance `{name}` to {}", out.display())
                    })?,
                None => {
                    let scale = demo::Scale::parse(&scale).context("scale")?;
                    demo::generate(&out, scale, seed)
                        .with_context(|| format!("writing the demo corpus to {}", out.display()))?
                }
            };
            model::outln!(
                "wrote {} archives ({} bytes) to {}",
                s.archives.len(),
                s.archives.iter().map(|a| a.bytes).sum::<u64>(),
                out.display()
            );
            for (w, e) in &s.expected {
                model::outln!(
                    "  {w}: {} audited, {} included, {} pilot, {} start files",
                    e.audited,
                    e.included,
                    e.pilot,
                    e.start_files
                );
            }
            model::outln!(
                "run it: pipeline run {}",
                out.join("pipeline.yaml").display()
            );
            Ok(())
        }
        Command::Run {
            config,
            force,
            offline,
            accept_unchecked,
            threads,
            quiet,
            json,
            from_shards,
        } => {
            let opts = crate::run::RunOptions {
                force,
                from_shards,
                // The embedded demo run is offline by construction (file locations only).
                offline,
                accept_unchecked,
                threads,
                quiet: quiet || json,
            };
            let cfg = match config {
                Some(p) => model::load_config(&p)?,
                None => crate::run::embedded_config(&std::env::current_dir()?, opts.quiet)?,
            };
            let summary = crate::run::run_all(&cfg, &opts)?;
            if json {
                model::outln!("{}", serde_json::to_string_pretty(&summary)?);
            } else if !quiet {
                model::out!("{}", crate::run::summary_table(&summary)?);
            }
            match crate::run::published_failures(&summary) {
                Some(line) => Err(Failure::failed(anyhow::anyhow!("{line}"))),
                None => Ok(()),
            }
        }
        Command::Status { config, json } => {
            let cfg = match config {
                Some(p) => model::load_config(&p)?,
                None => crate::run::embedded_config_if_generated(&std::env::current_dir()?)?,
            };
            let doc = crate::status::status(&cfg)?;
            if json {
                model::outln!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                model::out!("{}", crate::status::status_text(&doc));
            }
            if doc.up_to_date {
                Ok(())
            } else {
                Err(Failure::failed(anyhow::anyhow!(
                    "not up to date: {}",
                    crate::status::not_up_to_date(&doc).join(", ")
                )))
            }
        }
        Command::Diff {
            run_a,
            run_b,
            json,
            md,
        } => {
            let d = crate::diff::diff(&run_a, &run_b).map_err(Failure::refused)?;
            if json {
                model::outln!("{}", serde_json::to_string_pretty(&d)?);
            } else if md {
                model::out!("{}", crate::diff::diff_markdown(&d));
            } else {
                model::out!("{}", crate::diff::diff_text(&d));
            }
            if d.equal {
                Ok(())
            } else {
                Err(Failure::failed(anyhow::anyhow!(
                    "{} and {} differ",
                    run_a.display(),
                    run_b.display()
                )))
            }
        }
        Command::Lineage {
            run_dir,
            target,
            json,
        } => {
            let d = crate::lineage::lineage(&run_dir, &target).map_err(Failure::refused)?;
            if json {
                model::outln!("{}", serde_json::to_string_pretty(&d)?);
            } else {
                model::out!("{}", crate::lineage::lineage_text(&d));
            }
            Ok(())
        }
        Command::Verify {
            run_dir,
            hashes_only,
        } => {
            let r = crate::provenance::verify(&run_dir, !hashes_only)?;
            if r.differences.is_empty() {
                model::outln!(
                    "{}: ok, {} hashes match{}",
                    run_dir.display(),
                    r.checked,
                    if hashes_only {
                        ""
                    } else {
                        " (ledger and outputs re-derived from the verified store)"
                    }
                );
                model::outln!("{}", r.build);
                Ok(())
            } else {
                Err(Failure::failed(anyhow::anyhow!(
                    "{} differs from its provenance:\n  {}",
                    run_dir.display(),
                    r.differences.join("\n  ")
                )))
            }
        }
        Command::Pin {
            gcs,
            hf,
            workloads,
            include,
            exclude,
            out,
            force,
            retries,
            timeout,
            parallel,
            quiet,
        } => crate::pin::pin_command(
            &crate::pin::PinArgs {
                gcs,
                hf,
                workloads,
                include,
                exclude,
                out,
                force,
                retries,
                timeout: std::time::Duration::from_secs(timeout.max(1)),
                parallel,
                quiet,
            },
            &ingest::EnvOverrides::from_process(),
        ),
        Command::Check { config } => {
            let c = model::load_config(&config)?;
            model::outln!(
                "{}: ok ({} archives, workloads {})",
                config.display(),
                c.archives.len(),
                c.config
                    .workloads
                    .iter()
                    .map(|(w, _)| w.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(())
        }
        Command::Export {
            dataset: None,
            ro_crate: true,
            run_dir,
            force,
        } => match crate::rocrate::write_ro_crate(&run_dir, force) {
            Ok(path) => {
                model::outln!("wrote {}", path.display());
                Ok(())
            }
            Err(error) if error.is::<crate::export::ExportRefused>() => {
                Err(Failure::refused(error))
            }
            Err(error) => Err(Failure::failed(error)),
        },
        Command::Export {
            dataset,
            run_dir,
            force,
            ..
        } => {
            let dataset = dataset.expect("clap requires --dataset without --ro-crate");
            match crate::export::export_dataset(&run_dir, &dataset, force) {
                Ok(summary) => {
                    model::outln!("{}", summary.line(&dataset));
                    Ok(())
                }
                Err(error) if error.is::<crate::export::ExportRefused>() => {
                    Err(Failure::refused(error))
                }
                Err(error) => Err(Failure::failed(error)),
            }
        }
        Command::Schemas { out, docs } => {
            let mut files: Vec<(PathBuf, String)> = crate::schemas::all_schemas()
                .into_iter()
                .map(|(name, text)| (out.join(name), text))
                .collect();
            if let Some(docs) = docs {
                files.extend(
                    crate::reference::all_reference_pages()
                        .into_iter()
                        .map(|(name, text)| (docs.join(name), text)),
                );
            }
            for (p, text) in files {
                frames::atomic_write(&p, text.as_bytes())?;
                model::outln!("wrote {}", p.display());
            }
            Ok(())
        }
    }
}

/// `pipeline demo` writes only into an absent or empty directory unless `--force`: its
/// files (pipeline.yaml, manifest.csv) are the ones a user edits.
fn refuse_non_empty_out(out: &std::path::Path, force: bool) -> Result<(), Failure> {
    if force {
        return Ok(());
    }
    let mut entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot read {}", out.display()))
                .into());
        }
    };
    if entries.next().is_some() {
        return Err(Failure::refused(anyhow::anyhow!(
            "{} is not empty; pass --force to write the corpus into it (replacing its pipeline.yaml, manifest.csv and archives), or choose an empty directory",
            out.display()
        )));
    }
    Ok(())
}

/// Print a failure and map it to the process's exit code ([`model::exit::finish`]).
pub fn exit_code(r: Result<(), Failure>) -> ExitCode {
    model::exit::finish(r)
}
