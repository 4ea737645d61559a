//! The study's shape, stated once: per workload, its tasks, attempts per task, the attempts
//! its cohort audit finds and includes, the median attempt duration, its repositories, and
//! when its census began. The demo's corpus generator (`demo::plan`, which writes archives)
//! and `schedule::synthetic` (which builds replay instances directly, for benches and tests)
//! both take their numbers from here.

use crate::WorkloadId;

/// One workload of the study.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StudyWorkload {
    /// Tasks of the census (tmax: 255, twelve of them tried twice).
    pub tasks: usize,
    /// Attempts per task.
    pub attempts_per_task: usize,
    /// Tasks tried once more (tmax: every 21st task, twelve in all).
    pub repeated_tasks: usize,
    /// Attempts the cohort audit finds (tmax: 267 trials; deepswe: 2,000 census attempts).
    pub attempts: usize,
    /// Attempts the cohort includes (tmax 253, deepswe 1,998).
    pub included: usize,
    /// Repositories whose environment layers attempts share (tmax: none).
    pub repos: usize,
    /// Median attempt duration, seconds.
    pub median_duration_s: f64,
    /// The census's first attempt, epoch seconds.
    pub epoch_s: u64,
}

/// The study's numbers for a workload.
pub const fn study(w: WorkloadId) -> StudyWorkload {
    match w {
        WorkloadId::Tmax => StudyWorkload {
            tasks: 255,
            attempts_per_task: 1,
            repeated_tasks: 12,
            attempts: 267,
            included: 253,
            repos: 0,
            median_duration_s: 900.0,
            // 2025-09-01T00:00:00Z
            epoch_s: 1_756_684_800,
        },
        WorkloadId::Deepswe => StudyWorkload {
            tasks: 500,
            attempts_per_task: 4,
            repeated_tasks: 0,
            attempts: 2_000,
            included: 1_998,
            repos: 40,
            median_duration_s: 1200.0,
            // 2025-09-10T00:00:00Z
            epoch_s: 1_757_462_400,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_census_counts_follow_from_tasks_and_attempts() {
        for w in WorkloadId::ALL {
            let s = study(w);
            assert_eq!(
                s.tasks * s.attempts_per_task + s.repeated_tasks,
                s.attempts,
                "{w}"
            );
            assert!(s.included <= s.attempts, "{w}");
        }
    }
}
