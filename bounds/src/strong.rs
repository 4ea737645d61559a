//! Stronger valid lower bounds on the GPU and cache objectives, reported beside the
//! study's bounds (docs/FORMAT.md, "The replay model"): energy bounds from the CPU and RAM caps,
//! `K'` (the most attempts that can run at once under both caps) in place of `K`, the machine
//! bounds of `P||Cmax` (`(m K' + 1)`-longest), and compulsory parts inside the deadline window
//! `[0, D]`. Each argument is written out in docs/BOUNDS.md; every bound is tested against
//! exhaustive optima of tiny instances (a bound above an optimum is a bug).
//!
//! Everything is computed from exact integer sums on the nanosecond grid; a ratio is turned
//! into a float once.

use crate::pattern::PatternBound;
use schedule::GridInstance;
use schedule::evaluate::k_prime;
use schedule::reference::union_length;
use serde::{Deserialize, Serialize};

/// The components of the stronger GPU bound, GPU-hours each (each alone is a valid bound).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuBoundParts {
    /// `K'` over all attempts.
    pub k_prime: i64,
    /// The seed's bound with `K'` for `K`, and the `(m K' + 1)`-longest machine bounds on
    /// request lengths.
    pub machine: f64,
    /// `sum_j cores_j * req_j / W_cpu` (`W_cpu`: most cores a feasible set can hold).
    pub cpu_energy: f64,
    /// `sum_j mem_j * req_j / W_ram`.
    pub ram_energy: f64,
    /// Length of the union of the requests' compulsory parts inside `[0, D]`.
    pub compulsory: f64,
    /// The pattern bound (0 until [`StrongBounds::with_gpu_pattern`] adds it).
    pub pattern: f64,
    /// The largest of the above.
    pub best: f64,
}

/// The components of the stronger cache bound, GiB-hours. Each component is summed over
/// blobs on its own; `best` sums, per blob, the largest component.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheBoundParts {
    /// Machine bounds with `K'_b` (the most users of blob `b` that can run at once).
    pub machine: f64,
    /// `sum_{j uses b} cores_j * d_j / W_cpu(b)`, summed over blobs.
    pub cpu_energy: f64,
    /// `sum_{j uses b} mem_j * d_j / W_ram(b)`, summed over blobs.
    pub ram_energy: f64,
    /// Union of the users' compulsory parts `[D - d_j, d_j)`, summed over blobs.
    pub compulsory: f64,
    /// `sum_b GiB_b * max(components of b)`.
    pub best: f64,
}

/// The stronger bounds of one workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrongBounds {
    /// GPU bound and its components.
    pub gpu: GpuBoundParts,
    /// How the GPU pattern bound (`gpu.pattern`) was reached.
    pub gpu_pattern: PatternBound,
    /// Cache bound and its components.
    pub cache: CacheBoundParts,
}

impl StrongBounds {
    /// Add the GPU pattern bound (docs/BOUNDS.md, item 7) as a component of the GPU bound.
    pub fn with_gpu_pattern(mut self, pattern: PatternBound) -> Self {
        self.gpu.pattern = pattern.bound_h;
        self.gpu.best = self.gpu.best.max(pattern.bound_h);
        self.gpu_pattern = pattern;
        self
    }
}

/// Most of quota `q` a feasible subset of `set` can hold: `min(cap, sum of its k' largest)`.
fn max_feasible_load(q: &[i64], set: &[u32], k: i64, cap: i64) -> i64 {
    let mut v: Vec<i64> = set.iter().map(|&j| q[j as usize]).collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    let top: i64 = v.iter().take(k.max(0) as usize).sum();
    top.min(cap)
}

/// Machine bound (ns) on the union of a set whose attempts never run more than `k` at once
/// and whose attempts contribute `lens` disjointly when their lifetimes are disjoint:
/// `max(sum/k, max, max_m sum of the m+1 smallest of the m k + 1 largest)`.
pub fn machine_bound(lens: &[i64], k: i64) -> f64 {
    if lens.is_empty() || k <= 0 {
        return 0.0;
    }
    let mut v = lens.to_vec();
    v.sort_unstable_by(|a, b| b.cmp(a));
    let total: i128 = v.iter().map(|&x| i128::from(x)).sum();
    let mut best = (total as f64 / k as f64).max(v[0] as f64);
    let k = k as usize;
    let mut m = 1usize;
    while m * k < v.len() {
        // Among the m k + 1 longest, some "machine" (colour class) holds m + 1 of them.
        let hi = m * k; // 0-based index of the (m k + 1)-th longest
        let sum: i128 = v[hi - m..=hi].iter().map(|&x| i128::from(x)).sum();
        best = best.max(sum as f64);
        m += 1;
    }
    best
}

/// Energy bound (ns): `sum_j q_j * len_j / w` where `w` bounds `q` of any feasible subset.
fn energy_bound(q: &[i64], lens: &[(u32, i64)], w: i64) -> f64 {
    if w <= 0 {
        return 0.0;
    }
    let e: i128 = lens
        .iter()
        .map(|&(j, l)| i128::from(q[j as usize]) * i128::from(l))
        .sum();
    e as f64 / w as f64
}

/// The components of one blob's bound on the union of its users' lifetimes, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BlobBoundParts {
    /// Machine bounds with `K'_b`.
    pub machine: f64,
    /// CPU energy bound over the users.
    pub cpu_energy: f64,
    /// RAM energy bound over the users.
    pub ram_energy: f64,
    /// Union of the users' compulsory parts.
    pub compulsory: f64,
}

