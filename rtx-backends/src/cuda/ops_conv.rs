//! The GPU side of convolution and 2-d pooling.
//!
//! A convolution is im2col (one launch, reading the input through its strides, so any view
//! works) and one batched cuBLAS product per direction:
//! - forward: `W_g [O/G, C/G*KH*KW] x col [C/G*KH*KW, HO*WO]` for every (image, group),
//!   written straight into the `[N, O, HO, WO]` output; a 1x1 kernel with unit stride and no
//!   padding reads a contiguous input as its own column matrix. The bias is one elementwise
//!   add after the product.
//! - input gradient: `W_gᵀ G` per (image, group) gives a column matrix, which `col2im` folds
//!   back onto the input (a gather: one thread per input element, no atomics).
//! - weight gradient: `G_g [O/G, N*HO*WO] x col_gᵀ [N*HO*WO, C/G*KH*KW]` per group, one
//!   product whose inner dimension runs over all images, so no sum across launches.
//!
//! Pooling is one launch forward; its backward is a gather too (plus, for max pooling, one
//! launch that finds each window's first maximum).
//!
//! Invariant: the CPU backend's semantics (`rtx-backends/src/cpu/conv.rs`); results are fresh
//! dense storage, and every sum runs in an order fixed by the sizes (cuBLAS is deterministic
//! for a given GPU and shape; atomics are never used).

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::LaunchConfig;
use super::matmul::matmul;
use super::ops::{dense, dense_view, input, map};
use super::storage::CudaStorage;
use crate::{Conv2dParams, Pool2dParams};
use crate::{Layout, Result};
use rtx_kernels::kernel::{KernelEntry, KernelSource, Variant};
use rtx_kernels::op::PoolOp;
use rtx_kernels::{Element, kernels};

/// Threads per block of the grid-stride kernels here.
const BLOCK: u32 = 256;

/// A grid-stride launch over `n` items (capped: each thread loops over the rest).
fn grid(n: usize) -> LaunchConfig {
    LaunchConfig::for_elements(n.min(1 << 24), BLOCK)
}

fn entry<E: Element>(ordinal: usize, src: &'static KernelSource) -> Result<&'static KernelEntry> {
    kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)
}

/// The sizes of one convolution.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    kh: usize,
    kw: usize,
    ho: usize,
    wo: usize,
    groups: usize,
}

impl Geometry {
    /// From the input's and the weight's sizes; the caller has checked that they fit.
    fn new(x: &[usize], w: &[usize], p: &Conv2dParams) -> Geometry {
        Geometry {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o: w[0],
            kh: w[2],
            kw: w[3],
            ho: p.output_size(0, x[2], w[2]).unwrap_or(0),
            wo: p.output_size(1, x[3], w[3]).unwrap_or(0),
            groups: p.groups,
        }
    }

    /// Output channels per group.
    fn og(&self) -> usize {
        self.o / self.groups
    }

    /// Rows of a group's column matrix: `C/G * KH * KW`.
    fn ck(&self) -> usize {
        self.c / self.groups * self.kh * self.kw
    }

    /// Output positions per image.
    fn l(&self) -> usize {
        self.ho * self.wo
    }
}

/// A 1x1 kernel with unit stride and no padding: the input is its own column matrix.
fn pointwise(geo: &Geometry, p: &Conv2dParams) -> bool {
    geo.kh == 1 && geo.kw == 1 && p.stride == [1, 1] && p.padding == [0, 0]
}

/// How im2col lays out the column matrix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Columns {
    /// `[N, C*KH*KW, HO*WO]`: one matrix per image (the forward's right operand).
    PerImage,
    /// `[C*KH*KW, N, HO*WO]`: images side by side (the weight gradient's inner dimension).
    ImagesInRows,
}

/// Sizes as kernel arguments.
fn sizes(v: &[usize]) -> impl Iterator<Item = Arg> + '_ {
    v.iter().map(|&s| Arg::U64(s as u64))
}

