//! Dequantizing GGUF tensors on every device: every ggml type of the fixture written by
//! `tests/fixtures/gguf_quants.py` gives `gguf.quants.dequantize`'s f32 values bit for bit on
//! the CPU and on each GPU, and random blocks (every bit pattern of scales and values, NaN
//! and infinite scales included) give the CPU's bits on each GPU (any NaN for a NaN).

use super::*;
use rtx::io::{Checkpoint, Gguf};
use rtx::quant::{GgmlType, QTensor};
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
