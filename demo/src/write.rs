//! Writing a planned corpus: tar members with PAX fractional mtimes, gzip/zstd streams,
//! raw shards, the manifest, `pipeline.yaml` and `expected.json`.

use crate::knobs::CorpusKnobs;
use crate::plan::{Compression, CorpusPlan, NS, PlannedAttempt};
use crate::{DemoError, DemoSummary, EXPECTED_FORMAT_VERSION, Scale, WrittenArchive};
use model::config::Layout;
use model::manifest::{ManifestRow, write_manifest_csv};
use model::{IdentityRecord, ImageRecord, RunKind, TimerRecord, WorkloadId};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Hugging Face dataset repo the demo shards pretend to live in.
pub const DEMO_HF_REPO: &str = "agentrace-demo/agent-workload-traces";
/// Archives per raw shard.
const ARCHIVES_PER_SHARD: usize = 6;
/// mtime of shard members (the upload time, irrelevant to the audit).
const SHARD_MTIME: u64 = 1_757_000_000;

/// Counts bytes and hashes them on their way to the inner writer.
struct HashingWriter<W: Write> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `secs.nnnnnnnnn` for a nanosecond timestamp (exact decimal).
pub fn pax_time(ns: u64) -> String {
    format!("{}.{:09}", ns / NS, ns % NS)
}

/// RFC 3339 UTC with microseconds for a nanosecond timestamp (whole microseconds).
pub fn rfc3339_micros(ns: u64) -> String {
    let secs = (ns / NS) as i64;
    let micros = (ns % NS) / 1000;
    let dt = chrono::DateTime::from_timestamp(secs, 0).expect("timestamp in range");
    format!("{}.{:06}Z", dt.format("%Y-%m-%dT%H:%M:%S"), micros)
}

/// One PAX extended-header record `"<len> key=value\n"` (`<len>` counts the whole record),
/// byte for byte what `tar::Builder::append_pax_extensions` writes for the pair. That method
/// writes its own bare header (no name, mode or mtime), while the corpus's PAX headers carry
/// them and the corpus's bytes are pinned, so the demo writes its headers itself; tests
/// needing a raw record (a global header, a hostile one) use this one.
pub fn pax_record(key: &str, value: &str) -> Vec<u8> {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while len.to_string().len() + body.len() != len {
        len = len.to_string().len() + body.len();
    }
    format!("{len}{body}").into_bytes()
}

fn regular_header(path: &str, size: u64, mtime_secs: u64) -> io::Result<tar::Header> {
    let mut h = tar::Header::new_ustar();
    h.set_path(path)?;
    h.set_size(size);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(mtime_secs);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    Ok(h)
}

/// Append a regular file with a PAX `mtime` record carrying the fractional mtime.
fn append_with_pax<W: Write>(
    b: &mut tar::Builder<W>,
    path: &str,
    data: &[u8],
    mtime_ns: u64,
) -> io::Result<()> {
    let rec = pax_record("mtime", &pax_time(mtime_ns));
    let base = path.rsplit('/').next().unwrap_or(path);
    let mut ph = tar::Header::new_ustar();
    ph.set_path(format!("PaxHeaders/{}", &base[..base.len().min(80)]))?;
    ph.set_size(rec.len() as u64);
    ph.set_mode(0o644);
    ph.set_uid(0);
    ph.set_gid(0);
    ph.set_mtime(mtime_ns / NS);
    ph.set_entry_type(tar::EntryType::XHeader);
    ph.set_cksum();
    b.append(&ph, rec.as_slice())?;
    let h = regular_header(path, data.len() as u64, mtime_ns / NS)?;
    b.append(&h, data)
}

fn attempt_dir(layout: &Layout, a: &PlannedAttempt) -> String {
    layout
        .attempt_dir
        .replace("{task_id}", &a.task_id)
        .replace("{attempt_id}", &a.attempt_id)
}

