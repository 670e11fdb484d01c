//! Backend entry points for multi-tensor optimizer updates and gradient clipping on a GPU
//! (the GPU side in `rtx-backends/src/cuda/ops_optim_multi.rs`): one launch updates every
//! parameter of one element type in place, and clipping by global norm costs three launches
//! per element type with the norm and the coefficient kept on the device.
//!
//! The updates write through the handles they are given: the caller guarantees that it owns
//! the parameter and state buffers alone (the handles are clones of storage nobody else
//! holds), as for [`Storage::adam_update_in_place`]. On the CPU these entry points are
//! errors: the CPU updates each tensor in place, which is as fast.

use super::Storage;
use crate::cuda::CudaStorage;
use crate::cuda::ops_optim_multi as ops;
use crate::{AdamScalars, SgdScalars};
use crate::{BackendError, Device, Layout, Result};
pub use ops::TableCache;
use rtx_kernels::Float;

/// One tensor of [`Storage::adam_update_multi`]: the parameter (dense over its storage), its
/// gradient as viewed, and its dense state.
#[derive(Clone, Copy, Debug)]
pub struct AdamSlot<'a, E> {
    /// The parameter, overwritten with its update.
    pub param: &'a Storage<E>,
    /// The gradient and its layout (the parameter's logical sizes).
    pub grad: (&'a Storage<E>, &'a Layout),
    /// The first moment, overwritten.
    pub m: &'a Storage<E>,
    /// The second moment, overwritten.
    pub v: &'a Storage<E>,
    /// The running maximum of `v` under AMSGrad, overwritten.
    pub vmax: Option<&'a Storage<E>>,
}

/// One tensor of [`Storage::sgd_update_multi`]: the parameter (dense over its storage), its
/// gradient as viewed, and its dense momentum buffer when momentum is on.
#[derive(Clone, Copy, Debug)]
pub struct SgdSlot<'a, E> {
    /// The parameter, overwritten with its update.
    pub param: &'a Storage<E>,
    /// The gradient and its layout (the parameter's logical sizes).
    pub grad: (&'a Storage<E>, &'a Layout),
    /// The momentum buffer, overwritten.
    pub buf: Option<&'a Storage<E>>,
}

/// The GPU buffer of one operand of a multi-tensor launch on GPU `ordinal` holding `n`
/// elements (`None` for `n`: any length).
fn gpu_buf<'a, E: Float>(
    op: &'static str,
    what: &str,
    ordinal: usize,
    s: &'a Storage<E>,
    n: Option<usize>,
) -> Result<&'a CudaStorage<E>> {
    let c = match s {
        Storage::Cuda(c) if c.ordinal() == ordinal => c,
        _ => {
            return Err(BackendError::DeviceMismatch {
                op,
                lhs: Device::Cuda(ordinal),
                rhs: s.device(),
            });
        }
    };
    match n {
        Some(n) if c.len() != n => Err(BackendError::BadArgument {
            op,
            msg: format!("{what} holds {} elements for a parameter of {n}", c.len()),
        }),
        _ => Ok(c),
    }
}

/// The GPU of the first slot's parameter, or an error naming `op` for a CPU one.
fn ordinal_of<E: Float>(op: &'static str, first: &Storage<E>) -> Result<usize> {
    match first.device() {
        Device::Cuda(n) => Ok(n),
        Device::Cpu | Device::Backend(_) => Err(BackendError::BadArgument {
            op,
            msg: format!(
                "multi-tensor updates run on a CUDA GPU; on {} update each tensor in place \
                 (`adam_update_in_place`, `sgd_update_in_place`)",
                first.device()
            ),
        }),
    }
}

/// Checks that a gradient's layout has one element per parameter element.
fn check_grad(op: &'static str, pl: usize, gl: &Layout) -> Result<()> {
    if gl.numel() == pl {
        Ok(())
    } else {
        Err(BackendError::BadArgument {
            op,
            msg: format!(
                "gradient {:?} does not fit a parameter of {pl} elements",
                gl.dims()
            ),
        })
    }
}

