//! The products against f64 sums of the dequantized values, every copy of the loops against
//! the baseline bit for bit, and the activations' quantization against llama.cpp's rules.

use super::*;

/// Reproducible values in [-1, 1) as f32.
fn values(n: usize, seed: u64) -> Vec<f32> {
    crate::test_values::values(n, seed)
        .into_iter()
        .map(|v| v as f32)
        .collect()
}

/// Random blocks of `ty` for an `[n, k]` weight: scales of either sign, any value bytes
/// (Q8_0's -128 included), and Q4_1 minimums of either sign.
fn weight(ty: QWeight, n: usize, k: usize, seed: u64) -> Vec<u8> {
    let v = values(n * k / BLOCK * ty.block_bytes(), seed);
    let mut bytes: Vec<u8> = v.iter().map(|x| ((x + 1.0) * 127.9) as u8).collect();
    for blk in bytes.chunks_exact_mut(ty.block_bytes()) {
        // Scales (and Q4_1's minimum) as real f16 values, not random bit patterns.
        let d = f16::from_f32(blk[0] as f32 / 255.0 * 0.02 - 0.01)
            .to_bits()
            .to_le_bytes();
        blk[..2].copy_from_slice(&d);
        if ty == QWeight::Q4_1 {
            let m = f16::from_f32(blk[3] as f32 / 255.0 * 0.2 - 0.1)
                .to_bits()
                .to_le_bytes();
            blk[2..4].copy_from_slice(&m);
        }
    }
    bytes
}

/// The weight's values as ggml defines them, in f64.
fn dequantized(ty: QWeight, w: &[u8]) -> Vec<f64> {
    let mut out = Vec::new();
    for blk in w.chunks_exact(ty.block_bytes()) {
        let d = f64::from(scale(blk[0], blk[1]));
        match ty {
            QWeight::Q8_0 => out.extend(blk[2..].iter().map(|&q| d * f64::from(q as i8))),
            QWeight::Q4_1 => {
                let m = f64::from(scale(blk[2], blk[3]));
                let q = &blk[4..];
                out.extend(q.iter().map(|&p| d * f64::from(p & 15) + m));
                out.extend(q.iter().map(|&p| d * f64::from(p >> 4) + m));
            }
        }
    }
    out
}

/// Shapes that leave partial tiles in both directions, a panel and a half of rows, tasks of
/// different widths, and one row against many blocks (a decoding step's product).
const SHAPES: [(usize, usize, usize); 8] = [
    (1, 37, 64),
    (1, 70, 576),
    (5, 16, 32),
    (3, 50, 256),
    (1, 1, 32),
    (7, 9, 96),
    (97, 70, 128),
    (4, 300, 64),
];

/// Every copy of the loops this CPU runs (AVX-512 with and without VNNI, AVX2) gives the
/// baseline's bits on every shape, and the baseline's outputs are each the scalar definition
/// of one dot product, whatever tile and task computed them.
#[test]
fn every_copy_gives_the_baselines_bits() {
    let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.available()).collect();
    println!("copies on this CPU: {isas:?}");
    for ty in [QWeight::Q8_0, QWeight::Q4_1] {
        for (m, n, k) in SHAPES {
            let w = weight(ty, n, k, 7 + m as u64);
            let x = values(m * k, 3 + n as u64);
            let base = qmatmul_on(Isa::Baseline, &w, ty, n, k, &x, m);
            let xq = quantize_rows(&x, k);
            let nb = k / BLOCK;
            let rb = nb * ty.block_bytes();
            for i in 0..m {
                let row = Row {
                    d: &xq.d[i * nb..][..nb],
                    s: &xq.s[i * nb..][..nb],
                    q: &xq.q[i * k..][..k],
                };
                for j in 0..n {
                    let want = scalar::dot(ty, &w[j * rb..][..rb], &row);
                    assert_eq!(base[i * n + j].to_bits(), want.to_bits());
                }
            }
            for &isa in &isas {
                let got = qmatmul_on(isa, &w, ty, n, k, &x, m);
                let same = got
                    .iter()
                    .zip(&base)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{ty:?} {m}x{n}x{k}: {isa:?} against the baseline");
            }
        }
    }
}

