//! 2-d max and average pooling on the CPU, forward and backward.
//!
//! Windows that tile the input without overlap or padding (kernel equal to stride, as in every
//! `MaxPool2d<K, K>`) take a direct path: each output row reads its `K` input rows once, and
//! the backward pass writes every input element exactly once (the gradient at a window's
//! maximum, zero elsewhere) instead of zero-filling and scattering. Other windows go through
//! the general loops. Both give bitwise the same results.
//!
//! Determinism: each output element (forward) and each input plane (backward) is written by one
//! task in a fixed order, so results do not depend on the thread count.

use super::CHUNK;
use super::conv::dense;
use super::matmul::{same_type, same_type_mut};
use super::pool_simd;
use crate::Layout;
use crate::Pool2dParams;
use rtx_kernels::op::PoolOp;
use rtx_kernels::{Float, FloatMath, Num};
use std::mem::MaybeUninit;

/// `v` replaces the running maximum `m` when larger or NaN: NaN wins, like `max_of`, but as one
/// compare-and-select the compiler keeps branch-free.
#[inline(always)]
fn max_step<E: Float>(m: E, v: E) -> E {
    #[allow(clippy::eq_op)]
    let take = v > m || v != v;
    if take { v } else { m }
}

/// Max or average pooling of `x` (`[N, C, H, W]`) as dense `[N, C, HO, WO]`. Max pooling
/// skips the padding (as -inf would) and propagates NaN; average pooling divides by the full
/// window, padding included (PyTorch's `count_include_pad=True`). The caller has checked that
/// the window fits the padded input.
pub fn pool2d<E: Float>(x: &[E], xl: &Layout, op: PoolOp, p: &Pool2dParams) -> Vec<E> {
    let &[n, c, h, w] = xl.dims() else {
        panic!("pool2d: input must be rank 4")
    };
    let (Some(ho), Some(wo)) = (p.output_size(0, h), p.output_size(1, w)) else {
        panic!("pool2d: the window does not fit the padded input")
    };
    let x = dense(x, xl);
    let [kh, kw] = p.kernel;
    let [sh, sw] = p.stride;
    let [ph, pw] = p.padding;
    // The compute type is not `Sync`, so the divisor crosses threads as an f64.
    let area = (kh * kw) as f64;
    // Each output row and column reads the same input rows and columns: find them once.
    let ys: Vec<_> = (0..ho).map(|oy| window(oy * sh, kh, ph, h)).collect();
    let xs: Vec<_> = (0..wo).map(|ox| window(ox * sw, kw, pw, w)).collect();
    let mut out = vec![E::ZERO; n * c * ho * wo];
    if out.is_empty() {
        return out;
    }
    let tiled = op == PoolOp::Max && p.disjoint();
    let simd = pool_simd::available();
    // Whole output rows per task, so the window of a row is looked up once; each output is
    // written by one task, so the split cannot change results.
    let rows = (CHUNK / wo).max(1);
    super::for_chunks_mut(&mut out, rows * wo, &|task, block| {
        for (i, dst) in block.chunks_mut(wo).enumerate() {
            let r = task * rows + i;
            let (image, oy) = (&x[r / ho * h * w..][..h * w], r % ho);
            if tiled && (kh, kw) == (2, 2) {
                // Every `MaxPool2d<2, 2>`: the window's four values in the general loop's
                // order (rows, then columns), so even NaN payloads agree.
                let (top, bottom) = (2 * oy * w, (2 * oy + 1) * w);
                if let (true, Some(img), Some(out)) = (
                    simd,
                    same_type::<E, f32>(image),
                    same_type_mut::<E, f32>(dst),
                ) {
                    pool_simd::forward_row(&img[top..][..2 * wo], &img[bottom..][..2 * wo], out);
                    continue;
                }
                let (top, _) = image[2 * oy * w..][..2 * wo].as_chunks::<2>();
                let (bottom, _) = image[(2 * oy + 1) * w..][..2 * wo].as_chunks::<2>();
                for ((m, t), b) in dst.iter_mut().zip(top).zip(bottom) {
                    let v = max_step(max_step(E::LOWEST, t[0]), t[1]);
                    *m = max_step(max_step(v, b[0]), b[1]);
                }
                continue;
            }
            if tiled {
                // Rows first, then the columns of each window, as above.
                dst.fill(E::LOWEST);
                for y in oy * kh..oy * kh + kh {
                    let src = &image[y * w..][..wo * kw];
                    for (m, win) in dst.iter_mut().zip(src.chunks_exact(kw)) {
                        for &v in win {
                            *m = max_step(*m, v);
                        }
                    }
                }
                continue;
            }
            let ys = ys[oy].clone();
            for (o, xs) in dst.iter_mut().zip(&xs) {
                *o = match op {
                    PoolOp::Max => {
                        let mut m = E::LOWEST;
                        for y in ys.clone() {
                            for &v in &image[y * w + xs.start..y * w + xs.end] {
                                m = max_step(m, v);
                            }
                        }
                        m
                    }
                    PoolOp::Avg => {
                        let mut s = E::Acc::c(0.0);
                        for y in ys.clone() {
                            for &v in &image[y * w + xs.start..y * w + xs.end] {
                                s = s + v.to_acc();
                            }
                        }
                        E::from_acc(s / E::Acc::c(area))
                    }
                };
            }
        }
    });
    out
}

