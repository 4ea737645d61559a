//! The archive manifest: CSV (or inline YAML rows) parsed into validated `ArchiveSpec`s.

use crate::domain::WorkloadId;
use crate::error::ConfigError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The manifest's columns, in order.
pub const MANIFEST_COLUMNS: [&str; 12] = [
    "archive_id",
    "workload",
    "sha256",
    "bytes",
    "gcs_bucket",
    "gcs_object",
    "gcs_generation",
    "hf_repo",
    "hf_revision",
    "hf_shard",
    "hf_member",
    "file_path",
];

/// One manifest row as written (an empty CSV cell is an absent value).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestRow {
    /// Unique archive id.
    pub archive_id: String,
    /// `tmax` or `deepswe`.
    pub workload: String,
    /// Expected SHA256 of the archive bytes (64 hex).
    pub sha256: String,
    /// Expected byte count.
    pub bytes: u64,
    /// GCS bucket.
    #[serde(default)]
    pub gcs_bucket: Option<String>,
    /// GCS object name.
    #[serde(default)]
    pub gcs_object: Option<String>,
    /// GCS object generation (the pin).
    #[serde(default)]
    pub gcs_generation: Option<i64>,
    /// Hugging Face dataset repo (`owner/name`).
    #[serde(default)]
    pub hf_repo: Option<String>,
    /// 40-hex commit the shard is pinned to.
    #[serde(default)]
    pub hf_revision: Option<String>,
    /// Path of the raw shard in the repo.
    #[serde(default)]
    pub hf_shard: Option<String>,
    /// Member name of the archive inside the shard.
    #[serde(default)]
    pub hf_member: Option<String>,
    /// Local path, relative to the manifest (inline rows: to `pipeline.yaml`).
    #[serde(default)]
    pub file_path: Option<String>,
}

/// A GCS location pinned to an object generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcsLocation {
    /// Bucket.
    pub bucket: String,
    /// Object name.
    pub object: String,
    /// Immutable object generation.
    pub generation: i64,
}

impl GcsLocation {
    /// `gs://bucket/object#generation`.
    pub fn uri(&self) -> String {
        format!("gs://{}/{}#{}", self.bucket, self.object, self.generation)
    }
}

/// A member of a Hugging Face raw shard pinned to a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HfLocation {
    /// Dataset repo.
    pub repo: String,
    /// 40-hex commit.
    pub revision: String,
    /// Shard path in the repo.
    pub shard: String,
    /// Member name in the shard.
    pub member: String,
}

impl HfLocation {
    /// `hf://datasets/repo@revision/shard#member`.
    pub fn uri(&self) -> String {
        format!(
            "hf://datasets/{}@{}/{}#{}",
            self.repo, self.revision, self.shard, self.member
        )
    }
}

/// A local file location.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileLocation {
    /// As written in the manifest.
    pub relative: String,
    /// Resolved against the manifest's directory.
    pub path: PathBuf,
}

/// One validated original archive and its locations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchiveSpec {
    /// Unique archive id.
    pub archive_id: String,
    /// Its workload.
    pub workload: WorkloadId,
    /// Expected SHA256, lowercase hex.
    pub sha256: String,
    /// Expected byte count.
    pub bytes: u64,
    /// GCS location, if any.
    pub gcs: Option<GcsLocation>,
    /// Hub location, if any.
    pub hf: Option<HfLocation>,
    /// Local file, if any.
    pub file: Option<FileLocation>,
}