/// im2col's arguments after its two buffers, in the kernel's order, for an input with element
/// strides `xs`.
fn im2col_sizes(geo: &Geometry, p: &Conv2dParams, xs: &[usize], arr: Columns) -> [usize; 20] {
    let (rows, l) = (geo.c * geo.kh * geo.kw, geo.l());
    let (row_stride, img_stride) = match arr {
        Columns::PerImage => (l, rows * l),
        Columns::ImagesInRows => (geo.n * l, l),
    };
    [
        geo.n,
        geo.c,
        geo.h,
        geo.w,
        geo.kh,
        geo.kw,
        geo.ho,
        geo.wo,
        p.stride[0],
        p.stride[1],
        p.padding[0],
        p.padding[1],
        p.dilation[0],
        p.dilation[1],
        xs[0],
        xs[1],
        xs[2],
        xs[3],
        row_stride,
        img_stride,
    ]
}

/// col2im's arguments after its two buffers, in the kernel's order.
fn col2im_sizes(geo: &Geometry, p: &Conv2dParams) -> [usize; 14] {
    [
        geo.n,
        geo.c,
        geo.h,
        geo.w,
        geo.kh,
        geo.kw,
        geo.ho,
        geo.wo,
        p.stride[0],
        p.stride[1],
        p.padding[0],
        p.padding[1],
        p.dilation[0],
        p.dilation[1],
    ]
}

/// The forward product's operands: each group's weights as an `[O/G, C/G*KH*KW]` matrix (at
/// `w_offset` of a dense weight), the same for every image (batch stride 0: cuBLAS takes that
/// as is with one group or one image, and the product makes it dense otherwise), and the
/// `[N, G, C/G*KH*KW, HO*WO]` columns: the dense input itself from `direct` (its offset) for a
/// pointwise convolution, else im2col's `PerImage` matrix.
fn forward_operands(geo: &Geometry, w_offset: usize, direct: Option<usize>) -> (Layout, Layout) {
    let (g, og, ck, l) = (geo.groups, geo.og(), geo.ck(), geo.l());
    let w = Layout::new(&[geo.n, g, og, ck], &[0, og * ck, ck, 1], w_offset);
    let cols = match direct {
        Some(offset) => {
            let cg = geo.c / g;
            Layout::new(&[geo.n, g, cg, l], &[geo.c * l, cg * l, l, 1], offset)
        }
        None => Layout::contiguous(&[geo.n, g, ck, l]),
    };
    (w, cols)
}

/// The input gradient's product: `W_gᵀ` (`[C/G*KH*KW, O/G]`, swapped strides of a dense
/// weight at `w_offset`) times `G` of each (image, group) (`[O/G, HO*WO]` of a dense gradient
/// at `g_offset`).
fn input_grad_operands(geo: &Geometry, w_offset: usize, g_offset: usize) -> (Layout, Layout) {
    let (g, og, ck, l) = (geo.groups, geo.og(), geo.ck(), geo.l());
    let wt = Layout::new(&[geo.n, g, ck, og], &[0, og * ck, 1, ck], w_offset);
    let gm = Layout::new(&[geo.n, g, og, l], &[geo.o * l, og * l, l, 1], g_offset);
    (wt, gm)
}

/// A dense gradient (at `offset`) viewed as `[G, O/G, N, HO*WO]`: images moved inside each
/// group, so that a dense copy of it is each group's `[O/G, N*HO*WO]` matrix.
fn grad_per_group(geo: &Geometry, offset: usize) -> Layout {
    let (og, l) = (geo.og(), geo.l());
    Layout::new(
        &[geo.groups, og, geo.n, l],
        &[og * l, l, geo.o * l, 1],
        offset,
    )
}

