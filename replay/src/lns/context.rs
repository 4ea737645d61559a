//! The static structure every start-time chain of a workload shares: blob users, longest
//! durations, the deadline and the request cover's bucket width.

use crate::evaluate::GridInstance;

/// How many of an attempt's blobs (the most specific) a cache-chain reinsertion aligns with.
const ALIGN_BLOBS: usize = 3;

/// Static structure shared by every chain of a workload.
#[derive(Debug, Clone)]
pub struct LnsContext {
    /// Users of each blob.
    pub(super) blob_users: Vec<Vec<u32>>,
    /// Longest duration among a blob's users, ns.
    pub(super) blob_dmax: Vec<i64>,
    /// Per attempt, its [`ALIGN_BLOBS`] most specific blobs (fewest users, then lowest
    /// id), most specific first, at `align_first[j]..align_first[j + 1]`: the blobs the
    /// cache chain's reinsertions align with.
    pub(super) align_blobs: Vec<u32>,
    /// Where each attempt's run of `align_blobs` starts (one longer than the attempts).
    pub(super) align_first: Vec<usize>,
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

    /// The blobs `j`'s reinsertions align with, most specific first.
    pub(super) fn align_blobs_of(&self, j: u32) -> &[u32] {
        let j = j as usize;
        &self.align_blobs[self.align_first[j]..self.align_first[j + 1]]
    }

    /// Structure of a workload with deadline `deadline`.
    pub fn new(g: &GridInstance, deadline: i64) -> Self {
        let mut blob_users = vec![Vec::new(); g.blob_bytes.len()];
        let mut blob_dmax = vec![0i64; g.blob_bytes.len()];
        for j in 0..g.len() {
            for &b in &g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]] {
                blob_users[b as usize].push(j as u32);
                blob_dmax[b as usize] = blob_dmax[b as usize].max(g.duration[j]);
            }
        }
        let mut align_blobs = Vec::new();
        let mut align_first = Vec::with_capacity(g.len() + 1);
        let mut mine = Vec::new();
        for j in 0..g.len() {
            align_first.push(align_blobs.len());
            mine.clear();
            mine.extend_from_slice(&g.blob_ids[g.blob_first[j]..g.blob_first[j + 1]]);
            mine.sort_by_key(|&b| (blob_users[b as usize].len(), b));
            align_blobs.extend(mine.iter().take(ALIGN_BLOBS));
        }
        align_first.push(align_blobs.len());
        // About four requests' worth of time per bucket: a bucket's partial pieces then
        // usually fit the request cover's one-cache-line list.
        let target = (g.request_count() / 4).max(1) as u64;
        let span = deadline.max(1) as u64;
        let mut shift = 0u32;
        while (span >> shift) > target {
            shift += 1;
        }
        LnsContext {
            blob_users,
            blob_dmax,
            align_blobs,
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
