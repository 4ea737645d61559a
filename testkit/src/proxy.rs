//! A fault-injecting HTTP/1.1 proxy on a loopback ephemeral port, put in front of a real
//! server (fake-gcs-server) to produce the faults it cannot: a transient status (429, 503)
//! before the real answer, or a connection dropped after N body bytes. Every request is
//! logged with its `Range` header, so tests can check where a resume started.

use crate::TestkitError;
use crate::http::{RequestHead, percent_decode, read_request, write_simple};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Fault switches; each applies only to requests whose percent-decoded target contains
/// `only_paths_containing`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyFaults {
    /// Restrict faults to matching request targets (empty: all).
    pub only_paths_containing: String,
    /// Answer the next this-many matching requests with `fail_status` (default 429).
    pub fail_next: u32,
    /// Status for `fail_next`.
    pub fail_status: u16,
    /// Once: forward only this many response body bytes, then close the connection.
    pub drop_after_body_bytes: Option<u64>,
}

/// One proxied request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedRequest {
    /// Method.
    pub method: String,
    /// Path and query, percent-decoded.
    pub target: String,
    /// `Range` header.
    pub range: Option<String>,
    /// Status answered to the client.
    pub status: u16,
    /// Whether the proxy cut the body short.
    pub cut: bool,
}

#[derive(Debug, Default)]
struct ProxyState {
    faults: ProxyFaults,
    log: Vec<ProxiedRequest>,
}

/// The running proxy. Dropping it stops it.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<ProxyState>>,
    rt: Option<tokio::runtime::Runtime>,
}

impl FaultProxy {
    /// Proxy 127.0.0.1:<ephemeral> to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Result<FaultProxy, TestkitError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("testkit-proxy")
            .build()
            .map_err(|e| TestkitError::Io("starting the proxy runtime".into(), e))?;
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| TestkitError::Io("binding the proxy".into(), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| TestkitError::Io("proxy address".into(), e))?;
        let state = Arc::new(Mutex::new(ProxyState::default()));
        let up = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        {
            let state = state.clone();
            rt.spawn(async move {
                while let Ok((sock, _)) = listener.accept().await {
                    let state = state.clone();
                    let up = up.clone();
                    tokio::spawn(async move {
                        let _ = serve(sock, &up, &state).await;
                    });
                }
            });
        }
        Ok(FaultProxy {
            addr,
            state,
            rt: Some(rt),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replace the fault switches.
    pub fn set_faults(&self, f: ProxyFaults) {
        self.state.lock().expect("proxy state").faults = f;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<ProxiedRequest> {
        self.state.lock().expect("proxy state").log.clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

async fn serve(sock: TcpStream, upstream: &str, state: &Mutex<ProxyState>) -> std::io::Result<()> {
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    // One request per connection: every answer says `Connection: close`.
    let Some(head) = read_request(&mut r).await? else {
        return Ok(());
    };
    let (fail, drop_after) = {
        let mut s = state.lock().expect("proxy state");
        let f = &mut s.faults;
        let matches = percent_decode(&head.target).contains(&f.only_paths_containing);
        let fail = if matches && f.fail_next > 0 {
            f.fail_next -= 1;
            Some(if f.fail_status == 0 {
                429
            } else {
                f.fail_status
            })
        } else {
            None
        };
        let drop_after = if matches && fail.is_none() && head.method == "GET" {
            f.drop_after_body_bytes.take()
        } else {
            None
        };
        (fail, drop_after)
    };
    let record = |status: u16, cut: bool| {
        state.lock().expect("proxy state").log.push(ProxiedRequest {
            method: head.method.clone(),
            target: percent_decode(&head.target),
            range: head.header("range").map(str::to_string),
            status,
            cut,
        });
    };
    if let Some(status) = fail {
        record(status, false);
        write_simple(
            &mut w,
            status,
            vec![("Retry-After", "0".into()), ("Connection", "close".into())],
            b"injected fault",
            head.method == "HEAD",
        )
        .await?;
        let _ = w.shutdown().await;
        return Ok(());
    }
    let (status, cut) = forward(&head, &mut w, upstream, drop_after).await?;
    record(status, cut);
    let _ = w.shutdown().await;
    Ok(())
}

/// Send `head` to `upstream` (`host:port`, as its own `Host`) and copy the answer to `w`
/// with `Connection: close`, cutting the body after `drop_after` bytes if asked. Returns the
/// status and whether the body was cut.
pub(crate) async fn forward<W: AsyncWriteExt + Unpin>(
    head: &RequestHead,
    w: &mut W,
    upstream: &str,
    drop_after: Option<u64>,
) -> std::io::Result<(u16, bool)> {
    let mut up = TcpStream::connect(upstream).await?;
    up.write_all(rewrite_head(head, upstream).as_bytes())
        .await?;
    let mut up = BufReader::new(up);
    // Response head: forward as is, but force `Connection: close`.
    let mut status_line = String::new();
    up.read_line(&mut status_line).await?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(502);
    let mut out_head = status_line.clone();
    loop {
        let mut line = String::new();
        if up.read_line(&mut line).await? == 0 {
            break;
        }
        if line.trim().is_empty() {
            break;
        }
        if line.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        out_head.push_str(&line);
    }
    out_head.push_str("Connection: close\r\n\r\n");
    w.write_all(out_head.as_bytes()).await?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut sent = 0u64;
    let mut cut = false;
    loop {
        let n = up.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        if let Some(limit) = drop_after
            && sent + n as u64 > limit
        {
            let k = (limit - sent) as usize;
            w.write_all(&buf[..k]).await?;
            cut = true;
            break;
        }
        w.write_all(&buf[..n]).await?;
        sent += n as u64;
    }
    w.flush().await?;
    Ok((status, cut))
}

fn rewrite_head(head: &RequestHead, upstream: &str) -> String {
    let mut s = format!("{} {} HTTP/1.1\r\n", head.method, head.target);
    for (k, v) in &head.headers {
        if k.eq_ignore_ascii_case("host") || k.eq_ignore_ascii_case("connection") {
            continue;
        }
        s.push_str(&format!("{k}: {v}\r\n"));
    }
    s.push_str(&format!("Host: {upstream}\r\nConnection: close\r\n\r\n"));
    s
}
