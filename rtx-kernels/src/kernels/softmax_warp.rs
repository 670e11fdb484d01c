//! Softmax, log-softmax and logsumexp of short rows, a warp per row and several rows per
//! block, for rows of at most 32 values per lane (1024) held in registers; longer rows stay
//! correct (read in chunks, then again for the write) but belong to the block-per-row kernels.
//!
//! Invariant: a lane holds the same elements, reads them in the same order and combines them
//! as a block of 32 threads of [`softmax_rows`](super::softmax_rows()),
//! [`log_softmax_rows`](super::log_softmax_rows()) and
//! [`logsumexp_rows`](super::logsumexp_rows()) does, so the results are theirs bit for bit;
//! the order depends on the row length alone.

use crate::Float;
use rtx_macros::kernel;

/// Softmax (`mode` 0), log-softmax (`mode` 1) or logsumexp (`mode` 2, one value per row into
/// `out[row]`) of each row of a `[rows, cols]` matrix, a warp per row: launch blocks of a
/// multiple of 32 threads (warp `w` of block `b` takes row `b * warps + w`; warps past the
/// last row do nothing) and enough blocks to cover `rows`. Lane `l` holds elements
/// `l + 32 k` in registers, at most 32 of them, with all its loads in flight together; the
/// maximum and the sum meet through `warp_shuffle_xor`, with no shared memory or barrier, so
/// many rows are in flight on each SM. A longer row is read in chunks of 32 values per lane
/// with a running maximum and sum, then once more for the write.
///
/// ```
/// use rtx_kernels::{kernels::softmax_warp_rows, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 4];
/// softmax_warp_rows(LaunchConfig::new(1, 64), &[0.0, 0.0, 1.0, 1.0], &mut out, 2, 2, 0).unwrap();
/// assert_eq!(out, vec![0.5, 0.5, 0.5, 0.5]);
/// ```
#[kernel(crate = crate)]
pub fn softmax_warp_rows<T: Float>(x: &[T], out: &mut [T], cols: usize, rows: usize, mode: u32) {
    // The most values a lane holds at once, in registers.
    const HELD: usize = 32;
    let lane = lane_id();
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // The whole warp leaves together, and no other warp waits for it.
    if row >= rows {
        return;
    }
    let at = row * cols + lane;
    let held = cols <= HELD * 32;

    // Chunk by chunk, lane `l` holds elements `start + l + 32 k` as `v[k]` (the first `mine`
    // of them), with its running maximum `m` and `s = Σ exp(x - m)` over what it read. Every
    // loop over the held values stops after the lane's last one, so a short row costs only
    // the values it has.
    let mut v = [T::NEG_INFINITY; HELD];
    let mut m = T::NEG_INFINITY;
    let mut s = 0.0;
    let mut start = 0;
    while start < cols {
        let mine = if start + lane < cols {
            (cols - start - lane + 31) / 32
        } else {
            0
        };
        let p = at + start;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            v[k] = x[p + k * 32];
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
        start += HELD * 32;
    }
    // The row maximum in every lane, then the sum of each lane's `s` rescaled to it (the
    // butterfly gives every lane the same sum, bit for bit).
    let mut row_max = m;
    let mut off: u32 = 16;
    while off > 0 {
        row_max = row_max.max(warp_shuffle_xor(row_max, off));
        off /= 2;
    }
    let mut total = 0.0;
    if m != T::NEG_INFINITY {
        total = s * (m - row_max).exp();
    }
    let mut mask: u32 = 16;
    while mask > 0 {
        total += warp_shuffle_xor(total, mask);
        mask /= 2;
    }
    if mode == 2 {
        if lane == 0 {
            if row_max == T::INFINITY || row_max == T::NEG_INFINITY {
                out[row] = row_max;
            } else {
                out[row] = row_max + total.ln();
            }
        }
        return;
    }
    let inv = 1.0 / total;
    let log_total = total.ln();
    // A held row is written from registers; a longer one is read again, a chunk of loads
    // before a chunk of stores.
    let mut wstart = 0;
    if held {
        wstart = cols;
        let mine = if lane < cols {
            (cols - lane + 31) / 32
        } else {
            0
        };
        if mode == 0 {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                out[at + k * 32] = (v[k] - row_max).exp() * inv;
            }
        } else {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                out[at + k * 32] = (v[k] - row_max) - log_total;
            }
        }
    }
    while wstart < cols {
        let mine = if wstart + lane < cols {
            (cols - wstart - lane + 31) / 32
        } else {
            0
        };
        let p = at + wstart;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            v[k] = x[p + k * 32];
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            if mode == 0 {
                out[p + k * 32] = (v[k] - row_max).exp() * inv;
            } else {
                out[p + k * 32] = (v[k] - row_max) - log_total;
            }
        }
        wstart += HELD * 32;
    }
}