/// The weight gradient's product: each group's gradient (`[O/G, N*HO*WO]`, dense from
/// `g_offset`) times `col_gᵀ` (`[N*HO*WO, C/G*KH*KW]`, swapped strides of im2col's
/// `ImagesInRows` matrix).
fn weight_grad_operands(geo: &Geometry, g_offset: usize) -> (Layout, Layout) {
    let (g, og, ck, nl) = (geo.groups, geo.og(), geo.ck(), geo.n * geo.l());
    let a = Layout::new(&[g, og, nl], &[og * nl, nl, 1], g_offset);
    let b = Layout::new(&[g, nl, ck], &[ck * nl, 1, nl], 0);
    (a, b)
}

/// The column matrix of `x` viewed by `xl`: one launch.
fn im2col<E: Element>(
    x: &CudaStorage<E>,
    xl: &Layout,
    geo: &Geometry,
    p: &Conv2dParams,
    arrangement: Columns,
) -> Result<CudaStorage<E>> {
    let src = &kernels::im2col::KERNEL;
    let e = entry::<E>(x.ordinal(), src)?;
    let (rows, l) = (geo.c * geo.kh * geo.kw, geo.l());
    let total = geo.n * rows * l;
    let col = CudaStorage::<E>::uninit(x.ordinal(), total)?;
    if total == 0 {
        return Ok(col);
    }
    let mut args = vec![Arg::Ptr(x.ptr_at(xl.offset())), Arg::Ptr(col.device_ptr())];
    args.extend(sizes(&im2col_sizes(geo, p, xl.strides(), arrangement)));
    // SAFETY: `x`'s layout addresses only its storage (Layout's invariant), and every read is
    // at an index inside [N, C, H, W] through those strides; `col` holds `total` elements and
    // both arrangements address exactly 0..total.
    unsafe { launch_entry(x.ordinal(), src, e, grid(total), &args)? };
    Ok(col)
}

/// The convolution of `x` (`[N, C, H, W]` view) with `w` (`[O, C/G, KH, KW]` view) plus an
/// optional `[O]` bias, as dense `[N, O, HO, WO]`. Sizes are checked by the caller.
pub(crate) fn conv2d<E: Element>(
    (x, xl): (&CudaStorage<E>, &Layout),
    (w, wl): (&CudaStorage<E>, &Layout),
    bias: Option<(&CudaStorage<E>, &Layout)>,
    p: &Conv2dParams,
) -> Result<CudaStorage<E>> {
    let geo = Geometry::new(xl.dims(), wl.dims(), p);
    let l = geo.l();
    // The entries exist for every float type; checking first keeps errors free of effects.
    entry::<E>(x.ordinal(), &kernels::im2col::KERNEL)?;
    if geo.n * geo.o * l == 0 {
        return CudaStorage::uninit(x.ordinal(), 0);
    }
    let direct = pointwise(&geo, p) && xl.is_contiguous();
    let cols = if direct {
        x.clone()
    } else {
        im2col(x, xl, &geo, p, Columns::PerImage)?
    };
    let (wd, woff) = dense_view(w, wl)?;
    let (w_layout, col_layout) = forward_operands(&geo, woff, direct.then_some(xl.offset()));
    let out = matmul((&wd, &w_layout), (&cols, &col_layout), dense)?;
    let Some((b, bl)) = bias else {
        return Ok(out);
    };
    let dims = [geo.n, geo.o, l];
    let out_layout = Layout::contiguous(&dims);
    let bias_layout = Layout::new(&dims, &[0, bl.strides()[0], 0], bl.offset());
    map(
        x.ordinal(),
        &kernels::add::KERNEL,
        E::DTYPE,
        &dims,
        &[input(&out, &out_layout), input(b, &bias_layout)],
        &[],
    )
}

