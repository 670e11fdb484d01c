//! Log-softmax of each row of a `[rows, cols]` matrix, one block per row, the row held in
//! registers when it fits (at most 32 values per thread) and read in chunks otherwise, as
//! [`softmax_rows`](super::softmax_rows()) does.
//!
//! Invariant: it computes the CPU backend's formula in the compute type,
//! `(x - max) - ln Σ exp(x - max)`, summing in an order fixed by the sizes and the block size.

use super::rows::*;
use crate::Float;
use rtx_macros::kernel;

/// Log-softmax of each row of a `[rows, cols]` matrix: launch one block per row, with a block
/// size that is a multiple of 32, at most 256. A row of at most 32 values per thread is read
/// from memory once and held in registers, a longer one read twice, as in
/// [`softmax_rows`](super::softmax_rows()).
///
/// ```
/// use rtx_kernels::{kernels::log_softmax_rows, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 2];
/// log_softmax_rows(LaunchConfig::new(1, 32), &[1.0, 1.0], &mut out, 2).unwrap();
/// assert!((out[0] + std::f64::consts::LN_2).abs() < 1e-12);
/// ```
#[kernel(crate = crate)]
pub fn log_softmax_rows<T: Float>(x: &[T], out: &mut [T], cols: usize) {
    #[shared]
    let red: [T; 32];
    let tid = thread_idx_x();
    let bd = block_dim_x();
    let at = block_idx_x() * cols + tid;
    let mut v = [T::NEG_INFINITY; 32];
    let mut st = [0.0; 2];
    block_row_stats(x, &mut v, &mut st, &mut red, at, cols);
    row_softmax_write(x, out, &mut v, at, cols, tid, bd, st[0], st[1].ln(), 1);
}
