//! The `replay` stage (SPEC 2.3): FIFO admission replay of the audited attempts, resource-hour
//! accounting and lower bounds, a seeded reproducible schedule search for the GPU and cache
//! objectives, and an independent validator of every selected schedule.
//!
//! Entry points: [`run`] (the stage, reading the audit frames of a config's run directory
//! and writing its outputs there), [`replay_input`] (the same on plain structs, no I/O) and
//! [`validate::validate_schedules_file`] (`replay validate`).

pub mod accounting;
pub mod bounds;
pub mod cover;
pub mod error;
pub mod evaluate;
pub mod gpu_bound;
pub mod group_fit;
pub mod input;
pub mod lns;
pub mod lp;
pub mod output;
pub mod profile;
pub mod schemas;
pub mod search;
pub mod seeded;
pub mod stage;
#[cfg(feature = "synthetic")]
pub mod synthetic;
pub mod validate;

pub use accounting::{Resource, ResourceHours};
pub use error::ReplayError;
pub use input::{AttemptInput, BlobInput, ReplayInput, WorkloadInstance, load_input};
pub use search::{AdaptiveRecord, Family, FamilyStats, ReplayBudget, RngRecord, TraceRow};

/// The selected schedules' names, in output order.
pub use schemas::SCHEDULE_NAMES;
pub use stage::{
    ParetoPoint, ReplayOptions, ReplayReport, ReplayStage, RunTimings, SelectedSchedule,
    WorkloadReport, replay_input, run, schedule_rows,
};
