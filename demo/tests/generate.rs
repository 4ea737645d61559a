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
    // after_end, before_start, merged (pair + triple + touching), missing, orphan, outside
    let clip: Vec<u64> = t.clipping.values().copied().collect();
    assert_eq!(clip, vec![1, 1, 3, 1, 1, 2]);
}

/// Standard tools (`tar`, `gzip`, `zstd`) read every archive and find the same attempts.
#[test]
fn standard_tar_tools_find_every_attempt() {
    let d = tempfile::tempdir().unwrap();
    let s = generate(d.path(), Scale::Small, 11).unwrap();
    let mut identities = BTreeMap::new();
    for a in &s.archives {
        let p = d.path().join(&a.file);
        let tool = if a.file.ends_with(".gz") {
            "gzip"
        } else {
            "zstd"
        };
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{tool} -dc '{}' | tar -t", p.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{tool} | tar -t failed on {} ({}); the zstd command is installed by scripts/test",
            a.file,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let listing = String::from_utf8(out.stdout).unwrap();
        let n = listing
            .lines()
            .filter(|l| l.ends_with("/identity.json") || l.ends_with("/trial.json"))
            .count() as u64;
        *identities.entry(a.workload.clone()).or_insert(0u64) += n;
    }
    assert_eq!(identities["tmax"], s.expected["tmax"].audited);
    assert_eq!(
        identities["deepswe"],
        s.expected["deepswe"].audited + s.expected["deepswe"].pilot
    );
    // Raw shards are plain tars whose members are the archives, byte-identical.
    let shard = d.path().join("shards/shard-00000.tar");
    let out = std::process::Command::new("tar")
        .arg("-xOf")
        .arg(&shard)
        .arg(s.archives[0].file.trim_start_matches("archives/"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        out.stdout,
        std::fs::read(d.path().join(&s.archives[0].file)).unwrap()
    );
}

/// The full corpus has the study's counts and the same bytes on every run.
#[test]
fn full_corpus_counts_and_determinism() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let sa = generate(a.path(), Scale::Full, demo::DEFAULT_SEED).unwrap();
    let sb = generate(b.path(), Scale::Full, demo::DEFAULT_SEED).unwrap();
    assert_eq!(sa.archives, sb.archives);
    let t = &sa.expected["tmax"];
    assert_eq!(
        (t.audited, t.included, t.excluded["execution_exception"]),
        (267, 253, 14)
    );
    assert!(t.wrong_answers > 0);
    let d = &sa.expected["deepswe"];
    assert_eq!((d.audited, d.included, d.pilot), (2000, 1998, 100));
    assert_eq!(d.excluded["infrastructure_failure"], 2);
    assert_eq!(d.flagged.len(), 1);
    let clip: Vec<u64> = d.clipping.values().copied().collect();
    // after_end, before_start, merged (12 pairs + 3 triples + 5 touching), missing, orphan, outside
    assert_eq!(clip, vec![5, 6, 20, 5, 4, 4]);
    assert_eq!(d.merged_touching, 5);
    assert!(sa.archives.iter().any(|x| x.file.ends_with(".tar.gz")));
    assert!(sa.archives.iter().any(|x| x.file.ends_with(".tar.zst")));
}

/// The shape knobs (docs/ZOO.md) default to the demo's shape: the small default corpus is
/// pinned: the archives' tar streams (decompressed, in manifest order: the compressed bytes
/// depend on which flate2 backend a build unifies to) and `pipeline.yaml`. The hashes were
/// taken from the generator before the knobs existed (`gzip -dc` / `zstd -dc` of each
/// archive, concatenated, `| sha256sum`); a change to them is a change to the default corpus.
#[test]
fn default_small_corpus_is_pinned() {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let d = tempfile::tempdir().unwrap();
    let s = generate(d.path(), Scale::Small, demo::DEFAULT_SEED).unwrap();
    let mut tars = Sha256::new();
    for a in &s.archives {
        let f = std::fs::File::open(d.path().join(&a.file)).unwrap();
        let mut bytes = Vec::new();
        if a.file.ends_with(".tar.gz") {
            flate2::read::GzDecoder::new(f)
                .read_to_end(&mut bytes)
                .unwrap();
        } else {
            bytes = zstd::decode_all(f).unwrap();
        }
        tars.update(&bytes);
    }
    assert_eq!(
        hex::encode(tars.finalize()),
        "dab46104902638e5a191b2d793a9c82069821712af9144f2b6dba4485aa094f1"
    );
    let yaml = std::fs::read(d.path().join("pipeline.yaml")).unwrap();
    assert_eq!(
        hex::encode(Sha256::digest(&yaml)),
        "c5583d046987493567e2099f08772e3e723e7afe09bbc2b145f31b6e18249e20"
    );
}
