//! Gather and scatter along one axis (PyTorch's `gather`, `scatter`, `scatter_add`), reading
//! every operand through its own offset and strides, so views need no copy first.
//!
//! Invariant: the kernels trust their indices; the launcher checks every index against the
//! axis size before launching, so a bad index is an error naming it, never an out-of-bounds
//! access. Scatters give one thread a whole *line* (the index positions that differ only along
//! the axis) and walk it in order, so a repeated index keeps the last write in logical order
//! and sums always add in the same order: results are the CPU backend's, bit for bit, with no
//! atomics. The cost is parallelism: there are `index.numel() / len` threads, each doing `len`
//! dependent steps, which is slow when the scattered axis is long and the others are short.
//!
//! `KernelShape` and `KernelStrides` in the signatures are the kernel language's layout
//! parameters (`rtx_kernels::kernel::{KernelShape, KernelStrides}` natively).

use crate::{Element, Num};
use rtx_macros::kernel;

/// `out[p] = x[p with axis replaced by idx[p]]` for every position `p` of `shape` (the
/// index's sizes; `out` is dense in them), with `x` and `idx` read at their offsets and
/// strides (rank `shape.rank()`). Any grid works.
///
/// ```
/// use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
/// use rtx_kernels::kernels::gather_strided;
/// // x = [[1, 2, 3], [4, 5, 6]] gathered along axis 1 by [[2, 0], [1, 1]].
/// let x = [1i32, 2, 3, 4, 5, 6];
/// let idx = [2i64, 0, 1, 1];
/// let shape = KernelShape::new(&[2, 2]).unwrap();
/// let (xs, is) = (KernelStrides::new(0, &[3, 1]).unwrap(), KernelStrides::new(0, &[2, 1]).unwrap());
/// let mut out = vec![0i32; 4];
/// gather_strided(LaunchConfig::new(1, 32), &x, xs, &idx, is, &mut out, shape, 1, 4).unwrap();
/// assert_eq!(out, vec![3, 1, 5, 5]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn gather_strided<T: Element>(
    x: &[T],
    xs: KernelStrides,
    idx: &[i64],
    is: KernelStrides,
    out: &mut [T],
    shape: KernelShape,
    axis: usize,
    n: usize,
) {
    let rank = shape.rank();
    let step = block_dim_x() * grid_dim_x();
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < n {
        let mut rem = p;
        let mut xo = xs.offset();
        let mut io = is.offset();
        for j in 0..rank {
            let d = rank - 1 - j;
            let c = rem % shape.dim(d);
            rem /= shape.dim(d);
            io += c * is.stride(d);
            if d != axis {
                xo += c * xs.stride(d);
            }
        }
        out[p] = x[xo + (idx[io] as usize) * xs.stride(axis)];
        p += step;
    }
}

/// `out[q with axis replaced by idx[q]] = src[q]` for every position `q` of `shape` (the
/// index's sizes), in place on a dense `out` of strides `os`; `idx` and `src` are read at their
/// offsets and strides. One thread per line (positions differing only along `axis`), walked in
/// order, so the last write in logical order wins; `lines` is `shape`'s element count divided
/// by its size along `axis`. Any grid works.
///
/// ```
/// use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
/// use rtx_kernels::kernels::scatter_lines;
/// // Scatter [7, 8, 9] into a length-3 vector at [2, 0, 2]: the later write to 2 wins.
/// let mut out = vec![0i32; 3];
/// let st = KernelStrides::new(0, &[1]).unwrap();
/// let shape = KernelShape::new(&[3]).unwrap();
/// scatter_lines(LaunchConfig::new(1, 32), &mut out, st, &[2, 0, 2], st, &[7, 8, 9], st, shape, 0, 1).unwrap();
/// assert_eq!(out, vec![8, 0, 9]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn scatter_lines<T: Element>(
    out: &mut [T],
    os: KernelStrides,
    idx: &[i64],
    is: KernelStrides,
    src: &[T],
    ss: KernelStrides,
    shape: KernelShape,
    axis: usize,
    lines: usize,
) {
    let rank = shape.rank();
    let len = shape.dim(axis);
    let step = block_dim_x() * grid_dim_x();
    let mut line = block_idx_x() * block_dim_x() + thread_idx_x();
    while line < lines {
        let mut rem = line;
        let mut oo = os.offset();
        let mut io = is.offset();
        let mut so = ss.offset();
        for j in 0..rank {
            let d = rank - 1 - j;
            if d != axis {
                let c = rem % shape.dim(d);
                rem /= shape.dim(d);
                oo += c * os.stride(d);
                io += c * is.stride(d);
                so += c * ss.stride(d);
            }
        }
        for k in 0..len {
            let at = oo + (idx[io + k * is.stride(axis)] as usize) * os.stride(axis);
            out[at] = src[so + k * ss.stride(axis)];
        }
        line += step;
    }
}

/// [`scatter_lines`](scatter_lines()) adding instead of writing: `out[..] = out[..] + src[q]`,
/// each output element summed by one thread in index order, so a float result is the same on
/// every run and equals the CPU backend's. Thread `t` takes line `t % lines` and, of the rows
/// along `axis`, those with `row % parts == t / lines`, so a few long lines still spread over
/// many threads. An index outside `0..size` (possible only inside a captured CUDA graph,
/// whose launcher cannot check on the host) is skipped. Every thread reads every index of its
/// line, so when all lines share one index vector (`index_add`, an embedding's gradient) the
/// CUDA backend sorts that vector once instead and sums with
/// [`scatter_add_sorted`](crate::kernels::scatter_add_sorted()).
///
/// ```
/// use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
/// use rtx_kernels::kernels::scatter_add_lines;
/// let mut out = vec![0.0f32; 3];
/// let st = KernelStrides::new(0, &[1]).unwrap();
/// let shape = KernelShape::new(&[4]).unwrap();
/// let (src, idx) = ([1.0, 2.0, 3.0, 4.0], [0, 2, 0, 0]);
/// scatter_add_lines(LaunchConfig::new(1, 32), &mut out, st, &idx, st, &src, st, shape, 0, 1, 3, 2)
///     .unwrap();
/// assert_eq!(out, vec![8.0, 0.0, 2.0]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn scatter_add_lines<T: Num>(
    out: &mut [T],
    os: KernelStrides,
    idx: &[i64],
    is: KernelStrides,
    src: &[T],
    ss: KernelStrides,
    shape: KernelShape,
    axis: usize,
    lines: usize,
    size: usize,
    parts: usize,
) {
    let rank = shape.rank();
    let len = shape.dim(axis);
    let step = block_dim_x() * grid_dim_x();
    let mut t = block_idx_x() * block_dim_x() + thread_idx_x();
    while t < lines * parts {
        let line = t % lines;
        let part = t / lines;
        let mut rem = line;
        let mut oo = os.offset();
        let mut io = is.offset();
        let mut so = ss.offset();
        for j in 0..rank {
            let d = rank - 1 - j;
            if d != axis {
                let c = rem % shape.dim(d);
                rem /= shape.dim(d);
                oo += c * os.stride(d);
                io += c * is.stride(d);
                so += c * ss.stride(d);
            }
        }
        for k in 0..len {
            let r = idx[io + k * is.stride(axis)];
            if r >= 0 && (r as usize) < size && (r as usize) % parts == part {
                let at = oo + (r as usize) * os.stride(axis);
                out[at] = out[at] + src[so + k * ss.stride(axis)];
            }
        }
        t += step;
    }
}