/// The input positions under a window that starts at `start` in padded coordinates.
fn window(start: usize, kernel: usize, padding: usize, len: usize) -> std::ops::Range<usize> {
    let (lo, hi) = (start.max(padding), (start + kernel).min(len + padding));
    if lo < hi {
        lo - padding..hi - padding
    } else {
        0..0
    }
}

/// The gradient of [`pool2d`] with respect to its input, as dense `[N, C, H, W]`, from the
/// output gradient `g` (`[N, C, HO, WO]`). Max pooling sends each window's gradient to its
/// first maximum (the first NaN, if any), as PyTorch does; average pooling spreads it over the
/// window's input positions divided by the full window area (padding counted). Planes run in
/// parallel, each in a fixed order.
pub fn pool2d_backward<E: Float>(
    (g, gl): (&[E], &Layout),
    (x, xl): (&[E], &Layout),
    op: PoolOp,
    p: &Pool2dParams,
) -> Vec<E> {
    let &[n, c, h, w] = xl.dims() else {
        panic!("pool2d backward: input must be rank 4")
    };
    let (Some(ho), Some(wo)) = (p.output_size(0, h), p.output_size(1, w)) else {
        panic!("pool2d backward: the window does not fit the padded input")
    };
    let (g, x) = (dense(g, gl), dense(x, xl));
    if op == PoolOp::Max && p.disjoint() {
        return max_backward_tiled(&g, &x, [n * c, h, w], [ho, wo], p.kernel);
    }
    let [kh, kw] = p.kernel;
    let [sh, sw] = p.stride;
    let [ph, pw] = p.padding;
    let area = (kh * kw) as f64;
    let mut dx = vec![E::ZERO; n * c * h * w];
    if dx.is_empty() {
        return dx;
    }
    let yw: Vec<_> = (0..ho).map(|oy| window(oy * sh, kh, ph, h)).collect();
    let xw: Vec<_> = (0..wo).map(|ox| window(ox * sw, kw, pw, w)).collect();
    super::for_chunks_mut(&mut dx, h * w, &|plane, dst| {
        let image = &x[plane * h * w..][..h * w];
        let grad = &g[plane * ho * wo..][..ho * wo];
        for oy in 0..ho {
            for ox in 0..wo {
                let gv = grad[oy * wo + ox];
                let (ys, xs) = (yw[oy].clone(), xw[ox].clone());
                match op {
                    PoolOp::Max => {
                        let mut best: Option<(usize, E)> = None;
                        'scan: for y in ys {
                            for xi in xs.clone() {
                                let v = image[y * w + xi];
                                #[allow(clippy::eq_op)]
                                let nan = v != v;
                                if best.is_none_or(|(_, m)| v > m) || nan {
                                    best = Some((y * w + xi, v));
                                }
                                if nan {
                                    break 'scan;
                                }
                            }
                        }
                        if let Some((at, _)) = best {
                            dst[at] = dst[at].add(gv);
                        }
                    }
                    PoolOp::Avg => {
                        let share = gv.to_acc() / E::Acc::c(area);
                        for y in ys {
                            for d in &mut dst[y * w..][xs.clone()] {
                                *d = E::from_acc(d.to_acc() + share);
                            }
                        }
                    }
                }
            }
        }
    });
    dx
}

