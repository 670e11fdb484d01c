//! The native side of the short-row softmax kernels and the fused softmax gradient against
//! float64 references: `softmax_warp_rows` in its three modes (and bit for bit against the
//! block kernels run with one warp a block), `softmax_backward_rows` by warps and by blocks,
//! rows held in registers and rows read in chunks, and the column-reduction combine stage's
//! generated C++ run on the host.

// The checks walk one index over several buffers and references at once.
#![allow(clippy::needless_range_loop)]

// Only buffers and integers are passed here; the harness's other argument kinds go unused.

use crate::host_run::{HostArg, bytes, from_bytes, run};
use rtx_kernels::kernel::{LaunchConfig, Variant};
use rtx_kernels::kernels::*;
use rtx_kernels::{DType, Float, bf16, f16};

/// Deterministic test values in [lo, hi).
fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// The maximum and `Σ exp(x - max)` of a row.
fn row_stats(row: &[f64]) -> (f64, f64) {
    let m = row.iter().cloned().fold(f64::MIN, f64::max);
    (m, row.iter().map(|v| (v - m).exp()).sum())
}

/// `(rows, cols, warps a block)`: rows not a multiple of the warps of a block, rows shorter
/// than a warp, rows of exactly 32 values a lane, and rows longer than that (read in chunks).
const WARP_CASES: [(usize, usize, u32); 8] = [
    (5, 1, 4),
    (7, 20, 4),
    (3, 32, 2),
    (9, 33, 4),
    (6, 256, 4),
    (3, 1000, 2),
    (2, 1024, 1),
    (3, 2100, 2),
];

#[test]
fn warp_rows_match_the_reference_in_every_mode() {
    for (rows, cols, warps) in WARP_CASES {
        let x = values(rows * cols, (rows * cols) as u64, -6.0, 6.0);
        let launch = LaunchConfig::new((rows as u32).div_ceil(warps), 32 * warps);
        let mut soft = vec![0.0; rows * cols];
        let mut logs = vec![0.0; rows * cols];
        let mut lse = vec![0.0; rows];
        softmax_warp_rows(launch, &x, &mut soft, cols, rows, 0).unwrap();
        softmax_warp_rows(launch, &x, &mut logs, cols, rows, 1).unwrap();
        softmax_warp_rows(launch, &x, &mut lse, cols, rows, 2).unwrap();
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let (m, z) = row_stats(row);
            for c in 0..cols {
                let i = r * cols + c;
                let what = format!("{rows}x{cols}, {warps} warps, element {i}");
                assert!((soft[i] - (row[c] - m).exp() / z).abs() < 1e-14, "{what}");
                assert!((logs[i] - ((row[c] - m) - z.ln())).abs() < 1e-12, "{what}");
            }
            assert!(
                (lse[r] - (m + z.ln())).abs() < 1e-12,
                "{rows}x{cols} row {r}"
            );
        }
        // A block of 32 threads of the block kernels holds the same elements and combines
        // them in the same order as a warp here: the same bits.
        let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let one = LaunchConfig::new(rows as u32, 32);
        let mut by_warp = vec![0.0f32; rows * cols];
        let mut by_block = vec![0.0f32; rows * cols];
        softmax_warp_rows(launch, &xf, &mut by_warp, cols, rows, 0).unwrap();
        softmax_rows(one, &xf, &mut by_block, cols).unwrap();
        assert_eq!(by_warp, by_block, "softmax {rows}x{cols}");
        softmax_warp_rows(launch, &xf, &mut by_warp, cols, rows, 1).unwrap();
        log_softmax_rows(one, &xf, &mut by_block, cols).unwrap();
        assert_eq!(by_warp, by_block, "log_softmax {rows}x{cols}");
        let (mut a, mut b) = (vec![0.0f32; rows], vec![0.0f32; rows]);
        softmax_warp_rows(launch, &xf, &mut a, cols, rows, 2).unwrap();
        logsumexp_rows(one, &xf, &mut b, cols).unwrap();
        assert_eq!(a, b, "logsumexp {rows}x{cols}");
    }
}

