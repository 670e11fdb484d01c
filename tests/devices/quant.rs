//! Dequantizing GGUF tensors on every device: every ggml type of the fixture written by
//! `tests/fixtures/gguf_quants.py` gives `gguf.quants.dequantize`'s f32 values bit for bit on
//! the CPU and on each GPU, and random blocks (every bit pattern of scales and values, NaN
//! and infinite scales included) give the CPU's bits on each GPU (any NaN for a NaN).

use super::*;
use rtx::io::{Checkpoint, Gguf};
use rtx::quant::{GgmlType, QInput, QTensor};
use std::path::PathBuf;

/// A fixture file: under the working directory (the repository root, where the GPU binaries
/// run) or else under the source tree.
fn fixture(name: &str) -> PathBuf {
    let rel = PathBuf::from("tests/fixtures").join(name);
    if rel.exists() {
        return rel;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn bits_equal(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
        assert!(
            same,
            "{what}, element {i}: got {g:e} ({:#x}), want {w:e} ({:#x})",
            g.to_bits(),
            w.to_bits()
        );
    }
}

fn dequantized(q: &QTensor) -> Vec<f32> {
    q.dequantize::<(usize, usize), f32>().unwrap().to_vec()
}

#[test]
fn quant_fixture_dequantizes_bitwise_as_gguf_on_every_device() {
    let g = Gguf::open(fixture("gguf_quants.gguf")).unwrap();
    let want = Checkpoint::open(fixture("gguf_quants_expected.safetensors")).unwrap();
    let mut devices = vec![Device::Cpu];
    match gpus() {
        Ok(v) => devices.extend(v),
        Err(why) => println!("quant fixture: skipped: no CUDA device: {why}"),
    }
    for dev in devices {
        for t in g.tensors() {
            let q = g.tensor(t.name(), dev).unwrap();
            assert_eq!(q.device(), dev);
            let w: Tensor<(usize, usize)> = want.tensor(t.name(), Device::Cpu).unwrap();
            bits_equal(
                &format!("{} on {dev}", t.name()),
                &dequantized(&q),
                &w.to_vec(),
            );
            let moved = g
                .tensor(t.name(), Device::Cpu)
                .unwrap()
                .to_device(dev)
                .unwrap();
            assert_eq!(moved.to_bytes(), q.to_bytes());
        }
    }
}

#[test]
fn quant_random_blocks_are_the_cpus_bits_on_every_gpu() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("quant random blocks: skipped: no CUDA device: {why}");
            return;
        }
    };
    for ty in GgmlType::ALL {
        // 64 rows of 1024 values: any bytes at all, from a fixed xorshift stream.
        let rows = 64;
        let bytes_len = ty.bytes_for(rows * 1024).unwrap();
        let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(ty.id());
        let bytes: Vec<u8> = (0..bytes_len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect();
        let cpu = QTensor::from_bytes(&bytes, &[rows, 1024], ty, Device::Cpu).unwrap();
        let want = dequantized(&cpu);
        for &dev in &gpus {
            let q = cpu.to_device(dev).unwrap();
            bits_equal(&format!("random {ty} on {dev}"), &dequantized(&q), &want);
            let h: Tensor<(usize, usize), f16> = q.dequantize().unwrap();
            let hc: Tensor<(usize, usize), f16> = cpu.dequantize().unwrap();
            let (h, hc) = (h.to_vec(), hc.to_vec());
            for (i, (a, b)) in h.iter().zip(&hc).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "random {ty} f16 on {dev}, element {i}"
                );
            }
        }
    }
}

/// Random `Q8_0` and `Q4_1` blocks with finite scales (f16 values in [-0.02, 0.02) and
/// minimums in [-0.1, 0.1)), for an `[n, k]` weight.
fn finite_blocks(ty: GgmlType, n: usize, k: usize, seed: u64) -> Vec<u8> {
    let size = ty.bytes_for(32).unwrap();
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut bytes: Vec<u8> = (0..n * k / 32 * size)
        .map(|_| (next() >> 24) as u8)
        .collect();
    let mut scale = |limit: f32| {
        let v = ((next() % 2001) as f32 / 1000.0 - 1.0) * limit;
        f16::from_f32(v).to_bits().to_le_bytes()
    };
    for blk in bytes.chunks_exact_mut(size) {
        blk[..2].copy_from_slice(&scale(0.02));
        if ty == GgmlType::Q4_1 {
            blk[2..4].copy_from_slice(&scale(0.1));
        }
    }
    bytes
}

