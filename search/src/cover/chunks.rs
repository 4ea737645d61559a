//! A sorted list in chunks: insert and remove move at most a chunk.

/// A sorted list in chunks (insert and remove move at most a chunk; the `i`-th element by
/// a walk over the chunk lengths).
#[derive(Debug, Clone, Default)]
pub struct SortedChunks<T> {
    pub(super) chunks: Vec<Vec<T>>,
    /// The last element of each chunk (none is empty), searched without visiting them.
    lasts: Vec<T>,
    len: usize,
}

/// A place in a [`SortedChunks`]: chunk and index in it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cursor {
    pub(super) chunk: usize,
    pub(super) pos: usize,
}

/// Most elements of a chunk before it splits.
const CHUNK: usize = 128;

impl<T: Ord + Copy> SortedChunks<T> {
    /// From a sorted vector.
    pub fn from_sorted(v: &[T]) -> Self {
        debug_assert!(v.windows(2).all(|w| w[0] <= w[1]));
        let chunks: Vec<Vec<T>> = v.chunks(CHUNK / 2).map(|c| c.to_vec()).collect();
        SortedChunks {
            lasts: chunks.iter().filter_map(|c| c.last().copied()).collect(),
            chunks,
            len: v.len(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk that holds (or would hold) `x`.
    #[inline]
    fn chunk_of(&self, x: &T) -> usize {
        self.lasts
            .partition_point(|l| l < x)
            .min(self.chunks.len().saturating_sub(1))
    }

    /// Insert `x`.
    pub fn insert(&mut self, x: T) {
        if self.chunks.is_empty() {
            self.chunks.push(vec![x]);
            self.lasts.push(x);
            self.len = 1;
            return;
        }
        let c = self.chunk_of(&x);
        let chunk = &mut self.chunks[c];
        let pos = chunk.partition_point(|p| *p < x);
        chunk.insert(pos, x);
        if chunk.len() > CHUNK {
            let tail = chunk.split_off(CHUNK / 2);
            let tail_last = *tail.last().expect("a split keeps both halves");
            self.chunks.insert(c + 1, tail);
            self.lasts.insert(c + 1, tail_last);
        }
        self.lasts[c] = *self.chunks[c].last().expect("chunks are not empty");
        self.len += 1;
    }

    /// Remove one `x`; false when absent.
    pub fn remove(&mut self, x: &T) -> bool {
        self.remove_at(x).is_some()
    }

    /// Remove one `x`; where it was (now the place of the first element after it), or
    /// `None` when absent.
    pub(super) fn remove_at(&mut self, x: &T) -> Option<Cursor> {
        if self.chunks.is_empty() {
            return None;
        }
        let c = self.chunk_of(x);
        let chunk = &mut self.chunks[c];
        let pos = chunk.binary_search(x).ok()?;
        chunk.remove(pos);
        self.len -= 1;
        match chunk.last() {
            Some(&last) => self.lasts[c] = last,
            None => {
                self.chunks.remove(c);
                self.lasts.remove(c);
                return Some(Cursor { chunk: c, pos: 0 });
            }
        }
        Some(Cursor { chunk: c, pos })
    }

    /// The `i`-th smallest element.
    pub fn get(&self, mut i: usize) -> Option<T> {
        for c in &self.chunks {
            if i < c.len() {
                return Some(c[i]);
            }
            i -= c.len();
        }
        None
    }

    /// Where the first element `>= key` is (past the last chunk when every element is
    /// smaller).
    #[inline]
    pub(super) fn lower_bound(&self, key: &T) -> Cursor {
        let chunk = self.lasts.partition_point(|l| l < key);
        let pos = self
            .chunks
            .get(chunk)
            .map_or(0, |ch| ch.partition_point(|p| p < key));
        Cursor { chunk, pos }
    }

    /// The elements `>= key`, in order.
    pub fn iter_from<'a>(&'a self, key: &T) -> impl Iterator<Item = T> + 'a {
        self.iter_at(self.lower_bound(key))
    }

    /// The elements from `at` on, in order.
    fn iter_at(&self, at: Cursor) -> impl Iterator<Item = T> + '_ {
        self.chunks
            .get(at.chunk..)
            .unwrap_or(&[])
            .iter()
            .enumerate()
            .flat_map(move |(k, ch)| ch[if k == 0 { at.pos } else { 0 }..].iter().copied())
    }

    /// All elements, in order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.chunks.iter().flatten().copied()
    }
}
