//! Order generators: the static structure of a workload (tasks, blob-set keys, clusters,
//! request time, capacity-time) and the orders each family draws from it (priority orders,
//! perturbations, task groupings, duty orders, simultaneous starts, local moves).

use crate::decode::{BackfillScratch, Jobs, backfill_starts};
use crate::seeded::{below, shuffle, unit_f64};
use rand_chacha::ChaCha8Rng;
use schedule::evaluate::{GridInstance, Plan};
use schedule::instance::WorkloadInstance;

/// Static structure of a workload used by the generators.
pub(super) struct Structure {
    /// Attempts of each task in FIFO order; tasks by first FIFO attempt.
    pub(super) tasks: Vec<Vec<u32>>,
    /// Task index of each attempt.
    pub(super) task_of: Vec<u32>,
    /// Hierarchical blob-set key of each attempt: its blob ranks ascending, where blobs
    /// rank by (users descending, first FIFO user, digest).
    pub(super) blob_key: Vec<Vec<u32>>,
    /// Cluster of each attempt: the rank of its key without the last (most specific) blob.
    pub(super) cluster: Vec<u32>,
    /// Number of clusters.
    pub(super) n_clusters: usize,
    /// Request union length of each attempt, ns.
    pub(super) request_len: Vec<i64>,
    /// Duration of each attempt, ns.
    pub(super) duration: Vec<i64>,
    /// Capacity-time of each attempt: `d * max(1/K, cores/CPU cap, mem/RAM cap)`.
    pub(super) work: Vec<f64>,
}

impl Structure {
    pub(super) fn new(inst: &WorkloadInstance, g: &GridInstance) -> Self {
        let n = inst.attempts.len();
        let mut task_of = vec![0u32; n];
        let mut tasks: Vec<Vec<u32>> = Vec::new();
        {
            let mut by_id: std::collections::BTreeMap<&str, u32> = Default::default();
            for (j, a) in inst.attempts.iter().enumerate() {
                let t = *by_id.entry(a.task_id.as_str()).or_insert_with(|| {
                    tasks.push(Vec::new());
                    tasks.len() as u32 - 1
                });
                task_of[j] = t;
                tasks[t as usize].push(j as u32);
            }
        }
        let nb = inst.blobs.len();
        let mut users = vec![0u32; nb];
        let mut first = vec![u32::MAX; nb];
        for (j, a) in inst.attempts.iter().enumerate() {
            for &b in &a.blobs {
                users[b as usize] += 1;
                first[b as usize] = first[b as usize].min(j as u32);
            }
        }
        let mut by_rank: Vec<u32> = (0..nb as u32).collect();
        by_rank.sort_by_key(|&b| (std::cmp::Reverse(users[b as usize]), first[b as usize], b));
        let mut rank = vec![0u32; nb];
        for (r, &b) in by_rank.iter().enumerate() {
            rank[b as usize] = r as u32;
        }
        let blob_key: Vec<Vec<u32>> = inst
            .attempts
            .iter()
            .map(|a| {
                let mut k: Vec<u32> = a.blobs.iter().map(|&b| rank[b as usize]).collect();
                k.sort_unstable();
                k
            })
            .collect();
        let prefixes: Vec<&[u32]> = blob_key
            .iter()
            .map(|k| &k[..k.len().saturating_sub(1)])
            .collect();
        let mut distinct: Vec<&[u32]> = prefixes.clone();
        distinct.sort();
        distinct.dedup();
        let cluster: Vec<u32> = prefixes
            .iter()
            .map(|p| distinct.binary_search(p).unwrap_or(0) as u32)
            .collect();
        let n_clusters = distinct.len();
        Structure {
            tasks,
            task_of,
            blob_key,
            cluster,
            n_clusters,
            request_len: g.request_len.clone(),
            work: (0..g.len())
                .map(|j| {
                    let share = (1.0 / g.concurrency.max(1) as f64)
                        .max(g.cores[j] as f64 / g.cap_cores.max(1) as f64)
                        .max(g.mem[j] as f64 / g.cap_mem.max(1) as f64);
                    g.duration[j] as f64 * share
                })
                .collect(),
            duration: g.duration.clone(),
        }
    }

    pub(super) fn n(&self) -> usize {
        self.duration.len()
    }