/// Parse a manifest CSV. Errors name the file, the line and the column.
pub fn parse_manifest_csv(path: &Path, text: &str) -> Result<Vec<ArchiveSpec>, ConfigError> {
    let err = |line: Option<usize>, field: &str, message: String| ConfigError::Manifest {
        path: path.to_path_buf(),
        line,
        field: field.to_string(),
        message,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers = rdr
        .headers()
        .map_err(|e| err(Some(1), "(header)", e.to_string()))?
        .clone();
    let names: Vec<&str> = headers.iter().map(str::trim).collect();
    for n in &names {
        if !MANIFEST_COLUMNS.contains(n) {
            return Err(err(
                Some(1),
                n,
                format!(
                    "unknown column, expected the columns {}",
                    MANIFEST_COLUMNS.join(",")
                ),
            ));
        }
    }
    for c in MANIFEST_COLUMNS {
        if !names.contains(&c) {
            return Err(err(Some(1), c, "missing column".into()));
        }
    }
    if names.len() != MANIFEST_COLUMNS.len() {
        return Err(err(Some(1), "(header)", "a column is repeated".into()));
    }
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line() as usize);
            err(line, "(row)", e.to_string())
        })?;
        let line = rec.position().map(|p| p.line() as usize).unwrap_or(0);
        let cell = |name: &str| -> Option<String> {
            let i = names.iter().position(|n| *n == name)?;
            let v = rec.get(i)?.trim();
            (!v.is_empty()).then(|| v.to_string())
        };
        let required = |name: &str| -> Result<String, ConfigError> {
            cell(name).ok_or_else(|| err(Some(line), name, "is required".into()))
        };
        let int = |name: &str| -> Result<Option<i64>, ConfigError> {
            cell(name)
                .map(|v| {
                    v.parse::<i64>().map_err(|_| {
                        err(Some(line), name, format!("expected an integer, got `{v}`"))
                    })
                })
                .transpose()
        };
        let bytes_text = required("bytes")?;
        let bytes = bytes_text.parse::<u64>().map_err(|_| {
            err(
                Some(line),
                "bytes",
                format!("expected a non-negative integer, got `{bytes_text}`"),
            )
        })?;
        rows.push(ManifestRow {
            archive_id: required("archive_id")?,
            workload: required("workload")?,
            sha256: required("sha256")?,
            bytes,
            gcs_bucket: cell("gcs_bucket"),
            gcs_object: cell("gcs_object"),
            gcs_generation: int("gcs_generation")?,
            hf_repo: cell("hf_repo"),
            hf_revision: cell("hf_revision"),
            hf_shard: cell("hf_shard"),
            hf_member: cell("hf_member"),
            file_path: cell("file_path"),
        });
        lines.push(line);
    }
    if rows.is_empty() {
        return Err(err(None, "(rows)", "the manifest lists no archive".into()));
    }
    let base = path.parent().unwrap_or(Path::new(""));
    validate_rows(path, &rows, &lines, base, "")
}

