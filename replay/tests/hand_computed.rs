//! Small instances (3-6 attempts) whose FIFO schedule, accounting values and bounds were
//! computed by hand (the arithmetic is in the comments); the library must reproduce them.

mod common;

use bounds::lower_bounds;
use common::*;
use model::WorkloadId;
use replay::ReplayError;
use schedule::WorkloadInstance;
use schedule::accounting::{holding_hours, ideal_hours};
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};

const GIB: u64 = 1 << 30;
const NS: i64 = 1_000_000_000;

fn fifo_starts_s(inst: &WorkloadInstance) -> (Vec<(String, f64)>, f64) {
    let g = GridInstance::new(inst);
    let plan = Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>());
    let e = evaluate(&g, &plan, &mut Scratch::new()).expect("fifo schedules");
    let starts = inst
        .attempts
        .iter()
        .zip(&e.starts)
        .map(|(a, &s)| (a.attempt_id.clone(), s as f64 / 1e9))
        .collect();
    (starts, e.makespan as f64 / 1e9)
}

fn ids_starts(v: &[(&str, f64)]) -> Vec<(String, f64)> {
    v.iter().map(|(a, s)| (a.to_string(), *s)).collect()
}

/// The accounting instance: K = 2, caps never bind, 8 GPUs.
///   a: d=10, requests [1,3) [5,6) (req 3), 2 cores, 4 GiB, blobs X Y
///   b: d=4,  requests [0,2)       (req 2), 1 core,  2 GiB, blob  X
///   c: d=3,  requests [1,2)       (req 1), 1 core,  1 GiB, blob  Y
///   d: d=5,  requests [0,1) [2,4) (req 3), 2 cores, 2 GiB, blobs X Z
/// X = 1 GiB, Y = 2 GiB, Z = 0.5 GiB.
fn accounting_instance() -> WorkloadInstance {
    instance(
        WorkloadId::Deepswe,
        caps(2, 100.0, 100.0, 8),
        vec![
            // gen_start order is a, b, c, d; listed out of order on purpose.
            attempt("d", 40.0, 5.0, &[(0.0, 1.0), (2.0, 4.0)], 2.0, 2.0, &[0, 2]),
            attempt(
                "a",
                10.0,
                10.0,
                &[(1.0, 3.0), (5.0, 6.0)],
                2.0,
                4.0,
                &[0, 1],
            ),
            attempt("c", 30.0, 3.0, &[(1.0, 2.0)], 1.0, 1.0, &[1]),
            attempt("b", 20.0, 4.0, &[(0.0, 2.0)], 1.0, 2.0, &[0]),
        ],
        vec![blob("X", GIB), blob("Y", 2 * GIB), blob("Z", GIB / 2)],
    )
}

#[test]
fn fifo_concurrency_binds() {
    // K = 2: a@0 (ends 10), b@0 (ends 4); c waits for the first end (b at 4): c@4 (ends 7);
    // d: from 4, a and c run, next end is c at 7: d@7 (ends 12). Makespan 12.
    let (starts, makespan) = fifo_starts_s(&accounting_instance());
    assert_eq!(
        starts,
        ids_starts(&[("a", 0.0), ("b", 0.0), ("c", 4.0), ("d", 7.0)])
    );
    assert_eq!(makespan, 12.0);
}

