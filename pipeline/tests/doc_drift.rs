//! The repository's documentation against the code: the generated reference pages are
//! current, docs/FORMAT.md documents every manifest column, clip reason and exclusion reason
//! (lists taken from the code), every `pipeline.yaml` key (walked from the JSON schema) and
//! every frame column (from each `FrameSpec`) appear in the docs, and every relative link of
//! README.md and docs/*.md leads to a file of the repository.

use model::domain::{ClipReason, ExclusionReason};
use model::manifest::MANIFEST_COLUMNS;
use pipeline::reference::REGENERATE;
use pipeline::schemas::frame_files;
use pulldown_cmark::{Event, Parser, Tag};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn doc(name: &str) -> String {
    let p = repo().join("docs").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Whether a Markdown table in `text` has a row whose first cell is `` `name` ``.
fn has_row(text: &str, name: &str) -> bool {
    let cell = format!("| `{name}` |");
    text.lines().any(|l| l.trim_start().starts_with(&cell))
}

#[test]
fn generated_reference_pages_match_the_code() {
    let mut drift = Vec::new();
    for (name, text) in pipeline::reference::all_reference_pages() {
        match std::fs::read_to_string(repo().join("docs").join(&name)) {
            Ok(on_disk) if on_disk == text => {}
            Ok(_) => drift.push(format!("docs/{name} differs")),
            Err(_) => drift.push(format!("docs/{name} is missing")),
        }
    }
    assert!(
        drift.is_empty(),
        "generated docs drifted from the code: {drift:?}; run `{REGENERATE}`"
    );
}

#[test]
fn format_doc_has_a_row_for_every_manifest_column_and_reason() {
    let format = doc("FORMAT.md");
    let mut missing = Vec::new();
    for c in MANIFEST_COLUMNS {
        if !has_row(&format, c) {
            missing.push(format!("manifest column {c}"));
        }
    }
    for r in ClipReason::ALL {
        if !has_row(&format, r.as_str()) {
            missing.push(format!("clip reason {r}"));
        }
    }
    for r in ExclusionReason::ALL {
        if !has_row(&format, r.as_str()) {
            missing.push(format!("exclusion reason {r}"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/FORMAT.md has no table row (`| \\`name\\` |`) for: {missing:?}"
    );
}

/// Dotted paths of every property of a JSON schema (`[]` for list items), found by following
/// `$ref`, `anyOf` and `items`: an independent walk, not the generator's.
fn schema_keys(root: &Value, node: &Value, prefix: &str, out: &mut Vec<String>) {
    let node = match node.get("$ref").and_then(Value::as_str) {
        Some(r) => &root["$defs"][r.trim_start_matches("#/$defs/")],
        None => node,
    };
    for alt in node
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        schema_keys(root, alt, prefix, out);
    }
    if let Some(items) = node.get("items") {
        schema_keys(root, items, &format!("{prefix}[]"), out);
    }
    for (name, prop) in node
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        out.push(path.clone());
        schema_keys(root, prop, &path, out);
    }
}

#[test]
fn config_reference_has_a_row_for_every_pipeline_yaml_key() {
    let text = std::fs::read_to_string(repo().join("schemas/pipeline.schema.json")).unwrap();
    let root: Value = serde_json::from_str(&text).unwrap();
    let mut keys = Vec::new();
    schema_keys(&root, &root, "", &mut keys);
    // The walk reaches the nested keys (a walk that stopped at the top would pass vacuously).
    for k in [
        "sources.manifest",
        "sources.archives[].gcs_generation",
        "workloads.deepswe.layout.attempt_dir",
        "search.budget.lns_moves",
    ] {
        assert!(keys.iter().any(|x| x == k), "schema walk missed {k}");
    }
    let config = doc("CONFIG.md");
    let missing: Vec<&String> = keys.iter().filter(|k| !has_row(&config, k)).collect();
    assert!(
        missing.is_empty(),
        "docs/CONFIG.md has no row for the pipeline.yaml keys {missing:?}; run `{REGENERATE}`"
    );
}

#[test]
fn frames_reference_has_every_column_of_every_frame_and_format_names_every_file() {
    let frames = doc("FRAMES.md");
    let format = doc("FORMAT.md");
    let mut missing = Vec::new();
    for f in frame_files() {
        let heading = format!("## {}\n", f.file);
        let Some(start) = frames.find(&heading) else {
            missing.push(format!("section {}", f.file));
            continue;
        };
        let body = &frames[start + heading.len()..];
        let section = &body[..body.find("\n## ").unwrap_or(body.len())];
        for c in f.spec.columns {
            if !has_row(section, c.name) {
                missing.push(format!("{}.{}", f.file, c.name));
            }
        }
        if !format.contains(&format!("`{}`", f.file)) {
            missing.push(format!("{} in FORMAT.md", f.file));
        }
    }
    assert!(
        missing.is_empty(),
        "docs miss frame columns or files: {missing:?}; run `{REGENERATE}`"
    );
}

/// README.md and every docs/*.md.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The relative link targets of a Markdown text (external URLs and in-page anchors left out).
fn relative_links(text: &str) -> Vec<String> {
    Parser::new(text)
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .filter(|d| !d.starts_with('#') && !d.contains("://") && !d.starts_with("mailto:"))
        .collect()
}

#[test]
fn relative_links_lead_to_files_of_the_repository() {
    let root = repo();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        if text.contains("../shared") {
            broken.push(format!(
                "{rel} mentions ../shared, which is not in the repository"
            ));
        }
        for link in relative_links(&text) {
            checked += 1;
            let path = link.split('#').next().unwrap_or("");
            let target = file.parent().unwrap().join(path);
            match target.canonicalize() {
                Ok(t) if t.starts_with(&root) => {}
                Ok(_) => broken.push(format!("{rel}: {link} leaves the repository")),
                Err(_) => broken.push(format!("{rel}: {link} does not exist")),
            }
        }
    }
    assert!(checked > 10, "only {checked} links found");
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

#[test]
fn the_link_check_sees_links_images_and_skips_urls() {
    let links = relative_links(
        "[a](docs/A.md) ![i](x.svg) [u](https://e.org/x) [anchor](#top) `[no](code.md)`\n\n[r]: ../shared/SPEC.md\n[use][r]",
    );
    assert_eq!(links, vec!["docs/A.md", "x.svg", "../shared/SPEC.md"]);
}
