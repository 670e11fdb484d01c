//! Argmax and argmin along one axis: the index of the first extreme, a NaN counting as the
//! extreme both ways (so the first NaN wins), as the CPU backend and PyTorch define them.
//!
//! Invariant: ties go to the smaller index at every step (each thread scans its elements in
//! increasing order, and partial results combine preferring the smaller index among equals),
//! so the result is exactly the CPU's for any block size.

use crate::Num;
use rtx_macros::kernel;

/// The index (`i64`) of the first maximum (`max != 0`) or minimum of each lane of a dense
/// `x` seen as `[outer, len, inner]` along the middle axis, into `out` (`[outer, inner]`).
/// One block per output, grid-striding over outputs; the block size is a multiple of 32, at
/// most 1024; `len` is at least 1.
///
/// ```
/// use rtx_kernels::{kernels::arg_reduce_axis, kernel::LaunchConfig};
/// let x = [1.0f32, 5.0, 5.0, f32::NAN, 2.0, 0.0];
/// let mut out = vec![0i64; 2];
/// arg_reduce_axis(LaunchConfig::new(2, 32), &x, &mut out, 2, 3, 1, 1).unwrap();
/// assert_eq!(out, vec![1, 0]);
/// arg_reduce_axis(LaunchConfig::new(2, 32), &x, &mut out, 2, 3, 1, 0).unwrap();
/// assert_eq!(out, vec![0, 0]);
/// ```
#[kernel(crate = crate)]
pub fn arg_reduce_axis<T: Num>(
    x: &[T],
    out: &mut [i64],
    outer: usize,
    len: usize,
    inner: usize,
    max: u32,
) {
    #[shared]
    let part_v: [T; 32];
    #[shared]
    let part_i: [i64; 32];
    let tid = thread_idx_x();
    let lane = lane_id();
    let warp = tid / 32;
    let warps = (block_dim_x() + 31) / 32;
    let rows = outer * inner;
    let mut row = block_idx_x();
    while row < rows {
        let base = (row / inner) * len * inner + row % inner;
        // This thread's first extreme among elements tid, tid + blockDim, ... (-1: none yet).
        let mut v = T::LOWEST;
        let mut at: i64 = -1;
        // Elements in increasing order, a later one replacing the held one only when
        // `arg_takes` says so; four loads in flight before their four comparisons, since a
        // long row read a load at a time waits on each (a vocabulary's logits at decoding).
        let bd = block_dim_x();
        let mut k = tid;
        while k + 3 * bd < len {
            let x0 = x[base + k * inner];
            let x1 = x[base + (k + bd) * inner];
            let x2 = x[base + (k + 2 * bd) * inner];
            let x3 = x[base + (k + 3 * bd) * inner];
            if arg_takes(v, at, x0, k as i64, max) {
                v = x0;
                at = k as i64;
            }
            if arg_takes(v, at, x1, (k + bd) as i64, max) {
                v = x1;
                at = (k + bd) as i64;
            }
            if arg_takes(v, at, x2, (k + 2 * bd) as i64, max) {
                v = x2;
                at = (k + 2 * bd) as i64;
            }
            if arg_takes(v, at, x3, (k + 3 * bd) as i64, max) {
                v = x3;
                at = (k + 3 * bd) as i64;
            }
            k += 4 * bd;
        }
        while k < len {
            let xk = x[base + k * inner];
            if arg_takes(v, at, xk, k as i64, max) {
                v = xk;
                at = k as i64;
            }
            k += bd;
        }
        // Combine (value, index) pairs within each warp, then the warps' in warp 0.
        let mut off: u32 = 16;
        while off > 0 {
            let ov = warp_shuffle_down(v, off);
            let oi = warp_shuffle_down(at, off);
            if arg_takes(v, at, ov, oi, max) {
                v = ov;
                at = oi;
            }
            off /= 2;
        }
        if lane == 0 {
            part_v[warp] = v;
            part_i[warp] = at;
        }
        sync_threads();
        if warp == 0 {
            v = T::LOWEST;
            at = -1;
            if lane < warps {
                v = part_v[lane];
                at = part_i[lane];
            }
            let mut o2: u32 = 16;
            while o2 > 0 {
                let ov = warp_shuffle_down(v, o2);
                let oi = warp_shuffle_down(at, o2);
                if arg_takes(v, at, ov, oi, max) {
                    v = ov;
                    at = oi;
                }
                o2 /= 2;
            }
            if lane == 0 {
                out[row] = at;
            }
        }
        // The partials are reused by the next row.
        sync_threads();
        row += grid_dim_x();
    }
}

/// Whether the pair `(ov, oi)` of another lane replaces this lane's `(v, at)` when argmax
/// (`max != 0`) or argmin pairs combine: an index below 0 is no pair, the better value wins, a
/// NaN counting as the extreme both ways, and equal values (or two NaNs) keep the smaller
/// index.
#[kernel(device, crate = crate)]
pub fn arg_takes<T: Num>(v: T, at: i64, ov: T, oi: i64, max: u32) -> bool {
    if oi < 0 {
        false
    } else if at < 0 {
        true
    } else if v != v {
        ov != ov && oi < at
    } else if ov != ov {
        true
    } else if ov == v {
        oi < at
    } else if max != 0 {
        ov > v
    } else {
        ov < v
    }
}
