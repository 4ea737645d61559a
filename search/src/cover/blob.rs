//! The blob cover of the cache objective: one blob group's placed users' lifetimes and the
//! gap set of their union.

use super::GapSet;
use super::chunks::{Cursor, SortedChunks};

/// Visit, in order, the pieces of `[x, y)` that no user of `users` (lifetimes sorted by
/// start, none longer than `dmax`) covers once those `excluded` tells are left out. `split`
/// is a place in `users` with no user starting after `x` before it and none starting
/// before `x` from it.
fn uncovered_pieces(
    users: &SortedChunks<(i64, i64, u32)>,
    split: Cursor,
    dmax: i64,
    x: i64,
    y: i64,
    excluded: impl Fn(u32) -> bool,
    mut piece: impl FnMut(i64, i64),
) {
    if y <= x {
        return;
    }
    // The users before `split` cover `[x, the farthest of their ends)`: read them from
    // `split` down (none that starts before `x - dmax` reaches `x`), and stop at one that
    // reaches `y` (on shared blobs, usually among the first few).
    // (Plain loops over the chunks: the chained iterators cost more.)
    let mut reach = x;
    let chunks = &users.chunks;
    'before: for c in (0..(split.chunk + 1).min(chunks.len())).rev() {
        let chunk = &chunks[c];
        let end = if c == split.chunk {
            split.pos
        } else {
            chunk.len()
        };
        for &(ls, le, u) in chunk[..end].iter().rev() {
            if ls < x - dmax {
                break 'before;
            }
            if le > reach && !excluded(u) {
                reach = le;
                if reach >= y {
                    return;
                }
            }
        }
    }
    // Then the users from `split` (starting at `x` or inside `(x, y)`), in order.
    'from: for (c, chunk) in chunks.iter().enumerate().skip(split.chunk) {
        let from = if c == split.chunk { split.pos } else { 0 };
        for &(ls, le, u) in &chunk[from..] {
            if ls >= y {
                break 'from;
            }
            if le <= reach || excluded(u) {
                continue;
            }
            if ls > reach {
                piece(reach, ls);
            }
            reach = le;
            if reach >= y {
                break 'from;
            }
        }
    }
    if reach < y {
        piece(reach, y);
    }
}

/// Far ends of a blob's gap set (every lifetime lies strictly inside).
const FAR: i64 = i64::MAX / 4;

/// The placed users of one blob: their lifetimes `(start, end, attempt)` sorted, and the
/// gaps of their union on the whole line.
#[derive(Debug, Clone)]
pub struct BlobCover {
    users: SortedChunks<(i64, i64, u32)>,
    gaps: GapSet,
    /// Longest duration among the blob's possible users, ns.
    dmax: i64,
}

impl BlobCover {
    /// No user placed; `dmax` bounds every user's duration.
    pub fn new(dmax: i64) -> Self {
        BlobCover {
            users: SortedChunks::default(),
            gaps: GapSet::whole(-FAR, FAR),
            dmax,
        }
    }

    /// From the placed users' lifetimes (any order).
    pub fn from_lifetimes(mut lives: Vec<(i64, i64, u32)>, dmax: i64) -> Self {
        lives.sort_unstable();
        let mut gaps = Vec::new();
        let mut reach = -FAR;
        for &(s, e, _) in &lives {
            if e <= s {
                continue;
            }
            if s > reach {
                gaps.push((reach, s));
            }
            reach = reach.max(e);
        }
        gaps.push((reach, FAR));
        BlobCover {
            users: SortedChunks::from_sorted(&lives),
            gaps: GapSet { gaps },
            dmax,
        }
    }

    /// The placed users' lifetimes, sorted by (start, end, attempt).
    pub fn users(&self) -> &SortedChunks<(i64, i64, u32)> {
        &self.users
    }

    /// The first start and the last end of the placed users (`None` when none is placed).
    #[inline]
    pub fn hull(&self) -> Option<(i64, i64)> {
        let gaps = self.gaps.as_slice();
        // The first gap ends at the first start, the last begins at the last end (every
        // lifetime lies strictly inside the far ends).
        (gaps.len() >= 2).then(|| (gaps[0].1, gaps[gaps.len() - 1].0))
    }

    /// Length of `[x, y)` no placed user covers.
    #[inline]
    pub fn uncovered(&self, x: i64, y: i64) -> i64 {
        self.gaps.overlap_len(x, y)
    }

    /// Length of `[x, y)` no placed user covers once the users `excluded` tells are left
    /// out (the cover is not changed): a scan of the users around `[x, y)`.
    pub fn uncovered_without(&self, x: i64, y: i64, excluded: impl Fn(u32) -> bool) -> i64 {
        let mut unc = 0i64;
        let split = self.users.lower_bound(&(x, i64::MIN, 0));
        uncovered_pieces(&self.users, split, self.dmax, x, y, excluded, |a, b| {
            unc += b - a
        });
        unc
    }

    /// Place user `j` over `[x, y)`; returns the length it adds to the union.
    pub fn insert(&mut self, x: i64, y: i64, j: u32) -> i64 {
        let unc = self.gaps.overlap_len(x, y);
        if unc > 0 {
            self.gaps.subtract(x, y);
        }
        self.users.insert((x, y, j));
        unc
    }

    /// Remove user `j` placed over `[x, y)`; returns the length it leaves uncovered.
    pub fn remove(&mut self, x: i64, y: i64, j: u32) -> i64 {
        // Where it was splits the others as the scan needs (before it none starts after x,
        // from it none before).
        let removed = self.users.remove_at(&(x, y, j));
        debug_assert!(removed.is_some(), "user {j} placed over [{x}, {y})");
        let split = removed.unwrap_or_else(|| self.users.lower_bound(&(x, i64::MIN, 0)));
        let mut unc = 0i64;
        let gaps = &mut self.gaps;
        uncovered_pieces(
            &self.users,
            split,
            self.dmax,
            x,
            y,
            |_| false,
            |a, b| {
                gaps.add(a, b);
                unc += b - a;
            },
        );
        unc
    }

    /// The gaps (for tests).
    pub fn gaps(&self) -> &GapSet {
        &self.gaps
    }
}
