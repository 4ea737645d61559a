//! Lower bounds on the replay's objectives: every valid bound the replay reports beside
//! the schedules it finds, computed on a [`schedule::GridInstance`] (and, for the cache
//! LP, the FIFO schedule's starts). Nothing here searches; the arguments are in
//! docs/BOUNDS.md and every bound is tested against exhaustive optima of tiny instances.
//!
//! - [`study`]: the study's lower bounds (CPU and RAM equal their ideal values; GPU and
//!   cache from request lengths, durations and K).
//! - [`strong`]: the stronger bounds (energy bounds from the caps, `K'`, machine bounds,
//!   compulsory parts inside the deadline window) with their components.
//! - [`pattern`]: the GPU pattern bound from the pairwise cross-correlations of request
//!   patterns.
//! - [`lp`]: the LP bounds solved with HiGHS by column generation, each round certified
//!   (feature `lp`, on by default; without it they are reported as skipped).
//!
//! Depends on `schedule` only (and HiGHS): a reader of the bounds needs this crate and the
//! instance and evaluator it imports, nothing of the search or the stage.

pub mod lp;
pub mod pattern;
pub mod strong;
pub mod study;

pub use lp::{LpBounds, lp_bounds, lp_bounds_with_shares};
pub use pattern::{PatternBound, pattern_bound};
pub use strong::{StrongBounds, blob_bound_parts, strong_bounds, strong_bounds_from};
pub use study::lower_bounds;
