//! The GPU side of fused cross entropy and dropout. Cross entropy's forward is two launches
//! (one block per row for the row losses and logsumexps, then one block for the mean over the
//! kept rows, the kept count and the first out-of-range target) and one 16-byte read-back of
//! that target; its backward is one launch. Dropout is one launch each way.
//!
//! Invariant: sums run in an order fixed by the sizes (no atomics), so results repeat run to
//! run; the dropout mask is word `i` of the seed's Philox stream, bitwise the CPU's.
//!
//! Why the read-back: `try_cross_entropy_with` returns an error naming the first bad target
//! and its row, so the host must know it before returning. The kernels find it on the device
//! (no copy of the targets), and only that pair comes back; the wait it costs is the forward's
//! two launches, which the host would wait for anyway to read the loss in a training loop.

use super::gpu::gpu;
use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::LaunchConfig;
use super::ops::dense_view;
use super::ops_norm::AccBuf;
use super::storage::CudaStorage;
use crate::{BackendError, Layout, Result};
use rtx_kernels::kernel::{KernelEntry, KernelSource, Variant};
use rtx_kernels::{Element, kernels};

/// What the forward keeps for the backward: per row the logsumexp, and the kept-row count,
/// both in the compute type on the device.
#[derive(Clone, Debug)]
pub(crate) struct CeSaved {
    pub(crate) lse: AccBuf,
    pub(crate) kept: AccBuf,
}

fn entry<E: Element>(ordinal: usize, src: &'static KernelSource) -> Result<&'static KernelEntry> {
    kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)
}

/// One block per row: about four elements per thread, a multiple of 32, at most 512.
fn rows_grid(op: &'static str, rows: usize, cols: usize) -> Result<LaunchConfig> {
    if rows > i32::MAX as usize {
        return Err(BackendError::BadArgument {
            op,
            msg: format!("{rows} rows are more than one launch's grid holds"),
        });
    }
    Ok(LaunchConfig {
        grid: (rows as u32, 1, 1),
        block: (
            (cols.div_ceil(4).div_ceil(32) * 32).clamp(32, 512) as u32,
            1,
            1,
        ),
        shared_mem: 0,
    })
}

/// The mean cross entropy of dense-viewed `[rows, cols]` logits `x` against `[rows]`
/// `targets`: the one-element loss and what the backward needs, or an error (under `op`)
/// naming the first target that is neither ignored nor inside `0..cols`.
pub(crate) fn cross_entropy<E: Element>(
    op: &'static str,
    (x, xl): (&CudaStorage<E>, &Layout),
    (t, tl): (&CudaStorage<i64>, &Layout),
    ignore: Option<i64>,
    smoothing: f64,
) -> Result<(CudaStorage<E>, CeSaved)> {
    let ordinal = x.ordinal();
    let rows = tl.numel();
    let cols = xl.numel().checked_div(rows).unwrap_or(0);
    let out = CudaStorage::<E>::uninit(ordinal, 1)?;
    let saved = CeSaved {
        lse: AccBuf::uninit(ordinal, E::DTYPE, rows)?,
        kept: AccBuf::uninit(ordinal, E::DTYPE, 1)?,
    };
    let loss = AccBuf::uninit(ordinal, E::DTYPE, rows)?;
    let bad = CudaStorage::<i64>::uninit(ordinal, 2)?;
    let (xd, xs) = dense_view(x, xl)?;
    let (td, ts) = dense_view(t, tl)?;
    let (ign, has) = (ignore.unwrap_or(0), ignore.is_some() as u32);
    if rows > 0 {
        let src = &kernels::cross_entropy_rows::KERNEL;
        let args = [
            Arg::Ptr(xd.ptr_at(xs)),
            Arg::Ptr(td.ptr_at(ts)),
            Arg::Ptr(loss.ptr()),
            Arg::Ptr(saved.lse.ptr()),
            Arg::U64(cols as u64),
            Arg::I64(ign),
            Arg::U32(has),
            Arg::Acc(E::from_f64(smoothing).to_f64()),
        ];
        // SAFETY: `x` holds rows * cols dense elements from `xs`, the targets `rows` from
        // `ts`, `loss` and `lse` `rows` values of the compute type; one block per row, a
        // block size that is a multiple of 32, at most 512.
        let config = rows_grid(op, rows, cols)?;
        unsafe { launch_entry(ordinal, src, entry::<E>(ordinal, src)?, config, &args)? };
    }
    let src = &kernels::cross_entropy_mean::KERNEL;
    let args = [
        Arg::Ptr(loss.ptr()),
        Arg::Ptr(td.ptr_at(ts)),
        Arg::Ptr(out.device_ptr()),
        Arg::Ptr(saved.kept.ptr()),
        Arg::Ptr(bad.device_ptr()),
        Arg::U64(rows as u64),
        Arg::U64(cols as u64),
        Arg::I64(ign),
        Arg::U32(has),
    ];
    let config = LaunchConfig {
        grid: (1, 1, 1),
        block: (256, 1, 1),
        shared_mem: 0,
    };
    // SAFETY: `loss` and the targets hold `rows` values, `out` and `kept` one, `bad` two; one
    // block of 256 threads, as the kernel's tree reduction needs.
    unsafe { launch_entry(ordinal, src, entry::<E>(ordinal, src)?, config, &args)? };
    // While a graph is captured nothing can be read back: the kernels count an out-of-range
    // target as no loss and no gradient, and the check happens on uncaptured runs.
    let found = match super::graph::is_capturing(ordinal)? {
        true => Vec::new(),
        false => bad.to_host()?,
    };
    if let [row, target] = found[..]
        && row >= 0
    {
        return Err(BackendError::BadArgument {
            op,
            msg: format!("target {target} at [{row}] is outside 0..{cols}"),
        });
    }
    drop((xd, td, loss));
    Ok((out, saved))
}

