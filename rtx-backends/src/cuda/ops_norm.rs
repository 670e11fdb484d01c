//! The GPU side of fused layer norm and RMS norm over the last axis: the forward is one launch
//! that also saves each row's mean and reciprocal standard deviation in the compute type; the
//! backward is one launch for the input gradient and two for the weight and bias gradients
//! (per-chunk column sums, then the sum of the chunks). The forward and the input gradient
//! take a warp per row (several rows a block) for rows of at most [`WARP_ROW_MAX`] values, a
//! block per row for longer ones.
//!
//! Invariant: every sum runs in an order fixed by the sizes alone (the kernel, block sizes and
//! chunk counts are functions of the row length and row count), so results are the same run
//! to run; no atomics.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::{DevicePtr, LaunchConfig};
use super::ops::{WARP_ROW_MAX, dense_view, held_row_block, warp_rows_config};
use super::storage::CudaStorage;
use crate::{BackendError, Layout, Result};
use rtx_kernels::kernel::{KernelEntry, KernelSource, Variant};
use rtx_kernels::{DType, Element, kernels};

/// Values in a compute type: f32 for f16, bf16 and f32 tensors, f64 for f64 ones.
#[derive(Clone, Debug)]
pub(crate) enum AccBuf {
    /// f32 values.
    F32(CudaStorage<f32>),
    /// f64 values.
    F64(CudaStorage<f64>),
}

impl AccBuf {
    pub(crate) fn uninit(ordinal: usize, dtype: DType, n: usize) -> Result<AccBuf> {
        Ok(match dtype {
            DType::F64 => AccBuf::F64(CudaStorage::uninit(ordinal, n)?),
            _ => AccBuf::F32(CudaStorage::uninit(ordinal, n)?),
        })
    }

    pub(crate) fn ptr(&self) -> DevicePtr {
        match self {
            AccBuf::F32(s) => s.device_ptr(),
            AccBuf::F64(s) => s.device_ptr(),
        }
    }

    /// The values, copied to the host.
    pub(crate) fn to_f64(&self) -> Result<Vec<f64>> {
        Ok(match self {
            AccBuf::F32(s) => s.to_host()?.into_iter().map(f64::from).collect(),
            AccBuf::F64(s) => s.to_host()?,
        })
    }
}

/// What the forward saves for the backward: per row, the mean (0 for RMS norm) and the
/// reciprocal standard deviation.
#[derive(Clone, Debug)]
pub(crate) struct Stats {
    pub(crate) mean: AccBuf,
    pub(crate) rstd: AccBuf,
}

fn entry<E: Element>(ordinal: usize, src: &'static KernelSource) -> Result<&'static KernelEntry> {
    kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)
}

/// Whether rows of `cols` take the warp-per-row kernels (`norm_warp_rows`,
/// `norm_backward_warp_rows`): a row of at most 32 values a lane is held in registers by one
/// warp, with no barrier, and several rows share a block. Longer rows take a block each.
fn by_warps(cols: usize) -> bool {
    cols <= WARP_ROW_MAX
}

/// The forward's and the input gradient's row kernels for rows of `cols`.
fn row_kernels(cols: usize) -> (&'static KernelSource, &'static KernelSource) {
    if by_warps(cols) {
        (
            &kernels::norm_warp_rows::KERNEL,
            &kernels::norm_backward_warp_rows::KERNEL,
        )
    } else {
        (
            &kernels::norm_rows::KERNEL,
            &kernels::norm_backward_rows::KERNEL,
        )
    }
}

/// The arguments of the forward row kernel of [`row_kernels`] for `rows` rows of `cols`:
/// `ptrs` are `x`, `weight`, `bias`, `y`, `mean`, `rstd`; `flags` are `centered`,
/// `has_weight`, `has_bias`. The warp kernel also takes the row count.
fn forward_args(
    ptrs: [DevicePtr; 6],
    (rows, cols): (usize, usize),
    eps: f64,
    flags: [bool; 3],
) -> Vec<Arg> {
    let mut args: Vec<Arg> = ptrs.into_iter().map(Arg::Ptr).collect();
    args.push(Arg::U64(cols as u64));
    if by_warps(cols) {
        args.push(Arg::U64(rows as u64));
    }
    args.push(Arg::Acc(eps));
    args.extend(flags.map(|f| Arg::U32(f as u32)));
    args
}

