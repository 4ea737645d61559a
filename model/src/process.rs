//! This machine's processes: whether one named by its id is still running (the one test
//! behind every sweep of a killed run's leftovers and every stale lock file), and the host
//! name that makes a process id meaningful to another machine.

use std::path::Path;

/// Whether the process `pid` is running on this machine. A zombie (exited, not yet reaped
/// by its parent: state `Z` in `/proc/PID/stat`) is not running: it writes nothing more.
/// Where this cannot be known (no `/proc`), every process counts as running, so nothing is
/// removed.
pub fn is_running(pid: u32) -> bool {
    let proc_root = Path::new("/proc");
    if !proc_root.join("self").exists() {
        return true;
    }
    match std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) {
        Ok(stat) => process_state(&stat) != Some('Z'),
        Err(_) => proc_root.join(pid.to_string()).exists(),
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`, else `HOSTNAME`).
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
}

/// The state letter of a `/proc/PID/stat` line (the field after the parenthesised command
/// name, which may itself hold spaces and parentheses).
fn process_state(stat: &str) -> Option<char> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_process_is_not_running() {
        // A child that has exited but is not yet waited for stays a zombie.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let stat = Path::new("/proc").join(pid.to_string()).join("stat");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| process_state(&s))
            != Some('Z')
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!is_running(pid));
        child.wait().unwrap();
        assert!(is_running(std::process::id()));
        assert_eq!(process_state("12 (a) b) S 1 2"), Some('S'));
    }
}
