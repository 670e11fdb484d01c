//! CPU training-step benchmarks of the MNIST models (benches/README.md compares them with
//! PyTorch): one step of forward, cross-entropy, backward and Adam (lr 1e-3) at batch 128, for
//! the MLP 784-256-10 and the LeNet-5-style CNN of `examples/mnist`.
//!
//! Run with `cargo bench --bench training`; `python3 benches/training_torch.py` times PyTorch's
//! step on the same machine.

#[path = "../examples/mnist/models.rs"]
mod models;

use criterion::{Criterion, criterion_group, criterion_main};
use models::{Images, Lenet, Mlp};
use rtx::prelude::*;

/// One batch of 128 random images in [0, 1) and labels.
fn batch() -> (Images<Const<128>>, Tensor<(Const<128>,), i64>) {
    let x = Tensor::rand((Const, Const, Const, Const), 1, Device::Cpu);
    let labels: Vec<i64> = (0..128).map(|i| (i * 7 % 10) as i64).collect();
    (x, Tensor::from_vec(labels, (Const,), Device::Cpu))
}

fn steps(c: &mut Criterion) {
    let (x, y) = batch();
    let mut g = c.benchmark_group("train_step_b128");
    g.sample_size(50);

    let mut mlp = Mlp::init(&Device::Cpu, 0);
    let mut opt = Adam::new(1e-3);
    mlp.track_gradients();
    g.bench_function("mlp_784_256_10_adam", |b| {
        b.iter(|| {
            let grads = cross_entropy(&mlp.forward(&x), &y).backward();
            opt.step(&mut mlp, &grads);
        })
    });

    let mut cnn = Lenet::init(&Device::Cpu, 0);
    let mut opt = Adam::new(1e-3);
    cnn.track_gradients();
    g.bench_function("lenet5_adam", |b| {
        b.iter(|| {
            let grads = cross_entropy(&cnn.forward(&x), &y).backward();
            opt.step(&mut cnn, &grads);
        })
    });
    g.finish();
}

criterion_group!(benches, steps);
criterion_main!(benches);
