//! `DataLoader`: a data set walked in batches, shuffled per epoch from a seed, with batches
//! prepared ahead on background threads.
//!
//! Invariant: batch `k` of an epoch holds the items at positions `k * BATCH ..` of that epoch's
//! order, and batches arrive in `k` order, whatever the number of workers or their timing:
//! worker `w` of `n` makes batches `w, w + n, w + 2n, ...` into its own bounded channel, and
//! the iterator reads batch `k` from channel `k % n`. Dropping the iterator disconnects the
//! channels and joins the workers, so no thread outlives it.

use super::collate::Collate;
use super::{Dataset, DistributedSampler, permutation};
use crate::error::{Error, Result};
use crate::shape::{Const, Dim};
use rtx_backends::Device;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Walks a [`Dataset`] in batches of `BATCH` items (see the [module docs](super) for how the
/// batches are typed and why the final partial batch has its own iterator).
///
/// ```
/// use rtx::prelude::*;
/// let labels: Vec<i64> = (0..10).collect();
/// let loader = DataLoader::<_, 3>::new(labels).shuffle(1).workers(2);
/// let mut seen: Vec<i64> = loader.epoch_dyn(0).flat_map(|y| y.to_vec()).collect();
/// seen.sort();
/// assert_eq!(seen, (0..10).collect::<Vec<_>>());
/// ```
pub struct DataLoader<D: Dataset, const BATCH: usize> {
    dataset: Arc<D>,
    seed: Option<u64>,
    workers: usize,
    prefetch: usize,
    device: Device,
    /// This rank's share of the items, when training data-parallel.
    sampler: Option<DistributedSampler>,
}

/// A second handle to the same data set and settings (the data set is shared, not copied).
impl<D: Dataset, const BATCH: usize> Clone for DataLoader<D, BATCH> {
    fn clone(&self) -> Self {
        DataLoader {
            dataset: self.dataset.clone(),
            seed: self.seed,
            workers: self.workers,
            prefetch: self.prefetch,
            device: self.device,
            sampler: self.sampler.clone(),
        }
    }
}

impl<D: Dataset, const BATCH: usize> std::fmt::Debug for DataLoader<D, BATCH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("batch", &BATCH)
            .field("items", &self.dataset.len())
            .field("shuffle_seed", &self.seed)
            .field("workers", &self.workers)
            .field("prefetch", &self.prefetch)
            .field("device", &self.device)
            .field("sampler", &self.sampler)
            .finish()
    }
}

/// The default number of worker threads: half the cores, at least 1 and at most 4. Batches
/// are usually cheap next to a training step, and the step itself wants the cores.
fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4))
}

