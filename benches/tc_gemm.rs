//! The tensor-core GEMMs written with `#[kernel]` against cuBLAS on the same bf16 `n x n`
//! products (`Tensor::matmul`, which rtx hands to cuBLASLt), in one run on one GPU:
//! `rtx::kernels::matmul_tc` (cp.async pipeline, ldmatrix, mma.sync m16n8k16) on `a b`, and on
//! a GPU of compute capability 9.0 `matmul_wgmma` (Hopper's wgmma m64n256k16 from swizzled
//! shared tiles) on `a b^T`, its tiles copied by `cp_async` and, in `matmul_wgmma_tma`, by the
//! tensor memory accelerator, against cuBLAS on the same transposed view (`a.matmul(&b.t())`,
//! multiplied in place).
//!
//! Each figure is the median of `--reps` runs (default 50) timed with CUDA events on rtx's
//! stream after 5 warm-up runs. Each kernel's result is first held to cuBLAS's (relative
//! Frobenius distance below 1e-2). Build with `tools/gpu-build --bench tc_gemm`, run as
//! `.gpu/bin/tc_gemm [--n 4096] [--reps 50]`; without a GPU it prints a notice and exits.

use rtx::kernel::{self, Arg, LaunchConfig};
use rtx::kernels::{
    MATMUL_TC_THREADS, MATMUL_TC_TILE, MATMUL_WGMMA_COLS, MATMUL_WGMMA_ROWS, MATMUL_WGMMA_THREADS,
    matmul_tc, matmul_wgmma, matmul_wgmma_tma,
};
use rtx::prelude::*;
use rtx_backends::cuda::{self, Event};
use std::result::Result;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Median milliseconds of `f` over `reps` runs after `warmup` runs, by CUDA events.
fn median_ms(warmup: usize, reps: usize, mut f: impl FnMut()) -> Result<f64, String> {
    for _ in 0..warmup {
        f();
    }
    cuda::synchronize(0).map_err(err)?;
    let (start, end) = (Event::new(0).map_err(err)?, Event::new(0).map_err(err)?);
    let mut ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        start.record().map_err(err)?;
        f();
        end.record().map_err(err)?;
        end.synchronize().map_err(err)?;
        ms.push(f64::from(start.elapsed_ms(&end).map_err(err)?));
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// Uniform values in [-1, 1) from a fixed-seed LCG.
fn random(len: usize, seed: u64) -> Vec<bf16> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bf16::from_f32((s >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        })
        .collect()
}

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

type Matrix = Tensor<(usize, usize), bf16>;

fn run() -> Result<(), String> {
    let (n, reps) = (arg("--n", 4096), arg("--reps", 50));
    let dev = Device::Cuda(0);
    let a: Matrix = Tensor::from_vec(random(n * n, 1), (n, n), dev);
    let b: Matrix = Tensor::from_vec(random(n * n, 2), (n, n), dev);
    let tiles = |rows: usize, cols: usize| (n.div_ceil(cols) as u32, n.div_ceil(rows) as u32);
    let tc = LaunchConfig::new(tiles(MATMUL_TC_TILE, MATMUL_TC_TILE), MATMUL_TC_THREADS);
    let gemm = Gemm { n, reps, a: &a };
    gemm.against_cublas(
        matmul_tc::Op,
        tc,
        (&b, &b),
        false,
        "matmul_tc (#[kernel], mma.sync)",
        "a.matmul(&b)",
    )?;
    if cuda::gpu_info(0).map_err(err)?.compute_capability != (9, 0) {
        println!("matmul_wgmma: skipped: wgmma needs compute capability 9.0");
        return Ok(());
    }
    let wg = LaunchConfig::new(
        tiles(MATMUL_WGMMA_ROWS, MATMUL_WGMMA_COLS),
        MATMUL_WGMMA_THREADS,
    );
    // `matmul_wgmma` reads `b`'s buffer as `n x k`: cuBLAS multiplies by the transposed
    // view. (The kernel must get `b` itself: a launch argument is a tensor's values in order,
    // and a transposed view's are `b^T`'s.)
    let bt = b.t();
    gemm.against_cublas(
        matmul_wgmma::Op,
        wg,
        (&b, &bt),
        false,
        "matmul_wgmma (#[kernel], wgmma)",
        "a.matmul(&b.t())",
    )?;
    gemm.against_cublas(
        matmul_wgmma_tma::Op,
        wg,
        (&b, &bt),
        true,
        "matmul_wgmma_tma (#[kernel], wgmma, tiles by TMA)",
        "a.matmul(&b.t())",
    )
}

