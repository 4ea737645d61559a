//! The static structure every start-time chain of a workload shares: blob users, the blob
//! groups the chains keep one cover for, longest durations, the deadline and the request
//! cover's bucket width.

use schedule::evaluate::GridInstance;
use std::sync::Arc;

/// How many of an attempt's blobs (the most specific) a cache-chain reinsertion aligns with.
const ALIGN_BLOBS: usize = 3;

/// One run of values per attempt, flattened: attempt `j`'s at `first[j]..first[j + 1]`.
#[derive(Debug, Clone)]
struct PerAttempt {
    values: Vec<u32>,
    /// Where each attempt's run starts (one longer than the attempts).
    first: Vec<usize>,
}

impl PerAttempt {
    fn new() -> Self {
        PerAttempt {
            values: Vec::new(),
            first: vec![0],
        }
    }

    /// Add the next attempt's run.
    fn push(&mut self, run: impl IntoIterator<Item = u32>) {
        self.values.extend(run);
        self.first.push(self.values.len());
    }

    /// Attempt `j`'s run.
    #[inline]
    fn of(&self, j: u32) -> &[u32] {
        let j = j as usize;
        &self.values[self.first[j]..self.first[j + 1]]
    }
}

/// Blobs with the same users (the layers of one image, say) have the same cover, so the
/// chains keep one cover per group of them, whose bytes are the sum of its blobs'. Groups
/// are numbered in the order of their first blob.
#[derive(Debug, Clone)]
pub(super) struct BlobGroups {
    /// Bytes of each group (the sum over its blobs).
    pub(super) group_bytes: Vec<u128>,
    /// Longest duration among a group's users, ns.
    pub(super) group_dmax: Vec<i64>,
    /// Per attempt, the groups of its blobs (each once).
    groups: PerAttempt,
}

impl BlobGroups {
    /// The groups of `j`'s blobs (each once).
    #[inline]
    pub(super) fn of(&self, j: u32) -> &[u32] {
        self.groups.of(j)
    }
}

/// Static structure shared by every chain of a workload.
#[derive(Debug, Clone)]
pub struct LnsContext {
    /// Users of each blob.
    pub(super) blob_users: Vec<Vec<u32>>,
    /// The blob groups the chains keep one cover for.
    pub(super) groups: Arc<BlobGroups>,
    /// Per attempt, the covers (blob groups) of its [`ALIGN_BLOBS`] most specific blobs
    /// (fewest users, then lowest id), most specific first: whose users the cache chain's
    /// reinsertions align with (a group twice when two of the blobs share it, as they would
    /// be read twice).
    align_covers: PerAttempt,
    /// Longest duration, ns.
    pub(super) dmax: i64,
    /// The deadline D, ns.
    pub(super) deadline: i64,
    /// Bucket width of the request cover index, as a shift.
    pub(super) shift: u32,
    /// Prefix sums of the request lengths (aligned with `request_start`, one longer).
    pub(super) request_prefix: Vec<i64>,
    /// Mean duration, ns (1 for no attempt): the step profile's bucket width and the
    /// whole-window reinsertion's reach derive from it.
    pub(super) mean_duration: i64,
}

impl LnsContext {
    /// The deadline D, ns.
    pub fn deadline(&self) -> i64 {
        self.deadline
    }

    /// The covers whose users `j`'s reinsertions align with, most specific first.
    pub(super) fn align_covers_of(&self, j: u32) -> &[u32] {
        self.align_covers.of(j)
    }

    /// Structure of a workload with deadline `deadline`.
    pub fn new(g: &GridInstance, deadline: i64) -> Self {
        let mut blob_users = vec![Vec::new(); g.blob_bytes.len()];
        for j in 0..g.len() {
            for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
                blob_users[b as usize].push(j as u32);
            }
        }
        // Blobs with the same users (each list ascends) share a group.
        let mut group_of_users: std::collections::BTreeMap<&[u32], u32> = Default::default();
        let mut group_bytes: Vec<u128> = Vec::new();
        let mut group_dmax: Vec<i64> = Vec::new();
        let blob_group: Vec<u32> = blob_users
            .iter()
            .zip(&g.blob_bytes)
            .map(|(users, &bytes)| {
                let next = group_bytes.len() as u32;
                let k = *group_of_users.entry(users.as_slice()).or_insert(next);
                if k == next {
                    group_bytes.push(0);
                    group_dmax.push(
                        users
                            .iter()
                            .map(|&j| g.duration[j as usize])
                            .max()
                            .unwrap_or(0),
                    );
                }
                group_bytes[k as usize] += u128::from(bytes);
                k
            })
            .collect();
        let mut groups = PerAttempt::new();
        let mut align_covers = PerAttempt::new();
        let (mut run, mut mine) = (Vec::new(), Vec::new());
        for j in 0..g.len() {
            mine.clear();
            mine.extend_from_slice(&g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]]);
            run.clear();
            for &b in &mine {
                let k = blob_group[b as usize];
                if !run.contains(&k) {
                    run.push(k);
                }
            }
            groups.push(run.iter().copied());
            mine.sort_by_key(|&b| (blob_users[b as usize].len(), b));
            align_covers.push(
                mine.iter()
                    .take(ALIGN_BLOBS)
                    .map(|&b| blob_group[b as usize]),
            );
        }
        // About four requests' worth of time per bucket: a bucket's partial pieces then
        // usually fit the request cover's one-cache-line list.
        let target = (g.request_count() / 4).max(1) as u64;
        let span = deadline.max(1) as u64;
        let mut shift = 0u32;
        while (span >> shift) > target {
            shift += 1;
        }
        LnsContext {
            groups: Arc::new(BlobGroups {
                group_bytes,
                group_dmax,
                groups,
            }),
            blob_users,
            align_covers,
            dmax: g.duration.iter().copied().max().unwrap_or(0),
            mean_duration: if g.is_empty() {
                1
            } else {
                g.duration.iter().sum::<i64>() / g.len() as i64
            },
            deadline,
            shift,
            request_prefix: std::iter::once(0)
                .chain(
                    g.request_start
                        .iter()
                        .zip(&g.request_end)
                        .scan(0i64, |acc, (s, e)| {
                            *acc += e - s;
                            Some(*acc)
                        }),
                )
                .collect(),
        }
    }
}
