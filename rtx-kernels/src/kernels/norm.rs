//! Layer norm and RMS norm as fused row kernels: the forward (output plus the row statistics
//! a backward needs) and the backward (input gradient per row; weight and bias gradients
//! reduced over rows in two deterministic steps).
//!
//! One kernel serves both norms: with `centered` set it is layer norm,
//! `(x - mean) * rstd * weight + bias` with `rstd = 1 / sqrt(var + eps)` and the biased
//! variance; without, the mean is taken as 0 and it is RMS norm, `x * rstd * weight` with
//! `rstd = 1 / sqrt(mean(x²) + eps)`.
//!
//! Invariant: everything is computed in the compute type (f32 for f16 and bf16) and rounded to
//! `T` once, on store; the row statistics stay in the compute type (`&mut [T::Acc]`), so a
//! backward over f16 data never sees them rounded. The forward follows the composition's order
//! of operations (two passes for the variance, then `((x - mean) * rstd) * weight + bias`),
//! and every sum runs in an order fixed by the sizes and the block size alone. The row
//! kernels hold up to 32 values a thread in registers, so a row that fits is read from memory
//! once, and the second pass of the variance runs over registers.

use super::rows::{row_share, row_total};
use crate::Float;
use rtx_macros::kernel;

/// Normalizes each row of a dense `[rows, cols]` matrix: launch one block per row, with a
/// block size that is a multiple of 32, at most 256 (each thread holds up to 32 values in
/// registers, and a block must fit the SM's 64K registers). Writes `y` and, per row, `mean`
/// (0 when not `centered`) and `rstd`. `weight` and `bias` (`[cols]`) are read only when
/// `has_weight` / `has_bias` are not 0.
///
/// A row of at most 32 values per thread (`cols <= 32 * block`) is read from memory once:
/// thread `tid` loads elements `tid + k * block` into registers, all loads in flight together,
/// and keeps them for the mean, the variance and the write. A longer row is walked in chunks
/// of 32 values per thread, once per pass, every other pass last chunk first, so the chunk
/// still held from one pass is not read again by the next.
///
/// ```
/// use rtx_kernels::{kernels::norm_rows, kernel::LaunchConfig};
/// let (mut y, mut mean, mut rstd) = (vec![0.0f64; 2], vec![0.0f64; 1], vec![0.0f64; 1]);
/// let launch = LaunchConfig::new(1, 32);
/// norm_rows(launch, &[1.0, 3.0], &[], &[], &mut y, &mut mean, &mut rstd, 2, 0.0, 1, 0, 0)
///     .unwrap();
/// assert_eq!((y, mean[0], rstd[0]), (vec![-1.0, 1.0], 2.0, 1.0));
/// ```
#[kernel(crate = crate)]
pub fn norm_rows<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
    mean: &mut [T::Acc],
    rstd: &mut [T::Acc],
    cols: usize,
    eps: T,
    centered: u32,
    has_weight: u32,
    has_bias: u32,
) {
    #[shared]
    let red: [T; 32];
    let row = block_idx_x();
    norm_row(
        x,
        weight,
        bias,
        y,
        mean,
        rstd,
        &mut red,
        row,
        cols,
        thread_idx_x(),
        block_dim_x(),
        eps,
        centered,
        has_weight,
        has_bias,
        0,
    );
}

