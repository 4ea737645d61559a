//! The start-time chain's results pinned: per generated shape (the synthetic tmax and
//! deepswe generators, cut small) and per objective, one chain from FIFO with its counters
//! (moves, infeasible, accepted, moved, tie-breaks) and every archive point (the move it was
//! found at, its GPU union, cache byte-ns, makespan and a digest of its starts). A change
//! that alters what the search finds shows up here as a snapshot diff.

use schedule::Objective;
use schedule::evaluate::{GridInstance, Plan, Scratch, evaluate};
use schedule::synthetic::{SyntheticShape, synthetic_instance};
use search::lns::{ChainParams, LnsContext, run_chain};

use std::fmt::Write as _;

fn digest(starts: &[i64]) -> String {
    // FNV-1a over the starts: enough to tell schedules apart in a snapshot.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for s in starts {
        for b in s.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

fn chains(mut shape: SyntheticShape) -> String {
    shape.tasks = shape.tasks.min(60);
    shape.requests_per_attempt = 16;
    let inst = synthetic_instance(&shape).expect("synthetic instance");
    let g = GridInstance::new(&inst);
    let fifo = Plan::from_order(&(0..g.len() as u32).collect::<Vec<_>>());
    let e = evaluate(&g, &fifo, &mut Scratch::new()).expect("fifo");
    let ctx = LnsContext::new(&g, e.makespan);
    let mut out = format!(
        "{} attempts, FIFO makespan {} ns, GPU union {} ns, cache {} byte-ns\n",
        g.len(),
        e.makespan,
        e.gpu_union,
        e.cache_byte_ns
    );
    for (name, objective) in [("gpu", Objective::Gpu), ("cache", Objective::Cache)] {
        let params = ChainParams {
            moves: 400,
            max_removed: 3,
            late_acceptance: 16,
            window_every: 0,
            kick_after: 0,
            kick_removed: 0,
        };
        let mut rng =
            <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(5);
        let c = run_chain(&g, &ctx, &e.starts, objective, params, &mut rng);
        writeln!(
            out,
            "{name}: moves {} infeasible {} accepted {} moved {} tie-breaks {} archive {}",
            c.moves,
            c.infeasible,
            c.accepted,
            c.moved,
            c.tie_breaks,
            c.archive.len()
        )
        .unwrap();
        writeln!(
            out,
            "  best GPU {:?} best cache {:?}",
            c.archive.iter().map(|p| p.gpu_union).min(),
            c.archive.iter().map(|p| p.cache_byte_ns).min()
        )
        .unwrap();
        for p in &c.archive {
            writeln!(
                out,
                "  at move {:>3}: gpu {} cache {} makespan {} starts {}",
                p.found_at_move,
                p.gpu_union,
                p.cache_byte_ns,
                p.makespan,
                digest(&p.starts)
            )
            .unwrap();
        }
    }
    out
}

#[test]
fn chain_counters_on_the_tmax_shape() {
    insta::assert_snapshot!(chains(SyntheticShape::tmax()));
}

#[test]
fn chain_counters_on_the_deepswe_shape() {
    let mut shape = SyntheticShape::deepswe();
    shape.repos = 8;
    insta::assert_snapshot!(chains(shape));
}
