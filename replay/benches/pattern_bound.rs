//! Benchmark and diagnostic of the GPU pattern bound (docs/BOUNDS.md, item 7) on a run directory:
//! per workload, its wall time, the process's peak resident memory after it, its status and
//! value beside the request-time bounds, and, on the run's selected schedules
//! (`schedules.parquet`), how much request overlap the attempts really get from their
//! partners (`sum_i w_i X_i`) against the certified caps (`sum_i w_i B_i`), and the union
//! against the Jensen sum with the real `X_i` (the most any cap on `X_i` can give). Run after
//! `pipeline run`: `cargo bench -p replay --bench pattern_bound -- [PIPELINE_YAML]`
//! (default `pipeline.yaml` of the workspace root, i.e. the demo run in runs/demo).

use bounds::pattern::{INTERIOR_POINTS, Weighting, partner_overlap_caps, pattern_bound};
use bounds::strong::strong_bounds;
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate, evaluate_starts};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// Peak resident set of this process so far, MiB (Linux; 0 elsewhere).
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|k| k.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// `X_i = sum_{j != i} w_j |R_i ∩ R_j|` of every attempt for one schedule, by a sweep over
/// all shifted requests (weights `w`).
fn partner_overlaps(g: &GridInstance, starts: &[i64], w: &[f64]) -> Vec<f64> {
    // Events (time, +/-1, attempt); between events, the pending weight W is constant and
    // each pending attempt i collects (W - w_i) * dt.
    let mut ev: Vec<(i64, i8, usize)> = Vec::new();
    for (j, &s) in starts.iter().enumerate() {
        for k in g.request_first[j]..g.request_first[j + 1] {
            ev.push((s + g.request_start[k], 1, j));
            ev.push((s + g.request_end[k], -1, j));
        }
    }
    ev.sort_unstable();
    let mut pending: BTreeMap<usize, ()> = BTreeMap::new();
    let mut x = vec![0.0f64; g.len()];
    let mut weight = 0.0f64;
    let mut last = i64::MIN;
    for (t, kind, j) in ev {
        if last != i64::MIN && t > last {
            let dt = (t - last) as f64;
            for &i in pending.keys() {
                x[i] += (weight - w[i]) * dt;
            }
        }
        last = t;
        if kind > 0 {
            pending.insert(j, ());
            weight += w[j];
        } else {
            pending.remove(&j);
            weight -= w[j];
        }
    }
    x
}

