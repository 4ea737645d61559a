//! The search's seeded random helpers (uniform draws, shuffles, per-candidate ChaCha8
//! streams) and its single tie rule; every family, decoder and chain draws through these.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// Ties: values within this relative difference are equal (then the smaller makespan, then
/// the earlier found candidate wins).
pub const TIE_RELATIVE: f64 = 1e-9;

/// A uniform f64 in `[0, 1)` from 53 random bits.
pub fn unit_f64(r: &mut ChaCha8Rng) -> f64 {
    (r.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform integer in `[0, n)`, `n > 0`, without modulo bias (rejection).
pub fn below(r: &mut ChaCha8Rng, n: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX % n) - 1;
    loop {
        let x = r.next_u64();
        if x <= zone {
            return x % n;
        }
    }
}

/// Fisher-Yates with [`below`].
pub fn shuffle<T>(r: &mut ChaCha8Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let k = below(r, i as u64 + 1) as usize;
        v.swap(i, k);
    }
}

/// A stream's position in 32-bit words (saturating; it never gets near 2^64).
pub fn word_pos(r: &ChaCha8Rng) -> u64 {
    u64::try_from(r.get_word_pos()).unwrap_or(u64::MAX)
}

/// The stream of candidate `index` of a family: ChaCha8 with the family's seed on stream
/// `index`.
pub fn candidate_rng(seed: &[u8; 32], index: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::from_seed(*seed);
    r.set_stream(index);
    r
}

/// Whether `(value, makespan)` beats the incumbent under the tie rule: values within
/// [`TIE_RELATIVE`] of each other are equal and the smaller makespan wins; the incumbent,
/// found earlier, wins a full tie.
pub fn beats(value: f64, makespan: i64, best_value: f64, best_makespan: i64) -> bool {
    let scale = value.abs().max(best_value.abs());
    if (value - best_value).abs() <= TIE_RELATIVE * scale {
        makespan < best_makespan
    } else {
        value < best_value
    }
}

/// [`beats`] on exact integer values (GPU union ns, cache byte-ns), compared as f64.
pub fn beats_exact(value: u128, makespan: i64, best_value: u128, best_makespan: i64) -> bool {
    beats(value as f64, makespan, best_value as f64, best_makespan)
}