/// Each output is the product of the dequantized weight with the dequantized activations
/// (exact integer sums, so only f32 rounding separates them), and the activations'
/// quantization moves a product by little against the unquantized f32 one.
#[test]
fn quantized_products_are_the_dequantized_ones() {
    for ty in [QWeight::Q8_0, QWeight::Q4_1] {
        for (m, n, k) in SHAPES {
            let w = weight(ty, n, k, 7 + m as u64);
            let x = values(m * k, 3 + n as u64);
            let got = qmatmul(&w, ty, n, k, &x, m);
            let wd = dequantized(ty, &w);
            let xq = quantize_rows(&x, k);
            let xd: Vec<f64> =
                xq.q.iter()
                    .enumerate()
                    .map(|(i, &q)| f64::from(xq.d[i / BLOCK]) * f64::from(q))
                    .collect();
            for i in 0..m {
                for j in 0..n {
                    let dot = |a: &[f64]| -> f64 {
                        (0..k).map(|t| a[i * k + t] * wd[j * k + t]).sum::<f64>()
                    };
                    let mag: f64 = (0..k).map(|t| (xd[i * k + t] * wd[j * k + t]).abs()).sum();
                    let g = f64::from(got[i * n + j]);
                    // Q4_1's minimum meets the block's sum as stored (rounded to f16),
                    // not the sum of the dequantized activations; the rest is exact.
                    let exact = dot(&xd) + min_term_rounding(ty, &w, &xq, i, j, k);
                    assert!(
                        (g - exact).abs() <= 1e-5 * mag.max(1e-30),
                        "{ty:?} {m}x{n}x{k} [{i}, {j}]: {g} against {exact}"
                    );
                    let x32: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                    let plain = dot(&x32);
                    assert!(
                        (g - plain).abs() <= 0.02 * mag.max(1e-30),
                        "{ty:?} {m}x{n}x{k} [{i}, {j}]: {g} against unquantized {plain}"
                    );
                }
            }
        }
    }
}

/// Σ over blocks of `m_w (s - d Σ q)`: what storing Q4_1's activation sums as f16 adds to
/// output `[i, j]` (0 for Q8_0).
fn min_term_rounding(
    ty: QWeight,
    w: &[u8],
    xq: &QActivations,
    i: usize,
    j: usize,
    k: usize,
) -> f64 {
    if ty == QWeight::Q8_0 {
        return 0.0;
    }
    let nb = k / BLOCK;
    (0..nb)
        .map(|b| {
            let blk = &w[(j * nb + b) * 20..];
            let q = &xq.q[(i * nb + b) * BLOCK..][..BLOCK];
            let sum: f64 = q.iter().map(|&v| f64::from(v)).sum();
            let (d, s) = (f64::from(xq.d[i * nb + b]), f64::from(xq.s[i * nb + b]));
            f64::from(scale(blk[2], blk[3])) * (s - d * sum)
        })
        .sum()
}

/// The activations' blocks follow llama.cpp's rules: values times 127 / max, ties to even;
/// the scale and the sum rounded to f16.
#[test]
fn activations_quantize_as_llama_cpp_does() {
    // max 127: the multiplier is 1, so 2.5 and 3.5 are ties (to 2 and 4, not 3 and 4), and
    // -2.5 goes to -2.
    let mut x = vec![0.0f32; 32];
    x[..5].copy_from_slice(&[127.0, 2.5, 3.5, -2.5, 0.49]);
    let q = quantize_rows(&x, 32);
    assert_eq!(q.q[..5], [127, 2, 4, -2, 0]);
    assert_eq!((q.d[0], q.s[0]), (1.0, 131.0));
    // A scale that f16 cannot hold: max 1 gives 1/127, stored as the nearest f16.
    let mut x = vec![0.25f32; 32];
    x[0] = 1.0;
    let q = quantize_rows(&x, 32);
    let d = 1.0f32 / 127.0;
    assert_eq!(q.d[0], f16::from_f32(d).to_f32());
    assert_ne!(q.d[0], d);
    // 0.25 · 127 = 31.75 -> 32; the sum is 127 + 31 · 32 with the unrounded scale.
    assert_eq!(q.q[1], 32);
    assert_eq!(q.s[0], f16::from_f32(d * (127 + 31 * 32) as f32).to_f32());
}

/// An all-zero block of activations has scale 0 and contributes nothing (no NaN).
#[test]
fn zero_blocks_quantize_to_zero() {
    let q = quantize_rows(&[0.0; 64], 64);
    assert_eq!(q.d, vec![0.0, 0.0]);
    assert!(q.q.iter().all(|&v| v == 0));
    let w = weight(QWeight::Q8_0, 2, 64, 1);
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        assert_eq!(
            qmatmul_on(isa, &w, QWeight::Q8_0, 2, 64, &[0.0; 64], 1),
            vec![0.0, 0.0]
        );
    }
}

/// Several weights in one pass give each weight's own product, bit for bit, on every copy,
/// whatever mix of types and sizes (so chunks of one weight sit beside another's).
#[test]
fn each_weight_of_one_pass_gives_its_own_product() {
    let shapes = [
        (QWeight::Q4_1, 37),
        (QWeight::Q8_0, 5),
        (QWeight::Q4_1, 130),
    ];
    for (m, k) in [(1, 64), (6, 96)] {
        let ws: Vec<Vec<u8>> = shapes
            .iter()
            .map(|&(ty, n)| weight(ty, n, k, n as u64))
            .collect();
        let x = values(m * k, 11);
        let parts: Vec<QPart<'_>> = shapes
            .iter()
            .zip(&ws)
            .map(|(&(ty, n), w)| QPart { w, ty, n })
            .collect();
        for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
            let got = qmatmul_each_on(isa, &parts, k, &x, m);
            for (g, p) in got.iter().zip(&parts) {
                let want = qmatmul_on(Isa::Baseline, p.w, p.ty, p.n, k, &x, m);
                let same = g.len() == want.len()
                    && g.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa:?} {m}x{}x{k} {:?}", p.n, p.ty);
            }
        }
    }
}
