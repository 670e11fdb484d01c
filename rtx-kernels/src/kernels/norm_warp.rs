//! Layer norm and RMS norm of short rows, a warp per row and several rows per block: the
//! forward (output and row statistics) and the input gradient, for rows of at most 32 values
//! per lane (1024) held in registers. Longer rows stay correct (read in chunks) but belong to
//! the block-per-row kernels of `norm.rs`.
//!
//! Invariant: the numerics contract of [`norm_rows`](super::norm_rows()) (compute type,
//! one rounding on store, statistics kept in the compute type, sums in an order fixed by the
//! row length alone). Beyond it, a lane holds the same elements, reads them in the same order
//! and combines them as a thread of a 32-thread block of [`norm_rows`](super::norm_rows()) and
//! [`norm_backward_rows`](super::norm_backward_rows()) does (even the block kernels' final
//! `0 + warp sum`), so the results are theirs bit for bit with blocks of 32 threads, the
//! block size those kernels got for rows of at most 1024.

use super::norm::{norm_row, norm_row_backward};
use crate::Float;
use rtx_macros::kernel;

/// [`norm_rows`](super::norm_rows()) with a warp per row: normalizes each row of a dense
/// `[rows, cols]` matrix and writes `y` and, per row, `mean` (0 when not `centered`) and
/// `rstd`; `weight` and `bias` (`[cols]`) are read only when `has_weight` / `has_bias` are not
/// 0. Launch blocks of a multiple of 32 threads (warp `w` of block `b` takes row
/// `b * warps + w`; warps past the last row do nothing) and enough blocks to cover `rows`.
///
/// Lane `l` holds elements `l + 32 k` in registers, at most 32 of them, all its loads in
/// flight together, and keeps them for the mean, the variance and the write; the sums meet
/// through `warp_shuffle_xor`, with no shared memory or barrier, so many rows are in flight on
/// each SM. A longer row is walked in chunks of 32 values per lane, once per pass, every other
/// pass last chunk first, so the chunk still held from one pass is not read again by the next.
///
/// ```
/// use rtx_kernels::{kernels::norm_warp_rows, kernel::LaunchConfig};
/// let (mut y, mut mean, mut rstd) = (vec![0.0f64; 4], vec![0.0f64; 2], vec![0.0f64; 2]);
/// // Two rows, a warp each, in one block of two warps.
/// let x = [1.0, 3.0, 0.0, 4.0];
/// let launch = LaunchConfig::new(1, 64);
/// norm_warp_rows(launch, &x, &[], &[], &mut y, &mut mean, &mut rstd, 2, 2, 0.0, 1, 0, 0)
///     .unwrap();
/// assert_eq!((y, mean, rstd), (vec![-1.0, 1.0, -1.0, 1.0], vec![2.0, 2.0], vec![1.0, 0.5]));
/// ```
#[kernel(crate = crate)]
pub fn norm_warp_rows<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
    mean: &mut [T::Acc],
    rstd: &mut [T::Acc],
    cols: usize,
    rows: usize,
    eps: T,
    centered: u32,
    has_weight: u32,
    has_bias: u32,
) {
    // Declared for `norm_row`'s block form; a warp's sums meet through shuffles alone.
    #[shared]
    let red: [T; 32];
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // The whole warp leaves together, and no other warp waits for it.
    if row >= rows {
        return;
    }
    norm_row(
        x,
        weight,
        bias,
        y,
        mean,
        rstd,
        &mut red,
        row,
        cols,
        lane_id(),
        32,
        eps,
        centered,
        has_weight,
        has_bias,
        1,
    );
}

/// [`norm_backward_rows`](super::norm_backward_rows()) with a warp per row: the input
/// gradient of [`norm_warp_rows`](norm_warp_rows()) for each row of a dense `[rows, cols]`
/// matrix, from the output gradient `dy`, the input `x`, the weight and the saved `mean` (read
/// only when `centered`) and `rstd`: with `g = dy * weight` and `xhat = (x - mean) * rstd`,
/// `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))` (without the `mean(g)` term for RMS
/// norm). Launch as [`norm_warp_rows`](norm_warp_rows()). Lane `l` holds the `g` and `xhat` of
/// elements `l + 32 k`, at most 32 of each, from the sums to the write; a longer row is read
/// in chunks, and all but its last chunk a second time for the write (last chunk first).
///
/// ```
/// use rtx_kernels::{kernels::norm_backward_warp_rows, kernel::LaunchConfig};
/// // A constant output gradient moves nothing through a centered norm.
/// let mut dx = vec![1.0f64; 2];
/// let launch = LaunchConfig::new(1, 32);
/// let (dy, x) = ([1.0, 1.0], [1.0, 3.0]);
/// norm_backward_warp_rows(launch, &dy, &x, &[], &[2.0], &[1.0], &mut dx, 2, 1, 1, 0).unwrap();
/// assert_eq!(dx, vec![0.0, 0.0]);
/// ```
#[kernel(crate = crate)]
pub fn norm_backward_warp_rows<T: Float>(
    dy: &[T],
    x: &[T],
    weight: &[T],
    mean: &[T::Acc],
    rstd: &[T::Acc],
    dx: &mut [T],
    cols: usize,
    rows: usize,
    centered: u32,
    has_weight: u32,
) {
    #[shared]
    let red_g: [T; 32];
    #[shared]
    let red_gx: [T; 32];
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    if row >= rows {
        return;
    }
    norm_row_backward(
        dy,
        x,
        weight,
        mean,
        rstd,
        dx,
        &mut red_g,
        &mut red_gx,
        row,
        cols,
        lane_id(),
        32,
        centered,
        has_weight,
        1,
    );
}
