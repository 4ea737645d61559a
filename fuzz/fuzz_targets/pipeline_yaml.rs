//! Fuzz target: `pipeline.yaml` text through parsing and validation (the manifest it names
//! does not exist, so a valid config ends in a clean "cannot read" error).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = model::config::load_config_str(std::path::Path::new("/nonexistent/pipeline.yaml"), text);
        let _ = model::config::line_of(text, &["workloads", "tmax", "replay"]);
    }
});
