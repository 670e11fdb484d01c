//! Device functions the row kernels share (`#[kernel(device)]`): warp and block reductions,
//! and the softmax family's row read (a running maximum and sum over chunks of 32 values per
//! thread held in registers) and row write.
//!
//! Invariant: each is the code its callers held inline before, operation for operation, so
//! every caller's results are what they were, bit for bit; reductions combine in an order
//! fixed by the block size alone. The block reductions reach `sync_threads()`, so every thread
//! of the block calls them together.

use crate::Float;
use rtx_macros::kernel;

/// The maximum of `v` over a warp, in lane 0 (a `warp_shuffle_down` tree; other lanes hold
/// partial maxima).
#[kernel(device, crate = crate)]
pub fn warp_max_down<T: Float>(v: T) -> T {
    let mut m = v;
    let mut off: u32 = 16;
    while off > 0 {
        m = m.max(warp_shuffle_down(m, off));
        off /= 2;
    }
    m
}

/// The maximum of `v` over a warp, in every lane (a `warp_shuffle_xor` butterfly).
#[kernel(device, crate = crate)]
pub fn warp_max_xor<T: Float>(v: T) -> T {
    let mut m = v;
    let mut off: u32 = 16;
    while off > 0 {
        m = m.max(warp_shuffle_xor(m, off));
        off /= 2;
    }
    m
}

/// The sum of `v` over a warp, in every lane, bit for bit the same in each (a
/// `warp_shuffle_xor` butterfly).
#[kernel(device, crate = crate)]
pub fn warp_sum_xor<T: Float>(v: T) -> T {
    let mut s = v;
    let mut mask: u32 = 16;
    while mask > 0 {
        s += warp_shuffle_xor(s, mask);
        mask /= 2;
    }
    s
}

/// The maximum of `v` over the block, in every thread: each warp's maximum
/// ([`warp_max_down`]) meets the others' in `red`, and warp 0 reduces them. `red` is free
/// again when it returns.
#[kernel(device, crate = crate)]
pub fn block_max<T: Float>(v: T, #[shared] red: &mut [T; 32]) -> T {
    let lane = lane_id();
    let warp = thread_idx_x() / 32;
    let warps = (block_dim_x() + 31) / 32;
    let mm = warp_max_down(v);
    if lane == 0 {
        red[warp] = mm;
    }
    sync_threads();
    if warp == 0 {
        let r = if lane < warps {
            red[lane]
        } else {
            T::NEG_INFINITY
        };
        let r = warp_max_down(r);
        if lane == 0 {
            red[0] = r;
        }
    }
    sync_threads();
    let m = red[0];
    sync_threads();
    m
}

// ANCHOR: block_sum
/// The sum of `v` over the block, in every thread: each warp's sum ([`warp_sum_xor`]) goes to
/// `red`, and every thread adds them in warp order from 0. `red` is still being read when it
/// returns: a caller that writes it again synchronizes first.
#[kernel(device, crate = crate)]
pub fn block_sum<T: Float>(v: T, #[shared] red: &mut [T; 32]) -> T {
    let lane = lane_id();
    let warp = thread_idx_x() / 32;
    let warps = (block_dim_x() + 31) / 32;
    let t = warp_sum_xor(v);
    if lane == 0 {
        red[warp] = t;
    }
    sync_threads();
    let mut total = 0.0;
    for w in 0..warps {
        total += red[w];
    }
    total
}
// ANCHOR_END: block_sum

/// How many of the elements `start + tid + k * step` (`k = 0, 1, ..`) lie before `cols`.
#[kernel(device, crate = crate)]
pub fn row_share<T: Float>(start: usize, tid: usize, step: usize, cols: usize) -> usize {
    if start + tid < cols {
        (cols - start - tid + step - 1) / step
    } else {
        0
    }
}

