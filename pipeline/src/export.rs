//! `pipeline export --dataset DIR RUN`: a finished run's Parquet frames as one
//! Hive-partitioned Parquet dataset for downstream analyses, with a manifest of its parts.
//!
//! Layout (docs/ANALYSIS.md, "The partitioned export"): per frame a directory, below it
//! `workload=W/archive_sha256=S/part-0.parquet` for the frames with a row per attempt or
//! request (they carry both columns), `workload=W/part-0.parquet` for the other frames with
//! a `workload` column, and `part-0.parquet` alone for the rest (and for a frame without
//! rows). The partition columns stay in the files, so every part has exactly the frame's
//! declared schema and the source file's key-value metadata; a reader that takes the
//! values from the paths (DuckDB and Polars with Hive partitioning) sees the same columns.
//! Rows keep their order within a part. Each frame is read one row group at a time, so a
//! frame larger than memory can be exported. `manifest.json` lists every part with its rows,
//! bytes and SHA256, and is written last: a directory without it is an interrupted export.
//! The same run gives the same bytes.

use crate::provenance::{PROVENANCE_FILE, Provenance};
use crate::schemas::{FrameFile, frame_files};
use anyhow::{Context, Result};
use frames::FrameChunks;
use frames::schema::FrameSpec;
use model::run_dir::{FRAME_SCHEMA_VERSION, JSON_FORMAT_VERSION, RunDir, hash_file};
use polars::prelude::{BooleanChunked, ChunkFull, DataFrame};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The manifest of an export, in the dataset directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Version of the export's layout and manifest.
pub const DATASET_FORMAT_VERSION: u32 = 1;
/// The one part file of each partition.
pub const PART_FILE: &str = "part-0.parquet";

/// The columns a dataset is partitioned by, outermost first, among those a frame has.
const PARTITION_COLUMNS: [&str; 2] = ["workload", "archive_sha256"];

/// An export refused before anything was written (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ExportRefused {
    /// The dataset directory holds files and `--force` was not given.
    #[error(
        "{} is not empty; pass --force to replace an earlier export there (its manifest.json and frame directories), or choose an empty directory",
        dir.display()
    )]
    NotEmpty {
        /// The dataset directory.
        dir: PathBuf,
    },
    /// The run directory already holds an RO-Crate and `--force` was not given.
    #[error("{} exists; pass --force to replace it", path.display())]
    CrateExists {
        /// The crate's metadata file.
        path: PathBuf,
    },
    /// The dataset path exists and is not a directory.
    #[error("{} is not a directory", dir.display())]
    NotADirectory {
        /// The dataset path.
        dir: PathBuf,
    },
    /// The run directory is not a finished run.
    #[error("{} is not a finished run directory: {why}", run.display())]
    NotARun {
        /// The run directory.
        run: PathBuf,
        /// What is missing.
        why: String,
    },
    /// A frame's bytes are not the ones the run recorded.
    #[error(
        "{}: sha256 {actual}, provenance.json records {recorded}; the frame is not the run's output (`pipeline verify {}` lists every difference)",
        path.display(),
        run.display()
    )]
    Changed {
        /// The run directory.
        run: PathBuf,
        /// The frame file.
        path: PathBuf,
        /// Its SHA256 now.
        actual: String,
        /// What provenance records.
        recorded: String,
    },
    /// A partition column holds a value that cannot name a directory.
    #[error(
        "{}: row {row}: `{column}` is {value:?}, which cannot name a partition (a workload name, or 64 lowercase hex digits)",
        path.display()
    )]
    BadPartitionValue {
        /// The frame file.
        path: PathBuf,
        /// Row (0-based, in file order).
        row: usize,
        /// The column.
        column: String,
        /// The value.
        value: String,
    },
}

/// The export's manifest (`manifest.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetManifest {
    /// Version of the layout and of this document.
    pub format_version: u32,
    /// The frames' format version (`agentrace.schema_version` of every part).
    pub frame_schema_version: u32,
    /// The toolkit version that exported it.
    pub tool_version: String,
    /// The run exported.
    pub run: ExportedRun,
    /// Every frame, in the order of docs/FRAMES.md.
    pub frames: Vec<ExportedFrame>,
}

/// Which run an export came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedRun {
    /// SHA256 of the run's `provenance.json`.
    pub provenance_sha256: String,
    /// SHA256 of the run's configuration text.
    pub pipeline_yaml_sha256: String,
}

