//! Fuzz target: identity, result and timers files (and RFC 3339 `completed_utc`, PAX time
//! strings) through the attempt reconstruction. Input: three parts separated by 0xFF.
#![no_main]

use audit::archive::parse_epoch_decimal;
use audit::attempt::{AttemptEvidence, audit_attempt, parse_completed_utc};
use libfuzzer_sys::fuzz_target;
use model::WorkloadId;
use model::config::Layout;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|b| *b == 0xff);
    let identity = parts.next().unwrap_or_default().to_vec();
    let result = parts.next().map(|p| p.to_vec());
    let timers = parts.next().map(|p| p.to_vec());
    let times = parts.next().unwrap_or_default();
    let text = String::from_utf8_lossy(times);
    let _ = parse_completed_utc(&text);
    let mtime = parse_epoch_decimal(&text).ok_or_else(|| "bad".to_string());
    let mut starts = std::collections::BTreeMap::new();
    for (i, b) in times.iter().enumerate().take(64) {
        starts.insert(i as u64, f64::from(*b) * 1.5 - 20.0);
    }
    for w in WorkloadId::ALL {
        let layout = Layout::default_for(w);
        let ev = AttemptEvidence {
            dir: "d/t/a/".into(),
            dir_task_id: Some("t".into()),
            dir_attempt_id: "a".into(),
            identity: Some((identity.clone(), mtime.clone())),
            result: result.clone(),
            timers: timers.clone(),
            starts: starts.clone(),
            start_files: starts.len() as u32,
            unreadable_starts: Default::default(),
            problems: Vec::new(),
        };
        let _ = audit_attempt(w, &layout, "fuzz", "00", ev);
    }
});
