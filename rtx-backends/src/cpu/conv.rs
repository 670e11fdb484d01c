//! Convolution on the CPU (1-d convolutions are 2-d ones of height 1); pooling lives in
//! `pool.rs` and is re-exported here.
//!
//! A convolution is one matrix product per (image, group): the group's weights, viewed as an
//! `[O/G, C/G*KH*KW]` matrix, times the im2col matrix of the image's channels in that group
//! (`[C/G*KH*KW, HO*WO]`, zeros where the window hangs over the padding), written straight
//! into the output's `[O/G, HO*WO]` block. Small images run side by side in tasks of a few
//! images each, and a task reuses one im2col buffer for all of them. The weight gradient
//! concatenates a task's images along the product's depth (`G · im2colᵀ` over `k = images *
//! HO*WO`), so one product per task and group sums them, and the tasks' partial sums are then
//! added in task order.
//!
//! Determinism: how images are grouped into tasks, and whether tasks run side by side or one
//! after another with a parallel product, is decided from the sizes alone; each output block
//! is written by one matrix product (see `matmul.rs`), and the weight gradient's partial sums
//! are added in a fixed order. So results do not depend on the thread count.

use super::CHUNK;
use super::conv_direct as direct;
use super::elementwise::map;
use super::matmul::{MatRef, gemm_into, same_type};
use crate::{Conv2dParams, Layout};
use rtx_kernels::Num;
use std::borrow::Cow;
use std::mem::MaybeUninit;

pub use super::pool::{pool2d, pool2d_backward};

/// The viewed elements as one dense slice, copying only when the layout is not contiguous.
pub(super) fn dense<'a, E: Copy + Send + Sync>(data: &'a [E], l: &Layout) -> Cow<'a, [E]> {
    match l.contiguous_range() {
        Some(r) => Cow::Borrowed(&data[r]),
        None => Cow::Owned(map(data, l, |x| x)),
    }
}

/// Images whose product has this many multiply-adds or more are computed one after another,
/// each product using all cores; smaller ones run side by side, one thread each.
const SMALL_ITEM: usize = 1 << 22;

/// The multiply-adds a task of images side by side aims at: enough that scheduling it costs
/// little next to its work.
const TASK_WORK: usize = 1 << 21;

/// At most this many weight-gradient tasks (each holds a partial sum of the weight).
const MAX_TASKS: usize = 64;

/// Images per task, from the multiply-adds of one image and the number of images alone.
fn images_per_task(per_image: usize, n: usize) -> usize {
    (TASK_WORK / per_image.max(1))
        .max(n.div_ceil(MAX_TASKS))
        .clamp(1, n.max(1))
}

/// The sizes of one convolution, as the im2col helpers need them.
#[derive(Clone, Copy)]
struct Geometry {
    /// Channels per group, input height and width.
    chw: (usize, usize, usize),
    /// Kernel height and width.
    kernel: (usize, usize),
    /// Output height and width.
    out: (usize, usize),
}

/// `s` as initialized elements.
///
/// # Safety
/// Every element of `s` must have been written.
unsafe fn assume_init<E>(s: &mut [MaybeUninit<E>]) -> &mut [E] {
    // SAFETY: `MaybeUninit<E>` has the layout of `E`, and the caller guarantees that every
    // element is initialized.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<E>(), s.len()) }
}

/// `s` as `f32` slots when `E` is `f32`.
fn f32_slots<E: 'static>(s: &mut [MaybeUninit<E>]) -> Option<&mut [MaybeUninit<f32>]> {
    (std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>()).then(|| {
        // SAFETY: the type ids are equal, so `E` is `f32`.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) }
    })
}

/// The direct kernels beat im2col and a GEMM only when each output sums enough products to
/// pay for storing it channel by channel: a reduction at least this deep.
const DIRECT_DEPTH: usize = 64;

/// The direct kernels hold channels in 16-lane vectors: with fewer output channels (input
/// channels, for the input gradient) most lanes would idle.
const DIRECT_CHANNELS: usize = 16;

