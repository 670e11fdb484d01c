//! The GPU side of the multi-tensor casts (`rtx-backends/src/storage/cast_multi.rs`): one
//! launch converts every buffer of a table between a 16-bit or f32 element type and f32,
//! through the chunked tables of the multi-tensor optimizer kernels (`ops_optim_multi.rs`).
//!
//! Invariant: the table is uploaded only when its words change (a [`TableCache`] kept by the
//! caller), so a launch whose buffers have not moved does no host-to-device copy and can be
//! captured in a CUDA graph; each element converts exactly as the single-tensor cast does.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::DevicePtr;
use super::ops_optim_multi::{CHUNK, Table, TableCache, chunk_sections, config};
use crate::Result;
use rtx_kernels::DType;
use rtx_kernels::kernel::{KernelSource, Variant};
use rtx_kernels::kernels;

/// Which way a multi-tensor cast goes, relative to its kernel's element type `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From f32 (`T`'s compute type) to `T`.
    FromAcc,
    /// From `T` to f32.
    ToAcc,
}

/// One launch of a multi-tensor cast on GPU `ordinal`: buffer `t` of `src` (its address)
/// converted into buffer `t` of `dst`, `lens[t]` elements each, multiplied by the f32 at
/// `scale` when given. `dtype` is the kernel's element type (the side that is not f32, or
/// f32 for an f32-to-f32 copy).
///
/// # Safety
/// Every address must point at `lens[t]` elements of its side's type on that GPU (f32 on the
/// compute-type side, `dtype` on the other), and `scale` at one f32, for as long as the
/// launch runs.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn cast(
    ordinal: usize,
    dir: Direction,
    dtype: DType,
    src: &[DevicePtr],
    dst: &[DevicePtr],
    lens: &[usize],
    scale: Option<DevicePtr>,
    cache: &mut TableCache,
) -> Result<()> {
    let source: &'static KernelSource = match dir {
        Direction::FromAcc => &kernels::cast_from_acc_multi::KERNEL,
        Direction::ToAcc => &kernels::cast_to_acc_multi::KERNEL,
    };
    let e = kernel_entry(ordinal, source, dtype, dtype, Variant::Simt)?;
    let mut t = Table::new();
    let s = t.push(src.iter().map(|p| p.0));
    let d = t.push(dst.iter().map(|p| p.0));
    let (n_chunks, [r, st, l]) = chunk_sections(&mut t, lens);
    if n_chunks == 0 {
        return Ok(());
    }
    let a = t.upload(ordinal, cache)?;
    let args = [
        a[s],
        a[d],
        a[r],
        a[st],
        a[l],
        Arg::U64(n_chunks as u64),
        Arg::U64(CHUNK as u64),
        // Never read without the flag.
        Arg::Ptr(scale.unwrap_or(DevicePtr(0))),
        Arg::U32(scale.is_some() as u32),
    ];
    // SAFETY: the caller's promise covers every row and the scale; the chunk map stays inside
    // `lens`.
    unsafe { launch_entry(ordinal, source, e, config(n_chunks), &args) }
}
