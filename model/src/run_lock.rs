//! The exclusive lock on a run directory: one `pipeline run` or stage writes it at a time.
//!
//! The lock is an advisory `flock`-style lock (`std::fs::File::try_lock`) on `run_dir/.lock`,
//! so the kernel releases it when the holder exits, however it exits (a crash or SIGKILL
//! leaves no stale lock). The holder writes its pid and command into the file; a refused
//! command names them. Within one process the lock is reentrant: `pipeline run` holds it
//! and calls each stage, which takes it again.
//!
//! Where the file system does not implement `flock` (Lustre mounted `noflock`, some FUSE and
//! network mounts: the call fails with `ENOSYS`, `EOPNOTSUPP`, `ENOLCK` or `EINVAL`), the lock is the
//! exclusive creation of `run_dir/.lock.excl` (`O_CREAT | O_EXCL`) holding the holder's host,
//! pid and command, removed when the holder releases it. A killed holder leaves that file:
//! on its own host a holder whose process is gone is recognised and replaced; from another
//! host the refusal names the host and pid and says which file to remove.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The lock file's name below the run directory.
pub const LOCK_FILE: &str = ".lock";
/// The lock taken by exclusive creation where `flock` is not available.
pub const EXCLUSIVE_LOCK_FILE: &str = ".lock.excl";

/// Why a run directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum RunLockError {
    /// Another process holds it.
    #[error(
        "run directory {} is in use by {holder}; wait for it to finish (the lock goes with the process, even if it is killed)",
        dir.display()
    )]
    Held {
        /// The run directory.
        dir: PathBuf,
        /// What the holder wrote: `pid N: COMMAND since TIME`.
        holder: String,
    },
    /// The lock file could not be created or locked.
    #[error("cannot lock {}", path.display())]
    Io {
        /// The lock file (or the run directory).
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// How a held lock is held.
#[derive(Debug)]
enum Held {
    /// The `flock` on the open `.lock` (closing it releases the lock).
    Flock(#[allow(dead_code)] File),
    /// `.lock.excl`, created exclusively; removed on release.
    Exclusive(PathBuf),
}

/// Locks this process holds: canonical run directory -> (how, holders).
static HELD: Mutex<BTreeMap<PathBuf, (Held, usize)>> = Mutex::new(BTreeMap::new());

/// Whether a failed `flock` means the file system does not implement it (rather than a
/// real error).
pub fn flock_unsupported(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Unsupported
        || matches!(
            e.raw_os_error(),
            Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) | Some(libc::ENOLCK) | Some(libc::EINVAL)
        )
}

/// This machine's host name (for the exclusive lock's note).
fn host_name() -> String {
    crate::process::host_name().unwrap_or_else(|| "unknown-host".into())
}

/// A held lock on a run directory; released when the last holder in this process drops it.
#[derive(Debug)]
pub struct RunLock {
    key: PathBuf,
}

impl RunLock {
    /// Lock `run_dir` (created if absent) for `command` (e.g. `pipeline run`), or say who
    /// holds it. Reentrant within one process.
    pub fn acquire(run_dir: &Path, command: &str) -> Result<RunLock, RunLockError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RunLockError::Io { path, source }
        };
        std::fs::create_dir_all(run_dir).map_err(io(run_dir))?;
        let key = run_dir.canonicalize().map_err(io(run_dir))?;
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, holders)) = held.get_mut(&key) {
            *holders += 1;
            return Ok(RunLock { key });
        }
        let path = key.join(LOCK_FILE);
        if crate::run_dir::is_link(&path) {
            return Err(RunLockError::Io {
                source: crate::run_dir::link_refused(&path),
                path,
            });
        }
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
        let mut file = options.open(&path).map_err(io(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::Error(source)) if flock_unsupported(&source) => {
                drop(file);
                let lock = acquire_exclusive(&key, run_dir, command)?;
                held.insert(key.clone(), (Held::Exclusive(lock), 1));
                return Ok(RunLock { key });
            }
            Err(TryLockError::WouldBlock) => {
                // The holder writes its note right after it locks: give it a moment.
                let mut said = String::new();
                for _ in 0..50 {
                    said = std::fs::read_to_string(&path).unwrap_or_default();
                    if !said.trim().is_empty() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                let said = said.trim();
                return Err(RunLockError::Held {
                    dir: run_dir.to_path_buf(),
                    holder: if said.is_empty() {
                        "another process (it did not say which)".to_string()
                    } else {
                        said.to_string()
                    },
                });
            }
            Err(TryLockError::Error(source)) => return Err(RunLockError::Io { path, source }),
        }
        let note = format!(
            "pid {}: {command} since {}\n",
            std::process::id(),
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
        );
        file.set_len(0)
            .and_then(|()| file.write_all(note.as_bytes()))
            .map_err(io(&path))?;
        held.insert(key.clone(), (Held::Flock(file), 1));
        Ok(RunLock { key })
    }
}

