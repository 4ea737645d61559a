//! Streaming, bounded, hash-checked reading of one original archive: compression by magic
//! bytes, tar members with PAX fractional mtimes, and the archive refusals of docs/FORMAT.md
//! ("Container").

use crate::error::AuditError;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

pub use model::compression::ArchiveCompression;

/// Bounds on what one archive may expand to.
#[derive(Debug, Clone, Copy)]
pub struct ArchiveLimits {
    /// Most uncompressed bytes.
    pub max_uncompressed_bytes: u64,
    /// Most tar members.
    pub max_members: u64,
}

impl ArchiveLimits {
    /// The limits of a config's `audit:` section.
    pub fn of(cfg: &model::LoadedConfig) -> Self {
        ArchiveLimits {
            max_uncompressed_bytes: cfg.config.audit.max_uncompressed_bytes,
            max_members: cfg.config.audit.max_members,
        }
    }
}

/// A member's modification time: the PAX `mtime` record when present, else the ustar field.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemberTime {
    /// Epoch seconds, the nearest f64 to the recorded decimal.
    pub seconds: f64,
    /// Epoch nanoseconds, truncated (for datetime columns).
    pub nanos: i64,
}

/// What kind of member this is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic or hard link to `target` (as written in the archive).
    Link {
        /// Link target.
        target: String,
        /// Hard link (target relative to the archive root) rather than symbolic.
        hard: bool,
    },
}

/// One tar member as the visitor sees it.
#[derive(Debug, Clone)]
pub struct Member {
    /// Normalized relative path (no leading `./`, no empty segments).
    pub path: String,
    /// Kind.
    pub kind: MemberKind,
    /// Its time, or the reason the PAX record could not be read.
    pub mtime: Result<MemberTime, String>,
    /// The time as written: the PAX `mtime` value (the member's own record or the latest
    /// global header's), else the ustar field's decimal seconds.
    pub mtime_text: String,
    /// Declared size in bytes.
    pub size: u64,
}

/// Totals of one scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScanStats {
    /// Compressed bytes read (the archive's size).
    pub compressed_bytes: u64,
    /// Uncompressed bytes read.
    pub uncompressed_bytes: u64,
    /// Members seen.
    pub members: u64,
}

struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    bytes: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

const LIMIT_MESSAGE: &str = "uncompressed size limit exceeded";

struct CountingReader<R> {
    inner: R,
    bytes: u64,
    limit: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        if self.bytes > self.limit {
            return Err(io::Error::other(LIMIT_MESSAGE));
        }
        Ok(n)
    }
}

/// Parse a decimal epoch time (`1756684800.123456789`, optionally negative) exactly.
pub fn parse_epoch_decimal(s: &str) -> Option<MemberTime> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty()
        || int.len() > 12
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 64
    {
        return None;
    }
    let seconds: f64 = s.parse().ok()?;
    let whole: i64 = int.parse().ok()?;
    let mut f9 = frac.chars().take(9).collect::<String>();
    while f9.len() < 9 {
        f9.push('0');
    }
    let nanos_frac: i64 = f9.parse().ok()?;
    let nanos = whole.checked_mul(1_000_000_000)?.checked_add(nanos_frac)?;
    Some(MemberTime {
        seconds,
        nanos: if neg { -nanos } else { nanos },
    })
}

