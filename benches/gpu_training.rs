//! GPU training benchmarks (benches/README.md sets them beside PyTorch's, from
//! `benches/gpu_training_torch.py` run in the same call): the MNIST MLP 784-256-10 and
//! LeNet-style CNN training steps at batch 128 with Adam, eager (tape) and compiled (the
//! example's `TrainStep`, replaying a captured CUDA graph), one Adam update and one
//! `clip_grad_norm` over 100 parameter tensors of mixed sizes (time and launches), and the
//! allocator's reserved bytes over 10,000 MLP steps.
//!
//! Build with `tools/gpu-build --bench gpu_training` and run `.gpu/bin/gpu_training`
//! on a machine with an NVIDIA GPU. Without one it prints why and exits successfully. Times are
//! host wall clock after a device synchronize, so they include launch overhead, as PyTorch's do;
//! each figure is the median of many repeats after a warm-up.

#[path = "../examples/mnist/models.rs"]
mod models;

use models::{Images, Lenet, Mlp};
use rtx::Gradients;
use rtx::compile::TrainStep;
use rtx::prelude::*;
use rtx_backends::{cuda, launch_count};
use std::time::Instant;

/// The median of `xs` (sorted in place).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Waits for GPU 0, panicking with the driver's message if it failed.
fn sync() {
    cuda::synchronize(0).unwrap_or_else(|e| panic!("{e}"));
}

/// Median milliseconds of `f` over `repeats` calls after `warmup` calls, synchronizing after
/// each so every call's GPU work is inside its time.
fn time_ms(warmup: usize, repeats: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    sync();
    let mut times: Vec<f64> = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            f();
            sync();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(&mut times)
}

/// One batch of 128 random images in [0, 1) and labels on `dev`.
fn batch(dev: Device) -> (Images<Const<128>>, Tensor<(Const<128>,), i64>) {
    let x: Images<Const<128>> = Tensor::rand((Const, Const, Const, Const), 1, Device::Cpu);
    let labels: Vec<i64> = (0..128).map(|i| (i * 7 % 10) as i64).collect();
    (x.to_device(dev), Tensor::from_vec(labels, (Const,), dev))
}

/// A model of 100 parameter tensors of mixed sizes: 25 layers of 512x512 and 25 of 64x1024.
#[model]
struct Many {
    #[init(rtx::nn::init::init_vec(25, device, seed, prefix))]
    wide: Vec<Linear<512, 512>>,
    #[init(rtx::nn::init::init_vec(25, device, seed, prefix))]
    tall: Vec<Linear<1024, 64>>,
}

/// Gradients of ones for every parameter of `many`, from the backward of the sum of all of
/// them: an update gives the parameters new tensors, which older gradients no longer name, so
/// each update needs gradients of its own.
fn ones_grads(many: &Many, dev: Device) -> Gradients {
    let mut loss = Tensor::<(), f32>::zeros((), dev);
    for l in &many.wide {
        loss = loss + l.weight.sum_all();
        if let Some(b) = &l.bias {
            loss = loss + b.sum_all();
        }
    }
    for l in &many.tall {
        loss = loss + l.weight.sum_all();
        if let Some(b) = &l.bias {
            loss = loss + b.sum_all();
        }
    }
    loss.backward()
}

