//! The variance of each row of a `[rows, cols]` matrix, one block per row, with the row's
//! sums reduced by warp shuffles and met in shared memory.
//!
//! Invariant: it computes the CPU backend's formula in the compute type: the mean, then the
//! sum of squared deviations divided by `cols - correction`.

use crate::Float;
use rtx_macros::kernel;

/// The variance of each row of a `[rows, cols]` matrix into `out[row]`: the mean, then the
/// sum of squared deviations divided by `cols - correction` (zero when `correction` exceeds
/// `cols`); its square root when `root` is not 0. One block per row, a block size that is a
/// multiple of 32 (at most 1024).
///
/// ```
/// use rtx_kernels::{kernels::var_rows, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 1];
/// var_rows(LaunchConfig::new(1, 64), &[1.0, 2.0, 3.0, 4.0], &mut out, 4, 1, 0).unwrap();
/// assert!((out[0] - 5.0 / 3.0).abs() < 1e-12);
/// ```
#[kernel(crate = crate)]
pub fn var_rows<T: Float>(x: &[T], out: &mut [T], cols: usize, correction: usize, root: u32) {
    #[shared]
    let red: [T; 32];
    let tid = thread_idx_x();
    let lane = lane_id();
    let warp = tid / 32;
    let warps = (block_dim_x() + 31) / 32;
    let base = block_idx_x() * cols;

    let mut s = 0.0;
    for c in (tid..cols).step_by(block_dim_x()) {
        s += x[base + c];
    }
    let mut mask: u32 = 16;
    while mask > 0 {
        s += warp_shuffle_xor(s, mask);
        mask /= 2;
    }
    if lane == 0 {
        red[warp] = s;
    }
    sync_threads();
    let mut total = 0.0;
    for w in 0..warps {
        total += red[w];
    }
    let mean = total / (cols as T);
    sync_threads();

    let mut q = 0.0;
    for c in (tid..cols).step_by(block_dim_x()) {
        let d = x[base + c] - mean;
        q += d * d;
    }
    let mut m2: u32 = 16;
    while m2 > 0 {
        q += warp_shuffle_xor(q, m2);
        m2 /= 2;
    }
    if lane == 0 {
        red[warp] = q;
    }
    sync_threads();
    if tid == 0 {
        let mut sq = 0.0;
        for w in 0..warps {
            sq += red[w];
        }
        let mut divisor = 0.0;
        if cols > correction {
            divisor = (cols - correction) as T;
        }
        let v = sq / divisor;
        if root != 0 {
            out[block_idx_x()] = v.sqrt();
        } else {
            out[block_idx_x()] = v;
        }
    }
}