#[test]
fn warp_rows_keep_infinities_and_round_sixteen_bit_floats_once() {
    // A row of negative infinities has logsumexp -inf; a row with +inf has +inf.
    let x = [f64::NEG_INFINITY, f64::NEG_INFINITY, 1.0, f64::INFINITY];
    let mut lse = [0.0; 2];
    softmax_warp_rows(LaunchConfig::new(1, 64), &x, &mut lse, 2, 2, 2).unwrap();
    assert_eq!(lse, [f64::NEG_INFINITY, f64::INFINITY]);
    // bf16 computes in f32 and rounds each output once.
    let (rows, cols) = (5, 300);
    let x: Vec<bf16> = values(rows * cols, 3, -8.0, 8.0)
        .into_iter()
        .map(bf16::from_f64)
        .collect();
    let mut out = vec![bf16::ZERO; rows * cols];
    softmax_warp_rows(LaunchConfig::new(2, 128), &x, &mut out, cols, rows, 0).unwrap();
    for r in 0..rows {
        let row: Vec<f64> = x[r * cols..(r + 1) * cols]
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let (m, z) = row_stats(&row);
        for c in 0..cols {
            let want = (row[c] - m).exp() / z;
            let got = out[r * cols + c].to_f64();
            assert!(
                (got - want).abs() <= 4e-3 * want,
                "row {r} col {c}: {got} vs {want}"
            );
        }
    }
}

/// The softmax (or log-softmax) gradient of each row, in f64.
fn backward_ref(y: &[f64], g: &[f64], cols: usize, log: bool) -> Vec<f64> {
    let mut dx = vec![0.0; y.len()];
    for r in 0..y.len() / cols {
        let (y, g) = (&y[r * cols..(r + 1) * cols], &g[r * cols..(r + 1) * cols]);
        let s: f64 = if log {
            g.iter().sum()
        } else {
            g.iter().zip(y).map(|(g, y)| g * y).sum()
        };
        for c in 0..cols {
            dx[r * cols + c] = if log {
                g[c] - y[c].exp() * s
            } else {
                y[c] * (g[c] - s)
            };
        }
    }
    dx
}

/// Softmax (or log-softmax) outputs of random rows, and random output gradients, in f64.
fn backward_inputs(rows: usize, cols: usize, seed: u64, log: bool) -> (Vec<f64>, Vec<f64>) {
    let x = values(rows * cols, seed, -4.0, 4.0);
    let mut y = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let (m, z) = row_stats(row);
        for c in 0..cols {
            y[r * cols + c] = if log {
                (row[c] - m) - z.ln()
            } else {
                (row[c] - m).exp() / z
            };
        }
    }
    (y, values(rows * cols, seed + 1, -1.0, 1.0))
}

/// Runs `softmax_backward_rows` for `T` over the f64 inputs rounded to `T`; returns the
/// result and the reference computed from the rounded inputs.
fn run_backward<T: Float>(
    (y, g): (&[f64], &[f64]),
    (rows, cols): (usize, usize),
    (warp_rows, block): (bool, u32),
    log: bool,
) -> (Vec<f64>, Vec<f64>) {
    let yt: Vec<T> = y.iter().map(|&v| T::from_f64(v)).collect();
    let gt: Vec<T> = g.iter().map(|&v| T::from_f64(v)).collect();
    let launch = if warp_rows {
        LaunchConfig::new((rows as u32).div_ceil(block / 32), block)
    } else {
        LaunchConfig::new(rows as u32, block)
    };
    let mut dx = vec![T::ZERO; y.len()];
    softmax_backward_rows(
        launch,
        &yt,
        &gt,
        &mut dx,
        cols,
        rows,
        warp_rows as u32,
        log as u32,
    )
    .unwrap();
    let back = |v: &[T]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let want = backward_ref(&back(&yt), &back(&gt), cols, log);
    (back(&dx), want)
}