/// One frame of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedFrame {
    /// Frame name (`agentrace.frame`).
    pub frame: String,
    /// Its file in the run directory.
    pub source: String,
    /// SHA256 of that file (as provenance.json records it).
    pub source_sha256: String,
    /// Rows of the frame (the sum over its parts).
    pub rows: u64,
    /// The partition columns, outermost first (empty: one part).
    pub partition_by: Vec<String>,
    /// The parts, in path order.
    pub parts: Vec<ExportedPart>,
}

/// One part file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedPart {
    /// Path relative to the dataset directory, `/`-separated.
    pub path: String,
    /// Partition column -> value.
    pub partition: BTreeMap<String, String>,
    /// Rows.
    pub rows: u64,
    /// Bytes.
    pub bytes: u64,
    /// SHA256 of the file.
    pub sha256: String,
}

/// What an export wrote.
#[derive(Debug, Clone)]
pub struct ExportSummary {
    /// The manifest written.
    pub manifest: DatasetManifest,
    /// Where.
    pub manifest_path: PathBuf,
}

impl ExportSummary {
    /// One line: frames, parts, rows, bytes, where.
    pub fn line(&self, dir: &Path) -> String {
        let parts: usize = self.manifest.frames.iter().map(|f| f.parts.len()).sum();
        let rows: u64 = self.manifest.frames.iter().map(|f| f.rows).sum();
        let bytes: u64 = self
            .manifest
            .frames
            .iter()
            .flat_map(|f| &f.parts)
            .map(|p| p.bytes)
            .sum();
        format!(
            "exported {} frames ({rows} rows) as {parts} parts ({bytes} bytes) to {}; manifest {}",
            self.manifest.frames.len(),
            dir.display(),
            self.manifest_path.display()
        )
    }
}

/// The Parquet frames of a run, in the order of docs/FRAMES.md (a frame written as CSV,
/// `joint_schedules.csv`, is not part of the dataset).
pub fn exported_frames() -> Vec<FrameFile> {
    frame_files()
        .into_iter()
        .filter(|f| f.file.ends_with(".parquet"))
        .collect()
}

/// The partition columns of a frame: those of [`PARTITION_COLUMNS`] it declares, outermost
/// first, stopping at the first it lacks (a frame without `workload` is not partitioned).
pub fn partition_columns(spec: &FrameSpec) -> Vec<&'static str> {
    PARTITION_COLUMNS
        .iter()
        .take_while(|c| spec.columns.iter().any(|x| x.name == **c))
        .copied()
        .collect()
}

/// Export the frames of the finished run `run_dir` into `dir` (absent or empty, or with
/// `force` an earlier export's files replaced).
pub fn export_dataset(run_dir: &Path, dir: &Path, force: bool) -> Result<ExportSummary> {
    let run = RunDir::new(run_dir);
    let (prov, provenance_sha256) = read_finished_run(run_dir)?;
    let recorded: BTreeMap<&str, &str> = prov
        .outputs
        .iter()
        .map(|o| (o.path.as_str(), o.sha256.as_str()))
        .collect();
    let frames = exported_frames();
    // Every frame is there and is the run's recorded output, before anything is written.
    let mut sources = Vec::new();
    for f in &frames {
        let path = run.file(&f.file);
        let Some(want) = recorded.get(f.file.as_str()) else {
            return Err(ExportRefused::NotARun {
                run: run_dir.to_path_buf(),
                why: format!(
                    "{PROVENANCE_FILE} lists no `{}` (the {} stage has not finished)",
                    f.file, f.stage
                ),
            }
            .into());
        };
        if !path.is_file() {
            return Err(ExportRefused::NotARun {
                run: run_dir.to_path_buf(),
                why: format!("`{}` is missing, though {PROVENANCE_FILE} lists it", f.file),
            }
            .into());
        }
        let (sha, _) =
            hash_file(&path).with_context(|| format!("cannot read {}", path.display()))?;
        if sha != *want {
            return Err(ExportRefused::Changed {
                run: run_dir.to_path_buf(),
                path,
                actual: sha,
                recorded: want.to_string(),
            }
            .into());
        }
        sources.push((f, path, sha));
    }
    prepare_dir(dir, force, &frames)?;
    let mut exported = Vec::new();
    for (f, path, sha) in sources {
        exported.push(export_frame(f, &path, sha, dir)?);
    }
    let manifest = DatasetManifest {
        format_version: DATASET_FORMAT_VERSION,
        frame_schema_version: FRAME_SCHEMA_VERSION,
        tool_version: model::TOOL_VERSION.to_string(),
        run: ExportedRun {
            provenance_sha256,
            pipeline_yaml_sha256: prov.pipeline_yaml_sha256.clone(),
        },
        frames: exported,
    };
    let manifest_path = dir.join(MANIFEST_FILE);
    let text = serde_json::to_string_pretty(&manifest)? + "\n";
    frames::atomic_write(&manifest_path, text.as_bytes())?;
    Ok(ExportSummary {
        manifest,
        manifest_path,
    })
}

