//! Key-value caches: [`BatchKvCache`], the keys and values of a batch of sequences of their
//! own lengths, and [`KvCache`], the same for one sequence.
//!
//! Layout: per block, keys and values are `[batch, kv_heads, max_len, head_dim]`, allocated
//! once. Sequence `s`'s positions of one head are contiguous, rows `0..len(s)` of its
//! `[max_len, head_dim]` slab: the unit a paged cache would later split into fixed-size
//! pages, with a page table in place of the slab's base. Positions past a sequence's length
//! hold stale values that nothing reads.

use rtx::prelude::*;

/// One block's keys or values: `[batch, kv_heads, max_len, head_dim]`.
pub type CacheTensor = Tensor<(usize, usize, usize, usize)>;

/// The keys and values of a batch of sequences, each of its own length, for every block of
/// a [`super::Llama`]: what [`super::Llama::forward_batch`] appends to and attends over.
#[derive(Debug)]
pub struct BatchKvCache {
    pub(super) keys: Vec<CacheTensor>,
    pub(super) values: Vec<CacheTensor>,
    pub(super) max_len: usize,
    pub(super) lens: Vec<usize>,
}

impl BatchKvCache {
    /// An empty cache of `blocks` blocks for `batch` sequences of up to `max_len` positions,
    /// `kv_heads` heads of `head_dim` each, on `device`.
    pub(super) fn new(
        blocks: usize,
        batch: usize,
        kv_heads: usize,
        max_len: usize,
        head_dim: usize,
        device: Device,
    ) -> Result<BatchKvCache> {
        let shape = (batch, kv_heads, max_len, head_dim);
        let make =
            || -> Vec<CacheTensor> { (0..blocks).map(|_| Tensor::zeros(shape, device)).collect() };
        Ok(BatchKvCache {
            keys: make(),
            values: make(),
            max_len,
            lens: vec![0; batch],
        })
    }

    /// The number of sequences.
    pub fn batch_size(&self) -> usize {
        self.lens.len()
    }

    /// The positions filled for sequence `seq`.
    ///
    /// # Panics
    /// When `seq` is not below [`BatchKvCache::batch_size`].
    pub fn len(&self, seq: usize) -> usize {
        self.lens[seq]
    }

    /// The positions filled for every sequence, in order.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Whether no sequence has a position filled.
    pub fn is_empty(&self) -> bool {
        self.lens.iter().all(|&l| l == 0)
    }

    /// The most positions each sequence holds.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Forgets every position of every sequence (the memory stays allocated).
    pub fn clear(&mut self) {
        self.lens.fill(0);
    }

    /// Forgets sequence `seq`'s positions from `len` on, to continue it from a shorter prefix
    /// or (with 0) to start a new sequence in its slot.
    ///
    /// # Panics
    /// When `seq` is not below [`BatchKvCache::batch_size`].
    pub fn truncate(&mut self, seq: usize, len: usize) {
        self.lens[seq] = self.lens[seq].min(len);
    }

    /// Block `block`'s keys, `[batch, kv_heads, max_len, head_dim]` (for sequence `s`, only
    /// `..len(s)` along axis 2 are meaningful). A clone of it shares the buffer, and the next
    /// step then writes a copy of its own: a captured decode step notices and refuses.
    pub fn keys(&self, block: usize) -> &CacheTensor {
        &self.keys[block]
    }

    /// Block `block`'s values, laid out as the keys.
    pub fn values(&self, block: usize) -> &CacheTensor {
        &self.values[block]
    }

    /// The buffers of every block's keys and values, which a captured step checks are the
    /// ones it captured.
    pub(super) fn buffer_ids(&self) -> Vec<usize> {
        self.keys
            .iter()
            .chain(&self.values)
            .map(Tensor::buffer_id)
            .collect()
    }
}

/// The keys and values of earlier positions of one sequence, per block: a [`BatchKvCache`]
/// of one sequence, `[1, kv_heads, max_len, head_dim]` each. Positions `0..len()` are filled.
#[derive(Debug)]
pub struct KvCache {
    pub(super) inner: BatchKvCache,
}

impl KvCache {
    /// The positions filled.
    pub fn len(&self) -> usize {
        self.inner.lens[0]
    }

    /// Whether no position is filled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most positions the cache holds.
    pub fn max_len(&self) -> usize {
        self.inner.max_len
    }

    /// Forgets every position (the memory stays allocated): the next forward starts at 0.
    pub fn clear(&mut self) {
        self.inner.clear();
    }

    /// Forgets the positions from `len` on, to generate again from a shorter prefix.
    pub fn truncate(&mut self, len: usize) {
        self.inner.truncate(0, len);
    }

    /// Block `block`'s keys, `[1, kv_heads, max_len, head_dim]` (only `..len()` along axis 2
    /// are meaningful).
    pub fn keys(&self, block: usize) -> &CacheTensor {
        self.inner.keys(block)
    }

    /// Block `block`'s values, laid out as the keys.
    pub fn values(&self, block: usize) -> &CacheTensor {
        self.inner.values(block)
    }

    /// The cache as a batch of one sequence.
    pub fn as_batch(&mut self) -> &mut BatchKvCache {
        &mut self.inner
    }
}
