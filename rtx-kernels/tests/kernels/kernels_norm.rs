//! The native side of the warp-per-row norm kernels (`norm_warp_rows`,
//! `norm_backward_warp_rows`) against float64 references and, bit for bit, against the block
//! kernels run with blocks of 32 threads: rows shorter than a warp, rows held in registers,
//! rows longer than 32 values a lane (read in chunks), row counts that leave the last block
//! partly empty, with and without weight and bias, in f64, f32 and bf16. Also the weight and
//! bias gradient kernels' batched walks over rows and chunks, bit for bit against sums in
//! row (chunk) order.

// The checks walk one index over several buffers and references at once.
#![allow(clippy::needless_range_loop)]

use rtx_kernels::kernel::LaunchConfig;
use rtx_kernels::kernels::*;
use rtx_kernels::{Float, FloatMath, bf16};

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

/// `(rows, cols, warps a block)`: rows not a multiple of the warps of a block, rows shorter
/// than a warp, rows held in registers (512 as in the GPT profile, and exactly 32 values a
/// lane), and rows longer than that, read in chunks (the last one partly filled, some lanes
/// with nothing in it).
const CASES: [(usize, usize, u32); 9] = [
    (5, 1, 4),
    (7, 20, 4),
    (9, 33, 4),
    (6, 512, 4),
    (3, 1000, 2),
    (2, 1024, 1),
    (3, 1025, 2),
    (3, 2100, 2),
    (2, 3 * 1024 + 7, 4),
];

/// One row of the norm in f64: `y`, the mean (0 unless `centered`) and rstd.
fn norm_ref(
    x: &[f64],
    w: Option<&[f64]>,
    b: Option<&[f64]>,
    eps: f64,
    centered: bool,
) -> (Vec<f64>, f64, f64) {
    let d = x.len() as f64;
    let mu = if centered {
        x.iter().sum::<f64>() / d
    } else {
        0.0
    };
    let var = x.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d;
    let r = 1.0 / (var + eps).sqrt();
    let y = (0..x.len())
        .map(|i| (x[i] - mu) * r * w.map_or(1.0, |w| w[i]) + b.map_or(0.0, |b| b[i]))
        .collect();
    (y, mu, r)
}

/// The input gradient of `Σ y * dy` through one row of [`norm_ref`], in f64.
fn norm_backward_ref(
    x: &[f64],
    w: Option<&[f64]>,
    dy: &[f64],
    eps: f64,
    centered: bool,
) -> Vec<f64> {
    let d = x.len() as f64;
    let (_, mu, r) = norm_ref(x, None, None, eps, centered);
    let xhat: Vec<f64> = x.iter().map(|v| (v - mu) * r).collect();
    let g: Vec<f64> = (0..x.len())
        .map(|i| dy[i] * w.map_or(1.0, |w| w[i]))
        .collect();
    let mean_g = if centered {
        g.iter().sum::<f64>() / d
    } else {
        0.0
    };
    let mean_gx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / d;
    (0..x.len())
        .map(|i| r * (g[i] - mean_g - xhat[i] * mean_gx))
        .collect()
}

/// What one run of the forward and the input gradient gives: `y`, `mean`, `rstd`, `dx`.
type Run<T> = (
    Vec<T>,
    Vec<<T as Float>::Acc>,
    Vec<<T as Float>::Acc>,
    Vec<T>,
);

/// Runs the forward and then the input gradient (from the forward's statistics) over `rows`
/// rows of `cols` in `T`, by warps (`warps` a block) or, with `warps` 0, by the block kernels
/// with blocks of 32 threads. `w` and `b` empty: none (the kernels must not read them).
fn run<T: Float>(
    (x, w, b, dy): (&[T], &[T], &[T], &[T]),
    (rows, cols, warps): (usize, usize, u32),
    eps: f64,
    centered: bool,
) -> Run<T> {
    let acc = |n: usize| vec![<T::Acc as FloatMath>::c(0.0); n];
    let (mut y, mut mean, mut rstd) = (vec![T::ZERO; rows * cols], acc(rows), acc(rows));
    let mut dx = vec![T::ZERO; rows * cols];
    let (c, hw, hb) = (centered as u32, !w.is_empty() as u32, !b.is_empty() as u32);
    let eps = T::from_f64(eps);
    if warps == 0 {
        let launch = LaunchConfig::new(rows as u32, 32);
        let fwd = (&mut y, &mut mean, &mut rstd);
        norm_rows(launch, x, w, b, fwd.0, fwd.1, fwd.2, cols, eps, c, hw, hb).unwrap();
        norm_backward_rows(launch, dy, x, w, &mean, &rstd, &mut dx, cols, c, hw).unwrap();
    } else {
        let launch = LaunchConfig::new((rows as u32).div_ceil(warps), 32 * warps);
        let fwd = (&mut y, &mut mean, &mut rstd);
        norm_warp_rows(
            launch, x, w, b, fwd.0, fwd.1, fwd.2, cols, rows, eps, c, hw, hb,
        )
        .unwrap();
        norm_backward_warp_rows(launch, dy, x, w, &mean, &rstd, &mut dx, cols, rows, c, hw)
            .unwrap();
    }
    (y, mean, rstd, dx)
}

