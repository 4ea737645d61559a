//! `pipeline`: runs the stages from `pipeline.yaml`, and writes the demo corpus.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = pipeline::cli::Cli::parse();
    pipeline::cli::exit_code(pipeline::cli::run(cli))
}