/// Validate rows (from CSV or inline YAML) into archive specs. `lines[i]` is row i's line;
/// `field_prefix` is prepended to field names (`sources.archives` for inline rows).
pub fn validate_rows(
    path: &Path,
    rows: &[ManifestRow],
    lines: &[usize],
    base: &Path,
    field_prefix: &str,
) -> Result<Vec<ArchiveSpec>, ConfigError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let line = lines.get(i).copied().filter(|l| *l > 0);
        let field = |name: &str| {
            if field_prefix.is_empty() {
                name.to_string()
            } else {
                format!("{field_prefix}[{i}].{name}")
            }
        };
        let err = |name: &str, message: String| ConfigError::Manifest {
            path: path.to_path_buf(),
            line,
            field: field(name),
            message: format!("archive `{}`: {message}", r.archive_id),
        };
        if r.archive_id.is_empty()
            || !r
                .archive_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(err(
                "archive_id",
                "must be non-empty and use only letters, digits, '.', '_' and '-'".into(),
            ));
        }
        if !seen.insert(r.archive_id.clone()) {
            return Err(err("archive_id", "appears twice in the manifest".into()));
        }
        let workload = WorkloadId::parse(&r.workload).ok_or_else(|| {
            err(
                "workload",
                format!(
                    "unknown workload `{}`, expected tmax or deepswe",
                    r.workload
                ),
            )
        })?;
        let sha256 = r.sha256.to_ascii_lowercase();
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(err(
                "sha256",
                format!("expected 64 hex characters, got `{}`", r.sha256),
            ));
        }
        if r.bytes == 0 {
            return Err(err("bytes", "an archive cannot be empty".into()));
        }
        let gcs = match (&r.gcs_bucket, &r.gcs_object, r.gcs_generation) {
            (None, None, None) => None,
            (Some(b), Some(o), Some(g)) => {
                if g <= 0 {
                    return Err(err(
                        "gcs_generation",
                        format!("must be a positive integer, got {g}"),
                    ));
                }
                Some(GcsLocation {
                    bucket: b.clone(),
                    object: o.clone(),
                    generation: g,
                })
            }
            _ => {
                let missing = [
                    ("gcs_bucket", r.gcs_bucket.is_none()),
                    ("gcs_object", r.gcs_object.is_none()),
                    ("gcs_generation", r.gcs_generation.is_none()),
                ]
                .into_iter()
                .find(|(_, m)| *m)
                .map(|(n, _)| n)
                .unwrap_or("gcs_generation");
                return Err(err(
                    missing,
                    "a GCS location needs bucket, object and generation (reads are pinned)".into(),
                ));
            }
        };
        let hf = match (&r.hf_repo, &r.hf_revision, &r.hf_shard, &r.hf_member) {
            (None, None, None, None) => None,
            (Some(repo), Some(rev), Some(shard), Some(member)) => {
                if rev.len() != 40 || !rev.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                    return Err(err(
                        "hf_revision",
                        format!("expected a 40-hex lowercase commit, got `{rev}`"),
                    ));
                }
                Some(HfLocation {
                    repo: repo.clone(),
                    revision: rev.clone(),
                    shard: shard.clone(),
                    member: member.clone(),
                })
            }
            _ => {
                let missing = [
                    ("hf_repo", r.hf_repo.is_none()),
                    ("hf_revision", r.hf_revision.is_none()),
                    ("hf_shard", r.hf_shard.is_none()),
                    ("hf_member", r.hf_member.is_none()),
                ]
                .into_iter()
                .find(|(_, m)| *m)
                .map(|(n, _)| n)
                .unwrap_or("hf_member");
                return Err(err(
                    missing,
                    "a Hugging Face location needs repo, revision, shard and member".into(),
                ));
            }
        };
        let file = match &r.file_path {
            None => None,
            Some(p) => {
                if Path::new(p).is_absolute() {
                    return Err(err(
                        "file_path",
                        format!("`{p}` must be relative to the manifest"),
                    ));
                }
                if Path::new(p)
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                {
                    return Err(err(
                        "file_path",
                        format!(
                            "`{p}` leaves the manifest's directory (`..`); archives must lie inside it"
                        ),
                    ));
                }
                Some(FileLocation {
                    relative: p.clone(),
                    path: base.join(p),
                })
            }
        };
        if gcs.is_none() && hf.is_none() && file.is_none() {
            return Err(err(
                "file_path",
                "has no location: give gcs_*, hf_* or file_path".into(),
            ));
        }
        out.push(ArchiveSpec {
            archive_id: r.archive_id.clone(),
            workload,
            sha256,
            bytes: r.bytes,
            gcs,
            hf,
            file,
        });
    }
    Ok(out)
}

/// Render specs back to manifest CSV (used by the demo generator and publishers).
pub fn write_manifest_csv(rows: &[ManifestRow]) -> String {
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    w.write_record(MANIFEST_COLUMNS).expect("in-memory write");
    for r in rows {
        let o = |v: &Option<String>| v.clone().unwrap_or_default();
        w.write_record([
            r.archive_id.clone(),
            r.workload.clone(),
            r.sha256.clone(),
            r.bytes.to_string(),
            o(&r.gcs_bucket),
            o(&r.gcs_object),
            r.gcs_generation.map(|g| g.to_string()).unwrap_or_default(),
            o(&r.hf_repo),
            o(&r.hf_revision),
            o(&r.hf_shard),
            o(&r.hf_member),
            o(&r.file_path),
        ])
        .expect("in-memory write");
    }
    String::from_utf8(w.into_inner().expect("in-memory flush")).expect("utf-8 fields")
}
