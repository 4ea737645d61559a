//! Conformance checks every [`ArchiveSource`] backend must pass, run by the tests against the
//! file, GCS (fake-gcs-server) and Hub (local Hub server) backends alike:
//! exact bytes (and a fetch's own [`FetchInfo`]), continuation from a non-empty sink,
//! not-found, no location, oversize refusal.

use ingest::error::FetchError;
use ingest::sink::{ByteSink, MemorySink};
use ingest::source::{ArchiveSource, FetchInfo, FetchMethod};
use model::ArchiveSpec;
use model::config::LocationKind;

/// What the checks observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceReport {
    /// Backend kind.
    pub kind: LocationKind,
    /// SHA256 of the full fetch.
    pub sha256: String,
    /// Bytes of the full fetch.
    pub bytes: u64,
    /// Offset the continuation check started from.
    pub continued_from: u64,
}

/// Run every check. `good` must be fetchable and match its manifest hash; `missing` must
/// name a location of this kind that does not exist.
pub async fn check_source(
    source: &dyn ArchiveSource,
    good: &ArchiveSpec,
    missing: &ArchiveSpec,
) -> Result<ConformanceReport, String> {
    let kind = source.kind();
    let name = kind.as_str();
    // 1. URIs.
    if source.uri(good).is_none() {
        return Err(format!(
            "{name}: uri() of an archive with a {name} location is None"
        ));
    }
    let mut without = good.clone();
    match kind {
        LocationKind::File => without.file = None,
        LocationKind::Gcs => without.gcs = None,
        LocationKind::Hf => without.hf = None,
    }
    if source.uri(&without).is_some() {
        return Err(format!(
            "{name}: uri() of an archive without a {name} location is Some"
        ));
    }
    // 2. Exact bytes. The info handed in is stale: the source must reset it.
    let mut full = MemorySink::default();
    let mut info = FetchInfo {
        method: FetchMethod::Store,
        resolved_commit: Some("stale".into()),
        resumes: 99,
        retries: 99,
    };
    source
        .fetch(good, &mut full, &mut info)
        .await
        .map_err(|e| format!("{name}: fetching the good archive failed: {e}"))?;
    let commit_ok = match kind {
        LocationKind::Hf => info
            .resolved_commit
            .as_deref()
            .is_some_and(|c| c != "stale"),
        _ => info.resolved_commit.is_none(),
    };
    if info.method == FetchMethod::Store || !commit_ok || info.resumes == 99 || info.retries == 99 {
        return Err(format!(
            "{name}: the fetch did not reset and fill in the FetchInfo handed to it: {info:?}"
        ));
    }
    if full.sha256() != good.sha256 || full.data.len() as u64 != good.bytes {
        return Err(format!(
            "{name}: got sha256 {} ({} bytes), expected {} ({} bytes)",
            full.sha256(),
            full.data.len(),
            good.sha256,
            good.bytes
        ));
    }
    // 3. A non-empty sink is continued from its offset, not restarted.
    let k = (good.bytes / 3).max(1) as usize;
    let mut partial = MemorySink {
        data: full.data[..k].to_vec(),
    };
    source
        .fetch(good, &mut partial, &mut FetchInfo::default())
        .await
        .map_err(|e| format!("{name}: continuing from byte {k} failed: {e}"))?;
    if partial.data != full.data {
        return Err(format!(
            "{name}: continuing from byte {k} gave {} bytes with sha256 {}, not the archive",
            partial.data.len(),
            partial.sha256()
        ));
    }
    // 4. Not found.
    let mut sink = MemorySink::default();
    match source
        .fetch(missing, &mut sink, &mut FetchInfo::default())
        .await
    {
        Err(FetchError::NotFound { .. }) => {}
        other => {
            return Err(format!(
                "{name}: a missing location gave {other:?}, not NotFound"
            ));
        }
    }
    // 5. No location of this kind.
    match source
        .fetch(&without, &mut sink, &mut FetchInfo::default())
        .await
    {
        Err(FetchError::NotFound { .. }) => {}
        other => {
            return Err(format!(
                "{name}: an archive without the location gave {other:?}"
            ));
        }
    }
    // 6. A location holding more than the manifest's bytes is refused before any byte.
    let mut smaller = good.clone();
    smaller.bytes = good.bytes - 1;
    let mut sink = MemorySink::default();
    match source
        .fetch(&smaller, &mut sink, &mut FetchInfo::default())
        .await
    {
        Err(FetchError::Oversize {
            advertised: Some(a),
            expected,
            ..
        }) if a == good.bytes && expected == good.bytes - 1 && sink.offset() == 0 => {}
        other => {
            return Err(format!(
                "{name}: an oversize location gave {other:?} after {} bytes, not Oversize before any byte",
                sink.offset()
            ));
        }
    }
    Ok(ConformanceReport {
        kind,
        sha256: full.sha256(),
        bytes: full.data.len() as u64,
        continued_from: k as u64,
    })
}
