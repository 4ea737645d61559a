//! Blob groups: repositories (blob clusters) as blocks of tasks, dealt to
//! side-by-side lanes and placed first-fit or with group releases; the group order, lane
//! count and switches are searched from the family's best.

use crate::families::{Family, ReplayBudget};
use crate::fold_constructions;
use crate::lns::LnsContext;
use crate::orders::Structure;
use crate::seeded::{below, candidate_rng, shuffle};
use crate::state::State;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use schedule::evaluate::{Evaluation, GridInstance, Scratch, evaluate_starts};

/// A blob group order: clusters (repository environments) as blocks of tasks.
pub(super) type GroupOrder = Vec<Vec<u32>>;

/// A group order run in `lanes` side-by-side lanes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GroupPlan {
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

/// The blob-group search, resumable one batch at a time: the first batch holds the fixed
/// group orders with 2..9 lanes (then random orders), later batches mutate the family's
/// best plan so far.
pub(super) struct BlobGroupSearch {
    seed: [u8; 32],
    /// Candidates generated so far (the next one's stream index).
    next: u64,
    /// The family's best feasible plan by cache byte-ns.
    incumbent: Option<(u128, GroupPlan)>,
}

impl BlobGroupSearch {
    pub(super) fn new(seed: [u8; 32]) -> Self {
        BlobGroupSearch {
            seed,
            next: 0,
            incumbent: None,
        }
    }

    /// Candidates left under the budget's cap.
    pub(super) fn left(&self, budget: &ReplayBudget) -> u64 {
        u64::from(budget.blob_group_orders).saturating_sub(self.next)
    }

    /// Generate, evaluate and fold one batch (at most `local_move_batch` candidates).
    pub(super) fn batch(
        &mut self,
        state: &mut State,
        st: &Structure,
        g: &GridInstance,
        ctx: &LnsContext,
        budget: &ReplayBudget,
        pool: &rayon::ThreadPool,
    ) {
        let family = Family::BlobGroupOrder;
        let batch_size = u64::from(budget.local_move_batch.max(1));
        let start = self.next;
        let end = (start + batch_size).min(u64::from(budget.blob_group_orders));
        if end <= start {
            return;
        }
        self.next = end;
        let seed = self.seed;
        let incumbent = &self.incumbent;
        // First batch (or until one is feasible): the 4 fixed group orders with 2..9 lanes
        // each, then random orders with 2..9 lanes; later batches mutate the best.
        let orders: Vec<GroupPlan> = (start..end)
            .map(|i| {
                let mut r = candidate_rng(&seed, i);
                match incumbent {
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
                && self
                    .incumbent
                    .as_ref()
                    .is_none_or(|(v, _)| e.cache_byte_ns < *v)
            {
                self.incumbent = Some((e.cache_byte_ns, orders[k].clone()));
            }
        }
        fold_constructions(
            state,
            family,
            start,
            batch.into_iter().map(|e| (None, e)).collect(),
        );
    }
}

impl Structure {
    /// Candidate `i` of the first blob-group batch: clusters (repository environments) as
    /// blocks of tasks. 0: clusters and tasks by total duration, longest first; 1: by first
    /// FIFO appearance; 2: clusters shortest total first; 3: clusters by attempt count;
    /// then random cluster and task orders.
    pub(super) fn group_order(&self, i: u64, rng: &mut ChaCha8Rng) -> GroupOrder {
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

    /// The block of each attempt under a group plan (index into `plan.blocks`).
    pub(super) fn block_of(&self, plan: &GroupPlan) -> Vec<u32> {
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

    /// The attempt order of a group plan: blocks are dealt to `lanes` lanes (each to the
    /// lane with the least capacity-time so far); a lane lists its blocks' tasks in order
    /// (or, with `tasks_by_longest`, by their longest attempt, longest first), a task's
    /// attempts longest first; the lanes are merged by taking next the attempt of
    /// the lane with the least capacity-time consumed (ties: lower lane), so `lanes` groups
    /// run side by side and their quotas mix.
    pub(super) fn flatten_groups(&self, plan: &GroupPlan) -> Vec<u32> {
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
}