/// The arguments of the input-gradient row kernel of [`row_kernels`]: `ptrs` are `dy`, `x`,
/// `weight`, `mean`, `rstd`, `dx`; `flags` are `centered` and `has_weight`.
fn backward_args(ptrs: [DevicePtr; 6], (rows, cols): (usize, usize), flags: [bool; 2]) -> Vec<Arg> {
    let mut args: Vec<Arg> = ptrs.into_iter().map(Arg::Ptr).collect();
    args.push(Arg::U64(cols as u64));
    if by_warps(cols) {
        args.push(Arg::U64(rows as u64));
    }
    args.extend(flags.map(|f| Arg::U32(f as u32)));
    args
}

/// The launch of the row kernels over `rows` rows of `cols`: a warp per row (blocks of
/// several warps) when [`by_warps`], else a block per row.
fn rows_grid(op: &'static str, rows: usize, cols: usize) -> Result<LaunchConfig> {
    if rows > i32::MAX as usize {
        return Err(BackendError::BadArgument {
            op,
            msg: format!("{rows} rows are more than one launch's grid holds"),
        });
    }
    if by_warps(cols) {
        return Ok(warp_rows_config(rows));
    }
    Ok(LaunchConfig {
        grid: (rows as u32, 1, 1),
        // Enough threads to hold the row in registers, 32 values each (at most 256 threads).
        block: (held_row_block(cols), 1, 1),
        shared_mem: 0,
    })
}

/// The address of a dense `[cols]` operand, or of `fallback` when there is none (the kernel
/// then never reads it); the dense copy, if one was made, stays alive in `keep`.
fn optional<E: Element>(
    op: Option<(&CudaStorage<E>, &Layout)>,
    fallback: DevicePtr,
    keep: &mut Vec<CudaStorage<E>>,
) -> Result<DevicePtr> {
    match op {
        Some((s, l)) => {
            let (d, start) = dense_view(s, l)?;
            let p = d.ptr_at(start);
            keep.push(d);
            Ok(p)
        }
        None => Ok(fallback),
    }
}

/// Layer norm (`centered`) or RMS norm of each last-axis row of `x`: the dense output and the
/// row statistics. One launch (plus dense copies of operands that are not contiguous).
pub(crate) fn norm_rows<E: Element>(
    (x, xl): (&CudaStorage<E>, &Layout),
    weight: Option<(&CudaStorage<E>, &Layout)>,
    bias: Option<(&CudaStorage<E>, &Layout)>,
    eps: f64,
    centered: bool,
) -> Result<(CudaStorage<E>, Stats)> {
    let n = xl.numel();
    let cols = xl.dims().last().copied().unwrap_or(1);
    let rows = n.checked_div(cols).unwrap_or(0);
    let src = row_kernels(cols).0;
    let e = entry::<E>(x.ordinal(), src)?;
    let ordinal = x.ordinal();
    let y = CudaStorage::<E>::uninit(ordinal, n)?;
    let stats = Stats {
        mean: AccBuf::uninit(ordinal, E::DTYPE, rows)?,
        rstd: AccBuf::uninit(ordinal, E::DTYPE, rows)?,
    };
    if n == 0 {
        return Ok((y, stats));
    }
    let config = rows_grid("layer_norm", rows, cols)?;
    let (xd, start) = dense_view(x, xl)?;
    let xp = xd.ptr_at(start);
    let mut keep = Vec::new();
    let wp = optional(weight, xp, &mut keep)?;
    let bp = optional(bias, xp, &mut keep)?;
    let ptrs = [
        xp,
        wp,
        bp,
        y.device_ptr(),
        stats.mean.ptr(),
        stats.rstd.ptr(),
    ];
    let flags = [centered, weight.is_some(), bias.is_some()];
    let args = forward_args(ptrs, (rows, cols), eps, flags);
    // SAFETY: `x` holds rows * cols dense elements from `start`, the weight and bias `cols`
    // (read only when present), `y` rows * cols, the statistics `rows` values of the entry's
    // compute type; a warp per row (warps past the last row return) or a block per row, with
    // a block size that is a multiple of 32, at most 256.
    unsafe { launch_entry(ordinal, src, e, config, &args)? };
    drop((xd, keep));
    Ok((y, stats))
}

