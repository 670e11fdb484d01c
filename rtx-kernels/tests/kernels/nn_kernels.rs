//! The native side of the network kernels (convolution data movement, pooling, layer and RMS
//! norm, optimizer updates) against independent float64 references: direct convolution
//! sums, pooling windows scanned in order, norms differentiated by finite differences, and
//! the optimizers' formulas written out.

// The checks walk one index over several buffers and references at once.
#![allow(clippy::needless_range_loop)]

use rtx_kernels::kernel::{LaunchConfig, ParamType, ScalarType, Variant};
use rtx_kernels::kernels::*;
use rtx_kernels::{DType, Float, f16};

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

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

/// A convolution's sizes: input `[n, c, h, w]`, weight `[o, c/g, kh, kw]`.
#[derive(Clone, Copy)]
struct Conv {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    g: usize,
    kh: usize,
    kw: usize,
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
}

impl Conv {
    fn out(&self) -> (usize, usize) {
        let f = |len: usize, k: usize, a: usize| {
            (len + 2 * self.pad[a] - self.dil[a] * (k - 1) - 1) / self.stride[a] + 1
        };
        (f(self.h, self.kh, 0), f(self.w, self.kw, 1))
    }

    /// The input position under tap `(i, j)` of output `(oy, ox)`, if inside.
    fn tap(&self, oy: usize, ox: usize, i: usize, j: usize) -> Option<(usize, usize)> {
        let y = (oy * self.stride[0] + i * self.dil[0]) as isize - self.pad[0] as isize;
        let x = (ox * self.stride[1] + j * self.dil[1]) as isize - self.pad[1] as isize;
        ((0..self.h as isize).contains(&y) && (0..self.w as isize).contains(&x))
            .then_some((y as usize, x as usize))
    }

    /// Direct convolution (`x` dense), the reference for im2col + GEMM.
    fn direct(&self, x: &[f64], wt: &[f64]) -> Vec<f64> {
        let (ho, wo) = self.out();
        let (cg, og) = (self.c / self.g, self.o / self.g);
        let mut out = vec![0.0; self.n * self.o * ho * wo];
        for n in 0..self.n {
            for o in 0..self.o {
                let gi = o / og;
                for oy in 0..ho {
                    for ox in 0..wo {
                        let mut s = 0.0;
                        for ci in 0..cg {
                            for i in 0..self.kh {
                                for j in 0..self.kw {
                                    if let Some((y, xx)) = self.tap(oy, ox, i, j) {
                                        let c = gi * cg + ci;
                                        s += x[((n * self.c + c) * self.h + y) * self.w + xx]
                                            * wt[((o * cg + ci) * self.kh + i) * self.kw + j];
                                    }
                                }
                            }
                        }
                        out[((n * self.o + o) * ho + oy) * wo + ox] = s;
                    }
                }
            }
        }
        out
    }
}

