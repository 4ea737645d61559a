//! `pipeline`: runs the stages from `pipeline.yaml`, and writes the demo corpus.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = pipeline::cli::parse();
    pipeline::cli::exit_code(pipeline::cli::run(cli))
}
