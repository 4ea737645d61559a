//! `pipeline export --ro-crate RUN_DIR`: the run directory described as a Workflow Run
//! RO-Crate (Provenance Run Crate 0.5 on RO-Crate 1.1), `ro-crate-metadata.json` at its
//! root, built only from what the run recorded: provenance.json (files, hashes, archives and
//! their pins, the build), the stage records (each stage's last execution and its times),
//! run.json (the whole run's times) and the config snapshot. What the run did not record
//! (a license, an author, a fetch time) is left out, never made up.

use crate::provenance::{CONFIG_SNAPSHOT, PROVENANCE_FILE, ProvenanceArchive, read_provenance};
use crate::stages::{STAGES, read_record, sha256_file};
use anyhow::{Context, Result, bail};
use model::run_dir::RunDir;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;

/// The crate's metadata file, at the run directory's root.
pub const RO_CRATE_FILE: &str = "ro-crate-metadata.json";

/// The profiles the crate conforms to, each also described in the crate.
const PROFILES: [(&str, &str, &str); 4] = [
    (
        "https://w3id.org/ro/wfrun/process/0.5",
        "Process Run Crate",
        "0.5",
    ),
    (
        "https://w3id.org/ro/wfrun/workflow/0.5",
        "Workflow Run Crate",
        "0.5",
    ),
    (
        "https://w3id.org/ro/wfrun/provenance/0.5",
        "Provenance Run Crate",
        "0.5",
    ),
    (
        "https://w3id.org/workflowhub/workflow-ro-crate/1.0",
        "Workflow RO-Crate",
        "1.0",
    ),
];

const COMPLETED: &str = "http://schema.org/CompletedActionStatus";

fn id(i: &str) -> Value {
    json!({ "@id": i })
}

/// One reference, or a list of several (RO-Crate 1.1 prefers no one-element lists).
fn ids<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> Value {
    let v: Vec<Value> = items.into_iter().map(|i| id(i.as_ref())).collect();
    if v.len() == 1 {
        v.into_iter().next().expect("one")
    } else {
        Value::Array(v)
    }
}

/// The media type of a run's file, by its name (None when not known).
fn encoding_format(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    [
        (".parquet", "application/vnd.apache.parquet"),
        (".json", "application/json"),
        (".yaml", "application/yaml"),
        (".md", "text/markdown"),
        (".html", "text/html"),
        (".csv", "text/csv"),
        (".tar.zst", "application/zstd"),
        (".tar.gz", "application/gzip"),
        (".tgz", "application/gzip"),
        (".tar", "application/x-tar"),
    ]
    .into_iter()
    .find(|(ext, _)| name.ends_with(ext))
    .map(|(_, t)| t)
}

/// The file name a location gives its archive: a GCS object's last segment (its generation
/// aside), a Hub shard member, a local file's name.
fn location_file_name(uri: &str) -> &str {
    let path = match uri.strip_prefix("gs://") {
        Some(rest) => rest.split('#').next().unwrap_or(rest),
        None => uri.rsplit('#').next().unwrap_or(uri),
    };
    path.rsplit(['/', ':']).next().unwrap_or(path)
}

