//! CPU benchmarks compared with PyTorch in benches/README.md: f32 matmul 1024³ and a
//! 2^24-element elementwise chain, `gelu_tanh(x * 1.5 + 0.5)`.
//!
//! Run with `cargo bench --bench cpu`; `python3 benches/cpu_torch.py` measures PyTorch on the
//! same machine.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rtx::prelude::*;
use std::hint::black_box;

fn matmul(c: &mut Criterion) {
    let a: Tensor<Rank2<1024, 1024>> = Tensor::randn((Const, Const), 1, Device::Cpu);
    let b: Tensor<Rank2<1024, 1024>> = Tensor::randn((Const, Const), 2, Device::Cpu);
    let mut g = c.benchmark_group("matmul_f32");
    g.throughput(Throughput::Elements(2 * 1024 * 1024 * 1024));
    g.sample_size(20);
    g.bench_function("1024x1024x1024", |bench| {
        bench.iter(|| black_box(a.matmul(&b)))
    });
    g.finish();
}

fn elementwise_chain(c: &mut Criterion) {
    let n = 1 << 24;
    let x: Tensor<(usize,)> = Tensor::randn((n,), 3, Device::Cpu);
    let mut g = c.benchmark_group("elementwise_f32");
    g.throughput(Throughput::Bytes(3 * 2 * 4 * n as u64));
    g.sample_size(20);
    g.bench_function("gelu_tanh(x*1.5+0.5) 2^24", |bench| {
        bench.iter(|| black_box((&x * 1.5 + 0.5).gelu_tanh()))
    });
    // One read and one write per element: the memory-bound limit of a single fused pass.
    g.bench_function("copy 2^24", |bench| {
        bench.iter(|| black_box(x.cast::<f32>()))
    });
    g.finish();
}

criterion_group!(benches, matmul, elementwise_chain);
criterion_main!(benches);
