//! The gap set of a cover: sorted, disjoint, non-touching intervals where nothing is placed.

/// Sorted, disjoint, non-touching half-open intervals `[a, b)` (`a < b`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GapSet {
    pub(super) gaps: Vec<(i64, i64)>,
}

impl GapSet {
    /// No gaps.
    pub fn new() -> Self {
        GapSet { gaps: Vec::new() }
    }

    /// The single gap `[a, b)` (empty when `a >= b`).
    pub fn whole(a: i64, b: i64) -> Self {
        let mut s = GapSet::new();
        s.add(a, b);
        s
    }

    /// The gaps, sorted.
    pub fn as_slice(&self) -> &[(i64, i64)] {
        &self.gaps
    }

    /// Number of gaps.
    pub fn len(&self) -> usize {
        self.gaps.len()
    }

    /// True when there are no gaps.
    pub fn is_empty(&self) -> bool {
        self.gaps.is_empty()
    }

    /// The gaps overlapping `[a, b)` (in order; the first and last may stick out).
    #[inline]
    pub fn overlapping(&self, a: i64, b: i64) -> &[(i64, i64)] {
        Self::overlapping_in(&self.gaps, a, b)
    }

    /// The intervals of `sorted` (sorted and disjoint) overlapping `[a, b)`.
    #[inline]
    pub fn overlapping_in(sorted: &[(i64, i64)], a: i64, b: i64) -> &[(i64, i64)] {
        let i = sorted.partition_point(|g| g.1 <= a);
        let rest = &sorted[i..];
        let n = rest.iter().take_while(|g| g.0 < b).count();
        &rest[..n]
    }

    /// Length of `[a, b)` inside the gaps.
    #[inline]
    pub fn overlap_len(&self, a: i64, b: i64) -> i64 {
        self.overlapping(a, b)
            .iter()
            .map(|g| g.1.min(b) - g.0.max(a))
            .sum()
    }

    /// Add `[a, b)` to the gaps (merging with the gaps it overlaps or touches).
    pub fn add(&mut self, a: i64, b: i64) {
        if a >= b {
            return;
        }
        let i = self.gaps.partition_point(|g| g.1 < a);
        let j = i + self.gaps[i..].iter().take_while(|g| g.0 <= b).count();
        let (mut na, mut nb) = (a, b);
        if i < j {
            na = na.min(self.gaps[i].0);
            nb = nb.max(self.gaps[j - 1].1);
        }
        if j == i + 1 {
            self.gaps[i] = (na, nb);
        } else {
            self.gaps.splice(i..j, [(na, nb)]);
        }
    }

    /// Remove `[a, b)` from the gaps.
    pub fn subtract(&mut self, a: i64, b: i64) {
        if a >= b {
            return;
        }
        let i = self.gaps.partition_point(|g| g.1 <= a);
        let j = i + self.gaps[i..].iter().take_while(|g| g.0 < b).count();
        if i == j {
            return;
        }
        let (first, last) = (self.gaps[i], self.gaps[j - 1]);
        let left = (first.0 < a).then_some((first.0, a));
        let right = (last.1 > b).then_some((b, last.1));
        match (left, right, j - i) {
            (Some(l), None, 1) => self.gaps[i] = l,
            (None, Some(r), 1) => self.gaps[i] = r,
            _ => {
                self.gaps.splice(i..j, left.into_iter().chain(right));
            }
        }
    }
}
