//! Softmax of each row of a `[rows, cols]` matrix, one block per row, with the row held in
//! registers when it fits (at most 32 values per thread) and read in chunks otherwise.
//!
//! Invariant: it computes the CPU backend's formula in the compute type,
//! `exp(x - max) / Σ exp(x - max)`; each thread's partial sum, kept against its own running
//! maximum, is rescaled to the row maximum before the block sums them, in an order fixed by
//! the sizes and the block size alone.

use super::rows::*;
use crate::Float;
use rtx_macros::kernel;

/// Softmax of each row of a `[rows, cols]` matrix: launch one block per row, with a block
/// size that is a multiple of 32, at most 256 (the held values take up to 142 registers a
/// thread in f64, and a block must fit the SM's 64K registers). A row of at most 32 values
/// per thread (`cols <= 32 * block`) is read from memory once: each thread loads its values
/// into registers, all loads in flight together, and keeps them for the maximum, the sum and
/// the write. A longer row is read twice: in chunks of 32 values per thread with a running
/// maximum and sum, then for the write. The row maximum is reduced with `warp_shuffle_down`,
/// the sum with `warp_shuffle_xor`, and warps meet in shared memory.
///
/// ```
/// use rtx_kernels::{kernels::softmax_rows, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 2];
/// softmax_rows(LaunchConfig::new(1, 32), &[0.0, 0.0], &mut out, 2).unwrap();
/// assert_eq!(out, vec![0.5, 0.5]);
/// ```
// ANCHOR: softmax_rows
#[kernel(crate = crate)]
pub fn softmax_rows<T: Float>(x: &[T], out: &mut [T], cols: usize) {
    #[shared]
    let red: [T; 32];
    let tid = thread_idx_x();
    let bd = block_dim_x();
    let at = block_idx_x() * cols + tid;
    // A row of at most 32 values per thread is held in registers (`v`) from its one read to
    // the write; a longer one is read in chunks of 32 per thread, then once more for the
    // write. Which one is the same for the whole block, so every barrier is reached by all.
    let mut v = [T::NEG_INFINITY; 32];
    let mut st = [0.0; 2];
    block_row_stats(x, &mut v, &mut st, &mut red, at, cols);
    // One division per thread; each element is then scaled by the reciprocal.
    row_softmax_write(x, out, &mut v, at, cols, tid, bd, st[0], 1.0 / st[1], 0);
}
// ANCHOR_END: softmax_rows
