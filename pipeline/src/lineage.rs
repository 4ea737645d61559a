//! `pipeline lineage RUN FILE[#SELECTOR]`: from one output of a finished run (a file, the
//! rows of a frame that match a filter, or one figure of replay.json) back through the
//! stages that wrote what it was derived from, each with its build and the config keys it
//! uses, to the archives with their SHA256, size and pins (GCS generation, Hub commit). Built
//! only from what the run recorded: provenance.json, the stage records, the config snapshot.

use crate::provenance::{CONFIG_SNAPSHOT, ProvenanceArchive, read_provenance};
use crate::stages::{STAGES, config_keys, read_record};
use anyhow::{Context, Result, anyhow, bail};
use model::run_dir::{FRAME_SCHEMA_VERSION, RunDir};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Format version of `pipeline lineage --json`.
pub const LINEAGE_FORMAT_VERSION: u32 = 1;

/// `pipeline lineage --json` (schemas/lineage.schema.json).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LineageDocument {
    /// [`LINEAGE_FORMAT_VERSION`].
    pub format_version: u32,
    /// The run directory.
    pub run_dir: String,
    /// What was asked: `FILE`, `FILE#COLUMN=VALUE[,...]` or `replay.json#WORKLOAD.PATH`.
    pub target: String,
    /// A figure's value, or how many rows the filter matched.
    pub selected: Option<String>,
    /// The archives the target derives from (narrowed by the selector's workload or the
    /// rows' archives).
    pub archives: Vec<LineageArchive>,
    /// Every file on the way, the target first, each once, with the files it was derived
    /// from (by path).
    pub files: Vec<LineageFile>,
    /// SHA256 of the config text every stage read (kept as the run's pipeline.yaml).
    pub pipeline_yaml_sha256: String,
}

/// One file on the way from the target to the archives.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LineageFile {
    /// Path relative to the run directory.
    pub path: String,
    /// Its SHA256 as recorded.
    pub sha256: String,
    /// The stage that wrote it.
    pub stage: String,
    /// The build that ran that stage (from its record; the provenance's when absent).
    pub build: String,
    /// The config keys that stage uses, with their values in the run's config (JSON).
    pub config: BTreeMap<String, String>,
    /// The run's files it was derived from (paths; the config snapshot aside).
    pub inputs: Vec<String>,
    /// The archives it was read from directly (ingest's outputs), by id.
    pub archives: Vec<String>,
}

/// One archive, as the run verified it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LineageArchive {
    /// Archive id.
    pub archive_id: String,
    /// Workload.
    pub workload: String,
    /// SHA256.
    pub sha256: String,
    /// Bytes.
    pub bytes: u64,
    /// Each location with its pin and verdict: `<kind> <uri>`, then `generation N`,
    /// `revision R`, `commit C` where recorded, then the verdict.
    pub locations: Vec<String>,
}

/// What the selector narrows the archives to.
#[derive(Debug, Default)]
struct Narrowing {
    workloads: Option<BTreeSet<String>>,
    archive_sha256: Option<BTreeSet<String>>,
}

impl Narrowing {
    fn keeps(&self, a: &ProvenanceArchive) -> bool {
        self.workloads
            .as_ref()
            .is_none_or(|w| w.contains(&a.workload))
            && self
                .archive_sha256
                .as_ref()
                .is_none_or(|s| s.contains(&a.sha256))
    }
}