#[test]
fn fifo_ram_cap_not_concurrency_delays() {
    // K = 4 (never reached: at most 3 run), CPU cap 100, RAM cap 10 GiB.
    //   a: d=6 mem 6; b: d=2 mem 3; c: d=5 mem 4; e: d=1 mem 1.
    // a@0 (6 GiB); b@0 (9 GiB); c at 0 would hold 13 > 10: waits for b's end at 2 -> 10 GiB,
    // c@2 (ends 7); e at 2 would hold 11 > 10: waits; next end is a at 6 -> c alone holds 4,
    // e@6 (ends 7). Makespan 7.
    let mk = |ram: f64| {
        instance(
            WorkloadId::Tmax,
            caps(4, 100.0, ram, 8),
            vec![
                attempt("a", 1.0, 6.0, &[], 1.0, 6.0, &[]),
                attempt("b", 2.0, 2.0, &[], 1.0, 3.0, &[]),
                attempt("c", 3.0, 5.0, &[], 1.0, 4.0, &[]),
                attempt("e", 4.0, 1.0, &[], 1.0, 1.0, &[]),
            ],
            vec![],
        )
    };
    let (starts, makespan) = fifo_starts_s(&mk(10.0));
    assert_eq!(
        starts,
        ids_starts(&[("a", 0.0), ("b", 0.0), ("c", 2.0), ("e", 6.0)])
    );
    assert_eq!(makespan, 7.0);
    // With a RAM cap that never binds, all four start at 0 (K = 4): the delay was the RAM
    // cap's, not concurrency's. Makespan = the longest, 6.
    let (starts, makespan) = fifo_starts_s(&mk(100.0));
    assert_eq!(
        starts,
        ids_starts(&[("a", 0.0), ("b", 0.0), ("c", 0.0), ("e", 0.0)])
    );
    assert_eq!(makespan, 6.0);
}

#[test]
fn fifo_cpu_cap_and_no_overtaking() {
    // K = 3, CPU cap 4. a: d=10, 3 cores; b: d=2, 2 cores; c: d=1, 1 core.
    // a@0; b would hold 5 > 4: waits for a's end, b@10; c would fit at 0 (4 cores) but may
    // not overtake b: c@10 (3 cores with b). Makespan 12.
    let inst = instance(
        WorkloadId::Tmax,
        caps(3, 4.0, 100.0, 8),
        vec![
            attempt("a", 1.0, 10.0, &[], 3.0, 1.0, &[]),
            attempt("b", 2.0, 2.0, &[], 2.0, 1.0, &[]),
            attempt("c", 3.0, 1.0, &[], 1.0, 1.0, &[]),
        ],
        vec![],
    );
    let (starts, makespan) = fifo_starts_s(&inst);
    assert_eq!(starts, ids_starts(&[("a", 0.0), ("b", 10.0), ("c", 10.0)]));
    assert_eq!(makespan, 12.0);
}

#[test]
fn fifo_ties_in_gen_start_break_by_attempt_id() {
    // Same gen_start: order by attempt_id, so "x1" runs before "x2" with K = 1.
    let inst = instance(
        WorkloadId::Tmax,
        caps(1, 10.0, 10.0, 8),
        vec![
            attempt("x2", 5.0, 3.0, &[], 1.0, 1.0, &[]),
            attempt("x1", 5.0, 2.0, &[], 1.0, 1.0, &[]),
        ],
        vec![],
    );
    let (starts, makespan) = fifo_starts_s(&inst);
    assert_eq!(starts, ids_starts(&[("x1", 0.0), ("x2", 2.0)]));
    assert_eq!(makespan, 5.0);
}

#[test]
fn accounting_ideal_values_by_hand() {
    let inst = accounting_instance();
    let g = GridInstance::new(&inst);
    let plan = Plan::from_order(&[0, 1, 2, 3]);
    let e = evaluate(&g, &plan, &mut Scratch::new()).unwrap();
    assert_eq!(e.makespan, 12 * NS);
    let ideal = ideal_hours(&g, 8, &e);
    // CPU: sum cores * (d - req) = 2*(10-3) + 1*(4-2) + 1*(3-1) + 2*(5-3) = 22 core-s.
    assert_close(ideal.cpu, 22.0 / 3600.0, "cpu ideal");
    // RAM: 4*7 + 2*2 + 1*2 + 2*2 = 38 GiB-s.
    assert_close(ideal.ram, 38.0 / 3600.0, "ram ideal");
    // GPU: shifted requests a [1,3) [5,6); b [0,2); c@4 [5,6); d@7 [7,8) [9,11).
    // Union [0,3) [5,6) [7,8) [9,11) = 3 + 1 + 1 + 2 = 7 s; 8 GPUs -> 56 GPU-s.
    assert_eq!(e.gpu_union, 7 * NS);
    assert_close(ideal.gpu, 56.0 / 3600.0, "gpu ideal");
    // Cache: X by a [0,10) b [0,4) d [7,12) -> [0,12) = 12 s * 1 GiB = 12;
    // Y by a [0,10) c [4,7) -> 10 s * 2 GiB = 20; Z by d [7,12) -> 5 s * 0.5 GiB = 2.5.
    // Total 34.5 GiB-s.
    assert_close(ideal.cache, 34.5 / 3600.0, "cache ideal");
}

