//! Logsumexp of each row of a `[rows, cols]` matrix, one block per row: the row read once in
//! chunks of 32 values per thread, with a running maximum and sum of exponentials per thread,
//! then both reduced by warp shuffles and met in shared memory.
//!
//! Invariant: it computes the CPU backend's formula in the compute type,
//! `max + ln Σ exp(x - max)`, and the maximum itself when it is infinite.

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
    // The most values a thread holds at once, in registers.
    const HELD: usize = 32;
    #[shared]
    let red: [T; 32];
    let tid = thread_idx_x();
    let lane = lane_id();
    let warp = tid / 32;
    let bd = block_dim_x();
    let warps = (bd + 31) / 32;
    let base = block_idx_x() * cols;
    let at = base + tid;
    // The row is read once, in chunks of 32 values per thread.

    // Chunk by chunk, thread `tid` holds elements `start + tid + k * bd` as `v[k]` (the first
    // `mine` of them): each warp load reads neighbouring elements, and no load waits for
    // another. It keeps its running maximum `m` and `s = Σ exp(x - m)` over what it read.
    // Every loop over the held values stops after the thread's last one, so a short row
    // costs only the values it has.
    let mut v = [T::NEG_INFINITY; HELD];
    let mut m = T::NEG_INFINITY;
    let mut s = 0.0;
    let mut start = 0;
    while start < cols {
        let mine = if start + tid < cols {
            (cols - start - tid + bd - 1) / bd
        } else {
            0
        };
        let p = at + start;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            v[k] = x[p + k * bd];
        }
        let mut nm = m;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            nm = nm.max(v[k]);
        }
        // Nothing but negative infinities so far: nothing to add (and no `-inf - -inf`).
        if nm != T::NEG_INFINITY {
            s = s * (m - nm).exp();
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                s += (v[k] - nm).exp();
            }
        }
        m = nm;
        start += HELD * bd;
    }
    // The row maximum, then the sum of each thread's `s` rescaled to it.
    let mut mm = m;
    let mut off: u32 = 16;
    while off > 0 {
        mm = mm.max(warp_shuffle_down(mm, off));
        off /= 2;
    }
    if lane == 0 {
        red[warp] = mm;
    }
    sync_threads();
    if warp == 0 {
        let mut r = if lane < warps {
            red[lane]
        } else {
            T::NEG_INFINITY
        };
        let mut o: u32 = 16;
        while o > 0 {
            r = r.max(warp_shuffle_down(r, o));
            o /= 2;
        }
        if lane == 0 {
            red[0] = r;
        }
    }
    sync_threads();
    let row_max = red[0];
    sync_threads();

    let mut t = 0.0;
    if m != T::NEG_INFINITY {
        t = s * (m - row_max).exp();
    }
    let mut mask: u32 = 16;
    while mask > 0 {
        t += warp_shuffle_xor(t, mask);
        mask /= 2;
    }
    if lane == 0 {
        red[warp] = t;
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
