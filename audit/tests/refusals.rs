//! Every refusal and every exclusion reason, on hand-made archives: each names the archive,
//! the member and the detail.

use demo::write::pax_record;
use std::io::Write;
use std::path::Path;

/// One member of a hand-made archive.
enum M<'a> {
    /// A file with its own PAX `mtime` record.
    File(&'a str, &'a [u8], &'a str),
    /// A file with only the ustar (integer) mtime.
    Plain(&'a str, &'a [u8], u64),
    /// A global PAX header (`g`) named so, with this `mtime` record.
    Global(&'a str, &'a str),
    RawName(&'a [u8], &'a [u8]),
    Symlink(&'a str, &'a str),
    Fifo(&'a str),
}

fn tar_bytes(members: &[M]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for m in members {
        match m {
            M::File(path, data, mtime) => {
                b.append_pax_extensions([("mtime", mtime.as_bytes())])
                    .unwrap();
                let mut h = tar::Header::new_ustar();
                h.set_path(path).unwrap();
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                h.set_mtime(1);
                h.set_cksum();
                b.append(&h, *data).unwrap();
            }
            M::Plain(path, data, mtime) => {
                let mut h = tar::Header::new_ustar();
                h.set_path(path).unwrap();
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                h.set_mtime(*mtime);
                h.set_cksum();
                b.append(&h, *data).unwrap();
            }
            M::Global(name, mtime) => {
                let pax = pax_record("mtime", mtime);
                let mut h = tar::Header::new_ustar();
                h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
                h.set_size(pax.len() as u64);
                h.set_entry_type(tar::EntryType::XGlobalHeader);
                h.set_cksum();
                b.append(&h, pax.as_slice()).unwrap();
            }
            M::RawName(name, data) => {
                let mut h = tar::Header::new_ustar();
                h.as_old_mut().name[..name.len()].copy_from_slice(name);
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                h.set_cksum();
                b.append(&h, *data).unwrap();
            }
            M::Symlink(path, target) => {
                let mut h = tar::Header::new_ustar();
                h.set_path(path).unwrap();
                h.set_entry_type(tar::EntryType::Symlink);
                h.as_old_mut().linkname[..target.len()].copy_from_slice(target.as_bytes());
                h.set_size(0);
                h.set_cksum();
                b.append(&h, &[][..]).unwrap();
            }
            M::Fifo(path) => {
                let mut h = tar::Header::new_ustar();
                h.set_path(path).unwrap();
                h.set_entry_type(tar::EntryType::Fifo);
                h.set_size(0);
                h.set_cksum();
                b.append(&h, &[][..]).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

fn zstd(b: &[u8]) -> Vec<u8> {
    zstd::encode_all(b, 3).unwrap()
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn sha(b: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(b))
}

const IDENT: &str = r#"{"task_id":"t1","attempt_id":"a1","run":"census","quota":{"cores":2.0,"mem_gib":4.0},"image":{"blobs":[{"digest":"sha256:aa","compressed_bytes":1073741824}]}}"#;
const RESULT: &str = r#"{"completed_utc":"1970-01-01T00:01:40.000000Z","termination":"submitted","infra_error":null}"#;

/// A run directory with these archives (deepswe layout) in the verified store.
fn setup(
    dir: &Path,
    archives: &[(&str, Vec<u8>)],
    expect: (u64, u64),
    extra_yaml: &str,
) -> model::LoadedConfig {
    setup_for("deepswe", dir, archives, expect, extra_yaml)
}

/// A run directory with these archives of one workload in the verified store.
fn setup_for(
    workload: &str,
    dir: &Path,
    archives: &[(&str, Vec<u8>)],
    expect: (u64, u64),
    extra_yaml: &str,
) -> model::LoadedConfig {
    let mut rows = String::from(
        "archive_id,workload,sha256,bytes,gcs_bucket,gcs_object,gcs_generation,hf_repo,hf_revision,hf_shard,hf_member,file_path\n",
    );
    let store = dir.join("run/store/sha256");
    std::fs::create_dir_all(&store).unwrap();
    for (id, bytes) in archives {
        std::fs::write(store.join(sha(bytes)), bytes).unwrap();
        rows.push_str(&format!(
            "{id},{workload},{},{},,,,,,,,{id}.bin\n",
            sha(bytes),
            bytes.len()
        ));
    }
    std::fs::write(dir.join("manifest.csv"), rows).unwrap();
    let yaml = format!(
        "version: 1\nrun_dir: run\nsources:\n  manifest: manifest.csv\n  locations: [file]\nworkloads:\n  {workload}:\n    expect: {{ audited: {}, included: {} }}\n    replay: {{ concurrency: 4, cpu_cores: 8, ram_gib: 16, gpus: 8 }}\nsearch:\n  seed: 1\n  order: [{workload}]\n{extra_yaml}",
        expect.0, expect.1
    );
    std::fs::write(dir.join("pipeline.yaml"), yaml).unwrap();
    model::load_config(&dir.join("pipeline.yaml")).unwrap()
}

fn good_attempt() -> Vec<M<'static>> {
    vec![
        M::File("deepswe/t1/a1/identity.json", IDENT.as_bytes(), "0.5"),
        M::File("deepswe/t1/a1/requests/00001.start", b"", "10.25"),
        M::File(
            "deepswe/t1/a1/timers.jsonl",
            b"{\"seq\":1,\"elapsed_ns\":1500000000}\n",
            "100",
        ),
        M::File("deepswe/t1/a1/result.json", RESULT.as_bytes(), "100"),
    ]
}

fn audit_err(archive: Vec<u8>, extra_yaml: &str) -> String {
    let d = tempfile::tempdir().unwrap();
    let cfg = setup(d.path(), &[("arc", archive)], (1, 1), extra_yaml);
    audit::run(&cfg, &audit::AuditOptions::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn good_attempt_is_read_exactly() {
    let d = tempfile::tempdir().unwrap();
    let cfg = setup(
        d.path(),
        &[("arc", zstd(&tar_bytes(&good_attempt())))],
        (1, 1),
        "",
    );
    let r = audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
    assert_eq!(r.document.workloads["deepswe"].included, 1);
    let req = frames::read_frame(
        &d.path().join("run/requests.parquet"),
        "requests",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let s = req
        .column("start_offset_s")
        .unwrap()
        .f64()
        .unwrap()
        .get(0)
        .unwrap();
    let e = req
        .column("end_offset_s")
        .unwrap()
        .f64()
        .unwrap()
        .get(0)
        .unwrap();
    assert_eq!((s, e), (9.75, 11.25));
    let att = frames::read_frame(
        &d.path().join("run/attempts.parquet"),
        "attempts",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    assert_eq!(
        att.column("duration_s").unwrap().f64().unwrap().get(0),
        Some(99.5)
    );
    assert_eq!(
        att.column("request_s").unwrap().f64().unwrap().get(0),
        Some(1.5)
    );
    let blobs = frames::read_frame(
        &d.path().join("run/blobs.parquet"),
        "blobs",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    assert_eq!(
        blobs
            .column("compressed_gib")
            .unwrap()
            .f64()
            .unwrap()
            .get(0),
        Some(1.0)
    );
    let md = frames::read_metadata(&d.path().join("run/attempts.parquet")).unwrap();
    assert!(
        md.iter()
            .any(|(k, v)| k == "agentrace.source_archives" && v.starts_with("arc="))
    );
}

#[test]
fn absolute_path_is_refused() {
    let mut m = good_attempt();
    m.push(M::RawName(b"/etc/passwd", b"x"));
    assert_eq!(
        audit_err(zstd(&tar_bytes(&m)), ""),
        "archive `arc`, member `/etc/passwd`: refused member: absolute path"
    );
}

#[test]
fn dotdot_is_refused() {
    let mut m = good_attempt();
    m.push(M::RawName(b"deepswe/t1/a1/../../../x", b"x"));
    assert_eq!(
        audit_err(gzip(&tar_bytes(&m)), ""),
        "archive `arc`, member `deepswe/t1/a1/../../../x`: refused member: path contains `..`"
    );
}

#[test]
fn link_leaving_attempt_dir_is_refused() {
    let mut m = good_attempt();
    m.push(M::Symlink("deepswe/t1/a1/evil", "../../other/secret"));
    assert_eq!(
        audit_err(zstd(&tar_bytes(&m)), ""),
        "archive `arc`, member `deepswe/t1/a1/evil`: refused member: link to `../../other/secret` leaves its attempt directory"
    );
    // A link that stays inside is fine.
    let mut m = good_attempt();
    m.push(M::Symlink("deepswe/t1/a1/latest.log", "agent.log"));
    let d = tempfile::tempdir().unwrap();
    let cfg = setup(d.path(), &[("arc", zstd(&tar_bytes(&m)))], (1, 1), "");
    audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
}

#[test]
fn special_files_are_refused() {
    let mut m = good_attempt();
    m.push(M::Fifo("deepswe/t1/a1/pipe"));
    assert_eq!(
        audit_err(zstd(&tar_bytes(&m)), ""),
        "archive `arc`, member `deepswe/t1/a1/pipe`: refused member: unsupported entry type Fifo"
    );
}

#[test]
fn limits_are_enforced() {
    let bytes = zstd(&tar_bytes(&good_attempt()));
    assert_eq!(
        audit_err(
            bytes.clone(),
            "audit: { max_members: 3, max_uncompressed_bytes: 1000000 }\n"
        ),
        "archive `arc`, member `deepswe/t1/a1/timers.jsonl`: holds more than 3 members (hint: raise audit.max_members)"
    );
    let e = audit_err(
        bytes,
        "audit: { max_members: 100, max_uncompressed_bytes: 2000 }\n",
    );
    assert!(e.starts_with("archive `arc`") && e.ends_with("expands past the limit of 2000 uncompressed bytes (hint: raise audit.max_uncompressed_bytes)"), "{e}");
}

#[test]
fn corrupt_and_truncated_streams_name_the_archive() {
    let good = zstd(&tar_bytes(&good_attempt()));
    let mut corrupt = good.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0xff;
    corrupt[mid + 1] ^= 0xff;
    let e = audit_err(corrupt, "");
    assert!(
        e.starts_with("archive `arc`") && e.contains("corrupt or truncated zstd/tar stream"),
        "{e}"
    );
    let truncated = gzip(&tar_bytes(&good_attempt()))[..200].to_vec();
    let e = audit_err(truncated, "");
    assert!(
        e.starts_with("archive `arc`") && e.contains("corrupt or truncated gzip/tar stream"),
        "{e}"
    );
    // An uncompressed tar is not an original archive.
    let e = audit_err(tar_bytes(&good_attempt()), "");
    assert!(
        e.starts_with("archive `arc`: not a gzip or zstd stream (first bytes "),
        "{e}"
    );
}

#[test]
fn store_tampering_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let bytes = zstd(&tar_bytes(&good_attempt()));
    let cfg = setup(d.path(), &[("arc", bytes.clone())], (1, 1), "");
    let stored = d.path().join("run/store/sha256").join(sha(&bytes));
    let mut t = bytes.clone();
    t.extend_from_slice(b"junk");
    std::fs::write(&stored, t).unwrap();
    let e = audit::run(&cfg, &audit::AuditOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("archive `arc`: stored file")
            && e.contains("does not match its verified hash"),
        "{e}"
    );
    // Bytes flipped in mid-stream (the decoder breaks off before the end is hashed) and
    // at the start (no compression magic): still the store's damage, not a corrupt archive.
    for at in [bytes.len() / 2, 0] {
        let mut t = bytes.clone();
        t[at] ^= 0xff;
        t[at + 1] ^= 0xff;
        std::fs::write(&stored, t).unwrap();
        let e = audit::run(&cfg, &audit::AuditOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("archive `arc`: stored file")
                && e.contains("does not match its verified hash")
                && e.ends_with("rerun `ingest`"),
            "flip at {at}: {e}"
        );
    }
    std::fs::remove_file(&stored).unwrap();
    let e = audit::run(&cfg, &audit::AuditOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("archive `arc` is not in the verified store")
            && e.ends_with("run `ingest` first"),
        "{e}"
    );
}

fn exclusions(members: Vec<M>, archives2: Option<Vec<M>>) -> Vec<(String, String, String)> {
    let d = tempfile::tempdir().unwrap();
    let mut arcs = vec![("arc", zstd(&tar_bytes(&members)))];
    if let Some(m2) = archives2 {
        arcs.push(("arc2", gzip(&tar_bytes(&m2))));
    }
    let cfg = setup(d.path(), &arcs, (99, 99), "");
    let e = audit::run(&cfg, &audit::AuditOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cohort audit does not match pipeline.yaml: deepswe: audited"),
        "{e}"
    );
    let ex = frames::read_frame(
        &d.path().join("run/exclusions.parquet"),
        "exclusions",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .unwrap();
    let col = |n: &str| {
        ex.column(n)
            .unwrap()
            .str()
            .unwrap()
            .iter()
            .map(|x| x.unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let (a, r, det) = (col("attempt_id"), col("reason"), col("detail"));
    (0..a.len())
        .map(|i| (a[i].clone(), r[i].clone(), det[i].clone()))
        .collect()
}

#[test]
fn malformed_missing_and_duplicate_attempts_are_excluded_with_detail() {
    let bad_ident = r#"{"task_id":"t2","attempt_id":"zz","run":"census","quota":{"cores":1.0,"mem_gib":1.0},"image":{"blobs":[]}}"#;
    let i4 = IDENT.replace("t1", "t4").replace("a1", "a4");
    let i5 = IDENT.replace("t1", "t5").replace("a1", "a5");
    let mut m = good_attempt();
    m.extend([
        // ids disagree with the directory
        M::File("deepswe/t2/a2/identity.json", bad_ident.as_bytes(), "1"),
        M::File("deepswe/t2/a2/result.json", RESULT.as_bytes(), "100"),
        // malformed JSON
        M::File("deepswe/t3/a3/identity.json", b"{not json", "1"),
        M::File("deepswe/t3/a3/result.json", RESULT.as_bytes(), "100"),
        // missing result
        M::File("deepswe/t4/a4/identity.json", i4.as_bytes(), "1"),
        // bad timer line
        M::File("deepswe/t5/a5/identity.json", i5.as_bytes(), "1"),
        M::File("deepswe/t5/a5/result.json", RESULT.as_bytes(), "100"),
        M::File("deepswe/t5/a5/timers.jsonl", b"{\"seq\":1}\n", "100"),
    ]);
    // a1 again in another archive: both copies are duplicates.
    let ex = exclusions(m, Some(good_attempt()));
    let find = |id: &str| ex.iter().filter(|e| e.0 == id).cloned().collect::<Vec<_>>();
    let a1 = find("a1");
    assert_eq!(a1.len(), 2);
    assert!(
        a1.iter().all(|e| e.1 == "duplicate_attempt"
            && e.2 == "attempt id `a1` appears 2 times: arc:deepswe/t1/a1/, arc2:deepswe/t1/a1/"),
        "{a1:?}"
    );
    assert_eq!(find("a2")[0].1, "malformed_record");
    assert_eq!(
        find("a2")[0].2,
        "`deepswe/t2/a2/identity.json`: attempt_id `zz` disagrees with its directory `a2`"
    );
    assert_eq!(find("a3")[0].1, "malformed_record");
    assert!(
        find("a3")[0]
            .2
            .starts_with("`deepswe/t3/a3/identity.json`: key must be a string"),
        "{:?}",
        find("a3")
    );
    assert_eq!(
        find("a4")[0],
        (
            "a4".into(),
            "missing_file".into(),
            "missing deepswe/t4/a4/result.json".into()
        )
    );
    assert_eq!(find("a5")[0].1, "malformed_record");
    assert!(
        find("a5")[0]
            .2
            .starts_with("`deepswe/t5/a5/timers.jsonl` line 1: missing field `elapsed_ns`"),
        "{:?}",
        find("a5")
    );
}

#[test]
fn workload_rules_and_pilot_precedence() {
    let pilot = IDENT
        .replace("t1", "t6")
        .replace("a1", "a6")
        .replace("census", "pilot");
    let infra = RESULT.replace("\"infra_error\":null", "\"infra_error\":\"node lost\"");
    let llm = RESULT.replace("submitted", "llm_query_error");
    let nocomp = r#"{"completed_utc":null,"termination":null,"infra_error":null}"#;
    let ids = |t: &str, a: &str| IDENT.replace("t1", t).replace("a1", a);
    let (i7, i8, i9) = (ids("t7", "a7"), ids("t8", "a8"), ids("t9", "a9"));
    let m = vec![
        // a pilot with an infrastructure failure: superseded wins
        M::File("deepswe/t6/a6/identity.json", pilot.as_bytes(), "1"),
        M::File("deepswe/t6/a6/result.json", infra.as_bytes(), "100"),
        M::File("deepswe/t7/a7/identity.json", i7.as_bytes(), "1"),
        M::File("deepswe/t7/a7/result.json", infra.as_bytes(), "100"),
        M::File("deepswe/t8/a8/identity.json", i8.as_bytes(), "1"),
        M::File("deepswe/t8/a8/result.json", llm.as_bytes(), "100"),
        M::File("deepswe/t9/a9/identity.json", i9.as_bytes(), "1"),
        M::File("deepswe/t9/a9/result.json", nocomp.as_bytes(), "100"),
    ];
    let ex = exclusions(m, None);
    let reasons: Vec<(String, String)> = ex.iter().map(|e| (e.0.clone(), e.1.clone())).collect();
    assert_eq!(
        reasons,
        vec![
            ("a6".into(), "superseded_by_census".into()),
            ("a7".into(), "infrastructure_failure".into()),
            ("a9".into(), "infrastructure_failure".into()),
        ]
    );
}

#[test]
fn extract_materializes_attempt_with_mtimes() {
    let d = tempfile::tempdir().unwrap();
    let cfg = setup(
        d.path(),
        &[("arc", zstd(&tar_bytes(&good_attempt())))],
        (1, 1),
        "",
    );
    audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
    let (arc, prefix) = audit::extract::locate_attempt(&cfg, "a1", None).unwrap();
    assert_eq!((arc.as_str(), prefix.as_str()), ("arc", "deepswe/t1/a1/"));
    let to = d.path().join("out");
    let x = audit::extract::extract_attempt(&cfg, &arc, &prefix, &to).unwrap();
    assert_eq!(x.files.len(), 4);
    let meta = std::fs::metadata(to.join("deepswe/t1/a1/requests/00001.start")).unwrap();
    let ft = filetime::FileTime::from_last_modification_time(&meta);
    assert_eq!((ft.unix_seconds(), ft.nanoseconds()), (10, 250_000_000));
    // Never overwrites.
    let e = audit::extract::extract_attempt(&cfg, &arc, &prefix, &to)
        .unwrap_err()
        .to_string();
    assert!(e.contains("already exists; refusing to overwrite"), "{e}");
    assert!(
        audit::extract::locate_attempt(&cfg, "nope", None)
            .unwrap_err()
            .to_string()
            .starts_with("attempt `nope` is not in")
    );
}

/// A symbolic link already in the target directory is never followed (docs/ROBUSTNESS.md,
/// "`audit extract` never writes through a link"):
/// neither a link to a directory standing where an attempt directory goes, nor a dangling
/// link where a file goes; nothing is written outside the target directory.
#[test]
fn extract_refuses_links_planted_in_the_target() {
    let d = tempfile::tempdir().unwrap();
    let cfg = setup(
        d.path(),
        &[("arc", zstd(&tar_bytes(&good_attempt())))],
        (1, 1),
        "",
    );
    audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
    let (arc, prefix) = audit::extract::locate_attempt(&cfg, "a1", None).unwrap();

    // A directory link: `out/deepswe -> elsewhere`.
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let to = d.path().join("out");
    std::fs::create_dir(&to).unwrap();
    std::os::unix::fs::symlink(&elsewhere, to.join("deepswe")).unwrap();
    let e = audit::extract::extract_attempt(&cfg, &arc, &prefix, &to)
        .unwrap_err()
        .to_string();
    assert!(e.contains("deepswe is a symbolic link; refusing"), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // A dangling file link: `out2/deepswe/t1/a1/result.json -> elsewhere/planted`.
    let to2 = d.path().join("out2");
    std::fs::create_dir_all(to2.join("deepswe/t1/a1")).unwrap();
    std::os::unix::fs::symlink(
        elsewhere.join("planted"),
        to2.join("deepswe/t1/a1/result.json"),
    )
    .unwrap();
    let e = audit::extract::extract_attempt(&cfg, &arc, &prefix, &to2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("result.json already exists; refusing"), "{e}");
    assert!(!elsewhere.join("planted").exists());
    // No temporary directory is left behind by either refusal.
    for dir in [&to, &to2] {
        let leftovers: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".agentrace-extract"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

/// A raw tar with one PAX header whose record is given verbatim, then a member.
fn tar_with_pax_record(record: &[u8], path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut ph = tar::Header::new_ustar();
    ph.set_path("PaxHeaders/x").unwrap();
    ph.set_size(record.len() as u64);
    ph.set_entry_type(tar::EntryType::XHeader);
    ph.set_cksum();
    b.append(&ph, record).unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_path(path).unwrap();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append(&h, data).unwrap();
    b.into_inner().unwrap()
}

#[test]
fn hostile_pax_records_make_the_attempt_malformed_not_a_crash() {
    // A record whose length field is absurd, and one whose mtime is not a number.
    for record in [
        &b"99999999999999999999 mtime=1.0\n"[..],
        b"20 mtime=notatime\n",
    ] {
        let mut members =
            tar_with_pax_record(record, "deepswe/t1/a1/identity.json", IDENT.as_bytes());
        // Append the rest of the attempt (drop the first archive's end blocks).
        members.truncate(members.len() - 1024);
        let rest = tar_bytes(&good_attempt()[1..]);
        members.extend_from_slice(&rest);
        let d = tempfile::tempdir().unwrap();
        let cfg = setup(d.path(), &[("arc", zstd(&members))], (1, 0), "");
        let r = audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
        assert_eq!(
            r.document.workloads["deepswe"].excluded_by_reason["malformed_record"],
            1
        );
    }
}

#[test]
fn non_utf8_member_names_are_refused() {
    let mut m = good_attempt();
    m.push(M::RawName(b"deepswe/t1/a1/\xff\xfe.log", b"x"));
    let e = audit_err(zstd(&tar_bytes(&m)), "");
    assert!(
        e.starts_with("archive `arc`: member name is not UTF-8: \"deepswe/t1/a1/"),
        "{e}"
    );
}

/// Members nested 100 directories deep inside an attempt (outside the layout) are ignored,
/// and cost about what as many shallow members cost: the audit of 2,000 of them takes at
/// most four times as long as the audit of 2,000 shallow ones, plus a second of slack.
#[test]
fn deeply_nested_paths_are_ignored_in_bounded_time() {
    const MEMBERS: usize = 2000;
    let audit_time = |depth: usize| {
        let paths: Vec<String> = (0..MEMBERS)
            .map(|i| format!("deepswe/t1/a1/{}x{i}.log", "d/".repeat(depth)))
            .collect();
        let mut m = good_attempt();
        m.extend(paths.iter().map(|p| M::File(p, b"x", "1")));
        let d = tempfile::tempdir().unwrap();
        let cfg = setup(d.path(), &[("arc", zstd(&tar_bytes(&m)))], (1, 1), "");
        let t0 = std::time::Instant::now();
        let r = audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
        let took = t0.elapsed();
        assert_eq!(r.document.workloads["deepswe"].included, 1, "depth {depth}");
        took
    };
    let shallow = audit_time(1);
    let deep = audit_time(100);
    assert!(
        deep <= shallow * 4 + std::time::Duration::from_secs(1),
        "{MEMBERS} members 100 deep took {deep:?}, as many shallow ones {shallow:?}"
    );
}

#[test]
fn duplicate_members_with_conflicting_content_are_malformed() {
    let other = RESULT.replace("submitted", "max_steps");
    let mut m = good_attempt();
    m.push(M::File(
        "deepswe/t1/a1/result.json",
        other.as_bytes(),
        "100",
    ));
    let ex = exclusions(m, None);
    assert_eq!(ex.len(), 1);
    assert_eq!(ex[0].1, "malformed_record");
    assert_eq!(ex[0].2, "`deepswe/t1/a1/result.json` appears twice");
}

#[test]
fn declared_size_past_the_stream_is_a_truncated_archive() {
    // A header claiming 1 TiB of data, followed by nothing: a tar bomb's declared size.
    let mut h = tar::Header::new_ustar();
    h.set_path("deepswe/t1/a1/agent.log").unwrap();
    h.set_size(1 << 40);
    h.set_mode(0o644);
    h.set_cksum();
    let mut bytes = h.as_bytes().to_vec();
    bytes.extend_from_slice(&[b'x'; 4096]);
    let e = audit_err(zstd(&bytes), "");
    assert!(
        e.starts_with("archive `arc`") && e.contains("corrupt or truncated zstd/tar stream"),
        "{e}"
    );
}

#[test]
fn a_tar_bomb_of_tiny_members_is_refused_at_the_member_limit() {
    // 600,000 empty members (300 MB of tar headers) streamed straight into zstd.
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("bomb.tar.zst");
    {
        let f = std::fs::File::create(&path).unwrap();
        let enc = zstd::Encoder::new(f, 1).unwrap().auto_finish();
        let mut b = tar::Builder::new(enc);
        let mut h = tar::Header::new_ustar();
        h.set_size(0);
        h.set_mode(0o644);
        for i in 0..600_000u32 {
            h.set_path(format!("deepswe/t1/a1/junk/{i}")).unwrap();
            h.set_cksum();
            b.append(&h, &[][..]).unwrap();
        }
        b.into_inner().unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes.len() < 20 << 20,
        "the bomb compresses to {} bytes",
        bytes.len()
    );
    let t = std::time::Instant::now();
    let e = audit_err(bytes, "audit: { max_members: 500000 }\n");
    assert_eq!(
        e,
        "archive `arc`, member `deepswe/t1/a1/junk/499999`: holds more than 500000 members (hint: raise audit.max_members)"
    );
    assert!(
        t.elapsed().as_secs() < 120,
        "refusal took {:?}",
        t.elapsed()
    );
}

const TMAX_RESULT: &str =
    r#"{"completed_utc":"2025-09-01T00:01:40Z","exception_info":null,"reward":1.0}"#;

/// The files of a tmax trial `id` (one request) with this `run` and result.json: (path,
/// bytes, PAX mtime). The generation lifetime is [1756684800, 1756684900].
fn tmax_trial(id: &str, run: &str, result: &str) -> Vec<(String, String, &'static str)> {
    let ident = format!(
        r#"{{"task_id":"task-{id}","attempt_id":"{id}","run":"{run}","quota":{{"cores":1.0,"mem_gib":2.0}},"image":{{"blobs":[]}}}}"#
    );
    vec![
        (format!("tmax/{id}/trial.json"), ident, "1756684800"),
        (
            format!("tmax/{id}/agent/requests/00001.start"),
            String::new(),
            "1756684801",
        ),
        (
            format!("tmax/{id}/agent/timers.jsonl"),
            "{\"seq\":1,\"elapsed_ns\":2000000000}\n".into(),
            "1756684900",
        ),
        (
            format!("tmax/{id}/result.json"),
            result.into(),
            "1756684900",
        ),
    ]
}

fn members<'a>(files: &'a [(String, String, &'static str)]) -> Vec<M<'a>> {
    files
        .iter()
        .map(|(p, d, t)| M::File(p, d.as_bytes(), t))
        .collect()
}

/// Audit one archive of `workload`; the run directory is kept for reading the frames.
fn audit_one(
    workload: &str,
    members: &[M],
    expect: (u64, u64),
) -> (tempfile::TempDir, Result<audit::AuditReport, String>) {
    let d = tempfile::tempdir().unwrap();
    let cfg = setup_for(
        workload,
        d.path(),
        &[("arc", zstd(&tar_bytes(members)))],
        expect,
        "",
    );
    let r = audit::run(&cfg, &audit::AuditOptions::default()).map_err(|e| e.to_string());
    (d, r)
}

fn str_col(d: &Path, frame: &str, col: &str) -> Vec<Option<String>> {
    let p = d.join(format!("run/{frame}.parquet"));
    let df = frames::read_frame(&p, frame, model::run_dir::FRAME_SCHEMA_VERSION).unwrap();
    frames::str_values(&df, &p, col).unwrap()
}

fn f64_col(d: &Path, frame: &str, col: &str) -> Vec<Option<f64>> {
    let p = d.join(format!("run/{frame}.parquet"));
    let df = frames::read_frame(&p, frame, model::run_dir::FRAME_SCHEMA_VERSION).unwrap();
    frames::f64_values(&df, &p, col).unwrap()
}

fn some(v: &[&str]) -> Vec<Option<String>> {
    v.iter().map(|s| Some(s.to_string())).collect()
}

#[test]
fn files_beside_attempt_directories_are_ignored() {
    // deepswe: a task-level file where an attempt directory would be, and a stray file.
    let mut m = good_attempt();
    m.push(M::File("deepswe/t1/task.json", b"{}", "1"));
    m.push(M::File("deepswe/notes.txt", b"x", "1"));
    let (d, r) = audit_one("deepswe", &m, (1, 1));
    let r = r.unwrap();
    assert_eq!(r.archives[0].attempts, 1);
    assert_eq!(str_col(d.path(), "attempts", "attempt_id"), some(&["a1"]));
    // tmax: a file at the attempt-directory level.
    let files = tmax_trial("t1", "census", TMAX_RESULT);
    let mut m = members(&files);
    m.push(M::File("tmax/notes.txt", b"hello", "1"));
    let (d, r) = audit_one("tmax", &m, (1, 1));
    assert_eq!(r.unwrap().document.workloads["tmax"].audited, 1);
    assert_eq!(str_col(d.path(), "attempts", "attempt_id"), some(&["t1"]));
    assert!(str_col(d.path(), "exclusions", "attempt_id").is_empty());
}

#[test]
fn a_link_beside_attempt_directories_is_ignored_unless_it_leaves_the_archive() {
    let files = tmax_trial("t1", "census", TMAX_RESULT);
    let mut m = members(&files);
    m.push(M::Symlink("tmax/latest", "t1"));
    m.push(M::Symlink("tmax/t1/self", "."));
    let (d, r) = audit_one("tmax", &m, (1, 1));
    r.unwrap();
    assert_eq!(str_col(d.path(), "attempts", "attempt_id"), some(&["t1"]));
    for (link, target) in [("tmax/up", "../../etc"), ("tmax/abs", "/etc/passwd")] {
        let mut m = members(&files);
        m.push(M::Symlink(link, target));
        let (_d, r) = audit_one("tmax", &m, (1, 1));
        assert_eq!(
            r.unwrap_err(),
            format!(
                "archive `arc`, member `{link}`: refused member: link to `{target}` leaves the archive"
            )
        );
    }
}

#[test]
fn any_exception_info_excludes_the_trial_and_keeps_its_completion() {
    let with = |e: &str, reward: &str| {
        format!(
            r#"{{"completed_utc":"2025-09-01T00:01:40Z","exception_info":{e},"reward":{reward}}}"#
        )
    };
    let trials = [
        ("x-bad", "{not json".to_string()),
        ("x-num", with("137", "null")),
        ("x-obj", with(r#"{"message":"boom"}"#, "0")),
        ("x-rew", with("null", r#""1.0""#)),
        ("x-str", with(r#""Timeout""#, "null")),
        (
            "x-ts",
            r#"{"completed_utc":"yesterday","exception_info":null,"reward":1}"#.to_string(),
        ),
        ("x-typed", with(r#"{"type":"E","message":"m"}"#, "null")),
    ];
    let files: Vec<_> = trials
        .iter()
        .flat_map(|(id, r)| tmax_trial(id, "census", r))
        .collect();
    let (d, r) = audit_one("tmax", &members(&files), (7, 1));
    let doc = r.unwrap().document;
    assert_eq!(
        doc.workloads["tmax"].excluded_by_reason["execution_exception"],
        4
    );
    assert_eq!(
        doc.workloads["tmax"].excluded_by_reason["malformed_record"],
        2
    );
    let p = d.path();
    assert_eq!(
        str_col(p, "attempts", "attempt_id"),
        some(&[
            "x-bad", "x-num", "x-obj", "x-rew", "x-str", "x-ts", "x-typed"
        ])
    );
    let end = Some(1_756_684_900.0);
    assert_eq!(
        f64_col(p, "attempts", "gen_end"),
        vec![None, end, end, end, end, None, end]
    );
    assert_eq!(
        str_col(p, "attempts", "exclusion_reason"),
        vec![
            Some("malformed_record".into()),
            Some("execution_exception".into()),
            Some("execution_exception".into()),
            None,
            Some("execution_exception".into()),
            Some("malformed_record".into()),
            Some("execution_exception".into()),
        ]
    );
    assert_eq!(
        str_col(p, "attempts", "exception_type"),
        vec![None, None, None, None, None, None, Some("E".into())]
    );
    assert_eq!(
        str_col(p, "attempts", "exception_message"),
        vec![
            None,
            Some("137".into()),
            Some("boom".into()),
            None,
            Some("Timeout".into()),
            None,
            Some("m".into())
        ]
    );
    // A reward that is not a number is absent.
    assert_eq!(
        f64_col(p, "attempts", "reward"),
        vec![None, None, Some(0.0), None, None, Some(1.0), None]
    );
    let detail: Vec<String> = str_col(p, "exclusions", "detail")
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert!(
        detail[0].starts_with("`tmax/x-bad/result.json`: key must be a string"),
        "{detail:?}"
    );
    assert_eq!(detail[1], "exception_info 137");
    assert_eq!(detail[2], r#"exception_info {"message":"boom"}"#);
    assert_eq!(detail[3], r#"exception_info "Timeout""#);
    assert!(
        detail[4].starts_with("`tmax/x-ts/result.json`: completed_utc `yesterday` is not RFC 3339"),
        "{detail:?}"
    );
    assert_eq!(detail[5], "E: m");
}

#[test]
fn any_infra_error_is_an_infrastructure_failure() {
    for (infra, text) in [
        (r#"{"code":503}"#, r#"{"code":503}"#),
        ("0", "0"),
        ("false", "false"),
        (r#""node lost""#, "node lost"),
    ] {
        let result = RESULT.replace("\"infra_error\":null", &format!("\"infra_error\":{infra}"));
        let mut m: Vec<M> = good_attempt();
        m[3] = M::File("deepswe/t1/a1/result.json", result.as_bytes(), "100");
        let (d, r) = audit_one("deepswe", &m, (1, 0));
        r.unwrap();
        let p = d.path();
        assert_eq!(
            str_col(p, "exclusions", "reason"),
            some(&["infrastructure_failure"])
        );
        assert_eq!(
            str_col(p, "exclusions", "detail"),
            vec![Some(format!("infra_error: {text}"))]
        );
        assert_eq!(str_col(p, "attempts", "infra_error"), some(&[text]));
        assert_eq!(f64_col(p, "attempts", "gen_end"), vec![Some(100.0)]);
    }
}

#[test]
fn a_global_pax_mtime_applies_to_later_members_without_their_own() {
    let result =
        r#"{"completed_utc":"2025-09-01T00:01:40Z","termination":"submitted","infra_error":null}"#;
    let i2 = IDENT.replace("t1", "t2").replace("a1", "a2");
    let i3 = IDENT.replace("t1", "t3").replace("a1", "a3");
    let timers = b"{\"seq\":1,\"elapsed_ns\":1500000000}\n{\"seq\":2,\"elapsed_ns\":1000000000}\n";
    let m = vec![
        M::Global("pax_global_header", "1756684800.5"),
        M::Plain(
            "deepswe/t1/a1/identity.json",
            IDENT.as_bytes(),
            1_756_684_800,
        ),
        // Its own PAX mtime overrides the global one.
        M::File("deepswe/t1/a1/requests/00001.start", b"", "1756684810.25"),
        M::Plain("deepswe/t1/a1/requests/00002.start", b"", 1_756_684_000),
        M::Plain("deepswe/t1/a1/timers.jsonl", timers, 0),
        M::Plain("deepswe/t1/a1/result.json", result.as_bytes(), 0),
        // A later global header replaces the earlier value; its name is no member path
        // (GNU tar writes an absolute one) and is not refused.
        M::Global("/tmp/GlobalHead.0.1", "1756684850"),
        M::Plain("deepswe/t2/a2/identity.json", i2.as_bytes(), 0),
        M::Plain("deepswe/t2/a2/result.json", result.as_bytes(), 0),
        // An empty global value removes it (POSIX): the ustar mtime counts again.
        M::Global("pax_global_header", ""),
        M::Plain("deepswe/t3/a3/identity.json", i3.as_bytes(), 1_756_684_900),
        M::Plain("deepswe/t3/a3/result.json", result.as_bytes(), 0),
    ];
    let (d, r) = audit_one("deepswe", &m, (3, 3));
    r.unwrap();
    let p = d.path();
    assert_eq!(
        f64_col(p, "attempts", "gen_start"),
        vec![
            Some(1_756_684_800.5),
            Some(1_756_684_850.0),
            Some(1_756_684_900.0)
        ]
    );
    assert_eq!(
        f64_col(p, "requests", "start_offset_s"),
        vec![Some(0.0), Some(9.75)]
    );
    assert_eq!(
        f64_col(p, "requests", "end_offset_s"),
        vec![Some(1.0), Some(11.25)]
    );
}

#[test]
fn a_start_file_without_a_readable_mtime_is_no_orphan_timer() {
    let record = pax_record("mtime", "notatime");
    let mut bytes = tar_with_pax_record(&record, "deepswe/t1/a1/requests/00001.start", b"");
    bytes.truncate(bytes.len() - 1024);
    let mut rest = good_attempt();
    rest.remove(1);
    bytes.extend_from_slice(&tar_bytes(&rest));
    let d = tempfile::tempdir().unwrap();
    let cfg = setup(d.path(), &[("arc", zstd(&bytes))], (1, 0), "");
    audit::run(&cfg, &audit::AuditOptions::default()).unwrap();
    let p = d.path();
    assert_eq!(
        str_col(p, "exclusions", "detail"),
        vec![Some(
            "`deepswe/t1/a1/requests/00001.start`: PAX mtime `notatime` is not a decimal time"
                .into()
        )]
    );
    assert!(str_col(p, "clipping", "reason").is_empty());
}

#[test]
fn a_tmax_trial_that_says_pilot_is_malformed() {
    let files = tmax_trial("t1", "pilot", TMAX_RESULT);
    let (d, r) = audit_one("tmax", &members(&files), (1, 0));
    let doc = r.unwrap().document;
    assert_eq!(
        (doc.workloads["tmax"].audited, doc.workloads["tmax"].pilot),
        (1, 0)
    );
    assert_eq!(
        str_col(d.path(), "exclusions", "detail"),
        some(&["`tmax/t1/trial.json`: run `pilot`, but tmax trials are always census"])
    );
    assert_eq!(
        str_col(d.path(), "exclusions", "reason"),
        some(&["malformed_record"])
    );
}
