//! The static structure every start-time chain of a workload shares: blob users, the blob
//! groups the chains keep one cover for, longest durations, the deadline and the request
//! cover's bucket width.

use crate::evaluate::GridInstance;
use std::sync::Arc;

/// How many of an attempt's blobs (the most specific) a cache-chain reinsertion aligns with.
const ALIGN_BLOBS: usize = 3;

/// Blobs with the same users (the layers of one image, say) have the same cover, so the
/// chains keep one cover per group of them, whose bytes are the sum of its blobs'. Groups
/// are numbered in the order of their first blob.
#[derive(Debug, Clone)]
pub(super) struct BlobGroups {
    /// Bytes of each group (the sum over its blobs).
    pub(super) group_bytes: Vec<u128>,
    /// Longest duration among a group's users, ns.
    pub(super) group_dmax: Vec<i64>,
    /// Per attempt, the groups of its blobs (each once), at
    /// `groups_first[j]..groups_first[j + 1]`.
    groups: Vec<u32>,
    /// Where each attempt's run of `groups` starts (one longer than the attempts).
    groups_first: Vec<usize>,
}

impl BlobGroups {
    /// The groups of `j`'s blobs (each once).
    #[inline]
    pub(super) fn of(&self, j: u32) -> &[u32] {
        let j = j as usize;
        &self.groups[self.groups_first[j]..self.groups_first[j + 1]]
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
    /// (fewest users, then lowest id), most specific first, at
    /// `align_first[j]..align_first[j + 1]`: whose users the cache chain's reinsertions
    /// align with (a group twice when two of the blobs share it, as they would be read
    /// twice).
    align_covers: Vec<u32>,
    /// Where each attempt's run of `align_covers` starts (one longer than the attempts).
    align_first: Vec<usize>,
    /// Longest duration, ns.
    pub(super) dmax: i64,
    /// The deadline D, ns.
    pub(super) deadline: i64,
    /// Bucket width of the request cover index, as a shift.
    pub(super) shift: u32,
    /// Prefix sums of the request lengths (aligned with `request_start`, one longer).
    pub(super) request_prefix: Vec<i64>,
}

impl LnsContext {
    /// The deadline D, ns.
    pub fn deadline(&self) -> i64 {
        self.deadline
    }

    /// The covers whose users `j`'s reinsertions align with, most specific first.
    pub(super) fn align_covers_of(&self, j: u32) -> &[u32] {
        let j = j as usize;
        &self.align_covers[self.align_first[j]..self.align_first[j + 1]]
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
        let mut groups = Vec::new();
        let mut groups_first = Vec::with_capacity(g.len() + 1);
        for j in 0..g.len() {
            groups_first.push(groups.len());
            let from = groups.len();
            for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
                let k = blob_group[b as usize];
                if !groups[from..].contains(&k) {
                    groups.push(k);
                }
            }
        }
        groups_first.push(groups.len());
        let mut align_covers = Vec::new();
        let mut align_first = Vec::with_capacity(g.len() + 1);
        let mut mine = Vec::new();
        for j in 0..g.len() {
            align_first.push(align_covers.len());
            mine.clear();
            mine.extend_from_slice(&g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]]);
            mine.sort_by_key(|&b| (blob_users[b as usize].len(), b));
            align_covers.extend(
                mine.iter()
                    .take(ALIGN_BLOBS)
                    .map(|&b| blob_group[b as usize]),
            );
        }
        align_first.push(align_covers.len());
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
                groups_first,
            }),
            blob_users,
            align_covers,
            align_first,
            dmax: g.duration.iter().copied().max().unwrap_or(0),
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