    pub(super) fn priority_order(&self, name: &str) -> Vec<u32> {
        let n = self.n() as u32;
        let mut o: Vec<u32> = (0..n).collect();
        let d = &self.duration;
        let q = &self.request_len;
        match name {
            "longest_first" => o.sort_by_key(|&j| (std::cmp::Reverse(d[j as usize]), j)),
            "shortest_first" => o.sort_by_key(|&j| (d[j as usize], j)),
            "most_request_first" => o.sort_by_key(|&j| (std::cmp::Reverse(q[j as usize]), j)),
            "least_request_first" => o.sort_by_key(|&j| (q[j as usize], j)),
            "grouped_by_task" => o = self.tasks.concat(),
            "grouped_by_blob_set" => o.sort_by(|&a, &b| {
                self.blob_key[a as usize]
                    .cmp(&self.blob_key[b as usize])
                    .then(a.cmp(&b))
            }),
            "grouped_by_shared_layers" => {
                // Attempts sharing the same layers (a cluster: the blob-set key without its
                // most specific blob) together, the largest clusters first; inside a
                // cluster, tasks together, longest attempts first.
                let mut size = vec![0u32; self.n_clusters.max(1)];
                for &c in &self.cluster {
                    size[c as usize] += 1;
                }
                o.sort_by_key(|&j| {
                    let c = self.cluster[j as usize];
                    (
                        std::cmp::Reverse(size[c as usize]),
                        c,
                        self.task_of[j as usize],
                        std::cmp::Reverse(d[j as usize]),
                        j,
                    )
                });
            }
            _ => {}
        }
        o
    }

    /// Order tasks by `task_key` (ascending: integer part, then float part, then task
    /// index), attempts within a task by `attempt_key` (ascending, ties by attempt index);
    /// a task's attempts stay together.
    pub(super) fn grouped(
        &self,
        task_key: impl Fn(usize) -> (u64, f64),
        attempt_key: impl Fn(usize) -> f64,
    ) -> Vec<u32> {
        let mut ts: Vec<usize> = (0..self.tasks.len()).collect();
        let keys: Vec<(u64, f64)> = ts.iter().map(|&t| task_key(t)).collect();
        ts.sort_by(|&a, &b| {
            keys[a]
                .0
                .cmp(&keys[b].0)
                .then(keys[a].1.total_cmp(&keys[b].1))
                .then(a.cmp(&b))
        });
        let mut out = Vec::with_capacity(self.n());
        for t in ts {
            let mut members = self.tasks[t].clone();
            members.sort_by(|&a, &b| {
                attempt_key(a as usize)
                    .total_cmp(&attempt_key(b as usize))
                    .then(a.cmp(&b))
            });
            out.extend(members);
        }
        out
    }

    pub(super) fn task_cluster(&self, t: usize) -> u32 {
        self.cluster[self.tasks[t][0] as usize]
    }

    pub(super) fn task_total(&self, t: usize, per_attempt: &[f64]) -> f64 {
        self.tasks[t].iter().map(|&j| per_attempt[j as usize]).sum()
    }

