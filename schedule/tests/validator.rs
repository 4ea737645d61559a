//! The independent validator rejects broken schedules with clear messages (asserted word
//! for word) and accepts the correct FIFO schedule with the hand-computed values.

use model::WorkloadId;
use schedule::WorkloadInstance;
use schedule::hand::*;
use schedule::reference::{ClaimedValues, ScheduleRow, independent_fifo, validate_schedule};

const GIB: u64 = 1 << 30;

/// K = 2, 8 GPUs, RAM cap 10 GiB; FIFO: a@0 b@0 c@4 d@7, makespan 12 (see hand_computed).
fn inst() -> WorkloadInstance {
    instance(
        WorkloadId::Deepswe,
        caps(2, 100.0, 10.0, 8),
        vec![
            attempt(
                "a",
                10.0,
                10.0,
                &[(1.0, 3.0), (5.0, 6.0)],
                2.0,
                4.0,
                &[0, 1],
            ),
            attempt("b", 20.0, 4.0, &[(0.0, 2.0)], 1.0, 2.0, &[0]),
            attempt("c", 30.0, 3.0, &[(1.0, 2.0)], 1.0, 1.0, &[1]),
            attempt("d", 40.0, 5.0, &[(0.0, 1.0), (2.0, 4.0)], 2.0, 2.0, &[0, 2]),
        ],
        vec![blob("X", GIB), blob("Y", 2 * GIB), blob("Z", GIB / 2)],
    )
}

fn row(id: &str, start: f64, end: f64) -> ScheduleRow {
    ScheduleRow {
        attempt_id: id.to_string(),
        start_s: start,
        end_s: end,
    }
}

fn fifo_rows() -> Vec<ScheduleRow> {
    vec![
        row("a", 0.0, 10.0),
        row("b", 0.0, 4.0),
        row("c", 4.0, 7.0),
        row("d", 7.0, 12.0),
    ]
}

fn problems(rows: &[ScheduleRow], deadline: f64) -> Vec<String> {
    validate_schedule(&inst(), "test", rows, deadline, None)
        .expect_err("must be rejected")
        .problems
}

#[test]
fn accepts_fifo_and_recomputes_the_hand_values() {
    let v = validate_schedule(&inst(), "fifo", &fifo_rows(), 12.0, None).unwrap();
    assert_eq!(v.makespan_s, 12.0);
    assert_close(v.cpu_h, 22.0 / 3600.0, "cpu");
    assert_close(v.ram_h, 38.0 / 3600.0, "ram");
    assert_close(v.gpu_h, 56.0 / 3600.0, "gpu");
    assert_close(v.cache_h, 34.5 / 3600.0, "cache");
    let (starts, makespan) = independent_fifo(&inst());
    assert_eq!(starts, vec![0, 0, 4_000_000_000, 7_000_000_000]);
    assert_eq!(makespan, 12_000_000_000);
}

#[test]
fn rejects_a_missing_attempt() {
    let mut rows = fifo_rows();
    rows.remove(2);
    assert_eq!(
        problems(&rows, 12.0),
        vec!["attempt `c` is missing from the schedule"]
    );
}

#[test]
fn rejects_a_duplicated_attempt() {
    let mut rows = fifo_rows();
    rows.push(row("b", 7.0, 11.0));
    assert_eq!(
        problems(&rows, 12.0),
        vec!["attempt `b` appears 2 times (expected exactly once)"]
    );
}

#[test]
fn rejects_an_unknown_attempt() {
    let mut rows = fifo_rows();
    rows.push(row("zzz", 0.0, 1.0));
    assert_eq!(
        problems(&rows, 12.0),
        vec!["attempt `zzz` is not an included attempt of deepswe"]
    );
}

#[test]
fn rejects_a_changed_duration() {
    let mut rows = fifo_rows();
    rows[3] = row("d", 7.0, 13.0);
    assert_eq!(
        problems(&rows, 13.0),
        vec![
            "attempt `d` runs 6.000000000 s (from 7 s to 13 s) but its fixed duration is 5.000000000 s"
        ]
    );
}

#[test]
fn rejects_an_interval_ending_before_it_starts() {
    let mut rows = fifo_rows();
    rows[2] = row("c", 4.0, 1.0);
    let p = problems(&rows, 12.0);
    assert_eq!(p[0], "attempt `c` ends at 1 s, before it starts at 4 s");
}

#[test]
fn rejects_a_ram_cap_overrun() {
    // K = 4 so only the RAM cap can break: with a cap of 6 GiB, a and b at 0 hold 6 GiB
    // (fits exactly) and c joining them makes 7 GiB.
    let mut tight = inst();
    tight.caps.concurrency = 4;
    tight.caps.ram_gib = 6.0;
    let rows = vec![
        row("a", 0.0, 10.0),
        row("b", 0.0, 4.0),
        row("c", 0.0, 3.0),
        row("d", 10.0, 15.0),
    ];
    let f = validate_schedule(&tight, "test", &rows, 15.0, None).unwrap_err();
    assert_eq!(
        f.problems,
        vec!["RAM cap exceeded at t=0 s: running attempts hold 7 GiB > cap 6 GiB (`a`, `b`, `c`)"]
    );
    assert_eq!(
        f.to_string(),
        "deepswe/test: RAM cap exceeded at t=0 s: running attempts hold 7 GiB > cap 6 GiB (`a`, `b`, `c`)"
    );
}

