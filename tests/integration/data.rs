//! The data loader on a synthetic data set (batch counts, static and run-time batch shapes,
//! coverage, deterministic shuffling, independence from the worker count, early drops), and
//! the real MNIST files when they can be fetched.

use rtx::data::datasets::Mnist;
use rtx::data::{DataLoader, Dataset, permutation};
use rtx::prelude::*;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Item `i` is `([i, 2i, 3i], i)`, so a batch shows which items it holds. `get` sleeps a
/// little on some indices so that workers finish out of order.
struct Numbered {
    n: usize,
    gets: Arc<AtomicUsize>,
    jitter: bool,
}

impl Numbered {
    fn new(n: usize) -> Self {
        Numbered {
            n,
            gets: Arc::new(AtomicUsize::new(0)),
            jitter: false,
        }
    }
}

impl Dataset for Numbered {
    type Item = (Tensor<Rank1<3>>, i64);
    fn len(&self) -> usize {
        self.n
    }
    fn get(&self, i: usize) -> Self::Item {
        self.gets.fetch_add(1, Ordering::Relaxed);
        if self.jitter && i.is_multiple_of(7) {
            std::thread::sleep(Duration::from_micros(200 + (i as u64 * 37) % 500));
        }
        let x = i as f32;
        (
            Tensor::from_array([x, 2.0 * x, 3.0 * x], Device::Cpu),
            i as i64,
        )
    }
}

/// A batch of `Numbered` items.
type Batch<B> = (Tensor<(B, Const<3>)>, Tensor<(B,), i64>);

/// The labels of every batch of an iterator of (features, labels) batches, checking that the
/// features agree with the labels.
fn labels_of<B: Dim>(batches: impl Iterator<Item = Batch<B>>) -> Vec<Vec<i64>> {
    batches
        .map(|(x, y)| {
            let (x, y) = (x.to_vec(), y.to_vec());
            for (row, &label) in x.chunks(3).zip(&y) {
                let l = label as f32;
                assert_eq!(row, [l, 2.0 * l, 3.0 * l]);
            }
            y
        })
        .collect()
}

#[test]
fn batch_counts() {
    let counts = |n| {
        let l = DataLoader::<_, 4>::new(Numbered::new(n));
        (l.len(), l.len_dyn(), l.is_empty())
    };
    assert_eq!(counts(10), (2, 3, false));
    assert_eq!(counts(8), (2, 2, false));
    assert_eq!(counts(3), (0, 1, true));
    assert_eq!(counts(0), (0, 0, true));
    let loader = DataLoader::<_, 4>::new(Numbered::new(10)).workers(2);
    assert_eq!(loader.epoch(0).len(), 2);
    assert_eq!(loader.epoch(0).count(), 2);
    assert_eq!(loader.epoch_dyn(0).count(), 3);
    assert_eq!(
        DataLoader::<_, 4>::new(Numbered::new(3)).epoch(0).count(),
        0
    );
}

#[test]
fn full_batches_are_static_and_the_partial_one_is_dynamic() {
    let loader = DataLoader::<_, 4>::new(Numbered::new(10));
    for (x, y) in loader.epoch(0) {
        let x: Tensor<(Const<4>, Const<3>)> = x;
        let y: Tensor<(Const<4>,), i64> = y;
        assert_eq!((x.dims(), y.dims()), (&[4, 3][..], &[4][..]));
    }
    let dims: Vec<Vec<usize>> = loader
        .epoch_dyn(0)
        .map(|(x, y): Batch<usize>| {
            assert_eq!(x.dims()[0], y.dims()[0]);
            x.dims().to_vec()
        })
        .collect();
    assert_eq!(dims, vec![vec![4, 3], vec![4, 3], vec![2, 3]]);
    // Unshuffled, the order is the data set's own.
    assert_eq!(
        labels_of(loader.epoch_dyn(3)),
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]
    );
}