/// The weight gradient takes the direct kernels only while the tasks' partial sums stay this
/// small (elements in all); larger layers accumulate one task after another instead.
const DIRECT_PARTS: usize = 1 << 23;

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
    let total = n * o * l;
    let mut out: Vec<E> = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    // A 1x1 kernel with unit stride and no padding reads the input as its own im2col matrix.
    let pointwise = kh == 1 && kw == 1 && p.stride == [1, 1] && p.padding == [0, 0];
    let geo = Geometry {
        chw: (cg, h, wd),
        kernel: (kh, kw),
        out: (ho, wo),
    };

    // One image: each group's block starts as the bias (or zeros) and receives W · im2col.
    let image = |ni: usize, block: &mut [MaybeUninit<E>], col: &mut [E], parallel: bool| {
        for (gi, dst) in block.chunks_mut(og * l).enumerate() {
            for (row, out_row) in dst.chunks_mut(l).enumerate() {
                let v = bias.as_ref().map_or(E::ZERO, |b| b[gi * og + row]);
                for o in out_row {
                    o.write(v);
                }
            }
            // SAFETY: the loop above wrote every element of the block.
            let dst = unsafe { assume_init(dst) };
            let src = &x[(ni * c + gi * cg) * h * wd..][..cg * h * wd];
            let rhs = if pointwise {
                MatRef::row_major(src, l)
            } else {
                im2col_into(src, col, l, geo, p);
                MatRef::row_major(col, l)
            };
            let lhs = MatRef {
                data: &w,
                offset: gi * og * ck,
                rs: ck,
                cs: 1,
            };
            gemm_into((og, l, ck), dst, lhs, rhs, bias.is_some(), parallel);
        }
    };
    let col_len = if pointwise { 0 } else { ck * l };
    let spare = &mut out.spare_capacity_mut()[..total];
    let direct = (same_type::<E, f32>(&x), same_type::<E, f32>(&w));
    if let ((Some(xf), Some(wf)), Some(dst)) = (direct, f32_slots(&mut *spare))
        && ck >= DIRECT_DEPTH
        && o >= DIRECT_CHANNELS
        && direct::usable(p, (kh, kw))
    {
        let bf = bias.as_ref().and_then(|b| same_type::<E, f32>(b));
        let per = images_per_task(o * l * ck, n);
        super::for_chunks_mut(dst, per * o * l, &|t, dst| {
            let xs = &xf[t * per * c * h * wd..][..dst.len() / (o * l) * c * h * wd];
            direct::forward(xs, [c, h, wd], wf, [o, kh, kw], bf, p, dst);
        });
        // SAFETY: `forward` wrote every element of every image.
        unsafe { out.set_len(total) };
        return out;
    }
    if n > 1 && o * l * ck < SMALL_ITEM {
        let per = images_per_task(o * l * ck, n);
        super::for_chunks_mut(spare, per * o * l, &|t, block| {
            let mut col = vec![E::ZERO; col_len];
            for (i, b) in block.chunks_mut(o * l).enumerate() {
                image(t * per + i, b, &mut col, false);
            }
        });
    } else {
        let mut col = vec![E::ZERO; col_len];
        for (ni, b) in spare.chunks_mut(o * l).enumerate() {
            image(ni, b, &mut col, true);
        }
    }
    // SAFETY: every image's block was written in full above.
    unsafe { out.set_len(total) };
    out
}

/// Writes the im2col matrix of one image's channels into `col`, row `r` at
/// `col[r * row_stride..][..HO*WO]`: row `(c, i, j)` holds, for every output position, the
/// input under kernel tap `(i, j)` of channel `c`, and 0 over the padding. Every element of
/// every row is written, so `col` may hold anything before.
fn im2col_into<E: Num>(
    image: &[E],
    col: &mut [E],
    row_stride: usize,
    geo: Geometry,
    p: &Conv2dParams,
) {
    let Geometry {
        chw: (cg, h, w),
        kernel: (kh, kw),
        out: (ho, wo),
    } = geo;
    let l = ho * wo;
    let [sh, sw] = p.stride;
    let [ph, pw] = p.padding;
    let [dh, dw] = p.dilation;
    for row in 0..cg * kh * kw {
        let dst = &mut col[row * row_stride..][..l];
        let (c, i, j) = (row / (kh * kw), (row / kw) % kh, row % kw);
        let xs = taps(wo, sw, j * dw, pw, w);
        for (oy, dst) in dst.chunks_exact_mut(wo).enumerate() {
            // Positions are shifted by the padding so they stay unsigned.
            let iy = oy * sh + i * dh;
            if xs.is_empty() || iy < ph || iy - ph >= h {
                dst.fill(E::ZERO);
                continue;
            }
            let src = &image[(c * h + iy - ph) * w..][..w];
            zero_run(&mut dst[..xs.start]);
            if sw == 1 {
                let first = xs.start + j * dw - pw;
                copy_run(&mut dst[xs.clone()], &src[first..first + xs.len()]);
            } else {
                for ox in xs.clone() {
                    dst[ox] = src[ox * sw + j * dw - pw];
                }
            }
            zero_run(&mut dst[xs.end..]);
        }
    }
}

