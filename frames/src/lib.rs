//! Typed, versioned on-disk outputs: Parquet frames with schema metadata, and atomic writes
//! (temporary name, fsync, rename) so a killed stage never leaves a half-written file.

pub mod schema;
pub mod temp;

use polars::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Metadata key holding the frame's name.
pub const KEY_FRAME: &str = "agentrace.frame";
/// Metadata key holding the frame's schema version.
pub const KEY_SCHEMA_VERSION: &str = "agentrace.schema_version";

/// Errors writing or reading a frame or output file; each names the path.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Filesystem failure.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Polars could not build, write or read the frame.
    #[error("{}: {source}", path.display())]
    Polars {
        /// The file.
        path: PathBuf,
        /// The Polars error.
        #[source]
        source: PolarsError,
    },
    /// The file is not the frame or version expected.
    #[error("{}: {message}", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What a frame file says about itself in its Parquet key-value metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameMeta {
    /// Frame name (`attempts`, `ledger`, ...).
    pub frame: String,
    /// Schema version.
    pub schema_version: u32,
    /// Further key-value pairs (e.g. source archive SHA256s), written in the given order.
    pub extra: Vec<(String, String)>,
}

impl FrameMeta {
    /// Metadata for a frame with no extra pairs.
    pub fn new(frame: &str, schema_version: u32) -> Self {
        FrameMeta {
            frame: frame.to_string(),
            schema_version,
            extra: Vec::new(),
        }
    }

    /// Add a key-value pair.
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.extra.push((key.to_string(), value.into()));
        self
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> FrameError + '_ {
    move |source| FrameError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Write bytes to `path` atomically: a temporary sibling, fsync, rename, fsync the directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), FrameError> {
    atomic_write_with(path, |f| f.write_all(bytes))
}

/// Like [`atomic_write`], with a closure that writes the content.
pub fn atomic_write_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), FrameError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(FrameError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(
                "is a symbolic link; a run directory holds no links it did not make, so it is not replaced (remove the link)",
            ),
        });
    }
    let tmp = temp::temp_path_for(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        write(&mut f)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io_err(path))
}

/// Write a frame as Parquet (zstd, statistics on, single-threaded for byte-stable output)
/// with its metadata, atomically.
pub fn write_frame(path: &Path, df: &mut DataFrame, meta: &FrameMeta) -> Result<(), FrameError> {
    let mut kv = vec![
        (KEY_FRAME.to_string(), meta.frame.clone()),
        (
            KEY_SCHEMA_VERSION.to_string(),
            meta.schema_version.to_string(),
        ),
    ];
    kv.extend(meta.extra.iter().cloned());
    let mut polars_err = None;
    let r = atomic_write_with(path, |f| match encode_parquet(&mut *f, df, kv) {
        Ok(()) => Ok(()),
        Err(ParquetWriteError::Io(e)) => Err(e),
        Err(ParquetWriteError::Polars(e)) => {
            polars_err = Some(e);
            Err(std::io::Error::other("polars write failed"))
        }
    });
    if let Some(source) = polars_err {
        return Err(FrameError::Polars {
            path: path.to_path_buf(),
            source,
        });
    }
    r
}

/// Why encoding a frame as Parquet failed: the output's own I/O error (disk full, quota),
/// which Polars would report only as an opaque "transport error", or Polars itself.
#[derive(Debug)]
enum ParquetWriteError {
    Io(std::io::Error),
    Polars(PolarsError),
}

/// Encode `df` as Parquet (zstd, single-threaded for byte-stable output) with the key-value
/// metadata `kv` into `out`.
fn encode_parquet(
    out: impl std::io::Write,
    df: &mut DataFrame,
    kv: Vec<(String, String)>,
) -> Result<(), ParquetWriteError> {
    let mut out = IoErrorRecorder::new(out);
    let w = ParquetWriter::new(&mut out)
        .with_compression(ParquetCompression::Zstd(None))
        .set_parallel(false)
        .with_key_value_metadata(Some(KeyValueMetadata::from_static(kv)));
    match w.finish(df) {
        Ok(_) => Ok(()),
        Err(e) => Err(match out.take_error() {
            Some(io) => ParquetWriteError::Io(io),
            None => ParquetWriteError::Polars(e),
        }),
    }
}