impl<D: Dataset, const BATCH: usize> DataLoader<D, BATCH>
where
    D::Item: Collate,
{
    /// A loader over `dataset` in its own order (`0, 1, 2, ...`), on the CPU, with the default
    /// number of workers (half the cores, 1 to 4) each keeping 2 batches ready.
    ///
    /// Fails to compile when `BATCH` is 0 (on a full build, not under `cargo check`).
    pub fn new(dataset: D) -> Self {
        const { assert!(BATCH > 0, "DataLoader: the batch size must be at least 1") };
        DataLoader {
            dataset: Arc::new(dataset),
            seed: None,
            workers: default_workers(),
            prefetch: 2,
            device: Device::Cpu,
            sampler: None,
        }
    }

    /// Shuffles every epoch: epoch `e` visits the items in the order
    /// [`permutation`]`(len, seed, e)`, the same on every run, machine and worker count.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Prepares batches on `n` background threads; `0` makes each batch on the calling thread
    /// when it is asked for. The order of batches does not depend on `n`.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// How many finished batches each worker may hold ready (at least 1; default 2).
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n.max(1);
        self
    }

    /// Makes the batches on `device` (the items are gathered on the host, then moved once).
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// Walks only this rank's share of the items: epoch `e` visits
    /// [`DistributedSampler::indices_for`]`(e)`, which replaces [`DataLoader::shuffle`]'s order
    /// (the sampler shuffles with its own seed), and the lengths count the share.
    ///
    /// ```
    /// use rtx::prelude::*;
    /// use rtx::data::DistributedSampler;
    /// let items: Vec<i64> = (0..10).collect();
    /// let share = DistributedSampler::new(items.len(), 1, 2).unwrap().seed(5);
    /// let loader = DataLoader::<_, 2>::new(items).distributed(share.clone());
    /// assert_eq!(loader.len_dyn(), 3); // 5 of the 10 items, in batches of 2
    /// let seen: Vec<i64> = loader.epoch_dyn(4).flat_map(|y| y.to_vec()).collect();
    /// let want: Vec<i64> = share.indices_for(4).iter().map(|&i| i as i64).collect();
    /// assert_eq!(seen, want);
    /// ```
    pub fn distributed(mut self, sampler: DistributedSampler) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// The number of items an epoch visits: the data set's, or this rank's share.
    fn items(&self) -> usize {
        match &self.sampler {
            Some(s) => s.num_samples(),
            None => self.dataset.len(),
        }
    }

    /// The data set.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// The number of full batches in an epoch, what [`DataLoader::epoch`] yields.
    pub fn len(&self) -> usize {
        self.items() / BATCH
    }

    /// Whether [`DataLoader::epoch`] yields nothing (fewer than `BATCH` items).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of batches counting the final partial one, what [`DataLoader::epoch_dyn`]
    /// yields.
    pub fn len_dyn(&self) -> usize {
        self.items().div_ceil(BATCH)
    }

    /// The order in which epoch `epoch` visits the items.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let loader = DataLoader::<_, 2>::new(vec![0u8; 4]);
    /// assert_eq!(loader.order(5), vec![0, 1, 2, 3]);
    /// assert_eq!(loader.shuffle(9).order(5), rtx::data::permutation(4, 9, 5));
    /// ```
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        if let Some(s) = &self.sampler {
            return s.indices_for(epoch);
        }
        match self.seed {
            Some(seed) => permutation(self.dataset.len(), seed, epoch),
            None => (0..self.dataset.len()).collect(),
        }
    }

    /// The full batches of epoch `epoch`, typed `Const<BATCH>`; the final `len % BATCH` items
    /// of the epoch's order are left out (a different few each epoch when shuffling).
    ///
    /// # Panics
    /// The iterator panics when collation fails (items of one batch with different run-time
    /// shapes) or when the data set panics, with that message; [`Batches::try_next`] returns
    /// the collation error instead.
    pub fn epoch(&self, epoch: u64) -> Batches<D, Const<BATCH>> {
        self.batches(epoch, self.len())
    }

    /// Every item of epoch `epoch`, in batches with a run-time leading dim: `BATCH` items each,
    /// the last one `len % BATCH` when that is not 0.
    ///
    /// # Panics
    /// As for [`DataLoader::epoch`].
    pub fn epoch_dyn(&self, epoch: u64) -> Batches<D, usize> {
        self.batches(epoch, self.len_dyn())
    }

    fn batches<B: Dim>(&self, epoch: u64, count: usize) -> Batches<D, B> {
        let plan = Arc::new(Plan {
            dataset: self.dataset.clone(),
            order: self.order(epoch),
            batch: BATCH,
            device: self.device,
        });
        let source = Source::start(&plan, self.workers.min(count), count, self.prefetch);
        Batches {
            plan,
            next: 0,
            end: count,
            source,
        }
    }
}

/// What one epoch's batches are made from; shared with the workers.
struct Plan<D> {
    dataset: Arc<D>,
    order: Vec<usize>,
    batch: usize,
    device: Device,
}

impl<D: Dataset> Plan<D>
where
    D::Item: Collate,
{
    /// Batch `k`: the items at positions `k * batch ..` of the order, collated on `device`.
    fn make<B: Dim>(&self, k: usize, device: Device) -> Result<<D::Item as Collate>::Batch<B>> {
        let start = k * self.batch;
        let end = (start + self.batch).min(self.order.len());
        let indices = &self.order[start..end];
        let Some(dim) = B::from_size(indices.len()) else {
            return Err(Error::BadArgument {
                op: "DataLoader",
                msg: format!(
                    "batch {k} has {} items, which its batch dim type does not allow",
                    indices.len()
                ),
            });
        };
        self.dataset.get_batch(indices, dim, device)
    }
}

/// A finished batch, or the panic of the worker that was making it.
type Msg<T> = std::thread::Result<Result<T>>;

/// Where the iterator's batches come from.
enum Source<T> {
    /// Made on the calling thread when asked for.
    Inline,
    /// Made ahead by workers; batch `k` arrives on `channels[k % channels.len()]`.
    Workers {
        channels: Vec<Receiver<Msg<T>>>,
        handles: Vec<JoinHandle<()>>,
        stop: Arc<AtomicBool>,
    },
}

