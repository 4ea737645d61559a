//! The JSON schemas the project checks in under `schemas/`, generated from the types.

use model::PipelineConfig;

/// Every schema this build knows: (file name, pretty JSON text with a final newline).
pub fn all_schemas() -> Vec<(String, String)> {
    let pipeline = schemars::schema_for!(PipelineConfig);
    vec![(
        "pipeline.schema.json".to_string(),
        serde_json::to_string_pretty(&pipeline).expect("schema serializes") + "\n",
    )]
}
