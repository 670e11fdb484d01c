//! Logsumexp of each row of a `[rows, cols]` matrix, one block per row: the row read once in
//! chunks of 32 values per thread, with a running maximum and sum of exponentials per thread,
//! then both reduced by warp shuffles and met in shared memory.
//!
//! Invariant: it computes the CPU backend's formula in the compute type,
//! `max + ln Σ exp(x - max)`, and the maximum itself when it is infinite.

use super::rows::*;
use crate::Float;
use rtx_macros::kernel;

/// `ln Σ exp(x)` of each row of a `[rows, cols]` matrix into `out[row]`, shifted by the row
/// maximum; a row whose maximum is infinite gives that maximum. One block per row, a block
/// size that is a multiple of 32, at most 256; the row is read once, in chunks of 32 values
/// per thread, as in [`softmax_rows`](super::softmax_rows()).
///
/// ```
/// use rtx_kernels::{kernels::logsumexp_rows, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 1];
/// logsumexp_rows(LaunchConfig::new(1, 32), &[0.0, 0.0], &mut out, 2).unwrap();
/// assert!((out[0] - std::f64::consts::LN_2).abs() < 1e-12);
/// ```
#[kernel(crate = crate)]
pub fn logsumexp_rows<T: Float>(x: &[T], out: &mut [T], cols: usize) {
    #[shared]
    let red: [T; 32];
    // The row is read once, in chunks of 32 values per thread.
    let mut v = [T::NEG_INFINITY; 32];
    let mut st = [0.0; 2];
    let at = block_idx_x() * cols + thread_idx_x();
    block_row_stats(x, &mut v, &mut st, &mut red, at, cols);
    if thread_idx_x() == 0 {
        let row_max = st[0];
        if row_max == T::INFINITY || row_max == T::NEG_INFINITY {
            out[block_idx_x()] = row_max;
        } else {
            out[block_idx_x()] = row_max + st[1].ln();
        }
    }
}
