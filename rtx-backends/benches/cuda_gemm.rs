//! GEMM through rtx's cuBLAS and cuBLASLt paths, timed with CUDA events (median of repeats after warm-up),
//! to set beside `benches/cuda_gemm_torch.py` run in the same session on the same GPU.
//!
//! Run: `cargo bench -p rtx-backends --bench cuda_gemm` (prints a notice without a GPU).

use half::bf16;
use rtx_backends::cuda::{self, Event};
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{Element, Num};

fn data<E: Element>(n: usize, seed: u64) -> Vec<E> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = s.wrapping_mul(0x2545F4914F6CDD1D);
            E::from_f64((r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        })
        .collect()
}

/// Median milliseconds of one `n`×`n`×`n` product, over `reps` timed products.
fn time<E: Num>(n: usize, reps: usize) -> Result<f64, rtx_backends::BackendError> {
    let l = Layout::contiguous(&[n, n]);
    let a = Storage::from_vec(data::<E>(n * n, 1), Device::Cuda(0))?;
    let b = Storage::from_vec(data::<E>(n * n, 2), Device::Cuda(0))?;
    for _ in 0..5 {
        a.matmul(&l, &b, &l)?;
    }
    cuda::synchronize(0)?;
    let mut ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (start, end) = (Event::new(0)?, Event::new(0)?);
        start.record()?;
        let c = a.matmul(&l, &b, &l)?;
        end.record()?;
        end.synchronize()?;
        drop(c);
        ms.push(start.elapsed_ms(&end)? as f64);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[reps / 2])
}

/// Microseconds per `n`³ f32 product over `calls` back-to-back products, by the host clock up
/// to the GPU finishing: for small sizes this is the per-call overhead (launch-bound work).
fn small(n: usize, calls: usize) -> Result<f64, rtx_backends::BackendError> {
    let l = Layout::contiguous(&[n, n]);
    let a = Storage::from_vec(data::<f32>(n * n, 3), Device::Cuda(0))?;
    for _ in 0..10 {
        a.matmul(&l, &a, &l)?;
    }
    cuda::synchronize(0)?;
    let t = std::time::Instant::now();
    for _ in 0..calls {
        a.matmul(&l, &a, &l)?;
    }
    cuda::synchronize(0)?;
    Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
}

fn main() {
    if !cuda::is_available() {
        println!("cuda_gemm: no usable CUDA GPU here, nothing to time");
        return;
    }
    let n = 4096;
    let flop = 2.0 * (n as f64).powi(3);
    type Timer = fn(usize, usize) -> Result<f64, rtx_backends::BackendError>;
    let rows: [(&str, bool, Timer); 3] = [
        ("f32", false, time::<f32>),
        ("f32 tf32", true, time::<f32>),
        ("bf16", false, time::<bf16>),
    ];
    for lib in [cuda::GemmLibrary::Cublas, cuda::GemmLibrary::CublasLt] {
        cuda::set_gemm_library(lib);
        let tag = match lib {
            cuda::GemmLibrary::Cublas => "cublas",
            _ => "lt",
        };
        for (name, tf32, f) in rows {
            cuda::set_allow_tf32(tf32);
            match f(n, 30) {
                Ok(ms) => println!(
                    "rtx gemm {n} {name:9} ({tag:6}): {ms:8.3} ms  {:7.1} TFLOP/s",
                    flop / ms / 1e9
                ),
                Err(e) => println!("rtx gemm {n} {name} ({tag}): {e}"),
            }
        }
    }
    cuda::set_allow_tf32(false);
    for lib in [cuda::GemmLibrary::Cublas, cuda::GemmLibrary::CublasLt] {
        cuda::set_gemm_library(lib);
        match small(64, 2000) {
            Ok(us) => {
                println!("rtx matmul 64 f32 ({lib:?}): {us:.2} us per call (host wall clock)")
            }
            Err(e) => println!("rtx matmul 64 f32 ({lib:?}): {e}"),
        }
    }
    cuda::set_gemm_library(cuda::GemmLibrary::Cublas);
    if let Ok(s) = cuda::memory_stats(0) {
        println!("allocator: {s:?}");
    }
}
