//! The GPU side of fused layer norm and RMS norm over the last axis: the forward is one launch
//! (one block per row) that also saves each row's mean and reciprocal standard deviation in
//! the compute type; the backward is one launch for the input gradient and two for the weight
//! and bias gradients (per-chunk column sums, then the sum of the chunks).
//!
//! Invariant: every sum runs in an order fixed by the sizes alone (block sizes and chunk
//! counts are functions of the row length and row count), so results are the same run to
//! run; no atomics.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::{DevicePtr, LaunchConfig};
use super::ops::{dense_view, held_row_block};
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

fn rows_grid(op: &'static str, rows: usize, cols: usize) -> Result<LaunchConfig> {
    if rows > i32::MAX as usize {
        return Err(BackendError::BadArgument {
            op,
            msg: format!("{rows} rows are more than one launch's grid holds"),
        });
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
    let src = &kernels::norm_rows::KERNEL;
    let e = entry::<E>(x.ordinal(), src)?;
    let ordinal = x.ordinal();
    let n = xl.numel();
    let cols = xl.dims().last().copied().unwrap_or(1);
    let rows = n.checked_div(cols).unwrap_or(0);
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
    let args = [
        Arg::Ptr(xp),
        Arg::Ptr(wp),
        Arg::Ptr(bp),
        Arg::Ptr(y.device_ptr()),
        Arg::Ptr(stats.mean.ptr()),
        Arg::Ptr(stats.rstd.ptr()),
        Arg::U64(cols as u64),
        Arg::Acc(eps),
        Arg::U32(centered as u32),
        Arg::U32(weight.is_some() as u32),
        Arg::U32(bias.is_some() as u32),
    ];
    // SAFETY: `x` holds rows * cols dense elements from `start`, the weight and bias `cols`
    // (read only when present), `y` rows * cols, the statistics `rows` values of the entry's
    // compute type; one block per row, a block size that is a multiple of 32, at most 256.
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
    let src = &kernels::norm_backward_rows::KERNEL;
    let e = entry::<E>(ordinal, src)?;
    let n = xl.numel();
    let cols = xl.dims().last().copied().unwrap_or(1);
    let rows = n.checked_div(cols).unwrap_or(0);
    let dx = CudaStorage::<E>::uninit(ordinal, n)?;
    let (xd, xs) = dense_view(x, xl)?;
    let (gd, gs) = dense_view(dy, dyl)?;
    let (xp, gp) = (xd.ptr_at(xs), gd.ptr_at(gs));
    if n > 0 {
        let mut keep = Vec::new();
        let wp = optional(weight, xp, &mut keep)?;
        let args = [
            Arg::Ptr(gp),
            Arg::Ptr(xp),
            Arg::Ptr(wp),
            Arg::Ptr(stats.mean.ptr()),
            Arg::Ptr(stats.rstd.ptr()),
            Arg::Ptr(dx.device_ptr()),
            Arg::U64(cols as u64),
            Arg::U32(centered as u32),
            Arg::U32(weight.is_some() as u32),
        ];
        let config = rows_grid("layer_norm backward", rows, cols)?;
        // SAFETY: `dy` and `x` hold rows * cols dense elements from their starts, the weight
        // `cols`, the statistics `rows` compute-type values, `dx` rows * cols; one block per
        // row, a block size that is a multiple of 32, at most 256.
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