/// Take the lock by creating `dir/.lock.excl` exclusively (see the module page); returns
/// its path. `shown` is the run directory as the user named it.
fn acquire_exclusive(dir: &Path, shown: &Path, command: &str) -> Result<PathBuf, RunLockError> {
    let path = dir.join(EXCLUSIVE_LOCK_FILE);
    let host = host_name();
    let note = format!(
        "host {host} pid {}: {command} since {}\n",
        std::process::id(),
        chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
    );
    for _ in 0..3 {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
        match options.open(&path) {
            Ok(mut f) => {
                f.write_all(note.as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(|source| RunLockError::Io {
                        path: path.clone(),
                        source,
                    })?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let said = std::fs::read_to_string(&path).unwrap_or_default();
                let said = said.trim();
                // `host H pid N: ...` from this host with N gone: a killed holder's file.
                let stale = said
                    .strip_prefix(&format!("host {host} pid "))
                    .and_then(|rest| rest.split(':').next())
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| !crate::process::is_running(pid));
                if stale {
                    let _ = std::fs::remove_file(&path);
                    continue;
                }
                return Err(RunLockError::Held {
                    dir: shown.to_path_buf(),
                    holder: format!(
                        "{} (this file system has no flock, so the lock is {}; if that process is gone, remove the file)",
                        if said.is_empty() {
                            "another process (it did not say which)"
                        } else {
                            said
                        },
                        path.display()
                    ),
                });
            }
            Err(source) => return Err(RunLockError::Io { path, source }),
        }
    }
    Err(RunLockError::Io {
        path,
        source: std::io::Error::other("the lock file keeps reappearing"),
    })
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, holders)) = held.get_mut(&self.key) {
            *holders -= 1;
            if *holders == 0 {
                // Closing the file releases a flock; the exclusive file is removed.
                if let Some((Held::Exclusive(path), _)) = held.remove(&self.key) {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reentrant_in_one_process_and_released_by_the_last_holder() {
        let dir = tempfile::tempdir().unwrap();
        let a = RunLock::acquire(dir.path(), "first").unwrap();
        let b = RunLock::acquire(dir.path(), "second").unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert!(
            text.starts_with(&format!("pid {}: first since ", std::process::id())),
            "{text}"
        );
        drop(a);
        // Still held: a second open file description cannot lock it.
        let other = File::open(dir.path().join(LOCK_FILE)).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        drop(b);
        other.try_lock().expect("released by the last holder");
    }

    #[test]
    fn a_lock_held_elsewhere_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        std::fs::write(&path, "pid 4242: pipeline run since 2026-12-01T00:00:00Z\n").unwrap();
        let other = File::open(&path).unwrap();
        other.lock().unwrap();
        let err = RunLock::acquire(dir.path(), "audit").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("is in use by pid 4242: pipeline run since 2026-12-01T00:00:00Z"),
            "{msg}"
        );
        // The refusal did not overwrite what the holder wrote.
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .starts_with("pid 4242")
        );
        drop(other);
        RunLock::acquire(dir.path(), "audit").expect("free once the holder closes it");
    }

    #[test]
    fn flock_errors_of_file_systems_without_it_are_told_from_real_errors() {
        for errno in [libc::ENOSYS, libc::EOPNOTSUPP, libc::ENOLCK] {
            assert!(flock_unsupported(&std::io::Error::from_raw_os_error(errno)));
        }
        assert!(!flock_unsupported(&std::io::Error::from_raw_os_error(
            libc::EIO
        )));
        assert!(!flock_unsupported(&std::io::Error::from_raw_os_error(
            libc::EACCES
        )));
    }

    /// Without flock: the exclusive file is the lock; a second holder is refused naming the
    /// host, pid and the file; release removes it; a dead holder's file on this host is
    /// replaced, another host's is not.
    #[test]
    fn the_exclusive_file_lock_excludes_names_its_holder_and_recovers_from_a_dead_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = acquire_exclusive(dir.path(), dir.path(), "pipeline run").unwrap();
        let note = std::fs::read_to_string(&path).unwrap();
        let host = host_name();
        assert!(
            note.starts_with(&format!(
                "host {host} pid {}: pipeline run since ",
                std::process::id()
            )),
            "{note}"
        );
        let e = acquire_exclusive(dir.path(), dir.path(), "audit")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("in use by host {host} pid {}", std::process::id()))
                && e.contains(".lock.excl; if that process is gone, remove the file"),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
        // A holder on this host that is gone (a pid far above any live one).
        std::fs::write(&path, format!("host {host} pid 4194000: audit since x\n")).unwrap();
        acquire_exclusive(dir.path(), dir.path(), "ingest")
            .expect("a dead holder's file is replaced");
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains(": ingest since ")
        );
        std::fs::write(&path, "host elsewhere pid 1: audit since x\n").unwrap();
        let e = acquire_exclusive(dir.path(), dir.path(), "ingest")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("in use by host elsewhere pid 1: audit since x"),
            "{e}"
        );
    }

    /// A `.lock` replaced by a link to a user's file is refused, and the file is untouched.
    #[cfg(unix)]
    #[test]
    fn a_lock_file_that_is_a_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let users = dir.path().join("notes.txt");
        std::fs::write(&users, "my notes\n").unwrap();
        std::os::unix::fs::symlink(&users, run.join(LOCK_FILE)).unwrap();
        let e = RunLock::acquire(&run, "pipeline run").unwrap_err();
        let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(text.contains(".lock is a symbolic link"), "{text}");
        assert_eq!(std::fs::read_to_string(&users).unwrap(), "my notes\n");
    }
}
