//! Indexing kernels: slices of one axis picked by an `i64` index buffer (`index_select`, the
//! embedding lookup), one thread per output element in a grid-stride loop, in every element
//! type. (Gather and scatter are in `gather.rs`.)
//!
//! Invariant: the launcher checks every index against the axis size first, so a bad index is
//! an error naming it; inside a captured CUDA graph, where it cannot, the kernel clamps the
//! index into the axis, so it never reads out of bounds.

use crate::Element;
use rtx_macros::kernel;

/// `out[o, j, i] = x[o, idx[j], i]` for a dense `x` of `[outer, size, inner]` and a dense
/// `idx` of `d` entries, each in `0..size`; `out` is `[outer, d, inner]`. Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::index_select_axis, kernel::LaunchConfig};
/// // Rows 2 and 0 of a 3 x 2 matrix.
/// let mut out = vec![0.0f32; 4];
/// let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
/// index_select_axis(LaunchConfig::new(1, 32), &x, &[2, 0], &mut out, 1, 3, 2, 2).unwrap();
/// assert_eq!(out, vec![5.0, 6.0, 1.0, 2.0]);
/// ```
#[kernel(crate = crate)]
pub fn index_select_axis<T: Element>(
    x: &[T],
    idx: &[i64],
    out: &mut [T],
    outer: usize,
    size: usize,
    d: usize,
    inner: usize,
) {
    let n = outer * d * inner;
    let step = block_dim_x() * grid_dim_x();
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < n {
        let i = p % inner;
        let row = p / inner;
        let j = row % d;
        let o = row / d;
        // Clamped: a captured graph's launcher cannot check its indices on the host.
        let k = idx[j];
        let k = if k < 0 {
            0
        } else if k as usize >= size {
            size - 1
        } else {
            k as usize
        };
        out[p] = x[(o * size + k) * inner + i];
        p += step;
    }
}
