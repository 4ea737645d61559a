//! The local-file location: a path relative to the manifest, read in large blocks.

use super::{ArchiveSource, FetchInfo};
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
            *info = FetchInfo::full_object();
            let uri = file_uri(archive).unwrap_or_default();
            let Some(loc) = &archive.file else {
                return Err(FetchError::NotFound {
                    uri,
                    detail: "the archive has no file location".into(),
                });
            };
            let read_err = |source: std::io::Error| FetchError::Read {
                uri: uri.clone(),
                path: loc.path.clone(),
                source,
            };
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
            let len = f.metadata().map_err(read_err)?.len();
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