/// A writer that keeps the first I/O error of the file it wraps, so a failed Parquet write
/// reports the real cause ("No space left on device") instead of the encoder's wrapper. The
/// error is kept in a slot shared with its creator, since a batched encoder owns its writer.
struct IoErrorRecorder<W> {
    inner: W,
    first_error: IoErrorSlot,
}

/// Where an [`IoErrorRecorder`] keeps its first error.
#[derive(Clone, Default)]
struct IoErrorSlot(std::sync::Arc<std::sync::Mutex<Option<std::io::Error>>>);

impl IoErrorSlot {
    fn take(&self) -> Option<std::io::Error> {
        self.0.lock().map(|mut e| e.take()).unwrap_or(None)
    }
}

impl<W: std::io::Write> IoErrorRecorder<W> {
    fn new(inner: W) -> Self {
        IoErrorRecorder {
            inner,
            first_error: IoErrorSlot::default(),
        }
    }

    fn slot(&self) -> IoErrorSlot {
        self.first_error.clone()
    }

    fn take_error(&mut self) -> Option<std::io::Error> {
        self.first_error.take()
    }

    fn record<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r
            && let Ok(mut slot) = self.first_error.0.lock()
            && slot.is_none()
        {
            *slot = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }
}

impl<W: std::io::Write> std::io::Write for IoErrorRecorder<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.record(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.record(r)
    }
}

/// A batched Parquet encoder (zstd, single-threaded) over `out`, with the slot that keeps
/// `out`'s first I/O error.
fn batched_encoder<W: std::io::Write>(
    out: W,
    schema: &Schema,
    kv: Vec<(String, String)>,
) -> Result<(BatchedWriter<IoErrorRecorder<W>>, IoErrorSlot), ParquetWriteError> {
    let out = IoErrorRecorder::new(out);
    let slot = out.slot();
    let w = ParquetWriter::new(out)
        .with_compression(ParquetCompression::Zstd(None))
        .set_parallel(false)
        .with_key_value_metadata(Some(KeyValueMetadata::from_static(kv)))
        .batched(schema);
    match w {
        Ok(w) => Ok((w, slot)),
        Err(e) => Err(why(&slot, e)),
    }
}

/// The I/O error behind a Polars error, when the output had one.
fn why(slot: &IoErrorSlot, e: PolarsError) -> ParquetWriteError {
    match slot.take() {
        Some(io) => ParquetWriteError::Io(io),
        None => ParquetWriteError::Polars(e),
    }
}

/// Writes one frame in batches (one Parquet row group per batch), so a frame larger than
/// memory can be produced; the file appears under its final name only after `finish`
/// (temporary sibling, fsync, rename), and a writer dropped unfinished removes its
/// temporary file. Batches must come in a fixed order for byte-identical output.
pub struct FrameStreamWriter {
    path: PathBuf,
    tmp: PathBuf,
    spec: schema::FrameSpec,
    meta: FrameMeta,
    writer: Option<(BatchedWriter<IoErrorRecorder<std::fs::File>>, IoErrorSlot)>,
    rows: usize,
}

