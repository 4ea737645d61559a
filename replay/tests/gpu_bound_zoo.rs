//! On every named instance of the search zoo (demo/zoo.yaml, docs/ZOO.md)
//! the GPU pattern bound, and the best valid GPU bound it is folded into, never exceed the
//! best schedule the search finds (nor FIFO's).
//!
//! The full zoo (16 instances, up to 5,040 attempts each) takes the better part of an hour
//! through the chain, too slow for the suite, so this test takes **every named shape at a
//! reduced attempt count**: the instance's own generator seed and knobs (durations, request
//! timing, quotas, blobs) at the demo's small scale (its task counts: about 24 tmax and 39
//! deepswe attempts), planned in memory by the demo generator
//! (`demo::zoo`), with K scaled by the same factor as the attempt count (at least 4) and
//! the CPU and RAM caps by the same factor as K (never below the largest quota), so the caps
//! bind about as tightly relative to K as on the full instance. The planned census attempts become the replay's input directly (duration from
//! the generation start to completion, requests clipped to it and merged): the audit's
//! exclusions and anomaly clipping are skipped, which does not matter for a bound that must
//! hold on any instance. The full-size check is the zoo bench (`scripts/search-zoo`,
//! docs/SEARCH.md), whose certified gaps are the best found over this same best bound.

use bounds::pattern::{PatternStatus, pattern_bound};
use demo::plan::PlannedAttempt;
use model::config::{PatternBoundConfig, ReplayCaps, SearchBudget, SearchConfig};
use model::{RunKind, WorkloadId};
use replay::{ReplayInput, ReplayOptions};
use schedule::{AttemptInput, BlobInput, WorkloadInstance};
use std::collections::BTreeMap;

/// Tasks kept per workload: the small scale's (tmax 23, one of them twice; deepswe 10 x 4),
/// so that the small scale's injected anomalies fit.
const TASKS: [(WorkloadId, usize); 2] = [(WorkloadId::Tmax, 23), (WorkloadId::Deepswe, 10)];

