//! Generator determinism, cohort counts and layout, checked from the written bytes.

use demo::{Scale, generate};
use std::collections::BTreeMap;

#[test]
fn small_corpus_is_deterministic_and_has_expected_counts() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let sa = generate(a.path(), Scale::Small, 7).unwrap();
    let sb = generate(b.path(), Scale::Small, 7).unwrap();
    assert_eq!(sa.archives, sb.archives);
    for f in ["manifest.csv", "pipeline.yaml", "expected.json"] {
        assert_eq!(
            std::fs::read(a.path().join(f)).unwrap(),
            std::fs::read(b.path().join(f)).unwrap(),
            "{f}"
        );
    }
    let t = &sa.expected["tmax"];
    assert_eq!((t.audited, t.included), (24, 22));
    let d = &sa.expected["deepswe"];
    assert_eq!((d.audited, d.included, d.pilot), (40, 38, 8));
    assert_eq!(d.flagged.len(), 1);
    let c = generate(tempfile::tempdir().unwrap().path(), Scale::Small, 8).unwrap();
    assert_ne!(c.archives[0].sha256, sa.archives[0].sha256);
    let _: BTreeMap<String, u64> = t.clipping.clone();
}
