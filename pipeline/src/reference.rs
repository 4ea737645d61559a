//! The reference pages generated from the code, checked in under `docs/`: every
//! `pipeline.yaml` key (walked from the JSON schema of `PipelineConfig`) in `CONFIG.md`, and
//! every frame's columns (from the `FrameSpec` declarations) in `FRAMES.md`.

use crate::schemas::{FrameFile, frame_files};
use serde_json::Value;

/// The generated reference pages: (file name under `docs/`, Markdown text).
pub fn all_reference_pages() -> Vec<(String, String)> {
    vec![
        ("CONFIG.md".to_string(), config_reference()),
        ("FRAMES.md".to_string(), frames_reference()),
    ]
}

/// The command that regenerates the schemas and these pages.
pub const REGENERATE: &str = "cargo run -p pipeline -- schemas --out schemas --docs docs";

/// One key of `pipeline.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigKey {
    /// Dotted path; `[]` marks the items of a list (`sources.archives[].sha256`).
    pub path: String,
    /// Type in words.
    pub ty: String,
    /// `required`, `optional`, or the default value.
    pub presence: String,
    /// The doc comment of the field.
    pub description: String,
}

/// Every key of `pipeline.yaml`, depth first in the schema's order.
pub fn config_keys() -> Vec<ConfigKey> {
    let root = serde_json::to_value(schemars::schema_for!(model::PipelineConfig))
        .expect("schema serializes");
    let mut keys = Vec::new();
    walk_object(&root, &root, "", &mut keys);
    keys
}

/// Follow `$ref`s into `$defs`; the referring node's `description` and `default` win.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> (&'a Value, Option<&'a Value>) {
    let mut node = node;
    let mut description = node.get("description");
    while let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        node = &root["$defs"][name];
        description = description.or(node.get("description"));
    }
    (node, description)
}

/// The schema of a value that may be null: (the non-null schema, nullable).
fn strip_null<'a>(root: &'a Value, node: &'a Value) -> (&'a Value, bool) {
    if let Some(any) = node.get("anyOf").and_then(Value::as_array) {
        let non_null: Vec<&Value> = any
            .iter()
            .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if non_null.len() == 1 && any.len() == 2 {
            return (resolve(root, non_null[0]).0, true);
        }
    }
    if let Some(types) = node.get("type").and_then(Value::as_array)
        && types.iter().any(|t| t == "null")
    {
        return (node, true);
    }
    (node, false)
}

/// The closed set of string values of an enum schema, if it is one.
fn enum_values(node: &Value) -> Option<Vec<String>> {
    if let Some(e) = node.get("enum").and_then(Value::as_array) {
        return Some(
            e.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        );
    }
    let one_of = node.get("oneOf").and_then(Value::as_array)?;
    let mut values = Vec::new();
    for v in one_of {
        if let Some(c) = v.get("const").and_then(Value::as_str) {
            values.push(c.to_string());
        } else if let Some(e) = v.get("enum").and_then(Value::as_array) {
            values.extend(e.iter().filter_map(Value::as_str).map(str::to_string));
        } else {
            return None;
        }
    }
    Some(values)
}

fn type_words(root: &Value, node: &Value) -> String {
    let (node, _) = resolve(root, node);
    let (node, nullable) = strip_null(root, node);
    let base = if let Some(values) = enum_values(node) {
        let quoted: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        format!("one of {}", quoted.join(", "))
    } else {
        let ty = match node.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("any")
                .to_string(),
            _ => "any".to_string(),
        };
        match ty.as_str() {
            "integer" if node.get("minimum").and_then(Value::as_f64) == Some(0.0) => {
                "integer >= 0".to_string()
            }
            "number" => "number".to_string(),
            "object" => "map".to_string(),
            "array" => match node.get("items") {
                Some(items) => format!("list of {}", type_words(root, items)),
                None => "list".to_string(),
            },
            other => other.to_string(),
        }
    };
    if nullable {
        format!("{base} or null")
    } else {
        base
    }
}