/// Write one attempt's members in the layout of docs/FORMAT.md (public for tests that build
/// archives beside the corpus: a duplicate copy, a malformed attempt).
pub fn write_attempt<W: Write>(b: &mut tar::Builder<W>, a: &PlannedAttempt) -> io::Result<()> {
    let layout = Layout::default_for(a.workload);
    let dir = attempt_dir(&layout, a);
    let identity = IdentityRecord {
        task_id: a.task_id.clone(),
        attempt_id: a.attempt_id.clone(),
        run: a.run,
        quota: a.quota,
        image: ImageRecord {
            blobs: a.blobs.clone(),
        },
    };
    let ident_json = serde_json::to_vec_pretty(&identity).map_err(io::Error::other)?;
    append_with_pax(
        b,
        &format!("{dir}{}", layout.identity),
        &ident_json,
        a.gen_start_ns,
    )?;
    let last_ns = a
        .completed_ns
        .unwrap_or(a.gen_start_ns + 1800 * NS)
        .max(a.gen_start_ns);
    for r in &a.requests {
        if let Some(s) = r.start_ns {
            let name = layout
                .request_start
                .replace("{seq}", &format!("{:05}", r.seq));
            append_with_pax(b, &format!("{dir}{name}"), b"", s)?;
        }
    }
    let mut timers = Vec::new();
    for r in &a.requests {
        if let Some(e) = r.elapsed_ns {
            let line = serde_json::to_string(&TimerRecord {
                seq: r.seq,
                elapsed_ns: e,
            })
            .map_err(io::Error::other)?;
            timers.extend_from_slice(line.as_bytes());
            timers.push(b'\n');
        }
    }
    append_with_pax(b, &format!("{dir}{}", layout.timers), &timers, last_ns)?;
    let mut result = a.result.clone();
    result.completed_utc = a.completed_ns.map(rfc3339_micros);
    let result_json =
        serde_json::to_vec_pretty(&result.to_json_for(a.workload)).map_err(io::Error::other)?;
    append_with_pax(b, &format!("{dir}{}", layout.result), &result_json, last_ns)?;
    // Files the layout does not name are ignored by the audit (logs, patches).
    let log = format!(
        "agent log of {} ({} requests)\n",
        a.attempt_id,
        a.requests.len()
    );
    append_with_pax(b, &format!("{dir}agent.log"), log.as_bytes(), last_ns)?;
    if a.workload == WorkloadId::Deepswe && a.run == RunKind::Census {
        let patch = format!(
            "--- a/src/module.py\n+++ b/src/module.py\n@@ -1 +1 @@\n-bug\n+fix for {}\n",
            a.task_id
        );
        append_with_pax(b, &format!("{dir}patch.diff"), patch.as_bytes(), last_ns)?;
    }
    Ok(())
}

fn write_archive(
    path: &Path,
    compression: Compression,
    attempts: &[&PlannedAttempt],
) -> Result<(String, u64), DemoError> {
    let file = File::create(path).map_err(DemoError::io(path))?;
    let hw = HashingWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hasher: Sha256::new(),
        bytes: 0,
    };
    let io = || -> io::Result<HashingWriter<BufWriter<File>>> {
        match compression {
            Compression::Gzip => {
                let enc = flate2::GzBuilder::new()
                    .mtime(0)
                    .operating_system(255)
                    .write(hw, flate2::Compression::new(6));
                let mut b = tar::Builder::new(enc);
                for a in attempts {
                    write_attempt(&mut b, a)?;
                }
                b.into_inner()?.finish()
            }
            Compression::Zstd => {
                let mut enc = zstd::Encoder::new(hw, 3)?;
                enc.include_checksum(true)?;
                let mut b = tar::Builder::new(enc);
                for a in attempts {
                    write_attempt(&mut b, a)?;
                }
                b.into_inner()?.finish()
            }
        }
    };
    let mut hw = io().map_err(DemoError::io(path))?;
    hw.flush().map_err(DemoError::io(path))?;
    Ok((hex::encode(hw.hasher.finalize()), hw.bytes))
}

/// The demo's pinned Hub revision (a 40-hex commit derived from the seed).
pub fn demo_hf_revision(seed: u64) -> String {
    let h = Sha256::digest(format!("agentrace-demo-revision:{seed}").as_bytes());
    hex::encode(h)[..40].to_string()
}

