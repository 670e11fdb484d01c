//! Softmax, log-softmax and logsumexp of short rows, a warp per row and several rows per
//! block, for rows of at most 32 values per lane (1024) held in registers; longer rows stay
//! correct (read in chunks, then again for the write) but belong to the block-per-row kernels.
//!
//! Invariant: a lane holds the same elements, reads them in the same order and combines them
//! as a block of 32 threads of [`softmax_rows`](super::softmax_rows()),
//! [`log_softmax_rows`](super::log_softmax_rows()) and
//! [`logsumexp_rows`](super::logsumexp_rows()) does, so the results are theirs bit for bit;
//! the order depends on the row length alone.

use super::rows::*;
use crate::Float;
use rtx_macros::kernel;

/// Softmax (`mode` 0), log-softmax (`mode` 1) or logsumexp (`mode` 2, one value per row into
/// `out[row]`) of each row of a `[rows, cols]` matrix, a warp per row: launch blocks of a
/// multiple of 32 threads (warp `w` of block `b` takes row `b * warps + w`; warps past the
/// last row do nothing) and enough blocks to cover `rows`. Lane `l` holds elements
/// `l + 32 k` in registers, at most 32 of them, with all its loads in flight together; the
/// maximum and the sum meet through `warp_shuffle_xor`, with no shared memory or barrier, so
/// many rows are in flight on each SM. A longer row is read in chunks of 32 values per lane
/// with a running maximum and sum, then once more for the write.
///
/// ```
/// use rtx_kernels::{kernels::softmax_warp_rows, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 4];
/// softmax_warp_rows(LaunchConfig::new(1, 64), &[0.0, 0.0, 1.0, 1.0], &mut out, 2, 2, 0).unwrap();
/// assert_eq!(out, vec![0.5, 0.5, 0.5, 0.5]);
/// ```
#[kernel(crate = crate)]
pub fn softmax_warp_rows<T: Float>(x: &[T], out: &mut [T], cols: usize, rows: usize, mode: u32) {
    let lane = lane_id();
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // The whole warp leaves together, and no other warp waits for it.
    if row >= rows {
        return;
    }
    let at = row * cols + lane;

    // Lane `l` holds elements `l + 32 k` of each chunk, as a thread of a 32-thread block
    // does, with its running maximum and sum.
    let mut v = [T::NEG_INFINITY; 32];
    let mut ms = [0.0; 2];
    row_max_sum(x, &mut v, &mut ms, at, cols, lane, 32);
    let m = ms[0];
    // The row maximum in every lane, then the sum of each lane's sum rescaled to it (the
    // butterfly gives every lane the same sum, bit for bit).
    let row_max = warp_max_xor(m);
    let mut total = 0.0;
    if m != T::NEG_INFINITY {
        total = ms[1] * (m - row_max).exp();
    }
    let total = warp_sum_xor(total);
    if mode == 2 {
        if lane == 0 {
            if row_max == T::INFINITY || row_max == T::NEG_INFINITY {
                out[row] = row_max;
            } else {
                out[row] = row_max + total.ln();
            }
        }
        return;
    }
    let scale = if mode == 0 { 1.0 / total } else { total.ln() };
    row_softmax_write(x, out, &mut v, at, cols, lane, 32, row_max, scale, mode);
}
