//! The GPU side of softmax, log-softmax and logsumexp along one axis, and of the fused input
//! gradient of softmax and log-softmax along the last axis: one launch of a row kernel over
//! dense rows, a warp per row (several rows a block) for short rows, a block per row for long
//! ones.
//!
//! Invariant: the kernel, its mode and its block size are functions of the row length alone,
//! so the order of every sum is too, and results are the same run to run.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::LaunchConfig;
use super::ops::{
    WARP_ROW_MAX, dense, dense_view, held_row_block, too_many_rows, warp_rows_config,
};
use super::storage::CudaStorage;
use crate::{Layout, Result};
use rtx_kernels::kernel::Variant;
use rtx_kernels::{Element, kernels};

/// Values of each input a thread of `softmax_backward_rows` holds in registers.
const BACKWARD_HELD: usize = 16;

/// Softmax (or log-softmax) along `axis`: one launch of a row kernel when the axis is the
/// last of a dense view (`softmax_warp_rows` for rows of at most [`WARP_ROW_MAX`], the
/// block-per-row kernels for longer ones); otherwise the axis is moved last by a copy, and
/// moved back after.
pub(crate) fn softmax<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    axis: usize,
    log: bool,
) -> Result<CudaStorage<E>> {
    let rank = l.rank();
    let last = rank.saturating_sub(1);
    let cols = if rank == 0 { 1 } else { l.dims()[axis] };
    let by_warps = cols <= WARP_ROW_MAX;
    let src = match (by_warps, log) {
        (true, _) => &kernels::softmax_warp_rows::KERNEL,
        (false, true) => &kernels::log_softmax_rows::KERNEL,
        (false, false) => &kernels::softmax_rows::KERNEL,
    };
    // Checked before any copy or allocation, so the error is the only effect.
    let entry = kernel_entry(c.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    if rank > 0 && axis != last {
        let mut perm: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
        perm.push(axis);
        let moved = l.permute(&perm);
        let rows = softmax(c, &moved, last, log)?;
        // `rows` is dense in the moved order; view it back in the original order.
        let dense_moved = Layout::contiguous(moved.dims());
        let mut inverse = vec![0; rank];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i;
        }
        return dense(&rows, &dense_moved.permute(&inverse));
    }
    let n = l.numel();
    let out = CudaStorage::<E>::uninit(c.ordinal(), n)?;
    if n == 0 {
        return Ok(out);
    }
    let (x, start) = dense_view(c, l)?;
    let rows = n / cols;
    too_many_rows(src.name, rows)?;
    let mut args = vec![
        Arg::Ptr(x.ptr_at(start)),
        Arg::Ptr(out.device_ptr()),
        Arg::U64(cols as u64),
    ];
    let config = if by_warps {
        args.extend([Arg::U64(rows as u64), Arg::U32(log as u32)]);
        warp_rows_config(rows)
    } else {
        LaunchConfig {
            grid: (rows as u32, 1, 1),
            block: (held_row_block(cols), 1, 1),
            shared_mem: 0,
        }
    };
    // SAFETY: `x` holds rows * cols dense elements from `start`, `out` as many; a warp per
    // row (warps past the last row return) or a block per row, with a block size that is a
    // multiple of 32 and at most 256.
    unsafe { launch_entry(c.ordinal(), src, entry, config, &args)? };
    Ok(out)
}

/// The input gradient of softmax (`log` false) or log-softmax along the last axis, from the
/// forward's output `y` and its gradient `g` (views of the same sizes): `y (g - Σ g y)` or
/// `g - exp(y) Σ g`, dense. One launch (plus dense copies of views that are not
/// contiguous): a warp per row for rows of at most `32 * 16`, a block per row otherwise.
pub(crate) fn softmax_backward<E: Element>(
    (y, yl): (&CudaStorage<E>, &Layout),
    (g, gl): (&CudaStorage<E>, &Layout),
    log: bool,
) -> Result<CudaStorage<E>> {
    let src = &kernels::softmax_backward_rows::KERNEL;
    let ordinal = y.ordinal();
    let entry = kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let n = yl.numel();
    let cols = yl.dims().last().copied().unwrap_or(1);
    let rows = n.checked_div(cols).unwrap_or(0);
    too_many_rows(src.name, rows)?;
    let dx = CudaStorage::<E>::uninit(ordinal, n)?;
    if n == 0 {
        return Ok(dx);
    }
    let (yd, ys) = dense_view(y, yl)?;
    let (gd, gs) = dense_view(g, gl)?;
    let by_warps = cols <= 32 * BACKWARD_HELD;
    let config = if by_warps {
        warp_rows_config(rows)
    } else {
        // Enough threads to hold the row, 16 values of each input a thread, at most 256 (a
        // block of f64 threads holding 32 values each must fit an SM's registers).
        LaunchConfig {
            grid: (rows as u32, 1, 1),
            block: (
                (cols.div_ceil(BACKWARD_HELD).div_ceil(32) * 32).clamp(32, 256) as u32,
                1,
                1,
            ),
            shared_mem: 0,
        }
    };
    let args = [
        Arg::Ptr(yd.ptr_at(ys)),
        Arg::Ptr(gd.ptr_at(gs)),
        Arg::Ptr(dx.device_ptr()),
        Arg::U64(cols as u64),
        Arg::U64(rows as u64),
        Arg::U32(by_warps as u32),
        Arg::U32(log as u32),
    ];
    // SAFETY: `y` and `g` hold rows * cols dense elements from their starts, `dx` as many; a
    // warp per row (warps past the last row return) or a block per row, with a block size
    // that is a multiple of 32 and at most 256.
    unsafe { launch_entry(ordinal, src, entry, config, &args)? };
    drop((yd, gd));
    Ok(dx)
}