/// The gradients of [`norm_rows`] from the output gradient `dy` (laid out like `x`): the dense
/// input gradient, and the weight and bias gradients (`[cols]`) when `want` asks for them.
/// One launch for the input gradient, two more for the parameters'.
#[allow(clippy::type_complexity)]
pub(crate) fn norm_rows_backward<E: Element>(
    (dy, dyl): (&CudaStorage<E>, &Layout),
    (x, xl): (&CudaStorage<E>, &Layout),
    weight: Option<(&CudaStorage<E>, &Layout)>,
    stats: &Stats,
    centered: bool,
    (want_weight, want_bias): (bool, bool),
) -> Result<(
    CudaStorage<E>,
    Option<CudaStorage<E>>,
    Option<CudaStorage<E>>,
)> {
    let ordinal = x.ordinal();
    let n = xl.numel();
    let cols = xl.dims().last().copied().unwrap_or(1);
    let rows = n.checked_div(cols).unwrap_or(0);
    let src = row_kernels(cols).1;
    let e = entry::<E>(ordinal, src)?;
    let dx = CudaStorage::<E>::uninit(ordinal, n)?;
    let (xd, xs) = dense_view(x, xl)?;
    let (gd, gs) = dense_view(dy, dyl)?;
    let (xp, gp) = (xd.ptr_at(xs), gd.ptr_at(gs));
    if n > 0 {
        let mut keep = Vec::new();
        let wp = optional(weight, xp, &mut keep)?;
        let ptrs = [
            gp,
            xp,
            wp,
            stats.mean.ptr(),
            stats.rstd.ptr(),
            dx.device_ptr(),
        ];
        let args = backward_args(ptrs, (rows, cols), [centered, weight.is_some()]);
        let config = rows_grid("layer_norm backward", rows, cols)?;
        // SAFETY: `dy` and `x` hold rows * cols dense elements from their starts, the weight
        // `cols`, the statistics `rows` compute-type values, `dx` rows * cols; a warp per row
        // (warps past the last row return) or a block per row, with a block size that is a
        // multiple of 32, at most 256.
        unsafe { launch_entry(ordinal, src, e, config, &args)? };
        drop(keep);
    }
    if !(want_weight || want_bias) {
        return Ok((dx, None, None));
    }
    let (dw, db) = param_grads::<E>(ordinal, (gp, xp), stats, rows, cols, centered)?;
    drop((xd, gd));
    Ok((dx, want_weight.then_some(dw), want_bias.then_some(db)))
}

/// Rows summed by one task of the parameter gradients: chunks of about 64 rows, at most 256
/// chunks (a partial sum of `cols` values each).
fn rows_per_chunk(rows: usize) -> usize {
    rows.div_ceil(256).max(64).min(rows.max(1))
}

