//! Temporary file names of atomic writes, and the sweep that removes the ones a killed or
//! crashed process left behind.
//!
//! A temporary name carries the writing process's id and a per-process sequence number
//! (`.NAME.tmp-PID-SEQ`), so two threads of one process never share one, and a later run
//! can tell a leftover (its process is gone) from a write in progress (its process is
//! still running) before removing it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The marker between a file's name and the writer's process id.
pub const TEMP_MARKER: &str = ".tmp-";

/// A fresh temporary path beside `path`: `.NAME.tmp-PID-SEQ` in the same directory (so the
/// final rename stays on one filesystem).
pub fn temp_path_for(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}{TEMP_MARKER}{}-{seq}", std::process::id()))
}

/// Whether the process `pid` is running on this machine (a zombie is not).
pub use model::process::is_running as process_is_running;

/// The writer's process id in a temporary name made by [`temp_path_for`] (`None` for any
/// other name).
pub fn temp_name_pid(file_name: &str) -> Option<u32> {
    if !file_name.starts_with('.') {
        return None;
    }
    let (_, rest) = file_name.rsplit_once(TEMP_MARKER)?;
    let pid = rest.split('-').next()?;
    pid.parse().ok()
}

/// Remove, from `dir` (not recursively), every temporary file whose name `pid_of` reads a
/// process id from and whose process is no longer running; returns what was removed, in
/// name order. A missing directory holds nothing. The caller's own process is never
/// treated as gone.
pub fn remove_stale_temp_files(
    dir: &Path,
    pid_of: impl Fn(&str) -> Option<u32>,
) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut stale = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = pid_of(&name) else { continue };
        if pid == std::process::id() || process_is_running(pid) {
            continue;
        }
        if entry.file_type()?.is_file() {
            stale.push(entry.path());
        }
    }
    stale.sort();
    for p in &stale {
        match std::fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process id that is not running: the largest allowed pid is far above any live one
    /// on a test machine, and checked.
    fn dead_pid() -> u32 {
        let pid = 4_194_000;
        assert!(!process_is_running(pid));
        pid
    }

    #[test]
    fn names_are_unique_per_call_and_carry_the_pid() {
        let a = temp_path_for(Path::new("/r/x.parquet"));
        let b = temp_path_for(Path::new("/r/x.parquet"));
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(".x.parquet.tmp-"), "{name}");
        assert_eq!(temp_name_pid(&name), Some(std::process::id()));
        assert_eq!(temp_name_pid(".ledger.parquet.tmp-123"), Some(123));
        assert_eq!(temp_name_pid("ledger.parquet"), None);
        assert_eq!(temp_name_pid(".x.tmp-abc"), None);
    }

    #[test]
    fn sweep_removes_only_leftovers_of_dead_processes() {
        let d = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        let leftover = d.path().join(format!(".ledger.parquet.tmp-{dead}"));
        let leftover2 = d.path().join(format!(".requests.parquet.tmp-{dead}-3"));
        let ours = temp_path_for(&d.path().join("attempts.parquet"));
        let live = d.path().join(".bounds.parquet.tmp-1"); // pid 1 is always running
        let frame = d.path().join("ledger.parquet");
        for p in [&leftover, &leftover2, &ours, &live, &frame] {
            std::fs::write(p, b"x").unwrap();
        }
        let removed = remove_stale_temp_files(d.path(), temp_name_pid).unwrap();
        assert_eq!(removed, vec![leftover.clone(), leftover2.clone()]);
        assert!(!leftover.exists() && !leftover2.exists());
        assert!(ours.exists() && live.exists() && frame.exists());
        assert!(
            remove_stale_temp_files(&d.path().join("absent"), temp_name_pid)
                .unwrap()
                .is_empty()
        );
    }
}