/// The inputs of a case: `x` (offset from 0, so that centering matters), weight, bias, `dy`.
fn inputs(rows: usize, cols: usize) -> [Vec<f64>; 4] {
    let seed = (rows * cols) as u64;
    [
        values(rows * cols, seed, 2.0, 4.0),
        values(cols, seed + 1, 0.5, 1.5),
        values(cols, seed + 2, -1.0, 1.0),
        values(rows * cols, seed + 3, -1.0, 1.0),
    ]
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * (1.0 + want.abs()),
        "{what}: {got} vs {want}"
    );
}

#[test]
fn warp_norms_match_the_f64_reference_with_and_without_weight_and_bias() {
    let eps = 1e-5;
    for (rows, cols, warps) in CASES {
        let [x, w, b, dy] = inputs(rows, cols);
        for centered in [true, false] {
            for (has_w, has_b) in [(true, true), (true, false), (false, false)] {
                let wk: &[f64] = if has_w { &w } else { &[] };
                let bk: &[f64] = if has_b { &b } else { &[] };
                let (y, mean, rstd, dx) =
                    run((&x, wk, bk, &dy), (rows, cols, warps), eps, centered);
                for r in 0..rows {
                    let what = format!(
                        "{rows}x{cols} by {warps} warps, centered {centered}, weight {has_w}, bias {has_b}, row {r}"
                    );
                    let (xr, dyr) = (&x[r * cols..][..cols], &dy[r * cols..][..cols]);
                    let wr = has_w.then_some(&w[..]);
                    let (want, mu, rs) = norm_ref(xr, wr, has_b.then_some(&b[..]), eps, centered);
                    close(mean[r], mu, 1e-14, &format!("mean {what}"));
                    close(rstd[r], rs, 1e-12, &format!("rstd {what}"));
                    let dx_want = norm_backward_ref(xr, wr, dyr, eps, centered);
                    for i in 0..cols {
                        close(
                            y[r * cols + i],
                            want[i],
                            1e-12,
                            &format!("y {what} col {i}"),
                        );
                        close(
                            dx[r * cols + i],
                            dx_want[i],
                            1e-11,
                            &format!("dx {what} col {i}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn warp_norms_equal_the_block_kernels_with_one_warp_a_block() {
    // A lane holds, reads and adds what a thread of a 32-thread block does: the same bits.
    for (rows, cols, warps) in CASES {
        let [x, w, b, dy] = inputs(rows, cols);
        let f = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
        let (x, w, b, dy) = (f(&x), f(&w), f(&b), f(&dy));
        for centered in [true, false] {
            let ins = (&x[..], &w[..], &b[..], &dy[..]);
            let by_warp = run(ins, (rows, cols, warps), 1e-5, centered);
            let by_block = run(ins, (rows, cols, 0), 1e-5, centered);
            assert!(
                by_warp == by_block,
                "{rows}x{cols} by {warps} warps, centered {centered}"
            );
        }
    }
}

#[test]
fn warp_norms_compute_bf16_in_f32_and_round_once() {
    let eps = 1e-5;
    for (rows, cols, warps) in [(7, 20, 4), (6, 512, 4), (3, 1000, 2), (3, 2100, 2)] {
        let to = |v: &[f64]| v.iter().map(|&a| bf16::from_f64(a)).collect::<Vec<bf16>>();
        let back = |v: &[bf16]| v.iter().map(|a| a.to_f64()).collect::<Vec<f64>>();
        let [x, w, b, dy] = inputs(rows, cols).map(|v| to(&v));
        for centered in [true, false] {
            let ins = (&x[..], &w[..], &b[..], &dy[..]);
            let got = run(ins, (rows, cols, warps), eps, centered);
            assert!(
                got == run(ins, (rows, cols, 0), eps, centered),
                "{rows}x{cols} bf16 against the block kernel, centered {centered}"
            );
            let (y, mean, rstd, dx) = got;
            // The reference from the same bf16 inputs in f64: within bf16's rounding of the
            // result (half an ulp: at most 2^-8 relative) plus the f32 computation's error.
            let (xf, wf, bf, dyf) = (back(&x), back(&w), back(&b), back(&dy));
            for r in 0..rows {
                let what = format!("{rows}x{cols} bf16 centered {centered} row {r}");
                let (xr, dyr) = (&xf[r * cols..][..cols], &dyf[r * cols..][..cols]);
                let (want, mu, rs) = norm_ref(xr, Some(&wf), Some(&bf), eps, centered);
                // The statistics stay f32: far closer than a bf16 rounding.
                close(mean[r] as f64, mu, 1e-6, &format!("mean {what}"));
                close(rstd[r] as f64, rs, 1e-5, &format!("rstd {what}"));
                let dx_want = norm_backward_ref(xr, Some(&wf), dyr, eps, centered);
                for i in 0..cols {
                    let (gy, gdx) = (y[r * cols + i].to_f64(), dx[r * cols + i].to_f64());
                    let ok = |g: f64, want: f64| (g - want).abs() <= 4e-3 * want.abs() + 1e-4;
                    assert!(ok(gy, want[i]), "y {what} col {i}: {gy} vs {}", want[i]);
                    assert!(
                        ok(gdx, dx_want[i]),
                        "dx {what} col {i}: {gdx} vs {}",
                        dx_want[i]
                    );
                }
            }
        }
    }
}

#[test]
fn param_gradients_sum_in_row_and_chunk_order_across_batches() {
    // 37 rows a chunk (two batches of 16 and a partial one; the last chunk 26 rows), and 70
    // chunks for the second step (two batches of 32 and a partial one): the batched loads
    // must leave the sums exactly those of a plain walk in order.
    let (rows, cols, per) = (100usize, 45usize, 37usize);
    let chunks = rows.div_ceil(per);
    let f = |v: Vec<f64>| v.into_iter().map(|a| a as f32).collect::<Vec<f32>>();
    let x = f(values(rows * cols, 1, 2.0, 4.0));
    let dy = f(values(rows * cols, 2, -1.0, 1.0));
    let mean = f(values(rows, 3, 2.5, 3.5));
    let rstd = f(values(rows, 4, 1.0, 2.0));
    for centered in [true, false] {
        let (mut dw, mut db) = (vec![0.0f32; chunks * cols], vec![0.0f32; chunks * cols]);
        let launch = LaunchConfig::new((cols.div_ceil(32) as u32, chunks as u32), 32);
        let c = centered as u32;
        norm_param_partials(
            launch, &dy, &x, &mean, &rstd, &mut dw, &mut db, rows, cols, per, c,
        )
        .unwrap();
        for k in 0..chunks {
            for col in 0..cols {
                let (mut sw, mut sb) = (0.0f32, 0.0f32);
                for r in k * per..((k + 1) * per).min(rows) {
                    let mu = if centered { mean[r] } else { 0.0 };
                    let g = dy[r * cols + col];
                    sw += g * ((x[r * cols + col] - mu) * rstd[r]);
                    sb += g;
                }
                let at = k * cols + col;
                assert_eq!((dw[at], db[at]), (sw, sb), "chunk {k} col {col} {centered}");
            }
        }
    }
    let chunks = 70;
    let pw = f(values(chunks * cols, 5, -1.0, 1.0));
    let pb = f(values(chunks * cols, 6, -1.0, 1.0));
    for has_bias in [true, false] {
        let (mut dw, mut db) = (vec![bf16::ZERO; cols], vec![bf16::ZERO; cols]);
        // Fewer threads than columns: the grid-stride loop takes the rest.
        let launch = LaunchConfig::new(1, 32);
        norm_param_finish(
            launch,
            &pw,
            &pb,
            &mut dw,
            &mut db,
            chunks,
            cols,
            has_bias as u32,
        )
        .unwrap();
        for col in 0..cols {
            let sw = (0..chunks).fold(0.0f32, |s, k| s + pw[k * cols + col]);
            let sb = (0..chunks).fold(0.0f32, |s, k| s + pb[k * cols + col]);
            let db_want = if has_bias {
                bf16::from_f32(sb)
            } else {
                bf16::ZERO
            };
            assert_eq!(
                (dw[col], db[col]),
                (bf16::from_f32(sw), db_want),
                "col {col}"
            );
        }
    }
}