/// Normalize a member path; refuse absolute paths and `..`.
pub fn normalize_member_path(raw: &str) -> Result<String, String> {
    if raw.starts_with('/') {
        return Err("absolute path".into());
    }
    let mut parts = Vec::new();
    for p in raw.split('/') {
        match p {
            "" | "." => {}
            ".." => return Err("path contains `..`".into()),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// Resolve a link target against the directory it lives in; `None` if it leaves the root.
pub fn resolve_link(dir: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in target.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Stream every member of a stored archive through `visit`, checking its SHA256 and byte
/// count against the verified values as the bytes are read.
pub fn scan_archive(
    path: &Path,
    archive_id: &str,
    expected_sha256: &str,
    expected_bytes: u64,
    limits: ArchiveLimits,
    visit: impl FnMut(&Member, &mut dyn Read) -> Result<(), AuditError>,
) -> Result<ScanStats, AuditError> {
    let archive_err = |member: Option<&str>, detail: String| AuditError::Archive {
        archive_id: archive_id.to_string(),
        member: member.map(str::to_string),
        detail,
    };
    let file = File::open(path).map_err(|source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut raw = BufReader::with_capacity(
        256 * 1024,
        HashingReader {
            inner: file,
            hasher: Sha256::new(),
            bytes: 0,
        },
    );
    let head = raw.fill_buf().map_err(|source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let Some(compression) = ArchiveCompression::detect(head) else {
        let first = hex::encode(&head[..head.len().min(4)]);
        return Err(
            store_damage(path, archive_id, expected_sha256, expected_bytes).unwrap_or_else(|| {
                archive_err(
                    None,
                    format!("not a gzip or zstd stream (first bytes {first})"),
                )
            }),
        );
    };
    let decoder: Box<dyn Read + '_> = match compression {
        ArchiveCompression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(&mut raw)),
        ArchiveCompression::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(&mut raw)
                .map_err(|e| archive_err(None, format!("corrupt zstd stream: {e}")))?,
        ),
    };
    let label = match compression {
        ArchiveCompression::Gzip => "gzip/tar",
        ArchiveCompression::Zstd => "zstd/tar",
    };
    let mut stats = match scan_tar_stream(decoder, archive_id, label, limits, visit) {
        Ok(stats) => stats,
        // A stream that breaks off, or a member refused, in bytes that are not the verified
        // ones: the store is damaged, and that is what to say (the whole file is hashed).
        Err(e) => {
            return Err(
                store_damage(path, archive_id, expected_sha256, expected_bytes).unwrap_or(e),
            );
        }
    };
    // Hash the rest of the file (padding after the end-of-archive blocks).
    io::copy(&mut raw, &mut io::sink()).map_err(|source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let hr = raw.into_inner();
    stats.compressed_bytes = hr.bytes;
    let actual = hex::encode(hr.hasher.finalize());
    if actual != expected_sha256 || hr.bytes != expected_bytes {
        return Err(AuditError::StoreMismatch {
            archive_id: archive_id.to_string(),
            path: path.to_path_buf(),
            expected: format!("{expected_sha256} ({expected_bytes} bytes)"),
            actual: format!("{actual} ({} bytes)", hr.bytes),
        });
    }
    Ok(stats)
}

/// `StoreMismatch` when the stored file at `path` does not hash to the verified values
/// (`None` when it does, or cannot be read: the error at hand is then the better one).
fn store_damage(
    path: &Path,
    archive_id: &str,
    expected_sha256: &str,
    expected_bytes: u64,
) -> Option<AuditError> {
    let (actual, bytes) = model::run_dir::hash_file(path).ok()?;
    (actual != expected_sha256 || bytes != expected_bytes).then(|| AuditError::StoreMismatch {
        archive_id: archive_id.to_string(),
        path: path.to_path_buf(),
        expected: format!("{expected_sha256} ({expected_bytes} bytes)"),
        actual: format!("{actual} ({bytes} bytes)"),
    })
}

/// Walk the members of an uncompressed tar stream through `visit`, with the refusal checks
/// (paths, links, member types, member count, uncompressed bytes). `label` names the stream
/// in errors (`zstd/tar`). Returns the members and uncompressed bytes read.
pub fn scan_tar_stream(
    reader: impl Read,
    archive_id: &str,
    label: &str,
    limits: ArchiveLimits,
    mut visit: impl FnMut(&Member, &mut dyn Read) -> Result<(), AuditError>,
) -> Result<ScanStats, AuditError> {
    let archive_err = |member: Option<&str>, detail: String| AuditError::Archive {
        archive_id: archive_id.to_string(),
        member: member.map(str::to_string),
        detail,
    };
    let counting = CountingReader {
        inner: reader,
        bytes: 0,
        limit: limits.max_uncompressed_bytes,
    };
    let mut tar = tar::Archive::new(counting);
    let mut stats = ScanStats::default();
    let mut last_member: Option<String> = None;
    // The `mtime` of the latest global PAX header (and its text), for members without
    // their own.
    let mut global_mtime: Option<(Result<MemberTime, String>, String)> = None;
    let stream_err = |last: &Option<String>, e: io::Error| {
        let msg = e.to_string();
        if msg.contains(LIMIT_MESSAGE) {
            archive_err(
                last.as_deref(),
                format!(
                    "expands past the limit of {} uncompressed bytes (hint: raise audit.max_uncompressed_bytes)",
                    limits.max_uncompressed_bytes
                ),
            )
        } else {
            archive_err(
                last.as_deref(),
                format!("corrupt or truncated {label} stream after this member: {msg}"),
            )
        }
    };
    {
        let entries = tar.entries().map_err(|e| stream_err(&last_member, e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| stream_err(&last_member, e))?;
            stats.members += 1;
            if stats.members > limits.max_members {
                return Err(archive_err(
                    last_member.as_deref(),
                    format!(
                        "holds more than {} members (hint: raise audit.max_members)",
                        limits.max_members
                    ),
                ));
            }
            if entry.header().entry_type() == tar::EntryType::XGlobalHeader {
                // A global header's records apply to every later member (POSIX; Python's
                // tarfile does the same); only `mtime` is taken (see DECISIONS.md). Its name
                // is no member path (GNU tar writes an absolute one), so it is not checked.
                let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
                let mut records = Vec::new();
                (&mut entry)
                    .take(MAX_GLOBAL_HEADER_BYTES + 1)
                    .read_to_end(&mut records)
                    .map_err(|e| stream_err(&last_member, e))?;
                if records.len() as u64 > MAX_GLOBAL_HEADER_BYTES {
                    return Err(archive_err(
                        Some(&name),
                        format!(
                            "refused member: global PAX header larger than {MAX_GLOBAL_HEADER_BYTES} bytes"
                        ),
                    ));
                }
                if let Some(t) = global_pax_mtime(&records) {
                    global_mtime = t;
                }
                continue;
            }
            let raw_path = entry.path_bytes().into_owned();
            let raw_path = String::from_utf8(raw_path).map_err(|e| {
                archive_err(
                    None,
                    format!(
                        "member name is not UTF-8: {:?}",
                        String::from_utf8_lossy(e.as_bytes())
                    ),
                )
            })?;
            let path = normalize_member_path(&raw_path)
                .map_err(|why| archive_err(Some(&raw_path), format!("refused member: {why}")))?;
            let etype = entry.header().entry_type();
            let kind = match etype {
                tar::EntryType::Regular
                | tar::EntryType::Continuous
                | tar::EntryType::GNUSparse => MemberKind::File,
                tar::EntryType::Directory => MemberKind::Directory,
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    let target = entry
                        .link_name_bytes()
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default();
                    MemberKind::Link {
                        target,
                        hard: etype == tar::EntryType::Link,
                    }
                }
                other => {
                    return Err(archive_err(
                        Some(&path),
                        format!("refused member: unsupported entry type {other:?}"),
                    ));
                }
            };
            let mut mtime = None;
            if let Ok(Some(exts)) = entry.pax_extensions() {
                for ext in exts {
                    let ext = match ext {
                        Ok(x) => x,
                        Err(e) => {
                            mtime =
                                Some((Err(format!("unreadable PAX record: {e}")), String::new()));
                            break;
                        }
                    };
                    if ext.key_bytes() == b"mtime" {
                        let v = String::from_utf8_lossy(ext.value_bytes()).into_owned();
                        mtime = Some((
                            parse_epoch_decimal(&v)
                                .ok_or_else(|| format!("PAX mtime `{v}` is not a decimal time")),
                            v,
                        ));
                    }
                }
            }
            let (mtime, mtime_text) = mtime.or_else(|| global_mtime.clone()).unwrap_or_else(|| {
                let ustar = entry.header().mtime();
                let text = ustar.as_ref().map(u64::to_string).unwrap_or_default();
                let t = ustar
                    .map_err(|e| format!("unreadable ustar mtime: {e}"))
                    .and_then(|s| {
                        i64::try_from(s)
                            .ok()
                            .and_then(|s| s.checked_mul(1_000_000_000))
                            .map(|nanos| MemberTime {
                                seconds: s as f64,
                                nanos,
                            })
                            .ok_or_else(|| format!("ustar mtime {s} out of range"))
                    });
                (t, text)
            });
            let size = entry.header().size().unwrap_or(0);
            let member = Member {
                path,
                kind,
                mtime,
                mtime_text,
                size,
            };
            visit(&member, &mut entry)?;
            // Drain what the visitor left so stream errors surface on this member.
            io::copy(&mut entry, &mut io::sink())
                .map_err(|e| stream_err(&Some(member.path.clone()), e))?;
            last_member = Some(member.path);
        }
    }
    let counting = tar.into_inner();
    stats.uncompressed_bytes = counting.bytes;
    Ok(stats)
}

/// Largest global PAX header read (its records are kept only for `mtime`).
const MAX_GLOBAL_HEADER_BYTES: u64 = 1024 * 1024;

/// The `mtime` record of a global PAX header's data, if it has one (the last one wins, as a
/// later record overrides an earlier one): `Some(None)` when its value is empty (POSIX: the
/// global value is removed), else the time or why it cannot be read, with the value as
/// written.
#[allow(clippy::option_option, clippy::type_complexity)]
fn global_pax_mtime(records: &[u8]) -> Option<Option<(Result<MemberTime, String>, String)>> {
    let mut mtime = None;
    for ext in tar::PaxExtensions::new(records) {
        match ext {
            Err(e) => {
                return Some(Some((
                    Err(format!("unreadable global PAX record: {e}")),
                    String::new(),
                )));
            }
            Ok(x) if x.key_bytes() == b"mtime" && x.value_bytes().is_empty() => {
                mtime = Some(None);
            }
            Ok(x) if x.key_bytes() == b"mtime" => {
                let v = String::from_utf8_lossy(x.value_bytes()).into_owned();
                let t = parse_epoch_decimal(&v)
                    .ok_or_else(|| format!("global PAX mtime `{v}` is not a decimal time"));
                mtime = Some(Some((t, v)));
            }
            Ok(_) => {}
        }
    }
    mtime
}

/// Read a member's bytes, refusing more than `cap`.
pub fn read_capped(r: &mut dyn Read, cap: u64) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    r.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("unreadable: {e}"))?;
    if buf.len() as u64 > cap {
        return Err(format!("larger than {cap} bytes"));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_times_parse_exactly() {
        let t = parse_epoch_decimal("1756684800.123456789").unwrap();
        assert_eq!(t.nanos, 1_756_684_800_123_456_789);
        assert_eq!(t.seconds, "1756684800.123456789".parse::<f64>().unwrap());
        assert_eq!(parse_epoch_decimal("12").unwrap().nanos, 12_000_000_000);
        assert_eq!(parse_epoch_decimal("1.5").unwrap().seconds, 1.5);
        assert!(parse_epoch_decimal("1e9").is_none());
        assert!(parse_epoch_decimal("abc").is_none());
        assert!(parse_epoch_decimal("").is_none());
        assert!(parse_epoch_decimal("99999999999999999999").is_none());
    }

    #[test]
    fn paths_and_links() {
        assert_eq!(normalize_member_path("./a//b/./c").unwrap(), "a/b/c");
        assert!(normalize_member_path("/etc/passwd").is_err());
        assert!(normalize_member_path("a/../../b").is_err());
        assert_eq!(resolve_link("a/b", "../c").as_deref(), Some("a/c"));
        assert_eq!(resolve_link("a", "../../c"), None);
        assert_eq!(resolve_link("a", "/etc"), None);
    }
}