#[test]
fn im2col_times_the_weight_is_the_direct_convolution_and_col2im_its_transpose() {
    let p = Conv {
        n: 2,
        c: 4,
        h: 5,
        w: 6,
        o: 4,
        g: 2,
        kh: 3,
        kw: 2,
        stride: [2, 1],
        pad: [1, 1],
        dil: [1, 2],
    };
    let (ho, wo) = p.out();
    assert_eq!((ho, wo), (3, 6));
    let (cg, og, l) = (p.c / p.g, p.o / p.g, ho * wo);
    let ck = cg * p.kh * p.kw;
    let rows = p.c * p.kh * p.kw;
    let x = values(p.n * p.c * p.h * p.w, 1, -1.0, 1.0);
    let wt = values(p.o * ck, 2, -1.0, 1.0);
    // The input stored as [n, c, w, h] and read through swapped strides: im2col takes views.
    let mut xt = vec![0.0; x.len()];
    for nc in 0..p.n * p.c {
        for y in 0..p.h {
            for xx in 0..p.w {
                xt[(nc * p.w + xx) * p.h + y] = x[(nc * p.h + y) * p.w + xx];
            }
        }
    }
    let launch = LaunchConfig::new(3, 64);
    let im2col_with = |src: &[f64], s: [usize; 4], row_stride, img_stride| {
        let mut col = vec![f64::NAN; p.n * rows * l];
        im2col(
            launch,
            src,
            &mut col,
            p.n,
            p.c,
            p.h,
            p.w,
            p.kh,
            p.kw,
            ho,
            wo,
            p.stride[0],
            p.stride[1],
            p.pad[0],
            p.pad[1],
            p.dil[0],
            p.dil[1],
            s[0],
            s[1],
            s[2],
            s[3],
            row_stride,
            img_stride,
        )
        .unwrap();
        col
    };
    let dense = [p.c * p.h * p.w, p.h * p.w, p.w, 1];
    let col = im2col_with(&x, dense, l, rows * l);
    let swapped = [p.c * p.h * p.w, p.h * p.w, 1, p.h];
    assert_eq!(im2col_with(&xt, swapped, l, rows * l), col);
    // The other arrangement, [rows, n, l], holds the same entries.
    let col_t = im2col_with(&x, dense, p.n * l, l);
    for n in 0..p.n {
        for r in 0..rows {
            for q in 0..l {
                assert_eq!(col_t[(r * p.n + n) * l + q], col[(n * rows + r) * l + q]);
            }
        }
    }
    // Per (image, group): W_g [og, ck] x col [ck, l].
    let want = p.direct(&x, &wt);
    for n in 0..p.n {
        for gi in 0..p.g {
            for o in 0..og {
                for q in 0..l {
                    let s: f64 = (0..ck)
                        .map(|k| wt[(gi * og + o) * ck + k] * col[(n * rows + gi * ck + k) * l + q])
                        .sum();
                    let at = ((n * p.o + gi * og + o) * ho) * wo + q;
                    close(s, want[at], 1e-12, "conv");
                }
            }
        }
    }

    // col2im of dcol = W_gᵀ G against the scattered reference dx.
    let g = values(p.n * p.o * l, 3, -1.0, 1.0);
    let mut dcol = vec![0.0; p.n * rows * l];
    for n in 0..p.n {
        for gi in 0..p.g {
            for k in 0..ck {
                for q in 0..l {
                    dcol[(n * rows + gi * ck + k) * l + q] = (0..og)
                        .map(|o| wt[(gi * og + o) * ck + k] * g[(n * p.o + gi * og + o) * l + q])
                        .sum();
                }
            }
        }
    }
    let mut want_dx = vec![0.0; x.len()];
    for n in 0..p.n {
        for o in 0..p.o {
            let gi = o / og;
            for oy in 0..ho {
                for ox in 0..wo {
                    for ci in 0..cg {
                        for i in 0..p.kh {
                            for j in 0..p.kw {
                                if let Some((y, xx)) = p.tap(oy, ox, i, j) {
                                    let c = gi * cg + ci;
                                    want_dx[((n * p.c + c) * p.h + y) * p.w + xx] += g
                                        [((n * p.o + o) * ho + oy) * wo + ox]
                                        * wt[((o * cg + ci) * p.kh + i) * p.kw + j];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let mut dx = vec![f64::NAN; x.len()];
    col2im(
        launch,
        &dcol,
        &mut dx,
        p.n,
        p.c,
        p.h,
        p.w,
        p.kh,
        p.kw,
        ho,
        wo,
        p.stride[0],
        p.stride[1],
        p.pad[0],
        p.pad[1],
        p.dil[0],
        p.dil[1],
    )
    .unwrap();
    for (i, (&got, &want)) in dx.iter().zip(&want_dx).enumerate() {
        close(got, want, 1e-12, &format!("col2im element {i}"));
    }
}

/// Pooling sizes for the tests: `[n, c, h, w]`, window, stride, padding.
struct Pool {
    dims: [usize; 4],
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
}

impl Pool {
    fn out(&self) -> (usize, usize) {
        let f = |a: usize| (self.dims[2 + a] + 2 * self.p[a] - self.k[a]) / self.s[a] + 1;
        (f(0), f(1))
    }

    /// The input positions `y * w + x` of window `(oy, ox)`, in row-major order.
    fn window(&self, oy: usize, ox: usize) -> Vec<usize> {
        let [_, _, h, w] = self.dims;
        let mut at = Vec::new();
        for i in 0..self.k[0] {
            for j in 0..self.k[1] {
                let y = (oy * self.s[0] + i) as isize - self.p[0] as isize;
                let x = (ox * self.s[1] + j) as isize - self.p[1] as isize;
                if (0..h as isize).contains(&y) && (0..w as isize).contains(&x) {
                    at.push(y as usize * w + x as usize);
                }
            }
        }
        at
    }
}

#[test]
fn pooling_forward_and_backward_match_the_window_scan() {
    let p = Pool {
        dims: [2, 3, 5, 6],
        k: [3, 2],
        s: [2, 1],
        p: [1, 1],
    };
    let [n, c, h, w] = p.dims;
    let (ho, wo) = p.out();
    let planes = n * c;
    // Coarse values make ties; one NaN tests that it wins and takes the gradient.
    let mut x: Vec<f64> = values(planes * h * w, 4, -3.0, 3.0)
        .iter()
        .map(|v| v.round())
        .collect();
    x[7] = f64::NAN;
    let g = values(planes * ho * wo, 5, -1.0, 1.0);
    let launch = LaunchConfig::new(2, 64);
    let dense = [c * h * w, h * w, w, 1];
    let args = (n, c, h, w, ho, wo, p.k, p.s, p.p, dense);
    let forward = |avg: u32| {
        let (n, c, h, w, ho, wo, k, s, pd, st) = args;
        let mut out = vec![0.0; planes * ho * wo];
        pool2d_forward(
            launch,
            &x,
            &mut out,
            &mut [],
            n,
            c,
            h,
            w,
            ho,
            wo,
            k[0],
            k[1],
            s[0],
            s[1],
            pd[0],
            pd[1],
            st[0],
            st[1],
            st[2],
            st[3],
            avg,
        )
        .unwrap();
        out
    };
    let (max, avg) = (forward(0), forward(1));
    let mut idx = vec![0i64; planes * ho * wo];
    pool2d_forward(
        launch,
        &x,
        &mut [],
        &mut idx,
        n,
        c,
        h,
        w,
        ho,
        wo,
        p.k[0],
        p.k[1],
        p.s[0],
        p.s[1],
        p.p[0],
        p.p[1],
        dense[0],
        dense[1],
        dense[2],
        dense[3],
        2,
    )
    .unwrap();
    let mut want_max_dx = vec![0.0; x.len()];
    let mut want_avg_dx = vec![0.0; x.len()];
    let area = (p.k[0] * p.k[1]) as f64;
    for plane in 0..planes {
        let img = &x[plane * h * w..][..h * w];
        for oy in 0..ho {
            for ox in 0..wo {
                let o = (plane * ho + oy) * wo + ox;
                let win = p.window(oy, ox);
                let first_nan = win.iter().copied().find(|&a| img[a].is_nan());
                let first_max =
                    win.iter()
                        .copied()
                        .fold(None, |best: Option<usize>, a| match best {
                            Some(b) if img[a] <= img[b] => Some(b),
                            _ => Some(a),
                        });
                let arg = first_nan.or(first_max).unwrap();
                assert_eq!(idx[o], arg as i64, "argmax of window {o}");
                if first_nan.is_some() {
                    assert!(max[o].is_nan());
                } else {
                    assert_eq!(max[o], img[arg], "max of window {o}");
                }
                let sum: f64 = win.iter().map(|&a| img[a]).sum();
                if !sum.is_nan() {
                    close(avg[o], sum / area, 1e-14, "avg");
                }
                want_max_dx[plane * h * w + arg] += g[o];
                for &a in &win {
                    want_avg_dx[plane * h * w + a] += g[o] / area;
                }
            }
        }
    }
    for (avg_flag, want) in [(0, &want_max_dx), (1, &want_avg_dx)] {
        let mut dx = vec![f64::NAN; x.len()];
        pool2d_backward(
            launch, &g, &idx, &mut dx, n, c, h, w, ho, wo, p.k[0], p.k[1], p.s[0], p.s[1], p.p[0],
            p.p[1], avg_flag,
        )
        .unwrap();
        for (i, (&got, &want)) in dx.iter().zip(want).enumerate() {
            close(
                got,
                want,
                1e-14,
                &format!("pool backward {avg_flag} element {i}"),
            );
        }
    }
}

/// Layer norm (`centered`) or RMS norm of one row in f64.
fn norm_ref(x: &[f64], w: &[f64], b: &[f64], eps: f64, centered: bool) -> Vec<f64> {
    let d = x.len() as f64;
    let mu = if centered {
        x.iter().sum::<f64>() / d
    } else {
        0.0
    };
    let var = x.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d;
    let r = 1.0 / (var + eps).sqrt();
    (0..x.len())
        .map(|i| (x[i] - mu) * r * w[i] + if centered { b[i] } else { 0.0 })
        .collect()
}

/// Runs the forward, backward and parameter-gradient kernels on `rows x cols` in `T`.
#[allow(clippy::type_complexity)]
fn norm_kernels<T: Float>(
    x: &[f64],
    w: &[f64],
    b: &[f64],
    dy: &[f64],
    (rows, cols, block): (usize, usize, u32),
    eps: f64,
    centered: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let t = |v: &[f64]| v.iter().map(|&a| T::from_f64(a)).collect::<Vec<T>>();
    let (x, w, b, dy) = (t(x), t(w), t(b), t(dy));
    let acc = |n: usize| vec![<T::Acc as rtx_kernels::FloatMath>::c(0.0); n];
    let (mut y, mut mean, mut rstd) = (vec![T::ZERO; rows * cols], acc(rows), acc(rows));
    let c = centered as u32;
    let rows_launch = LaunchConfig::new(rows as u32, block);
    let eps_t = T::from_f64(eps);
    norm_rows(
        rows_launch,
        &x,
        &w,
        &b,
        &mut y,
        &mut mean,
        &mut rstd,
        cols,
        eps_t,
        c,
        1,
        c,
    )
    .unwrap();
    let mut dx = vec![T::ZERO; rows * cols];
    norm_backward_rows(rows_launch, &dy, &x, &w, &mean, &rstd, &mut dx, cols, c, 1).unwrap();
    // Two rows per chunk, so the chunked sum is exercised.
    let chunks = rows.div_ceil(2);
    let (mut dwp, mut dbp) = (acc(chunks * cols), acc(chunks * cols));
    let cols_launch = LaunchConfig::new((cols.div_ceil(32) as u32, chunks as u32), 32);
    norm_param_partials(
        cols_launch,
        &dy,
        &x,
        &mean,
        &rstd,
        &mut dwp,
        &mut dbp,
        rows,
        cols,
        2,
        c,
    )
    .unwrap();
    let (mut dw, mut db) = (vec![T::ZERO; cols], vec![T::ZERO; cols]);
    norm_param_finish(
        LaunchConfig::new(2, 32),
        &dwp,
        &dbp,
        &mut dw,
        &mut db,
        chunks,
        cols,
        c,
    )
    .unwrap();
    let f = |v: Vec<T>| v.into_iter().map(|a| a.to_f64()).collect::<Vec<f64>>();
    (f(y), f(dx), f(dw), f(db))
}

#[test]
fn norm_kernels_match_the_reference_and_its_finite_differences() {
    // Rows shorter than a block, and rows long enough for the four-loads-per-step loops.
    for (rows, cols) in [(5usize, 37usize), (3, 300)] {
        norm_case(rows, cols);
    }
}

fn norm_case(rows: usize, cols: usize) {
    let eps = 1e-5;
    // An offset mean: centering must not lose precision to it.
    let x = values(rows * cols, 6, 2.0, 4.0);
    let w = values(cols, 7, 0.5, 1.5);
    let b = values(cols, 8, -1.0, 1.0);
    let dy = values(rows * cols, 9, -1.0, 1.0);
    for centered in [true, false] {
        // Loss = Σ y * dy; its gradients by central differences in f64.
        let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
            (0..rows)
                .map(|r| {
                    let y = norm_ref(&x[r * cols..][..cols], w, b, eps, centered);
                    y.iter()
                        .zip(&dy[r * cols..])
                        .map(|(a, g)| a * g)
                        .sum::<f64>()
                })
                .sum()
        };
        let fd = |v: &[f64], at: usize, f: &dyn Fn(&[f64]) -> f64| {
            let h = 1e-6;
            let (mut up, mut down) = (v.to_vec(), v.to_vec());
            up[at] += h;
            down[at] -= h;
            (f(&up) - f(&down)) / (2.0 * h)
        };
        for block in [32, 64] {
            let (y, dx, dw, db) =
                norm_kernels::<f64>(&x, &w, &b, &dy, (rows, cols, block), eps, centered);
            for r in 0..rows {
                let want = norm_ref(&x[r * cols..][..cols], &w, &b, eps, centered);
                for i in 0..cols {
                    close(y[r * cols + i], want[i], 1e-13, "norm forward");
                }
            }
            for i in 0..rows * cols {
                let want = fd(&x, i, &|x| loss(x, &w, &b));
                close(dx[i], want, 1e-6, &format!("dx {i} centered {centered}"));
            }
            for i in 0..cols {
                close(dw[i], fd(&w, i, &|w| loss(&x, w, &b)), 1e-6, "dw");
                if centered {
                    close(db[i], fd(&b, i, &|b| loss(&x, &w, b)), 1e-6, "db");
                }
            }
        }
        // f32 and f16 compute in f32 with the statistics kept in f32: f16 is within one
        // rounding of the exact result, though the mean (about 3) dwarfs the spread.
        let (y64, dx64, dw64, _) =
            norm_kernels::<f64>(&x, &w, &b, &dy, (rows, cols, 32), eps, centered);
        let (y32, dx32, dw32, _) =
            norm_kernels::<f32>(&x, &w, &b, &dy, (rows, cols, 32), eps, centered);
        let round16 = |v: &[f64]| {
            v.iter()
                .map(|&a| f16::from_f64(a).to_f64())
                .collect::<Vec<_>>()
        };
        let (x16, w16, b16, dy16) = (round16(&x), round16(&w), round16(&b), round16(&dy));
        let (y16, dx16, _, _) =
            norm_kernels::<f16>(&x16, &w16, &b16, &dy16, (rows, cols, 64), eps, centered);
        let (y16r, dx16r, _, _) =
            norm_kernels::<f64>(&x16, &w16, &b16, &dy16, (rows, cols, 64), eps, centered);
        for i in 0..rows * cols {
            close(y32[i], y64[i], 1e-5, "f32 forward");
            close(dx32[i], dx64[i], 1e-4, "f32 dx");
            close(y16[i], y16r[i], 1e-3, "f16 forward");
            close(dx16[i], dx16r[i], 2e-3, "f16 dx");
        }
        for i in 0..cols {
            close(dw32[i], dw64[i], 1e-4, "f32 dw");
        }
    }
}

/// The input gradient of `Σ y * dy` through one row of [`norm_ref`], written out in f64.
fn norm_backward_ref(x: &[f64], w: &[f64], dy: &[f64], eps: f64, centered: bool) -> Vec<f64> {
    let d = x.len() as f64;
    let mu = if centered {
        x.iter().sum::<f64>() / d
    } else {
        0.0
    };
    let var = x.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d;
    let r = 1.0 / (var + eps).sqrt();
    let xhat: Vec<f64> = x.iter().map(|v| (v - mu) * r).collect();
    let g: Vec<f64> = dy.iter().zip(w).map(|(a, b)| a * b).collect();
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

#[test]
fn norm_rows_longer_than_a_block_holds_are_read_in_chunks() {
    // A block holds 32 values a thread; these odd rows take two chunks of 256 threads, and
    // four of 32 threads (the last one partly filled, some threads with nothing in it).
    for (cols, block) in [(256 * 32 + 37, 256u32), (3 * 32 * 32 + 45, 32)] {
        let rows = 2;
        let eps = 1e-5;
        let x = values(rows * cols, 16, 2.0, 4.0);
        let w = values(cols, 17, 0.5, 1.5);
        let b = values(cols, 18, -1.0, 1.0);
        let dy = values(rows * cols, 19, -1.0, 1.0);
        for centered in [true, false] {
            let shape = (rows, cols, block);
            let (y, dx, dw, _) = norm_kernels::<f64>(&x, &w, &b, &dy, shape, eps, centered);
            let (y32, dx32, _, _) = norm_kernels::<f32>(&x, &w, &b, &dy, shape, eps, centered);
            let mut dw_want = vec![0.0; cols];
            for r in 0..rows {
                let (xr, dyr) = (&x[r * cols..][..cols], &dy[r * cols..][..cols]);
                let want = norm_ref(xr, &w, &b, eps, centered);
                let dx_want = norm_backward_ref(xr, &w, dyr, eps, centered);
                let no_w = vec![1.0; cols];
                let xhat = norm_ref(xr, &no_w, &vec![0.0; cols], eps, centered);
                for i in 0..cols {
                    let at = format!("cols {cols} centered {centered} row {r} col {i}");
                    close(y[r * cols + i], want[i], 1e-12, &format!("y {at}"));
                    close(dx[r * cols + i], dx_want[i], 1e-12, &format!("dx {at}"));
                    close(y32[r * cols + i], want[i], 1e-5, &format!("f32 y {at}"));
                    close(
                        dx32[r * cols + i],
                        dx_want[i],
                        1e-4,
                        &format!("f32 dx {at}"),
                    );
                    dw_want[i] += dyr[i] * xhat[i];
                }
            }
            for i in 0..cols {
                close(dw[i], dw_want[i], 1e-12, &format!("dw cols {cols} col {i}"));
            }
        }
    }
}

#[test]
fn norm_statistics_are_compute_type_buffers() {
    let e = norm_rows::KERNEL.entry(DType::F16, Variant::Simt).unwrap();
    let mean = e.params.iter().find(|p| p.name == "mean").unwrap();
    assert_eq!(
        mean.ty,
        ParamType::Ptr {
            elem: ScalarType::Acc,
            mutable: true
        }
    );
    // The f16 entry takes `float*` statistics, the f64 entry `double*`.
    assert!(norm_rows::KERNEL.source.contains("rtx_f16* y, float* mean"));
    assert!(norm_rows::KERNEL.source.contains("double* y, double* mean"));
}

/// PyTorch's Adam for one element in f64 (`decoupled`: AdamW), as `rtx-backends` computes it.
#[allow(clippy::too_many_arguments)]
fn adam_ref(
    p: f64,
    g: f64,
    m: f64,
    v: f64,
    vmax: Option<f64>,
    (lr, b1, b2, eps, wd, step): (f64, f64, f64, f64, f64, f64),
    decoupled: bool,
) -> (f64, f64, f64, Option<f64>) {
    let mut p = p;
    let mut g = g;
    if decoupled {
        p *= 1.0 - lr * wd;
    } else {
        g += wd * p;
    }
    let w = 1.0 - b1;
    let m = if w.abs() < 0.5 {
        m + w * (g - m)
    } else {
        g - (g - m) * (1.0 - w)
    };
    let v = v * b2 + (1.0 - b2) * g * g;
    let vmax = vmax.map(|x| x.max(v));
    let second = vmax.unwrap_or(v);
    let denom = second.sqrt() / (1.0 - b2.powf(step)).sqrt() + eps;
    let p = p + -(lr / (1.0 - b1.powf(step))) * m / denom;
    (p, m, v, vmax)
}

#[test]
fn optimizer_steps_match_the_formulas() {
    let n = 300;
    let p = values(n, 10, -1.0, 1.0);
    let g = values(n, 11, -1.0, 1.0);
    let m = values(n, 12, -0.1, 0.1);
    let v = values(n, 13, 0.0, 0.01);
    let vmax = values(n, 14, 0.0, 0.01);
    let launch = LaunchConfig::new(2, 64);
    for (b1, decoupled, amsgrad) in [(0.9, false, false), (0.3, true, true), (0.9, true, false)] {
        let (lr, b2, eps, wd, step) = (1e-2, 0.999, 1e-8, 0.1, 3.0);
        let (mut po, mut mo, mut vo, mut xo) =
            (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        adam_step(
            launch,
            &p,
            &g,
            &m,
            &v,
            &vmax,
            &mut po,
            &mut mo,
            &mut vo,
            &mut xo,
            n,
            1.0 - lr * wd,
            wd,
            1.0 - b1,
            b2,
            1.0 - b2,
            (1.0 - b2.powf(step)).sqrt(),
            -(lr / (1.0 - b1.powf(step))),
            eps,
            decoupled as u32,
            !decoupled as u32,
            ((1.0f64 - b1).abs() < 0.5) as u32,
            amsgrad as u32,
        )
        .unwrap();
        for i in 0..n {
            let (wp, wm, wv, wx) = adam_ref(
                p[i],
                g[i],
                m[i],
                v[i],
                amsgrad.then_some(vmax[i]),
                (lr, b1, b2, eps, wd, step),
                decoupled,
            );
            close(po[i], wp, 1e-14, "adam p");
            close(mo[i], wm, 1e-14, "adam m");
            close(vo[i], wv, 1e-14, "adam v");
            if let Some(wx) = wx {
                assert_eq!(xo[i], wx, "amsgrad max");
            }
        }
    }
    // SGD: momentum with dampening, then Nesterov, each after a first step that takes the
    // gradient as the buffer.
    let buf = values(n, 15, -0.5, 0.5);
    let (lr, mom, wd) = (0.05, 0.9, 0.01);
    for (nesterov, damp, first) in [(false, 0.1, false), (true, 0.0, false), (false, 0.0, true)] {
        let (mut po, mut bo) = (vec![0.0; n], vec![0.0; n]);
        sgd_step(
            launch,
            &p,
            &g,
            &buf,
            &mut po,
            &mut bo,
            n,
            -lr,
            mom,
            1.0 - damp,
            wd,
            1,
            1,
            first as u32,
            nesterov as u32,
        )
        .unwrap();
        for i in 0..n {
            let gd = g[i] + wd * p[i];
            let b = if first {
                gd
            } else {
                buf[i] * mom + (1.0 - damp) * gd
            };
            let step = if nesterov { gd + mom * b } else { b };
            close(bo[i], b, 1e-15, "sgd buffer");
            close(po[i], p[i] + -lr * step, 1e-15, "sgd p");
        }
    }
}