/// The max-pooling gradient for windows that tile the input (`kernel` = stride, no padding):
/// every input element is written once, with the window's gradient at its first maximum
/// (first NaN) and zero elsewhere, including the rows and columns no window covers.
fn max_backward_tiled<E: Float>(
    g: &[E],
    x: &[E],
    [planes, h, w]: [usize; 3],
    [ho, wo]: [usize; 2],
    [kh, kw]: [usize; 2],
) -> Vec<E> {
    let mut dx: Vec<E> = Vec::with_capacity(planes * h * w);
    if planes * h * w == 0 {
        return dx;
    }
    let spare = &mut dx.spare_capacity_mut()[..planes * h * w];
    super::for_chunks_mut(spare, h * w, &|plane, dst| {
        let image = &x[plane * h * w..][..h * w];
        let grad = &g[plane * ho * wo..][..ho * wo];
        if let (true, Some(image), Some(grad), Some(dst)) = (
            (kh, kw) == (2, 2) && pool_simd::available(),
            same_type::<E, f32>(image),
            same_type::<E, f32>(grad),
            f32_slots(dst),
        ) {
            for oy in 0..ho {
                let (top, bottom) = (&image[2 * oy * w..], &image[(2 * oy + 1) * w..]);
                let (out_top, out_bottom) = dst[2 * oy * w..][..2 * w].split_at_mut(w);
                let g = &grad[oy * wo..][..wo];
                pool_simd::backward_row(top, bottom, g, out_top, out_bottom);
                zero_slots(&mut out_top[2 * wo..]);
                zero_slots(&mut out_bottom[2 * wo..]);
            }
            zero_slots(&mut dst[2 * ho * w..]);
        } else if (kh, kw) == (2, 2) {
            tiled_plane_2x2(dst, image, grad, w, [ho, wo]);
        } else {
            tiled_plane(dst, image, grad, w, [ho, wo], [kh, kw]);
        }
    });
    // SAFETY: each plane's task wrote every one of its `h * w` elements (see `tiled_plane`).
    unsafe { dx.set_len(planes * h * w) };
    dx
}

/// Writes zero into every slot of `d`.
fn zero_slots<E: Num>(d: &mut [MaybeUninit<E>]) {
    for v in d {
        v.write(E::ZERO);
    }
}

/// `s` as `f32` slots when `E` is `f32`.
fn f32_slots<E: 'static>(s: &mut [MaybeUninit<E>]) -> Option<&mut [MaybeUninit<f32>]> {
    (std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>()).then(|| {
        // SAFETY: the type ids are equal, so `E` is `f32`.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) }
    })
}

/// The running pick of a window's first maximum: `(position, value, a NaN was seen)`. A value
/// replaces the pick when it is larger or NaN, until the first NaN; written with selects, not
/// branches, since which value wins is data (and mispredicted branches cost more than the
/// whole window).
#[inline(always)]
fn pick<E: Float>((at, m, done): (usize, E, bool), i: usize, v: E) -> (usize, E, bool) {
    #[allow(clippy::eq_op)]
    let nan = v != v;
    let take = !done & (nan | (v > m));
    (
        if take { i } else { at },
        if take { v } else { m },
        done | nan,
    )
}

/// [`tiled_plane`] for 2x2 windows (every `MaxPool2d<2, 2>`), unrolled: each window's four
/// values are picked from two rows read side by side.
fn tiled_plane_2x2<E: Float>(
    dst: &mut [MaybeUninit<E>],
    image: &[E],
    grad: &[E],
    w: usize,
    [ho, wo]: [usize; 2],
) {
    for oy in 0..ho {
        let (top, _) = image[2 * oy * w..][..2 * wo].as_chunks::<2>();
        let (bottom, _) = image[(2 * oy + 1) * w..][..2 * wo].as_chunks::<2>();
        let (out_top, rest) = dst[2 * oy * w..][..2 * w].split_at_mut(w);
        let (ot, _) = out_top[..2 * wo].as_chunks_mut::<2>();
        let (ob, _) = rest[..2 * wo].as_chunks_mut::<2>();
        let rows = top.iter().zip(bottom).zip(ot.iter_mut().zip(ob));
        for (((t, b), (ot, ob)), &gv) in rows.zip(&grad[oy * wo..][..wo]) {
            #[allow(clippy::eq_op)]
            let first = (0, t[0], t[0] != t[0]);
            let (at, _, _) = pick(pick(pick(first, 1, t[1]), 2, b[0]), 3, b[1]);
            let gv = E::ZERO.add(gv);
            let put = |i: usize| if at == i { gv } else { E::ZERO };
            ot[0].write(put(0));
            ot[1].write(put(1));
            ob[0].write(put(2));
            ob[1].write(put(3));
        }
        for v in &mut out_top[2 * wo..] {
            v.write(E::ZERO);
        }
        for v in &mut rest[2 * wo..] {
            v.write(E::ZERO);
        }
    }
    for v in &mut dst[2 * ho * w..] {
        v.write(E::ZERO);
    }
}

