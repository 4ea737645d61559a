//! The JSON schemas the project checks in under `schemas/`, generated from the types.

use model::PipelineConfig;
use model::run_dir::FRAME_SCHEMA_VERSION;

/// Every schema this build knows: (file name, pretty JSON text with a final newline).
pub fn all_schemas() -> Vec<(String, String)> {
    let pipeline = schemars::schema_for!(PipelineConfig);
    let mut out = vec![(
        "pipeline.schema.json".to_string(),
        serde_json::to_string_pretty(&pipeline).expect("schema serializes") + "\n",
    )];
    let ledger = &ingest::ledger::LEDGER;
    for spec in std::iter::once(ledger).chain(audit::schema::AUDIT_FRAME_SPECS) {
        out.push((
            format!("{}.schema.json", spec.name),
            spec.json_schema_text(FRAME_SCHEMA_VERSION),
        ));
    }
    out.extend(replay::schemas::frame_schemas());
    out
}