/// The census attempts of `w` in a plan, as replay input (requests clipped to the attempt
/// and merged where they touch or overlap).
fn to_instance(attempts: &[&PlannedAttempt], w: WorkloadId, caps: ReplayCaps) -> WorkloadInstance {
    let mut digests: BTreeMap<String, u64> = BTreeMap::new();
    for a in attempts {
        for b in &a.blobs {
            digests.insert(b.digest.clone(), b.compressed_bytes);
        }
    }
    let index: BTreeMap<&str, u32> = digests
        .keys()
        .enumerate()
        .map(|(i, d)| (d.as_str(), i as u32))
        .collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let inputs = attempts
        .iter()
        .map(|a| {
            let d_ns = a.completed_ns.expect("completed") - a.gen_start_ns;
            let d = d_ns as f64 / 1e9;
            let mut req: Vec<(f64, f64)> = a
                .requests
                .iter()
                .filter_map(|r| {
                    let s = r.start_ns?.checked_sub(a.gen_start_ns)?;
                    let e = (s + r.elapsed_ns?).min(d_ns);
                    (e > s).then_some((s as f64 / 1e9, e as f64 / 1e9))
                })
                .collect();
            req.sort_by(|x, y| x.0.total_cmp(&y.0));
            let mut merged: Vec<(f64, f64)> = Vec::new();
            for (s, e) in req {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            // Attempt ids repeat across a task's retries in some shapes: keep them unique.
            let n = seen.entry(a.attempt_id.clone()).or_insert(0);
            *n += 1;
            let mut blobs: Vec<u32> = a.blobs.iter().map(|b| index[b.digest.as_str()]).collect();
            blobs.sort_unstable();
            blobs.dedup();
            AttemptInput {
                attempt_id: format!("{}#{}", a.attempt_id, n),
                task_id: a.task_id.clone(),
                gen_start: a.gen_start_ns as f64 / 1e9,
                duration_s: d,
                requests: merged,
                cores: a.quota.cores,
                mem_gib: a.quota.mem_gib,
                blobs,
            }
        })
        .collect();
    let blobs = digests
        .into_iter()
        .map(|(digest, compressed_bytes)| BlobInput {
            digest,
            compressed_bytes,
        })
        .collect();
    WorkloadInstance::new(w, caps, inputs, blobs, None).expect("valid instance")
}

fn search_config(w: WorkloadId) -> SearchConfig {
    SearchConfig {
        seed: 19,
        order: vec![w],
        budget: SearchBudget {
            perturbations: 8,
            local_moves: 24,
            group_starts: 6,
            duty_orders: 6,
            blob_group_orders: 8,
            lns_rounds: 2,
            lns_chains: 2,
            lns_moves: 60,
            ..Default::default()
        }
        .into(),
        lp_bounds: Default::default(),
        profile: Default::default(),
        effort: Default::default(),
        pattern_bound: PatternBoundConfig::default(),
    }
}

#[test]
fn pattern_bound_is_below_the_best_schedule_on_every_zoo_shape() {
    let zoo = demo::zoo::zoo().expect("zoo");
    assert!(zoo.len() >= 16, "every named instance");
    let mut checked = 0;
    let mut rows = Vec::new();
    for inst in zoo {
        let mut small = inst.clone();
        small.scale = demo::Scale::Small;
        for (w, tasks) in TASKS {
            let k = match w {
                WorkloadId::Tmax => &mut small.knobs.tmax,
                WorkloadId::Deepswe => &mut small.knobs.deepswe,
            };
            k.tasks = Some(tasks);
        }
        let plan = small.plan();
        let stats = inst.stats();
        for w in WorkloadId::ALL.into_iter().filter(|w| inst.knobs.has(*w)) {
            let full = stats.iter().find(|s| s.workload == w).unwrap();
            let attempts: Vec<&PlannedAttempt> = plan
                .attempts
                .iter()
                .filter(|a| a.workload == w && a.run == RunKind::Census)
                .filter(|a| a.completed_ns.is_some_and(|c| c > a.gen_start_ns))
                .collect();
            let f = attempts.len() as f64 / full.attempts as f64;
            let max_c = attempts.iter().map(|a| a.quota.cores).fold(0.0, f64::max);
            let max_m = attempts.iter().map(|a| a.quota.mem_gib).fold(0.0, f64::max);
            let k = ((f64::from(full.caps.concurrency) * f).round() as u32).max(4);
            let kf = f64::from(k) / f64::from(full.caps.concurrency);
            let caps = ReplayCaps {
                concurrency: k,
                cpu_cores: (full.caps.cpu_cores * kf).round().max(max_c),
                ram_gib: (full.caps.ram_gib * kf).round().max(max_m),
                gpus: full.caps.gpus,
            };
            let wi = to_instance(&attempts, w, caps);
            let g = schedule::evaluate::GridInstance::new(&wi);
            let p = pattern_bound(&g, caps.gpus, &PatternBoundConfig::default());
            assert_eq!(p.status, PatternStatus::Complete, "{} {w}", inst.name);
            let input = ReplayInput {
                workloads: vec![wi],
            };
            let (report, failures) = replay::replay_input(
                &input,
                &search_config(w),
                &ReplayOptions { threads: Some(2) },
            )
            .expect("replay");
            assert!(failures.is_empty(), "{} {w}: {failures:?}", inst.name);
            let r = &report.workloads[0];
            let best = r.best_found.gpu;
            let ok = |b: f64| b <= best * (1.0 + 1e-9);
            assert_eq!(r.strong_bounds.gpu_pattern, p, "{} {w}", inst.name);
            assert!(
                ok(p.bound_h),
                "{} {w}: pattern bound {} > best found {best}",
                inst.name,
                p.bound_h
            );
            assert!(
                ok(r.best_bounds.gpu),
                "{} {w}: best bound {} > best found {best}",
                inst.name,
                r.best_bounds.gpu
            );
            assert!(r.best_bounds.gpu >= p.bound_h, "folded into best_bound_h");
            assert!(p.bound_h <= r.fifo_ideal.gpu * (1.0 + 1e-9));
            // The best bound without step 3 (the interior instants) of docs/BOUNDS.md item 7.
            let sg = &r.strong_bounds.gpu;
            let before = [
                r.lower_bounds.gpu,
                sg.machine,
                sg.cpu_energy,
                sg.ram_energy,
                sg.compulsory,
                r.lp_bounds.gpu.bound_h.unwrap_or(0.0),
                p.ends_only_h,
            ]
            .into_iter()
            .fold(0.0, f64::max);
            assert!(before <= r.best_bounds.gpu);
            rows.push(format!(
                "| {} | {} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.1}% | {:.1}% |",
                inst.name,
                w.as_str(),
                r.attempts,
                caps.concurrency,
                p.request_time_h,
                before,
                r.best_bounds.gpu,
                best,
                (best / before - 1.0) * 100.0,
                (best / r.best_bounds.gpu - 1.0) * 100.0
            ));
            checked += 1;
        }
    }
    // Every instance has both workloads except deepswe-5000 (deepswe alone).
    assert_eq!(checked, 2 * zoo.len() - 1);
    for r in rows {
        println!("{r}");
    }
}
