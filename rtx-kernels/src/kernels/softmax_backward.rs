//! The input gradient of softmax and log-softmax along the last axis in one pass over each
//! row: `dx = y (g - Σ g y)` from the softmax output `y`, or `dx = g - exp(y) Σ g` from the
//! log-softmax output, with the output gradient `g`. A warp per row for short rows, a block
//! per row for long ones; the row held in registers when it fits.
//!
//! Invariant: the sum is the composition's (`Σ g y`, or `Σ g`) computed in the compute type in
//! an order fixed by the row length, the launch's mode and block size alone, and every output
//! is rounded to `T` once.

use crate::Float;
use rtx_macros::kernel;

/// The softmax (`is_log` 0) or log-softmax (`is_log` 1) input gradient of each row of `[rows,
/// cols]` matrices `y` (the forward's output) and `g` (its gradient), into `dx`.
///
/// With `warp_rows` 1, a warp takes a row: launch blocks of a multiple of 32 threads, warp
/// `w` of block `b` on row `b * warps + w` (warps past the last row do nothing), and the sum
/// meets through `warp_shuffle_xor` alone. With `warp_rows` 0, a block takes a row (launch
/// `rows` blocks of a multiple of 32 threads, at most 256: the held values take up to 71
/// registers a thread in f64), and the warps' sums meet in shared memory. A thread holds at
/// most 16 values of each input in registers: a row of at most 16 per thread is read once; a
/// longer one is read in chunks for the sum and again for the write.
///
/// ```
/// use rtx_kernels::{kernels::softmax_backward_rows, kernel::LaunchConfig};
/// let (y, g) = ([0.25f64, 0.75], [1.0, 3.0]);
/// let mut dx = vec![0.0; 2];
/// softmax_backward_rows(LaunchConfig::new(1, 32), &y, &g, &mut dx, 2, 1, 1, 0).unwrap();
/// // Σ g y = 2.5: dx = y (g - 2.5).
/// assert_eq!(dx, vec![-0.375, 0.375]);
/// ```
#[kernel(crate = crate)]
pub fn softmax_backward_rows<T: Float>(
    y: &[T],
    g: &[T],
    dx: &mut [T],
    cols: usize,
    rows: usize,
    warp_rows: u32,
    is_log: u32,
) {
    // The most values of each input a thread holds at once, in registers.
    const HELD: usize = 16;
    #[shared]
    let red: [T; 32];
    let tid = thread_idx_x();
    let lane = lane_id();
    let warp = tid / 32;
    let bd = block_dim_x();
    let warps = (bd + 31) / 32;
    // The row this thread works on, its index among the row's threads and their count.
    let mut row = block_idx_x();
    let mut t = tid;
    let mut n = bd;
    if warp_rows != 0 {
        row = block_idx_x() * warps + warp;
        t = lane;
        n = 32;
    }
    // A warp (or, by rows, a whole block) past the last row leaves; nothing waits for it.
    if row >= rows {
        return;
    }
    let at = row * cols + t;
    // The same for every thread of the row, so every barrier is reached by all of them.
    let held = cols <= HELD * n;

    // Chunk by chunk, the thread holds elements `start + t + k n` as `gv[k]` and `yv[k]` (the
    // first `mine` of them) and adds up its terms of the sum; each loop stops after its last.
    let mut gv = [T::NEG_INFINITY; HELD];
    let mut yv = [T::NEG_INFINITY; HELD];
    let mut s = 0.0;
    let mut start = 0;
    while start < cols {
        let mine = if start + t < cols {
            (cols - start - t + n - 1) / n
        } else {
            0
        };
        let p = at + start;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            gv[k] = g[p + k * n];
            yv[k] = y[p + k * n];
        }
        if is_log != 0 {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                s += gv[k];
            }
        } else {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                s += gv[k] * yv[k];
            }
        }
        start += HELD * n;
    }
    // The row's sum in every thread: a butterfly in each warp (every lane gets the same sum,
    // bit for bit), then, by blocks, the warps' sums in order.
    let mut mask: u32 = 16;
    while mask > 0 {
        s += warp_shuffle_xor(s, mask);
        mask /= 2;
    }
    let mut total = s;
    if warp_rows == 0 {
        if lane == 0 {
            red[warp] = s;
        }
        sync_threads();
        total = 0.0;
        for w in 0..warps {
            total += red[w];
        }
    }
    // A held row is written from registers; a longer one is read again, a chunk of loads
    // before a chunk of stores.
    let mut wstart = 0;
    if held {
        wstart = cols;
        let mine = if t < cols { (cols - t + n - 1) / n } else { 0 };
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            if is_log != 0 {
                dx[at + k * n] = gv[k] - yv[k].exp() * total;
            } else {
                dx[at + k * n] = yv[k] * (gv[k] - total);
            }
        }
    }
    while wstart < cols {
        let mine = if wstart + t < cols {
            (cols - wstart - t + n - 1) / n
        } else {
            0
        };
        let p = at + wstart;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            gv[k] = g[p + k * n];
            yv[k] = y[p + k * n];
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            if is_log != 0 {
                dx[p + k * n] = gv[k] - yv[k].exp() * total;
            } else {
                dx[p + k * n] = yv[k] * (gv[k] - total);
            }
        }
        wstart += HELD * n;
    }
}