#[test]
fn every_item_once_per_epoch() {
    let n = 103;
    let loader = DataLoader::<_, 8>::new(Numbered::new(n))
        .shuffle(11)
        .workers(3);
    for epoch in 0..4 {
        let all: Vec<i64> = labels_of(loader.epoch_dyn(epoch)).concat();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(sorted, (0..n as i64).collect::<Vec<_>>(), "epoch {epoch}");
        // Full batches hold the epoch's order minus its last n % 8 items, each once.
        let full: Vec<i64> = labels_of(loader.epoch(epoch)).concat();
        assert_eq!(full.len(), n - n % 8);
        assert_eq!(full.iter().collect::<HashSet<_>>().len(), full.len());
        assert_eq!(full[..], all[..full.len()]);
        let order: Vec<i64> = loader.order(epoch).iter().map(|&i| i as i64).collect();
        assert_eq!(all, order);
    }
}

#[test]
fn shuffling_is_a_function_of_seed_and_epoch() {
    let make = |seed| DataLoader::<_, 5>::new(Numbered::new(50)).shuffle(seed);
    let (a, b, c) = (make(7), make(7), make(8));
    assert_eq!(labels_of(a.epoch(0)), labels_of(b.epoch(0)));
    assert_eq!(labels_of(a.epoch(3)), labels_of(b.epoch(3)));
    assert_ne!(labels_of(a.epoch(0)), labels_of(a.epoch(1)));
    assert_ne!(labels_of(a.epoch(0)), labels_of(c.epoch(0)));
    assert_eq!(a.order(2), permutation(50, 7, 2));
    // A shuffled order is not the identity.
    assert_ne!(a.order(0), (0..50).collect::<Vec<_>>());
}

#[test]
fn the_order_does_not_depend_on_the_workers() {
    let run = |workers| {
        let mut ds = Numbered::new(300);
        ds.jitter = true;
        let loader = DataLoader::<_, 16>::new(ds)
            .shuffle(3)
            .workers(workers)
            .prefetch(1);
        (labels_of(loader.epoch(1)), labels_of(loader.epoch_dyn(2)))
    };
    let one = run(1);
    assert_eq!(one, run(0));
    assert_eq!(one, run(4));
    assert_eq!(one, run(7));
}

/// Runs `f` on a thread and fails the test if it has not finished within `secs`.
fn within(secs: u64, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the data loader hung");
}

#[test]
fn dropping_an_epoch_early_stops_the_workers() {
    within(20, || {
        let mut ds = Numbered::new(100_000);
        ds.jitter = true;
        let gets = ds.gets.clone();
        let loader = DataLoader::<_, 32>::new(ds).workers(4).prefetch(1);
        let mut it = loader.epoch(0);
        let first = it.next().map(|(_, y)| y.to_vec());
        assert_eq!(first, Some((0..32).collect()));
        // Let the workers fill their channels and block on them, then drop.
        std::thread::sleep(Duration::from_millis(50));
        drop(it);
        // The drop joined every worker, so no item is made after it.
        let after_drop = gets.load(Ordering::Relaxed);
        assert!(after_drop < 100_000 / 10, "{after_drop} items made");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(gets.load(Ordering::Relaxed), after_drop);
        // Dropping an epoch that was never iterated is fine too, and the loader is reusable.
        drop(loader.epoch_dyn(1));
        assert_eq!(loader.epoch(2).take(3).count(), 3);
    });
}

/// A data set that panics on one index.
struct Faulty;

impl Dataset for Faulty {
    type Item = i64;
    fn len(&self) -> usize {
        64
    }
    fn get(&self, i: usize) -> i64 {
        assert!(i != 37, "item 37 is unreadable");
        i as i64
    }
}

#[test]
fn a_panic_in_a_worker_reaches_the_caller() {
    within(20, || {
        let loader = DataLoader::<_, 8>::new(Faulty).workers(3);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            loader.epoch(0).count();
        }));
        let payload = caught.expect_err("the panic must propagate");
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        assert_eq!(msg.as_deref(), Some("item 37 is unreadable"));
        // Batches before the faulty one arrive normally.
        assert_eq!(loader.epoch(0).take(4).count(), 4);
    });
}

