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

/// Every schema this build knows: (file name, pretty JSON text with a final newline).
pub fn all_schemas() -> Vec<(String, String)> {
    let pipeline = schemars::schema_for!(PipelineConfig);
    let mut out = vec![(
        "pipeline.schema.json".to_string(),
        serde_json::to_string_pretty(&pipeline).expect("schema serializes") + "\n",
    )];
    for f in frame_files() {
        out.push((
            format!("{}.schema.json", f.spec.name),
            f.spec.json_schema_text(FRAME_SCHEMA_VERSION),
        ));
    }
    // `audit show --json`.
    let show = schemars::schema_for!(audit::show::ShowDocument);
    out.push((
        "show.schema.json".to_string(),
        serde_json::to_string_pretty(&show).expect("schema serializes") + "\n",
    ));
    // `pipeline diff --json`.
    let diff = schemars::schema_for!(crate::diff::DiffDocument);
    out.push((
        "diff.schema.json".to_string(),
        serde_json::to_string_pretty(&diff).expect("schema serializes") + "\n",
    ));
    // `pipeline lineage --json`.
    let lineage = schemars::schema_for!(crate::lineage::LineageDocument);
    out.push((
        "lineage.schema.json".to_string(),
        serde_json::to_string_pretty(&lineage).expect("schema serializes") + "\n",
    ));
    // `pipeline status --json`.
    let status = schemars::schema_for!(crate::status::StatusDocument);
    out.push((
        "status.schema.json".to_string(),
        serde_json::to_string_pretty(&status).expect("schema serializes") + "\n",
    ));
    out
}
