//! Row kernels beside [`softmax_rows`](super::softmax_rows()): log-softmax, logsumexp and
//! variance of each row of a `[rows, cols]` matrix, one block per row, with the row's
//! statistics reduced by warp shuffles and met in shared memory.
//!
//! Invariant: each computes the CPU backend's formula in the compute type: log-softmax as
//! `(x - max) - ln Σ exp(x - max)`, logsumexp as `max + ln Σ exp(x - max)` (the maximum itself
//! when it is infinite), and the variance in two passes, divided by `cols - correction`.

use crate::Float;
use rtx_macros::kernel;

/// Log-softmax of each row of a `[rows, cols]` matrix: launch one block per row, with a block
/// size that is a multiple of 32 (at most 1024).
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
    let lane = lane_id();
    let warp = tid / 32;
    let warps = (block_dim_x() + 31) / 32;
    let base = block_idx_x() * cols;

    let mut m = T::NEG_INFINITY;
    for c in (tid..cols).step_by(block_dim_x()) {
        m = m.max(x[base + c]);
    }
    let mut off: u32 = 16;
    while off > 0 {
        m = m.max(warp_shuffle_down(m, off));
        off /= 2;
    }
    if lane == 0 {
        red[warp] = m;
    }
    sync_threads();
    if warp == 0 {
        let mut v = if lane < warps {
            red[lane]
        } else {
            T::NEG_INFINITY
        };
        let mut o: u32 = 16;
        while o > 0 {
            v = v.max(warp_shuffle_down(v, o));
            o /= 2;
        }
        if lane == 0 {
            red[0] = v;
        }
    }
    sync_threads();
    let row_max = red[0];
    sync_threads();

    let mut s = 0.0;
    for c in (tid..cols).step_by(block_dim_x()) {
        s += (x[base + c] - row_max).exp();
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
    let log_total = total.ln();
    for c in (tid..cols).step_by(block_dim_x()) {
        out[base + c] = (x[base + c] - row_max) - log_total;
    }
}

/// `ln Σ exp(x)` of each row of a `[rows, cols]` matrix into `out[row]`, shifted by the row
/// maximum; a row whose maximum is infinite gives that maximum. One block per row, a block
/// size that is a multiple of 32 (at most 1024).
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
    let tid = thread_idx_x();
    let lane = lane_id();
    let warp = tid / 32;
    let warps = (block_dim_x() + 31) / 32;
    let base = block_idx_x() * cols;

    let mut m = T::NEG_INFINITY;
    for c in (tid..cols).step_by(block_dim_x()) {
        m = m.max(x[base + c]);
    }
    let mut off: u32 = 16;
    while off > 0 {
        m = m.max(warp_shuffle_down(m, off));
        off /= 2;
    }
    if lane == 0 {
        red[warp] = m;
    }
    sync_threads();
    if warp == 0 {
        let mut v = if lane < warps {
            red[lane]
        } else {
            T::NEG_INFINITY
        };
        let mut o: u32 = 16;
        while o > 0 {
            v = v.max(warp_shuffle_down(v, o));
            o /= 2;
        }
        if lane == 0 {
            red[0] = v;
        }
    }
    sync_threads();
    let row_max = red[0];
    sync_threads();

    let mut s = 0.0;
    for c in (tid..cols).step_by(block_dim_x()) {
        s += (x[base + c] - row_max).exp();
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
    if tid == 0 {
        let mut total = 0.0;
        for w in 0..warps {
            total += red[w];
        }
        if row_max == T::INFINITY || row_max == T::NEG_INFINITY {
            out[block_idx_x()] = row_max;
        } else {
            out[block_idx_x()] = row_max + total.ln();
        }
    }
}

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
