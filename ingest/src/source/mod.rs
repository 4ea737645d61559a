//! Archive locations behind one small trait: each backend streams one archive's bytes into a
//! [`ByteSink`], resuming from the sink's offset after a broken transfer, and records what it
//! learns on the way in a [`FetchInfo`] the caller keeps, so a failed fetch still reports
//! it. The same conformance checks ([`crate::conformance`]) run against every backend.

pub mod file;
pub mod gcs;
pub mod hf;
pub mod tar_index;

use crate::error::FetchError;
use crate::sink::ByteSink;
use futures::future::BoxFuture;
use model::ArchiveSpec;
use model::config::LocationKind;
use std::time::Duration;

pub use file::FileSource;
pub use gcs::GcsSource;
pub use hf::HfSource;

/// How the bytes were obtained (a ledger column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FetchMethod {
    /// The whole object or file was read.
    FullObject,
    /// Only the member's byte range of the raw shard was read (tar headers read by range).
    MemberRange,
    /// The raw shard was streamed from its start until the member was complete.
    ShardScan,
    /// Nothing was fetched: the verified store already held the archive.
    Store,
}

impl FetchMethod {
    /// The ledger spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FetchMethod::FullObject => "full_object",
            FetchMethod::MemberRange => "member_range",
            FetchMethod::ShardScan => "shard_scan",
            FetchMethod::Store => "store",
        }
    }
}

/// What a fetch learned besides the bytes, filled in as it goes: after a failure it holds
/// what was learned before the failure (e.g. the commit the Hub resolved to, the retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchInfo {
    /// How the bytes were obtained (or were being obtained when the fetch failed).
    pub method: FetchMethod,
    /// The commit the Hub resolved the revision to (Hub only).
    pub resolved_commit: Option<String>,
    /// Broken transfers continued from the byte reached (Range) or restarted.
    pub resumes: u32,
    /// Requests repeated after a transient status (429, 5xx) or connection failure, and
    /// (Hub) re-resolves of an expired content URL.
    pub retries: u32,
}

impl Default for FetchInfo {
    /// [`FetchInfo::full_object`].
    fn default() -> FetchInfo {
        FetchInfo::full_object()
    }
}

impl FetchInfo {
    /// A plain full read with no incidents.
    pub fn full_object() -> FetchInfo {
        FetchInfo {
            method: FetchMethod::FullObject,
            resolved_commit: None,
            resumes: 0,
            retries: 0,
        }
    }
}

/// One kind of archive location.
pub trait ArchiveSource: Send + Sync {
    /// The kind it serves.
    fn kind(&self) -> LocationKind;

    /// The archive's location of this kind as a URI, or `None` if it has none.
    fn uri(&self, archive: &ArchiveSpec) -> Option<String>;

    /// Stream the archive's bytes into `sink`, starting at `sink.offset()` (a non-empty sink
    /// is continued, not restarted). The caller verifies hash and size afterwards.
    ///
    /// The source first resets `info` (whatever it held), then records in it what it learns
    /// as it learns it; the caller reads it after success and after failure alike.
    fn fetch<'a>(
        &'a self,
        archive: &'a ArchiveSpec,
        sink: &'a mut dyn ByteSink,
        info: &'a mut FetchInfo,
    ) -> BoxFuture<'a, Result<(), FetchError>>;
}

/// Exponential backoff between retries: `initial`, doubling, capped at 8 s.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    /// Maximum single pause.
    pub const MAX: Duration = Duration::from_secs(8);

    /// Start at `initial`.
    pub fn new(initial: Duration) -> Backoff {
        Backoff { next: initial }
    }

    /// Pause, honouring a server's `Retry-After` (capped at [`Backoff::MAX`]) when given.
    pub async fn wait(&mut self, retry_after: Option<Duration>) {
        let d = retry_after.unwrap_or(self.next).min(Self::MAX);
        self.next = (self.next * 2).min(Self::MAX);
        tokio::time::sleep(d).await;
    }
}

/// The `Retry-After` header in seconds, if present and numeric.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}
