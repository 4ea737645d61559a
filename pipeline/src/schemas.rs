//! The JSON schemas the project checks in under `schemas/`, generated from the types, and
//! the list of every table a run writes (the one place the frames of all stages meet).

use frames::schema::FrameSpec;
use model::PipelineConfig;
use model::run_dir::FRAME_SCHEMA_VERSION;

/// A table a stage writes below the run directory.
#[derive(Debug, Clone)]
pub struct FrameFile {
    /// The stage that writes it.
    pub stage: &'static str,
    /// File name below the run directory.
    pub file: String,
    /// Its declared columns.
    pub spec: FrameSpec,
}

/// Every table of a run, in stage order then write order.
pub fn frame_files() -> Vec<FrameFile> {
    let mut out = vec![FrameFile {
        stage: "ingest",
        file: ingest::ledger::LEDGER_FILE.to_string(),
        spec: ingest::ledger::LEDGER,
    }];
    for spec in audit::schema::AUDIT_FRAME_SPECS {
        out.push(FrameFile {
            stage: "audit",
            file: spec.parquet_file(),
            spec: *spec,
        });
    }
    for spec in replay::schemas::FRAMES {
        out.push(FrameFile {
            stage: "replay",
            file: replay::schemas::file_of(&spec),
            spec,
        });
    }
    out
}

/// `<name>.schema.json` of a document type, pretty, with a final newline.
fn document_schema<T: schemars::JsonSchema>(name: &str) -> (String, String) {
    let schema = schemars::schema_for!(T);
    (
        format!("{name}.schema.json"),
        serde_json::to_string_pretty(&schema).expect("schema serializes") + "\n",
    )
}

/// Every schema this build knows: (file name, pretty JSON text with a final newline).
pub fn all_schemas() -> Vec<(String, String)> {
    let mut out = vec![document_schema::<PipelineConfig>("pipeline")];
    for f in frame_files() {
        out.push((
            format!("{}.schema.json", f.spec.name),
            f.spec.json_schema_text(FRAME_SCHEMA_VERSION),
        ));
    }
    // The `--json` documents of `audit show`, `pipeline diff`, `lineage` and `status`.
    out.push(document_schema::<audit::show::ShowDocument>("show"));
    out.push(document_schema::<crate::diff::DiffDocument>("diff"));
    out.push(document_schema::<crate::lineage::LineageDocument>(
        "lineage",
    ));
    out.push(document_schema::<crate::status::StatusDocument>("status"));
    out
}