fn main() {
    let yaml = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../pipeline.yaml")));
    let cfg = model::load_config(&yaml).expect("pipeline.yaml");
    let input = replay::input::load_input(&cfg).expect("audited run directory");
    let pcfg = &cfg.config.search.pattern_bound;
    // PATTERN_POINTS=k: the interior instants per attempt of the diagnostics below.
    let points: u32 = std::env::var("PATTERN_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(INTERIOR_POINTS);
    let schedules = frames::read_frame(
        &cfg.run_dir.join("schedules.parquet"),
        "schedules",
        model::run_dir::FRAME_SCHEMA_VERSION,
    )
    .ok();
    // PATTERN_WORKLOAD=name: only that workload.
    let only = std::env::var("PATTERN_WORKLOAD").ok();
    for inst in &input.workloads {
        if only.as_deref().is_some_and(|w| w != inst.workload.as_str()) {
            continue;
        }
        let g = GridInstance::new(inst);
        let gpus = inst.caps.gpus;
        let fifo = evaluate(
            &g,
            &Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>()),
            &mut Scratch::new(),
        )
        .expect("fifo");
        let strong = strong_bounds(&g, gpus, fifo.makespan);
        let rss0 = peak_rss_mib();
        let t = Instant::now();
        let p = pattern_bound(&g, gpus, pcfg);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{}: pattern bound {:.3} h ({:?}, weighting {:?}; by weighting {:?}) in {:.2} s, peak RSS {:.0} MiB (before {:.0} MiB); request-time value of the same sum {:.3} h; items 2-4 best {:.3} h; attempts swept {}/{}, breakpoints {}",
            inst.workload,
            p.bound_h,
            p.status,
            p.weighting,
            p.by_weighting_h,
            secs,
            peak_rss_mib(),
            rss0,
            p.request_time_h,
            strong.gpu.best,
            p.attempts_swept,
            p.attempts,
            p.pair_events,
        );
        // Diagnostic (not a bound): with PATTERN_SAMPLE=n, sweep every partner of n attempts
        // spread evenly over the index order and estimate what a complete sweep would give
        // (the sample's ratio of pattern terms to request-time terms, times the whole
        // request-time sum). The sample's own partial sum is a valid bound.
        if let Some(n) = std::env::var("PATTERN_SAMPLE")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            let with_req: Vec<usize> = (0..g.len()).filter(|&j| g.request_len[j] > 0).collect();
            let step = (with_req.len() / n.max(1)).max(1);
            let mut swept = vec![false; g.len()];
            for &j in with_req.iter().step_by(step).take(n) {
                swept[j] = true;
            }
            let t = Instant::now();
            let caps = partner_overlap_caps(&g, &swept, pcfg.alpha_steps, points);
            let secs = t.elapsed().as_secs_f64();
            let full = partner_overlap_caps(&g, &vec![false; g.len()], 0, 0);
            for (x, wt) in Weighting::ALL.iter().enumerate() {
                let w: Vec<f64> = match wt {
                    Weighting::Count => vec![1.0; g.len()],
                    Weighting::Cores => g.cores.iter().map(|&c| c as f64).collect(),
                    Weighting::Mem => g.mem.iter().map(|&m| m as f64).collect(),
                };
                let term = |i: usize, cap: f64| {
                    let r = g.request_len[i] as f64;
                    if r > 0.0 {
                        w[i] * r * r / (w[i] * r + cap)
                    } else {
                        0.0
                    }
                };
                let (mut s_pat, mut s_triv, mut all_triv, mut partial) = (0.0, 0.0, 0.0, 0.0);
                for i in 0..g.len() {
                    let tt = term(i, full[x][i]);
                    all_triv += tt;
                    if swept[i] {
                        s_pat += term(i, caps[x][i]);
                        s_triv += tt;
                        partial += term(i, caps[x][i]);
                    } else {
                        partial += tt;
                    }
                }
                let h = |ns: f64| f64::from(gpus) * ns / 3.6e12;
                println!(
                    "  sample {} attempts ({wt:?}, {secs:.1} s): request-time sum {:.3} h, estimated complete sweep {:.3} h (sample ratio {:.3}), valid partial bound {:.3} h",
                    swept.iter().filter(|&&s| s).count(),
                    h(all_triv),
                    h(all_triv * s_pat / s_triv),
                    s_pat / s_triv,
                    h(partial),
                );
            }
        }
        let Some(df) = &schedules else { continue };
        // The run's selected schedules of this workload.
        let col = |name: &str| df.column(name).expect("column").clone();
        let (wl, sch, aid, st) = (
            col("workload"),
            col("schedule"),
            col("attempt_id"),
            col("start_s"),
        );
        let (wl, sch, aid, st) = (
            wl.str().expect("str").clone(),
            sch.str().expect("str").clone(),
            aid.str().expect("str").clone(),
            st.f64().expect("f64").clone(),
        );
        let index: BTreeMap<&str, usize> = inst
            .attempts
            .iter()
            .enumerate()
            .map(|(j, a)| (a.attempt_id.as_str(), j))
            .collect();
        let mut by_schedule: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for r in 0..df.height() {
            if wl.get(r) != Some(inst.workload.as_str()) {
                continue;
            }
            let (Some(s), Some(a), Some(x)) = (sch.get(r), aid.get(r), st.get(r)) else {
                continue;
            };
            let v = by_schedule
                .entry(s.to_string())
                .or_insert_with(|| vec![0; g.len()]);
            v[index[a]] = schedule::evaluate::to_ns(x);
        }
        let swept: Vec<bool> = vec![true; g.len()];
        let caps = if p.attempts_swept == p.attempts {
            Some(partner_overlap_caps(&g, &swept, pcfg.alpha_steps, points))
        } else {
            None
        };
        for (name, starts) in &by_schedule {
            if name != "fifo" && name != "best_gpu" {
                continue;
            }
            let e = evaluate_starts(&g, starts, &mut Scratch::new());
            let union_h = f64::from(gpus) * e.gpu_union as f64 / 3.6e12;
            for (x, wt) in Weighting::ALL.iter().enumerate() {
                let w: Vec<f64> = match wt {
                    Weighting::Count => vec![1.0; g.len()],
                    Weighting::Cores => g.cores.iter().map(|&c| c as f64).collect(),
                    Weighting::Mem => g.mem.iter().map(|&m| m as f64).collect(),
                };
                let real = partner_overlaps(&g, starts, &w);
                let wx: f64 = (0..g.len()).map(|i| w[i] * real[i]).sum();
                let jensen: f64 = (0..g.len())
                    .map(|i| {
                        let r = g.request_len[i] as f64;
                        if r > 0.0 && w[i] > 0.0 {
                            w[i] * r * r / (w[i] * r + real[i])
                        } else {
                            0.0
                        }
                    })
                    .sum();
                let certified = caps
                    .as_ref()
                    .map(|c| (0..g.len()).map(|i| w[i] * c[x][i]).sum::<f64>() / wx);
                println!(
                    "  {name} ({wt:?}): union {union_h:.3} h; Jensen sum with its own X_i {:.3} h; certified caps / real overlap {}",
                    f64::from(gpus) * jensen / 3.6e12,
                    certified.map_or("(not all swept)".to_string(), |r| format!("{r:.2}")),
                );
            }
        }
    }
}