/// A GPU's quantized product (`qmatmul_ggml`, the weight decoded in registers, f32
/// activations; `qmatvec_ggml` up to 4 rows; from 64 rows, or 2^20 outputs, `qmatmul_ggml_tc`,
/// the blocks' integers times the activations' two bf16 parts on the tensor cores) is the dequantized weight's product up to f32 rounding
/// (1e-5 of the terms' magnitudes), for decoding (one row) and prefill (many), contiguous activations and a transposed view; the CPU's product
/// (activations quantized to 8 bits, as llama.cpp) stays within its quantization error of it.
#[test]
fn quantized_products_on_every_gpu_are_the_dequantized_products() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("quantized products: skipped: no CUDA device: {why}");
            return;
        }
    };
    for ty in [GgmlType::Q8_0, GgmlType::Q4_1] {
        for (m, n, k) in [
            // Up to 4 rows (decoding) the products run on `qmatvec_ggml`.
            (1, 576, 576),
            (1, 1536, 576),
            (1, 576, 1536),
            (3, 300, 1536),
            (37, 300, 1536),
            (512, 64, 64),
            // From 64 rows the products run on the tensor cores: partial tiles both ways; so do
            // those of over 2^20 outputs past 4 rows (a batch's vocabulary head).
            (100, 300, 1536),
            (20, 53248, 64),
            // One row times 2^14 weight rows or more (the head) runs on `qmatvec_ggml_wide`,
            // four rows a warp: the last warp's rows partly empty.
            (1, 16386, 96),
        ] {
            let bytes = finite_blocks(ty, n, k, (m * n + k) as u64);
            let cpu_w = QTensor::from_bytes(&bytes, &[n, k], ty, Device::Cpu).unwrap();
            let dense: Vec<f32> = dequantized(&cpu_w);
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 1001) as f32 / 500.0 - 1.0) * 0.5)
                .collect();
            let cpu_x: Tensor<(usize, usize)> = Tensor::from_vec(x.clone(), (m, k), Device::Cpu);
            let cpu = cpu_w.matmul_t(&cpu_x).unwrap().to_vec();
            for &dev in &gpus {
                let w = cpu_w.to_device(dev).unwrap();
                // The same activations once as a dense tensor and once as a transposed view.
                let xt: Tensor<(usize, usize)> = Tensor::from_vec(transpose(&x, m, k), (k, m), dev);
                let views = [cpu_x.to_device(dev), xt.t()];
                for (v, xs) in views.iter().enumerate() {
                    let got = w.matmul_t(xs).unwrap().to_vec();
                    for r in 0..m {
                        for c in 0..n {
                            let terms = (0..k)
                                .map(|j| f64::from(x[r * k + j]) * f64::from(dense[c * k + j]));
                            let exact: f64 = terms.clone().sum();
                            let mag: f64 = terms.map(f64::abs).sum();
                            let (g, q) = (f64::from(got[r * n + c]), f64::from(cpu[r * n + c]));
                            assert!(
                                (g - exact).abs() <= 1e-5 * mag.max(1e-30),
                                "{ty} [{m}, {k}] x [{n}, {k}]ᵀ on {dev} (view {v}), [{r}, {c}]: \
                                 {g} against {exact}"
                            );
                            assert!(
                                (q - exact).abs() <= 0.02 * mag.max(1e-30),
                                "{ty} on the CPU, [{r}, {c}]: {q} against {exact}"
                            );
                        }
                    }
                }
            }
        }
    }
}

fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| x[(i % rows) * cols + i / rows])
        .collect()
}

