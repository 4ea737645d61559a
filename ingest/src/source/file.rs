//! The local-file location: a path relative to the manifest, read in large blocks.

use super::{ArchiveSource, FetchInfo, FetchMethod, begin_fetch};
use crate::error::FetchError;
use crate::sink::{ByteSink, IO_BUFFER_BYTES};
use futures::future::BoxFuture;
use model::ArchiveSpec;
use model::config::LocationKind;
use std::io::{Read, Seek, SeekFrom};

/// Reads archives from local files.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileSource;

/// The URI of a file location: `file:` and the path as the manifest writes it (relative to
/// the manifest), so the ledger does not depend on where the run directory lives.
pub fn file_uri(archive: &ArchiveSpec) -> Option<String> {
    archive
        .file
        .as_ref()
        .map(|f| format!("file:{}", f.relative))
}

/// What a non-regular file is, for the refusal text.
fn file_kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

impl ArchiveSource for FileSource {
    fn kind(&self) -> LocationKind {
        LocationKind::File
    }

    fn uri(&self, archive: &ArchiveSpec) -> Option<String> {
        file_uri(archive)
    }

    fn fetch<'a>(
        &'a self,
        archive: &'a ArchiveSpec,
        sink: &'a mut dyn ByteSink,
        info: &'a mut FetchInfo,
    ) -> BoxFuture<'a, Result<(), FetchError>> {
        Box::pin(async move {
            let (uri, loc) = begin_fetch(
                info,
                FetchMethod::FullObject,
                file_uri(archive),
                archive.file.as_ref(),
                "file",
            )?;
            let read_err = |source: std::io::Error| FetchError::Read {
                uri: uri.clone(),
                path: loc.path.clone(),
                source,
            };
            // Only a regular file is read: opening a FIFO would block forever, and a device
            // (`/dev/zero`) never ends. Checked before the open, and again on the open file.
            let not_regular = |what: &str| FetchError::NotRegularFile {
                uri: uri.clone(),
                path: loc.path.clone(),
                what: what.to_string(),
            };
            match std::fs::metadata(&loc.path) {
                Ok(m) if !m.is_file() => return Err(not_regular(file_kind(&m))),
                _ => {}
            }
            let mut f = match std::fs::File::open(&loc.path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(FetchError::NotFound {
                        uri: uri.clone(),
                        detail: format!("no file at {}", loc.path.display()),
                    });
                }
                Err(e) => return Err(read_err(e)),
            };
            let meta = f.metadata().map_err(read_err)?;
            if !meta.is_file() {
                return Err(not_regular(file_kind(&meta)));
            }
            let len = meta.len();
            if len > archive.bytes {
                return Err(FetchError::Oversize {
                    uri,
                    advertised: Some(len),
                    expected: archive.bytes,
                });
            }
            f.seek(SeekFrom::Start(sink.offset())).map_err(read_err)?;
            let mut buf = vec![0u8; IO_BUFFER_BYTES];
            loop {
                let n = f.read(&mut buf).map_err(read_err)?;
                if n == 0 {
                    break;
                }
                sink.write(&buf[..n])?;
            }
            Ok(())
        })
    }
}