    /// Candidate `i` of the repeated-task grouping family.
    pub(super) fn task_grouping(&self, i: u64, rng: &mut ChaCha8Rng) -> Vec<u32> {
        let d: Vec<f64> = self.duration.iter().map(|&x| x as f64).collect();
        let q: Vec<f64> = self.request_len.iter().map(|&x| x as f64).collect();
        let longest = |j: usize| -d[j];
        match i {
            0 => self.grouped(|t| (0, -self.task_total(t, &d)), longest),
            1 => self.grouped(|t| (0, -self.task_total(t, &q)), longest),
            2 => self.grouped(
                |t| {
                    let longest_attempt = self.tasks[t]
                        .iter()
                        .map(|&j| d[j as usize])
                        .fold(0.0, f64::max);
                    (0, -longest_attempt)
                },
                longest,
            ),
            3 | 4 => {
                // Clusters together: by cluster id (3) or by cluster total, longest first (4);
                // longer tasks first inside a cluster.
                let mut cluster_total = vec![0.0f64; self.n_clusters.max(1)];
                for (j, &c) in self.cluster.iter().enumerate() {
                    cluster_total[c as usize] += d[j];
                }
                let mut corder: Vec<usize> = (0..cluster_total.len()).collect();
                if i == 4 {
                    corder.sort_by(|&a, &b| {
                        cluster_total[b]
                            .total_cmp(&cluster_total[a])
                            .then(a.cmp(&b))
                    });
                }
                let mut pos = vec![0u64; corder.len()];
                for (p, &c) in corder.iter().enumerate() {
                    pos[c] = p as u64;
                }
                self.grouped(
                    |t| (pos[self.task_cluster(t) as usize], -self.task_total(t, &d)),
                    longest,
                )
            }
            _ => {
                let mut ts: Vec<usize> = (0..self.tasks.len()).collect();
                shuffle(rng, &mut ts);
                if i % 2 == 1 {
                    let mut cs: Vec<usize> = (0..self.n_clusters.max(1)).collect();
                    shuffle(rng, &mut cs);
                    let mut pos = vec![0usize; cs.len()];
                    for (p, &c) in cs.iter().enumerate() {
                        pos[c] = p;
                    }
                    ts.sort_by_key(|&t| pos[self.task_cluster(t) as usize]);
                }
                let mut out = Vec::with_capacity(self.n());
                for t in ts {
                    let mut m = self.tasks[t].clone();
                    m.sort_by(|&a, &b| d[b as usize].total_cmp(&d[a as usize]).then(a.cmp(&b)));
                    out.extend(m);
                }
                out
            }
        }
    }

    /// Candidate `i` of the duty-order family: attempts by request duty `req/d`.
    /// 0: highest duty first; 1: lowest first; 2: highest first, each window of `k`
    /// consecutive attempts longest first; 3: tasks by mean duty, highest first; then
    /// highest first under random duty perturbations (spread `spread`).
    pub(super) fn duty_order(
        &self,
        i: u64,
        k: usize,
        spread: f64,
        rng: &mut ChaCha8Rng,
    ) -> Vec<u32> {
        let n = self.n();
        let q = &self.request_len;
        let d = &self.duration;
        // Exact comparison of q_a / d_a with q_b / d_b (zero durations have duty 0).
        let duty_cmp = |a: u32, b: u32| {
            let (a, b) = (a as usize, b as usize);
            let lhs = i128::from(q[a]) * i128::from(d[b].max(1));
            let rhs = i128::from(q[b]) * i128::from(d[a].max(1));
            lhs.cmp(&rhs)
        };
        let mut o: Vec<u32> = (0..n as u32).collect();
        match i {
            0 => o.sort_by(|&a, &b| duty_cmp(b, a).then(a.cmp(&b))),
            1 => o.sort_by(|&a, &b| duty_cmp(a, b).then(a.cmp(&b))),
            2 => {
                o.sort_by(|&a, &b| duty_cmp(b, a).then(a.cmp(&b)));
                for w in o.chunks_mut(k.max(1)) {
                    w.sort_by(|&a, &b| d[b as usize].cmp(&d[a as usize]).then(a.cmp(&b)));
                }
            }
            3 => {
                let duty: Vec<f64> = (0..n).map(|j| q[j] as f64 / d[j].max(1) as f64).collect();
                o = self.grouped(
                    |t| {
                        let m = self.task_total(t, &duty) / self.tasks[t].len().max(1) as f64;
                        (0, -m)
                    },
                    |j| -duty[j],
                );
            }
            _ => {
                let duty: Vec<f64> = (0..n)
                    .map(|j| {
                        let u = 1.0 - spread + 2.0 * spread * unit_f64(rng);
                        u * q[j] as f64 / d[j].max(1) as f64
                    })
                    .collect();
                o.sort_by(|&a, &b| {
                    duty[b as usize]
                        .total_cmp(&duty[a as usize])
                        .then(a.cmp(&b))
                });
            }
        }
        o
    }

