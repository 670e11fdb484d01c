//! Layer norm and RMS norm of short rows, a warp per row and several rows per block: the
//! forward (output and row statistics) and the input gradient, for rows of at most 32 values
//! per lane (1024) held in registers. Longer rows stay correct (read in chunks) but belong to
//! the block-per-row kernels of `norm.rs`.
//!
//! Invariant: the numerics contract of [`norm_rows`](super::norm_rows()) (compute type,
//! one rounding on store, statistics kept in the compute type, sums in an order fixed by the
//! row length alone). Beyond it, a lane holds the same elements, reads them in the same order
//! and combines them as a thread of a 32-thread block of [`norm_rows`](super::norm_rows()) and
//! [`norm_backward_rows`](super::norm_backward_rows()) does (even the block kernels' final
//! `0 + warp sum`), so the results are theirs bit for bit with blocks of 32 threads, the
//! block size those kernels got for rows of at most 1024.

use crate::Float;
use rtx_macros::kernel;

/// [`norm_rows`](super::norm_rows()) with a warp per row: normalizes each row of a dense
/// `[rows, cols]` matrix and writes `y` and, per row, `mean` (0 when not `centered`) and
/// `rstd`; `weight` and `bias` (`[cols]`) are read only when `has_weight` / `has_bias` are not
/// 0. Launch blocks of a multiple of 32 threads (warp `w` of block `b` takes row
/// `b * warps + w`; warps past the last row do nothing) and enough blocks to cover `rows`.
///
/// Lane `l` holds elements `l + 32 k` in registers, at most 32 of them, all its loads in
/// flight together, and keeps them for the mean, the variance and the write; the sums meet
/// through `warp_shuffle_xor`, with no shared memory or barrier, so many rows are in flight on
/// each SM. A longer row is walked in chunks of 32 values per lane, once per pass, every other
/// pass last chunk first, so the chunk still held from one pass is not read again by the next.
///
/// ```
/// use rtx_kernels::{kernels::norm_warp_rows, kernel::LaunchConfig};
/// let (mut y, mut mean, mut rstd) = (vec![0.0f64; 4], vec![0.0f64; 2], vec![0.0f64; 2]);
/// // Two rows, a warp each, in one block of two warps.
/// let x = [1.0, 3.0, 0.0, 4.0];
/// let launch = LaunchConfig::new(1, 64);
/// norm_warp_rows(launch, &x, &[], &[], &mut y, &mut mean, &mut rstd, 2, 2, 0.0, 1, 0, 0)
///     .unwrap();
/// assert_eq!((y, mean, rstd), (vec![-1.0, 1.0, -1.0, 1.0], vec![2.0, 2.0], vec![1.0, 0.5]));
/// ```
#[kernel(crate = crate)]
pub fn norm_warp_rows<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
    mean: &mut [T::Acc],
    rstd: &mut [T::Acc],
    cols: usize,
    rows: usize,
    eps: T,
    centered: u32,
    has_weight: u32,
    has_bias: u32,
) {
    // The most values a lane holds at once, in registers.
    const HELD: usize = 32;
    let lane = lane_id();
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // The whole warp leaves together, and no other warp waits for it.
    if row >= rows {
        return;
    }
    let at = row * cols + lane;
    let span = HELD * 32;

    // Chunk by chunk (`span` elements from `start`), lane `l` holds elements
    // `start + l + 32 k` as `v[k]`, the first `mine` of them. `held` is the start of the chunk
    // in `v` (`cols` while none is), so a pass skips reading the chunk the one before left.
    // Every loop over the held values stops after the lane's last one, so a short row costs
    // only the values it has.
    let mut v = [0.0; HELD];
    let mut held = cols;

    let mut mu = 0.0;
    if centered != 0 {
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
            held = start;
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                s += v[k];
            }
            start += span;
        }
        let mut m: u32 = 16;
        while m > 0 {
            s += warp_shuffle_xor(s, m);
            m /= 2;
        }
        // The block kernel adds its one warp's sum to 0: so does this (a sum of -0 gives +0).
        let mut total = 0.0;
        total += s;
        mu = total / (cols as T);
    }

    // The variance from the held values less the mean: the composition's two passes, with
    // the second one over registers. The chunks go last to first, so that the first is held
    // for the write and the last, left by the sum, is not read again.
    let mut q = 0.0;
    let mut chunk = (cols + span - 1) / span;
    while chunk > 0 {
        chunk -= 1;
        let qstart = chunk * span;
        let mine = if qstart + lane < cols {
            (cols - qstart - lane + 31) / 32
        } else {
            0
        };
        let p = at + qstart;
        if qstart != held {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                v[k] = x[p + k * 32];
            }
            held = qstart;
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            let d = v[k] - mu;
            q += d * d;
        }
    }
    let mut m2: u32 = 16;
    while m2 > 0 {
        q += warp_shuffle_xor(q, m2);
        m2 /= 2;
    }
    let mut sq = 0.0;
    sq += q;
    let r = 1.0 / (sq / (cols as T) + eps).sqrt();

    let mut wstart = 0;
    while wstart < cols {
        let mine = if wstart + lane < cols {
            (cols - wstart - lane + 31) / 32
        } else {
            0
        };
        let p = at + wstart;
        if wstart != held {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                v[k] = x[p + k * 32];
            }
            held = wstart;
        }
        // The outputs replace the held values before any is stored: for all the compiler
        // knows `y` may alias the weight or the bias, so it keeps each of their loads after
        // the store before it, which waits for the load before that (one memory latency per
        // value). This way their loads are all in flight together.
        let c = wstart + lane;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            let mut o = (v[k] - mu) * r;
            if has_weight != 0 {
                o = o * weight[c + k * 32];
            }
            if has_bias != 0 {
                o = o + bias[c + k * 32];
            }
            v[k] = o;
        }
        held = cols;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            y[p + k * 32] = v[k];
        }
        wstart += span;
    }
    if lane == 0 {
        mean[row] = mu;
        rstd[row] = r;
    }
}

