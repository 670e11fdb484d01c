//! Backend entry points for fused optimizer updates (the GPU side in
//! `rtx-backends/src/cuda/ops_optim.rs`). They take the parameter and gradient as
//! viewed (any layout) and dense state, and return fresh dense storage: tensors share their
//! storage, so an update never writes into a buffer someone else may be reading.

use super::{Storage, same_device};
use crate::cpu::optim::{self, AdamScalars, SgdScalars};
use crate::{BackendError, Layout, Result};
use rtx_kernels::Float;

/// Checks that a dense state buffer has one element per parameter element.
fn check_len(op: &'static str, len: usize, n: usize) -> Result<()> {
    if len == n {
        Ok(())
    } else {
        Err(BackendError::BadArgument {
            op,
            msg: format!("optimizer state holds {len} elements for a parameter of {n}"),
        })
    }
}

/// The GPU buffer of a state or gradient operand of an update on `dev`.
fn cuda_of<'a, E: Float>(
    op: &'static str,
    dev: crate::Device,
    s: &'a Storage<E>,
) -> Result<&'a crate::cuda::CudaStorage<E>> {
    match s {
        Storage::Cuda(c) if s.device() == dev => Ok(c),
        _ => Err(BackendError::DeviceMismatch {
            op,
            lhs: dev,
            rhs: s.device(),
        }),
    }
}

impl<E: Float> Storage<E> {
    /// One fused Adam/AdamW step. `self`/`pl` is the parameter, `grad`/`gl` its gradient (same
    /// logical sizes); `m`, `v` and `vmax` are dense. Returns the new parameter (dense, in
    /// logical order), `m`, `v` and `vmax`.
    #[allow(clippy::type_complexity)]
    pub fn adam_update(
        &self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        m: &Self,
        v: &Self,
        vmax: Option<&Self>,
        s: &AdamScalars,
    ) -> Result<(Self, Self, Self, Option<Self>)> {
        same_device("adam", self, grad)?;
        let n = pl.numel();
        if let Storage::Cuda(p) = self {
            let dev = self.device();
            let g = cuda_of("adam", dev, grad)?;
            let (m, v) = (cuda_of("adam", dev, m)?, cuda_of("adam", dev, v)?);
            let x = vmax.map(|x| cuda_of("adam", dev, x)).transpose()?;
            for len in [Some(m.len()), Some(v.len()), x.map(|x| x.len())]
                .into_iter()
                .flatten()
            {
                check_len("adam", len, n)?;
            }
            let (np, nm, nv, nx) = crate::cuda::ops_optim::adam((p, pl), (g, gl), (m, v, x), s)?;
            return Ok((
                Storage::Cuda(np),
                Storage::Cuda(nm),
                Storage::Cuda(nv),
                nx.map(Storage::Cuda),
            ));
        }
        let (Some(m), Some(v)) = (m.as_cpu_slice(), v.as_cpu_slice()) else {
            return Err(super::no_kernel("adam", self.device()));
        };
        check_len("adam", m.len(), n)?;
        check_len("adam", v.len(), n)?;
        let mut vmax = match vmax {
            Some(x) => Some(
                x.as_cpu_slice()
                    .ok_or_else(|| super::no_kernel("adam", x.device()))?
                    .to_vec(),
            ),
            None => None,
        };
        if let Some(x) = &vmax {
            check_len("adam", x.len(), n)?;
        }
        if self.device() != crate::Device::Cpu {
            return Err(super::no_kernel("adam", self.device()));
        }
        crate::dispatch::cpu();
        let mut p = self.try_to_vec(pl)?;
        let g = grad.try_to_vec(gl)?;
        let (mut m, mut v) = (m.to_vec(), v.to_vec());
        optim::adam(&mut p, &g, &mut m, &mut v, vmax.as_deref_mut(), s);
        let dev = self.device();
        Ok((
            Storage::from_vec(p, dev)?,
            Storage::from_vec(m, dev)?,
            Storage::from_vec(v, dev)?,
            vmax.map(|x| Storage::from_vec(x, dev)).transpose()?,
        ))
    }

    /// One fused SGD step; `buf` is the dense momentum buffer when momentum is on. Returns the
    /// new parameter (dense, in logical order) and the new buffer.
    pub fn sgd_update(
        &self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        buf: Option<&Self>,
        s: &SgdScalars,
    ) -> Result<(Self, Option<Self>)> {
        same_device("sgd", self, grad)?;
        let n = pl.numel();
        if let Storage::Cuda(p) = self {
            let dev = self.device();
            let g = cuda_of("sgd", dev, grad)?;
            let b = buf.map(|b| cuda_of("sgd", dev, b)).transpose()?;
            if let Some(b) = b {
                check_len("sgd", b.len(), n)?;
            }
            let (np, nb) = crate::cuda::ops_optim::sgd((p, pl), (g, gl), b, s)?;
            return Ok((Storage::Cuda(np), nb.map(Storage::Cuda)));
        }
        if self.device() != crate::Device::Cpu {
            return Err(super::no_kernel("sgd", self.device()));
        }
        let mut buf = match buf {
            Some(b) => Some(
                b.as_cpu_slice()
                    .ok_or_else(|| super::no_kernel("sgd", b.device()))?
                    .to_vec(),
            ),
            None => None,
        };
        if let Some(b) = &buf {
            check_len("sgd", b.len(), n)?;
        }
        crate::dispatch::cpu();
        let mut p = self.try_to_vec(pl)?;
        let g = grad.try_to_vec(gl)?;
        optim::sgd(&mut p, &g, buf.as_deref_mut(), s);
        let dev = self.device();
        Ok((
            Storage::from_vec(p, dev)?,
            buf.map(|b| Storage::from_vec(b, dev)).transpose()?,
        ))
    }
}
