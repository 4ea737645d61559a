//! Errors of reading the run's configuration: each names the file, the line and the field.

use std::path::PathBuf;

/// A refused `pipeline.yaml` or manifest.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `pipeline.yaml` key is unknown, missing, of the wrong type or out of range.
    #[error("{}:{}: field `{field}`: {message}", path.display(), fmt_line(*line))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line, when known.
        line: Option<usize>,
        /// Dotted field path.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A manifest row or column is wrong.
    #[error("{}:{}: field `{field}`: {message}", path.display(), fmt_line(*line))]
    Manifest {
        /// The manifest (or the pipeline.yaml holding inline rows).
        path: PathBuf,
        /// 1-based line, when known.
        line: Option<usize>,
        /// Column or field path.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn fmt_line(line: Option<usize>) -> String {
    line.map(|l| l.to_string()).unwrap_or_else(|| "?".into())
}
