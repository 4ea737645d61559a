//! The one rendering of an error and its causes that every binary prints on failure:
//! `error: <top>` and then the chain of `source()`s, in one of two layouts.

use std::error::Error;
use std::fmt::Write;

/// How the causes follow the top line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CauseLayout {
    /// A blank line, `Caused by:`, then one indented line per cause (`pipeline`, `audit`,
    /// `replay`).
    Block,
    /// One `Caused by: <cause>` line per cause, right under the top line (`ingest`).
    Inline,
}

/// `error: <e>` followed by its causes in `layout`; no trailing newline. An `anyhow::Error`
/// is passed as `&*e` (its causes are its `source()` chain).
pub fn render_error_chain(e: &(dyn Error + 'static), layout: CauseLayout) -> String {
    let mut s = format!("error: {e}");
    let mut cause = e.source();
    if layout == CauseLayout::Block && cause.is_some() {
        s.push_str("\n\nCaused by:");
    }
    while let Some(c) = cause {
        let _ = match layout {
            CauseLayout::Block => write!(s, "\n    {c}"),
            CauseLayout::Inline => write!(s, "\nCaused by: {c}"),
        };
        cause = c.source();
    }
    s
}

/// Whether an error refused its input before any work (exit 2 in every binary) rather than
/// failing while working (exit 1): somewhere in its chain there is a refused configuration
/// ([`crate::ConfigError`]), a run directory the command does not own
/// ([`crate::run_dir::ForeignFiles`]) or a stage that says it refused
/// ([`crate::stage::FailureKind::Refused`]).
pub fn is_refusal(e: &(dyn Error + 'static)) -> bool {
    let mut cause: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<crate::ConfigError>()
            || c.is::<crate::run_dir::ForeignFiles>()
            || c.is::<crate::shard::ShardMergeError>()
            || c.downcast_ref::<crate::StageError>()
                .is_some_and(|s| s.kind == crate::stage::FailureKind::Refused)
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
    fn both_layouts() {
        let e = E(
            "top",
            Some(Box::new(E("middle", Some(Box::new(E("root", None)))))),
        );
        assert_eq!(
            render_error_chain(&e, CauseLayout::Block),
            "error: top\n\nCaused by:\n    middle\n    root"
        );
        assert_eq!(
            render_error_chain(&e, CauseLayout::Inline),
            "error: top\nCaused by: middle\nCaused by: root"
        );
        let alone = E("alone", None);
        for layout in [CauseLayout::Block, CauseLayout::Inline] {
            assert_eq!(render_error_chain(&alone, layout), "error: alone");
        }
    }
}