/// The input gradient of [`norm_rows`](norm_rows()) for each row of a dense `[rows, cols]`
/// matrix, from the output gradient `dy`, the input `x`, the weight and the saved `mean`
/// (read only when `centered`) and `rstd`: with `g = dy * weight` and `xhat = (x - mean) *
/// rstd`, `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))` (without the `mean(g)` term for
/// RMS norm). One block per row, a block size that is a multiple of 32, at most 256. As in
/// [`norm_rows`](norm_rows()), a row of at most 32 values per thread is read once, its `g`
/// and `xhat` held in registers from the sums to the write; a longer row is read in chunks,
/// and all but its last chunk a second time for the write (last chunk first).
///
/// ```
/// use rtx_kernels::{kernels::norm_backward_rows, kernel::LaunchConfig};
/// // A constant output gradient moves nothing through a centered norm.
/// let mut dx = vec![1.0f64; 2];
/// let launch = LaunchConfig::new(1, 32);
/// norm_backward_rows(launch, &[1.0, 1.0], &[1.0, 3.0], &[], &[2.0], &[1.0], &mut dx, 2, 1, 0)
///     .unwrap();
/// assert_eq!(dx, vec![0.0, 0.0]);
/// ```
#[kernel(crate = crate)]
pub fn norm_backward_rows<T: Float>(
    dy: &[T],
    x: &[T],
    weight: &[T],
    mean: &[T::Acc],
    rstd: &[T::Acc],
    dx: &mut [T],
    cols: usize,
    centered: u32,
    has_weight: u32,
) {
    #[shared]
    let red_g: [T; 32];
    #[shared]
    let red_gx: [T; 32];
    let row = block_idx_x();
    norm_row_backward(
        dy,
        x,
        weight,
        mean,
        rstd,
        dx,
        &mut red_g,
        &mut red_gx,
        row,
        cols,
        thread_idx_x(),
        block_dim_x(),
        centered,
        has_weight,
        0,
    );
}

/// First step of the weight and bias gradients of [`norm_rows`](norm_rows()): column `c` of
/// chunk `k` (rows `k * rows_per_chunk ..`) gets `dw[k, c] = Σ dy * xhat` and
/// `db[k, c] = Σ dy`, summed in row order in the compute type. Launch a grid of
/// `(ceil(cols / block), chunks)` blocks; [`norm_param_finish`](norm_param_finish()) adds the
/// chunks.
///
/// ```
/// use rtx_kernels::{kernels::norm_param_partials, kernel::LaunchConfig};
/// let (mut dw, mut db) = (vec![0.0f32; 2], vec![0.0f32; 2]);
/// // Rows [1, 3] and [2, 2] (mean 2, 2; rstd 1, 1), output gradient all ones, one chunk.
/// let x = [1.0f32, 3.0, 2.0, 2.0];
/// let launch = LaunchConfig::new((1, 1), 32);
/// norm_param_partials(launch, &[1.0; 4], &x, &[2.0, 2.0], &[1.0, 1.0], &mut dw, &mut db, 2, 2, 2, 1)
///     .unwrap();
/// assert_eq!((dw, db), (vec![-1.0, 1.0], vec![2.0, 2.0]));
/// ```
#[kernel(crate = crate)]
pub fn norm_param_partials<T: Float>(
    dy: &[T],
    x: &[T],
    mean: &[T::Acc],
    rstd: &[T::Acc],
    dw: &mut [T::Acc],
    db: &mut [T::Acc],
    rows: usize,
    cols: usize,
    rows_per_chunk: usize,
    centered: u32,
) {
    let c = block_idx_x() * block_dim_x() + thread_idx_x();
    if c >= cols {
        return;
    }
    let chunk = block_idx_y();
    let start = chunk * rows_per_chunk;
    let end = (start + rows_per_chunk).min(rows);
    let mut sw = 0.0;
    let mut sb = 0.0;
    // A row at a time. Loading 16 rows before adding them (to overlap their latencies)
    // measured slower in a GPT step's profile on an H200 (258 us against 138 us for 13
    // norms), so the plain loop stays.
    for r in start..end {
        let mu = if centered != 0 { mean[r] } else { 0.0 };
        let g = dy[r * cols + c];
        sw += g * ((x[r * cols + c] - mu) * rstd[r]);
        sb += g;
    }
    dw[chunk * cols + c] = sw;
    db[chunk * cols + c] = sb;
}

