//! The seeded schedule search for the GPU and cache objectives (and the fastest schedule for
//! CPU/RAM display): every candidate family of SPEC 2.3, then issue 7's (first-fit orders,
//! duty orders, blob-group lanes and the start-time neighbourhood search of `lns`),
//! evaluated exactly, in parallel with results independent of the thread count; and the
//! Pareto front of GPU vs cache with the joint compromise chosen from it.
//!
//! Reproducibility: one ChaCha8 stream (`ChaCha8Rng::seed_from_u64(search.seed)`) for the
//! whole replay. Each workload, in `search.order`, draws one 32-byte seed per random family
//! from it, in a fixed order; candidate `i` of a family uses ChaCha8 with that seed on
//! stream `i` (`set_stream(i)`). Candidates are evaluated in parallel but folded into the
//! running bests in candidate order, so the result never depends on the thread count.

use crate::accounting::{cache_hours, gpu_hours};
use crate::error::ReplayError;
use crate::evaluate::{Evaluation, GridInstance, Plan, Scratch, evaluate, evaluate_starts};
use crate::input::WorkloadInstance;
use crate::lns::{ChainParams, LnsContext, Objective, run_chain};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;
use serde::Serialize;

/// Ties: values within this relative difference are equal (then the smaller makespan, then
/// the earlier found candidate wins).
pub const TIE_RELATIVE: f64 = 1e-9;
/// Most candidates evaluated in one parallel batch (bounds memory).
const MAX_BATCH: usize = 256;

/// Search budgets, all counts: `model::config::SearchBudget` plus replay-side knobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayBudget {
    /// List schedules under random duration perturbations, per workload.
    pub perturbations: u32,
    /// Relative spread of a perturbation factor (uniform in `[1-s, 1+s]`).
    pub perturbation_spread: f64,
    /// Local swap/move candidates per objective (GPU, cache) and workload.
    pub local_moves: u32,
    /// Partial simultaneous-start candidates per workload.
    pub group_starts: u32,
    /// Repeated-task grouping candidates per workload.
    pub task_groupings: u32,
    /// Local-move candidates generated from the same best plan (hill-climbing step).
    pub local_move_batch: u32,
    /// Duty-ordered list schedules per workload.
    pub duty_orders: u32,
    /// Blob-group-ordered list schedules per workload.
    pub blob_group_orders: u32,
    /// Start-time neighbourhood search: rounds per objective and workload.
    pub lns_rounds: u32,
    /// ... chains per round.
    pub lns_chains: u32,
    /// ... moves per chain and round.
    pub lns_moves: u32,
    /// ... most attempts removed by one move.
    pub lns_max_removed: u32,
    /// ... late-acceptance history length.
    pub lns_late_acceptance: u32,
}

impl ReplayBudget {
    /// The budget of a config, with replay-side defaults for knobs it does not have.
    pub fn from_config(b: &model::config::SearchBudget) -> Self {
        ReplayBudget {
            perturbations: b.perturbations,
            perturbation_spread: b.perturbation_spread,
            local_moves: b.local_moves,
            group_starts: b.group_starts,
            task_groupings: b.task_groupings,
            local_move_batch: b.local_move_batch,
            duty_orders: b.duty_orders,
            blob_group_orders: b.blob_group_orders,
            lns_rounds: b.lns_rounds,
            lns_chains: b.lns_chains,
            lns_moves: b.lns_moves,
            lns_max_removed: b.lns_max_removed,
            lns_late_acceptance: b.lns_late_acceptance,
        }
    }
}

/// A candidate family of SPEC 2.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Fixed priority orders (FIFO, longest/shortest first, most/least request time first,
    /// grouped by task, grouped by blob set).
    PriorityOrder,
    /// Priority orders of randomly perturbed durations, evaluated with true durations.
    Perturbation,
    /// Orders that keep a task's repeated attempts together.
    TaskGrouping,
    /// Partial simultaneous starts of a task's attempts.
    GroupStart,
    /// Local swaps and moves from the best GPU schedule.
    LocalMoveGpu,
    /// Local swaps and moves from the best cache schedule.
    LocalMoveCache,
    /// The fixed priority orders placed first-fit (backfilling) instead of as list
    /// schedules.
    FirstFitOrder,
    /// List schedules ordered by request duty `req/d` (highest first, and variants).
    DutyOrder,
    /// List schedules of whole blob groups (repository, then task), the group order searched.
    BlobGroupOrder,
    /// Start-time neighbourhood search for the GPU objective.
    LnsGpu,
    /// Start-time neighbourhood search for the cache objective.
    LnsCache,
}

impl Family {
    /// Every family, in evaluation order.
    pub const ALL: [Family; 11] = [
        Family::PriorityOrder,
        Family::Perturbation,
        Family::TaskGrouping,
        Family::GroupStart,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
        Family::FirstFitOrder,
        Family::DutyOrder,
        Family::BlobGroupOrder,
        Family::LnsGpu,
        Family::LnsCache,
    ];

    /// The families of SPEC 2.3 (the seed's); the others are issue 7's.
    pub const SEED: [Family; 6] = [
        Family::PriorityOrder,
        Family::Perturbation,
        Family::TaskGrouping,
        Family::GroupStart,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
    ];