impl std::fmt::Debug for FrameStreamWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameStreamWriter")
            .field("path", &self.path)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl FrameStreamWriter {
    /// A writer for `path` of the declared frame `spec` (every batch is checked against
    /// it); nothing is created until the first batch.
    pub fn new(path: &Path, spec: &schema::FrameSpec, meta: FrameMeta) -> Self {
        FrameStreamWriter {
            path: path.to_path_buf(),
            tmp: temp::temp_path_for(path),
            spec: *spec,
            meta,
            writer: None,
            rows: 0,
        }
    }

    fn failed(&self, e: ParquetWriteError) -> FrameError {
        match e {
            ParquetWriteError::Io(source) => FrameError::Io {
                path: self.tmp.clone(),
                source,
            },
            ParquetWriteError::Polars(source) => FrameError::Polars {
                path: self.path.clone(),
                source,
            },
        }
    }

    /// Append a batch (its schema must be the same for every batch).
    pub fn write(&mut self, df: &DataFrame) -> Result<(), FrameError> {
        if df.height() == 0 {
            return Ok(());
        }
        self.spec.check(df).map_err(|detail| FrameError::Schema {
            path: self.path.clone(),
            message: format!("frame does not match its declared schema: {detail}"),
        })?;
        if self.writer.is_none() {
            let dir = self.path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            let file = std::fs::File::create(&self.tmp).map_err(io_err(&self.tmp))?;
            let mut kv = vec![
                (KEY_FRAME.to_string(), self.meta.frame.clone()),
                (
                    KEY_SCHEMA_VERSION.to_string(),
                    self.meta.schema_version.to_string(),
                ),
            ];
            kv.extend(self.meta.extra.iter().cloned());
            let encoder = batched_encoder(file, df.schema(), kv).map_err(|e| self.failed(e))?;
            self.writer = Some(encoder);
        }
        let (w, slot) = self.writer.as_mut().expect("created above");
        if let Err(e) = w.write_batch(df) {
            let e = why(slot, e);
            return Err(self.failed(e));
        }
        self.rows += df.height();
        Ok(())
    }

    /// Close the file and give it its final name; with no batch written, write `empty`.
    pub fn finish(mut self, empty: &mut DataFrame) -> Result<usize, FrameError> {
        match self.writer.take() {
            None => {
                write_declared(&self.path, empty, &self.spec, &self.meta)?;
            }
            Some((w, slot)) => {
                if let Err(e) = w.finish() {
                    let e = why(&slot, e);
                    return Err(self.failed(e));
                }
                drop(w);
                let f = std::fs::File::open(&self.tmp).map_err(io_err(&self.tmp))?;
                f.sync_all().map_err(io_err(&self.tmp))?;
                std::fs::rename(&self.tmp, &self.path).map_err(io_err(&self.path))?;
                if let Some(d) = self.path.parent()
                    && let Ok(d) = std::fs::File::open(d)
                {
                    let _ = d.sync_all();
                }
            }
        }
        Ok(self.rows)
    }
}

