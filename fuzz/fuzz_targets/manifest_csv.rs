//! Fuzz target: `manifest.csv` text through parsing and validation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = model::manifest::parse_manifest_csv(std::path::Path::new("/m/manifest.csv"), text);
    }
});
