//! The binary's progress display: an indicatif bar (bytes and archives) when stderr is a
//! terminal, plain lines otherwise, nothing but notes with `--quiet`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

/// Progress on stderr.
pub(crate) struct CliProgress {
    bar: Option<ProgressBar>,
    quiet: bool,
    archives: AtomicU64,
    done: AtomicU64,
}

impl CliProgress {
    /// A bar on a terminal unless `quiet`; plain lines otherwise.
    pub(crate) fn new(quiet: bool) -> CliProgress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {msg}",
                )
                .expect("valid template"),
            );
            b
        });
        CliProgress {
            bar,
            quiet,
            archives: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }
}

impl ingest::ProgressSink for CliProgress {
    fn begin(&self, archives: u64, bytes: u64) {
        self.archives.store(archives, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.set_length(bytes);
            b.set_message(format!("archives 0/{archives}"));
        } else if !self.quiet {
            eprintln!("ingest: {archives} archives, up to {bytes} bytes to verify");
        }
    }

    fn advance_bytes(&self, bytes: u64) {
        if let Some(b) = &self.bar {
            b.inc(bytes);
        }
    }

    fn archive_done(&self, archive_id: &str, status: &str) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let total = self.archives.load(Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.set_message(format!("archives {n}/{total}"));
            if status != "verified" && status != "in_store" {
                b.println(format!("ingest: {archive_id}: {status}"));
            }
        } else if !self.quiet {
            eprintln!("ingest: [{n}/{total}] {archive_id}: {status}");
        }
    }

    fn note(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(format!("ingest: {line}")),
            None => eprintln!("ingest: {line}"),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
