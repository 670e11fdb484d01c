//! Softmax of each row of a `[rows, cols]` matrix, one block per row, with the row held in
//! registers when it fits (at most 32 values per thread) and read in chunks otherwise.
//!
//! Invariant: it computes the CPU backend's formula in the compute type,
//! `exp(x - max) / Σ exp(x - max)`; each thread's partial sum, kept against its own running
//! maximum, is rescaled to the row maximum before the block sums them, in an order fixed by
//! the sizes and the block size alone.

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
#[kernel(crate = crate)]
pub fn softmax_rows<T: Float>(x: &[T], out: &mut [T], cols: usize) {
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
    // A row of at most 32 values per thread is held in registers from its one read to the
    // write; a longer one is read in chunks of 32 per thread, then once more for the write.
    // `held` is the same for the whole block, so every barrier is reached by all its threads.
    let held = cols <= HELD * bd;

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
    let mut total = 0.0;
    for w in 0..warps {
        total += red[w];
    }
    // One division per thread; each element is then scaled by the reciprocal.
    let inv = 1.0 / total;
    // A held row is written from registers; a longer one is read again, a chunk of loads
    // before a chunk of stores.
    let mut wstart = 0;
    if held {
        wstart = cols;
        let mine = if tid < cols {
            (cols - tid + bd - 1) / bd
        } else {
            0
        };
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            out[at + k * bd] = (v[k] - row_max).exp() * inv;
        }
    }
    while wstart < cols {
        let mine = if wstart + tid < cols {
            (cols - wstart - tid + bd - 1) / bd
        } else {
            0
        };
        let p = at + wstart;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            v[k] = x[p + k * bd];
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            out[p + k * bd] = (v[k] - row_max).exp() * inv;
        }
        wstart += HELD * bd;
    }
}
