//! Benchmark of the HiGHS LP bounds on a run directory's audited attempts: per workload,
//! the wall time, rounds, columns, status and value of the GPU configuration LP and the
//! cache fluid LP, beside the combinatorial bounds. Run after `pipeline run`:
//! `cargo bench -p replay --bench lp_bounds -- [PIPELINE_YAML]` (default `pipeline.yaml`
//! of the workspace root, i.e. the demo run in runs/demo).

use bounds::strong::{blob_bound_parts, strong_bounds};
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let yaml = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../pipeline.yaml")));
    let cfg = model::load_config(&yaml).expect("pipeline.yaml");
    let input = replay::input::load_input(&cfg).expect("audited run directory");
    let lp_cfg = &cfg.config.search.lp_bounds;
    for inst in &input.workloads {
        let g = GridInstance::new(inst);
        let plan = Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>());
        let fifo = evaluate(&g, &plan, &mut Scratch::new()).expect("fifo");
        let d = fifo.makespan;
        let strong = strong_bounds(&g, inst.caps.gpus, d);
        let t = Instant::now();
        let parts = blob_bound_parts(&g, d);
        let lp = bounds::lp::lp_bounds(&g, inst.caps.gpus, d, &parts, &fifo.starts, lp_cfg);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{}: {:.2} s for both LPs; GPU combinatorial {:.3} h, LP {:?} ({:?}, {} rounds, {} columns, master {:?}); cache combinatorial {:.4} h, LP {:?} ({:?}, {} rounds, {} columns, master {:?})",
            inst.workload,
            secs,
            strong.gpu.best,
            lp.gpu.bound_h,
            lp.gpu.status,
            lp.gpu.rounds,
            lp.gpu.columns,
            lp.gpu.master_h,
            strong.cache.best,
            lp.cache.bound_h,
            lp.cache.status,
            lp.cache.rounds,
            lp.cache.columns,
            lp.cache.master_h,
        );
    }
}
