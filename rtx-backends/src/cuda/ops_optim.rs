//! The GPU side of the fused optimizer updates: one launch reads a parameter, its gradient and
//! its state and writes the new parameter and state.
//!
//! Invariant: the results are fresh buffers, as the storage entry points promise (a tensor's
//! storage may be shared, so it is never written in place), and each element follows the CPU
//! backend's sequence of roundings (`rtx-backends/src/cpu/optim.rs`) with the same scalars,
//! computed on the host in f64.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::LaunchConfig;
use super::ops::dense_view;
use super::storage::CudaStorage;
use crate::{AdamScalars, SgdScalars};
use crate::{Layout, Result};
use rtx_kernels::kernel::Variant;
use rtx_kernels::{Element, kernels};

/// Threads per block of the update kernels.
const BLOCK: u32 = 256;

/// One Adam/AdamW step: the parameter and gradient as viewed, dense state of the same length.
/// Returns the new parameter (dense, logical order), `m`, `v` and `vmax`.
#[allow(clippy::type_complexity)]
pub(crate) fn adam<E: Element>(
    (p, pl): (&CudaStorage<E>, &Layout),
    (g, gl): (&CudaStorage<E>, &Layout),
    (m, v, vmax): (&CudaStorage<E>, &CudaStorage<E>, Option<&CudaStorage<E>>),
    s: &AdamScalars,
) -> Result<(
    CudaStorage<E>,
    CudaStorage<E>,
    CudaStorage<E>,
    Option<CudaStorage<E>>,
)> {
    let ordinal = p.ordinal();
    let src = &kernels::adam_step::KERNEL;
    let e = kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let n = pl.numel();
    let (pd, ps) = dense_view(p, pl)?;
    let (gd, gs) = dense_view(g, gl)?;
    let np = CudaStorage::<E>::uninit(ordinal, n)?;
    let nm = CudaStorage::<E>::uninit(ordinal, n)?;
    let nv = CudaStorage::<E>::uninit(ordinal, n)?;
    let nx = vmax
        .map(|_| CudaStorage::<E>::uninit(ordinal, n))
        .transpose()?;
    if n == 0 {
        return Ok((np, nm, nv, nx));
    }
    // Without AMSGrad the kernel never touches the `vmax` pointers; `v` stands in for them.
    let (xin, xout) = match (vmax, &nx) {
        (Some(x), Some(o)) => (x.device_ptr(), o.device_ptr()),
        _ => (v.device_ptr(), nv.device_ptr()),
    };
    let w1 = 1.0 - s.beta1;
    let args = [
        Arg::Ptr(pd.ptr_at(ps)),
        Arg::Ptr(gd.ptr_at(gs)),
        Arg::Ptr(m.device_ptr()),
        Arg::Ptr(v.device_ptr()),
        Arg::Ptr(xin),
        Arg::Ptr(np.device_ptr()),
        Arg::Ptr(nm.device_ptr()),
        Arg::Ptr(nv.device_ptr()),
        Arg::Ptr(xout),
        Arg::U64(n as u64),
        Arg::Acc(s.decay),
        Arg::Acc(s.l2),
        Arg::Acc(w1),
        Arg::Acc(s.beta2),
        Arg::Acc(1.0 - s.beta2),
        Arg::Acc(s.bias_correction2_sqrt),
        Arg::Acc(s.neg_step_size),
        Arg::Acc(s.eps),
        Arg::U32((s.decay != 1.0) as u32),
        Arg::U32((s.l2 != 0.0) as u32),
        Arg::U32((w1.abs() < 0.5) as u32),
        Arg::U32(vmax.is_some() as u32),
    ];
    let config = LaunchConfig::for_elements(n.min(1 << 24), BLOCK);
    // SAFETY: the parameter and gradient hold `n` dense elements from their starts, `m`, `v`
    // (and `vmax`) `n` each (checked by the caller), and every output `n`.
    unsafe { launch_entry(ordinal, src, e, config, &args)? };
    drop((pd, gd));
    Ok((np, nm, nv, nx))
}

/// One SGD step; `buf` is the dense momentum buffer when momentum is on. Returns the new
/// parameter (dense, logical order) and the new buffer.
pub(crate) fn sgd<E: Element>(
    (p, pl): (&CudaStorage<E>, &Layout),
    (g, gl): (&CudaStorage<E>, &Layout),
    buf: Option<&CudaStorage<E>>,
    s: &SgdScalars,
) -> Result<(CudaStorage<E>, Option<CudaStorage<E>>)> {
    let ordinal = p.ordinal();
    let src = &kernels::sgd_step::KERNEL;
    let e = kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let n = pl.numel();
    let (pd, ps) = dense_view(p, pl)?;
    let (gd, gs) = dense_view(g, gl)?;
    let np = CudaStorage::<E>::uninit(ordinal, n)?;
    let nb = buf
        .map(|_| CudaStorage::<E>::uninit(ordinal, n))
        .transpose()?;
    if n == 0 {
        return Ok((np, nb));
    }
    // Without momentum the kernel never touches the buffer pointers; the parameter's stand in.
    let (bin, bout) = match (buf, &nb) {
        (Some(b), Some(o)) => (b.device_ptr(), o.device_ptr()),
        _ => (pd.ptr_at(ps), np.device_ptr()),
    };
    let args = [
        Arg::Ptr(pd.ptr_at(ps)),
        Arg::Ptr(gd.ptr_at(gs)),
        Arg::Ptr(bin),
        Arg::Ptr(np.device_ptr()),
        Arg::Ptr(bout),
        Arg::U64(n as u64),
        Arg::Acc(-s.lr),
        Arg::Acc(s.momentum),
        Arg::Acc(1.0 - s.dampening),
        Arg::Acc(s.weight_decay),
        Arg::U32((s.weight_decay != 0.0) as u32),
        Arg::U32(buf.is_some() as u32),
        Arg::U32(s.first as u32),
        Arg::U32(s.nesterov as u32),
    ];
    let config = LaunchConfig::for_elements(n.min(1 << 24), BLOCK);
    // SAFETY: the parameter and gradient hold `n` dense elements from their starts, the
    // buffer `n` (checked by the caller), and every output `n`.
    unsafe { launch_entry(ordinal, src, e, config, &args)? };
    drop((pd, gd));
    Ok((np, nb))
}
