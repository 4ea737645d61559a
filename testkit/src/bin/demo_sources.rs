//! `demo-sources`: local stand-ins for the study's real sources, serving a demo corpus
//! written by `pipeline demo` (the README walkthrough's first step; a researcher with real
//! sources skips it). `start` publishes the corpus to the real GCS emulator (a versioned
//! bucket) and to the local Hub, leaves them running in the background and writes the
//! server's process id; `stop` ends them.
//!
//! ```text
//! demo-sources start --corpus DIR --pid-file FILE [--gcs-port 4443] [--hub-port 5564]
//!                    [--bucket agentrace-demo] [--prefix archives]
//! demo-sources stop --pid-file FILE
//! ```

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use testkit::{DemoSources, DemoSourcesOptions};

/// Serve a demo corpus from a local GCS emulator and a local Hugging Face Hub.
#[derive(Debug, Parser)]
#[command(name = "demo-sources", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Publish the corpus and keep serving it in the background; print the endpoints.
    Start {
        #[command(flatten)]
        serve: ServeArgs,
        /// Where to write the background server's process id.
        #[arg(long)]
        pid_file: PathBuf,
    },
    /// Publish the corpus and serve it in the foreground until SIGTERM or SIGINT.
    Serve {
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// Stop the server `start` left running.
    Stop {
        /// The process id file `start` wrote.
        #[arg(long)]
        pid_file: PathBuf,
    },
}

#[derive(Debug, Clone, Args)]
struct ServeArgs {
    /// The corpus directory (`pipeline demo --out DIR`).
    #[arg(long)]
    corpus: PathBuf,
    /// Loopback port of the GCS emulator.
    #[arg(long, default_value_t = 4443)]
    gcs_port: u16,
    /// Loopback port of the Hub.
    #[arg(long, default_value_t = 5564)]
    hub_port: u16,
    /// Bucket (created with object versioning).
    #[arg(long, default_value = "agentrace-demo")]
    bucket: String,
    /// Object-name folder of the archives.
    #[arg(long, default_value = "archives")]
    prefix: String,
}

impl ServeArgs {
    fn to_args(&self) -> Vec<String> {
        vec![
            "--corpus".into(),
            self.corpus.display().to_string(),
            "--gcs-port".into(),
            self.gcs_port.to_string(),
            "--hub-port".into(),
            self.hub_port.to_string(),
            "--bucket".into(),
            self.bucket.clone(),
            "--prefix".into(),
            self.prefix.clone(),
        ]
    }
}

/// The line `serve` prints once both servers answer.
const READY: &str = "ready";

fn serve(a: &ServeArgs) -> Result<()> {
    let sources = DemoSources::start(
        &a.corpus,
        &DemoSourcesOptions {
            bucket: a.bucket.clone(),
            prefix: a.prefix.clone(),
            gcs_port: a.gcs_port,
            hub_port: a.hub_port,
        },
    )
    .with_context(|| format!("serving the demo corpus in {}", a.corpus.display()))?;
    for line in &sources.summary {
        println!("{line}");
    }
    println!("{READY}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal runtime")?;
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok::<_, std::io::Error>(())
    })
    .context("waiting for a signal")?;
    drop(sources);
    Ok(())
}

fn start(a: &ServeArgs, pid_file: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("locating demo-sources")?;
    let mut child = Command::new(exe)
        .arg("serve")
        .args(a.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the background server")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let ready = line == READY;
            if tx.send(line).is_err() || ready {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line == READY => break,
            Ok(line) => println!("{line}"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Some(status) = child.try_wait()? {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        use std::io::Read;
                        let _ = e.read_to_string(&mut err);
                    }
                    bail!("the background server exited ({status}): {}", err.trim());
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    bail!("the background server did not get ready within 120 s");
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait()?;
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                bail!("the background server exited ({status}): {}", err.trim());
            }
        }
    }
    std::fs::write(pid_file, format!("{}\n", child.id()))
        .with_context(|| format!("writing {}", pid_file.display()))?;
    println!(
        "serving in the background (process {}); stop with: demo-sources stop --pid-file {}",
        child.id(),
        pid_file.display()
    );
    Ok(())
}

fn stop(pid_file: &Path) -> Result<()> {
    let text = std::fs::read_to_string(pid_file)
        .with_context(|| format!("reading {}", pid_file.display()))?;
    let pid: u32 = text
        .trim()
        .parse()
        .with_context(|| format!("{}: not a process id", pid_file.display()))?;
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("process {pid} of {} is not running", pid_file.display());
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while proc_dir.exists() && Instant::now() < deadline {
        // A zombie (its parent has not reaped it) has stopped serving too.
        let state = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_file(pid_file).with_context(|| format!("removing {}", pid_file.display()))?;
    println!("stopped process {pid}");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match &cli.command {
        Cmd::Start { serve: a, pid_file } => start(a, pid_file),
        Cmd::Serve { serve: a } => serve(a),
        Cmd::Stop { pid_file } => stop(pid_file),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
