//! Progress reporting as a small trait: the library reports, the binary decides how to show
//! it (a progress bar on a terminal, plain lines otherwise). Library code never prints.

/// Receives progress of an ingest run. All methods have no-op defaults.
pub trait ProgressSink: Send + Sync {
    /// The run starts: `archives` to process, `bytes` at most to transfer.
    fn begin(&self, _archives: u64, _bytes: u64) {}
    /// Bytes were received (or confirmed from the store).
    fn advance_bytes(&self, _bytes: u64) {}
    /// One archive is done; `status` is a short word (`verified`, `in_store`, `failed`, ...).
    fn archive_done(&self, _archive_id: &str, _status: &str) {}
    /// A notable event worth a line (a resume, a repaired store entry).
    fn note(&self, _line: &str) {}
    /// The run is over.
    fn finish(&self) {}
}

/// A progress sink that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl ProgressSink for NoProgress {}
