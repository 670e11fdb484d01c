//! General SIMT kernels: thread and block indices, shared memory, barriers, warp shuffles and
//! atomics, run natively by the block emulation.

use crate::Float;
use rtx_macros::kernel;

/// `y = a x + y` over the first `n` elements, one thread per element.
///
/// ```
/// use rtx_kernels::{kernels::axpy, kernel::LaunchConfig};
/// let mut y = vec![1.0f32; 5];
/// axpy(LaunchConfig::new(2, 4), 2.0, &[1.0, 2.0, 3.0, 4.0, 5.0], &mut y, 5).unwrap();
/// assert_eq!(y, vec![3.0, 5.0, 7.0, 9.0, 11.0]);
/// ```
#[kernel(crate = crate)]
pub fn axpy<T: Float>(a: T, x: &[T], y: &mut [T], n: usize) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}

/// Softmax of each row of a `[rows, cols]` matrix: launch one block per row, with a block
/// size that is a multiple of 32 (at most 1024). The row maximum is reduced with
/// `warp_shuffle_down`, the sum with `warp_shuffle_xor`, and warps meet in shared memory.
///
/// ```
/// use rtx_kernels::{kernels::softmax_rows, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 2];
/// softmax_rows(LaunchConfig::new(1, 32), &[0.0, 0.0], &mut out, 2).unwrap();
/// assert_eq!(out, vec![0.5, 0.5]);
/// ```
#[kernel(crate = crate)]
pub fn softmax_rows<T: Float>(x: &[T], out: &mut [T], cols: usize) {
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
    for c in (tid..cols).step_by(block_dim_x()) {
        out[base + c] = (x[base + c] - row_max).exp() / total;
    }
}

/// Dot product of the first `n` elements, accumulated into `out[0]`: a grid-stride loop, a
/// tree reduction in shared memory (block size a power of two, at most 256), and one
/// `atomic_add` per block.
///
/// ```
/// use rtx_kernels::{kernels::dot, kernel::LaunchConfig};
/// let mut out = vec![0.0f32];
/// dot(LaunchConfig::new(2, 8), &[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], &mut out, 3).unwrap();
/// assert_eq!(out[0], 32.0);
/// ```
#[kernel(crate = crate)]
pub fn dot<T: Float>(x: &[T], y: &[T], out: &mut [T], n: usize) {
    #[shared]
    let part: [T; 256];
    let tid = thread_idx_x();
    let mut acc = 0.0;
    let mut i = block_idx_x() * block_dim_x() + tid;
    while i < n {
        acc += x[i] * y[i];
        i += block_dim_x() * grid_dim_x();
    }
    part[tid] = acc;
    sync_threads();
    let mut s = block_dim_x() / 2;
    while s > 0 {
        if tid < s {
            part[tid] += part[tid + s];
        }
        sync_threads();
        s /= 2;
    }
    if tid == 0 {
        atomic_add(&mut out[0], part[0]);
    }
}