    /// Name used in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::PriorityOrder => "priority_order",
            Family::Perturbation => "perturbation",
            Family::TaskGrouping => "task_grouping",
            Family::GroupStart => "group_start",
            Family::LocalMoveGpu => "local_move_gpu",
            Family::LocalMoveCache => "local_move_cache",
            Family::FirstFitOrder => "first_fit_order",
            Family::DutyOrder => "duty_order",
            Family::BlobGroupOrder => "blob_group_order",
            Family::LnsGpu => "lns_gpu",
            Family::LnsCache => "lns_cache",
        }
    }
}

/// The fixed priority orders, in evaluation order (FIFO first).
pub const PRIORITY_ORDERS: [&str; 7] = [
    "fifo",
    "longest_first",
    "shortest_first",
    "most_request_first",
    "least_request_first",
    "grouped_by_task",
    "grouped_by_blob_set",
];

/// Counts of one family's candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FamilyStats {
    /// The family.
    pub family: Family,
    /// Candidates evaluated.
    pub evaluated: u64,
    /// Rejected: the schedule ends after the deadline D (first-fit constructions: an
    /// attempt found no start ending by D; neighbourhood moves: a removed attempt found no
    /// feasible start ending by D, and the move was undone).
    pub rejected_deadline: u64,
    /// Rejected: a unit could never fit the caps (cannot happen for single attempts, which
    /// are checked up front).
    pub rejected_cap: u64,
    /// Candidates that became a new best for some objective or entered the Pareto front.
    pub improvements: u64,
}

/// A feasible candidate kept as a best.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The list plan (`None` for a start-time schedule of the neighbourhood search).
    pub plan: Option<Plan>,
    /// Its exact evaluation.
    pub eval: Evaluation,
    /// GPU ideal hours.
    pub gpu_h: f64,
    /// Cache ideal hours.
    pub cache_h: f64,
    /// The family that produced it.
    pub family: Family,
    /// Its index among the workload's candidates (0 = FIFO).
    pub candidate: u64,
    /// A readable name (`priority_order:longest_first`, `local_move_gpu#17`, ...).
    pub label: String,
}

/// One row of the search trace: the best so far of an objective after a batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceRow {
    /// `gpu`, `cache` or `makespan` (the CPU/RAM display criterion).
    pub objective: &'static str,
    /// The family of the batch just folded.
    pub family: Family,
    /// Candidates evaluated so far in this workload.
    pub candidates_evaluated: u64,
    /// Best value so far: hours (for `makespan`, the makespan in hours).
    pub best_so_far_h: f64,
    /// Makespan of that best schedule, seconds.
    pub best_makespan_s: f64,
}

/// How the workload consumed the shared RNG stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RngRecord {
    /// ChaCha8 word position of the shared stream before this workload.
    pub word_pos_before: u64,
    /// ... and after.
    pub word_pos_after: u64,
    /// The 32-byte family seeds drawn, hex, in draw order.
    pub family_seeds: Vec<(Family, String)>,
}

/// Everything the search of one workload found.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    /// The FIFO baseline (candidate 0).
    pub fifo: Found,
    /// Smallest makespan found (the CPU/RAM display schedule).
    pub fastest: Found,
    /// Smallest GPU ideal found.
    pub best_gpu: Found,
    /// Smallest cache ideal found.
    pub best_cache: Found,
    /// Smallest `gpu/fifo_gpu + cache/fifo_cache` on the Pareto front.
    pub best_joint: Found,
    /// The Pareto front of (GPU, cache) over every feasible candidate, by GPU ascending.
    pub front: Vec<Found>,
    /// Best GPU and cache hours after the seed's families only.
    pub seed_best: (f64, f64),
    /// Per-family counts, in [`Family::ALL`] order.
    pub stats: Vec<FamilyStats>,
    /// Best so far per objective after each batch.
    pub trace: Vec<TraceRow>,
    /// RNG consumption.
    pub rng: RngRecord,
    /// Candidates evaluated in total.
    pub evaluated: u64,
}

/// A uniform f64 in `[0, 1)` from 53 random bits.
fn unit_f64(r: &mut ChaCha8Rng) -> f64 {
    (r.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform integer in `[0, n)`, `n > 0`, without modulo bias (rejection).
fn below(r: &mut ChaCha8Rng, n: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX % n) - 1;
    loop {
        let x = r.next_u64();
        if x <= zone {
            return x % n;
        }
    }
}

/// Fisher-Yates with [`below`].
fn shuffle<T>(r: &mut ChaCha8Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let k = below(r, i as u64 + 1) as usize;
        v.swap(i, k);
    }
}

/// The shared stream's position in 32-bit words (saturating; it never gets near 2^64).
fn word_pos(r: &ChaCha8Rng) -> u64 {
    u64::try_from(r.get_word_pos()).unwrap_or(u64::MAX)
}

fn candidate_rng(seed: &[u8; 32], index: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::from_seed(*seed);
    r.set_stream(index);
    r
}

/// Whether `(value, makespan)` beats the incumbent under the tie rule (the incumbent,
/// found earlier, wins a full tie).
pub fn beats(value: f64, makespan: i64, best_value: f64, best_makespan: i64) -> bool {
    let scale = value.abs().max(best_value.abs());
    if (value - best_value).abs() <= TIE_RELATIVE * scale {
        makespan < best_makespan
    } else {
        value < best_value
    }
}

