//! Joining and masking copies: one part of a concatenation written into its slot of the
//! output, and the triangular masks behind `tril`/`triu`. Both read their input through its
//! offset and strides (`KernelStrides`, the kernel language's layout parameter), so views need
//! no copy first, and write a dense output.
//!
//! Invariant: every output element is written exactly once per launch (concatenation: once
//! per part, each part owning a disjoint slot), so no launch reads what another thread writes.

use crate::Element;
use rtx_macros::kernel;

/// Copies a part of sizes `shape` (read at `ps`) into the dense output of a concatenation
/// along `axis`, whose size along `axis` is `total`; the part starts at `start` along it.
/// Any grid works.
///
/// ```
/// use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
/// use rtx_kernels::kernels::concat_into;
/// // [[1], [2]] into column 1 of a 2 x 2 output.
/// let mut out = vec![0u8; 4];
/// let shape = KernelShape::new(&[2, 1]).unwrap();
/// let ps = KernelStrides::new(0, &[1, 1]).unwrap();
/// concat_into(LaunchConfig::new(1, 32), &[1, 2], ps, &mut out, shape, 1, 1, 2, 2).unwrap();
/// assert_eq!(out, vec![0, 1, 0, 2]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn concat_into<T: Element>(
    part: &[T],
    ps: KernelStrides,
    out: &mut [T],
    shape: KernelShape,
    axis: usize,
    start: usize,
    total: usize,
    n: usize,
) {
    let rank = shape.rank();
    let step = block_dim_x() * grid_dim_x();
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < n {
        let mut rem = p;
        let mut src = ps.offset();
        let mut dst = 0;
        let mut dst_stride = 1;
        for j in 0..rank {
            let d = rank - 1 - j;
            let c = rem % shape.dim(d);
            rem /= shape.dim(d);
            src += c * ps.stride(d);
            if d == axis {
                dst += (start + c) * dst_stride;
                dst_stride *= total;
            } else {
                dst += c * dst_stride;
                dst_stride *= shape.dim(d);
            }
        }
        out[dst] = part[src];
        p += step;
    }
}

/// [`concat_into`](concat_into()) for a part of fewer than 2^31 elements, with 32-bit index
/// arithmetic (a 64-bit division is a long emulated sequence on GPUs) and several elements
/// per thread. When the innermost axis has at least 32 elements, each warp copies a segment
/// of one row of it, up to 256 elements, lane `l` taking elements `l`, `l + 32`, ... (every
/// load and store is one warp-wide contiguous access), so the row's position is worked out
/// once per segment; a shorter innermost axis takes one element per thread. Same arguments
/// as `concat_into`; the block size is a multiple of 32, and any grid works.
///
/// ```
/// use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
/// use rtx_kernels::kernels::concat_rows_into;
/// // A 2 x 40 part, read transposed from 40 x 2 storage, into columns 1..41 of a 2 x 41
/// // output.
/// let part: Vec<i32> = (0..80).collect();
/// let mut out = vec![-1i32; 2 * 41];
/// let shape = KernelShape::new(&[2, 40]).unwrap();
/// let ps = KernelStrides::new(0, &[1, 2]).unwrap();
/// concat_rows_into(LaunchConfig::new(1, 64), &part, ps, &mut out, shape, 1, 1, 41, 80).unwrap();
/// assert_eq!((out[0], out[1], out[2], out[40]), (-1, 0, 2, 78));
/// assert_eq!((out[41], out[42], out[81]), (-1, 1, 79));
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn concat_rows_into<T: Element>(
    part: &[T],
    ps: KernelStrides,
    out: &mut [T],
    shape: KernelShape,
    axis: usize,
    start: usize,
    total: usize,
    n: usize,
) {
    const W: u32 = 8;
    let rank = shape.rank();
    let last = rank - 1;
    let inner = shape.dim(last) as u32;
    let istride = ps.stride(last);
    // The output's stride of the part's second-to-last axis, and where the part's slot of
    // the innermost axis starts.
    let row_stride = if axis == last { total } else { shape.dim(last) };
    let slot = if axis == last { start } else { 0 };
    let thread = (block_idx_x() * block_dim_x() + thread_idx_x()) as u32;
    let threads = (block_dim_x() * grid_dim_x()) as u32;
    if inner >= 32 {
        let w = ((inner + 31) / 32).min(W);
        let seg = 32 * w;
        let segs = (inner + seg - 1) / seg;
        let units = (n as u32) / inner * segs;
        let lane = lane_id() as u32;
        let mut q = thread / 32;
        while q < units {
            let row = q / segs;
            let c0 = (q - row * segs) * seg + lane;
            let mut rem = row;
            let mut src = ps.offset();
            let mut dst = slot;
            let mut stride = row_stride;
            for j in 1..rank {
                let d = last - j;
                let dim = shape.dim(d) as u32;
                let c = rem % dim;
                rem /= dim;
                src += (c as usize) * ps.stride(d);
                if d == axis {
                    dst += (start + c as usize) * stride;
                    stride *= total;
                } else {
                    dst += (c as usize) * stride;
                    stride *= dim as usize;
                }
            }
            for j in 0..W {
                let c = c0 + 32 * j;
                if j < w && c < inner {
                    out[dst + c as usize] = part[src + (c as usize) * istride];
                }
            }
            q += threads / 32;
        }
    } else {
        let mut p = thread;
        while p < n as u32 {
            let mut rem = p;
            let mut src = ps.offset();
            let mut dst = 0;
            let mut stride = 1;
            for j in 0..rank {
                let d = last - j;
                let dim = shape.dim(d) as u32;
                let c = rem % dim;
                rem /= dim;
                src += (c as usize) * ps.stride(d);
                if d == axis {
                    dst += (start + c as usize) * stride;
                    stride *= total;
                } else {
                    dst += (c as usize) * stride;
                    stride *= dim as usize;
                }
            }
            out[dst] = part[src];
            p += threads;
        }
    }
}

/// The elements of `x` (sizes `shape`, read at `xs`, rank 2 or more) on and below diagonal
/// `k` of the last two axes (`upper == 0`), or on and above it (`upper != 0`), and zero
/// (`false` for bool) elsewhere, into a dense `out` of `n` elements. Any grid works.
///
/// ```
/// use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
/// use rtx_kernels::kernels::triangle;
/// let x = [1i64, 2, 3, 4, 5, 6];
/// let shape = KernelShape::new(&[2, 3]).unwrap();
/// let xs = KernelStrides::new(0, &[3, 1]).unwrap();
/// let mut out = vec![0i64; 6];
/// triangle(LaunchConfig::new(1, 32), &x, xs, &mut out, shape, 0, 0, 6).unwrap();
/// assert_eq!(out, vec![1, 0, 0, 4, 5, 0]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn triangle<T: Element>(
    x: &[T],
    xs: KernelStrides,
    out: &mut [T],
    shape: KernelShape,
    k: i64,
    upper: u32,
    n: usize,
) {
    let rank = shape.rank();
    let cols = shape.dim(rank - 1);
    let rows = shape.dim(rank - 2);
    let step = block_dim_x() * grid_dim_x();
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < n {
        let mut rem = p;
        let mut src = xs.offset();
        for j in 0..rank {
            let d = rank - 1 - j;
            src += (rem % shape.dim(d)) * xs.stride(d);
            rem /= shape.dim(d);
        }
        let diff = (p % cols) as i64 - ((p / cols) % rows) as i64;
        let keep = if upper != 0 { diff >= k } else { diff <= k };
        out[p] = if keep { x[src] } else { 0.0 };
        p += step;
    }
}
