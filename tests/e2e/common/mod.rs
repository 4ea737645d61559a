//! Shared helpers of the end-to-end tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Build a workspace binary (cargo builds them only for their own package's tests) and
/// return its path beside this test's deps directory.
pub(crate) fn bin(name: &str) -> PathBuf {
    bin_of(name, name)
}

/// [`bin`] for binary `name` of package `package`.
pub(crate) fn bin_of(package: &str, name: &str) -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", package, "--bin", name])
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cargo build -p {package} --bin {name} failed"
    );
    let mut p = std::env::current_exe().unwrap();
    p.pop();
    if p.ends_with("deps") {
        p.pop();
    }
    p.join(name)
}

/// Run a command to completion and assert that it succeeded, showing its stderr otherwise.
pub(crate) fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd.get_program(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Assert that a finished command succeeded, showing its stdout and stderr otherwise.
pub(crate) fn succeeded(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The small demo corpus generated in `dir`, its pipeline loaded.
pub(crate) fn small_demo(dir: &std::path::Path) -> model::LoadedConfig {
    demo::generate(dir, demo::Scale::Small, demo::DEFAULT_SEED).unwrap();
    model::load_config(&dir.join("pipeline.yaml")).unwrap()
}

/// `pipeline run` of `cfg` in this process, without progress output.
pub(crate) fn run_quiet(cfg: &model::LoadedConfig) -> pipeline::run::RunSummary {
    pipeline::run::run_all(
        cfg,
        &pipeline::run::RunOptions {
            quiet: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// SHA256 (lowercase hex) of a file's bytes.
pub(crate) fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}
