//! A deliberately small HTTP/1.1 server side for the test servers: read a request head,
//! write a response head. Small enough that every fault (a dropped connection after N body
//! bytes, a wrong header) is a line of code.

use std::io;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// A parsed request head (the body, if any, is read and dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// First header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// Whether the client asked to close after this request.
    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Read one request head; `None` at a clean end of the connection. A request body
/// announced by `Content-Length` is read and discarded.
pub async fn read_request<R: AsyncBufRead + Unpin>(r: &mut R) -> io::Result<Option<RequestHead>> {
    read_request_inner(r, None)
        .await
        .map(|o| o.map(|(head, _)| head))
}

/// Read one request head and its body (announced by `Content-Length`, at most `limit`
/// bytes; a larger body is an error); `None` at a clean end of the connection.
pub async fn read_request_with_body<R: AsyncBufRead + Unpin>(
    r: &mut R,
    limit: u64,
) -> io::Result<Option<(RequestHead, Vec<u8>)>> {
    read_request_inner(r, Some(limit)).await
}

async fn read_request_inner<R: AsyncBufRead + Unpin>(
    r: &mut R,
    keep_body: Option<u64>,
) -> io::Result<Option<(RequestHead, Vec<u8>)>> {
    let mut line = String::new();
    let mut total = 0usize;
    // Skip stray empty lines between requests.
    loop {
        line.clear();
        let n = r.read_line(&mut line).await?;
        if n == 0 {
            return Ok(None);
        }
        total += n;
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line).await?;
        total += n;
        if n == 0 || total > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "truncated or oversized request head",
            ));
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let head = RequestHead {
        method,
        target,
        headers,
    };
    let mut body = Vec::new();
    if let Some(len) = head
        .header("content-length")
        .and_then(|v| v.parse::<u64>().ok())
    {
        match keep_body {
            Some(limit) if len > limit => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "request body too large",
                ));
            }
            Some(_) => {
                r.take(len).read_to_end(&mut body).await?;
            }
            None => {
                let mut rest = r.take(len);
                tokio::io::copy(&mut rest, &mut tokio::io::sink()).await?;
            }
        }
    }
    Ok(Some((head, body)))
}

/// The reason phrase of the statuses the test servers use.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Write a response head with the given headers (add `Content-Length` yourself).
pub async fn write_head<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: u16,
    headers: &[(&str, String)],
) -> io::Result<()> {
    let mut s = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        s.push_str(k);
        s.push_str(": ");
        s.push_str(v);
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    w.write_all(s.as_bytes()).await
}

/// A complete small response.
pub async fn write_simple<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: u16,
    mut headers: Vec<(&str, String)>,
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    headers.push(("Content-Length", body.len().to_string()));
    write_head(w, status, &headers).await?;
    if !head_only {
        w.write_all(body).await?;
    }
    w.flush().await
}

/// `bytes=a-b` / `bytes=a-` / `bytes=-n` against a length: the inclusive range, or `None`
/// when the header is absent, malformed or unsatisfiable.
pub fn parse_range(value: Option<&str>, len: u64) -> Option<(u64, u64)> {
    let spec = value?.trim().strip_prefix("bytes=")?;
    if spec.contains(',') || len == 0 {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        let n: u64 = b.parse().ok()?;
        let n = n.min(len);
        return (n > 0).then(|| (len - n, len - 1));
    }
    let start: u64 = a.parse().ok()?;
    let end: u64 = if b.is_empty() {
        len - 1
    } else {
        b.parse::<u64>().ok()?.min(len - 1)
    };
    (start <= end && start < len).then_some((start, end))
}

/// Percent-decode a path segment (`%2F` and friends); invalid escapes are kept.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_decoding() {
        assert_eq!(parse_range(Some("bytes=0-511"), 1000), Some((0, 511)));
        assert_eq!(parse_range(Some("bytes=10-"), 1000), Some((10, 999)));
        assert_eq!(parse_range(Some("bytes=-10"), 1000), Some((990, 999)));
        assert_eq!(parse_range(Some("bytes=990-5000"), 1000), Some((990, 999)));
        assert_eq!(parse_range(Some("bytes=1000-"), 1000), None);
        assert_eq!(parse_range(None, 1000), None);
        assert_eq!(
            percent_decode("raw%2Fshard-00000.tar"),
            "raw/shard-00000.tar"
        );
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%41"), "A");
    }
}
