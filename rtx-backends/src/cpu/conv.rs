//! Convolution and 2-d pooling on the CPU.
//!
//! A convolution is one matrix product per (image, group): the group's weights, viewed as an
//! `[O/G, C/G*KH*KW]` matrix, times the im2col matrix of the image's channels in that group
//! (`[C/G*KH*KW, HO*WO]`, zeros where the window hangs over the padding), written straight
//! into the output's `[O/G, HO*WO]` block. 1-d convolutions are 2-d ones of height 1.
//! Pooling loops over output elements in fixed chunks.
//!
//! Determinism: whether (image, group) items run in parallel or one after another with a
//! parallel product is decided from the sizes alone, and each item's output block is written
//! by one matrix product (see `matmul.rs`), so results do not depend on the thread count.

use super::elementwise::map;
use super::matmul::{MatRef, gemm_into};
use crate::Layout;
use rayon::prelude::*;
use rtx_kernels::op::PoolOp;
use rtx_kernels::{Float, FloatMath, Num};
use std::borrow::Cow;

/// The settings of a 2-d convolution, per spatial axis `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2dParams {
    /// The step between windows.
    pub stride: [usize; 2],
    /// Zeros added on both sides.
    pub padding: [usize; 2],
    /// The step between kernel taps.
    pub dilation: [usize; 2],
    /// Channel groups: input and output channels split into this many independent convolutions.
    pub groups: usize,
}

impl Conv2dParams {
    /// The output size along axis `axis` (0 = height, 1 = width) for an input of `input` and
    /// a kernel of `kernel`, or `None` when the dilated kernel is larger than the padded input
    /// (or a stride or dilation is 0).
    pub fn output_size(&self, axis: usize, input: usize, kernel: usize) -> Option<usize> {
        out_size(
            input,
            kernel,
            self.stride[axis],
            self.padding[axis],
            self.dilation[axis],
        )
    }
}

/// The settings of a 2-d pooling window, per spatial axis `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pool2dParams {
    /// The window size.
    pub kernel: [usize; 2],
    /// The step between windows.
    pub stride: [usize; 2],
    /// Padding on both sides (max pool treats it as -inf, average pool as zeros it counts).
    pub padding: [usize; 2],
}

impl Pool2dParams {
    /// The output size along axis `axis` (0 = height, 1 = width), or `None` when the window is
    /// larger than the padded input (or the stride or kernel is 0).
    pub fn output_size(&self, axis: usize, input: usize) -> Option<usize> {
        if self.kernel[axis] == 0 {
            return None;
        }
        out_size(
            input,
            self.kernel[axis],
            self.stride[axis],
            self.padding[axis],
            1,
        )
    }
}

/// `(input + 2 padding - dilation (kernel - 1) - 1) / stride + 1`, PyTorch's formula.
fn out_size(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Option<usize> {
    if stride == 0 || dilation == 0 || kernel == 0 {
        return None;
    }
    let span = dilation * (kernel - 1) + 1;
    let padded = input + 2 * padding;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// The viewed elements as one dense slice, copying only when the layout is not contiguous.
fn dense<'a, E: Copy + Send + Sync>(data: &'a [E], l: &Layout) -> Cow<'a, [E]> {
    match l.contiguous_range() {
        Some(r) => Cow::Borrowed(&data[r]),
        None => Cow::Owned(map(data, l, |x| x)),
    }
}

/// Items whose product has fewer multiply-adds than this run side by side, one thread each.
const SMALL_ITEM: usize = 1 << 22;