fn main() {
    let info = match cuda::gpu_info(0) {
        Ok(info) => info,
        Err(why) => {
            println!("gpu_training: skipped: no CUDA device: {why}");
            return;
        }
    };
    let dev = Device::Cuda(0);
    println!(
        "rtx on {} (sm_{}{})",
        info.name, info.compute_capability.0, info.compute_capability.1
    );
    let (x, y) = batch(dev);

    let mut mlp = Mlp::init(&Device::Cpu, 0);
    mlp.move_to(dev);
    mlp.track_gradients();
    let mut opt = Adam::new(1e-3);
    let mut mlp_step = || {
        let grads = cross_entropy(&mlp.forward(&x), &y).backward();
        opt.step(&mut mlp, &grads);
    };
    let before = launch_count(dev);
    mlp_step();
    println!("mlp step launches: {}", launch_count(dev) - before);
    let ms = time_ms(20, 300, &mut mlp_step);
    println!("mlp_step_b128_ms {ms:.4}");

    let mut cnn = Lenet::init(&Device::Cpu, 0);
    cnn.move_to(dev);
    cnn.track_gradients();
    let mut opt = Adam::new(1e-3);
    let mut cnn_step = || {
        let grads = cross_entropy(&cnn.forward(&x), &y).backward();
        opt.step(&mut cnn, &grads);
    };
    let before = launch_count(dev);
    cnn_step();
    println!("cnn step launches: {}", launch_count(dev) - before);
    let ms = time_ms(10, 200, &mut cnn_step);
    println!("cnn_step_b128_ms {ms:.4}");

    // The compiled steps: captured on their second run, replayed after.
    let mut mlp = Mlp::init(&Device::Cpu, 0);
    mlp.move_to(dev);
    mlp.track_gradients();
    let mut opt = Adam::new(1e-3);
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let mut mlp_step = || {
        step.run(&mut mlp, &mut opt, (x.clone(),), &y)
            .unwrap_or_else(|e| panic!("{e}"));
    };
    mlp_step();
    mlp_step();
    let before = launch_count(dev);
    mlp_step();
    println!("mlp compiled step launches: {}", launch_count(dev) - before);
    let ms = time_ms(20, 300, &mut mlp_step);
    println!("mlp_compiled_step_b128_ms {ms:.4}");

    let mut cnn = Lenet::init(&Device::Cpu, 0);
    cnn.move_to(dev);
    cnn.track_gradients();
    let mut opt = Adam::new(1e-3);
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let mut cnn_step = || {
        step.run(&mut cnn, &mut opt, (x.clone(),), &y)
            .unwrap_or_else(|e| panic!("{e}"));
    };
    cnn_step();
    cnn_step();
    let before = launch_count(dev);
    cnn_step();
    println!("cnn compiled step launches: {}", launch_count(dev) - before);
    let ms = time_ms(10, 200, &mut cnn_step);
    println!("cnn_compiled_step_b128_ms {ms:.4}");

    let mut many = Many::init(&Device::Cpu, 0);
    many.move_to(dev);
    many.track_gradients();
    let tensors = many.tensor_names().len();
    let mut opt = Adam::new(1e-3);
    let mut launches = 0;
    let mut times = Vec::new();
    for rep in 0..110 {
        let grads = ones_grads(&many, dev);
        sync();
        let (before, t) = (launch_count(dev), Instant::now());
        opt.step(&mut many, &grads);
        sync();
        // The first ten are the warm-up.
        if rep >= 10 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
            launches = launch_count(dev) - before;
        }
    }
    println!(
        "adam over {tensors} tensors ({} elements): {launches} launches",
        many.num_parameters()
    );
    println!("adam_100_tensors_ms {:.4}", median(&mut times));

    // Gradient clipping over the same 100 gradients: on the device, with one read-back.
    let mut launches = 0;
    let mut times = Vec::new();
    for rep in 0..110 {
        let mut grads = ones_grads(&many, dev);
        sync();
        let (before, t) = (launch_count(dev), Instant::now());
        let norm = clip_grad_norm(&mut grads, &many, 1.0);
        if rep >= 10 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
            launches = launch_count(dev) - before;
        }
        assert!(
            norm > 1.0,
            "the gradients of ones are to be clipped (norm {norm})"
        );
    }
    println!("clip_grad_norm over {tensors} tensors: {launches} launches");
    println!("clip_grad_norm_100_tensors_ms {:.4}", median(&mut times));

    // The memory trace: reserved bytes must stay flat once the first steps have warmed the
    // allocator's cache.
    let mut mlp = Mlp::init(&Device::Cpu, 0);
    mlp.move_to(dev);
    mlp.track_gradients();
    let mut opt = Adam::new(1e-3);
    let start = Instant::now();
    let mut trace = Vec::new();
    for step in 1..=10_000 {
        let grads = cross_entropy(&mlp.forward(&x), &y).backward();
        opt.step(&mut mlp, &grads);
        if step == 10 || step % 1000 == 0 {
            sync();
            let s = cuda::memory_stats(0).unwrap_or_else(|e| panic!("{e}"));
            trace.push((step, s.reserved, s.allocated, s.peak_reserved));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("memory trace over 10000 mlp steps ({secs:.2} s):");
    println!("step reserved_bytes allocated_bytes peak_reserved_bytes");
    for (step, r, a, p) in &trace {
        println!("{step} {r} {a} {p}");
    }
    let flat = trace.iter().skip(1).all(|t| t.1 == trace[1].1);
    println!("reserved flat after step 1000: {flat}");
}
