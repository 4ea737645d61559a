//! Writers of test inputs: manifest rows from archive specs, and a `pipeline.yaml` derived
//! from a base one (e.g. the demo's) with other sources, endpoints and ingest knobs.

use crate::TestkitError;
use model::ArchiveSpec;
use model::config::{IngestConfig, LocationKind, PipelineConfig};
use model::manifest::{ManifestRow, write_manifest_csv};
use std::path::{Path, PathBuf};

/// The sources of a test pipeline.
#[derive(Debug, Clone)]
pub struct SourcesSpec {
    /// Location kinds to fetch and verify.
    pub locations: Vec<LocationKind>,
    /// `sources.gcs.endpoint`.
    pub gcs_endpoint: Option<String>,
    /// `sources.hf.endpoint`.
    pub hf_endpoint: Option<String>,
    /// `ingest:` knobs.
    pub ingest: IngestConfig,
    /// `run_dir`, relative to the written pipeline.yaml.
    pub run_dir: String,
}

/// A manifest row describing `spec`; `file_path` is kept as written in its manifest.
pub fn manifest_row(spec: &ArchiveSpec) -> ManifestRow {
    ManifestRow {
        archive_id: spec.archive_id.clone(),
        workload: spec.workload.as_str().to_string(),
        sha256: spec.sha256.clone(),
        bytes: spec.bytes,
        gcs_bucket: spec.gcs.as_ref().map(|g| g.bucket.clone()),
        gcs_object: spec.gcs.as_ref().map(|g| g.object.clone()),
        gcs_generation: spec.gcs.as_ref().map(|g| g.generation),
        hf_repo: spec.hf.as_ref().map(|h| h.repo.clone()),
        hf_revision: spec.hf.as_ref().map(|h| h.revision.clone()),
        hf_shard: spec.hf.as_ref().map(|h| h.shard.clone()),
        hf_member: spec.hf.as_ref().map(|h| h.member.clone()),
        file_path: spec.file.as_ref().map(|f| f.relative.clone()),
    }
}

/// Write `<dir>/manifest-<name>.csv` and `<dir>/pipeline-<name>.yaml`: the base config's
/// workloads and search, with `sources` and `ingest` replaced. `file_path`s in `rows` are
/// relative to `dir`. Returns the pipeline path.
pub fn write_pipeline(
    base_yaml: &Path,
    dir: &Path,
    name: &str,
    rows: &[ManifestRow],
    sources: &SourcesSpec,
) -> Result<PathBuf, TestkitError> {
    let text = std::fs::read_to_string(base_yaml)
        .map_err(|e| TestkitError::Io(format!("reading {}", base_yaml.display()), e))?;
    let mut cfg: PipelineConfig = serde_yaml::from_str(&text)
        .map_err(|e| TestkitError::Fixture(format!("{}: {e}", base_yaml.display())))?;
    let manifest = format!("manifest-{name}.csv");
    cfg.run_dir = sources.run_dir.clone();
    cfg.sources.manifest = Some(manifest.clone());
    cfg.sources.archives = None;
    cfg.sources.locations = sources.locations.clone();
    cfg.sources.gcs.endpoint = sources.gcs_endpoint.clone();
    cfg.sources.hf.endpoint = sources.hf_endpoint.clone();
    cfg.ingest = sources.ingest.clone();
    let mpath = dir.join(&manifest);
    std::fs::write(&mpath, write_manifest_csv(rows))
        .map_err(|e| TestkitError::Io(format!("writing {}", mpath.display()), e))?;
    let yaml = serde_yaml::to_string(&cfg)
        .map_err(|e| TestkitError::Fixture(format!("serializing the pipeline: {e}")))?;
    let ppath = dir.join(format!("pipeline-{name}.yaml"));
    std::fs::write(&ppath, yaml)
        .map_err(|e| TestkitError::Io(format!("writing {}", ppath.display()), e))?;
    Ok(ppath)
}