/// The weight and bias gradients: per-chunk column sums in the compute type, then the sum of
/// the chunks in order. Two launches.
fn param_grads<E: Element>(
    ordinal: usize,
    (gp, xp): (DevicePtr, DevicePtr),
    stats: &Stats,
    rows: usize,
    cols: usize,
    centered: bool,
) -> Result<(CudaStorage<E>, CudaStorage<E>)> {
    let partial_src = &kernels::norm_param_partials::KERNEL;
    let finish_src = &kernels::norm_param_finish::KERNEL;
    let pe = entry::<E>(ordinal, partial_src)?;
    let fe = entry::<E>(ordinal, finish_src)?;
    let dw = CudaStorage::<E>::uninit(ordinal, cols)?;
    let db = CudaStorage::<E>::uninit(ordinal, cols)?;
    if cols == 0 {
        return Ok((dw, db));
    }
    let per = rows_per_chunk(rows);
    // At least one chunk, so that zero rows still write zero gradients.
    let chunks = rows.div_ceil(per).max(1);
    let dwp = AccBuf::uninit(ordinal, E::DTYPE, chunks * cols)?;
    let dbp = AccBuf::uninit(ordinal, E::DTYPE, chunks * cols)?;
    let block = 256u32;
    let config = LaunchConfig {
        grid: (cols.div_ceil(block as usize) as u32, chunks as u32, 1),
        block: (block, 1, 1),
        shared_mem: 0,
    };
    let args = [
        Arg::Ptr(gp),
        Arg::Ptr(xp),
        Arg::Ptr(stats.mean.ptr()),
        Arg::Ptr(stats.rstd.ptr()),
        Arg::Ptr(dwp.ptr()),
        Arg::Ptr(dbp.ptr()),
        Arg::U64(rows as u64),
        Arg::U64(cols as u64),
        Arg::U64(per as u64),
        Arg::U32(centered as u32),
    ];
    // SAFETY: `dy` and `x` hold rows * cols dense elements, the statistics `rows` values;
    // chunk k reads rows k * per .. min(rows, (k + 1) * per) and writes its `cols` partials.
    unsafe { launch_entry(ordinal, partial_src, pe, config, &args)? };
    let args = [
        Arg::Ptr(dwp.ptr()),
        Arg::Ptr(dbp.ptr()),
        Arg::Ptr(dw.device_ptr()),
        Arg::Ptr(db.device_ptr()),
        Arg::U64(chunks as u64),
        Arg::U64(cols as u64),
        Arg::U32(1),
    ];
    let config = LaunchConfig::for_elements(cols.min(1 << 20), block);
    // SAFETY: the partials hold chunks * cols values, `dw` and `db` `cols` elements.
    unsafe { launch_entry(ordinal, finish_src, fe, config, &args)? };
    drop((dwp, dbp));
    Ok((dw, db))
}

#[cfg(test)]
mod tests {
    use super::super::kernels::marshal;
    use super::*;

    #[test]
    fn row_kernel_arguments_fit_every_entry_on_both_sides_of_the_warp_limit() {
        let p = [0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000].map(DevicePtr);
        for cols in [1, 512, WARP_ROW_MAX, WARP_ROW_MAX + 1, 8229] {
            let (fwd, bwd) = row_kernels(cols);
            let warp = cols <= WARP_ROW_MAX;
            assert_eq!(fwd.name.contains("warp"), warp, "{cols}: {}", fwd.name);
            assert_eq!(bwd.name.contains("warp"), warp, "{cols}: {}", bwd.name);
            let cases = [
                (fwd, forward_args(p, (7, cols), 1e-5, [true, true, false])),
                (bwd, backward_args(p, (7, cols), [false, true])),
            ];
            for (src, args) in &cases {
                assert_eq!(src.entries.len(), 4, "{}: the four float types", src.name);
                for e in src.entries {
                    if let Err(err) = marshal(e, e.dtype, args) {
                        panic!("{} for {cols} columns: {err}", e.symbol);
                    }
                }
            }
            // A warp a row, four rows a block, or a block a row.
            let config = rows_grid("test", 9, cols).unwrap_or_else(|e| panic!("{e}"));
            if warp {
                assert_eq!((config.grid.0, config.block.0), (3, 128));
            } else {
                assert_eq!((config.grid.0, config.block.0), (9, held_row_block(cols)));
            }
        }
        assert!(rows_grid("test", 1 << 40, 64).is_err());
    }
}
