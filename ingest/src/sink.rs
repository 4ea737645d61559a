//! Where fetched bytes go: sinks that compute SHA256 and the byte count in the same pass as
//! they store the bytes, so an archive is never held in memory and never read twice.

use crate::progress::ProgressSink;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Buffer size of the temporary-file writer (and of local reads).
pub const IO_BUFFER_BYTES: usize = 1 << 20;

/// Writing fetched bytes failed.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The temporary file could not be written.
    #[error("writing {}: {source}", path.display())]
    Io {
        /// The temporary file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// More bytes arrived than the manifest expects; the transfer is stopped.
    #[error("more than the {limit} bytes the manifest expects arrived")]
    Oversize {
        /// The manifest's byte count.
        limit: u64,
    },
}

/// An append-only destination for one archive's bytes. Sources resume a broken transfer by
/// asking for bytes from [`ByteSink::offset`] on.
pub trait ByteSink: Send {
    /// Bytes accepted so far.
    fn offset(&self) -> u64;
    /// Append bytes (hashing them on the way).
    fn write(&mut self, chunk: &[u8]) -> Result<(), SinkError>;
}

/// A sink writing to a temporary file, hashing and counting, refusing more than `limit` bytes.
/// Dropping it without [`BlobSink::finish`] deletes the file.
pub struct BlobSink {
    path: PathBuf,
    file: Option<BufWriter<File>>,
    hasher: Sha256,
    bytes: u64,
    limit: u64,
    progress: Arc<dyn ProgressSink>,
}

impl std::fmt::Debug for BlobSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobSink")
            .field("path", &self.path)
            .field("bytes", &self.bytes)
            .field("limit", &self.limit)
            .finish()
    }
}

impl BlobSink {
    /// Create (truncate) the temporary file at `path`.
    pub fn create(
        path: &Path,
        limit: u64,
        progress: Arc<dyn ProgressSink>,
    ) -> Result<BlobSink, SinkError> {
        let file = File::create(path).map_err(|source| SinkError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(BlobSink {
            path: path.to_path_buf(),
            file: Some(BufWriter::with_capacity(IO_BUFFER_BYTES, file)),
            hasher: Sha256::new(),
            bytes: 0,
            limit,
            progress,
        })
    }

    /// Flush and fsync the file; return it with its hash and size.
    pub fn finish(mut self) -> Result<TempBlob, SinkError> {
        let writer = self.file.take().expect("file present until finish");
        let path = self.path.clone();
        let err = |source| SinkError::Io {
            path: path.clone(),
            source,
        };
        let file = writer.into_inner().map_err(|e| err(e.into_error()))?;
        file.sync_all().map_err(err)?;
        let hasher = std::mem::take(&mut self.hasher);
        Ok(TempBlob {
            path: std::mem::take(&mut self.path),
            sha256: hex::encode(hasher.finalize()),
            bytes: self.bytes,
        })
    }
}

impl ByteSink for BlobSink {
    fn offset(&self) -> u64 {
        self.bytes
    }

    fn write(&mut self, chunk: &[u8]) -> Result<(), SinkError> {
        if self.bytes + chunk.len() as u64 > self.limit {
            return Err(SinkError::Oversize { limit: self.limit });
        }
        self.hasher.update(chunk);
        let path = &self.path;
        self.file
            .as_mut()
            .expect("file present until finish")
            .write_all(chunk)
            .map_err(|source| SinkError::Io {
                path: path.clone(),
                source,
            })?;
        self.bytes += chunk.len() as u64;
        self.progress.advance_bytes(chunk.len() as u64);
        Ok(())
    }
}

impl Drop for BlobSink {
    fn drop(&mut self) {
        if self.file.is_some() {
            self.file = None;
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A fully written temporary file with its SHA256 and size. Dropping it deletes the file
/// unless it was moved into the store or quarantine.
#[derive(Debug)]
pub struct TempBlob {
    path: PathBuf,
    /// SHA256 of the bytes, lowercase hex.
    pub sha256: String,
    /// Byte count.
    pub bytes: u64,
}

impl TempBlob {
    /// The temporary file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rename the file to `target` (same filesystem). On failure the file is deleted.
    pub fn persist(mut self, target: &Path) -> std::io::Result<()> {
        let from = std::mem::take(&mut self.path);
        let r = std::fs::rename(&from, target);
        if r.is_err() {
            let _ = std::fs::remove_file(&from);
        }
        r
    }
}

impl Drop for TempBlob {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An in-memory sink (tests and conformance checks); hashes like [`BlobSink`].
#[derive(Debug, Default)]
pub struct MemorySink {
    /// Bytes received.
    pub data: Vec<u8>,
}

impl MemorySink {
    /// SHA256 of the bytes, lowercase hex.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.data))
    }
}

impl ByteSink for MemorySink {
    fn offset(&self) -> u64 {
        self.data.len() as u64
    }
    fn write(&mut self, chunk: &[u8]) -> Result<(), SinkError> {
        self.data.extend_from_slice(chunk);
        Ok(())
    }
}

/// SHA256 and size of a file, streaming.
pub use model::run_dir::hash_file;

/// SHA256 of bytes in memory, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