#[test]
fn rejects_a_cpu_cap_and_a_concurrency_overrun() {
    let mut tight = inst();
    tight.caps.cpu_cores = 4.0;
    let rows = vec![
        row("a", 0.0, 10.0),
        row("b", 0.0, 4.0),
        row("c", 0.0, 3.0),
        row("d", 10.0, 15.0),
    ];
    let f = validate_schedule(&tight, "test", &rows, 15.0, None).unwrap_err();
    // 2 + 1 + 1 = 4 cores fit a cap of 4 exactly: only concurrency (3 > K = 2) is broken.
    assert_eq!(
        f.problems,
        vec!["concurrency exceeded at t=0 s: 3 attempts run > K=2 (`a`, `b`, `c`...)"]
    );
    tight.caps.cpu_cores = 3.5;
    let f = validate_schedule(&tight, "test", &rows, 15.0, None).unwrap_err();
    assert_eq!(
        f.problems,
        vec![
            "concurrency exceeded at t=0 s: 3 attempts run > K=2 (`a`, `b`, `c`...)",
            "CPU cap exceeded at t=0 s: running attempts hold 4 cores > cap 3.5 (`a`, `b`, `c`)"
        ]
    );
}

#[test]
fn rejects_a_deadline_overrun() {
    let mut rows = fifo_rows();
    rows[3] = row("d", 8.0, 13.0);
    assert_eq!(
        problems(&rows, 12.0),
        vec!["attempt `d` ends at 13 s, after the deadline D=12 s"]
    );
}

#[test]
fn rejects_values_that_disagree_with_the_search() {
    let claimed = ClaimedValues {
        cpu_h: 22.0 / 3600.0,
        ram_h: 38.0 / 3600.0,
        gpu_h: 57.0 / 3600.0,
        cache_h: 34.5 / 3600.0,
    };
    let f = validate_schedule(&inst(), "fifo", &fifo_rows(), 12.0, Some(claimed)).unwrap_err();
    assert_eq!(f.problems.len(), 1);
    assert!(
        f.problems[0].starts_with("GPU ideal value: the search claims 0.01583"),
        "{}",
        f.problems[0]
    );
}

#[test]
fn accepts_a_feasible_schedule_that_no_list_schedule_produces() {
    // c waits 1 s after a slot frees at 4 s (a list schedule would start it at 4 s):
    // concurrency and both caps are checked at every instant, not by replaying an order.
    let rows = vec![
        row("a", 0.0, 10.0),
        row("b", 0.0, 4.0),
        row("c", 5.0, 8.0),
        row("d", 8.0, 13.0),
    ];
    let v = validate_schedule(&inst(), "start_times", &rows, 13.0, None).unwrap();
    assert_eq!(v.makespan_s, 13.0);
    // The same shape with c starting at 3 s overlaps a and b: three attempts > K = 2.
    let mut bad = rows.clone();
    bad[2] = row("c", 3.0, 6.0);
    assert_eq!(
        validate_schedule(&inst(), "start_times", &bad, 13.0, None)
            .unwrap_err()
            .problems,
        vec!["concurrency exceeded at t=3 s: 3 attempts run > K=2 (`a`, `b`, `c`...)"]
    );
}

/// Far from time 0 (here 10^7 s, 116 days, where f64 seconds are 1.86 ns apart) a row's
/// `end_s - start_s` read back onto the nanosecond grid is off by a few ns: the fixed
/// duration check allows the values' f64 spacing there (none where every nanosecond is
/// representable), and still refuses a real error, far and near.
#[test]
fn far_times_pass_within_the_f64_spacing_and_real_errors_still_fail() {
    let one = instance(
        WorkloadId::Deepswe,
        caps(2, 100.0, 10.0, 8),
        vec![attempt(
            "a",
            10.0,
            3.000000239,
            &[(1.0, 2.0)],
            1.0,
            1.0,
            &[0],
        )],
        vec![blob("X", GIB)],
    );
    let d_ns = 3_000_000_239i64;
    let mut off_grid = 0;
    for k in 0..200i64 {
        // Written as the replay writes them: integer ns over 1e9.
        let s_ns = 10_000_000_000_000_000 + 7 * k + 1;
        let (s, e) = (s_ns as f64 / 1e9, (s_ns + d_ns) as f64 / 1e9);
        if (e * 1e9).round() as i64 - (s * 1e9).round() as i64 != d_ns {
            off_grid += 1;
        }
        validate_schedule(&one, "far", &[row("a", s, e)], e, None)
            .unwrap_or_else(|f| panic!("k = {k}: {:?}", f.problems));
    }
    assert!(off_grid > 0, "the shifts must exercise the rounding");
    let far = validate_schedule(&one, "far", &[row("a", 1e7, 1e7 + 3.000001239)], 2e7, None)
        .expect_err("1 us too long")
        .problems;
    assert!(
        // 1 us over, read back within the 2 ns spacing there.
        far[0].contains("runs 3.00000123") && far[0].contains("fixed duration is 3.000000239 s"),
        "{far:?}"
    );
    let near = validate_schedule(&one, "near", &[row("a", 10.0, 13.000000240)], 20.0, None)
        .expect_err("1 ns too long")
        .problems;
    assert_eq!(
        near,
        vec![
            "attempt `a` runs 3.000000240 s (from 10 s to 13.00000024 s) but its fixed duration is 3.000000239 s"
        ]
    );
    assert_eq!(schedule::reference::duration_slack_ns(10.0, 13.0), 0);
    assert_eq!(schedule::reference::duration_slack_ns(1e7, 1e7 + 3.0), 8);
}
