//! CPU training-step benchmarks of the MNIST models (benches/README.md compares them with
//! PyTorch): one step of forward, cross-entropy, backward and Adam (lr 1e-3) at batch 128, for
//! the MLP 784-256-10 and the LeNet-5-style CNN of `examples/mnist`, each two ways: eager
//! (the forward with the tape, `backward()`, `opt.step`) and compiled (the example's
//! `TrainStep`: fused forward, static backward and the update in one call).
//!
//! Run with `cargo bench --bench training`; `python3 benches/training_torch.py` times PyTorch's
//! step on the same machine. Besides criterion's estimates, each model's step is also timed as
//! the PyTorch script times it (the median of single steps after 20 warm-ups), so the two
//! libraries' figures are medians of the same thing.

#[path = "../examples/mnist/models.rs"]
mod models;

use criterion::{Criterion, criterion_group, criterion_main};
use models::{Images, Lenet, Mlp};
use rtx::compile::TrainStep;
use rtx::compile::loss::cross_entropy as compiled_loss;
use rtx::prelude::*;
use std::time::Instant;

/// One batch of 128 random images in [0, 1) and labels.
fn batch() -> (Images<Const<128>>, Tensor<(Const<128>,), i64>) {
    let x = Tensor::rand((Const, Const, Const, Const), 1, Device::Cpu);
    let labels: Vec<i64> = (0..128).map(|i| (i * 7 % 10) as i64).collect();
    (x, Tensor::from_vec(labels, (Const,), Device::Cpu))
}

/// The median time of `repeats` single calls of `step` after 20 warm-ups, in milliseconds:
/// what `benches/training_torch.py` reports for PyTorch.
fn median_ms(repeats: usize, mut step: impl FnMut()) -> f64 {
    for _ in 0..20 {
        step();
    }
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            step();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[repeats / 2]
}

/// Prints each model's median single-step time, measured as the PyTorch script measures it.
fn medians() {
    let (x, y) = batch();
    let mut mlp = Mlp::init(&Device::Cpu, 0);
    let mut opt = Adam::new(1e-3);
    mlp.track_gradients();
    let ms = median_ms(500, || {
        let grads = cross_entropy(&mlp.forward(&x), &y).backward();
        opt.step(&mut mlp, &grads);
    });
    println!("mlp_784_256_10_adam: {ms:.3} ms/step (median of 500 single steps)");
    let mut cnn = Lenet::init(&Device::Cpu, 0);
    let mut opt = Adam::new(1e-3);
    cnn.track_gradients();
    let ms = median_ms(100, || {
        let grads = cross_entropy(&cnn.forward(&x), &y).backward();
        opt.step(&mut cnn, &grads);
    });
    println!("lenet5_adam: {ms:.3} ms/step (median of 100 single steps)");

    let mut mlp = Mlp::init(&Device::Cpu, 0);
    let mut opt = Adam::new(1e-3);
    mlp.track_gradients();
    let mut step = TrainStep::new(compiled_loss);
    let ms = median_ms(500, || {
        step.run(&mut mlp, &mut opt, (x.clone(),), &y)
            .unwrap_or_else(|e| panic!("{e}"));
    });
    println!("mlp_784_256_10_adam_compiled: {ms:.3} ms/step (median of 500 single steps)");
    let mut cnn = Lenet::init(&Device::Cpu, 0);
    let mut opt = Adam::new(1e-3);
    cnn.track_gradients();
    let mut step = TrainStep::new(compiled_loss);
    let ms = median_ms(100, || {
        step.run(&mut cnn, &mut opt, (x.clone(),), &y)
            .unwrap_or_else(|e| panic!("{e}"));
    });
    println!("lenet5_adam_compiled: {ms:.3} ms/step (median of 100 single steps)");
}

fn steps(c: &mut Criterion) {
    // Only in a benchmarking run (`cargo bench` passes `--bench`), not under `cargo test`.
    if std::env::args().any(|a| a == "--bench") {
        medians();
    }
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

    let mut mlp = Mlp::init(&Device::Cpu, 0);
    let mut opt = Adam::new(1e-3);
    mlp.track_gradients();
    let mut step = TrainStep::new(compiled_loss);
    g.bench_function("mlp_784_256_10_adam_compiled", |b| {
        b.iter(|| {
            step.run(&mut mlp, &mut opt, (x.clone(),), &y)
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
    g.finish();
}

criterion_group!(benches, steps);
criterion_main!(benches);