/// One thread's part of a row's maximum and `Σ exp(x - max)`: chunk by chunk, the thread
/// holds elements `at + start + k * step` of `x` as `v[k]` (the first `mine` of them), so
/// each warp load reads neighbouring elements and no load waits for another, and keeps its
/// running maximum and the sum against it, into `ms[0]` and `ms[1]`. `at` is the row's
/// first element plus `tid`; every loop over the held values stops after the thread's last
/// one, so a short row costs only the values it has. `v` holds the last chunk afterwards.
#[kernel(device, crate = crate)]
pub fn row_max_sum<T: Float>(
    x: &[T],
    v: &mut [T; 32],
    ms: &mut [T; 2],
    at: usize,
    cols: usize,
    tid: usize,
    step: usize,
) {
    // The most values a thread holds at once, in registers.
    const HELD: usize = 32;
    let mut m = T::NEG_INFINITY;
    let mut s = 0.0;
    let mut start = 0;
    while start < cols {
        let mine: usize = row_share(start, tid, step, cols);
        let p = at + start;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            v[k] = x[p + k * step];
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
        start += HELD * step;
    }
    ms[0] = m;
    ms[1] = s;
}

/// The row maximum and `Σ exp(x - max)` of a block's row into `st[0]` and `st[1]`, in every
/// thread: [`row_max_sum`] per thread (its last chunk left in `v`), [`block_max`], then the
/// threads' sums rescaled to the row maximum and added by [`block_sum`].
#[kernel(device, crate = crate)]
pub fn block_row_stats<T: Float>(
    x: &[T],
    v: &mut [T; 32],
    st: &mut [T; 2],
    #[shared] red: &mut [T; 32],
    at: usize,
    cols: usize,
) {
    let mut ms = [0.0; 2];
    row_max_sum(x, &mut v, &mut ms, at, cols, thread_idx_x(), block_dim_x());
    let m = ms[0];
    let row_max = block_max(m, &mut red);
    let mut t = 0.0;
    if m != T::NEG_INFINITY {
        t = ms[1] * (m - row_max).exp();
    }
    st[0] = row_max;
    st[1] = block_sum(t, &mut red);
}

/// Writes softmax (`mode` 0: `exp(x - max) * scale`, `scale` the sum's reciprocal) or
/// log-softmax (`mode` 1: `(x - max) - scale`, `scale` the sum's logarithm) of a row read as
/// [`row_max_sum`] reads it. A row of at most 32 values per thread (`cols <= 32 * step`) is
/// written from `v`, which holds it; a longer one is read again, a chunk of loads before a
/// chunk of stores.
#[kernel(device, crate = crate)]
pub fn row_softmax_write<T: Float>(
    x: &[T],
    out: &mut [T],
    v: &mut [T; 32],
    at: usize,
    cols: usize,
    tid: usize,
    step: usize,
    row_max: T,
    scale: T,
    mode: u32,
) {
    const HELD: usize = 32;
    let mut wstart = 0;
    if cols <= HELD * step {
        wstart = cols;
        let mine: usize = row_share(0, tid, step, cols);
        if mode == 0 {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                out[at + k * step] = (v[k] - row_max).exp() * scale;
            }
        } else {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                out[at + k * step] = (v[k] - row_max) - scale;
            }
        }
    }
    while wstart < cols {
        let mine: usize = row_share(wstart, tid, step, cols);
        let p = at + wstart;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            v[k] = x[p + k * step];
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            if mode == 0 {
                out[p + k * step] = (v[k] - row_max).exp() * scale;
            } else {
                out[p + k * step] = (v[k] - row_max) - scale;
            }
        }
        wstart += HELD * step;
    }
}

/// The sum of `v` over a row's threads, in every thread: over a warp (`warp_only` not 0) as
/// [`warp_sum_xor`] added to 0, which is what [`block_sum`] gives for a block of one warp;
/// otherwise over the block by [`block_sum`] (through `red`, which is still being read when
/// it returns).
#[kernel(device, crate = crate)]
pub fn row_total<T: Float>(v: T, #[shared] red: &mut [T; 32], warp_only: u32) -> T {
    if warp_only != 0 {
        let mut total = 0.0;
        total += warp_sum_xor(v);
        total
    } else {
        block_sum(v, &mut red)
    }
}
