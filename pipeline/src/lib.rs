//! The `pipeline` binary's library: argument model, stage orchestration and the demo command.

pub mod cli;
pub mod schemas;
