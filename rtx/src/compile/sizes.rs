//! What a training step keeps per input size: a model whose forward is generic over its
//! batch dim runs one `TrainStep` on batches of several sizes (the last batch of an epoch is
//! smaller), and a CUDA graph holds the sizes it was captured with. So a step keeps one entry
//! per size, keyed by the run-time sizes of all its tensors, and at most a fixed number of
//! them, dropping the least recently used: a size seen once per epoch does not pile up
//! graphs, and a stream of ever-new sizes costs a bounded amount of device memory.
//!
//! Invariant: at most `cap` entries, the most recently used last.

/// How many sizes a step keeps unless told otherwise: a training and an evaluation batch
/// size, each with its smaller last batch.
pub(super) const DEFAULT_MAX_SIZES: usize = 4;

/// Entries keyed by run-time sizes, at most `cap` of them, the least recently used dropped
/// first.
pub(super) struct PerSize<T> {
    cap: usize,
    entries: Vec<(Vec<usize>, T)>,
}

impl<T> PerSize<T> {
    /// An empty cache holding at most `cap` entries (at least 1).
    pub(super) fn new(cap: usize) -> Self {
        PerSize {
            cap: cap.max(1),
            entries: Vec::new(),
        }
    }

    /// Changes the bound, dropping the least recently used entries beyond it.
    pub(super) fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
        let excess = self.entries.len().saturating_sub(self.cap);
        self.entries.drain(..excess);
    }

    /// The entry of `key`, now the most recently used; `None` when there is none.
    pub(super) fn get_mut(&mut self, key: &[usize]) -> Option<&mut T> {
        let at = self.entries.iter().position(|(k, _)| k == key)?;
        let entry = self.entries.remove(at);
        self.entries.push(entry);
        self.entries.last_mut().map(|(_, v)| v)
    }

    /// Adds `value` under `key` (not yet present) as the most recently used entry, dropping
    /// the least recently used one when the cache is full.
    pub(super) fn insert(&mut self, key: Vec<usize>, value: T) -> &mut T {
        if self.entries.len() == self.cap {
            self.entries.remove(0);
        }
        self.entries.push((key, value));
        let last = self.entries.len() - 1;
        &mut self.entries[last].1
    }

    /// The most recently used entry.
    pub(super) fn last(&self) -> Option<&T> {
        self.entries.last().map(|(_, v)| v)
    }

    /// The keys, least recently used first.
    pub(super) fn keys(&self) -> Vec<Vec<usize>> {
        self.entries.iter().map(|(k, _)| k.clone()).collect()
    }

    /// The entries' values.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::PerSize;

    #[test]
    fn keeps_the_most_recently_used_within_its_bound() {
        let mut c = PerSize::new(2);
        c.insert(vec![128, 10], 'a');
        c.insert(vec![96, 10], 'b');
        // Using 128 again makes 96 the least recently used, so a third size drops it.
        assert_eq!(c.get_mut(&[128, 10]).copied(), Some('a'));
        c.insert(vec![64, 10], 'c');
        assert_eq!(c.keys(), vec![vec![128, 10], vec![64, 10]]);
        assert!(c.get_mut(&[96, 10]).is_none());
        assert_eq!(c.last(), Some(&'c'));
        c.set_cap(1);
        assert_eq!(c.keys(), vec![vec![64, 10]]);
        assert_eq!(c.values().count(), 1);
    }
}