/// Second step of the weight and bias gradients: `dw[c] = Σ_k dw_part[k, c]` over `chunks`
/// partial rows in order (and `db` alike when `has_bias` is not 0), rounded to `T` once. Any
/// grid works.
///
/// ```
/// use rtx_kernels::{kernels::norm_param_finish, kernel::LaunchConfig};
/// let (mut dw, mut db) = (vec![0.0f32; 2], vec![0.0f32; 2]);
/// let launch = LaunchConfig::new(1, 32);
/// norm_param_finish(launch, &[1.0, 2.0, 3.0, 4.0], &[1.0; 4], &mut dw, &mut db, 2, 2, 1).unwrap();
/// assert_eq!((dw, db), (vec![4.0, 6.0], vec![2.0, 2.0]));
/// ```
#[kernel(crate = crate)]
pub fn norm_param_finish<T: Float>(
    dw_part: &[T::Acc],
    db_part: &[T::Acc],
    dw: &mut [T],
    db: &mut [T],
    chunks: usize,
    cols: usize,
    has_bias: u32,
) {
    // The most partial rows a thread loads before it adds any of them.
    const BATCH: usize = 32;
    let step = block_dim_x() * grid_dim_x();
    let mut c = block_idx_x() * block_dim_x() + thread_idx_x();
    let mut pw = [0.0; BATCH];
    let mut pb = [0.0; BATCH];
    while c < cols {
        let mut sw = 0.0;
        let mut sb = 0.0;
        // As in the partials: a batch of loads in flight, then the sums in chunk order.
        let mut first = 0;
        while first < chunks {
            let n = chunks - first;
            for k in 0..BATCH {
                if k >= n {
                    break;
                }
                pw[k] = dw_part[(first + k) * cols + c];
                pb[k] = db_part[(first + k) * cols + c];
            }
            for k in 0..BATCH {
                if k >= n {
                    break;
                }
                sw += pw[k];
                sb += pb[k];
            }
            first += BATCH;
        }
        dw[c] = sw;
        if has_bias != 0 {
            db[c] = sb;
        }
        c += step;
    }
}

/// One row of [`norm_rows`](norm_rows()) (`warp_only` 0: the block's threads, `tid` of
/// `step = block_dim_x()`) or of [`norm_warp_rows`](super::norm_warp_rows()) (`warp_only` 1:
/// a warp's lanes, `tid` the lane, `step` 32, `red` unused): each thread holds elements
/// `tid + k * step` of a chunk of `32 * step` in registers and the sums meet through
/// [`row_total`]. Every branch on `warp_only` and the sizes is the same for all the threads
/// that meet, so every barrier is reached by all.
#[kernel(device, crate = crate)]
pub fn norm_row<T: Float>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
    mean: &mut [T::Acc],
    rstd: &mut [T::Acc],
    #[shared] red: &mut [T; 32],
    row: usize,
    cols: usize,
    tid: usize,
    step: usize,
    eps: T,
    centered: u32,
    has_weight: u32,
    has_bias: u32,
    warp_only: u32,
) {
    // The most values a thread holds at once, in registers.
    const HELD: usize = 32;
    let at = row * cols + tid;
    let span = HELD * step;

    // Chunk by chunk (`span` elements from `start`), thread `tid` holds elements
    // `start + tid + k * step` as `v[k]`, the first `mine` of them: each warp load reads
    // neighbouring elements, and no load waits for another. `held` is the start of the chunk
    // in `v` (`cols` while none is), so a pass skips reading the chunk the one before left.
    // Every loop over the held values stops after the thread's last one, so a short row
    // costs only the values it has.
    let mut v = [0.0; HELD];
    let mut held = cols;

    let mut mu = 0.0;
    if centered != 0 {
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
            held = start;
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                s += v[k];
            }
            start += span;
        }
        mu = row_total(s, &mut red, warp_only) / (cols as T);
        // `red` is written again by the variance's sum.
        if warp_only == 0 {
            sync_threads();
        }
    }

    // The variance from the held values less the mean: the composition's two passes, with
    // the second one over registers. The chunks go last to first, so that the first is held
    // for the write and the last, left by the sum, is not read again.
    let mut q = 0.0;
    let mut chunk = (cols + span - 1) / span;
    while chunk > 0 {
        chunk -= 1;
        let qstart = chunk * span;
        let mine: usize = row_share(qstart, tid, step, cols);
        let p = at + qstart;
        if qstart != held {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                v[k] = x[p + k * step];
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
    let r = 1.0 / (row_total(q, &mut red, warp_only) / (cols as T) + eps).sqrt();

    let mut wstart = 0;
    while wstart < cols {
        let mine: usize = row_share(wstart, tid, step, cols);
        let p = at + wstart;
        if wstart != held {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                v[k] = x[p + k * step];
            }
            held = wstart;
        }
        // The outputs replace the held values before any is stored: for all the compiler
        // knows `y` may alias the weight or the bias, so it keeps each of their loads after
        // the store before it, which waits for the load before that (one memory latency per
        // value). This way their loads are all in flight together.
        let c = wstart + tid;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            let mut o = (v[k] - mu) * r;
            if has_weight != 0 {
                o = o * weight[c + k * step];
            }
            if has_bias != 0 {
                o = o + bias[c + k * step];
            }
            v[k] = o;
        }
        held = cols;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            y[p + k * step] = v[k];
        }
        wstart += span;
    }
    if tid == 0 {
        mean[row] = mu;
        rstd[row] = r;
    }
}