#[test]
fn ragged_items_are_a_collation_error() {
    let rows: Vec<Tensor<(usize,)>> = (0..4)
        .map(|i| Tensor::zeros((1 + i / 2,), Device::Cpu))
        .collect();
    let loader = DataLoader::<_, 2>::new(rows).workers(2);
    let mut it = loader.epoch(0);
    assert_eq!(
        it.try_next().map(|b| b.map(|t| t.dims().to_vec())),
        Some(Ok(vec![2, 1]))
    );
    let second = it.try_next().map(|b| b.map(|t| t.dims().to_vec()));
    assert_eq!(second, Some(Ok(vec![2, 2])));
    let rows: Vec<Tensor<(usize,)>> = vec![
        Tensor::zeros((1,), Device::Cpu),
        Tensor::zeros((2,), Device::Cpu),
    ];
    let err = DataLoader::<_, 2>::new(rows).epoch(0).try_next();
    assert_eq!(
        err.map(|b| b.map(|t| t.dims().to_vec()).map_err(|e| e.to_string())),
        Some(Err(
            "collate: shape mismatch: [1] vs [2]: every item of a batch must have the same shape"
                .to_string()
        ))
    );
}

/// The real MNIST: runs when the tarball is in the cache or can be fetched; otherwise prints
/// why and passes, unless `RTX_REQUIRE_MNIST` is set (as in CI), where it fails.
#[test]
fn real_mnist() {
    let (train, test) = match Mnist::train().and_then(|tr| Ok((tr, Mnist::test()?))) {
        Ok(both) => both,
        Err(e) if std::env::var_os("RTX_REQUIRE_MNIST").is_none() => {
            eprintln!("skipped: MNIST is not available ({e}); set RTX_REQUIRE_MNIST=1 to fail");
            return;
        }
        Err(e) => panic!("RTX_REQUIRE_MNIST is set but MNIST could not be loaded: {e}"),
    };
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    assert_eq!(train.labels()[..5], [5, 0, 4, 1, 9]);
    assert_eq!(test.labels()[..5], [7, 2, 1, 0, 4]);
    // Reference numbers computed with Python's tarfile from the raw IDX bytes.
    let counts = |ds: &Mnist| {
        let mut c = [0usize; 10];
        ds.labels().iter().for_each(|&l| c[l as usize] += 1);
        c
    };
    assert_eq!(
        counts(&train),
        [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    );
    assert_eq!(
        counts(&test),
        [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    );
    let byte_sum = |ds: &Mnist| ds.images().iter().map(|&p| p as u64).sum::<u64>();
    assert_eq!(
        (byte_sum(&train), byte_sum(&test)),
        (1_567_298_545, 264_923_200)
    );
    let sum7: u64 = (0..test.len())
        .filter(|&i| test.labels()[i] == 7)
        .map(|i| test.image_bytes(i).iter().map(|&p| p as u64).sum::<u64>())
        .sum();
    assert_eq!(sum7, 23_614_233);
    // Items are scaled bytes: image 0 of train sums to 27525 / 255.
    let (img, label) = train.get(0);
    assert_eq!((img.dims(), label), (&[1, 28, 28][..], 5));
    let v = img.to_vec();
    assert!(v.iter().all(|&p| (0.0..=1.0).contains(&p)));
    assert_eq!(v.iter().cloned().fold(0.0f32, f32::max), 1.0);
    let s: f64 = v.iter().map(|&p| p as f64).sum();
    assert!((s - 27525.0 / 255.0).abs() < 1e-4, "{s}");
    let last = test.get(9999).0.sum_all().item() as f64 * 255.0;
    assert!((last - 41833.0).abs() < 1e-2, "{last}");
    // A shuffled epoch of the test split sees every label count once.
    let loader = DataLoader::<_, 128>::new(test).shuffle(0);
    assert_eq!((loader.len(), loader.len_dyn()), (78, 79));
    let mut c = [0usize; 10];
    let mut pixels = 0.0f64;
    for (x, y) in loader.epoch_dyn(0) {
        let x: Tensor<(usize, Const<1>, Const<28>, Const<28>)> = x;
        y.to_vec().iter().for_each(|&l| c[l as usize] += 1);
        pixels += x.to_vec().iter().map(|&p| p as f64).sum::<f64>();
    }
    assert_eq!(c, counts(loader.dataset()));
    assert!((pixels - 264_923_200.0 / 255.0).abs() < 1.0, "{pixels}");
}