/// `QTensor::matmul_t_joined` (the rows RMS-normed before the product, a residual added
/// after) on every device: on the CPU exactly the composition `rms_norm`, `matmul_t`, `+`;
/// on each GPU (one launch below 64 rows, `qmatvec_ggml` up to 4 (`qmatvec_ggml_wide` for
/// one row times 2^14 weight rows) and `qmatmul_ggml` past them; the norm's launch, then the tensor cores' product with the residual, from 64 rows or
/// 2^20 outputs) the dequantized weight's f32 product of the normed rows plus the residual, within
/// 1e-5 of the terms' magnitudes. A norm weight of the wrong length is an error naming it.
#[test]
fn joined_products_are_the_norm_the_product_and_the_sum_on_every_device() {
    let eps = 1e-5;
    let mut devices = vec![Device::Cpu];
    match gpus() {
        Ok(g) => devices.extend(g),
        Err(why) => println!("joined quantized products: GPUs skipped: no CUDA device: {why}"),
    }
    for ty in [GgmlType::Q8_0, GgmlType::Q4_1] {
        for (m, n, k) in [
            (1, 576, 576),
            (3, 300, 1536),
            (37, 64, 256),
            (100, 96, 128),
            (20, 53248, 64),
            (1, 16386, 576),
        ] {
            let bytes = finite_blocks(ty, n, k, (m + 7 * n + k) as u64);
            let cpu_w = QTensor::from_bytes(&bytes, &[n, k], ty, Device::Cpu).unwrap();
            let dense = dequantized(&cpu_w);
            let x: Vec<f32> = (0..m * k)
                .map(|i| (i * 53 % 997) as f32 / 250.0 - 2.0)
                .collect();
            let g: Vec<f32> = (0..k)
                .map(|i| 0.5 + (i * 29 % 101) as f32 / 100.0)
                .collect();
            let r: Vec<f32> = (0..m * n).map(|i| (i * 17 % 89) as f32 - 44.0).collect();
            for &dev in &devices {
                let w = cpu_w.to_device(dev).unwrap();
                let xs: Tensor<(usize, usize)> = Tensor::from_vec(x.clone(), (m, k), dev);
                let gs: Tensor<(usize,)> = Tensor::from_vec(g.clone(), (k,), dev);
                let rs: Tensor<(usize, usize)> = Tensor::from_vec(r.clone(), (m, n), dev);
                let got = w
                    .matmul_t_joined(&xs, QInput::RmsNorm(&gs, eps), Some(&rs))
                    .unwrap()
                    .to_vec();
                if dev == Device::Cpu {
                    let normed = rtx::nn::rms_norm(&xs, &gs, eps).unwrap();
                    let want = (&rs + &w.matmul_t(&normed).unwrap()).to_vec();
                    assert_eq!(got, want, "{ty} [{m}, {n}, {k}] on the CPU");
                    continue;
                }
                for row in 0..m {
                    let xr = &x[row * k..(row + 1) * k];
                    let ms =
                        xr.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / k as f64;
                    let rstd = 1.0 / (ms + eps).sqrt();
                    for c in 0..n {
                        let terms = (0..k).map(|j| {
                            f64::from(xr[j]) * rstd * f64::from(g[j]) * f64::from(dense[c * k + j])
                        });
                        let exact = terms.clone().sum::<f64>() + f64::from(r[row * n + c]);
                        let mag: f64 =
                            terms.map(f64::abs).sum::<f64>() + f64::from(r[row * n + c]).abs();
                        let v = f64::from(got[row * n + c]);
                        assert!(
                            (v - exact).abs() <= 1e-5 * mag.max(1e-30),
                            "{ty} [{m}, {n}, {k}] on {dev}, [{row}, {c}]: {v} against {exact}"
                        );
                    }
                }
            }
        }
    }
    let w = QTensor::from_bytes(
        &finite_blocks(GgmlType::Q8_0, 2, 64, 1),
        &[2, 64],
        GgmlType::Q8_0,
        Device::Cpu,
    )
    .unwrap();
    let x: Tensor<(usize, usize)> = Tensor::from_vec(vec![1.0; 64], (1, 64), Device::Cpu);
    let short: Tensor<(usize,)> = Tensor::from_vec(vec![1.0; 32], (32,), Device::Cpu);
    let err = w
        .matmul_t_joined(&x, QInput::RmsNorm(&short, eps), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("[32]") && err.contains("norm"), "{err}");
}