/// One row of [`norm_backward_rows`](norm_backward_rows()) (`warp_only` 0) or of
/// [`norm_backward_warp_rows`](super::norm_backward_warp_rows()) (`warp_only` 1, `red_g` and
/// `red_gx` unused), threads as in [`norm_row`](norm_row): each holds the `g` and `xhat` of
/// its elements of a chunk in registers from the sums to the write.
#[kernel(device, crate = crate)]
pub fn norm_row_backward<T: Float>(
    dy: &[T],
    x: &[T],
    weight: &[T],
    mean: &[T::Acc],
    rstd: &[T::Acc],
    dx: &mut [T],
    #[shared] red_g: &mut [T; 32],
    #[shared] red_gx: &mut [T; 32],
    row: usize,
    cols: usize,
    tid: usize,
    step: usize,
    centered: u32,
    has_weight: u32,
    warp_only: u32,
) {
    // The most elements a thread holds at once (a `g` and an `xhat` each), in registers.
    const HELD: usize = 32;
    let at = row * cols + tid;
    let span = HELD * step;
    let mu = if centered != 0 { mean[row] } else { 0.0 };
    let r = rstd[row];

    // Thread `tid` holds `g` and `xhat` of elements `start + tid + k * step` of a chunk as
    // `g[k]` and `xh[k]`; each thread's sums run over its elements in the order of their
    // columns.
    let mut g = [0.0; HELD];
    let mut xh = [0.0; HELD];
    let mut held = cols;
    let mut sg = 0.0;
    let mut sgx = 0.0;
    let mut start = 0;
    while start < cols {
        let mine: usize = row_share(start, tid, step, cols);
        let p = at + start;
        let c = start + tid;
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            xh[k] = x[p + k * step];
            g[k] = dy[p + k * step];
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            xh[k] = (xh[k] - mu) * r;
            if has_weight != 0 {
                g[k] = g[k] * weight[c + k * step];
            }
            sg += g[k];
            sgx += g[k] * xh[k];
        }
        held = start;
        start += span;
    }
    let tg = row_total(sg, &mut red_g, warp_only);
    let tgx = row_total(sgx, &mut red_gx, warp_only);
    let n = cols as T;
    let mean_g = if centered != 0 { tg / n } else { 0.0 };
    let mean_gx = tgx / n;

    // Last chunk first: it is still held from the sums, and every other one is read again
    // and computed as before.
    let mut chunk = (cols + span - 1) / span;
    while chunk > 0 {
        chunk -= 1;
        let wstart = chunk * span;
        let mine: usize = row_share(wstart, tid, step, cols);
        let p = at + wstart;
        let c = wstart + tid;
        if wstart != held {
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                xh[k] = x[p + k * step];
                g[k] = dy[p + k * step];
            }
            for k in 0..HELD {
                if k >= mine {
                    break;
                }
                xh[k] = (xh[k] - mu) * r;
                if has_weight != 0 {
                    g[k] = g[k] * weight[c + k * step];
                }
            }
            held = wstart;
        }
        for k in 0..HELD {
            if k >= mine {
                break;
            }
            dx[p + k * step] = r * (g[k] - mean_g - xh[k] * mean_gx);
        }
    }
}