/// A run directory's provenance and its SHA256, refused unless the run finished.
fn read_finished_run(run_dir: &Path) -> Result<(Provenance, String)> {
    let not_a_run = |why: String| ExportRefused::NotARun {
        run: run_dir.to_path_buf(),
        why,
    };
    if !run_dir.is_dir() {
        return Err(not_a_run("no such directory".into()).into());
    }
    let ppath = run_dir.join(PROVENANCE_FILE);
    if !ppath.is_file() {
        return Err(not_a_run(format!(
            "it has no {PROVENANCE_FILE} (`pipeline run` writes it when every stage has finished)"
        ))
        .into());
    }
    let text = std::fs::read_to_string(&ppath)
        .with_context(|| format!("cannot read {}", ppath.display()))?;
    model::run_dir::check_json_version(&ppath, &text, JSON_FORMAT_VERSION)?;
    let prov: Provenance = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a provenance document", ppath.display()))?;
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()));
    Ok((prov, sha))
}

/// Make `dir` ready: created when absent; refused when it holds anything, unless `force`,
/// which removes what an export writes there (the manifest first, then each frame's
/// directory) and leaves everything else.
fn prepare_dir(dir: &Path, force: bool, frames: &[FrameFile]) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            return Ok(());
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot read {}", dir.display())));
        }
        Ok(_) if !dir.is_dir() => {
            return Err(ExportRefused::NotADirectory {
                dir: dir.to_path_buf(),
            }
            .into());
        }
        Ok(_) => {}
    }
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if entries.next().is_none() {
        return Ok(());
    }
    if !force {
        return Err(ExportRefused::NotEmpty {
            dir: dir.to_path_buf(),
        }
        .into());
    }
    let remove = |p: &Path| -> Result<()> {
        let r = match std::fs::symlink_metadata(p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => Err(e),
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
            Ok(_) => std::fs::remove_file(p),
        };
        r.with_context(|| format!("cannot remove {}", p.display()))
    };
    remove(&dir.join(MANIFEST_FILE))?;
    for f in frames {
        remove(&dir.join(f.spec.name))?;
    }
    Ok(())
}

/// A partition: its columns' values, outermost first.
type PartitionKey = Vec<String>;