impl<E: Float> Storage<E> {
    /// One Adam/AdamW step over every tensor of `slots` in one launch, in place: each
    /// parameter and its state are overwritten with exactly what
    /// [`Storage::adam_update_in_place`] would write. Every slot is on the same GPU and has a
    /// `vmax` exactly when `s`'s caller uses AMSGrad (all or none). `cache` keeps the
    /// launch's table of buffers on the device between steps (see [`TableCache`]); the
    /// caller guarantees that nothing else reads the parameter and state buffers.
    pub fn adam_update_multi(
        slots: &[AdamSlot<'_, E>],
        s: &AdamScalars,
        cache: &mut TableCache,
    ) -> Result<()> {
        let Some(first) = slots.first() else {
            return Ok(());
        };
        let ordinal = ordinal_of("adam", first.param)?;
        let amsgrad = first.vmax.is_some();
        let bufs = slots
            .iter()
            .map(|t| {
                let p = gpu_buf("adam", "a parameter", ordinal, t.param, None)?;
                let n = Some(p.len());
                check_grad("adam", p.len(), t.grad.1)?;
                if t.vmax.is_some() != amsgrad {
                    return Err(BackendError::BadArgument {
                        op: "adam",
                        msg: "either every tensor of a multi-tensor step has a `vmax` or none"
                            .into(),
                    });
                }
                Ok(ops::AdamBufs {
                    p,
                    g: (
                        gpu_buf("adam", "a gradient", ordinal, t.grad.0, None)?,
                        t.grad.1,
                    ),
                    m: gpu_buf("adam", "exp_avg", ordinal, t.m, n)?,
                    v: gpu_buf("adam", "exp_avg_sq", ordinal, t.v, n)?,
                    vmax: t
                        .vmax
                        .map(|x| gpu_buf("adam", "max_exp_avg_sq", ordinal, x, n))
                        .transpose()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        ops::adam(ordinal, &bufs, amsgrad, s, cache)
    }

    /// One SGD step over every tensor of `slots` in one launch, in place, writing exactly
    /// what [`Storage::sgd_update_in_place`] would. Every slot is on the same GPU and has a
    /// momentum buffer exactly when `s.momentum != 0`; the caller guarantees that nothing
    /// else reads the parameter and buffer storage.
    pub fn sgd_update_multi(
        slots: &[SgdSlot<'_, E>],
        s: &SgdScalars,
        cache: &mut TableCache,
    ) -> Result<()> {
        let Some(first) = slots.first() else {
            return Ok(());
        };
        let ordinal = ordinal_of("sgd", first.param)?;
        let has_buf = s.momentum != 0.0;
        let bufs = slots
            .iter()
            .map(|t| {
                let p = gpu_buf("sgd", "a parameter", ordinal, t.param, None)?;
                check_grad("sgd", p.len(), t.grad.1)?;
                if t.buf.is_some() != has_buf {
                    return Err(BackendError::BadArgument {
                        op: "sgd",
                        msg: format!(
                            "a momentum buffer goes with momentum {} exactly when it is not 0",
                            s.momentum
                        ),
                    });
                }
                Ok(ops::SgdBufs {
                    p,
                    g: (
                        gpu_buf("sgd", "a gradient", ordinal, t.grad.0, None)?,
                        t.grad.1,
                    ),
                    buf: t
                        .buf
                        .map(|b| gpu_buf("sgd", "momentum_buffer", ordinal, b, Some(p.len())))
                        .transpose()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        ops::sgd(ordinal, &bufs, has_buf, s, cache)
    }
}

/// Gradient clipping by global norm on one GPU, with the norm kept on the device: add the
/// gradients of each element type ([`DeviceClip::add`], one launch each), compute the
/// coefficient ([`DeviceClip::coefficient`], one launch), then scale each group
/// ([`DeviceClip::scale`], one launch each) and read the norm back once at the end
/// ([`DeviceClip::norm`]). The norm is deterministic: fixed chunks, fixed reduction trees.
#[derive(Debug)]
pub struct DeviceClip {
    partial: CudaStorage<f64>,
    filled: usize,
    /// `[norm, coefficient]` once computed.
    coef: Option<CudaStorage<f64>>,
}

impl DeviceClip {
    /// The partial sums that gradients of `lens` elements need.
    pub fn chunks(lens: &[usize]) -> usize {
        ops::chunk_count(lens)
    }

    /// Room for `chunks` partial sums (the total of [`DeviceClip::chunks`] over the groups to
    /// add) on `device`, a GPU.
    pub fn new(device: Device, chunks: usize) -> Result<Self> {
        let Device::Cuda(ordinal) = device else {
            return Err(BackendError::BadArgument {
                op: "clip_grad_norm",
                msg: "the device clipping runs on a GPU".into(),
            });
        };
        Ok(DeviceClip {
            partial: CudaStorage::uninit(ordinal, chunks.max(1))?,
            filled: 0,
            coef: None,
        })
    }

    /// Adds the sums of squares of `grads` (one element type, this GPU), in one launch.
    pub fn add<E: Float>(
        &mut self,
        grads: &[(&Storage<E>, &Layout)],
        cache: &mut TableCache,
    ) -> Result<()> {
        let ordinal = self.partial.ordinal();
        let gs = grads
            .iter()
            .map(|(g, l)| {
                Ok((
                    gpu_buf("clip_grad_norm", "a gradient", ordinal, g, None)?,
                    *l,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        self.filled += ops::sum_squares(ordinal, &gs, &self.partial, self.filled, cache)?;
        Ok(())
    }

    /// Computes the norm of everything added and the clipping coefficient
    /// `max_norm / (norm + 1e-6)` on the device, in one launch.
    pub fn coefficient(&mut self, max_norm: f64) -> Result<()> {
        // With nothing added, the launch over no sums writes a norm of 0.
        self.coef = Some(ops::clip_coef(&self.partial, self.filled, max_norm)?);
        Ok(())
    }

    /// Fresh dense copies of `grads`, multiplied by the coefficient when it is below 1 (read
    /// on the device), in one launch.
    pub fn scale<E: Float>(
        &self,
        grads: &[(&Storage<E>, &Layout)],
        cache: &mut TableCache,
    ) -> Result<Vec<Storage<E>>> {
        let coef = self.coef_buf()?;
        let ordinal = coef.ordinal();
        let gs = grads
            .iter()
            .map(|(g, l)| {
                Ok((
                    gpu_buf("clip_grad_norm", "a gradient", ordinal, g, None)?,
                    *l,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ops::scale(ordinal, &gs, coef, cache)?
            .into_iter()
            .map(Storage::Cuda)
            .collect())
    }

    /// The norm, read back to the host (waits for the launches before it).
    pub fn norm(&self) -> Result<f64> {
        let v = self.coef_buf()?.range_to_host(0..1)?;
        Ok(v[0])
    }

    fn coef_buf(&self) -> Result<&CudaStorage<f64>> {
        self.coef.as_ref().ok_or_else(|| BackendError::BadArgument {
            op: "clip_grad_norm",
            msg: "the coefficient is not computed yet: call `coefficient` first".into(),
        })
    }
}
