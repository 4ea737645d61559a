//! How every command of the toolkit ends: [`Exit`], the one exit-code type of all four
//! binaries (`pipeline`, `ingest`, `audit`, `replay`), the one rendering of an error and
//! its causes (`error:` then `Caused by:`), and README's exit-code table, derived from
//! [`Exit`] and checked against README by a test.

use crate::stage::FailureKind;
use std::error::Error;
use std::fmt::Write;

/// A command's outcome, and the process exit code it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Everything the command was asked to do was done.
    Success,
    /// The command ran and found a failure.
    Failed,
    /// The command refused its input before doing any work.
    Refused,
}

impl Exit {
    /// Every outcome, in code order.
    pub const ALL: [Exit; 3] = [Exit::Success, Exit::Failed, Exit::Refused];

    /// The process exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            // clap's own code for a usage error: a bad flag and a refused config agree.
            Exit::Refused => 2,
        }
    }

    /// What the code means, as README's table says it.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Failed => {
                "a stage ran and found a failure: an archive failed verification, the cohort differs from `pipeline.yaml`'s expectations (frames are still written), a schedule failed validation, `verify` found a difference, `status` found a stage that is not up to date, `diff` found two runs different, a published figure was not reproduced, `audit show` found an attempt's frame rows differ from its archive"
            }
            Exit::Refused => {
                "bad usage or a refused configuration (the message names the file, line and field); an unknown or ambiguous attempt id for `audit show` / `audit extract` (the candidates are listed); shards that `merge` refuses (missing, of mixed counts, of another config or manifest, misplaced; the shard is named); an output directory a command does not own; a run `diff` cannot read, a `lineage` target the run does not hold"
            }
        }
    }

    /// README's exit-code table (Markdown), one row per outcome.
    pub fn markdown_table() -> String {
        let mut s = String::from("| code | meaning |\n|---|---|\n");
        for e in Exit::ALL {
            let _ = writeln!(s, "| {} | {} |", e.code(), e.meaning());
        }
        s
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

impl From<FailureKind> for Exit {
    fn from(k: FailureKind) -> Self {
        match k {
            FailureKind::Refused => Exit::Refused,
            FailureKind::Failed => Exit::Failed,
        }
    }
}

/// A library error that knows whether it refused its input or failed while working.
pub trait Classify {
    /// Refused (exit 2) or failed (exit 1).
    fn failure_kind(&self) -> FailureKind;
}

/// A command that did not succeed: how it exits, and why.
#[derive(Debug)]
pub struct Failure {
    /// The outcome (never [`Exit::Success`]).
    pub exit: Exit,
    /// The error and its causes.
    pub error: anyhow::Error,
}

impl Failure {
    /// The input was refused (exit 2).
    pub fn refused(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            exit: Exit::Refused,
            error: error.into(),
        }
    }

    /// The command ran and failed (exit 1).
    pub fn failed(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            exit: Exit::Failed,
            error: error.into(),
        }
    }

    /// The same outcome, the error wrapped in `context` (the new top line).
    pub fn context(self, context: impl std::fmt::Display + Send + Sync + 'static) -> Failure {
        Failure {
            exit: self.exit,
            error: self.error.context(context),
        }
    }

    /// A library error, as it classifies itself.
    pub fn of<E: Classify + Error + Send + Sync + 'static>(e: E) -> Failure {
        Failure {
            exit: e.failure_kind().into(),
            error: e.into(),
        }
    }
}

/// Any other error is classified by its chain ([`is_refusal`]), so `?` works on it.
impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        let error = e.into();
        let exit = if is_refusal(&*error) {
            Exit::Refused
        } else {
            Exit::Failed
        };
        Failure { exit, error }
    }
}

/// The end of every binary's `main`: a failure is printed ([`render`]) to stderr, and the
/// outcome becomes the process's exit code.
pub fn finish(result: Result<(), Failure>) -> std::process::ExitCode {
    match result {
        Ok(()) => Exit::Success.into(),
        Err(f) => {
            eprintln!("{}", render(&*f.error));
            f.exit.into()
        }
    }
}

/// `error: <e>`, then (when it has causes) a blank line, `Caused by:` and one indented
/// line per cause; no trailing newline. An `anyhow::Error` is passed as `&*e`.
pub fn render(e: &(dyn Error + 'static)) -> String {
    let mut s = format!("error: {e}");
    let mut cause = e.source();
    if cause.is_some() {
        s.push_str("\n\nCaused by:");
    }
    while let Some(c) = cause {
        let _ = write!(s, "\n    {c}");
        cause = c.source();
    }
    s
}

/// Whether an error refused its input before any work rather than failing while working:
/// somewhere in its chain there is a refused configuration ([`crate::ConfigError`]), a run
/// directory the command does not own ([`crate::run_dir::ForeignFiles`]), shards that
/// cannot be merged ([`crate::shard::ShardMergeError`]) or a stage that says it refused
/// ([`FailureKind::Refused`]).
pub fn is_refusal(e: &(dyn Error + 'static)) -> bool {
    let mut cause: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<crate::ConfigError>()
            || c.is::<crate::run_dir::ForeignFiles>()
            || c.is::<crate::shard::ShardMergeError>()
            || c.downcast_ref::<crate::StageError>()
                .is_some_and(|s| s.kind == FailureKind::Refused)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl Error for E {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    #[test]
    fn an_error_and_its_causes_render_in_one_layout() {
        let e = E(
            "top",
            Some(Box::new(E("middle", Some(Box::new(E("root", None)))))),
        );
        assert_eq!(render(&e), "error: top\n\nCaused by:\n    middle\n    root");
        assert_eq!(render(&E("alone", None)), "error: alone");
    }

    #[test]
    fn codes_are_distinct_and_in_order() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2]);
    }

    #[test]
    fn a_refusal_anywhere_in_the_chain_exits_2() {
        let refused = crate::StageError::new("audit", FailureKind::Refused, E("bad", None));
        let f = Failure::from(anyhow::Error::new(refused).context("running the chain"));
        assert_eq!(f.exit, Exit::Refused);
        let failed = crate::StageError::new("audit", FailureKind::Failed, E("bad", None));
        assert_eq!(Failure::from(failed).exit, Exit::Failed);
    }

    /// README's table is the one [`Exit::markdown_table`] renders.
    #[test]
    fn readme_exit_code_table_is_derived_from_exit() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md");
        let section = readme
            .split_once("## Exit codes\n\n")
            .expect("README has an `## Exit codes` section")
            .1;
        let table: String = section
            .lines()
            .take_while(|l| l.starts_with('|'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            table,
            Exit::markdown_table(),
            "README.md's exit-code table differs from model::exit::Exit; paste the table this test prints as expected"
        );
    }
}
