//! Fuzz target: an uncompressed tar stream (with PAX records, links, odd names) through the
//! audit's member checks, layout matching and attempt reconstruction.
#![no_main]

use audit::archive::{ArchiveLimits, scan_tar_stream};
use audit::attempt::{AttemptCollector, audit_attempt};
use libfuzzer_sys::fuzz_target;
use model::WorkloadId;
use model::config::Layout;

fuzz_target!(|data: &[u8]| {
    for w in WorkloadId::ALL {
        let layout = Layout::default_for(w);
        let mut collector = AttemptCollector::new(&layout);
        let limits = ArchiveLimits {
            max_uncompressed_bytes: 1 << 24,
            max_members: 10_000,
        };
        let r = scan_tar_stream(data, "fuzz", "tar", limits, |m, r| {
            collector.visit(m, r).map_err(|e| audit::AuditError::Archive {
                archive_id: "fuzz".into(),
                member: Some(e.member),
                detail: e.detail,
            })
        });
        if r.is_ok() {
            for ev in collector.finish() {
                let a = audit_attempt(w, &layout, "fuzz", "00", ev);
                for iv in &a.requests.intervals {
                    assert!(iv.start <= iv.end || iv.start.is_nan() || iv.end.is_nan());
                }
            }
        }
    }
});