/// Static structure of a workload used by the generators.
struct Structure {
    /// Attempts of each task in FIFO order; tasks by first FIFO attempt.
    tasks: Vec<Vec<u32>>,
    /// Task index of each attempt.
    task_of: Vec<u32>,
    /// Hierarchical blob-set key of each attempt: its blob ranks ascending, where blobs
    /// rank by (users descending, first FIFO user, digest).
    blob_key: Vec<Vec<u32>>,
    /// Cluster of each attempt: the rank of its key without the last (most specific) blob.
    cluster: Vec<u32>,
    /// Number of clusters.
    n_clusters: usize,
    /// Request union length of each attempt, ns.
    request_len: Vec<i64>,
    /// Duration of each attempt, ns.
    duration: Vec<i64>,
    /// Capacity-time of each attempt: `d * max(1/K, cores/CPU cap, mem/RAM cap)`.
    work: Vec<f64>,
}

impl Structure {
    fn new(inst: &WorkloadInstance, g: &GridInstance) -> Self {
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

    fn n(&self) -> usize {
        self.duration.len()
    }

    fn priority_order(&self, name: &str) -> Vec<u32> {
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
            _ => {}
        }
        o
    }

    /// Order tasks by `task_key` (ascending: integer part, then float part, then task
    /// index), attempts within a task by `attempt_key` (ascending, ties by attempt index);
    /// a task's attempts stay together.
    fn grouped(
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

    fn task_cluster(&self, t: usize) -> u32 {
        self.cluster[self.tasks[t][0] as usize]
    }

    fn task_total(&self, t: usize, per_attempt: &[f64]) -> f64 {
        self.tasks[t].iter().map(|&j| per_attempt[j as usize]).sum()
    }

    /// Candidate `i` of the perturbation family.
    fn perturbed(&self, i: u64, rng: &mut ChaCha8Rng, spread: f64) -> Vec<u32> {
        let n = self.n();
        let u: Vec<f64> = (0..n)
            .map(|_| 1.0 - spread + 2.0 * spread * unit_f64(rng))
            .collect();
        let pd: Vec<f64> = (0..n).map(|j| self.duration[j] as f64 * u[j]).collect();
        let pq: Vec<f64> = (0..n).map(|j| self.request_len[j] as f64 * u[j]).collect();
        let mut o: Vec<u32> = (0..n as u32).collect();
        match i % 4 {
            0 => o.sort_by(|&a, &b| pd[b as usize].total_cmp(&pd[a as usize]).then(a.cmp(&b))),
            1 => o.sort_by(|&a, &b| pq[b as usize].total_cmp(&pq[a as usize]).then(a.cmp(&b))),
            2 => o = self.grouped(|t| (0, -self.task_total(t, &pd)), |j| -pd[j]),
            _ => {
                o = self.grouped(
                    |t| (u64::from(self.task_cluster(t)), -self.task_total(t, &pd)),
                    |j| -pd[j],
                )
            }
        }
        o
    }

    /// Candidate `i` of the repeated-task grouping family.
    fn task_grouping(&self, i: u64, rng: &mut ChaCha8Rng) -> Vec<u32> {
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
    fn duty_order(&self, i: u64, k: usize, spread: f64, rng: &mut ChaCha8Rng) -> Vec<u32> {
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

    /// Candidate `i` of the first blob-group batch: clusters (repository environments) as
    /// blocks of tasks. 0: clusters and tasks by total duration, longest first; 1: by first
    /// FIFO appearance; 2: clusters shortest total first; 3: clusters by attempt count;
    /// then random cluster and task orders.
    fn group_order(&self, i: u64, rng: &mut ChaCha8Rng) -> GroupOrder {
        let nc = self.n_clusters.max(1);
        let mut blocks: Vec<Vec<u32>> = vec![Vec::new(); nc];
        for t in 0..self.tasks.len() {
            blocks[self.task_cluster(t) as usize].push(t as u32);
        }
        let d: Vec<f64> = self.duration.iter().map(|&x| x as f64).collect();
        let task_total = |t: u32| self.task_total(t as usize, &d);
        let block_total = |b: &Vec<u32>| b.iter().map(|&t| task_total(t)).sum::<f64>();
        let mut order: Vec<usize> = (0..nc).collect();
        match i {
            0 | 2 => {
                let totals: Vec<f64> = blocks.iter().map(block_total).collect();
                order.sort_by(|&a, &b| {
                    let c = totals[b].total_cmp(&totals[a]);
                    (if i == 0 { c } else { c.reverse() }).then(a.cmp(&b))
                });
                for b in &mut blocks {
                    b.sort_by(|&x, &y| task_total(y).total_cmp(&task_total(x)).then(x.cmp(&y)));
                }
            }
            1 => {
                order.sort_by_key(|&c| (blocks[c].first().copied().unwrap_or(u32::MAX), c));
            }
            3 => {
                let size = |b: &Vec<u32>| {
                    b.iter()
                        .map(|&t| self.tasks[t as usize].len())
                        .sum::<usize>()
                };
                order.sort_by_key(|&c| (std::cmp::Reverse(size(&blocks[c])), c));
            }
            _ => {
                shuffle(rng, &mut order);
                for b in &mut blocks {
                    shuffle(rng, b);
                }
            }
        }
        order
            .into_iter()
            .map(|c| std::mem::take(&mut blocks[c]))
            .filter(|b| !b.is_empty())
            .collect()
    }

    /// The attempt order of a group plan: blocks are dealt to `lanes` lanes (each to the
    /// lane with the least capacity-time so far); a lane lists its blocks' tasks in order
    /// (or, with `tasks_by_longest`, by their longest attempt, longest first), a task's
    /// attempts longest first; the lanes are merged by taking next the attempt of
    /// the lane with the least capacity-time consumed (ties: lower lane), so `lanes` groups
    /// run side by side and their quotas mix.
    /// The block of each attempt under a group plan (index into `plan.blocks`).
    fn block_of(&self, plan: &GroupPlan) -> Vec<u32> {
        let mut out = vec![0u32; self.n()];
        for (b, block) in plan.blocks.iter().enumerate() {
            for &t in block {
                for &j in &self.tasks[t as usize] {
                    out[j as usize] = b as u32;
                }
            }
        }
        out
    }

    fn flatten_groups(&self, plan: &GroupPlan) -> Vec<u32> {
        let lanes = plan.lanes.max(1);
        let mut lane_seq: Vec<Vec<u32>> = vec![Vec::new(); lanes];
        let mut lane_work = vec![0.0f64; lanes];
        for block in &plan.blocks {
            let mut l = 0;
            for k in 1..lanes {
                if lane_work[k] < lane_work[l] {
                    l = k;
                }
            }
            let longest_first = |m: &mut Vec<u32>| {
                m.sort_by(|&a, &b| {
                    self.duration[b as usize]
                        .cmp(&self.duration[a as usize])
                        .then(a.cmp(&b))
                });
            };
            let mut all: Vec<u32> = Vec::new();
            for &t in block {
                let mut m = self.tasks[t as usize].clone();
                longest_first(&mut m);
                all.extend(m);
            }
            if plan.tasks_by_longest {
                // Tasks by their longest attempt, longest first (a task stays together).
                let mut tasks: Vec<Vec<u32>> = block
                    .iter()
                    .map(|&t| {
                        let mut m = self.tasks[t as usize].clone();
                        longest_first(&mut m);
                        m
                    })
                    .collect();
                tasks.sort_by(|a, b| {
                    let la = a.first().map_or(0, |&j| self.duration[j as usize]);
                    let lb = b.first().map_or(0, |&j| self.duration[j as usize]);
                    lb.cmp(&la).then(a.cmp(b))
                });
                all = tasks.concat();
            }
            for &j in &all {
                lane_work[l] += self.work[j as usize];
            }
            lane_seq[l].extend(all);
        }
        let mut out = Vec::with_capacity(self.n());
        let mut pos = vec![0usize; lanes];
        let mut used = vec![0.0f64; lanes];
        while out.len() < self.n() {
            let mut pick: Option<usize> = None;
            for l in 0..lanes {
                if pos[l] < lane_seq[l].len() && pick.is_none_or(|p| used[l] < used[p]) {
                    pick = Some(l);
                }
            }
            let Some(l) = pick else { break };
            let j = lane_seq[l][pos[l]];
            pos[l] += 1;
            used[l] += self.work[j as usize];
            out.push(j);
        }
        out
    }

    /// Candidate `i` of the partial simultaneous-start family, from `base`.
    fn group_starts(&self, g: &GridInstance, base: &Plan, i: u64, rng: &mut ChaCha8Rng) -> Plan {
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

/// A local swap or move of units, from `base`.
fn local_move(base: &Plan, window: usize, rng: &mut ChaCha8Rng) -> Plan {
    let mut p = base.clone();
    let n = p.units.len();
    if n < 2 {
        return p;
    }
    let i = below(rng, n as u64) as usize;
    let near = |rng: &mut ChaCha8Rng| {
        let w = window.clamp(1, n - 1);
        let off = 1 + below(rng, w as u64) as usize;
        if below(rng, 2) == 0 {
            (i + off).min(n - 1)
        } else {
            i.saturating_sub(off)
        }
    };
    match below(rng, 3) {
        0 => {
            let mut k = below(rng, n as u64 - 1) as usize;
            if k >= i {
                k += 1;
            }
            p.units.swap(i, k);
        }
        1 => {
            let k = near(rng);
            p.units.swap(i, k);
        }
        _ => {
            let k = near(rng);
            let u = p.units.remove(i);
            p.units.insert(k.min(p.units.len()), u);
        }
    }
    p
}

/// Running bests and counts of one workload's search.
struct State {
    deadline: i64,
    gpus: u32,
    fifo_gpu_h: f64,
    fifo_cache_h: f64,
    evaluated: u64,
    stats: Vec<FamilyStats>,
    trace: Vec<TraceRow>,
    fifo: Option<Found>,
    fastest: Option<Found>,
    best_gpu: Option<Found>,
    best_cache: Option<Found>,
    /// Non-dominated (GPU union, cache byte-ns) candidates, in the order found.
    front: Vec<Found>,
}

fn joint_value(gpu_h: f64, cache_h: f64, fifo_gpu_h: f64, fifo_cache_h: f64) -> f64 {
    let part = |v: f64, base: f64| if base > 0.0 { v / base } else { 0.0 };
    part(gpu_h, fifo_gpu_h) + part(cache_h, fifo_cache_h)
}

impl State {
    fn stat(&mut self, f: Family) -> &mut FamilyStats {
        let i = Family::ALL.iter().position(|&x| x == f).unwrap_or(0);
        &mut self.stats[i]
    }

    fn joint(&self, f: &Found) -> f64 {
        joint_value(f.gpu_h, f.cache_h, self.fifo_gpu_h, self.fifo_cache_h)
    }

    /// Fold evaluated candidates in candidate order.
    fn absorb(
        &mut self,
        family: Family,
        labels: Vec<String>,
        batch: Vec<(Plan, Option<Evaluation>)>,
    ) {
        for ((plan, eval), label) in batch.into_iter().zip(labels) {
            let candidate = self.evaluated;
            self.evaluated += 1;
            self.stat(family).evaluated += 1;
            let Some(eval) = eval else {
                self.stat(family).rejected_cap += 1;
                continue;
            };
            self.consider(family, Some(plan), eval, candidate, label);
        }
        self.record_trace(family);
    }

    /// Fold one evaluated feasible-or-late candidate (already counted as evaluated).
    fn consider(
        &mut self,
        family: Family,
        plan: Option<Plan>,
        eval: Evaluation,
        candidate: u64,
        label: String,
    ) {
        if eval.makespan > self.deadline {
            self.stat(family).rejected_deadline += 1;
            return;
        }
        let found = Found {
            gpu_h: gpu_hours(self.gpus, eval.gpu_union),
            cache_h: cache_hours(eval.cache_byte_ns),
            plan,
            eval,
            family,
            candidate,
            label,
        };
        if self.fifo.is_none() {
            self.fifo_gpu_h = found.gpu_h;
            self.fifo_cache_h = found.cache_h;
            self.fifo = Some(found.clone());
        }
        let mk = found.eval.makespan;
        let mut improved = false;
        let new_fastest = self.fastest.as_ref().is_none_or(|b| mk < b.eval.makespan);
        let new_gpu = self
            .best_gpu
            .as_ref()
            .is_none_or(|b| beats(found.gpu_h, mk, b.gpu_h, b.eval.makespan));
        let new_cache = self
            .best_cache
            .as_ref()
            .is_none_or(|b| beats(found.cache_h, mk, b.cache_h, b.eval.makespan));
        if new_fastest {
            self.fastest = Some(found.clone());
            improved = true;
        }
        if new_gpu {
            self.best_gpu = Some(found.clone());
            improved = true;
        }
        if new_cache {
            self.best_cache = Some(found.clone());
            improved = true;
        }
        // Pareto front on the exact integers: a point dominated by one stays out, and so
        // does one equal in both to an earlier one unless it is faster (then it replaces
        // it: the joint pick's ties prefer the smaller makespan).
        let key = (
            found.eval.gpu_union,
            found.eval.cache_byte_ns,
            found.eval.makespan,
        );
        let of = |f: &Found| (f.eval.gpu_union, f.eval.cache_byte_ns, f.eval.makespan);
        if !self
            .front
            .iter()
            .any(|f| crate::lns::dominated_by(key, of(f)))
        {
            self.front.retain(|f| !crate::lns::dominated_by(of(f), key));
            self.front.push(found);
            improved = true;
        }
        if improved && candidate > 0 {
            self.stat(family).improvements += 1;
        }
    }

    /// The joint compromise: the front point with the smallest
    /// `gpu/fifo_gpu + cache/fifo_cache` (ties: smaller makespan, then earlier found).
    fn best_joint(&self) -> Option<Found> {
        let mut by_candidate: Vec<&Found> = self.front.iter().collect();
        by_candidate.sort_by_key(|f| f.candidate);
        let mut best: Option<&Found> = None;
        for f in by_candidate {
            if best.is_none_or(|b| {
                beats(
                    self.joint(f),
                    f.eval.makespan,
                    self.joint(b),
                    b.eval.makespan,
                )
            }) {
                best = Some(f);
            }
        }
        best.cloned()
    }

    fn record_trace(&mut self, family: Family) {
        let rows = [
            (
                "gpu",
                self.best_gpu.as_ref().map(|b| b.gpu_h),
                self.best_gpu.as_ref(),
            ),
            (
                "cache",
                self.best_cache.as_ref().map(|b| b.cache_h),
                self.best_cache.as_ref(),
            ),
            (
                "makespan",
                self.fastest
                    .as_ref()
                    .map(|b| b.eval.makespan as f64 / 3.6e12),
                self.fastest.as_ref(),
            ),
        ];
        let mut out = Vec::new();
        for (objective, value, best) in rows {
            if let (Some(v), Some(b)) = (value, best) {
                out.push(TraceRow {
                    objective,
                    family,
                    candidates_evaluated: self.evaluated,
                    best_so_far_h: v,
                    best_makespan_s: b.eval.makespan as f64 / 1e9,
                });
            }
        }
        self.trace.extend(out);
    }
}

/// Evaluate `count` candidates made by `make(i)` on the pool, in parallel, in index order.
fn run_batch<F>(
    pool: &rayon::ThreadPool,
    g: &GridInstance,
    range: std::ops::Range<u64>,
    make: F,
) -> Vec<(Plan, Option<Evaluation>)>
where
    F: Fn(u64) -> Plan + Sync,
{
    pool.install(|| {
        range
            .into_par_iter()
            .map_init(Scratch::new, |scratch, i| {
                let plan = make(i);
                let eval = evaluate(g, &plan, scratch);
                (plan, eval)
            })
            .collect()
    })
}

/// Search one workload. `shared` is the replay's one RNG stream; this workload draws its
/// family seeds from it. The instance's quotas must already fit the caps.
pub fn search_workload(
    inst: &WorkloadInstance,
    g: &GridInstance,
    budget: &ReplayBudget,
    shared: &mut ChaCha8Rng,
    pool: &rayon::ThreadPool,
) -> Result<SearchOutcome, ReplayError> {
    inst.check_quotas_fit()?;
    let word_pos_before = word_pos(shared);
    // The seed's families draw first (in SPEC order), then issue 7's.
    let random_families = [
        Family::Perturbation,
        Family::TaskGrouping,
        Family::GroupStart,
        Family::LocalMoveGpu,
        Family::LocalMoveCache,
        Family::DutyOrder,
        Family::BlobGroupOrder,
        Family::LnsGpu,
        Family::LnsCache,
    ];
    let mut seeds = Vec::new();
    for f in random_families {
        let mut s = [0u8; 32];
        shared.fill_bytes(&mut s);
        seeds.push((f, s));
    }
    let seed_of = |f: Family| {
        seeds
            .iter()
            .find(|(x, _)| *x == f)
            .map(|(_, s)| *s)
            .unwrap_or([0u8; 32])
    };
    let rng_record = RngRecord {
        word_pos_before,
        word_pos_after: word_pos(shared),
        family_seeds: seeds
            .iter()
            .map(|(f, s)| (*f, s.iter().map(|b| format!("{b:02x}")).collect()))
            .collect(),
    };

    let st = Structure::new(inst, g);
    let gpus = inst.caps.gpus;
    let mut state = State {
        deadline: i64::MAX,
        gpus,
        fifo_gpu_h: 0.0,
        fifo_cache_h: 0.0,
        evaluated: 0,
        stats: Family::ALL
            .iter()
            .map(|&family| FamilyStats {
                family,
                evaluated: 0,
                rejected_deadline: 0,
                rejected_cap: 0,
                improvements: 0,
            })
            .collect(),
        trace: Vec::new(),
        fifo: None,
        fastest: None,
        best_gpu: None,
        best_cache: None,
        front: Vec::new(),
    };

    // Priority orders; FIFO first, which sets the deadline.
    let mut scratch = Scratch::new();
    let fifo_plan = Plan::from_order(&st.priority_order("fifo"));
    let fifo_eval = evaluate(g, &fifo_plan, &mut scratch);
    state.deadline = fifo_eval.as_ref().map_or(0, |e| e.makespan);
    let others: Vec<&str> = PRIORITY_ORDERS[1..].to_vec();
    let mut batch = vec![(fifo_plan, fifo_eval)];
    batch.extend(run_batch(pool, g, 0..others.len() as u64, |i| {
        Plan::from_order(&st.priority_order(others[i as usize]))
    }));
    let labels = PRIORITY_ORDERS
        .iter()
        .map(|o| format!("priority_order:{o}"))
        .collect();
    state.absorb(Family::PriorityOrder, labels, batch);

    // Fixed-count families from independent per-candidate streams.
    let chunked =
        |state: &mut State, family: Family, count: u32, make: &(dyn Fn(u64) -> Plan + Sync)| {
            let mut start = 0u64;
            while start < u64::from(count) {
                let end = (start + MAX_BATCH as u64).min(u64::from(count));
                let batch = run_batch(pool, g, start..end, make);
                let labels = (start..end)
                    .map(|i| format!("{}#{i}", family.as_str()))
                    .collect();
                state.absorb(family, labels, batch);
                start = end;
            }
        };
    let pseed = seed_of(Family::Perturbation);
    let spread = budget.perturbation_spread;
    chunked(
        &mut state,
        Family::Perturbation,
        budget.perturbations,
        &|i| {
            let mut r = candidate_rng(&pseed, i);
            Plan::from_order(&st.perturbed(i, &mut r, spread))
        },
    );
    let tseed = seed_of(Family::TaskGrouping);
    chunked(
        &mut state,
        Family::TaskGrouping,
        budget.task_groupings,
        &|i| {
            let mut r = candidate_rng(&tseed, i);
            Plan::from_order(&st.task_grouping(i, &mut r))
        },
    );
    let gseed = seed_of(Family::GroupStart);
    let base_cache = state.best_cache.as_ref().and_then(|b| b.plan.clone());
    let base_gpu = state.best_gpu.as_ref().and_then(|b| b.plan.clone());
    let fallback = Plan::from_order(&st.priority_order("grouped_by_task"));
    chunked(&mut state, Family::GroupStart, budget.group_starts, &|i| {
        let mut r = candidate_rng(&gseed, i);
        let base = if i % 2 == 0 { &base_cache } else { &base_gpu };
        st.group_starts(g, base.as_ref().unwrap_or(&fallback), i, &mut r)
    });

    // Local moves: hill climbing in batches from the current best of each objective.
    let window = (2 * g.concurrency.max(1)) as usize;
    for (family, objective_is_gpu) in [
        (Family::LocalMoveGpu, true),
        (Family::LocalMoveCache, false),
    ] {
        let seed = seed_of(family);
        let batch_size = u64::from(budget.local_move_batch.max(1));
        let mut start = 0u64;
        while start < u64::from(budget.local_moves) {
            let end = (start + batch_size).min(u64::from(budget.local_moves));
            let best = if objective_is_gpu {
                &state.best_gpu
            } else {
                &state.best_cache
            };
            let base = best
                .as_ref()
                .and_then(|b| b.plan.clone())
                .unwrap_or_else(|| fallback.clone());
            let batch = run_batch(pool, g, start..end, |i| {
                let mut r = candidate_rng(&seed, i);
                local_move(&base, window, &mut r)
            });
            let labels = (start..end)
                .map(|i| format!("{}#{i}", family.as_str()))
                .collect();
            state.absorb(family, labels, batch);
            start = end;
        }
    }

    let seed_best = (
        state.best_gpu.as_ref().map_or(0.0, |b| b.gpu_h),
        state.best_cache.as_ref().map_or(0.0, |b| b.cache_h),
    );

    // The fixed priority orders placed first-fit (backfilling): far shorter makespans than
    // their list schedules, hence smaller GPU unions.
    let ctx = LnsContext::new(g, state.deadline);
    let batch: Vec<(Option<Plan>, Option<Evaluation>)> = pool.install(|| {
        PRIORITY_ORDERS
            .par_iter()
            .map_init(Scratch::new, |scratch, name| {
                let order = st.priority_order(name);
                let e = crate::lns::first_fit_schedule(g, &ctx, &order)
                    .map(|starts| evaluate_starts(g, &starts, scratch));
                (None, e)
            })
            .collect()
    });
    fold_constructions(&mut state, Family::FirstFitOrder, 0, batch);

    // Duty orders (GPU): attempts of similar request duty run together; even candidates
    // are list schedules, odd ones the same order placed first-fit (backfilling).
    let dseed = seed_of(Family::DutyOrder);
    let kp = crate::bounds::k_prime(g, &(0..g.len() as u32).collect::<Vec<_>>()).max(1);
    let mut start = 0u64;
    let total = u64::from(budget.duty_orders);
    while start < total {
        let end = (start + MAX_BATCH as u64).min(total);
        let batch: Vec<(Option<Plan>, Option<Evaluation>)> = pool.install(|| {
            (start..end)
                .into_par_iter()
                .map_init(Scratch::new, |scratch, i| {
                    let mut r = candidate_rng(&dseed, i / 2);
                    let order = st.duty_order(i / 2, kp as usize, spread, &mut r);
                    if i % 2 == 0 {
                        let plan = Plan::from_order(&order);
                        let e = evaluate(g, &plan, scratch);
                        (Some(plan), e)
                    } else {
                        let e = crate::lns::first_fit_schedule(g, &ctx, &order)
                            .map(|starts| evaluate_starts(g, &starts, scratch));
                        (None, e)
                    }
                })
                .collect()
        });
        fold_constructions(&mut state, Family::DutyOrder, start, batch);
        start = end;
    }

    // Blob group orders (cache): first batch fixed and random group orders, then the group
    // order is searched from the family's best.
    blob_group_search(
        &mut state,
        &st,
        g,
        &ctx,
        budget,
        seed_of(Family::BlobGroupOrder),
        pool,
    );

    // Start-time neighbourhood search from the best of each objective.
    for (family, objective) in [
        (Family::LnsGpu, Objective::Gpu),
        (Family::LnsCache, Objective::Cache),
    ] {
        let seed = seed_of(family);
        let params = ChainParams {
            moves: budget.lns_moves,
            max_removed: budget.lns_max_removed,
            late_acceptance: budget.lns_late_acceptance,
        };
        for round in 0..u64::from(budget.lns_rounds) {
            let best = match objective {
                Objective::Gpu => state.best_gpu.as_ref(),
                Objective::Cache => state.best_cache.as_ref(),
            };
            let Some(base) = best.map(|b| b.eval.starts.clone()) else {
                break;
            };
            let chains = u64::from(budget.lns_chains);
            let outcomes: Vec<crate::lns::ChainOutcome> = pool.install(|| {
                (0..chains)
                    .into_par_iter()
                    .map(|c| {
                        let mut r = candidate_rng(&seed, round * chains + c);
                        run_chain(g, &ctx, &base, objective, params, &mut r)
                    })
                    .collect()
            });
            let first = state.evaluated;
            let mut points = Vec::new();
            for (c, o) in outcomes.iter().enumerate() {
                let offset = first + c as u64 * u64::from(params.moves);
                for p in &o.archive {
                    // found_at_move 0 is the round's starting schedule, already known.
                    if p.found_at_move == 0 {
                        continue;
                    }
                    points.push((
                        offset + p.found_at_move - 1,
                        format!("{}#r{round}c{c}m{}", family.as_str(), p.found_at_move),
                        &p.starts,
                    ));
                }
            }
            // Exact values of every point, recomputed from scratch in parallel.
            let evals: Vec<Evaluation> = pool.install(|| {
                points
                    .par_iter()
                    .map_init(Scratch::new, |scratch, (_, _, starts)| {
                        evaluate_starts(g, starts, scratch)
                    })
                    .collect()
            });
            for o in &outcomes {
                state.evaluated += o.moves;
                state.stat(family).evaluated += o.moves;
                state.stat(family).rejected_deadline += o.infeasible;
            }
            for ((candidate, label, _), eval) in points.into_iter().zip(evals) {
                state.consider(family, None, eval, candidate, label);
            }
            state.record_trace(family);
        }
    }

    let best_joint = state.best_joint();
    state.front.sort_by(|a, b| {
        a.eval
            .gpu_union
            .cmp(&b.eval.gpu_union)
            .then(a.candidate.cmp(&b.candidate))
    });
    match (
        state.fifo,
        state.fastest,
        state.best_gpu,
        state.best_cache,
        best_joint,
    ) {
        (Some(fifo), Some(fastest), Some(best_gpu), Some(best_cache), Some(best_joint)) => {
            Ok(SearchOutcome {
                fifo,
                fastest,
                best_gpu,
                best_cache,
                best_joint,
                front: state.front,
                seed_best,
                stats: state.stats,
                trace: state.trace,
                rng: rng_record,
                evaluated: state.evaluated,
            })
        }
        // Quotas were checked to fit, so the FIFO plan always schedules.
        _ => Err(ReplayError::FifoMismatch {
            workload: inst.workload.to_string(),
            detail: "the FIFO plan could not be scheduled".into(),
        }),
    }
}

/// Fold a batch of constructed candidates (list plans or first-fit start schedules) in
/// candidate order; `None` evaluations could not end by D.
fn fold_constructions(
    state: &mut State,
    family: Family,
    first: u64,
    batch: Vec<(Option<Plan>, Option<Evaluation>)>,
) {
    for (k, (plan, e)) in batch.into_iter().enumerate() {
        let candidate = state.evaluated;
        state.evaluated += 1;
        state.stat(family).evaluated += 1;
        let label = format!("{}#{}", family.as_str(), first + k as u64);
        match e {
            Some(e) => state.consider(family, plan, e, candidate, label),
            None => state.stat(family).rejected_deadline += 1,
        }
    }
    state.record_trace(family);
}

/// A blob group order: clusters (repository environments) as blocks of tasks.
type GroupOrder = Vec<Vec<u32>>;

/// A group order run in `lanes` side-by-side lanes.
#[derive(Debug, Clone, PartialEq)]
struct GroupPlan {
    lanes: usize,
    blocks: GroupOrder,
    /// Each block's tasks ordered by their longest attempt, longest first (a task's
    /// attempts stay together, longest first), instead of the block's own task order: the
    /// block's long attempts start first, so its window ends with short ones.
    tasks_by_longest: bool,
    /// Placed with group releases (`group_fit::first_fit_released`) instead of plain
    /// first-fit.
    released: bool,
}

/// Most lanes a group plan uses.
const MAX_LANES: usize = 12;

/// Mutate a group plan: swap or move cluster blocks, swap tasks inside a block, or change
/// the number of lanes by one.
fn mutate_groups(base: &GroupPlan, rng: &mut ChaCha8Rng) -> GroupPlan {
    let mut lanes = base.lanes;
    if below(rng, 4) == 0 {
        lanes = if below(rng, 2) == 0 {
            lanes.saturating_sub(1).max(1)
        } else {
            (lanes + 1).min(MAX_LANES)
        };
    }
    let mut o = base.blocks.clone();
    let steps = 1 + below(rng, 3);
    for _ in 0..steps {
        let n = o.len();
        match below(rng, 3) {
            0 if n >= 2 => {
                let (a, b) = (below(rng, n as u64) as usize, below(rng, n as u64) as usize);
                o.swap(a, b);
            }
            1 if n >= 2 => {
                let a = below(rng, n as u64) as usize;
                let block = o.remove(a);
                let b = below(rng, n as u64) as usize;
                o.insert(b.min(o.len()), block);
            }
            _ => {
                if n == 0 {
                    continue;
                }
                let c = below(rng, n as u64) as usize;
                let m = o[c].len();
                if m >= 2 {
                    let (a, b) = (below(rng, m as u64) as usize, below(rng, m as u64) as usize);
                    o[c].swap(a, b);
                }
            }
        }
    }
    let tasks_by_longest = if below(rng, 8) == 0 {
        !base.tasks_by_longest
    } else {
        base.tasks_by_longest
    };
    let released = if below(rng, 8) == 0 {
        !base.released
    } else {
        base.released
    };
    GroupPlan {
        lanes,
        blocks: o,
        tasks_by_longest,
        released,
    }
}

fn blob_group_search(
    state: &mut State,
    st: &Structure,
    g: &GridInstance,
    ctx: &LnsContext,
    budget: &ReplayBudget,
    seed: [u8; 32],
    pool: &rayon::ThreadPool,
) {
    let family = Family::BlobGroupOrder;
    let total = u64::from(budget.blob_group_orders);
    let batch_size = u64::from(budget.local_move_batch.max(1));
    let mut incumbent: Option<(u128, GroupPlan)> = None;
    let mut start = 0u64;
    while start < total {
        let end = (start + batch_size).min(total);
        // First batch (or until one is feasible): the 4 fixed group orders with 2..9 lanes
        // each, then random orders with 2..9 lanes; later batches mutate the best.
        let orders: Vec<GroupPlan> = (start..end)
            .map(|i| {
                let mut r = candidate_rng(&seed, i);
                match &incumbent {
                    Some((_, base)) if start > 0 => mutate_groups(base, &mut r),
                    _ => GroupPlan {
                        lanes: 2 + (i % 8) as usize,
                        blocks: st.group_order(if i < 32 { i / 8 } else { i }, &mut r),
                        tasks_by_longest: i % 2 == 1,
                        released: (i / 2) % 2 == 1,
                    },
                }
            })
            .collect();
        // Each plan is placed first-fit (backfilling), which keeps within D far more often
        // than the no-overtaking list schedule.
        let state_deadline = state.deadline;
        let batch: Vec<Option<Evaluation>> = pool.install(|| {
            orders
                .par_iter()
                .map_init(Scratch::new, |scratch, plan| {
                    let order = st.flatten_groups(plan);
                    if plan.released {
                        crate::group_fit::first_fit_released(
                            g,
                            state_deadline,
                            &order,
                            &st.block_of(plan),
                        )
                    } else {
                        crate::lns::first_fit_schedule(g, ctx, &order)
                    }
                    .map(|starts| evaluate_starts(g, &starts, scratch))
                })
                .collect()
        });
        for (k, e) in batch.iter().enumerate() {
            if let Some(e) = e
                && e.makespan <= state.deadline
                && incumbent.as_ref().is_none_or(|(v, _)| e.cache_byte_ns < *v)
            {
                incumbent = Some((e.cache_byte_ns, orders[k].clone()));
            }
        }
        fold_constructions(
            state,
            family,
            start,
            batch.into_iter().map(|e| (None, e)).collect(),
        );
        start = end;
    }
}