impl<T: Send + 'static> Source<T> {
    fn start<D: Dataset, B: Dim>(
        plan: &Arc<Plan<D>>,
        workers: usize,
        count: usize,
        prefetch: usize,
    ) -> Self
    where
        D::Item: Collate<Batch<B> = T>,
    {
        if workers == 0 {
            return Source::Inline;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut channels = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let (tx, rx) = sync_channel(prefetch);
            let (plan, stop2) = (plan.clone(), stop.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("rtx-data-{w}"))
                .spawn(move || work::<D, B>(&plan, w, workers, count, &tx, &stop2));
            match spawned {
                Ok(h) => {
                    channels.push(rx);
                    handles.push(h);
                }
                Err(_) => {
                    // No threads to be had: stop the ones started and make batches inline.
                    Self::shut_down(&stop, &mut channels, &mut handles);
                    return Source::Inline;
                }
            }
        }
        Source::Workers {
            channels,
            handles,
            stop,
        }
    }

    fn shut_down(
        stop: &AtomicBool,
        channels: &mut Vec<Receiver<Msg<T>>>,
        handles: &mut Vec<JoinHandle<()>>,
    ) {
        stop.store(true, Ordering::Relaxed);
        // Disconnecting first wakes any worker blocked on a full channel.
        channels.clear();
        for h in handles.drain(..) {
            // A worker's panics are caught and sent, so join only fails if sending panicked.
            let _ = h.join();
        }
    }
}

/// Worker `w` of `n`: makes batches `w, w + n, ...` until the epoch ends, the iterator is
/// dropped (the send fails) or it is told to stop.
fn work<D: Dataset, B: Dim>(
    plan: &Plan<D>,
    w: usize,
    n: usize,
    count: usize,
    tx: &SyncSender<Msg<<D::Item as Collate>::Batch<B>>>,
    stop: &AtomicBool,
) where
    D::Item: Collate,
{
    let mut k = w;
    while k < count && !stop.load(Ordering::Relaxed) {
        // On the host: the batch moves to its device on the thread that takes it, since a
        // worker's upload could land inside a CUDA graph the training thread is capturing.
        let made = catch_unwind(AssertUnwindSafe(|| plan.make::<B>(k, Device::Cpu)));
        let panicked = made.is_err();
        if tx.send(made).is_err() || panicked {
            break;
        }
        k += n;
    }
}

/// The batches of one epoch, in order; see [`DataLoader::epoch`] and [`DataLoader::epoch_dyn`].
/// Dropping it early stops its workers.
pub struct Batches<D: Dataset, B: Dim>
where
    D::Item: Collate,
{
    plan: Arc<Plan<D>>,
    next: usize,
    end: usize,
    source: Source<<D::Item as Collate>::Batch<B>>,
}

impl<D: Dataset, B: Dim> Batches<D, B>
where
    D::Item: Collate,
{
    /// The next batch, with a collation error returned rather than panicked.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let rows: Vec<Tensor<(usize,)>> =
    ///     vec![Tensor::zeros((2,), Device::Cpu), Tensor::zeros((3,), Device::Cpu)];
    /// let loader = DataLoader::<_, 2>::new(rows);
    /// let err = loader.epoch(0).try_next().unwrap().unwrap_err();
    /// assert!(err.to_string().contains("every item of a batch must have the same shape"));
    /// ```
    pub fn try_next(&mut self) -> Option<Result<<D::Item as Collate>::Batch<B>>> {
        if self.next >= self.end {
            return None;
        }
        let k = self.next;
        self.next += 1;
        match &mut self.source {
            Source::Inline => Some(self.plan.make::<B>(k, self.plan.device)),
            Source::Workers { channels, .. } => {
                let n = channels.len();
                match channels[k % n].recv() {
                    // Made on the host, so only a GPU batch needs moving.
                    Ok(Ok(Ok(made))) if self.plan.device == Device::Cpu => Some(Ok(made)),
                    Ok(Ok(Ok(made))) => Some(D::Item::to_device(made, self.plan.device)),
                    Ok(Ok(Err(e))) => Some(Err(e)),
                    // The data set panicked in a worker: the panic continues here, and
                    // unwinding drops `self`, which stops the other workers.
                    Ok(Err(payload)) => resume_unwind(payload),
                    Err(_) => Some(Err(Error::BadArgument {
                        op: "DataLoader",
                        msg: format!("worker {} stopped before making batch {k}", k % n),
                    })),
                }
            }
        }
    }
}

impl<D: Dataset, B: Dim> Iterator for Batches<D, B>
where
    D::Item: Collate,
{
    type Item = <D::Item as Collate>::Batch<B>;

    fn next(&mut self) -> Option<Self::Item> {
        self.try_next().map(|made| match made {
            Ok(batch) => batch,
            Err(e) => panic!("{e}"),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.next;
        (left, Some(left))
    }
}

impl<D: Dataset, B: Dim> ExactSizeIterator for Batches<D, B> where D::Item: Collate {}

impl<D: Dataset, B: Dim> Drop for Batches<D, B>
where
    D::Item: Collate,
{
    fn drop(&mut self) {
        if let Source::Workers {
            channels,
            handles,
            stop,
        } = &mut self.source
        {
            Source::shut_down(stop, channels, handles);
        }
    }
}
