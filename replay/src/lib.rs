//! The `replay` stage: the audit frames read into [`schedule::WorkloadInstance`]s, every
//! workload replayed FIFO, bounded ([`bounds`]), searched ([`search`]) and each selected
//! schedule checked by the independent validator ([`schedule::reference`]); the outputs
//! written with their declared schemas; `replay validate`; the binary.
//!
//! What it owns: the input frames to instances ([`input`]), the stage's driver and its
//! report ([`stage`]), the output frames and documents ([`output`], [`schemas`]),
//! `replay validate` on a schedules file ([`validate`]) and the stage's errors
//! ([`error`]). The algorithms live in the crates below it: `schedule` (instance,
//! evaluator, accounting, reference definitions), `bounds` (lower bounds, HiGHS LPs) and
//! `search` (the schedule search).
//!
//! Entry points: [`run`] (the stage, reading the audit frames of a config's run directory
//! and writing its outputs there), [`replay_input`] (the same on plain structs, no I/O) and
//! [`validate::validate_schedules_file`] (`replay validate`).

pub mod error;
pub mod input;
pub mod output;
pub mod published;
pub mod schemas;
pub mod stage;
pub mod validate;

pub use error::ReplayError;
pub use input::{ReplayInput, load_input};

/// The selected schedules' names, in output order.
pub use schemas::SCHEDULE_NAMES;
pub use stage::{
    ParetoPoint, ReplayOptions, ReplayReport, ReplayStage, RunTimings, SelectedSchedule,
    WorkloadReport, replay_input, run,
};