/// [`norm_backward_rows`](super::norm_backward_rows()) with a warp per row: the input
/// gradient of [`norm_warp_rows`](norm_warp_rows()) for each row of a dense `[rows, cols]`
/// matrix, from the output gradient `dy`, the input `x`, the weight and the saved `mean` (read
/// only when `centered`) and `rstd`: with `g = dy * weight` and `xhat = (x - mean) * rstd`,
/// `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))` (without the `mean(g)` term for RMS
/// norm). Launch as [`norm_warp_rows`](norm_warp_rows()). Lane `l` holds the `g` and `xhat` of
/// elements `l + 32 k`, at most 32 of each, from the sums to the write; a longer row is read
/// in chunks, and all but its last chunk a second time for the write (last chunk first).
///
/// ```
/// use rtx_kernels::{kernels::norm_backward_warp_rows, kernel::LaunchConfig};
/// // A constant output gradient moves nothing through a centered norm.
/// let mut dx = vec![1.0f64; 2];
/// let launch = LaunchConfig::new(1, 32);
/// let (dy, x) = ([1.0, 1.0], [1.0, 3.0]);
/// norm_backward_warp_rows(launch, &dy, &x, &[], &[2.0], &[1.0], &mut dx, 2, 1, 1, 0).unwrap();
/// assert_eq!(dx, vec![0.0, 0.0]);
/// ```
#[kernel(crate = crate)]
pub fn norm_backward_warp_rows<T: Float>(
    dy: &[T],
    x: &[T],
    weight: &[T],
    mean: &[T::Acc],
    rstd: &[T::Acc],
    dx: &mut [T],
    cols: usize,
    rows: usize,
    centered: u32,
    has_weight: u32,
) {
    // The most elements a lane holds at once (a `g` and an `xhat` each), in registers.
    const HELD: usize = 32;
    let lane = lane_id();
    let row = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    if row >= rows {
        return;
    }
    let at = row * cols + lane;
    let span = HELD * 32;
    let mu = if centered != 0 { mean[row] } else { 0.0 };
    let r = rstd[row];

    // Lane `l` holds `g` and `xhat` of elements `start + l + 32 k` of a chunk as `g[k]` and
    // `xh[k]`; each lane's sums run over its elements in the order of their columns.
    let mut g = [0.0; HELD];
    let mut xh = [0.0; HELD];
    let mut held = cols;
    let mut sg = 0.0;
    let mut sgx = 0.0;
    let mut start = 0;
    while start < cols {
        let mine = if start + lane < cols {
            (cols - start - lane + 31) / 32
        } else {
            0
        };
        let p = at + start;
        let c = start + lane;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            xh[k] = x[p + k * 32];
            g[k] = dy[p + k * 32];
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            xh[k] = (xh[k] - mu) * r;
            if has_weight != 0 {
                g[k] = g[k] * weight[c + k * 32];
            }
            sg += g[k];
            sgx += g[k] * xh[k];
        }
        held = start;
        start += span;
    }
    let mut m: u32 = 16;
    while m > 0 {
        sg += warp_shuffle_xor(sg, m);
        sgx += warp_shuffle_xor(sgx, m);
        m /= 2;
    }
    // As the block kernel: its one warp's sums added to 0.
    let mut tg = 0.0;
    tg += sg;
    let mut tgx = 0.0;
    tgx += sgx;
    let n = cols as T;
    let mean_g = if centered != 0 { tg / n } else { 0.0 };
    let mean_gx = tgx / n;

    // Last chunk first: it is still held from the sums, and every other one is read again
    // and computed as before.
    let mut chunk = (cols + span - 1) / span;
    while chunk > 0 {
        chunk -= 1;
        let wstart = chunk * span;
        let mine = if wstart + lane < cols {
            (cols - wstart - lane + 31) / 32
        } else {
            0
        };
        let p = at + wstart;
        let c = wstart + lane;
        if wstart != held {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                xh[k] = x[p + k * 32];
                g[k] = dy[p + k * 32];
            }
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                xh[k] = (xh[k] - mu) * r;
                if has_weight != 0 {
                    g[k] = g[k] * weight[c + k * 32];
                }
            }
            held = wstart;
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            dx[p + k * 32] = r * (g[k] - mean_g - xh[k] * mean_gx);
        }
    }
}
