//! One test body for every device (ARCHITECTURE.md): each op test runs on the CPU and on every
//! usable CUDA GPU, in every element type the op exists for, with contiguous, strided and
//! broadcast inputs, and each GPU's results are held to the CPU backend's: within a per-dtype
//! tolerance for float math ([`on_every_device`]), exactly for ops that move elements, sum in
//! a fixed order or compute in integers ([`same_on_every_device`]). Where no GPU exists, each
//! test prints `skipped: no CUDA device: <reason>` and passes.
//!
//! Run on a GPU with `--test-threads=1 --nocapture` to see the launch counts and the bandwidth
//! figures (the allocator's statistics are per GPU, so tests running side by side share them).

use rtx::prelude::*;
use rtx_backends::{Storage, cuda};

/// The usable GPUs, or why there are none.
fn gpus() -> std::result::Result<Vec<Device>, String> {
    if !cuda::is_available() {
        return Err(match Storage::from_vec(vec![0.0f32], Device::Cuda(0)) {
            Err(e) => e.to_string(),
            Ok(_) => "the CUDA runtime reports no usable GPU".into(),
        });
    }
    Ok((0..cuda::device_count()).map(Device::Cuda).collect())
}

/// How far a GPU result may be from the CPU's: both compute in the same type, so the gap is
/// libm's last-place differences, fused multiply-adds, summation order, and one more rounding
/// to f16 or bf16 when those tip a value across a rounding boundary.
fn tolerance(d: DType) -> (f64, f64) {
    match d {
        DType::F64 => (1e-12, 1e-12),
        DType::F32 => (2e-6, 1e-5),
        DType::F16 => (2e-3, 2e-3),
        DType::BF16 => (1.6e-2, 1.6e-2),
        _ => (0.0, 0.0),
    }
}

/// Named outputs of one test body on one device.
type Outputs = Vec<(String, Vec<f64>)>;

/// The elements of a tensor as f64 (booleans as 0 and 1).
fn f64s<S: Shape, E: Element>(t: &Tensor<S, E>) -> Vec<f64> {
    t.to_vec().into_iter().map(|x| x.to_f64()).collect()
}

/// Runs `body` on the CPU and on every GPU, and compares each GPU output with the CPU's.
#[track_caller]
fn on_every_device<E: Element>(test: &str, body: impl Fn(Device) -> Outputs) {
    let want = body(Device::Cpu);
    assert!(!want.is_empty(), "{test}: the body produced no outputs");
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("{test} ({:?}): skipped: no CUDA device: {why}", E::DTYPE);
            return;
        }
    };
    let (atol, rtol) = tolerance(E::DTYPE);
    for dev in gpus {
        let got = body(dev);
        assert_eq!(got.len(), want.len(), "{test} on {dev}: output count");
        for ((name, g), (_, w)) in got.iter().zip(&want) {
            assert_eq!(
                g.len(),
                w.len(),
                "{test} {name} ({:?}) on {dev}: length",
                E::DTYPE
            );
            for (i, (&g, &w)) in g.iter().zip(w).enumerate() {
                let close = if w.is_nan() {
                    g.is_nan()
                } else if w.is_infinite() {
                    g == w
                } else {
                    (g - w).abs() <= atol + rtol * w.abs()
                };
                assert!(
                    close,
                    "{test} {name} ({:?}) on {dev}, element {i}: got {g}, the CPU gives {w}",
                    E::DTYPE
                );
            }
        }
    }
}

/// Runs a generic test body in all four float types.
#[allow(unused_macros)]
macro_rules! every_float {
    ($f:ident) => {
        $f::<f32>();
        $f::<f64>();
        $f::<f16>();
        $f::<bf16>();
    };
}

/// Reproducible values in [lo, hi) (xorshift64*), rounded to `E`.
fn values<E: Element>(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<E> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            E::from_f64(lo + (hi - lo) * r)
        })
        .collect()
}

/// Named outputs as bit patterns (or error text), compared exactly.
type Exact = Vec<(String, Vec<u64>)>;

/// The elements of a tensor as bit patterns of their f64 values (booleans as 0 and 1), so
/// comparisons are exact and NaN equals NaN.
fn bits<S: Shape, E: Element>(t: &Tensor<S, E>) -> Vec<u64> {
    t.to_vec()
        .into_iter()
        .map(|x| x.to_f64().to_bits())
        .collect()
}

/// An error's text (or "ok"), as bytes.
fn err_text<T>(r: rtx::Result<T>) -> Vec<u64> {
    r.err()
        .map_or("ok".to_string(), |e| e.to_string())
        .bytes()
        .map(u64::from)
        .collect()
}

/// Runs `body` on the CPU and every GPU and requires every output to be the CPU's exactly,
/// for ops that move, mask, sum in a fixed order or compute in integers.
#[track_caller]
fn same_on_every_device<E: Element>(test: &str, body: impl Fn(Device) -> Exact) {
    let want = body(Device::Cpu);
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("{test} ({:?}): skipped: no CUDA device: {why}", E::DTYPE);
            return;
        }
    };
    for dev in gpus {
        let got = body(dev);
        assert_eq!(got.len(), want.len(), "{test} on {dev}: output count");
        for ((name, g), (_, w)) in got.iter().zip(&want) {
            assert_eq!(
                g.len(),
                w.len(),
                "{test} {name} ({:?}) on {dev}: length",
                E::DTYPE
            );
            if let Some(i) = g.iter().zip(w).position(|(a, b)| a != b) {
                panic!(
                    "{test} {name} ({:?}) on {dev}, element {i}: got {}, the CPU gives {}",
                    E::DTYPE,
                    f64::from_bits(g[i]),
                    f64::from_bits(w[i])
                );
            }
        }
    }
}

/// Runs a generic test body in every element type.
macro_rules! every_element {
    ($f:ident) => {
        $f::<f32>();
        $f::<f64>();
        $f::<f16>();
        $f::<bf16>();
        $f::<i32>();
        $f::<i64>();
        $f::<u8>();
        $f::<bool>();
    };
}

/// Runs a generic test body in every element type with arithmetic.
macro_rules! every_num {
    ($f:ident) => {
        $f::<f32>();
        $f::<f64>();
        $f::<f16>();
        $f::<bf16>();
        $f::<i32>();
        $f::<i64>();
        $f::<u8>();
    };
}

/// Reproducible indices in `0..m`.
fn indices(n: usize, seed: u64, m: usize) -> Vec<i64> {
    values::<f64>(n, seed, 0.0, m as f64)
        .into_iter()
        .map(|v| (v as i64).min(m as i64 - 1))
        .collect()
}

// After the harness: its macros are visible only to modules declared below it.
mod attention;
mod backend_trait;
mod backward;
mod bert;
mod compiled;
mod conv;
mod elementwise;
mod index;
mod integer;
mod ir;
mod llama_decode;
mod mixed;
mod nccl;
mod norm;
mod oom;
mod optim;
mod perf;
mod quant;
mod random;
mod reduce;
mod softmax;
mod tensor_cores;
mod user_kernels;