/// The gradient of [`conv2d`] with respect to its input, as dense `x_dims`, from the output
/// gradient `g` (`[N, O, HO, WO]` view) and the weight.
pub(crate) fn conv2d_backward_input<E: Element>(
    (g, gl): (&CudaStorage<E>, &Layout),
    (w, wl): (&CudaStorage<E>, &Layout),
    x_dims: [usize; 4],
    p: &Conv2dParams,
) -> Result<CudaStorage<E>> {
    let geo = Geometry::new(&x_dims, wl.dims(), p);
    let src = &kernels::col2im::KERNEL;
    let e = entry::<E>(g.ordinal(), src)?;
    let numel = geo.n * geo.c * geo.h * geo.w;
    if numel == 0 {
        return CudaStorage::uninit(g.ordinal(), 0);
    }
    let (wd, woff) = dense_view(w, wl)?;
    let (gd, goff) = dense_view(g, gl)?;
    let (wt, gm) = input_grad_operands(&geo, woff, goff);
    // [N, G, C/G*KH*KW, HO*WO] = [N, C*KH*KW, HO*WO].
    let col = matmul((&wd, &wt), (&gd, &gm), dense)?;
    if pointwise(&geo, p) {
        // The column matrix of a pointwise convolution is the input gradient itself.
        return Ok(col);
    }
    let dx = CudaStorage::<E>::uninit(g.ordinal(), numel)?;
    let mut args = vec![Arg::Ptr(col.device_ptr()), Arg::Ptr(dx.device_ptr())];
    args.extend(sizes(&col2im_sizes(&geo, p)));
    // SAFETY: `col` holds N * C*KH*KW * HO*WO dense elements (the product's output, or none
    // read when HO*WO is 0), and `dx` holds the N*C*H*W elements written, one per thread.
    unsafe { launch_entry(g.ordinal(), src, e, grid(numel), &args)? };
    Ok(dx)
}

/// The gradient of [`conv2d`] with respect to its weight, as dense `w_dims`, from the output
/// gradient `g` (`[N, O, HO, WO]` view) and the input `x`.
pub(crate) fn conv2d_backward_weight<E: Element>(
    (g, gl): (&CudaStorage<E>, &Layout),
    (x, xl): (&CudaStorage<E>, &Layout),
    w_dims: [usize; 4],
    p: &Conv2dParams,
) -> Result<CudaStorage<E>> {
    let geo = Geometry::new(xl.dims(), &w_dims, p);
    entry::<E>(x.ordinal(), &kernels::im2col::KERNEL)?;
    if geo.o * geo.ck() == 0 {
        return CudaStorage::uninit(x.ordinal(), 0);
    }
    let (gd, goff) = dense_view(g, gl)?;
    let gg = dense_view(&gd, &grad_per_group(&geo, goff))?;
    let col = im2col(x, xl, &geo, p, Columns::ImagesInRows)?;
    let (a, b) = weight_grad_operands(&geo, gg.1);
    matmul((&gg.0, &a), (&col, &b), dense)
}

/// The pooling launch's shape arguments, after the buffers.
fn pool_sizes(d: &[usize], out: (usize, usize), p: &Pool2dParams) -> [usize; 12] {
    [
        d[0],
        d[1],
        d[2],
        d[3],
        out.0,
        out.1,
        p.kernel[0],
        p.kernel[1],
        p.stride[0],
        p.stride[1],
        p.padding[0],
        p.padding[1],
    ]
}

fn pool_out(d: &[usize], p: &Pool2dParams) -> (usize, usize) {
    (
        p.output_size(0, d[2]).unwrap_or(0),
        p.output_size(1, d[3]).unwrap_or(0),
    )
}