/// Export one frame: its parts below `dir/<frame>/`.
fn export_frame(f: &FrameFile, path: &Path, sha: String, dir: &Path) -> Result<ExportedFrame> {
    let spec = &f.spec;
    let chunks = FrameChunks::open(path, spec, FRAME_SCHEMA_VERSION)?;
    let meta = frames::frame_meta_of(path)?;
    let by = partition_columns(spec);
    // Which row groups hold each partition (all of them when not partitioned).
    let mut groups: BTreeMap<PartitionKey, Vec<usize>> = BTreeMap::new();
    if by.is_empty() || chunks.rows() == 0 {
        groups.insert(Vec::new(), (0..chunks.len()).collect());
    } else {
        let mut first_row = 0;
        for i in 0..chunks.len() {
            let df = chunks.read(i, Some(&by))?;
            for key in partition_keys(&df, &by, path, first_row)? {
                let list = groups.entry(key).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
            first_row += df.height();
        }
    }
    let mut parts = Vec::new();
    for (key, rgs) in &groups {
        let mut rel = String::from(spec.name);
        for (c, v) in by.iter().zip(key) {
            rel.push_str(&format!("/{c}={v}"));
        }
        let part_dir = model::run_dir::create_dir_below(dir, Path::new(&rel))
            .with_context(|| format!("cannot create {}", dir.join(&rel).display()))?;
        rel.push('/');
        rel.push_str(PART_FILE);
        let part_path = part_dir.join(PART_FILE);
        let mut w = frames::FrameStreamWriter::new(&part_path, spec, meta.clone());
        for &i in rgs {
            let df = chunks.read(i, None)?;
            let df = if key.is_empty() {
                df
            } else {
                only(&df, &by, key).with_context(|| format!("reading {}", path.display()))?
            };
            w.write(&df)?;
        }
        let rows = w.finish(&mut chunks.empty()?)?;
        let (sha256, bytes) = hash_file(&part_path)
            .with_context(|| format!("cannot read {}", part_path.display()))?;
        parts.push(ExportedPart {
            path: rel,
            partition: by
                .iter()
                .zip(key)
                .map(|(c, v)| (c.to_string(), v.clone()))
                .collect(),
            rows: rows as u64,
            bytes,
            sha256,
        });
    }
    Ok(ExportedFrame {
        frame: spec.name.to_string(),
        source: f.file.clone(),
        source_sha256: sha,
        rows: chunks.rows() as u64,
        partition_by: by.iter().map(|c| c.to_string()).collect(),
        parts,
    })
}

/// The distinct partition keys of a chunk's rows, each checked to name a directory.
fn partition_keys(
    df: &DataFrame,
    by: &[&str],
    path: &Path,
    first_row: usize,
) -> Result<Vec<PartitionKey>> {
    let cols = by
        .iter()
        .map(|c| {
            df.column(c)
                .and_then(|s| s.str().cloned())
                .with_context(|| format!("{}: column `{c}`", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut keys: std::collections::BTreeSet<PartitionKey> = std::collections::BTreeSet::new();
    let mut last: Option<PartitionKey> = None;
    for row in 0..df.height() {
        let values: Vec<&str> = cols
            .iter()
            .map(|c| c.get(row).unwrap_or_default())
            .collect();
        if last
            .as_ref()
            .is_some_and(|k| k.iter().zip(&values).all(|(a, b)| a == b))
        {
            continue;
        }
        for (c, v) in by.iter().zip(&values) {
            if !names_a_partition(c, v) {
                return Err(ExportRefused::BadPartitionValue {
                    path: path.to_path_buf(),
                    row: first_row + row,
                    column: c.to_string(),
                    value: v.to_string(),
                }
                .into());
            }
        }
        let key: PartitionKey = values.iter().map(|v| v.to_string()).collect();
        keys.insert(key.clone());
        last = Some(key);
    }
    Ok(keys.into_iter().collect())
}

/// Whether a value may name a partition directory: a workload's name, or a SHA256.
fn names_a_partition(column: &str, v: &str) -> bool {
    match column {
        "workload" => model::WorkloadId::parse(v).is_some(),
        _ => v.len() == 64 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
    }
}

/// The rows of `df` in partition `key`, in their order.
fn only(df: &DataFrame, by: &[&str], key: &[String]) -> Result<DataFrame> {
    let mut mask = BooleanChunked::full("keep".into(), true, df.height());
    for (c, v) in by.iter().zip(key) {
        let col = df.column(c)?.str()?;
        let here: BooleanChunked = col.iter().map(|x| Some(x == Some(v.as_str()))).collect();
        mask = &mask & &here;
    }
    Ok(df.filter(&mask)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_must_name_a_directory() {
        assert!(names_a_partition("workload", "tmax"));
        assert!(!names_a_partition("workload", "../x"));
        assert!(names_a_partition("archive_sha256", &"a".repeat(64)));
        for bad in [
            "A".repeat(64),
            "a".repeat(63),
            "../".repeat(21) + "a",
            String::new(),
        ] {
            assert!(!names_a_partition("archive_sha256", &bad), "{bad}");
        }
    }

    #[test]
    fn per_attempt_frames_are_partitioned_by_workload_and_archive() {
        let by = |name: &str| {
            let f = exported_frames()
                .into_iter()
                .find(|f| f.spec.name == name)
                .unwrap();
            partition_columns(&f.spec)
        };
        for f in [
            "attempts",
            "requests",
            "clipping",
            "exclusions",
            "attempt_blobs",
        ] {
            assert_eq!(by(f), ["workload", "archive_sha256"], "{f}");
        }
        for f in [
            "ledger",
            "schedules",
            "bounds",
            "search_trace",
            "pareto",
            "blob_bounds",
        ] {
            assert_eq!(by(f), ["workload"], "{f}");
        }
        assert!(by("blobs").is_empty());
        assert!(
            exported_frames()
                .iter()
                .all(|f| f.spec.name != "joint_schedules")
        );
    }
}