/// `QTensor::matmul_t_swiglu` (a stacked gate-and-up weight `[2 F, K]`, SwiGLU of the two
/// products) on every device, its rows plain or RMS-normed: on the CPU exactly the product,
/// then `silu(gate) * up`; on each GPU (one launch below 64 rows, the product then SwiGLU's
/// launch from 64) the dequantized weight's f32 products' SwiGLU within 1e-5 of the terms'
/// magnitudes. A weight of odd rows is an error naming it.
#[test]
fn swiglu_products_are_silu_of_the_gate_times_the_up_on_every_device() {
    let eps = 1e-5;
    let mut devices = vec![Device::Cpu];
    match gpus() {
        Ok(g) => devices.extend(g),
        Err(why) => println!("SwiGLU products: GPUs skipped: no CUDA device: {why}"),
    }
    for ty in [GgmlType::Q8_0, GgmlType::Q4_1] {
        for (m, f, k) in [(1, 576, 576), (4, 96, 256), (37, 64, 128), (70, 64, 64)] {
            let bytes = finite_blocks(ty, 2 * f, k, (3 * m + f + k) as u64);
            let cpu_w = QTensor::from_bytes(&bytes, &[2 * f, k], ty, Device::Cpu).unwrap();
            let dense = dequantized(&cpu_w);
            let x: Vec<f32> = (0..m * k)
                .map(|i| (i * 71 % 991) as f32 / 200.0 - 2.5)
                .collect();
            let g: Vec<f32> = (0..k)
                .map(|i| 0.5 + (i * 29 % 101) as f32 / 100.0)
                .collect();
            for normed in [false, true] {
                // The rows as the product takes them, in f64.
                let rows: Vec<f64> = (0..m)
                    .flat_map(|r| {
                        let xr = &x[r * k..(r + 1) * k];
                        let ms = xr.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / k as f64;
                        let rstd = if normed { 1.0 / (ms + eps).sqrt() } else { 1.0 };
                        let g = &g;
                        (0..k).map(move |j| {
                            let w = if normed { f64::from(g[j]) } else { 1.0 };
                            f64::from(xr[j]) * rstd * w
                        })
                    })
                    .collect();
                for &dev in &devices {
                    let w = cpu_w.to_device(dev).unwrap();
                    let xs: Tensor<(usize, usize)> = Tensor::from_vec(x.clone(), (m, k), dev);
                    let gs: Tensor<(usize,)> = Tensor::from_vec(g.clone(), (k,), dev);
                    let input = if normed {
                        QInput::RmsNorm(&gs, eps)
                    } else {
                        QInput::Rows
                    };
                    let got = w.matmul_t_swiglu(&xs, input).unwrap().to_vec();
                    if dev == Device::Cpu {
                        let both = w.matmul_t_joined(&xs, input, None).unwrap().to_vec();
                        let want: Vec<f32> = (0..m * f)
                            .map(|i| {
                                let (r, c) = (i / f, i % f);
                                rtx::kernels::silu(both[r * 2 * f + c]) * both[r * 2 * f + f + c]
                            })
                            .collect();
                        assert_eq!(got, want, "{ty} [{m}, {f}, {k}] normed {normed}, CPU");
                        continue;
                    }
                    for r in 0..m {
                        let sum = |row: usize| {
                            let terms =
                                (0..k).map(|j| rows[r * k + j] * f64::from(dense[row * k + j]));
                            (terms.clone().sum::<f64>(), terms.map(f64::abs).sum::<f64>())
                        };
                        for c in 0..f {
                            let ((gate, gmag), (up, umag)) = (sum(c), sum(f + c));
                            let silu = gate / (1.0 + (-gate).exp());
                            let exact = silu * up;
                            // The error of each sum, carried through SwiGLU (|silu'| <= 1.1).
                            let bound = 1e-5 * (1.1 * gmag * up.abs() + silu.abs() * umag);
                            let v = f64::from(got[r * f + c]);
                            assert!(
                                (v - exact).abs() <= bound.max(1e-30),
                                "{ty} [{m}, {f}, {k}] normed {normed} on {dev}, [{r}, {c}]: {v} \
                                 against {exact}"
                            );
                        }
                    }
                }
            }
        }
    }
    let w = QTensor::from_bytes(
        &finite_blocks(GgmlType::Q8_0, 3, 64, 2),
        &[3, 64],
        GgmlType::Q8_0,
        Device::Cpu,
    )
    .unwrap();
    let x: Tensor<(usize, usize)> = Tensor::from_vec(vec![1.0; 64], (1, 64), Device::Cpu);
    let err = w.matmul_t_swiglu(&x, QInput::Rows).unwrap_err().to_string();
    assert!(err.contains("SwiGLU") && err.contains("[3, 64]"), "{err}");
}