impl Drop for FrameStreamWriter {
    fn drop(&mut self) {
        if self.writer.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write a frame that must match its declaration: the columns (names, order, types, nulls,
/// closed value sets) are checked first, and a frame that does not match is refused with
/// the path and the difference; nothing is written then.
pub fn write_declared(
    path: &Path,
    df: &mut DataFrame,
    spec: &schema::FrameSpec,
    meta: &FrameMeta,
) -> Result<(), FrameError> {
    spec.check(df).map_err(|detail| FrameError::Schema {
        path: path.to_path_buf(),
        message: format!("frame does not match its declared schema: {detail}"),
    })?;
    write_frame(path, df, meta)
}

/// Read a frame, checking that it is the named frame at the expected schema version.
pub fn read_frame(path: &Path, frame: &str, schema_version: u32) -> Result<DataFrame, FrameError> {
    check_frame_identity(path, frame, schema_version)?;
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    ParquetReader::new(file)
        .finish()
        .map_err(|source| FrameError::Polars {
            path: path.to_path_buf(),
            source,
        })
}

/// Check that a file's key-value metadata names the frame `frame` at `schema_version`.
fn check_frame_identity(path: &Path, frame: &str, schema_version: u32) -> Result<(), FrameError> {
    let meta = read_metadata(path)?;
    let get = |k: &str| meta.iter().find(|(kk, _)| kk == k).map(|(_, v)| v.clone());
    let message = match (get(KEY_FRAME), get(KEY_SCHEMA_VERSION)) {
        (Some(f), Some(v)) if f == frame && v == schema_version.to_string() => None,
        (None, None) => Some(format!(
            "has no `{KEY_FRAME}` / `{KEY_SCHEMA_VERSION}` key-value metadata, so it is not known to be the frame `{frame}` of schema version {schema_version} (a frame written by another tool must carry both, e.g. with pyarrow: `pq.write_table(table.replace_schema_metadata({{b\"{KEY_FRAME}\": b\"{frame}\", b\"{KEY_SCHEMA_VERSION}\": b\"{schema_version}\"}}), path)`)"
        )),
        (f, v) => Some(format!(
            "is the frame `{}` of schema version {}, expected the frame `{frame}` of schema version {schema_version}",
            f.as_deref().unwrap_or("(not named)"),
            v.as_deref().unwrap_or("(not given)")
        )),
    };
    match message {
        Some(message) => Err(FrameError::Schema {
            path: path.to_path_buf(),
            message,
        }),
        None => Ok(()),
    }
}

/// Read a frame under its producer's declared contract: the frame's name and schema
/// version (as [`read_frame`]), then every column in the declared order with its declared
/// type (and the declared values of an enumerated column). The error names the file and
/// the first column that differs.
pub fn read_declared(
    path: &Path,
    spec: &schema::FrameSpec,
    schema_version: u32,
) -> Result<DataFrame, FrameError> {
    let df = read_frame(path, spec.name, schema_version)?;
    spec.check(&df).map_err(|detail| FrameError::Schema {
        path: path.to_path_buf(),
        message: format!("frame does not match its declared schema: {detail}"),
    })?;
    Ok(df)
}

/// A frame file read in pieces: its row groups one at a time (each as written, so a frame
/// written batch by batch comes back batch by batch), so a frame larger than memory can be
/// read through. The file is checked once, when opened, to be the named frame at the
/// expected schema version with the declared columns.
#[derive(Debug)]
pub struct FrameChunks {
    path: PathBuf,
    metadata: FileMetadataRef,
    /// (first row, rows) of each row group, in file order.
    groups: Vec<(usize, usize)>,
}

impl FrameChunks {
    /// Open `path` as the frame `spec` at `schema_version` (as [`read_frame`] checks it),
    /// with its columns as declared (names, order, types).
    pub fn open(
        path: &Path,
        spec: &schema::FrameSpec,
        schema_version: u32,
    ) -> Result<Self, FrameError> {
        // The name and version, then the declared columns, on the file's zero-row head.
        let head = read_frame_slice(path, spec.name, schema_version, 0, 0)?;
        spec.check(&head).map_err(|detail| FrameError::Schema {
            path: path.to_path_buf(),
            message: format!("frame does not match its declared schema: {detail}"),
        })?;
        let file = std::fs::File::open(path).map_err(io_err(path))?;
        let mut r = ParquetReader::new(file);
        let metadata = r
            .get_metadata()
            .map_err(|source| FrameError::Polars {
                path: path.to_path_buf(),
                source,
            })?
            .clone();
        let mut groups = Vec::with_capacity(metadata.row_groups.len());
        let mut first = 0;
        for g in &metadata.row_groups {
            groups.push((first, g.num_rows()));
            first += g.num_rows();
        }
        Ok(FrameChunks {
            path: path.to_path_buf(),
            metadata,
            groups,
        })
    }

    /// Rows of the whole file.
    pub fn rows(&self) -> usize {
        self.metadata.num_rows
    }

    /// Row groups of the file.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// True when the file has no row group (a frame of no rows).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Row group `i` (all columns, or only `columns`), as a frame.
    pub fn read(&self, i: usize, columns: Option<&[&str]>) -> Result<DataFrame, FrameError> {
        let (first, rows) = self.groups[i];
        let file = std::fs::File::open(&self.path).map_err(io_err(&self.path))?;
        let mut r = ParquetReader::new(file)
            .with_slice(Some((first, rows)))
            .read_parallel(ParallelStrategy::None)
            .with_columns(columns.map(|c| c.iter().map(|s| s.to_string()).collect()));
        r.set_metadata(self.metadata.clone());
        r.finish().map_err(|source| FrameError::Polars {
            path: self.path.clone(),
            source,
        })
    }

    /// The file's zero-row head: its columns, as declared, without data.
    pub fn empty(&self) -> Result<DataFrame, FrameError> {
        let file = std::fs::File::open(&self.path).map_err(io_err(&self.path))?;
        let mut r = ParquetReader::new(file).with_slice(Some((0, 0)));
        r.set_metadata(self.metadata.clone());
        r.finish().map_err(|source| FrameError::Polars {
            path: self.path.clone(),
            source,
        })
    }
}

/// Rows `offset..offset + len` of a frame, checking its name and schema version first.
fn read_frame_slice(
    path: &Path,
    frame: &str,
    schema_version: u32,
    offset: usize,
    len: usize,
) -> Result<DataFrame, FrameError> {
    check_frame_identity(path, frame, schema_version)?;
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    ParquetReader::new(file)
        .with_slice(Some((offset, len)))
        .finish()
        .map_err(|source| FrameError::Polars {
            path: path.to_path_buf(),
            source,
        })
}

/// The frame's key-value metadata as a [`FrameMeta`]: its name, schema version and every
/// further pair in file order (Parquet's own `ARROW:schema`, which every writer adds
/// itself, left out), so that a frame written with it carries the same metadata.
pub fn frame_meta_of(path: &Path) -> Result<FrameMeta, FrameError> {
    let kv = read_metadata(path)?;
    let schema_err = |message: String| FrameError::Schema {
        path: path.to_path_buf(),
        message,
    };
    let get = |k: &str| kv.iter().find(|(kk, _)| kk == k).map(|(_, v)| v.clone());
    let frame = get(KEY_FRAME).ok_or_else(|| schema_err(format!("has no `{KEY_FRAME}`")))?;
    let version = get(KEY_SCHEMA_VERSION)
        .ok_or_else(|| schema_err(format!("has no `{KEY_SCHEMA_VERSION}`")))?;
    let schema_version = version.parse().map_err(|_| {
        schema_err(format!(
            "`{KEY_SCHEMA_VERSION}` is `{version}`, not a number"
        ))
    })?;
    let mut meta = FrameMeta::new(&frame, schema_version);
    for (k, v) in kv {
        if k != KEY_FRAME && k != KEY_SCHEMA_VERSION && k != ARROW_SCHEMA_KEY {
            meta.extra.push((k, v));
        }
    }
    Ok(meta)
}

/// The key under which Parquet writers keep the Arrow schema.
const ARROW_SCHEMA_KEY: &str = "ARROW:schema";

/// A string column's values; the error names the file and the column.
pub fn str_values(
    df: &DataFrame,
    path: &Path,
    name: &str,
) -> Result<Vec<Option<String>>, FrameError> {
    let c = column(df, path, name)?;
    let ca = c
        .str()
        .map_err(|_| wrong_type(path, name, c.dtype(), "strings"))?;
    Ok(ca.iter().map(|v| v.map(str::to_string)).collect())
}

/// An f64 column's values; the error names the file and the column.
pub fn f64_values(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<f64>>, FrameError> {
    let c = column(df, path, name)?;
    let ca = c
        .f64()
        .map_err(|_| wrong_type(path, name, c.dtype(), "f64"))?;
    Ok(ca.iter().collect())
}

/// A u64 column's values; the error names the file and the column.
pub fn u64_values(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<u64>>, FrameError> {
    let c = column(df, path, name)?;
    let ca = c
        .u64()
        .map_err(|_| wrong_type(path, name, c.dtype(), "u64"))?;
    Ok(ca.iter().collect())
}

/// An i64 column's values; the error names the file and the column.
pub fn i64_values(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<i64>>, FrameError> {
    let c = column(df, path, name)?;
    let ca = c
        .i64()
        .map_err(|_| wrong_type(path, name, c.dtype(), "i64"))?;
    Ok(ca.iter().collect())
}

/// A boolean column's values; the error names the file and the column.
pub fn bool_values(
    df: &DataFrame,
    path: &Path,
    name: &str,
) -> Result<Vec<Option<bool>>, FrameError> {
    let c = column(df, path, name)?;
    let ca = c
        .bool()
        .map_err(|_| wrong_type(path, name, c.dtype(), "bool"))?;
    Ok(ca.iter().collect())
}

fn column<'a>(df: &'a DataFrame, path: &Path, name: &str) -> Result<&'a Column, FrameError> {
    df.column(name).map_err(|_| FrameError::Schema {
        path: path.to_path_buf(),
        message: format!("has no column `{name}`"),
    })
}

fn wrong_type(path: &Path, name: &str, got: &DataType, want: &str) -> FrameError {
    FrameError::Schema {
        path: path.to_path_buf(),
        message: format!("column `{name}` holds {got}, expected {want}"),
    }
}

/// The file-level key-value metadata of a Parquet file.
pub fn read_metadata(path: &Path) -> Result<Vec<(String, String)>, FrameError> {
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    let mut r = ParquetReader::new(file);
    let md = r.get_metadata().map_err(|source| FrameError::Polars {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(md
        .key_value_metadata()
        .as_ref()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default())
}

/// Builds a frame column by column with the project's column types (ids as strings,
/// seconds as f64, times as UTC datetimes in nanoseconds, seq lists as `list[u64]`).
#[derive(Debug, Default)]
pub struct FrameBuilder {
    height: usize,
    columns: Vec<Column>,
}

impl FrameBuilder {
    /// A builder for `height` rows.
    pub fn new(height: usize) -> Self {
        FrameBuilder {
            height,
            columns: Vec::new(),
        }
    }
    fn push(mut self, s: Series) -> Self {
        assert_eq!(
            s.len(),
            self.height,
            "column {} has the wrong length",
            s.name()
        );
        self.columns.push(s.into_column());
        self
    }
    /// A non-null string column.
    pub fn str(self, name: &str, v: Vec<String>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A nullable string column.
    pub fn opt_str(self, name: &str, v: Vec<Option<String>>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A non-null f64 column.
    pub fn f64(self, name: &str, v: Vec<f64>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A nullable f64 column.
    pub fn opt_f64(self, name: &str, v: Vec<Option<f64>>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A non-null u64 column.
    pub fn u64(self, name: &str, v: Vec<u64>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A nullable i64 column.
    pub fn opt_i64(self, name: &str, v: Vec<Option<i64>>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A non-null u32 column.
    pub fn u32(self, name: &str, v: Vec<u32>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A non-null bool column.
    pub fn bool(self, name: &str, v: Vec<bool>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A nullable bool column.
    pub fn opt_bool(self, name: &str, v: Vec<Option<bool>>) -> Self {
        self.push(Series::new(name.into(), v))
    }
    /// A nullable UTC datetime column from epoch nanoseconds.
    pub fn datetime_ns(self, name: &str, v: Vec<Option<i64>>) -> Self {
        let s = Int64Chunked::new(name.into(), v)
            .into_datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC))
            .into_series();
        self.push(s)
    }
    /// A `list[u64]` column.
    pub fn list_u64(self, name: &str, v: Vec<Vec<u64>>) -> Self {
        let values: usize = v.iter().map(Vec::len).sum();
        let mut b = ListPrimitiveChunkedBuilder::<UInt64Type>::new(
            name.into(),
            v.len(),
            values,
            DataType::UInt64,
        );
        for x in &v {
            b.append_slice(x);
        }
        self.push(b.finish().into_series())
    }
    /// The frame.
    pub fn finish(self) -> DataFrame {
        DataFrame::new(self.height, self.columns).expect("columns have the builder's height")
    }
}

#[cfg(test)]
mod tests {
    /// A file that fills up after `room` bytes, like a full disk.
    struct FullDisk {
        room: usize,
    }

    impl std::io::Write for FullDisk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A full disk while writing a frame reports the disk's error, not Polars' "Invalid
    /// thrift: transport error".
    #[test]
    fn a_full_disk_is_reported_as_such() {
        let mut df = polars::df!("x" => (0..10_000i64).collect::<Vec<_>>()).unwrap();
        for room in [0, 100, 1000] {
            match super::encode_parquet(FullDisk { room }, &mut df, Vec::new()) {
                Err(super::ParquetWriteError::Io(e)) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}")
                }
                other => panic!("room {room}: {other:?}"),
            }
        }
        let mut sink = Vec::new();
        super::encode_parquet(&mut sink, &mut df, Vec::new()).unwrap();
        assert!(sink.starts_with(b"PAR1"));
    }

    /// The batched encoder (frames larger than memory) reports a full disk as such at
    /// every fill level, not Polars' "Invalid thrift: transport error".
    #[test]
    fn a_full_disk_under_the_batched_encoder_is_reported_as_such() {
        let df = polars::df!("x" => (0..10_000i64).collect::<Vec<_>>()).unwrap();
        let mut whole = Vec::new();
        {
            let (mut w, _) = super::batched_encoder(&mut whole, df.schema(), Vec::new())
                .map_err(|_| "encoder")
                .unwrap();
            for _ in 0..3 {
                w.write_batch(&df).unwrap();
            }
            w.finish().unwrap();
        }
        let step = (whole.len() / 40).max(1);
        for room in (0..whole.len()).step_by(step) {
            let result = (|| {
                let (mut w, slot) =
                    super::batched_encoder(FullDisk { room }, df.schema(), Vec::new())?;
                for _ in 0..3 {
                    w.write_batch(&df).map_err(|e| super::why(&slot, e))?;
                }
                w.finish().map_err(|e| super::why(&slot, e))?;
                Ok::<(), super::ParquetWriteError>(())
            })();
            match result {
                Err(super::ParquetWriteError::Io(e)) => {
                    assert_eq!(
                        e.kind(),
                        std::io::ErrorKind::StorageFull,
                        "room {room}: {e}"
                    )
                }
                other => panic!("room {room} of {}: {other:?}", whole.len()),
            }
        }
    }

    use super::*;

    #[test]
    fn roundtrip_with_metadata_and_stable_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mk = || df!("a" => [1i64, 2, 3], "b" => ["x", "y", "z"]).unwrap();
        let meta = FrameMeta::new("demo", 7).with("agentrace.archives", "abc");
        let p1 = dir.path().join("one.parquet");
        let p2 = dir.path().join("two.parquet");
        write_frame(&p1, &mut mk(), &meta).unwrap();
        write_frame(&p2, &mut mk(), &meta).unwrap();
        assert_eq!(std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap());
        let df = read_frame(&p1, "demo", 7).unwrap();
        assert_eq!(df.height(), 3);
        let md = read_metadata(&p1).unwrap();
        assert!(md.contains(&("agentrace.archives".into(), "abc".into())));
        let e = read_frame(&p1, "demo", 8).unwrap_err().to_string();
        assert!(e.contains("one.parquet") && e.contains("version 8"), "{e}");
        assert!(
            e.ends_with("is the frame `demo` of schema version 7, expected the frame `demo` of schema version 8"),
            "{e}"
        );
        // A Parquet file another tool wrote without the toolkit's metadata (pyarrow drops it
        // unless asked): the message says what is missing and how to add it.
        let bare = dir.path().join("bare.parquet");
        let mut out = Vec::new();
        encode_parquet(&mut out, &mut mk(), Vec::new()).unwrap();
        std::fs::write(&bare, out).unwrap();
        let e = read_frame(&bare, "schedules", 1).unwrap_err().to_string();
        assert!(
            e.contains("bare.parquet")
                && e.contains(
                    "has no `agentrace.frame` / `agentrace.schema_version` key-value metadata"
                )
                && e.contains(r#"b"agentrace.frame": b"schedules""#)
                && !e.contains("None"),
            "{e}"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty());
    }

    /// The contract a reader holds a frame to: the producer's declared columns, in order,
    /// with their types. A frame with a renamed column or a changed type is refused, naming
    /// the file and what differs; the same frame under its declaration reads.
    #[test]
    fn read_declared_holds_a_frame_to_its_producers_columns() {
        use schema::{ColumnType::*, FrameSpec, col};
        const DEMO: FrameSpec = FrameSpec {
            name: "demo",
            doc: "A demo frame.",
            columns: &[col("a", I64, false, "A."), col("b", Str, false, "B.")],
        };
        assert_eq!(DEMO.column("b"), "b");
        let dir = tempfile::tempdir().unwrap();
        let meta = FrameMeta::new("demo", 1);
        let good = dir.path().join("good.parquet");
        write_frame(&good, &mut df!("a" => [1i64], "b" => ["x"]).unwrap(), &meta).unwrap();
        assert_eq!(read_declared(&good, &DEMO, 1).unwrap().height(), 1);
        let renamed = dir.path().join("renamed.parquet");
        write_frame(
            &renamed,
            &mut df!("a" => [1i64], "c" => ["x"]).unwrap(),
            &meta,
        )
        .unwrap();
        let e = read_declared(&renamed, &DEMO, 1).unwrap_err().to_string();
        assert!(e.contains("renamed.parquet") && e.contains("\"c\""), "{e}");
        let retyped = dir.path().join("retyped.parquet");
        write_frame(
            &retyped,
            &mut df!("a" => [1.5f64], "b" => ["x"]).unwrap(),
            &meta,
        )
        .unwrap();
        let e = read_declared(&retyped, &DEMO, 1).unwrap_err().to_string();
        assert!(e.contains("retyped.parquet") && e.contains("demo.a"), "{e}");
    }

    /// Outside a `const` (where it fails to compile), an undeclared column panics.
    #[test]
    #[should_panic(expected = "the frame declares no such column")]
    fn an_undeclared_column_name_is_refused() {
        const DEMO: schema::FrameSpec = schema::FrameSpec {
            name: "demo",
            doc: "A demo frame.",
            columns: &[schema::col("a", schema::ColumnType::I64, false, "A.")],
        };
        let name = std::hint::black_box("b");
        let _ = DEMO.column(name);
    }
}