/// The 2-d convolution of `x` (`[N, C, H, W]`) with `w` (`[O, C/G, KH, KW]`) plus an optional
/// per-channel `bias` (`[O]`), as dense `[N, O, HO, WO]`. The caller has checked the sizes.
pub fn conv2d<E: Num>(
    (x, xl): (&[E], &Layout),
    (w, wl): (&[E], &Layout),
    bias: Option<(&[E], &Layout)>,
    p: &Conv2dParams,
) -> Vec<E> {
    let &[n, c, h, wd] = xl.dims() else {
        panic!("conv2d: input must be rank 4")
    };
    let &[o, cg, kh, kw] = wl.dims() else {
        panic!("conv2d: weight must be rank 4")
    };
    let g = p.groups;
    assert!(
        g > 0 && c == cg * g && o % g == 0,
        "conv2d: channels do not fit the groups"
    );
    let (Some(ho), Some(wo)) = (p.output_size(0, h, kh), p.output_size(1, wd, kw)) else {
        panic!("conv2d: the kernel does not fit the padded input")
    };
    let (x, w) = (dense(x, xl), dense(w, wl));
    let bias = bias.map(|(b, bl)| dense(b, bl));
    let (og, l, ck) = (o / g, ho * wo, cg * kh * kw);
    let mut out = vec![E::ZERO; n * o * l];
    if out.is_empty() {
        return out;
    }
    // A 1x1 kernel with unit stride and no padding reads the input as its own im2col matrix.
    let pointwise = kh == 1 && kw == 1 && p.stride == [1, 1] && p.padding == [0, 0];

    let item = |idx: usize, block: &mut [E], parallel: bool| {
        let (ni, gi) = (idx / g, idx % g);
        if let Some(b) = &bias {
            for (row, out_row) in block.chunks_mut(l).enumerate() {
                out_row.fill(b[gi * og + row]);
            }
        }
        let image = &x[(ni * c + gi * cg) * h * wd..][..cg * h * wd];
        let col;
        let rhs = if pointwise {
            MatRef::row_major(image, l)
        } else {
            col = im2col(image, (cg, h, wd), (kh, kw), (ho, wo), p);
            MatRef::row_major(&col, l)
        };
        let lhs = MatRef {
            data: &w,
            offset: gi * og * ck,
            rs: ck,
            cs: 1,
        };
        gemm_into((og, l, ck), block, lhs, rhs, bias.is_some(), parallel);
    };
    let items = n * g;
    if items > 1 && og * l * ck < SMALL_ITEM {
        out.par_chunks_mut(og * l)
            .enumerate()
            .for_each(|(i, block)| item(i, block, false));
    } else {
        for (i, block) in out.chunks_mut(og * l).enumerate() {
            item(i, block, true);
        }
    }
    out
}

/// The im2col matrix of one image's channels: row `(c, i, j)` holds, for every output
/// position, the input under kernel tap `(i, j)` of channel `c` (0 over the padding).
fn im2col<E: Num>(
    image: &[E],
    (cg, h, w): (usize, usize, usize),
    (kh, kw): (usize, usize),
    (ho, wo): (usize, usize),
    p: &Conv2dParams,
) -> Vec<E> {
    let l = ho * wo;
    let mut col = vec![E::ZERO; cg * kh * kw * l];
    let [sh, sw] = p.stride;
    let [ph, pw] = p.padding;
    let [dh, dw] = p.dilation;
    for (row, dst) in col.chunks_mut(l).enumerate() {
        let (c, i, j) = (row / (kh * kw), (row / kw) % kh, row % kw);
        let xs = taps(wo, sw, j * dw, pw, w);
        if xs.is_empty() {
            continue;
        }
        for oy in 0..ho {
            // Positions are shifted by the padding so they stay unsigned.
            let iy = oy * sh + i * dh;
            if iy < ph || iy - ph >= h {
                continue;
            }
            let src = &image[(c * h + iy - ph) * w..][..w];
            let dst = &mut dst[oy * wo..][..wo];
            if sw == 1 {
                let first = xs.start + j * dw - pw;
                dst[xs.clone()].copy_from_slice(&src[first..first + xs.len()]);
            } else {
                for ox in xs.clone() {
                    dst[ox] = src[ox * sw + j * dw - pw];
                }
            }
        }
    }
    col
}

