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
