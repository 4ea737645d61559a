//! The replay's problem and its exact measure: what every other replay crate builds on.
//!
//! - [`instance`]: one workload's problem as plain values ([`WorkloadInstance`]: attempts,
//!   requests, quotas, blobs, caps), checked on construction.
//! - [`evaluate`]: the instance compiled onto the integer nanosecond grid
//!   ([`GridInstance`]), the list schedule of a priority plan, and the exact, tuned GPU
//!   union and cache byte-ns of any starts.
//! - [`accounting`]: the study's resource-hour accounting (ideal and FIFO holding values).
//! - [`objective`]: the two objectives the search minimizes.
//! - [`reference`]: the plain, slow definitions (union by sort and merge, the admission
//!   rule as a loop, the schedule validator and its naive FIFO). The validator and every
//!   test oracle of the workspace call these; nothing tuned does.
//! - `synthetic` and `hand` (feature `synthetic`): deterministic instances of the study's
//!   shape and hand-built ones, for tests and benches.
//!
//! Nothing here reads a file, draws a random number for the search or bounds anything:
//! the `bounds` and `search` crates build on this one, and the `replay` stage on all three.

pub mod accounting;
pub mod evaluate;
#[cfg(feature = "synthetic")]
pub mod hand;
pub mod instance;
pub mod objective;
pub mod reference;
#[cfg(feature = "synthetic")]
pub mod synthetic;
#[cfg(test)]
mod union_tests;

pub use accounting::{Resource, ResourceHours};
pub use evaluate::{Evaluation, GridInstance, Plan, Scratch};
pub use instance::{AttemptInput, BlobInput, InstanceError, WorkloadInstance};
pub use objective::Objective;