/// Max or average pooling of `x` (`[N, C, H, W]` view) as dense `[N, C, HO, WO]`: one launch.
pub(crate) fn pool2d<E: Element>(
    x: &CudaStorage<E>,
    xl: &Layout,
    op: PoolOp,
    p: &Pool2dParams,
) -> Result<CudaStorage<E>> {
    let src = &kernels::pool2d_forward::KERNEL;
    let e = entry::<E>(x.ordinal(), src)?;
    let d = xl.dims();
    let (ho, wo) = pool_out(d, p);
    let total = d[0] * d[1] * ho * wo;
    let out = CudaStorage::<E>::uninit(x.ordinal(), total)?;
    if total == 0 {
        return Ok(out);
    }
    // Modes 0 and 1 write no indices; any valid pointer stands in for them.
    let mut args = vec![
        Arg::Ptr(x.ptr_at(xl.offset())),
        Arg::Ptr(out.device_ptr()),
        Arg::Ptr(out.device_ptr()),
    ];
    args.extend(sizes(&pool_sizes(d, (ho, wo), p)));
    args.extend(sizes(xl.strides()));
    args.push(Arg::U32((op == PoolOp::Avg) as u32));
    // SAFETY: reads go through `x`'s own layout inside [N, C, H, W]; `out` holds `total`.
    unsafe { launch_entry(x.ordinal(), src, e, grid(total), &args)? };
    Ok(out)
}

/// The gradient of [`pool2d`] with respect to its input `x`, as dense `[N, C, H, W]`, from the
/// output gradient `g`: one gather launch, after one launch that finds each window's first
/// maximum for max pooling.
pub(crate) fn pool2d_backward<E: Element>(
    (g, gl): (&CudaStorage<E>, &Layout),
    (x, xl): (&CudaStorage<E>, &Layout),
    op: PoolOp,
    p: &Pool2dParams,
) -> Result<CudaStorage<E>> {
    let src = &kernels::pool2d_backward::KERNEL;
    let e = entry::<E>(x.ordinal(), src)?;
    let d = xl.dims();
    let (ho, wo) = pool_out(d, p);
    let numel: usize = d.iter().product();
    let windows = d[0] * d[1] * ho * wo;
    let dx = CudaStorage::<E>::uninit(x.ordinal(), numel)?;
    // A valid window always has an output, so there are windows whenever there is input.
    if numel == 0 || windows == 0 {
        return Ok(dx);
    }
    let (gd, goff) = dense_view(g, gl)?;
    // Average pooling reads no indices; any valid pointer stands in for them.
    let idx = match op {
        PoolOp::Max => {
            // The forward's mode 2: the windows' first maxima, no values (any valid pointer
            // stands in for them).
            let arg_src = &kernels::pool2d_forward::KERNEL;
            let arg_e = entry::<E>(x.ordinal(), arg_src)?;
            let idx = CudaStorage::<i64>::uninit(x.ordinal(), windows)?;
            let mut args = vec![
                Arg::Ptr(x.ptr_at(xl.offset())),
                Arg::Ptr(idx.device_ptr()),
                Arg::Ptr(idx.device_ptr()),
            ];
            args.extend(sizes(&pool_sizes(d, (ho, wo), p)));
            args.extend(sizes(xl.strides()));
            args.push(Arg::U32(2));
            // SAFETY: reads through `x`'s layout; `idx` holds one index per window.
            unsafe { launch_entry(x.ordinal(), arg_src, arg_e, grid(windows), &args)? };
            Some(idx)
        }
        PoolOp::Avg => None,
    };
    let idx_ptr = idx.as_ref().map_or(gd.ptr_at(goff), |i| i.device_ptr());
    let mut args = vec![
        Arg::Ptr(gd.ptr_at(goff)),
        Arg::Ptr(idx_ptr),
        Arg::Ptr(dx.device_ptr()),
    ];
    args.extend(sizes(&pool_sizes(d, (ho, wo), p)));
    args.push(Arg::U32((op == PoolOp::Avg) as u32));
    // SAFETY: `gd` holds the dense [N, C, HO, WO] gradient from `goff`, `idx` one index per
    // window (read only for max pooling), `dx` the N*C*H*W elements written, one per thread.
    unsafe { launch_entry(x.ordinal(), src, e, grid(numel), &args)? };
    drop(idx);
    Ok(dx)
}