/// The lineage of `target` in the finished run `run_dir`. An unknown file, a filter no row
/// matches or a figure replay.json does not hold is an error.
pub fn lineage(run_dir: &Path, target: &str) -> Result<LineageDocument> {
    let run = RunDir::new(run_dir);
    let prov = read_provenance(&run)?;
    let snapshot = run.file(CONFIG_SNAPSHOT);
    let config = config_keys(
        &std::fs::read_to_string(&snapshot)
            .with_context(|| format!("cannot read {}", snapshot.display()))?,
    );
    let (file, selector) = match target.split_once('#') {
        Some((f, s)) => (f, Some(s)),
        None => (target, None),
    };
    let outputs: BTreeMap<&str, &crate::provenance::ProvenanceOutput> =
        prov.outputs.iter().map(|o| (o.path.as_str(), o)).collect();
    if !outputs.contains_key(file) {
        bail!(
            "{} lists no output `{file}` (the outputs are the files `pipeline verify` checks, e.g. attempts.parquet, replay.json)",
            run.file(crate::provenance::PROVENANCE_FILE).display()
        );
    }
    let (selected, narrowing) = match selector {
        None => (None, Narrowing::default()),
        Some(sel) if file == replay::output::REPLAY_JSON_FILE => figure(&run, sel)?,
        Some(sel) => rows(&run, file, sel)?,
    };
    let archives_by_id: BTreeMap<&str, &ProvenanceArchive> = prov
        .archives
        .iter()
        .map(|a| (a.archive_id.as_str(), a))
        .collect();
    // The stored blobs on the way: those of the archives the selector keeps.
    let kept_sha256: BTreeSet<&str> = prov
        .archives
        .iter()
        .filter(|a| narrowing.keeps(a))
        .map(|a| a.sha256.as_str())
        .collect();
    let mut files = Vec::new();
    let mut reached: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut queue = vec![file.to_string()];
    while let Some(path) = queue.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let Some(out) = outputs.get(path.as_str()) else {
            continue;
        };
        let mut inputs = Vec::new();
        let mut archives = Vec::new();
        for i in &out.inputs {
            if i == CONFIG_SNAPSHOT {
                continue;
            }
            if let Some(id) = i.strip_prefix("archive:") {
                let Some(a) = archives_by_id.get(id) else {
                    continue;
                };
                // A stored blob is named by its SHA256: it holds that archive's bytes only.
                let blob_of = stored_sha256(&path);
                if narrowing.keeps(a) && blob_of.is_none_or(|s| s == a.sha256) {
                    archives.push(id.to_string());
                    reached.insert(id.to_string());
                }
                continue;
            }
            if let Some(sha) = stored_sha256(i)
                && !kept_sha256.contains(sha)
            {
                continue;
            }
            inputs.push(i.clone());
            queue.push(i.clone());
        }
        let stage = STAGES.iter().find(|s| s.name() == out.stage);
        files.push(LineageFile {
            path: path.clone(),
            sha256: out.sha256.clone(),
            stage: out.stage.clone(),
            build: read_record(&run, &out.stage)
                .map(|r| r.inputs.build.describe())
                .unwrap_or_else(|| prov.build.describe()),
            config: stage
                .map(|s| {
                    config
                        .iter()
                        .filter(|(k, _)| {
                            s.config_keys()
                                .iter()
                                .any(|p| model::stage::config_key_matches(p, k))
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            inputs,
            archives,
        });
    }
    // The target first, then in the order the walk met them, each stage's files together.
    let archives = prov
        .archives
        .iter()
        .filter(|a| reached.contains(&a.archive_id))
        .map(lineage_archive)
        .collect();
    Ok(LineageDocument {
        format_version: LINEAGE_FORMAT_VERSION,
        run_dir: run_dir.display().to_string(),
        target: target.to_string(),
        selected,
        archives,
        files,
        pipeline_yaml_sha256: prov.pipeline_yaml_sha256.clone(),
    })
}

/// The SHA256 a stored blob's path names (`store/sha256/<sha256>`).
fn stored_sha256(path: &str) -> Option<&str> {
    path.strip_prefix("store/sha256/")
}

fn lineage_archive(a: &ProvenanceArchive) -> LineageArchive {
    LineageArchive {
        archive_id: a.archive_id.clone(),
        workload: a.workload.clone(),
        sha256: a.sha256.clone(),
        bytes: a.bytes,
        locations: a
            .locations
            .iter()
            .map(|l| {
                let mut s = format!("{} {}", l.location_kind, l.uri);
                if let Some(g) = l.generation {
                    let _ = write!(s, ", generation {g}");
                }
                if let Some(r) = &l.revision {
                    let _ = write!(s, ", revision {r}");
                }
                if let Some(c) = &l.resolved_commit {
                    let _ = write!(s, ", commit {c}");
                }
                let _ = write!(s, ", {}", l.verdict);
                s
            })
            .collect(),
    }
}

/// `WORKLOAD.PATH` of replay.json: the value, and the workload it narrows to.
fn figure(run: &RunDir, selector: &str) -> Result<(Option<String>, Narrowing)> {
    let path = run.file(replay::output::REPLAY_JSON_FILE);
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?,
    )
    .with_context(|| format!("{} is not JSON", path.display()))?;
    let mut parts = selector.split('.');
    let workload = parts.next().unwrap_or_default();
    let mut node = doc["workloads"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["workload"] == workload))
        .ok_or_else(|| anyhow!("{} has no workload `{workload}`", path.display()))?;
    for p in parts {
        node = node.get(p).ok_or_else(|| {
            anyhow!(
                "{} has no figure `{selector}` (e.g. `{workload}.best_found_h.gpu`)",
                path.display()
            )
        })?;
    }
    let narrowing = Narrowing {
        workloads: Some(std::iter::once(workload.to_string()).collect()),
        archive_sha256: None,
    };
    Ok((Some(node.to_string()), narrowing))
}

/// `COLUMN=VALUE[,COLUMN=VALUE...]` of a frame: how many rows match, and the workloads and
/// archives of those rows.
fn rows(run: &RunDir, file: &str, selector: &str) -> Result<(Option<String>, Narrowing)> {
    let spec = crate::schemas::frame_files()
        .into_iter()
        .find(|f| f.file == file)
        .ok_or_else(|| {
            anyhow!("`{file}` is not a frame: a row filter applies to a .parquet output")
        })?
        .spec;
    let path = run.file(file);
    let df = frames::read_declared(&path, &spec, FRAME_SCHEMA_VERSION)?;
    let mut filters = Vec::new();
    for f in selector.split(',') {
        let (col, value) = f
            .split_once('=')
            .ok_or_else(|| anyhow!("row filter `{f}`: write COLUMN=VALUE"))?;
        if df.column(col).is_err() {
            bail!(
                "{file} has no column `{col}` (its columns: {})",
                spec.columns
                    .iter()
                    .map(|c| c.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        filters.push((col, value));
    }
    let matched: Vec<usize> = (0..df.height())
        .filter(|&i| {
            filters
                .iter()
                .all(|(c, v)| crate::diff::cell(&df, c, i) == *v)
        })
        .collect();
    if matched.is_empty() {
        bail!("no row of {file} matches `{selector}`");
    }
    let collect = |col: &str| -> Option<BTreeSet<String>> {
        df.column(col).ok().map(|_| {
            matched
                .iter()
                .map(|&i| crate::diff::cell(&df, col, i))
                .collect()
        })
    };
    Ok((
        Some(format!("{} row(s)", matched.len())),
        Narrowing {
            workloads: collect("workload"),
            archive_sha256: collect("archive_sha256"),
        },
    ))
}

/// The text output: the target, then every file with its stage, build, keys and inputs,
/// then the archives.
pub fn lineage_text(d: &LineageDocument) -> String {
    let mut s = d.target.clone();
    if let Some(v) = &d.selected {
        let _ = write!(s, " = {v}");
    }
    let _ = writeln!(
        s,
        "\nconfig: pipeline.yaml sha256 {} (every stage reads it)",
        d.pipeline_yaml_sha256
    );
    for f in &d.files {
        let _ = writeln!(s, "{} (sha256 {})", f.path, f.sha256);
        let _ = writeln!(s, "  written by {}, build {}", f.stage, f.build);
        if !f.config.is_empty() {
            let keys: Vec<String> = f.config.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(s, "  config: {}", keys.join(", "));
        }
        if !f.inputs.is_empty() {
            let _ = writeln!(s, "  from: {}", f.inputs.join(", "));
        }
        if !f.archives.is_empty() {
            let _ = writeln!(s, "  from archives: {}", f.archives.join(", "));
        }
    }
    let _ = writeln!(s, "archives ({})", d.archives.len());
    for a in &d.archives {
        let _ = writeln!(
            s,
            "  {} ({}): sha256 {}, {} bytes",
            a.archive_id, a.workload, a.sha256, a.bytes
        );
        for l in &a.locations {
            let _ = writeln!(s, "    {l}");
        }
    }
    s
}