#[test]
fn softmax_backward_rows_match_the_reference_by_warps_and_by_blocks() {
    // (rows, cols, by warps, block): warp rows held (at most 16 a lane) and read in chunks
    // (600 > 32 * 16), a partial last block of warps, block rows held and read in chunks.
    let cases: [(usize, usize, bool, u32); 8] = [
        (5, 1, true, 128),
        (7, 20, true, 128),
        (9, 256, true, 128),
        (3, 512, true, 64),
        (3, 600, true, 32),
        (4, 700, false, 64),
        (2, 1500, false, 32),
        (1, 5000, false, 96),
    ];
    for (rows, cols, warps, block) in cases {
        for log in [false, true] {
            let (y, g) = backward_inputs(rows, cols, (rows * cols) as u64, log);
            let what = format!("{rows}x{cols} warps {warps} block {block} log {log}");
            let (got, want) = run_backward::<f64>((&y, &g), (rows, cols), (warps, block), log);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                    "{what} f64 {i}: {a} vs {b}"
                );
            }
            let (got, want) = run_backward::<f32>((&y, &g), (rows, cols), (warps, block), log);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 2e-5 * (1.0 + b.abs()),
                    "{what} f32 {i}: {a} vs {b}"
                );
            }
            // 16-bit floats are computed in f32 and rounded once: within half an ulp of the
            // reference from the same rounded inputs, plus the f32 sum's error.
            let (got, want) = run_backward::<f16>((&y, &g), (rows, cols), (warps, block), log);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-3 * b.abs() + 1e-6,
                    "{what} f16 {i}: {a} vs {b}"
                );
            }
            let (got, want) = run_backward::<bf16>((&y, &g), (rows, cols), (warps, block), log);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 5e-3 * b.abs() + 1e-6,
                    "{what} bf16 {i}: {a} vs {b}"
                );
            }
        }
    }
}

/// The second stage of a split column reduction, as generated C++ run on the host: each
/// output combines its chunks' partial results in order and applies `finish`.
#[test]
fn split_column_reductions_combine_their_chunks_in_order() {
    let (outer, parts, inner, n) = (3usize, 5usize, 70usize, 1234usize);
    let partial: Vec<f32> = values(outer * parts * inner, 9, -2.0, 2.0)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let at = |o: usize, c: usize, i: usize| partial[(o * parts + c) * inner + i];
    // Fewer threads than outputs: the grid-stride loop covers the rest.
    let launch = LaunchConfig::new(2, 64);
    let args = |out: Vec<u8>| {
        [
            HostArg::Buf(bytes(&partial)),
            HostArg::Buf(out),
            HostArg::I(outer as u64),
            HostArg::I(parts as u64),
            HostArg::I(inner as u64),
            HostArg::I(n as u64),
        ]
    };
    let cases: [(&'static rtx_kernels::kernel::KernelSource, &str); 3] = [
        (&sum::KERNEL, "sum"),
        (&mean::KERNEL, "mean"),
        (&amax::KERNEL, "amax"),
    ];
    for (k, name) in cases {
        let entry = k.entry(DType::F32, Variant::ReduceColumnsFinal).unwrap();
        let Some(got) = run(k, entry, launch, &args(bytes(&vec![0.0f32; outer * inner]))) else {
            return;
        };
        let got: Vec<f32> = from_bytes(&got[1]);
        for o in 0..outer {
            for i in 0..inner {
                let want = match name {
                    "amax" => (0..parts).fold(f32::MIN, |a, c| a.max(at(o, c, i))),
                    _ => {
                        let s = (0..parts).fold(0.0f32, |a, c| a + at(o, c, i));
                        if name == "mean" { s / n as f32 } else { s }
                    }
                };
                assert_eq!(got[o * inner + i], want, "{name} ({o}, {i})");
            }
        }
    }
    // bf16 outputs are narrowed from the f32 combination once.
    let entry = sum::KERNEL
        .entry(DType::BF16, Variant::ReduceColumnsFinal)
        .unwrap();
    let Some(got) = run(
        &sum::KERNEL,
        entry,
        launch,
        &args(bytes(&vec![bf16::ZERO; outer * inner])),
    ) else {
        return;
    };
    let got: Vec<bf16> = from_bytes(&got[1]);
    for o in 0..outer {
        for i in 0..inner {
            let s = (0..parts).fold(0.0f32, |a, c| a + at(o, c, i));
            assert_eq!(got[o * inner + i], bf16::from_f32(s), "bf16 ({o}, {i})");
        }
    }
}
