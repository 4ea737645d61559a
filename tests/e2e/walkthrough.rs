//! The real-source walkthrough of docs/WALKTHROUGH.md, run verbatim: the lines between its
//! markers go to bash with only the two ports replaced by free ones. It publishes the small
//! demo corpus to the real GCS emulator and the local Hub, pins them with `pipeline pin`,
//! runs the chain on the pinned manifest from both locations and verifies the run; then the
//! pinned manifest is compared with the demo's own.

mod common;

use std::path::Path;
use std::process::Command;

/// Markers around the commands in docs/WALKTHROUGH.md.
const BEGIN: &str = "<!-- walkthrough:begin -->";
const END: &str = "<!-- walkthrough:end -->";
/// The ports the walkthrough names, replaced by the test.
const GCS_PORT: &str = "4443";
const HUB_PORT: &str = "5564";

/// The shell lines between the markers, without the code fences.
fn walkthrough_script(doc: &str) -> String {
    let start = doc.find(BEGIN).expect("begin marker") + BEGIN.len();
    let end = doc[start..].find(END).expect("end marker") + start;
    doc[start..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stops the stand-ins if the script left them running (it stops them itself on success).
struct StopSources<'a>(&'a Path);

impl Drop for StopSources<'_> {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.0) {
            let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
        }
    }
}

#[test]
fn the_walkthrough_pins_runs_and_verifies_over_the_emulators() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/WALKTHROUGH.md")).unwrap();
    let script = walkthrough_script(&doc);
    for port in [GCS_PORT, HUB_PORT] {
        assert!(script.contains(&format!("127.0.0.1:{port}")), "{port}");
    }
    let script = script
        .replace(GCS_PORT, &free_port().to_string())
        .replace(HUB_PORT, &free_port().to_string());
    let pipeline = common::bin("pipeline");
    common::bin_of("testkit", "demo-sources");
    let bin_dir = pipeline.parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().unwrap();
    let _stop = StopSources(&dir.path().join("sources.pid"));
    let out = Command::new("bash")
        .args(["-e", "-u", "-o", "pipefail", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("STORAGE_EMULATOR_HOST")
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_TOKEN")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the walkthrough failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("study/run: ok,"), "{stdout}");
    assert!(!dir.path().join("sources.pid").exists(), "sources stopped");

    // The pinned manifest describes the demo's archives exactly.
    let demo = model::load_config(&dir.path().join("corpus/pipeline.yaml")).unwrap();
    let pinned = model::load_config(&dir.path().join("study/pipeline.yaml")).unwrap();
    assert_eq!(
        pinned.config.sources.locations,
        vec![
            model::config::LocationKind::Gcs,
            model::config::LocationKind::Hf
        ]
    );
    assert_eq!(pinned.archives.len(), demo.archives.len());
    for want in &demo.archives {
        let got = pinned
            .archives
            .iter()
            .find(|a| a.archive_id == want.archive_id)
            .unwrap_or_else(|| panic!("{} not pinned", want.archive_id));
        assert_eq!(got.workload, want.workload, "{}", want.archive_id);
        assert_eq!(got.sha256, want.sha256, "{}", want.archive_id);
        assert_eq!(got.bytes, want.bytes, "{}", want.archive_id);
        assert_eq!(
            got.hf, want.hf,
            "{}: repo, commit, shard, member",
            want.archive_id
        );
        let gcs = got.gcs.as_ref().expect("a GCS location");
        let member = &want.hf.as_ref().unwrap().member;
        assert_eq!(gcs.bucket, "agentrace-demo");
        assert_eq!(gcs.object, format!("archives/{member}"));
        assert!(got.file.is_none());
    }
    // Every archive was fetched and verified from both places.
    let ledger = ingest::ledger::read_ledger(&dir.path().join("study/run/ledger.parquet")).unwrap();
    assert_eq!(ledger.len(), 2 * demo.archives.len());
    // provenance.json records, per archive, the pins it was fetched under (the GCS
    // generation and the Hub commit of the manifest, and the commit the Hub resolved),
    // and the build that wrote it.
    let prov: pipeline::provenance::Provenance = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("study/run/provenance.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(prov.archives.len(), pinned.archives.len());
    for a in &pinned.archives {
        let p = prov
            .archives
            .iter()
            .find(|p| p.archive_id == a.archive_id)
            .unwrap();
        let kinds: Vec<&str> = p
            .locations
            .iter()
            .map(|l| l.location_kind.as_str())
            .collect();
        assert_eq!(kinds, ["gcs", "hf"], "{}", a.archive_id);
        let (gcs, hf) = (&p.locations[0], &p.locations[1]);
        assert_eq!(
            gcs.generation,
            Some(a.gcs.as_ref().unwrap().generation),
            "{}",
            a.archive_id
        );
        let commit = &a.hf.as_ref().unwrap().revision;
        assert_eq!(hf.revision.as_ref(), Some(commit), "{}", a.archive_id);
        assert_eq!(
            hf.resolved_commit.as_ref(),
            Some(commit),
            "{}",
            a.archive_id
        );
        assert!(
            p.locations
                .iter()
                .all(|l| l.verdict == "verified" && !l.served_from_store),
            "{:?}",
            p.locations
        );
    }
    let pipeline_exe = std::fs::read(bin_dir.join("pipeline")).unwrap();
    assert_eq!(
        prov.build.executable_sha256,
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&pipeline_exe))
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("study/manifest.pin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        report["hf"]["commit"],
        demo::write::demo_hf_revision(demo::DEFAULT_SEED)
    );
    assert_eq!(report["hf"]["revision"], "main");
}