/// One plane of [`max_backward_tiled`]: writes every element of `dst` (`h * w`).
#[inline(always)]
fn tiled_plane<E: Float>(
    dst: &mut [MaybeUninit<E>],
    image: &[E],
    grad: &[E],
    w: usize,
    [ho, wo]: [usize; 2],
    [kh, kw]: [usize; 2],
) {
    let zero = |d: &mut [MaybeUninit<E>]| {
        for v in d {
            v.write(E::ZERO);
        }
    };
    for oy in 0..ho {
        let rows = &image[oy * kh * w..][..kh * w];
        let out = &mut dst[oy * kh * w..][..kh * w];
        for (ox, &gv) in grad[oy * wo..][..wo].iter().enumerate() {
            // Scanned as the general loop scans: rows, then columns.
            let first = ox * kw;
            let v0 = rows[first];
            #[allow(clippy::eq_op)]
            let mut best = (0, v0, v0 != v0);
            for dy in 0..kh {
                for dx in 0..kw {
                    if dy + dx > 0 {
                        best = pick(best, dy * kw + dx, rows[dy * w + first + dx]);
                    }
                }
            }
            // 0 + g, as the general loop's accumulation into zeros gives it (so a
            // gradient of -0 lands as +0 in both).
            let gv = E::ZERO.add(gv);
            for dy in 0..kh {
                for dx in 0..kw {
                    let v = if best.0 == dy * kw + dx { gv } else { E::ZERO };
                    out[dy * w + first + dx].write(v);
                }
            }
        }
        for dy in 0..kh {
            zero(&mut out[dy * w + wo * kw..(dy + 1) * w]);
        }
    }
    zero(&mut dst[ho * kh * w..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_pool_skips_padding_and_avg_pool_counts_it() {
        let x = [1.0f32, -2.0, -3.0, -4.0];
        let l = Layout::contiguous(&[1, 1, 2, 2]);
        let p = Pool2dParams {
            kernel: [2, 2],
            stride: [2, 2],
            padding: [1, 1],
        };
        assert_eq!(pool2d(&x, &l, PoolOp::Max, &p), vec![1.0, -2.0, -3.0, -4.0]);
        assert_eq!(
            pool2d(&x, &l, PoolOp::Avg, &p),
            vec![0.25, -0.5, -0.75, -1.0]
        );
    }

    /// The tiled paths (AVX-512 for f32 where the CPU has it, the portable loops for f64)
    /// against the definitions, on inputs whose size the windows do not divide, with rows of
    /// more than 16 windows, ties, NaNs and negative zeros in the gradient.
    #[test]
    fn tiled_max_pool_matches_the_definition() {
        check_tiled::<f32>();
        check_tiled::<f64>();
    }

    fn check_tiled<E: Float>() {
        let (n, c, h, w) = (2, 3, 7, 41);
        let x: Vec<f64> = (0..n * c * h * w)
            .map(|i| match i % 23 {
                5 => f64::NAN,
                7 | 8 => 3.0,
                _ => ((i * 37) % 17) as f64 - 8.0,
            })
            .collect();
        let xe: Vec<E> = x.iter().map(|&v| E::from_f64(v)).collect();
        let xl = Layout::contiguous(&[n, c, h, w]);
        for k in [2, 3] {
            let tiled = Pool2dParams {
                kernel: [k, k],
                stride: [k, k],
                padding: [0, 0],
            };
            let (ho, wo) = (h / k, w / k);
            let g: Vec<f64> = (0..n * c * ho * wo)
                .map(|i| {
                    if i % 5 == 0 {
                        -0.0
                    } else {
                        i as f64 * 0.5 - 3.0
                    }
                })
                .collect();
            let ge: Vec<E> = g.iter().map(|&v| E::from_f64(v)).collect();
            let gl = Layout::contiguous(&[n, c, ho, wo]);
            let y = pool2d(&xe, &xl, PoolOp::Max, &tiled);
            let dx = pool2d_backward((&ge, &gl), (&xe, &xl), PoolOp::Max, &tiled);
            let mut want_y = Vec::new();
            let mut want_dx = vec![0.0f64; x.len()];
            for plane in 0..n * c {
                for oy in 0..ho {
                    for ox in 0..wo {
                        let window = || {
                            (oy * k..oy * k + k).flat_map(move |yy| {
                                (ox * k..ox * k + k).map(move |xx| plane * h * w + yy * w + xx)
                            })
                        };
                        // The forward keeps the largest value, or the last NaN.
                        let mut m = f64::NEG_INFINITY;
                        for at in window() {
                            if x[at] > m || x[at].is_nan() {
                                m = x[at];
                            }
                        }
                        want_y.push(m);
                        // The backward picks the first maximum, or the first NaN.
                        let mut best: Option<(usize, f64)> = None;
                        for at in window() {
                            let v = x[at];
                            if best.is_none_or(|(_, b)| v > b) || v.is_nan() {
                                best = Some((at, v));
                            }
                            if v.is_nan() {
                                break;
                            }
                        }
                        let at = best.map_or(0, |(a, _)| a);
                        want_dx[at] += g[(plane * ho + oy) * wo + ox];
                    }
                }
            }
            let bits = |v: &[E]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
            let want = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y), want(&want_y), "{} forward, k = {k}", E::DTYPE);
            assert_eq!(bits(&dx), want(&want_dx), "{} backward, k = {k}", E::DTYPE);
        }
    }
}