/// `dst.copy_from_slice(src)` for the short runs im2col copies (one output row of a small
/// image: 10 to 30 elements in LeNet), in blocks of 8 that the compiler turns into a few vector
/// moves: a call into `memcpy` costs more than such a copy.
#[inline(always)]
fn copy_run<E: Copy>(dst: &mut [E], src: &[E]) {
    let n = dst.len();
    let src = &src[..n];
    if n < 8 {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s;
        }
        return;
    }
    let (dc, _) = dst.as_chunks_mut::<8>();
    let (sc, _) = src.as_chunks::<8>();
    for (d, s) in dc.iter_mut().zip(sc) {
        *d = *s;
    }
    // The tail as one more block that ends at the last element (overlapping the one before).
    let (d, _) = dst[n - 8..].as_chunks_mut::<8>();
    let (s, _) = src[n - 8..].as_chunks::<8>();
    d[0] = s[0];
}

/// Zeros a short (often empty) run without a call into `memset`.
#[inline(always)]
fn zero_run<E: Num>(dst: &mut [E]) {
    for d in dst {
        *d = E::ZERO;
    }
}

/// The output positions `ox` whose kernel tap at offset `tap` (dilation applied) lands inside
/// the input: `pad <= ox * stride + tap < len + pad`. Computing the range once per row keeps
/// the bounds checks out of the copy loops.
fn taps(out: usize, stride: usize, tap: usize, pad: usize, len: usize) -> std::ops::Range<usize> {
    let lo = pad.saturating_sub(tap).div_ceil(stride);
    let hi = (len + pad).saturating_sub(tap).div_ceil(stride).min(out);
    lo.min(hi)..hi
}

/// The gradient of [`conv2d`] with respect to its input, as dense `[N, C, H, W]` (`x_dims`),
/// from the output gradient `g` (`[N, O, HO, WO]`) and the weight `w` (`[O, C/G, KH, KW]`):
/// per (image, group), `Wᵀ · G` is a column matrix that col2im adds back onto the input
/// positions each tap read. Images write disjoint input blocks, in a fixed order inside each.
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
    let total = n * c * h * wd;
    // The direct kernels compute the input gradient as a convolution of the output gradient
    // padded back to the input's size: worth it only when that padding adds little (same-size
    // convolutions) and the input has enough channels to fill a vector.
    if let (Some(gf), Some(wf)) = (same_type::<E, f32>(&g), same_type::<E, f32>(&w))
        && total > 0
        && l > 0
        && o * kh * kw >= DIRECT_DEPTH
        && c >= DIRECT_CHANNELS
        && 4 * h * wd <= 5 * l
        && direct::usable(p, (kh, kw))
    {
        let mut dx = Vec::with_capacity(total);
        if let Some(dst) = f32_slots(&mut dx.spare_capacity_mut()[..total]) {
            let per = images_per_task(o * l * ck, n);
            super::for_chunks_mut(dst, per * c * h * wd, &|t, dst| {
                let gs = &gf[t * per * o * l..][..dst.len() / (c * h * wd) * o * l];
                direct::backward_input(gs, [o, ho, wo], wf, [c, kh, kw], [h, wd], p, dst);
            });
            // SAFETY: `backward_input` wrote every element of every image.
            unsafe { dx.set_len(total) };
            return dx;
        }
    }
    let mut dx = vec![E::ZERO; total];
    if dx.is_empty() || og == 0 || l == 0 {
        return dx;
    }
    let pointwise = kh == 1 && kw == 1 && p.stride == [1, 1] && p.padding == [0, 0];
    let geo = Geometry {
        chw: (cg, h, wd),
        kernel: (kh, kw),
        out: (ho, wo),
    };
    let image = |ni: usize, block: &mut [E], col: &mut [E], parallel: bool| {
        for (gi, dst) in block.chunks_mut(cg * h * wd).enumerate() {
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
                gemm_into((ck, l, og), dst, lhs, rhs, false, parallel);
            } else {
                gemm_into((ck, l, og), col, lhs, rhs, false, parallel);
                col2im(col, dst, geo, p);
            }
        }
    };
    // The product overwrites the column buffer, so it is zeroed once per task, not per image.
    let col_len = if pointwise { 0 } else { ck * l };
    if n > 1 && o * l * ck < SMALL_ITEM {
        let per = images_per_task(o * l * ck, n);
        super::for_chunks_mut(&mut dx, per * c * h * wd, &|t, block| {
            let mut col = vec![E::ZERO; col_len];
            for (i, b) in block.chunks_mut(c * h * wd).enumerate() {
                image(t * per + i, b, &mut col, false);
            }
        });
    } else {
        let mut col = vec![E::ZERO; col_len];
        for (ni, b) in dx.chunks_mut(c * h * wd).enumerate() {
            image(ni, b, &mut col, true);
        }
    }
    dx
}