#[test]
fn accounting_fifo_holding_by_hand() {
    let inst = accounting_instance();
    let g = GridInstance::new(&inst);
    let e = evaluate(&g, &Plan::from_order(&[0, 1, 2, 3]), &mut Scratch::new()).unwrap();
    let hold = holding_hours(&g, 8, &e);
    // CPU: sum cores * d = 2*10 + 1*4 + 1*3 + 2*5 = 37 core-s.
    assert_close(hold.cpu, 37.0 / 3600.0, "cpu holding");
    // RAM: 4*10 + 2*4 + 1*3 + 2*5 = 61 GiB-s.
    assert_close(hold.ram, 61.0 / 3600.0, "ram holding");
    // GPU: 8 * makespan 12 = 96 GPU-s.
    assert_close(hold.gpu, 96.0 / 3600.0, "gpu holding");
    // Cache: X first used at 0 -> 1*(12-0) = 12; Y at 0 -> 2*12 = 24; Z at 7 -> 0.5*5 = 2.5.
    assert_close(hold.cache, 38.5 / 3600.0, "cache holding");
}

#[test]
fn lower_bounds_by_hand() {
    let inst = accounting_instance();
    let g = GridInstance::new(&inst);
    let lb = lower_bounds(&g, 8);
    // CPU/RAM bounds are the ideal values.
    assert_close(lb.cpu, 22.0 / 3600.0, "cpu bound");
    assert_close(lb.ram, 38.0 / 3600.0, "ram bound");
    // GPU: sum req = 3+2+1+3 = 9, /K = 4.5 > max req 3 -> 8 * 4.5 = 36 GPU-s.
    assert_close(lb.gpu, 36.0 / 3600.0, "gpu bound");
    // Cache: X: max(max d 10, (10+4+5)/2 = 9.5) = 10 -> 10; Y: max(10, 13/2) = 10 -> 20;
    // Z: max(5, 2.5) = 5 -> 2.5. Total 32.5 GiB-s.
    assert_close(lb.cache, 32.5 / 3600.0, "cache bound");
}

#[test]
fn bounds_where_sum_over_k_dominates_and_is_attained() {
    // K = 2, four attempts of d=3 with 2 s of requests each, all using W (1 GiB).
    // GPU bound: sum req 8 / 2 = 4 > max 2 -> 8 * 4 = 32 GPU-s.
    // Cache bound: max(3, 12 / 2 = 6) = 6 -> 6 GiB-s.
    // FIFO: two at 0, two at 3, makespan 6: W is live [0,6) -> cache ideal 6 = the bound.
    // Requests [0,2) at 0 (twice) and at 3 -> union [0,2) [3,5) = 4 s -> GPU ideal 32 = bound.
    let inst = instance(
        WorkloadId::Deepswe,
        caps(2, 10.0, 10.0, 8),
        (0..4)
            .map(|i| {
                attempt(
                    &format!("p{i}"),
                    f64::from(i),
                    3.0,
                    &[(0.0, 2.0)],
                    1.0,
                    1.0,
                    &[0],
                )
            })
            .collect(),
        vec![blob("W", GIB)],
    );
    let g = GridInstance::new(&inst);
    let lb = lower_bounds(&g, 8);
    assert_close(lb.gpu, 32.0 / 3600.0, "gpu bound");
    assert_close(lb.cache, 6.0 / 3600.0, "cache bound");
    let e = evaluate(&g, &Plan::from_order(&[0, 1, 2, 3]), &mut Scratch::new()).unwrap();
    let ideal = ideal_hours(&g, 8, &e);
    assert_close(ideal.gpu, 32.0 / 3600.0, "gpu ideal");
    assert_close(ideal.cache, 6.0 / 3600.0, "cache ideal");
    // CPU/RAM ideal: 4 * 1 * (3 - 2) = 4 unit-s.
    assert_close(ideal.cpu, 4.0 / 3600.0, "cpu ideal");
}

