//! The quantized product kernels (`kernels::qmatmul_ggml`, `qmatvec_ggml` and
//! `qmatvec_ggml_wide` for decoding, and `qmatmul_ggml_tc` on the tensor cores) on the CPU's block emulation: for `Q8_0` and `Q4_1` weights of random
//! blocks, every output equals the product of the weight as `dequantize_ggml` decodes it with
//! the activations, up to f32 rounding of the sums (and for the tensor cores, the activations'
//! two bf16 parts), over sizes that leave partial warps of columns and partial groups of rows.
//! `tests/devices` holds the GPU to the CPU's product.

use half::bf16;
use rtx_kernels::kernel::LaunchConfig;
use rtx_kernels::kernels::{
    QINPUT_RMS_NORM, QINPUT_ROWS, QMATMUL_ROWS, QMATMUL_TC_THREADS, QMATMUL_TC_TILE,
    QMATMUL_THREADS, QMATVEC_ROWS, QMATVEC_WIDE_ROWS, dequantize_ggml, qmatmul_ggml,
    qmatmul_ggml_tc, qmatvec_ggml, qmatvec_ggml_wide, silu, swiglu_rows,
};

/// A reproducible stream of words.
fn words(n: usize, seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n).map(move |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}

/// An f16 value in [-scale, scale), as its bits.
fn f16_bits(w: u64, scale: f32) -> [u8; 2] {
    let v = ((w % 2001) as f32 / 1000.0 - 1.0) * scale;
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

/// Random blocks of GGUF type `kind` (8: Q8_0, 3: Q4_1) for an `[n, k]` weight, as
/// little-endian words (zero-padded).
fn weight(kind: u32, n: usize, k: usize, seed: u64) -> Vec<i32> {
    let size = if kind == 8 { 34 } else { 20 };
    let blocks = n * k / 32;
    let mut bytes: Vec<u8> = words(blocks * size, seed)
        .map(|w| (w >> 24) as u8)
        .collect();
    let mut scales = words(2 * blocks, seed + 1);
    for blk in bytes.chunks_exact_mut(size) {
        blk[..2].copy_from_slice(&f16_bits(scales.next().unwrap(), 0.02));
        if kind == 3 {
            blk[2..4].copy_from_slice(&f16_bits(scales.next().unwrap(), 0.1));
        }
    }
    bytes.resize(bytes.len().div_ceil(4) * 4, 0);
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The `len` values of the blocks `w` of type `kind` as `dequantize_ggml` decodes them.
fn dequantized(kind: u32, w: &[i32], len: usize) -> Vec<f32> {
    let mut dense = vec![0.0f32; len];
    let size = if kind == 8 { 34 } else { 20 };
    dequantize_ggml(LaunchConfig::new(4, 64), w, &mut dense, kind, 32, size, len).unwrap();
    dense
}

/// `qmatvec_ggml`'s `[m, n]` product of `x` on blocks of `threads` threads, its rows taken as
/// `input` says (`g` and `eps` for the norm), SwiGLU of a `[2 n, k]` weight's halves with
/// `glu`, no residual.
fn qmatvec(
    w: &[i32],
    x: &[f32],
    (m, n, k): (usize, usize, usize),
    kind: u32,
    threads: u32,
    (input, g, eps): (u32, &[f32], f32),
    glu: u32,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; m * n];
    let config = LaunchConfig::new(n.div_ceil(threads as usize / 32) as u32, threads);
    qmatvec_ggml(
        config,
        w,
        x,
        &[],
        &mut out,
        m,
        n,
        k,
        kind,
        0,
        g,
        input,
        eps,
        glu,
    )
    .unwrap();
    out
}

/// `qmatmul_ggml`'s `[m, n]` product of `x`, as [`qmatvec`] takes its arguments.
fn qmatmul(
    w: &[i32],
    x: &[f32],
    (m, n, k): (usize, usize, usize),
    kind: u32,
    (input, g, eps): (u32, &[f32], f32),
    glu: u32,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; m * n];
    let config = LaunchConfig::new(
        (n.div_ceil(4) as u32, m.div_ceil(QMATMUL_ROWS) as u32),
        QMATMUL_THREADS,
    );
    qmatmul_ggml(
        config,
        w,
        x,
        &[],
        &mut out,
        m,
        n,
        k,
        kind,
        0,
        g,
        input,
        eps,
        glu,
    )
    .unwrap();
    out
}