/// One `n x n x n` product of `a` by each kernel, against cuBLAS's.
struct Gemm<'a> {
    n: usize,
    reps: usize,
    a: &'a Matrix,
}

impl Gemm<'_> {
    /// Launches `kernel` on `config` with `a`, `b_kernel` and `n` for m, n and k, holds its
    /// result to cuBLAS's `a.matmul(b_cublas)`, then times both and prints the ratio.
    fn against_cublas<K: kernel::Simt>(
        &self,
        kernel: K,
        config: LaunchConfig,
        (b_kernel, b): (&Matrix, &Matrix),
        maps: bool,
        name: &str,
        cublas: &str,
    ) -> Result<(), String> {
        let (n, a) = (self.n, self.a);
        let mut c: Matrix = Tensor::zeros((n, n), a.device());
        let launch = |c: &mut Matrix| {
            let mut args = vec![Arg::input(a), Arg::input(b_kernel)];
            // The TMA kernel's tensor maps over `a` and `b` (boxes of its tiles' rows).
            if maps {
                args.push(Arg::tensor_map(a, 128));
                args.push(Arg::tensor_map(b_kernel, 256));
            }
            args.extend([Arg::output(c), Arg::usize(n), Arg::usize(n), Arg::usize(n)]);
            // SAFETY: the GEMM kernels check every index against n, the tensors' sizes.
            unsafe { kernel::launch(kernel, config, &mut args) }.map_err(err)
        };
        launch(&mut c)?;
        same_as_cublas(name, &c, &a.matmul(b))?;
        let mut failed = None;
        let ms = median_ms(5, self.reps, || {
            if let Err(e) = launch(&mut c) {
                failed = Some(e);
            }
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        let cublas_ms = median_ms(5, self.reps, || drop(a.matmul(b)))?;
        let tflops = |ms: f64| 2.0 * (n as f64).powi(3) / (ms * 1e-3) / 1e12;
        println!("{name}: {ms:.3} ms, {:.1} TFLOP/s", tflops(ms));
        println!(
            "cuBLAS ({cublas}): {cublas_ms:.3} ms, {:.1} TFLOP/s",
            tflops(cublas_ms)
        );
        println!(
            "{} reaches {:.1}% of cuBLAS (target: at least 50%)",
            name.split(' ').next().unwrap_or(name),
            100.0 * cublas_ms / ms
        );
        Ok(())
    }
}

/// Errors unless `got` is within a relative Frobenius distance of 1e-2 of cuBLAS's `want`.
fn same_as_cublas(
    name: &str,
    got: &Tensor<(usize, usize), bf16>,
    want: &Tensor<(usize, usize), bf16>,
) -> Result<(), String> {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (x, y) in got.to_vec().iter().zip(&want.to_vec()) {
        diff += (f64::from(x.to_f32()) - f64::from(y.to_f32())).powi(2);
        norm += f64::from(y.to_f32()).powi(2);
    }
    let rel = (diff / norm).sqrt();
    let n = got.shape().0;
    println!("{name} vs cuBLAS at {n}^3 bf16: relative Frobenius distance {rel:.2e}");
    // A NaN distance fails too.
    if rel.is_nan() || rel >= 1e-2 {
        return Err(format!("{name} differs from cuBLAS: {rel:.2e}"));
    }
    Ok(())
}

fn main() {
    if !cuda::is_available() {
        println!("tc_gemm: skipped: no CUDA device");
        return;
    }
    if let Err(e) = run() {
        eprintln!("tc_gemm: {e}");
        std::process::exit(1);
    }
}