/// `https://...` for a pinned remote location of an archive, with what identifies it: a
/// GCS object at its generation (the XML API's `generation` parameter), or a Hub raw
/// shard at its commit (the archive is a member of it).
fn remote_location(uri: &str) -> Option<(String, String)> {
    let enc = |s: &str| {
        s.split('/')
            .map(|p| {
                p.bytes()
                    .map(|b| match b {
                        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                            (b as char).to_string()
                        }
                        _ => format!("%{b:02X}"),
                    })
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("/")
    };
    if let Some(rest) = uri.strip_prefix("gs://") {
        let (path, generation) = rest.split_once('#')?;
        let (bucket, object) = path.split_once('/')?;
        return Some((
            format!(
                "https://storage.googleapis.com/{bucket}/{}?generation={generation}",
                enc(object)
            ),
            object.rsplit('/').next().unwrap_or(object).to_string(),
        ));
    }
    if let Some(rest) = uri.strip_prefix("hf://datasets/") {
        let repo_rev = rest.split_once('#').map_or(rest, |(r, _member)| r);
        let (repo, rev_shard) = repo_rev.split_once('@')?;
        let (revision, shard) = rev_shard.split_once('/')?;
        return Some((
            format!(
                "https://huggingface.co/datasets/{repo}/resolve/{revision}/{}",
                enc(shard)
            ),
            shard.rsplit('/').next().unwrap_or(shard).to_string(),
        ));
    }
    None
}

/// The crate of a finished run, as JSON.
pub fn ro_crate(run_dir: &Path) -> Result<Value> {
    let run = RunDir::new(run_dir);
    let prov = read_provenance(&run)?;
    let run_json_path = run.file(crate::provenance::RUN_JSON_FILE);
    let run_json: Value = serde_json::from_str(
        &std::fs::read_to_string(&run_json_path)
            .with_context(|| format!("cannot read {}", run_json_path.display()))?,
    )
    .with_context(|| format!("{} is not JSON", run_json_path.display()))?;
    let tool_version = prov.build.tool_version.clone();

    // Every file the crate describes: the config snapshot, the outputs, provenance.json
    // and the run facts; each with its size and SHA256 (the recorded one for an output).
    let mut files: Vec<(String, String)> = vec![(
        CONFIG_SNAPSHOT.to_string(),
        prov.pipeline_yaml_sha256.clone(),
    )];
    for o in &prov.outputs {
        files.push((o.path.clone(), o.sha256.clone()));
    }
    let mut facts: Vec<&str> = vec![PROVENANCE_FILE, crate::provenance::RUN_JSON_FILE];
    for s in STAGES {
        facts.extend(s.run_facts());
    }
    for f in facts {
        if run.file(f).is_file() {
            files.push((f.to_string(), sha256_file(&run.file(f))?));
        }
    }
    let mut graph: Vec<Value> = Vec::new();
    let mut has_part: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();

    // The stages' last executions (their records say when), in run order.
    struct Executed {
        stage: &'static str,
        about: &'static str,
        started: String,
        finished: String,
        inputs: Vec<String>,
        outputs: Vec<String>,
    }
    // Each archive's remote locations, by archive id (ingest reads the archives from them).
    let remote_of: std::collections::BTreeMap<&str, Vec<String>> = prov
        .archives
        .iter()
        .map(|a| {
            let urls = a.locations.iter().filter_map(|l| remote_location(&l.uri));
            (a.archive_id.as_str(), urls.map(|(url, _)| url).collect())
        })
        .collect();
    let mut executed = Vec::new();
    for s in STAGES {
        let Some(rec) = read_record(&run, s.name()) else {
            continue;
        };
        let outputs: Vec<String> = prov
            .outputs
            .iter()
            .filter(|o| o.stage == s.name())
            .map(|o| o.path.clone())
            .collect();
        if outputs.is_empty() {
            continue;
        }
        // Every output of a stage lists the stage's inputs: the first one's are them all.
        let mut inputs: BTreeSet<String> = BTreeSet::new();
        let first = prov.outputs.iter().find(|o| o.stage == s.name());
        for i in first.into_iter().flat_map(|o| &o.inputs) {
            match i.strip_prefix("archive:") {
                Some(aid) => inputs.extend(remote_of.get(aid).into_iter().flatten().cloned()),
                None => {
                    inputs.insert(i.clone());
                }
            }
        }
        executed.push(Executed {
            stage: s.name(),
            about: s.about(),
            started: rec.started_utc,
            finished: rec.finished_utc,
            inputs: inputs.into_iter().collect(),
            outputs,
        });
    }
    if executed.is_empty() {
        bail!(
            "{} has no completed stage to describe (run `pipeline run` first)",
            run_dir.display()
        );
    }
    let normalized = |key: &str| -> Option<String> {
        run_json[key]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| crate::stages::utc_seconds(t.with_timezone(&chrono::Utc)))
    };
    let run_start = executed
        .iter()
        .map(|e| e.started.clone())
        .chain(normalized("started_utc"))
        .min()
        .expect("a stage ran");
    let run_end = executed
        .iter()
        .map(|e| e.finished.clone())
        .chain(normalized("finished_utc"))
        .max()
        .expect("a stage ran");

    // Remote sources: one web entity per pinned location; the stored copy is based on it.
    let mut remote: Vec<Value> = Vec::new();
    let mut stored_extra: std::collections::BTreeMap<String, Value> = Default::default();
    let mut remote_ids: BTreeSet<String> = BTreeSet::new();
    for a in &prov.archives {
        let stored = model::run_dir::stored_archive_relative(&a.sha256);
        let mut based_on = Vec::new();
        let mut identifiers = Vec::new();
        for l in &a.locations {
            identifiers.push(l.uri.clone());
            if let Some((url, name)) = remote_location(&l.uri) {
                if remote_ids.insert(url.clone()) {
                    has_part.push(url.clone());
                    remote.push(remote_entity(a, &l.location_kind, &url, &name, &l.uri));
                }
                based_on.push(url);
            }
        }
        let mut extra = json!({ "name": a.archive_id });
        // The stored blob is named by its hash; its locations' names tell its format.
        if let Some(t) = a
            .locations
            .iter()
            .find_map(|l| encoding_format(location_file_name(&l.uri)))
        {
            extra["encodingFormat"] = json!(t);
        }
        if !based_on.is_empty() {
            extra["isBasedOn"] = ids(&based_on);
        }
        if !identifiers.is_empty() {
            extra["identifier"] = if identifiers.len() == 1 {
                json!(identifiers[0])
            } else {
                json!(identifiers)
            };
        }
        stored_extra.insert(stored, extra);
    }

    // The descriptor, the root, the profiles.
    graph.push(json!({
        "@id": RO_CRATE_FILE,
        "@type": "CreativeWork",
        "conformsTo": [id("https://w3id.org/ro/crate/1.1"), id(PROFILES[3].0)],
        "about": id("./"),
    }));
    let mut mentions = vec!["#engine-run".to_string(), "#run".to_string()];
    mentions.extend(executed.iter().map(|e| format!("#run-{}", e.stage)));
    let run_name = run_dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| run_dir.display().to_string());
    graph.push(json!({
        "@id": "./",
        "@type": "Dataset",
        "name": format!("agentrace run {run_name}"),
        "description": "One run of the agentrace chain (ingest, audit, replay, report) as pipeline.yaml describes it: the verified archives, the audited frames, the replay's schedules and bounds, the report, and their provenance.",
        "datePublished": run_end,
        // A license is required by the profile; the run records none, so none is asserted.
        "license": "NOASSERTION",
        "conformsTo": PROFILES.iter().map(|p| id(p.0)).collect::<Vec<_>>(),
        "mainEntity": id(CONFIG_SNAPSHOT),
        "hasPart": has_part.iter().map(|p| id(p)).collect::<Vec<_>>(),
        "mentions": mentions.iter().map(|m| id(m)).collect::<Vec<_>>(),
    }));
    for (pid, name, version) in PROFILES {
        graph
            .push(json!({ "@id": pid, "@type": "CreativeWork", "name": name, "version": version }));
    }

    // The workflow (the config the engine runs), its language, the engine, steps, tools.
    let config_version = crate::stages::config_keys(
        &std::fs::read_to_string(run.file(CONFIG_SNAPSHOT)).unwrap_or_default(),
    )
    .get("version")
    .cloned()
    .unwrap_or_default();
    let mut workflow = json!({
        "@id": CONFIG_SNAPSHOT,
        "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
        "name": "agentrace pipeline.yaml",
        "encodingFormat": "application/yaml",
        "programmingLanguage": id("#agentrace-pipeline-yaml"),
        "conformsTo": id("https://bioschemas.org/profiles/ComputationalWorkflow/1.0-RELEASE"),
        "hasPart": ids(executed.iter().map(|e| format!("#stage-{}", e.stage))),
        "step": STAGES.iter().map(|s| id(&format!("#step-{}", s.name()))).collect::<Vec<_>>(),
    });
    if !config_version.is_empty() {
        workflow["version"] = json!(config_version);
    }
    graph.push(workflow);
    graph.push(json!({
        "@id": "#agentrace-pipeline-yaml",
        "@type": "ComputerLanguage",
        "name": "agentrace pipeline.yaml",
        "alternateName": "agentrace",
        "version": tool_version,
    }));
    let mut engine = json!({
        "@id": "#engine-pipeline",
        "@type": "SoftwareApplication",
        "name": "pipeline",
        "description": "The agentrace pipeline executable: runs the stages of pipeline.yaml in order.",
        "softwareVersion": tool_version,
        "sha256": prov.build.executable_sha256,
    });
    if let Some(value) = prov.build.commit() {
        engine["identifier"] = id("#engine-pipeline-git-commit");
        graph.push(engine);
        graph.push(json!({
            "@id": "#engine-pipeline-git-commit",
            "@type": "PropertyValue",
            "name": "git commit",
            "propertyID": "https://git-scm.com/docs/git-rev-parse",
            "value": value,
        }));
    } else {
        graph.push(engine);
    }
    for (pos, s) in STAGES.iter().enumerate() {
        graph.push(json!({
            "@id": format!("#step-{}", s.name()),
            "@type": "HowToStep",
            "name": s.name(),
            "position": pos.to_string(),
            "workExample": id(&format!("#stage-{}", s.name())),
        }));
        graph.push(json!({
            "@id": format!("#stage-{}", s.name()),
            "@type": "SoftwareApplication",
            "name": format!("pipeline {}", s.name()),
            "description": s.about(),
            "softwareVersion": tool_version,
        }));
    }

    // The actions: the engine's run, the workflow's run, each stage's last execution.
    graph.push(json!({
        "@id": "#engine-run",
        "@type": "OrganizeAction",
        "name": format!("pipeline {tool_version} running pipeline.yaml"),
        "instrument": id("#engine-pipeline"),
        "object": ids(executed.iter().map(|e| format!("#control-{}", e.stage))),
        "result": id("#run"),
        "startTime": run_start,
        "endTime": run_end,
        "actionStatus": COMPLETED,
    }));
    let sources: Vec<String> = remote
        .iter()
        .filter_map(|r| r["@id"].as_str().map(str::to_string))
        .collect();
    let mut all_outputs: Vec<String> = prov.outputs.iter().map(|o| o.path.clone()).collect();
    all_outputs.push(PROVENANCE_FILE.to_string());
    let mut workflow_run = json!({
        "@id": "#run",
        "@type": "CreateAction",
        "name": "the run of pipeline.yaml",
        "description": "Every stage's last execution in this run directory, from the pinned archives to the report.",
        "instrument": id(CONFIG_SNAPSHOT),
        "result": ids(&all_outputs),
        "startTime": run_start,
        "endTime": run_end,
        "actionStatus": COMPLETED,
    });
    if !sources.is_empty() {
        workflow_run["object"] = ids(&sources);
    }
    graph.push(workflow_run);
    for e in &executed {
        graph.push(json!({
            "@id": format!("#control-{}", e.stage),
            "@type": "ControlAction",
            "name": format!("run {}", e.stage),
            "instrument": id(&format!("#step-{}", e.stage)),
            "object": id(&format!("#run-{}", e.stage)),
            "actionStatus": COMPLETED,
        }));
        graph.push(json!({
            "@id": format!("#run-{}", e.stage),
            "@type": "CreateAction",
            "name": format!("pipeline {}", e.stage),
            "description": e.about,
            "instrument": id(&format!("#stage-{}", e.stage)),
            "object": ids(&e.inputs),
            "result": ids(&e.outputs),
            "startTime": e.started,
            "endTime": e.finished,
            "actionStatus": COMPLETED,
        }));
    }

    // The files.
    for (path, sha) in &files {
        if path == CONFIG_SNAPSHOT {
            // The workflow entity is the config snapshot's file entity too.
            let w = graph
                .iter_mut()
                .find(|e| e["@id"] == CONFIG_SNAPSHOT)
                .expect("the workflow entity");
            w["sha256"] = json!(sha);
            w["contentSize"] = json!(file_size(&run, path)?.to_string());
            continue;
        }
        let mut f = json!({
            "@id": path,
            "@type": "File",
            "name": path.rsplit('/').next().unwrap_or(path),
            "contentSize": file_size(&run, path)?.to_string(),
            "sha256": sha,
        });
        if let Some(t) = encoding_format(path) {
            f["encodingFormat"] = json!(t);
        }
        if let Some(extra) = stored_extra.get(path) {
            for (k, v) in extra.as_object().expect("an object") {
                f[k] = v.clone();
            }
        }
        graph.push(f);
    }
    graph.extend(remote);
    Ok(json!({
        "@context": [
            "https://w3id.org/ro/crate/1.1/context",
            "https://w3id.org/ro/terms/workflow-run/context"
        ],
        "@graph": graph,
    }))
}