/// Which kernel [`check_on`] runs.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    /// `qmatmul_ggml`, f32 FMAs: within 1e-6 of the terms' magnitudes.
    Fma,
    /// `qmatmul_ggml_tc`, the tensor cores: within 1e-5 (the activations keep 16 bits).
    TensorCores,
}

fn check(kind: u32, m: usize, n: usize, k: usize) {
    check_on(Path::Fma, kind, m, n, k);
}

fn check_on(path: Path, kind: u32, m: usize, n: usize, k: usize) {
    let w = weight(kind, n, k, (m * 31 + n * 7 + k) as u64);
    let x: Vec<f32> = words(m * k, 5)
        .map(|v| (v % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let dense = dequantized(kind, &w, n * k);
    let mut out = vec![f32::NAN; m * n];
    let tol = match path {
        Path::Fma => {
            let config = LaunchConfig::new(
                (
                    n.div_ceil(QMATMUL_THREADS as usize / 32) as u32,
                    m.div_ceil(QMATMUL_ROWS) as u32,
                ),
                QMATMUL_THREADS,
            );
            qmatmul_ggml(
                config,
                &w,
                &x,
                &[],
                &mut out,
                m,
                n,
                k,
                kind,
                0,
                &[],
                QINPUT_ROWS,
                0.0,
                0,
            )
            .unwrap();
            1e-6
        }
        Path::TensorCores => {
            let config = LaunchConfig::new(
                (
                    n.div_ceil(QMATMUL_TC_TILE) as u32,
                    m.div_ceil(QMATMUL_TC_TILE) as u32,
                ),
                QMATMUL_TC_THREADS,
            );
            qmatmul_ggml_tc::<bf16>(config, &w, &x, &[], &mut out, m, n, k, kind, 0).unwrap();
            1e-5
        }
    };
    for r in 0..m {
        for c in 0..n {
            let terms = (0..k).map(|j| f64::from(x[r * k + j]) * f64::from(dense[c * k + j]));
            let exact: f64 = terms.clone().sum();
            let mag: f64 = terms.map(f64::abs).sum();
            let got = f64::from(out[r * n + c]);
            assert!(
                (got - exact).abs() <= tol * mag.max(1e-30),
                "type {kind}, [{m}, {k}] x [{n}, {k}]ᵀ at [{r}, {c}]: {got} against {exact}"
            );
        }
    }
}

#[test]
fn q8_0_products_are_the_dequantized_weights_products() {
    for (m, n, k) in [
        (1, 1, 32),
        (1, 37, 64),
        (9, 6, 96),
        (3, 4, 576),
        (4, 5, 64),
        (5, 5, 64),
    ] {
        check(8, m, n, k);
    }
}

#[test]
fn q4_1_products_are_the_dequantized_weights_products() {
    for (m, n, k) in [(1, 1, 32), (1, 37, 64), (9, 6, 96), (17, 5, 256)] {
        check(3, m, n, k);
    }
}

#[test]
fn tensor_core_products_are_the_dequantized_weights_products() {
    // Partial tiles of rows and of weight rows, an odd number of blocks (a step's second block
    // empty), and two tiles each way.
    for kind in [8, 3] {
        for (m, n, k) in [(1, 1, 32), (5, 9, 96), (70, 66, 64), (17, 130, 160)] {
            check_on(Path::TensorCores, kind, m, n, k);
        }
    }
}

/// The decoding kernel gives `qmatmul_ggml`'s outputs bit for bit (the same lanes decode the
/// same values and add them in the same order), for 1 to 4 rows, K short of a step of 8 blocks,
/// one step, several of its 4-step chunks and a ragged last one, and blocks of 64 threads as
/// of 128.
#[test]
fn decoding_products_equal_qmatmul_ggml_bit_for_bit() {
    for kind in [8, 3] {
        for (m, n, k) in [
            (1, 1, 32),
            (1, 37, 576),
            (2, 9, 256),
            (3, 5, 1536),
            (4, 6, 96),
            (1, 3, 2048 + 64),
        ] {
            assert!(m <= QMATVEC_ROWS);
            let w = weight(kind, n, k, (m * 13 + n + k) as u64);
            let x: Vec<f32> = words(m * k, 9)
                .map(|v| (v % 1000) as f32 / 500.0 - 1.0)
                .collect();
            let mut want = vec![f32::NAN; m * n];
            let config = LaunchConfig::new(
                (
                    n.div_ceil(QMATMUL_THREADS as usize / 32) as u32,
                    m.div_ceil(QMATMUL_ROWS) as u32,
                ),
                QMATMUL_THREADS,
            );
            qmatmul_ggml(
                config,
                &w,
                &x,
                &[],
                &mut want,
                m,
                n,
                k,
                kind,
                0,
                &[],
                QINPUT_ROWS,
                0.0,
                0,
            )
            .unwrap();
            for threads in [64u32, 128] {
                let got = qmatvec(&w, &x, (m, n, k), kind, threads, (QINPUT_ROWS, &[], 0.0), 0);
                assert_eq!(
                    got, want,
                    "type {kind}, [{m}, {k}] x [{n}, {k}]ᵀ, {threads} threads"
                );
            }
        }
    }
}

/// The wide decoding kernel (four weight rows a warp) gives `qmatvec_ggml`'s one-row outputs
/// bit for bit, plain, RMS-normed and with the residual added, for row counts that leave a
/// warp's last rows and a block's last warps empty, K within one 8-block step, the head's 18
/// blocks (a live partial third step), two and several of its 16-block chunks.
#[test]
fn wide_products_equal_qmatvec_ggml_bit_for_bit() {
    let eps = 1e-5f32;
    for kind in [8, 3] {
        for (n, k) in [(1, 32), (7, 576), (37, 512), (130, 96), (9, 2048 + 96)] {
            let w = weight(kind, n, k, (n * 7 + k) as u64);
            let x: Vec<f32> = words(k, 21)
                .map(|v| (v % 1000) as f32 / 250.0 - 2.0)
                .collect();
            let g: Vec<f32> = words(k, 22)
                .map(|v| (v % 1000) as f32 / 1000.0 + 0.5)
                .collect();
            let res: Vec<f32> = words(n, 23).map(|v| (v % 1000) as f32 - 500.0).collect();
            for (input, gw) in [(QINPUT_ROWS, &[][..]), (QINPUT_RMS_NORM, &g[..])] {
                for add in [0, 1] {
                    let mut want = vec![f32::NAN; n];
                    qmatvec_ggml(
                        LaunchConfig::new(n.div_ceil(4) as u32, 128),
                        &w,
                        &x,
                        &res,
                        &mut want,
                        1,
                        n,
                        k,
                        kind,
                        add,
                        gw,
                        input,
                        eps,
                        0,
                    )
                    .unwrap();
                    for threads in [64u32, 128] {
                        let per_block = threads as usize / 32 * QMATVEC_WIDE_ROWS;
                        let config = LaunchConfig::new(n.div_ceil(per_block) as u32, threads);
                        let mut got = vec![f32::NAN; n];
                        qmatvec_ggml_wide(
                            config, &w, &x, &res, &mut got, n, k, kind, add, gw, input, eps,
                        )
                        .unwrap();
                        assert_eq!(
                            got, want,
                            "type {kind}, [{k}] x [{n}, {k}]ᵀ, input {input}, add {add}, \
                             {threads} threads"
                        );
                    }
                }
            }
        }
    }
}

/// The joined neighbours: with `norm` the decoding kernel's and `qmatmul_ggml`'s products are
/// those of the RMS-normed rows (`x / sqrt(mean(x²) + eps) * g`, normed first in f64) within 1e-6 of the
/// terms' magnitudes; with `add` every kernel adds the residual after its sum, exactly.
#[test]
fn products_join_the_norm_before_and_the_residual_after() {
    let eps = 1e-5f32;
    for kind in [8, 3] {
        for (m, n, k) in [(1, 37, 576), (3, 5, 1536), (9, 6, 96), (70, 66, 64)] {
            let w = weight(kind, n, k, (m + n * 3 + k) as u64);
            let x: Vec<f32> = words(m * k, 11)
                .map(|v| (v % 1000) as f32 / 250.0 - 2.0)
                .collect();
            let g: Vec<f32> = words(k, 12)
                .map(|v| (v % 1000) as f32 / 1000.0 + 0.5)
                .collect();
            let res: Vec<f32> = words(m * n, 13)
                .map(|v| (v % 1000) as f32 - 500.0)
                .collect();
            let dense = dequantized(kind, &w, n * k);
            // Plain products, then the same with the residual added: exactly the sum.
            let mut plain = vec![f32::NAN; m * n];
            let mut added = vec![f32::NAN; m * n];
            if m <= QMATVEC_ROWS {
                let config = LaunchConfig::new(n.div_ceil(4) as u32, 128);
                for (add, out) in [(0, &mut plain), (1, &mut added)] {
                    qmatvec_ggml(
                        config,
                        &w,
                        &x,
                        &res,
                        out,
                        m,
                        n,
                        k,
                        kind,
                        add,
                        &[],
                        QINPUT_ROWS,
                        0.0,
                        0,
                    )
                    .unwrap();
                }
            } else {
                let (tile, threads) = (QMATMUL_TC_TILE, QMATMUL_TC_THREADS);
                let tc =
                    LaunchConfig::new((n.div_ceil(tile) as u32, m.div_ceil(tile) as u32), threads);
                let fma = LaunchConfig::new(
                    (n.div_ceil(4) as u32, m.div_ceil(QMATMUL_ROWS) as u32),
                    QMATMUL_THREADS,
                );
                for (add, out) in [(0, &mut plain), (1, &mut added)] {
                    qmatmul_ggml(
                        fma,
                        &w,
                        &x,
                        &res,
                        out,
                        m,
                        n,
                        k,
                        kind,
                        add,
                        &[],
                        QINPUT_ROWS,
                        0.0,
                        0,
                    )
                    .unwrap();
                }
                let mut tc_plain = vec![f32::NAN; m * n];
                let mut tc_added = vec![f32::NAN; m * n];
                for (add, out) in [(0, &mut tc_plain), (1, &mut tc_added)] {
                    qmatmul_ggml_tc::<bf16>(tc, &w, &x, &res, out, m, n, k, kind, add).unwrap();
                }
                for i in 0..m * n {
                    assert_eq!(
                        tc_added[i],
                        tc_plain[i] + res[i],
                        "tensor cores, output {i}"
                    );
                }
            }
            for i in 0..m * n {
                assert_eq!(
                    added[i],
                    plain[i] + res[i],
                    "type {kind}, [{m}, {n}, {k}], output {i}"
                );
            }
            let normed = if m <= QMATVEC_ROWS {
                qmatvec(&w, &x, (m, n, k), kind, 128, (QINPUT_RMS_NORM, &g, eps), 0)
            } else {
                qmatmul(&w, &x, (m, n, k), kind, (QINPUT_RMS_NORM, &g, eps), 0)
            };
            for r in 0..m {
                let row = &x[r * k..(r + 1) * k];
                let mean = row
                    .iter()
                    .map(|&v| f64::from(v) * f64::from(v))
                    .sum::<f64>()
                    / k as f64;
                let rstd = 1.0 / (mean + f64::from(eps)).sqrt();
                for c in 0..n {
                    let terms = (0..k).map(|j| {
                        f64::from(row[j]) * rstd * f64::from(g[j]) * f64::from(dense[c * k + j])
                    });
                    let exact: f64 = terms.clone().sum();
                    let mag: f64 = terms.map(f64::abs).sum();
                    let got = f64::from(normed[r * n + c]);
                    assert!(
                        (got - exact).abs() <= 1e-6 * mag.max(1e-30),
                        "type {kind}, normed [{m}, {k}] x [{n}, {k}]ᵀ at [{r}, {c}]: {got} \
                         against {exact}"
                    );
                }
            }
        }
    }
}

/// SwiGLU as the products' output (`glu`): from a `[2 n, k]` weight (gate rows, then up
/// rows) both kernels give, bit for bit, `swiglu_rows` of their own `[m, 2 n]` product (the
/// same sums, then the same `silu(gate) * up`), for plain and RMS-normed rows; and
/// `swiglu_rows` is that formula.
#[test]
fn swiglu_outputs_are_swiglu_rows_of_the_stacked_product() {
    let eps = 1e-5f32;
    for kind in [8, 3] {
        for (m, n, k) in [
            (1, 37, 576),
            (3, 5, 1536),
            (4, 6, 96),
            (9, 7, 288),
            (17, 5, 64),
        ] {
            let w = weight(kind, 2 * n, k, (m * 5 + n + k) as u64);
            let x: Vec<f32> = words(m * k, 21)
                .map(|v| (v % 1000) as f32 / 200.0 - 2.5)
                .collect();
            let g: Vec<f32> = words(k, 22)
                .map(|v| (v % 1000) as f32 / 1000.0 + 0.5)
                .collect();
            for (input, gw, e) in [(QINPUT_ROWS, &[][..], 0.0), (QINPUT_RMS_NORM, &g[..], eps)] {
                let run = |cols: usize, glu: u32| {
                    if m <= QMATVEC_ROWS {
                        qmatvec(&w, &x, (m, cols, k), kind, 128, (input, gw, e), glu)
                    } else {
                        qmatmul(&w, &x, (m, cols, k), kind, (input, gw, e), glu)
                    }
                };
                let stacked = run(2 * n, 0);
                let mut want = vec![f32::NAN; m * n];
                swiglu_rows(LaunchConfig::new(3, 64), &stacked, &mut want, m, n).unwrap();
                for (i, &h) in want.iter().enumerate() {
                    let (r, j) = (i / n, i % n);
                    let (gate, up) = (stacked[r * 2 * n + j], stacked[r * 2 * n + n + j]);
                    assert_eq!(h, silu(gate) * up, "swiglu_rows [{r}, {j}]");
                }
                let got = run(n, 1);
                assert_eq!(got, want, "type {kind}, input {input}, [{m}, {n}, {k}]");
            }
        }
    }
}

/// Every f16 bit pattern (the scales of every block) widens exactly: `dequantize_ggml` of an
/// F16 tensor (type 1) holding all 65536 patterns is `half`'s conversion, bit for bit (NaNs
/// as NaNs).
#[test]
fn every_f16_pattern_widens_exactly() {
    let words: Vec<i32> = (0..65536u32)
        .step_by(2)
        .map(|h| (h | ((h + 1) << 16)) as i32)
        .collect();
    let mut out = vec![0.0f32; 65536];
    dequantize_ggml(LaunchConfig::new(64, 256), &words, &mut out, 1, 1, 2, 65536).unwrap();
    for (h, got) in out.iter().enumerate() {
        let want = half::f16::from_bits(h as u16).to_f32();
        if want.is_nan() {
            assert!(got.is_nan(), "f16 {h:#06x}: {got} against NaN");
        } else {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "f16 {h:#06x}: {got} against {want}"
            );
        }
    }
}