/// The output positions `ox` whose kernel tap at offset `tap` (dilation applied) lands inside
/// the input: `pad <= ox * stride + tap < len + pad`. Computing the range once per row keeps
/// the bounds checks out of the copy loops.
fn taps(out: usize, stride: usize, tap: usize, pad: usize, len: usize) -> std::ops::Range<usize> {
    let lo = pad.saturating_sub(tap).div_ceil(stride);
    let hi = (len + pad).saturating_sub(tap).div_ceil(stride).min(out);
    lo.min(hi)..hi
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
    // Whole output rows per task, so the window of a row is looked up once; each output is
    // written by one task, so the split cannot change results.
    let rows = (super::CHUNK / wo).max(1);
    out.par_chunks_mut(rows * wo)
        .enumerate()
        .for_each(|(task, block)| {
            for (i, dst) in block.chunks_mut(wo).enumerate() {
                let r = task * rows + i;
                let (image, ys) = (&x[r / ho * h * w..][..h * w], ys[r % ho].clone());
                for (o, xs) in dst.iter_mut().zip(&xs) {
                    *o = match op {
                        PoolOp::Max => {
                            // `v > m || v != v`: NaN wins, like `max_of`, but as one
                            // compare-and-select the compiler keeps branch-free.
                            let mut m = E::LOWEST;
                            for y in ys.clone() {
                                for &v in &image[y * w + xs.start..y * w + xs.end] {
                                    #[allow(clippy::eq_op)]
                                    let take = v > m || v != v;
                                    m = if take { v } else { m };
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

/// The gradient of [`conv2d`] with respect to its input, as dense `[N, C, H, W]` (`x_dims`),
/// from the output gradient `g` (`[N, O, HO, WO]`) and the weight `w` (`[O, C/G, KH, KW]`):
/// per (image, group), `Wᵀ · G` is a column matrix that col2im adds back onto the input
/// positions each tap read. Items write disjoint input blocks, in a fixed order inside each.
pub fn conv2d_backward_input<E: Num>(
    (g, gl): (&[E], &Layout),
    (w, wl): (&[E], &Layout),
    x_dims: [usize; 4],
    p: &Conv2dParams,
) -> Vec<E> {
    let [n, c, h, wd] = x_dims;
    let &[o, cg, kh, kw] = wl.dims() else {
        panic!("conv2d backward: weight must be rank 4")
    };
    let &[_, _, ho, wo] = gl.dims() else {
        panic!("conv2d backward: gradient must be rank 4")
    };
    let groups = p.groups;
    let (g, w) = (dense(g, gl), dense(w, wl));
    let (og, l, ck) = (o / groups, ho * wo, cg * kh * kw);
    let mut dx = vec![E::ZERO; n * c * h * wd];
    if dx.is_empty() || og == 0 || l == 0 {
        return dx;
    }
    let pointwise = kh == 1 && kw == 1 && p.stride == [1, 1] && p.padding == [0, 0];
    let item = |idx: usize, block: &mut [E], parallel: bool| {
        let (ni, gi) = (idx / groups, idx % groups);
        // Wᵀ of the group: [C/G*KH*KW, O/G], read in place through swapped strides.
        let lhs = MatRef {
            data: &w,
            offset: gi * og * ck,
            rs: 1,
            cs: ck,
        };
        let rhs = MatRef {
            data: &g,
            offset: (ni * o + gi * og) * l,
            rs: l,
            cs: 1,
        };
        if pointwise {
            gemm_into((ck, l, og), block, lhs, rhs, false, parallel);
        } else {
            let mut col = vec![E::ZERO; ck * l];
            gemm_into((ck, l, og), &mut col, lhs, rhs, false, parallel);
            col2im(&col, block, (cg, h, wd), (kh, kw), (ho, wo), p);
        }
    };
    let items = n * groups;
    if items > 1 && og * l * ck < SMALL_ITEM {
        dx.par_chunks_mut(cg * h * wd)
            .enumerate()
            .for_each(|(i, block)| item(i, block, false));
    } else {
        for (i, block) in dx.chunks_mut(cg * h * wd).enumerate() {
            item(i, block, true);
        }
    }
    dx
}

/// The gradient of [`conv2d`] with respect to its weight, as dense `[O, C/G, KH, KW]`
/// (`w_dims`), from the output gradient `g` (`[N, O, HO, WO]`) and the input `x`: per group,
/// the sum over images of `G · im2colᵀ`, accumulated image after image (a fixed order).
pub fn conv2d_backward_weight<E: Num>(
    (g, gl): (&[E], &Layout),
    (x, xl): (&[E], &Layout),
    w_dims: [usize; 4],
    p: &Conv2dParams,
) -> Vec<E> {
    let [o, cg, kh, kw] = w_dims;
    let &[n, c, h, wd] = xl.dims() else {
        panic!("conv2d backward: input must be rank 4")
    };
    let &[_, _, ho, wo] = gl.dims() else {
        panic!("conv2d backward: gradient must be rank 4")
    };
    let groups = p.groups;
    let (g, x) = (dense(g, gl), dense(x, xl));
    let (og, l, ck) = (o / groups, ho * wo, cg * kh * kw);
    let mut dw = vec![E::ZERO; o * ck];
    if dw.is_empty() || n == 0 || l == 0 {
        return dw;
    }
    let pointwise = kh == 1 && kw == 1 && p.stride == [1, 1] && p.padding == [0, 0];
    let item = |gi: usize, block: &mut [E], parallel: bool| {
        for ni in 0..n {
            let image = &x[(ni * c + gi * cg) * h * wd..][..cg * h * wd];
            let col;
            // im2colᵀ: [HO*WO, C/G*KH*KW], read in place through swapped strides.
            let rhs = if pointwise {
                MatRef {
                    data: image,
                    offset: 0,
                    rs: 1,
                    cs: l,
                }
            } else {
                col = im2col(image, (cg, h, wd), (kh, kw), (ho, wo), p);
                MatRef {
                    data: &col,
                    offset: 0,
                    rs: 1,
                    cs: l,
                }
            };
            let lhs = MatRef {
                data: &g,
                offset: (ni * o + gi * og) * l,
                rs: l,
                cs: 1,
            };
            gemm_into((og, ck, l), block, lhs, rhs, ni > 0, parallel);
        }
    };
    if groups > 1 && n * og * l * ck < SMALL_ITEM {
        dw.par_chunks_mut(og * ck)
            .enumerate()
            .for_each(|(i, block)| item(i, block, false));
    } else {
        for (i, block) in dw.chunks_mut(og * ck).enumerate() {
            item(i, block, true);
        }
    }
    dw
}

/// Adds each row `(c, i, j)` of a column matrix back onto the input positions kernel tap
/// `(i, j)` of channel `c` read (the transpose of [`im2col`]), in a fixed order.
fn col2im<E: Num>(
    col: &[E],
    image: &mut [E],
    (_cg, h, w): (usize, usize, usize),
    (kh, kw): (usize, usize),
    (ho, wo): (usize, usize),
    p: &Conv2dParams,
) {
    let l = ho * wo;
    let [sh, sw] = p.stride;
    let [ph, pw] = p.padding;
    let [dh, dw] = p.dilation;
    for (row, src) in col.chunks(l).enumerate() {
        let (c, i, j) = (row / (kh * kw), (row / kw) % kh, row % kw);
        let xs = taps(wo, sw, j * dw, pw, w);
        if xs.is_empty() {
            continue;
        }
        for oy in 0..ho {
            let iy = oy * sh + i * dh;
            if iy < ph || iy - ph >= h {
                continue;
            }
            let dst = &mut image[(c * h + iy - ph) * w..][..w];
            let src = &src[oy * wo..][..wo];
            if sw == 1 {
                let first = xs.start + j * dw - pw;
                for (d, &v) in dst[first..first + xs.len()]
                    .iter_mut()
                    .zip(&src[xs.clone()])
                {
                    *d = d.add(v);
                }
            } else {
                for ox in xs.clone() {
                    let d = &mut dst[ox * sw + j * dw - pw];
                    *d = d.add(src[ox]);
                }
            }
        }
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
    dx.par_chunks_mut(h * w)
        .enumerate()
        .for_each(|(plane, dst)| {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_follow_pytorch() {
        let p = Conv2dParams {
            stride: [2, 1],
            padding: [1, 0],
            dilation: [1, 2],
            groups: 1,
        };
        assert_eq!(p.output_size(0, 28, 3), Some(14));
        assert_eq!(p.output_size(1, 28, 3), Some(24));
        assert_eq!(p.output_size(1, 4, 3), None);
    }

    #[test]
    fn a_pointwise_conv_is_a_channel_mix() {
        // x: [1, 2, 1, 2], w: [1, 2, 1, 1] = [10, 1], bias 0.5.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let w = [10.0f32, 1.0];
        let b = [0.5f32];
        let p = Conv2dParams {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        };
        let out = conv2d(
            (&x, &Layout::contiguous(&[1, 2, 1, 2])),
            (&w, &Layout::contiguous(&[1, 2, 1, 1])),
            Some((&b, &Layout::contiguous(&[1]))),
            &p,
        );
        assert_eq!(out, vec![13.5, 24.5]);
    }

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
}
