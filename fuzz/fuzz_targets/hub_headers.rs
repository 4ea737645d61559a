//! Fuzz target: the Hub's resolve-answer headers (X-Repo-Commit, X-Linked-Etag,
//! X-Linked-Size, ETag, Content-Length, Location) through their interpretation.
//! Input: `name: value` lines; the first line's first byte picks the status.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let statuses = [200u16, 301, 302, 303, 307, 308];
    let status = reqwest::StatusCode::from_u16(statuses[data.first().map_or(0, |b| *b as usize) % 6])
        .expect("valid status");
    let mut headers = HeaderMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':')
            && let (Ok(k), Ok(v)) = (HeaderName::from_bytes(k.trim().as_bytes()), HeaderValue::from_str(v.trim()))
        {
            headers.append(k, v);
        }
    }
    let hub = url::Url::parse("http://127.0.0.1:9/datasets/o/r/resolve/0123456789abcdef0123456789abcdef01234567/s.tar")
        .expect("url");
    let _ = ingest::source::hf::interpret_resolve_headers(
        status,
        &headers,
        &hub,
        "0123456789abcdef0123456789abcdef01234567",
        "hf://fuzz",
    );
});
