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
