//! The `pipeline` binary's library: argument model, stage orchestration, provenance,
//! verification, the demo command and `pin` (the report itself is the `report` crate).

pub mod cli;
pub mod pin;
pub mod provenance;
pub mod reference;
pub mod run;
pub mod schemas;
pub mod stages;