impl BlobBoundParts {
    /// The largest component: a valid bound on the blob's union, ns.
    pub fn best(&self) -> f64 {
        self.machine
            .max(self.cpu_energy)
            .max(self.ram_energy)
            .max(self.compulsory)
    }
}

/// Attempts using each blob, by blob index.
pub fn blob_users(g: &GridInstance) -> Vec<Vec<u32>> {
    let mut users: Vec<Vec<u32>> = vec![Vec::new(); g.blob_bytes.len()];
    for j in 0..g.len() {
        for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
            users[b as usize].push(j as u32);
        }
    }
    users
}

/// Per blob, the bound components on the union of its users' lifetimes (ns; all zero for a
/// blob nobody uses).
pub fn blob_bound_parts(g: &GridInstance, deadline: i64) -> Vec<BlobBoundParts> {
    blob_users(g)
        .iter()
        .map(|set| {
            if set.is_empty() {
                return BlobBoundParts::default();
            }
            let kb = k_prime(g, set);
            let lens: Vec<(u32, i64)> = set.iter().map(|&j| (j, g.duration[j as usize])).collect();
            let d: Vec<i64> = lens.iter().map(|x| x.1).collect();
            let wc = max_feasible_load(&g.cores, set, kb, g.cap_cores);
            let wm = max_feasible_load(&g.mem, set, kb, g.cap_mem);
            let parts: Vec<(i64, i64)> = set
                .iter()
                .map(|&j| (deadline - g.duration[j as usize], g.duration[j as usize]))
                .collect();
            BlobBoundParts {
                machine: machine_bound(&d, kb),
                cpu_energy: energy_bound(&g.cores, &lens, wc),
                ram_energy: energy_bound(&g.mem, &lens, wm),
                compulsory: union_length(parts) as f64,
            }
        })
        .collect()
}

/// The stronger bounds of a workload with deadline `deadline` (ns).
pub fn strong_bounds(g: &GridInstance, gpus: u32, deadline: i64) -> StrongBounds {
    strong_bounds_from(g, gpus, deadline, &blob_bound_parts(g, deadline))
}

/// [`strong_bounds`] from per-blob parts already computed by [`blob_bound_parts`] for the
/// same deadline (the stage also hands them to the LP bounds).
pub fn strong_bounds_from(
    g: &GridInstance,
    gpus: u32,
    deadline: i64,
    per_blob: &[BlobBoundParts],
) -> StrongBounds {
    let n = g.len();
    let all: Vec<u32> = (0..n as u32).collect();
    let kp = k_prime(g, &all);

    // GPU: the attempts with a pending request at an instant are running, hence a feasible
    // set; an attempt's requests are disjoint.
    let req: Vec<(u32, i64)> = all
        .iter()
        .map(|&j| (j, g.request_len[j as usize]))
        .collect();
    let req_lens: Vec<i64> = req.iter().map(|x| x.1).collect();
    let machine = machine_bound(&req_lens, kp);
    let w_cpu = max_feasible_load(&g.cores, &all, kp, g.cap_cores);
    let w_ram = max_feasible_load(&g.mem, &all, kp, g.cap_mem);
    let cpu_e = energy_bound(&g.cores, &req, w_cpu);
    let ram_e = energy_bound(&g.mem, &req, w_ram);
    let mut compulsory = Vec::new();
    for j in 0..n {
        let slack = deadline - g.duration[j];
        for k in g.request_first[j]..g.request_first[j + 1] {
            let (a, b) = (g.request_start[k], g.request_end[k]);
            if slack >= 0 && a + slack < b {
                compulsory.push((a + slack, b));
            }
        }
    }
    let comp = union_length(compulsory) as f64;
    let gpu_best = machine.max(cpu_e).max(ram_e).max(comp);
    let h = |ns: f64| f64::from(gpus) * ns / 3.6e12;
    let gpu = GpuBoundParts {
        k_prime: kp,
        machine: h(machine),
        cpu_energy: h(cpu_e),
        ram_energy: h(ram_e),
        compulsory: h(comp),
        pattern: 0.0,
        best: h(gpu_best),
    };

    // Cache: per blob, the users' lifetimes.
    let (mut c_machine, mut c_cpu, mut c_ram, mut c_comp, mut c_best) =
        (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for (b, parts) in per_blob.iter().enumerate() {
        let bytes = g.blob_bytes[b] as f64;
        c_machine += bytes * parts.machine;
        c_cpu += bytes * parts.cpu_energy;
        c_ram += bytes * parts.ram_energy;
        c_comp += bytes * parts.compulsory;
        c_best += bytes * parts.best();
    }
    let ch = |byte_ns: f64| byte_ns / (model::GIB * 3.6e12);
    StrongBounds {
        gpu,
        gpu_pattern: PatternBound::skipped(),
        cache: CacheBoundParts {
            machine: ch(c_machine),
            cpu_energy: ch(c_cpu),
            ram_energy: ch(c_ram),
            compulsory: ch(c_comp),
            best: ch(c_best),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_bound_uses_the_pairs_of_the_longest() {
        // k = 2: the 3 longest (9, 8, 7) put two on one machine: 8 + 7 = 15 > 27/2.
        assert_eq!(machine_bound(&[9, 8, 7, 3], 2), 15.0);
        // m = 2: the 5 longest with k = 2 put 3 on one machine: 3 + 3 + 3 = 9 > 15/2.
        assert_eq!(machine_bound(&[3, 3, 3, 3, 3], 2), 9.0);
        assert_eq!(machine_bound(&[5], 4), 5.0);
        assert_eq!(machine_bound(&[], 4), 0.0);
    }
}
