//! One start-time chain alone, for profilers and paired timings: the evaluate bench's
//! instance (synthetic deepswe shape, 2,000 attempts), a chain from FIFO, timed per run.
//!
//! Run: `cargo bench --workspace --bench lns_chain --no-run`, then the executable it names
//! with `OBJ=gpu|cache` (default gpu), `MOVES=N` (default 50,000), `REPS=N` (runs of the
//! same chain, default 3), `SEED=N` (the chain's random seed, default 1) and `SHAPE=tmax`
//! (the synthetic tmax shape instead: 253 attempts, both caps binding). Each run prints
//! its moves, seconds, microseconds per move (the state build included), accepted moves,
//! those that left an attempt elsewhere, the reinsertions tie-broken by the other
//! objective, the archive's size, and the archive's best GPU union and best cache byte-ns.
//! Under `valgrind --tool=callgrind --toggle-collect='search::lns::run_chain'` with
//! `MOVES=2000 REPS=1` and `MOVES=0 REPS=1` it gives the instructions per move.

use schedule::Objective;
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use schedule::synthetic::{SyntheticShape, synthetic_instance};
use search::lns::{ChainParams, LnsContext, run_chain};
use std::time::Instant;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let shape = if std::env::var("SHAPE").as_deref() == Ok("tmax") {
        SyntheticShape::tmax()
    } else {
        SyntheticShape::deepswe()
    };
    let inst = synthetic_instance(&shape).expect("synthetic instance");
    let g = GridInstance::new(&inst);
    let fifo = Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>());
    let e = evaluate(&g, &fifo, &mut Scratch::new()).expect("fifo");
    let ctx = LnsContext::new(&g, e.makespan);
    let objective = if std::env::var("OBJ").as_deref() == Ok("cache") {
        Objective::Cache
    } else {
        Objective::Gpu
    };
    let params = ChainParams {
        moves: env_or("MOVES", 50_000),
        max_removed: 3,
        late_acceptance: 64,
        window_every: 0,
        kick_after: 0,
        kick_removed: 0,
    };
    for _ in 0..env_or("REPS", 3u32) {
        let mut rng =
            <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(
                env_or("SEED", 1u64),
            );
        let t = Instant::now();
        let out = run_chain(&g, &ctx, &e.starts, objective, params, &mut rng);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{} moves {:.3} s {:.2} us/move accepted {} moved {} tie-breaks {} archive {} best GPU {:?} best cache {:?}",
            out.moves,
            secs,
            secs / out.moves.max(1) as f64 * 1e6,
            out.accepted,
            out.moved,
            out.tie_breaks,
            out.archive.len(),
            out.archive.iter().map(|p| p.gpu_union).min(),
            out.archive.iter().map(|p| p.cache_byte_ns).min(),
        );
    }
}
