//! The `pipeline` binary's library: argument model, stage orchestration, provenance,
//! verification, the demo command, `pin` and `export` (the report itself is the `report`
//! crate).

pub mod cli;
pub mod diff;
pub mod export;
pub mod lineage;
pub mod pin;
pub mod provenance;
pub mod reference;
pub mod rocrate;
pub mod run;
pub mod schemas;
pub mod stages;
pub mod status;