fn presence(prop: &Value, required: bool) -> String {
    if required {
        return "required".to_string();
    }
    match prop.get("default") {
        Some(Value::Object(_)) | Some(Value::Null) | None => "optional".to_string(),
        Some(v) => format!("default `{v}`"),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn walk_object(root: &Value, node: &Value, prefix: &str, keys: &mut Vec<ConfigKey>) {
    let (node, _) = resolve(root, node);
    let (node, _) = strip_null(root, node);
    let Some(props) = node.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, prop) in props {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let (_, description) = resolve(root, prop);
        keys.push(ConfigKey {
            path: path.clone(),
            ty: type_words(root, prop),
            presence: presence(prop, required.contains(&name.as_str())),
            description: one_line(description.and_then(Value::as_str).unwrap_or("")),
        });
        let (target, _) = resolve(root, prop);
        let (target, _) = strip_null(root, target);
        if target.get("properties").is_some() {
            walk_object(root, target, &path, keys);
        } else if let Some(items) = target.get("items") {
            walk_object(root, items, &format!("{path}[]"), keys);
        }
    }
}

/// `docs/CONFIG.md`: every key of `pipeline.yaml`.
pub fn config_reference() -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# pipeline.yaml keys (generated)\n\n\
         Generated from the configuration types by `{REGENERATE}`; do not edit (a test fails\n\
         when this page and the code differ). What the keys mean together, with an example, is\n\
         in [FORMAT.md](FORMAT.md#pipelineyaml). The same rules are the JSON schema\n\
         [schemas/pipeline.schema.json](../schemas/pipeline.schema.json).\n\n\
         Unknown keys are refused. `[]` marks the entries of a list: `sources.archives[].sha256`\n\
         is the `sha256` of each inline archive row. `optional` means the key may be left out\n\
         (its default is null, or the defaults of the keys below it).\n\n\
         | key | type | required / default | meaning |\n|---|---|---|---|\n"
    ));
    for k in config_keys() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            k.path, k.ty, k.presence, k.description
        ));
    }
    out
}

/// `docs/FRAMES.md`: every table the stages write, with its columns.
pub fn frames_reference() -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Output tables (generated)\n\n\
         Generated from the frame declarations by `{REGENERATE}`; do not edit (a test fails\n\
         when this page and the code differ). Where each file sits in a run and what the JSON\n\
         outputs hold is in [FORMAT.md](FORMAT.md#outputs). Each table's JSON schema is under\n\
         [schemas/](../schemas/); every Parquet file also names itself in its key-value\n\
         metadata (`agentrace.frame`, `agentrace.schema_version`).\n\n\
         Units: `_s` seconds, `_h` hours (core-hours for CPU, GiB-hours for RAM and the image\n\
         cache, GPU-hours for GPUs), `_gib` and `gib` GiB (2^30 bytes), `_bytes` bytes. Times\n\
         named `gen_*`, `raw_*`, `kept_*` are UTC epoch seconds; `*_offset_s` are seconds after the\n\
         attempt's generation start; `start_s`/`end_s` of a schedule are seconds after the\n\
         replay's time 0.\n\n"
    ));
    for FrameFile { stage, file, spec } in frame_files() {
        out.push_str(&format!(
            "## {file}\n\nWritten by {stage}. {}\n\n| column | type | null | meaning |\n|---|---|---|---|\n",
            one_line(spec.doc)
        ));
        for c in spec.columns {
            let mut meaning = one_line(c.doc);
            if !c.values.is_empty() {
                let values: Vec<String> = c.values.iter().map(|v| format!("`{v}`")).collect();
                meaning.push_str(&format!(" Values: {}.", values.join(", ")));
            }
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                c.name,
                c.ty.arrow_type(),
                if c.nullable { "yes" } else { "no" },
                meaning
            ));
        }
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}