    /// Candidate `i` of the partial simultaneous-start family, from `base`.
    pub(super) fn group_starts(
        &self,
        g: &GridInstance,
        base: &Plan,
        i: u64,
        rng: &mut ChaCha8Rng,
    ) -> Plan {
        let order = base.attempt_order();
        let full = i < 2;
        let p = if full { 1.0 } else { 0.2 + 0.8 * unit_f64(rng) };
        // Per task: its attempts in base order.
        let mut in_order: Vec<Vec<u32>> = vec![Vec::new(); self.tasks.len()];
        for &j in &order {
            in_order[self.task_of[j as usize] as usize].push(j);
        }
        // Gang size per task (0: none), decided in task order.
        let mut gang = vec![0usize; self.tasks.len()];
        for (t, members) in in_order.iter().enumerate() {
            if members.len() < 2 {
                continue;
            }
            let pick = full || unit_f64(rng) < p;
            let mut size = if full {
                members.len()
            } else {
                2 + below(rng, members.len() as u64 - 1) as usize
            };
            if !pick {
                continue;
            }
            while size >= 2 && !g.fits_empty(&members[..size]) {
                size -= 1;
            }
            if size >= 2 {
                gang[t] = size;
            }
        }
        let mut units: Vec<Vec<u32>> = Vec::with_capacity(order.len());
        let mut emitted = vec![false; self.tasks.len()];
        let mut in_gang = vec![false; self.n()];
        for &j in &order {
            let t = self.task_of[j as usize] as usize;
            if gang[t] >= 2 {
                if !emitted[t] {
                    emitted[t] = true;
                    let members = in_order[t][..gang[t]].to_vec();
                    for &m in &members {
                        in_gang[m as usize] = true;
                    }
                    units.push(members);
                    continue;
                }
                if in_gang[j as usize] {
                    continue;
                }
            }
            units.push(vec![j]);
        }
        Plan { units }
    }
}

/// A uniformly random order of `n` attempts.
pub(super) fn random_order(n: usize, rng: &mut ChaCha8Rng) -> Vec<u32> {
    let mut o: Vec<u32> = (0..n as u32).collect();
    shuffle(rng, &mut o);
    o
}

/// One to four swaps or moves (each with probability 1/2) of random positions of `base`.
pub(super) fn swaps_or_moves(base: &[u32], rng: &mut ChaCha8Rng) -> Vec<u32> {
    let mut o = base.to_vec();
    let n = o.len() as u64;
    if n < 2 {
        return o;
    }
    let steps = 1 + below(rng, 4);
    for _ in 0..steps {
        let a = below(rng, n) as usize;
        let b = below(rng, n) as usize;
        if below(rng, 2) == 0 {
            o.swap(a, b);
        } else {
            let x = o.remove(a);
            o.insert(b, x);
        }
    }
    o
}

/// `base` re-sequenced under random duration perturbations: its backfilling schedule with
/// every duration multiplied by U[1-s, 1+s] (no deadline), attempts by perturbed start
/// (ties: position in `base`).
pub(super) fn perturbed_order(
    g: &GridInstance,
    base: &[u32],
    spread: f64,
    rng: &mut ChaCha8Rng,
    scratch: &mut BackfillScratch,
) -> Vec<u32> {
    let pd: Vec<i64> = g
        .duration
        .iter()
        .map(|&d| {
            let u = 1.0 - spread + 2.0 * spread * unit_f64(rng);
            (d as f64 * u).round() as i64
        })
        .collect();
    let jobs = Jobs {
        duration: &pd,
        ..Jobs::of(g)
    };
    let Some(starts) = backfill_starts(jobs, base, i64::MAX, scratch) else {
        return base.to_vec();
    };
    let mut pos = vec![0u32; base.len()];
    for (p, &j) in base.iter().enumerate() {
        pos[j as usize] = p as u32;
    }
    let mut o = base.to_vec();
    o.sort_by_key(|&j| (starts[j as usize], pos[j as usize]));
    o
}

/// `base` with one random task's attempts pulled together at the place of its first one
/// (their relative order kept); unchanged when no task has two attempts.
pub(super) fn regroup_one_task(st: &Structure, base: &[u32], rng: &mut ChaCha8Rng) -> Vec<u32> {
    let multi: Vec<usize> = (0..st.tasks.len())
        .filter(|&t| st.tasks[t].len() >= 2)
        .collect();
    if multi.is_empty() {
        return base.to_vec();
    }
    let t = multi[below(rng, multi.len() as u64) as usize] as u32;
    let members: Vec<u32> = base
        .iter()
        .copied()
        .filter(|&j| st.task_of[j as usize] == t)
        .collect();
    let mut out = Vec::with_capacity(base.len());
    let mut placed = false;
    for &j in base {
        if st.task_of[j as usize] == t {
            if !placed {
                out.extend_from_slice(&members);
                placed = true;
            }
        } else {
            out.push(j);
        }
    }
    out
}
