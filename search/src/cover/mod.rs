//! Interval cover indexes of the start-time search: how much of an interval the placed
//! attempts' requests (GPU) or a blob's placed users' lifetimes (cache) leave uncovered,
//! kept between moves under inserts and removes.
//!
//! Both keep the **gap set** of the cover: the sorted, disjoint, non-touching intervals
//! where nothing is placed. On these workloads the placed requests cover nearly all of the
//! schedule, so the gap set is small and the uncovered length of a query is the overlap of
//! a few gaps with it. Inserting an interval subtracts it from the gaps; removing one adds
//! back the parts of it no other placed interval covers, found with per-bucket coverage
//! counts (requests) or a scan of the blob's users around it (lifetimes). Everything is
//! exact integer arithmetic on the nanosecond grid.
//!
//! - [`GapSet`] (`gaps.rs`): the gap set itself.
//! - [`RequestCover`] (`request.rs`): the placed requests, with per-bucket whole-cover
//!   counts and partial-piece id lists (GPU).
//! - [`SortedChunks`] (`chunks.rs`): a sorted list in chunks, a blob's users by start.
//! - [`BlobCover`] (`blob.rs`): one blob group's placed users' lifetimes and their gap set
//!   (cache).

mod blob;
mod chunks;
mod gaps;
mod request;

pub use blob::BlobCover;
pub use chunks::SortedChunks;
pub use gaps::GapSet;
pub use request::RequestCover;