/// Write the planned corpus into `out`: `archives/`, `shards/`, `manifest.csv`,
/// `pipeline.yaml`, `expected.json`.
pub fn write_corpus(
    plan: &CorpusPlan,
    out: &Path,
    scale: Scale,
    seed: u64,
) -> Result<DemoSummary, DemoError> {
    write_corpus_with(plan, out, scale, seed, &CorpusKnobs::default(), None)
}

/// [`write_corpus`] for a corpus planned with knobs: `pipeline.yaml` gets the knobs'
/// workloads and caps; a zoo instance's name and knobs go into `expected.json`.
pub fn write_corpus_with(
    plan: &CorpusPlan,
    out: &Path,
    scale: Scale,
    seed: u64,
    knobs: &CorpusKnobs,
    zoo: Option<&str>,
) -> Result<DemoSummary, DemoError> {
    let adir = out.join("archives");
    let sdir = out.join("shards");
    for d in [&adir, &sdir] {
        std::fs::create_dir_all(d).map_err(DemoError::io(d))?;
    }
    let mut written = Vec::new();
    for (i, ar) in plan.archives.iter().enumerate() {
        let members: Vec<&PlannedAttempt> =
            plan.attempts.iter().filter(|a| a.archive == i).collect();
        let name = format!("{}.{}", ar.archive_id, ar.compression.suffix());
        let (sha256, bytes) = write_archive(&adir.join(&name), ar.compression, &members)?;
        written.push(WrittenArchive {
            archive_id: ar.archive_id.clone(),
            workload: ar.workload.as_str().to_string(),
            file: format!("archives/{name}"),
            sha256,
            bytes,
            shard: format!("raw/shard-{:05}.tar", i / ARCHIVES_PER_SHARD),
        });
    }
    // Raw shards: uncompressed tars whose members are the archives, byte-identical.
    for (si, chunk) in written.chunks(ARCHIVES_PER_SHARD).enumerate() {
        let path = sdir.join(format!("shard-{si:05}.tar"));
        let file = File::create(&path).map_err(DemoError::io(&path))?;
        let mut b = tar::Builder::new(BufWriter::with_capacity(1 << 20, file));
        for w in chunk {
            let src = out.join(&w.file);
            let f = File::open(&src).map_err(DemoError::io(&src))?;
            let member = w.file.trim_start_matches("archives/");
            let h = regular_header(member, w.bytes, SHARD_MTIME).map_err(DemoError::io(&path))?;
            b.append(&h, f).map_err(DemoError::io(&path))?;
        }
        b.into_inner()
            .and_then(|mut w| w.flush())
            .map_err(DemoError::io(&path))?;
    }
    let revision = demo_hf_revision(seed);
    let rows: Vec<ManifestRow> = written
        .iter()
        .map(|w| ManifestRow {
            archive_id: w.archive_id.clone(),
            workload: w.workload.clone(),
            sha256: w.sha256.clone(),
            bytes: w.bytes,
            hf_repo: Some(DEMO_HF_REPO.into()),
            hf_revision: Some(revision.clone()),
            hf_shard: Some(w.shard.clone()),
            hf_member: Some(w.file.trim_start_matches("archives/").to_string()),
            file_path: Some(w.file.clone()),
            ..Default::default()
        })
        .collect();
    let mpath = out.join("manifest.csv");
    std::fs::write(&mpath, write_manifest_csv(&rows)).map_err(DemoError::io(&mpath))?;
    let expected: BTreeMap<String, crate::WorkloadExpectation> = plan
        .expected
        .iter()
        .map(|(w, e)| {
            let mut e = e.clone();
            e.pilot = plan
                .attempts
                .iter()
                .filter(|a| a.workload == *w && a.run == RunKind::Pilot)
                .count() as u64;
            (w.as_str().to_string(), e)
        })
        .collect();
    let ypath = out.join("pipeline.yaml");
    std::fs::write(&ypath, pipeline_yaml(&expected, seed, knobs, zoo))
        .map_err(DemoError::io(&ypath))?;
    let mut doc = serde_json::json!({
        "format_version": EXPECTED_FORMAT_VERSION,
        "scale": scale.as_str(),
        "seed": seed,
        "workloads": expected,
        "archives": written,
    });
    if let Some(name) = zoo {
        doc["zoo"] = serde_json::json!({ "instance": name, "knobs": knobs });
    }
    let epath = out.join("expected.json");
    let text = serde_json::to_string_pretty(&doc).expect("json") + "\n";
    std::fs::write(&epath, text).map_err(DemoError::io(&epath))?;
    Ok(DemoSummary {
        out: out.to_path_buf(),
        scale,
        seed,
        archives: written,
        expected,
    })
}

