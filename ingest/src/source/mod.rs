//! Archive locations behind one small trait: each backend streams one archive's bytes into a
//! [`ByteSink`], resuming from the sink's offset after a broken transfer, and records what it
//! learns on the way in a [`FetchInfo`] the caller keeps, so a failed fetch still reports
//! it. The same conformance checks (`testkit::conformance`) run against every backend.

pub mod file;
pub mod gcs;
pub mod gcs_auth;
pub mod hf;
pub mod retry;
pub mod tar_index;

use crate::error::FetchError;
use crate::sink::ByteSink;
use futures::future::BoxFuture;
use model::ArchiveSpec;
use model::config::LocationKind;

pub use file::FileSource;
pub use gcs::GcsSource;
pub use hf::HfSource;
pub use retry::{Backoff, retry_after};

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

/// The start every [`ArchiveSource::fetch`] shares: reset `info` to a fresh fetch by
/// `method`, name the location (`uri`, empty without one) and take the archive's location
/// of this kind, or refuse with [`FetchError::NotFound`] ("the archive has no `what`
/// location").
pub(crate) fn begin_fetch<'a, L>(
    info: &mut FetchInfo,
    method: FetchMethod,
    uri: Option<String>,
    location: Option<&'a L>,
    what: &str,
) -> Result<(String, &'a L), FetchError> {
    *info = FetchInfo {
        method,
        ..FetchInfo::full_object()
    };
    let uri = uri.unwrap_or_default();
    match location {
        Some(loc) => Ok((uri, loc)),
        None => Err(FetchError::NotFound {
            uri,
            detail: format!("the archive has no {what} location"),
        }),
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