#[test]
fn whole_stage_on_the_accounting_instance() {
    // replay_input runs FIFO, accounting, bounds, the search and the validator.
    let input = replay::ReplayInput {
        workloads: vec![accounting_instance()],
    };
    let search = model::config::SearchConfig {
        seed: 1,
        order: vec![WorkloadId::Deepswe],
        budget: model::config::SearchBudget {
            perturbations: 8,
            perturbation_spread: 0.25,
            local_moves: 16,
            group_starts: 4,
            ..Default::default()
        }
        .into(),
        lp_bounds: Default::default(),
        profile: Default::default(),
        effort: Default::default(),
        pattern_bound: Default::default(),
    };
    let (report, failures) =
        replay::replay_input(&input, &search, &replay::ReplayOptions { threads: Some(1) }).unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    let w = &report.workloads[0];
    assert_eq!(w.deadline_s, 12.0);
    assert_close(w.fifo_ideal.gpu, 56.0 / 3600.0, "fifo gpu ideal");
    assert_close(w.fifo_holding.cache, 38.5 / 3600.0, "fifo cache holding");
    assert_close(w.lower_bounds.cache, 32.5 / 3600.0, "cache bound");
    let names: Vec<&str> = w.selected.iter().map(|s| s.schedule).collect();
    assert_eq!(names, replay::SCHEDULE_NAMES);
    assert!(w.selected.iter().all(|s| s.validated));
    // Priority orders alone evaluate 7 candidates; the FIFO is candidate 0.
    assert_eq!(w.selected[0].candidate, 0);
    assert_eq!(w.selected[0].found_by, "priority_order:fifo/serial");
    assert!(w.best_found.gpu <= w.fifo_ideal.gpu && w.best_found.gpu >= w.lower_bounds.gpu);
}

#[test]
fn an_attempt_over_a_cap_is_refused_by_name() {
    let inst = instance(
        WorkloadId::Tmax,
        caps(4, 27.0, 66.0, 8),
        vec![
            attempt("fine", 1.0, 5.0, &[], 4.0, 8.0, &[]),
            attempt("too-big", 2.0, 5.0, &[], 2.0, 70.0, &[]),
        ],
        vec![],
    );
    let e = ReplayError::from(inst.check_quotas_fit().unwrap_err());
    assert!(matches!(
        e,
        ReplayError::Instance(schedule::InstanceError::QuotaExceedsCap { .. })
    ));
    assert_eq!(
        e.to_string(),
        "tmax attempt `too-big` can never be placed: its ram_gib quota 70 exceeds the cap 66 of workloads.tmax.replay"
    );
}

#[test]
fn unsorted_requests_are_refused_by_name() {
    let e = WorkloadInstance::new(
        WorkloadId::Tmax,
        caps(4, 27.0, 66.0, 8),
        vec![attempt(
            "r",
            1.0,
            10.0,
            &[(5.0, 6.0), (1.0, 2.0)],
            1.0,
            1.0,
            &[],
        )],
        vec![],
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("attempt `r`") && e.contains("must be merged, sorted and disjoint"),
        "{e}"
    );
}

#[test]
fn an_empty_workload_replays_to_zeros() {
    let input = replay::ReplayInput {
        workloads: vec![instance(
            WorkloadId::Tmax,
            caps(16, 27.0, 66.0, 8),
            vec![],
            vec![],
        )],
    };
    let search = model::config::SearchConfig {
        seed: 3,
        order: vec![WorkloadId::Tmax],
        budget: model::config::SearchBudget::default().into(),
        lp_bounds: Default::default(),
        profile: Default::default(),
        effort: Default::default(),
        pattern_bound: Default::default(),
    };
    let (report, failures) =
        replay::replay_input(&input, &search, &replay::ReplayOptions { threads: Some(1) }).unwrap();
    assert!(failures.is_empty());
    let w = &report.workloads[0];
    assert_eq!(w.deadline_s, 0.0);
    assert_eq!(w.lower_bounds, w.fifo_holding);
    assert_eq!(w.best_found.gpu, 0.0);
    assert!(
        w.selected
            .iter()
            .all(|s| s.validated && s.makespan_s == 0.0)
    );
}