/// The gradient of [`conv2d`] with respect to its weight, as dense `[O, C/G, KH, KW]`
/// (`w_dims`), from the output gradient `g` (`[N, O, HO, WO]`) and the input `x`: per group,
/// the sum over images of `G · im2colᵀ`. Images are grouped into tasks fixed by the sizes; a
/// task's images are concatenated along the product's depth, and the tasks' partial sums are
/// added in task order (small images), or accumulated one task after another with a parallel
/// product (large ones).
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
    let geo = Geometry {
        chw: (cg, h, wd),
        kernel: (kh, kw),
        out: (ho, wo),
    };
    // The images `first..first + cnt`: `dst` ([O, CK]) gets (or, with `accumulate`, adds)
    // `Gcat · colcatᵀ` per group, where `Gcat` ([O/G, cnt*L]) and `colcat` ([CK, cnt*L]) put
    // the images' gradients and im2col matrices side by side.
    let task = |first: usize, cnt: usize, dst: &mut [E], accumulate: bool, parallel: bool| {
        let k = cnt * l;
        let mut col = vec![E::ZERO; ck * k];
        let mut gcat = vec![E::ZERO; og * k];
        for (gi, dst) in dst.chunks_mut(og * ck).enumerate() {
            for t in 0..cnt {
                let ni = first + t;
                let src = &x[(ni * c + gi * cg) * h * wd..][..cg * h * wd];
                if pointwise {
                    for (r, row) in src.chunks_exact(l).enumerate() {
                        col[r * k + t * l..][..l].copy_from_slice(row);
                    }
                } else {
                    im2col_into(src, &mut col[t * l..], k, geo, p);
                }
                let grad = &g[(ni * o + gi * og) * l..][..og * l];
                for (r, row) in grad.chunks_exact(l).enumerate() {
                    gcat[r * k + t * l..][..l].copy_from_slice(row);
                }
            }
            // colcatᵀ: [cnt*L, CK], read in place through swapped strides.
            let rhs = MatRef {
                data: &col,
                offset: 0,
                rs: 1,
                cs: k,
            };
            let lhs = MatRef::row_major(&gcat, k);
            gemm_into((og, ck, k), dst, lhs, rhs, accumulate, parallel);
        }
    };
    let per = images_per_task(o * l * ck, n);
    let tasks = n.div_ceil(per);
    let size = o * ck;
    if let (Some(gf), Some(xf), Some(dwf)) = (
        same_type::<E, f32>(&g),
        same_type::<E, f32>(&x),
        super::matmul::same_type_mut::<E, f32>(&mut dw),
    ) && tasks * size <= DIRECT_PARTS
        && o >= DIRECT_CHANNELS
        && direct::usable(p, (kh, kw))
    {
        let (xs, gs) = (per * c * h * wd, per * o * l);
        let run = |t: usize, dst: &mut [f32]| {
            let (xt, gt) = (&xf[t * xs..xf.len().min((t + 1) * xs)], &gf[t * gs..]);
            direct::backward_weight(gt, xt, [c, h, wd], [o, kh, kw], p, dst);
        };
        if tasks == 1 {
            run(0, dwf);
            return dw;
        }
        let mut parts = vec![0f32; tasks * size];
        super::for_chunks_mut(&mut parts, size, &|t, dst| run(t, dst));
        sum_parts(&parts, dwf);
        return dw;
    }
    if tasks == 1 || o * l * ck >= SMALL_ITEM {
        for t in 0..tasks {
            let first = t * per;
            task(first, per.min(n - first), &mut dw, t > 0, true);
        }
        return dw;
    }
    let mut parts = vec![E::ZERO; tasks * size];
    super::for_chunks_mut(&mut parts, size, &|t, dst| {
        let first = t * per;
        task(first, per.min(n - first), dst, false, false);
    });
    sum_parts(&parts, &mut dw);
    dw
}

/// `dst` = the sum of the equal-sized partials in `parts`, each element added in part order
/// (whichever chunk of `dst` it falls in, so the sum does not depend on the thread count).
fn sum_parts<E: Num>(parts: &[E], dst: &mut [E]) {
    let size = dst.len();
    super::for_chunks_mut(dst, CHUNK, &|i, dst| {
        let range = i * CHUNK..i * CHUNK + dst.len();
        dst.copy_from_slice(&parts[range.clone()]);
        for part in parts.chunks_exact(size).skip(1) {
            for (d, &v) in dst.iter_mut().zip(&part[range.clone()]) {
                *d = d.add(v);
            }
        }
    });
}

/// Adds each row `(c, i, j)` of a column matrix back onto the input positions kernel tap
/// `(i, j)` of channel `c` read (the transpose of [`im2col_into`]), in a fixed order.
fn col2im<E: Num>(col: &[E], image: &mut [E], geo: Geometry, p: &Conv2dParams) {
    let Geometry {
        chw: (_, h, w),
        kernel: (kh, kw),
        out: (ho, wo),
    } = geo;
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
}
