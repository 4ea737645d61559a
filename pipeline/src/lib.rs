//! The `pipeline` binary's library: argument model, stage orchestration, provenance,
//! verification, the report and the demo command.

pub mod cli;
pub mod provenance;
pub mod reference;
pub mod report;
pub mod run;
pub mod schemas;
pub mod stages;