fn file_size(run: &RunDir, path: &str) -> Result<u64> {
    let p = run.file(path);
    Ok(std::fs::metadata(&p)
        .with_context(|| format!("cannot read {}", p.display()))?
        .len())
}

/// The web entity of one pinned remote location of an archive.
fn remote_entity(a: &ProvenanceArchive, kind: &str, url: &str, name: &str, uri: &str) -> Value {
    let mut e = json!({
        "@id": url,
        "@type": "File",
        "name": name,
        "identifier": uri,
    });
    if kind == "gcs" {
        // The object at its generation is the archive's bytes, verified.
        e["contentSize"] = json!(a.bytes.to_string());
        e["sha256"] = json!(a.sha256);
        if let Some(t) = encoding_format(name) {
            e["encodingFormat"] = json!(t);
        }
    } else {
        // A raw shard at a commit: the archive is one of its members.
        e["encodingFormat"] = json!("application/x-tar");
    }
    e
}

/// Write `ro-crate-metadata.json` into the run directory (an earlier one only with
/// `force`); returns its path.
pub fn write_ro_crate(run_dir: &Path, force: bool) -> Result<std::path::PathBuf> {
    let path = run_dir.join(RO_CRATE_FILE);
    if path.exists() && !force {
        return Err(crate::export::ExportRefused::CrateExists { path }.into());
    }
    let doc = ro_crate(run_dir)?;
    frames::atomic_write(
        &path,
        (serde_json::to_string_pretty(&doc)? + "\n").as_bytes(),
    )?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_locations_become_https_urls_and_name_their_files() {
        assert_eq!(
            remote_location("gs://traces/tmax/a b.tar.gz#1700000000000001"),
            Some((
                "https://storage.googleapis.com/traces/tmax/a%20b.tar.gz?generation=1700000000000001"
                    .into(),
                "a b.tar.gz".into()
            ))
        );
        assert_eq!(
            remote_location("hf://datasets/org/traces@0123456789abcdef0123456789abcdef01234567/raw/shard-00000.tar#deepswe-000.tar.zst"),
            Some((
                "https://huggingface.co/datasets/org/traces/resolve/0123456789abcdef0123456789abcdef01234567/raw/shard-00000.tar".into(),
                "shard-00000.tar".into()
            ))
        );
        assert_eq!(remote_location("file:archives/tmax-000.tar.gz"), None);
        assert_eq!(location_file_name("gs://b/x/y.tar.zst#12"), "y.tar.zst");
        assert_eq!(
            location_file_name("hf://datasets/o/r@c/raw/s.tar#m.tar.gz"),
            "m.tar.gz"
        );
        assert_eq!(location_file_name("file:archives/t.tar.gz"), "t.tar.gz");
        assert_eq!(encoding_format("store/sha256/abc"), None);
        assert_eq!(encoding_format("t.tar.gz"), Some("application/gzip"));
    }
}