/// The gradient of [`cross_entropy`] with respect to its logits, for the one-element output
/// gradient `g`: dense `[rows, cols]`, one launch.
pub(crate) fn cross_entropy_backward<E: Element>(
    (g, gl): (&CudaStorage<E>, &Layout),
    (x, xl): (&CudaStorage<E>, &Layout),
    (t, tl): (&CudaStorage<i64>, &Layout),
    saved: &CeSaved,
    ignore: Option<i64>,
    smoothing: f64,
) -> Result<CudaStorage<E>> {
    let ordinal = x.ordinal();
    let rows = tl.numel();
    let n = xl.numel();
    let cols = n.checked_div(rows).unwrap_or(0);
    let dx = CudaStorage::<E>::uninit(ordinal, n)?;
    if n == 0 {
        return Ok(dx);
    }
    let (gd, gs) = dense_view(g, gl)?;
    let (xd, xs) = dense_view(x, xl)?;
    let (td, ts) = dense_view(t, tl)?;
    let src = &kernels::cross_entropy_backward_rows::KERNEL;
    let args = [
        Arg::Ptr(xd.ptr_at(xs)),
        Arg::Ptr(td.ptr_at(ts)),
        Arg::Ptr(saved.lse.ptr()),
        Arg::Ptr(gd.ptr_at(gs)),
        Arg::Ptr(saved.kept.ptr()),
        Arg::Ptr(dx.device_ptr()),
        Arg::U64(cols as u64),
        Arg::I64(ignore.unwrap_or(0)),
        Arg::U32(ignore.is_some() as u32),
        Arg::Acc(E::from_f64(smoothing).to_f64()),
    ];
    let config = rows_grid("cross_entropy", rows, cols)?;
    // SAFETY: `x` and `dx` hold rows * cols dense elements, the targets and `lse` `rows`,
    // `g` and `kept` one; one block per row.
    unsafe { launch_entry(ordinal, src, entry::<E>(ordinal, src)?, config, &args)? };
    drop((gd, xd, td));
    Ok(dx)
}

/// `x * keep * scale` with `keep` drawn from the Philox stream of `seed` (word `i` below
/// `threshold`), dense; one launch.
pub(crate) fn dropout<E: Element>(
    (x, xl): (&CudaStorage<E>, &Layout),
    seed: u64,
    threshold: u64,
    scale: f64,
) -> Result<CudaStorage<E>> {
    let ordinal = x.ordinal();
    // The seed is a launch argument, so a replayed graph would apply this one mask every step.
    if gpu(ordinal)?.capturing() {
        return Err(BackendError::BadArgument {
            op: "dropout",
            msg: "a dropout mask cannot be drawn inside a captured CUDA graph: every replay \
                  would repeat it. Put the model in eval mode, or train it without capture \
                  (the tape or `forward_train`)"
                .into(),
        });
    }
    let n = xl.numel();
    let out = CudaStorage::<E>::uninit(ordinal, n)?;
    if n == 0 {
        return Ok(out);
    }
    let (xd, xs) = dense_view(x, xl)?;
    let src = &kernels::random_dropout::KERNEL;
    let args = [
        Arg::Ptr(xd.ptr_at(xs)),
        Arg::Ptr(out.device_ptr()),
        Arg::U64(n as u64),
        Arg::U64(seed),
        Arg::U64(threshold),
        Arg::Acc(E::from_f64(scale).to_f64()),
    ];
    // One thread per Philox block of four elements; grid-stride loops cover the rest.
    let config = LaunchConfig::for_elements(n.div_ceil(4).min(1 << 22), 256);
    // SAFETY: the kernel reads and writes elements 0..n of `x` (dense from `xs`) and `out`.
    unsafe { launch_entry(ordinal, src, entry::<E>(ordinal, src)?, config, &args)? };
    drop(xd);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::kernels::marshal;
    use super::super::launch::DevicePtr;
    use super::*;

    #[test]
    fn arguments_fit_every_entry() {
        let p = Arg::Ptr(DevicePtr(512));
        let (u, i, w, a) = (Arg::U64(3), Arg::I64(-100), Arg::U32(1), Arg::Acc(0.1));
        let cases: [(&KernelSource, Vec<Arg>); 4] = [
            (
                &kernels::cross_entropy_rows::KERNEL,
                vec![p, p, p, p, u, i, w, a],
            ),
            (
                &kernels::cross_entropy_mean::KERNEL,
                vec![p, p, p, p, p, u, u, i, w],
            ),
            (
                &kernels::cross_entropy_backward_rows::KERNEL,
                vec![p, p, p, p, p, p, u, i, w, a],
            ),
            (&kernels::random_dropout::KERNEL, vec![p, p, u, u, u, a]),
        ];
        for (src, args) in &cases {
            assert_eq!(src.entries.len(), 4, "{}: the four float types", src.name);
            for e in src.entries {
                if let Err(err) = marshal(e, e.dtype, args) {
                    panic!("{}: {err}", e.symbol);
                }
            }
        }
    }
}