fn pipeline_yaml(
    expected: &BTreeMap<String, crate::WorkloadExpectation>,
    seed: u64,
    knobs: &CorpusKnobs,
    zoo: Option<&str>,
) -> String {
    let mut y = match zoo {
        None => "# Demo corpus run, written by `pipeline demo`. Paths are relative to this file.\n"
            .to_string(),
        Some(name) => format!(
            "# Zoo instance `{name}` (docs/ZOO.md), written by `pipeline demo --zoo {name}`. \
             Paths are relative to this file.\n"
        ),
    };
    y.push_str(
        "version: 1\n\
run_dir: run\n\
sources:\n\
\x20 manifest: manifest.csv\n\
\x20 locations: [file]\n\
\x20 gcs: { endpoint: null }\n\
\x20 hf: { endpoint: null }\n\
workloads:\n",
    );
    let mut order = Vec::new();
    for w in WorkloadId::ALL.into_iter().filter(|w| knobs.has(*w)) {
        let e = expected.get(w.as_str()).cloned().unwrap_or_default();
        let pilot = match w {
            WorkloadId::Tmax => String::new(),
            WorkloadId::Deepswe => format!(", pilot: {}", e.pilot),
        };
        // The cohort by reason, complete: every census exclusion reason and flag kind.
        let excluded: Vec<String> = e
            .excluded
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| format!("{r}: {n}"))
            .collect();
        let flagged = if e.flagged.is_empty() {
            String::new()
        } else {
            format!("llm_query_error: {}", e.flagged.len())
        };
        let pilot = format!(
            "{pilot}, excluded: {{ {} }}, flagged: {{ {flagged} }}",
            excluded.join(", ")
        );
        let c = knobs.of(w).caps.resolve(w);
        y.push_str(&format!(
            "\x20 {w}:\n\
\x20   expect: {{ audited: {}, included: {}{pilot} }}\n\
\x20   replay: {{ concurrency: {}, cpu_cores: {}, ram_gib: {}, gpus: {} }}\n",
            e.audited, e.included, c.concurrency, c.cpu_cores, c.ram_gib, c.gpus
        ));
        order.push(w.as_str());
    }
    y.push_str(&format!(
        "search:\n\
\x20 seed: {seed}\n\
\x20 order: [{}]\n",
        order.join(", ")
    ));
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_records_are_the_tar_crates() {
        for v in [
            "1.5",
            "1756684800.123456789",
            &"9".repeat(95),
            &"9".repeat(996),
        ] {
            let mut b = tar::Builder::new(Vec::new());
            b.append_pax_extensions([("mtime", v.as_bytes())]).unwrap();
            let bytes = b.into_inner().unwrap();
            let rec = pax_record("mtime", v);
            assert_eq!(&bytes[512..512 + rec.len()], &rec[..], "{v}");
            assert!(bytes[512 + rec.len()..].iter().all(|&b| b == 0), "{v}");
        }
    }

    #[test]
    fn pax_record_lengths_are_self_consistent() {
        for v in ["1.5", "1756684800.123456789", &"9".repeat(95)] {
            let r = pax_record("mtime", v);
            let s = String::from_utf8(r.clone()).unwrap();
            let (len, _) = s.split_once(' ').unwrap();
            assert_eq!(len.parse::<usize>().unwrap(), r.len(), "{s}");
        }
    }

    #[test]
    fn time_formats_are_exact() {
        assert_eq!(pax_time(1_756_684_800_000_000_001), "1756684800.000000001");
        assert_eq!(
            rfc3339_micros(1_756_684_800_123_456_000),
            "2025-09-01T00:00:00.123456Z"
        );
    }
}