/// The host logic above (argument lists, operand layouts, the cuBLAS reading of each operand)
/// run without a GPU: the native forms of the kernels and the CPU's batched product stand in
/// for the launches, on the same buffers and layouts, and the results are held to the CPU
/// backend's convolution and pooling.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::conv as reference;
    use crate::cpu::elementwise::map as gather;
    use crate::cpu::matmul::matmul as product;
    use crate::test_values::values;
    use cudarc::cublas::sys::cublasOperation_t as Op;
    use rtx_kernels::kernel::LaunchConfig as Native;

    /// `dense_view` on host memory: the buffer and the start of a contiguous view, or a copy.
    fn dense_host(v: &[f64], l: &Layout) -> (Vec<f64>, usize) {
        match l.contiguous_range() {
            Some(r) => (v.to_vec(), r.start),
            None => (gather(v, l, |x| x), 0),
        }
    }

    /// Checks that cuBLAS, given `blas::operand`'s reading of `l`, addresses exactly the
    /// elements `l` does (or that the product will make `l` dense first).
    fn check_operand(l: &Layout) {
        let (d, s) = (l.dims(), l.strides());
        let Some(o) = super::super::blas::operand(d, s) else {
            return;
        };
        let r = d.len();
        let batch: usize = d[..r - 2].iter().product();
        for b in 0..batch {
            let (mut rest, mut at) = (b, 0);
            for a in (0..r - 2).rev() {
                at += rest % d[a] * s[a];
                rest /= d[a];
            }
            for i in 0..d[r - 2] {
                for j in 0..d[r - 1] {
                    let want = at + i * s[r - 2] + j * s[r - 1];
                    let (i, j, ld) = (i as i64, j as i64, o.ld);
                    let inner = if o.op == Op::CUBLAS_OP_N {
                        i * ld + j
                    } else {
                        j * ld + i
                    };
                    let got = b as i64 * o.batch_stride + inner;
                    assert_eq!(got, want as i64, "{d:?} {s:?} read as {o:?}");
                }
            }
        }
    }

    fn mm(a: &[f64], la: &Layout, b: &[f64], lb: &Layout) -> Vec<f64> {
        check_operand(la);
        check_operand(lb);
        product(a, la, b, lb)
    }

    fn im2col_host(
        x: &[f64],
        xl: &Layout,
        geo: &Geometry,
        p: &Conv2dParams,
        arr: Columns,
    ) -> Vec<f64> {
        let a = im2col_sizes(geo, p, xl.strides(), arr);
        let mut col = vec![f64::NAN; geo.n * geo.c * geo.kh * geo.kw * geo.l()];
        kernels::im2col(
            Native::new(3, 64),
            &x[xl.offset()..],
            &mut col,
            a[0],
            a[1],
            a[2],
            a[3],
            a[4],
            a[5],
            a[6],
            a[7],
            a[8],
            a[9],
            a[10],
            a[11],
            a[12],
            a[13],
            a[14],
            a[15],
            a[16],
            a[17],
            a[18],
            a[19],
        )
        .unwrap();
        col
    }

    /// `conv2d` above, step for step, on the host.
    fn forward(x: &[f64], xl: &Layout, w: &[f64], wl: &Layout, p: &Conv2dParams) -> Vec<f64> {
        let geo = Geometry::new(xl.dims(), wl.dims(), p);
        let direct = pointwise(&geo, p) && xl.is_contiguous();
        let cols = if direct {
            x.to_vec()
        } else {
            im2col_host(x, xl, &geo, p, Columns::PerImage)
        };
        let (wd, woff) = dense_host(w, wl);
        let (w_layout, col_layout) = forward_operands(&geo, woff, direct.then_some(xl.offset()));
        mm(&wd, &w_layout, &cols, &col_layout)
    }

    /// `conv2d_backward_input` above, on the host.
    fn input_grad(
        g: &[f64],
        gl: &Layout,
        w: &[f64],
        wl: &Layout,
        x_dims: [usize; 4],
        p: &Conv2dParams,
    ) -> Vec<f64> {
        let geo = Geometry::new(&x_dims, wl.dims(), p);
        let (wd, woff) = dense_host(w, wl);
        let (gd, goff) = dense_host(g, gl);
        let (wt, gm) = input_grad_operands(&geo, woff, goff);
        let col = mm(&wd, &wt, &gd, &gm);
        if pointwise(&geo, p) {
            return col;
        }
        let a = col2im_sizes(&geo, p);
        let mut dx = vec![f64::NAN; x_dims.iter().product()];
        kernels::col2im(
            Native::new(2, 64),
            &col,
            &mut dx,
            a[0],
            a[1],
            a[2],
            a[3],
            a[4],
            a[5],
            a[6],
            a[7],
            a[8],
            a[9],
            a[10],
            a[11],
            a[12],
            a[13],
        )
        .unwrap();
        dx
    }

    /// `conv2d_backward_weight` above, on the host.
    fn weight_grad(
        g: &[f64],
        gl: &Layout,
        x: &[f64],
        xl: &Layout,
        w_dims: [usize; 4],
        p: &Conv2dParams,
    ) -> Vec<f64> {
        let geo = Geometry::new(xl.dims(), &w_dims, p);
        let (gd, goff) = dense_host(g, gl);
        let (gg, ggoff) = dense_host(&gd, &grad_per_group(&geo, goff));
        let col = im2col_host(x, xl, &geo, p, Columns::ImagesInRows);
        let (a, b) = weight_grad_operands(&geo, ggoff);
        mm(&gg, &a, &col, &b)
    }

    fn assert_close(what: &str, got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() < 1e-12, "{what}, element {i}: {g} vs {w}");
        }
    }

    /// A view of `dims` whose last two axes are stored swapped, starting at element `offset`.
    fn swapped(dims: [usize; 4], offset: usize) -> Layout {
        let [_, c, h, w] = dims;
        Layout::new(&dims, &[c * h * w, h * w, 1, h], offset)
    }

    #[test]
    fn the_gpu_conv_plan_matches_the_cpu_convolution() {
        let conv = |stride, padding, dilation, groups| Conv2dParams {
            stride,
            padding,
            dilation,
            groups,
        };
        // (input, weight, params, input layout kind): 0 dense, 1 swapped with an offset,
        // 2 a 1-d input lifted to height 1 with a stride-0 axis.
        let cases = [
            (
                [2, 4, 9, 7],
                [6, 2, 3, 3],
                conv([2, 2], [1, 1], [2, 2], 2),
                1,
            ),
            (
                [2, 3, 6, 5],
                [4, 3, 3, 3],
                conv([1, 1], [1, 1], [1, 1], 1),
                0,
            ),
            (
                [3, 5, 4, 4],
                [3, 5, 1, 1],
                conv([1, 1], [0, 0], [1, 1], 1),
                0,
            ),
            (
                [3, 5, 4, 4],
                [3, 5, 1, 1],
                conv([1, 1], [0, 0], [1, 1], 1),
                1,
            ),
            (
                [2, 4, 5, 5],
                [4, 1, 3, 3],
                conv([1, 1], [1, 1], [1, 1], 4),
                0,
            ),
            (
                [1, 6, 5, 6],
                [6, 2, 2, 3],
                conv([1, 2], [0, 1], [2, 1], 3),
                1,
            ),
            (
                [2, 3, 1, 11],
                [4, 3, 1, 3],
                conv([1, 2], [0, 1], [1, 1], 1),
                2,
            ),
        ];
        for (i, (xd, wd, p, kind)) in cases.into_iter().enumerate() {
            let xn: usize = xd.iter().product();
            let offset = if kind == 1 { 5 } else { 0 };
            let x = values(xn + offset, i as u64);
            let xl = match kind {
                1 => swapped(xd, offset),
                2 => Layout::new(&xd, &[xd[1] * xd[3], xd[3], 0, 1], 0),
                _ => Layout::contiguous(&xd),
            };
            let w = values(wd.iter().product(), 100 + i as u64);
            let wl = Layout::contiguous(&wd);
            let want = reference::conv2d((&x, &xl), (&w, &wl), None, &p);
            assert_close(
                &format!("case {i} forward"),
                &forward(&x, &xl, &w, &wl, &p),
                &want,
            );

            let ho = p.output_size(0, xd[2], wd[2]).unwrap();
            let wo = p.output_size(1, xd[3], wd[3]).unwrap();
            let gd = [xd[0], wd[0], ho, wo];
            let g = values(gd.iter().product::<usize>() + 3, 200 + i as u64);
            // The output gradient at an offset, and transposed in the odd cases.
            let gl = if i % 2 == 1 {
                swapped(gd, 3)
            } else {
                Layout::contiguous(&gd).with_offset(3)
            };
            let want = reference::conv2d_backward_input((&g, &gl), (&w, &wl), xd, &p);
            assert_close(
                &format!("case {i} input gradient"),
                &input_grad(&g, &gl, &w, &wl, xd, &p),
                &want,
            );
            let want = reference::conv2d_backward_weight((&g, &gl), (&x, &xl), wd, &p);
            assert_close(
                &format!("case {i} weight gradient"),
                &weight_grad(&g, &gl, &x, &xl, wd, &p),
                &want,
            );
        }
    }

    #[test]
    fn the_gpu_pool_plan_matches_the_cpu_pooling() {
        let p = Pool2dParams {
            kernel: [3, 2],
            stride: [2, 1],
            padding: [1, 1],
        };
        let d = [2, 3, 7, 6];
        let n: usize = d.iter().product();
        // Coarse values, so windows have ties.
        let x: Vec<f64> = values(n + 5, 7).iter().map(|v| (v * 3.0).round()).collect();
        let xl = swapped(d, 5);
        let (ho, wo) = pool_out(&d, &p);
        let a = pool_sizes(&d, (ho, wo), &p);
        let s = xl.strides();
        let launch = Native::new(2, 64);
        let windows = d[0] * d[1] * ho * wo;
        let g = values(windows, 8);
        let gl = Layout::contiguous(&[d[0], d[1], ho, wo]);
        for op in [PoolOp::Max, PoolOp::Avg] {
            let avg = (op == PoolOp::Avg) as u32;
            let mut out = vec![f64::NAN; windows];
            kernels::pool2d_forward(
                launch,
                &x[5..],
                &mut out,
                &mut [],
                a[0],
                a[1],
                a[2],
                a[3],
                a[4],
                a[5],
                a[6],
                a[7],
                a[8],
                a[9],
                a[10],
                a[11],
                s[0],
                s[1],
                s[2],
                s[3],
                avg,
            )
            .unwrap();
            assert_close("pool", &out, &reference::pool2d(&x, &xl, op, &p));
            let mut idx = vec![-2i64; windows];
            kernels::pool2d_forward(
                launch,
                &x[5..],
                &mut [],
                &mut idx,
                a[0],
                a[1],
                a[2],
                a[3],
                a[4],
                a[5],
                a[6],
                a[7],
                a[8],
                a[9],
                a[10],
                a[11],
                s[0],
                s[1],
                s[2],
                s[3],
                2,
            )
            .unwrap();
            let mut dx = vec![f64::NAN; n];
            kernels::pool2d_backward(
                launch, &g, &idx, &mut dx, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                a[9], a[10], a[11], avg,
            )
            .unwrap();
            let want = reference::pool2d_backward((&g, &gl), (&x, &xl), op, &p);
            assert_close("pool backward", &dx, &want);
        }
    }
}
