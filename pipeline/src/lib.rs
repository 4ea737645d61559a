//! The `pipeline` binary's library: argument model, stage orchestration, provenance,
//! verification, the report, the demo command and `pin`.

pub mod cli;
pub mod pin;
pub mod provenance;
pub mod reference;
pub mod report;
pub mod run;
pub mod schemas;
pub mod stages;
