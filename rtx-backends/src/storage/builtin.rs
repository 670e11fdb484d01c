//! The built-in devices behind the device trait: the CPU and each CUDA GPU implement
//! [`Backend`] over their typed storage, and [`backend`] hands out any device's backend.
//!
//! Above `backend.rs` (which knows nothing of storage): a built-in buffer holds the device's
//! own `Storage`, and each trait method runs the storage's erased entry point, so a caller of
//! the trait gets exactly what a caller of `Storage` gets.

use super::erased::{AnyRef, AnyStorage};
use crate::backend::{
    Backend, Buffer, Captured, Gemm, Kernel, no_capture, registered, vec_from_bytes,
};
use crate::{BackendError, Device, Result, Storage};
use rtx_kernels::{DType, Element};
use std::ops::Range;
use std::sync::{Arc, RwLock};

/// The backend of `device`: the built-in CPU or CUDA backend, or a registered one.
pub fn backend(device: Device) -> Result<Arc<dyn Backend>> {
    match device {
        Device::Backend(n) => registered(n),
        builtin => Ok(Arc::new(Builtin(builtin))),
    }
}

/// Host elements of any type from their bytes, as CPU storage.
fn host_from_bytes(dtype: DType, bytes: &[u8]) -> Result<AnyStorage> {
    use rtx_kernels::{bf16, f16};
    fn cpu<E: Element>(bytes: &[u8]) -> Result<AnyStorage> {
        Ok(AnyStorage::from_typed(Storage::Cpu(vec_from_bytes::<E>(
            "upload", bytes,
        )?)))
    }
    match dtype {
        DType::F32 => cpu::<f32>(bytes),
        DType::F64 => cpu::<f64>(bytes),
        DType::F16 => cpu::<f16>(bytes),
        DType::BF16 => cpu::<bf16>(bytes),
        DType::I32 => cpu::<i32>(bytes),
        DType::I64 => cpu::<i64>(bytes),
        DType::U8 => cpu::<u8>(bytes),
        DType::Bool => cpu::<bool>(bytes),
    }
}

/// The built-in backends (the CPU and each CUDA GPU) behind the trait: their buffers hold
/// their typed storage.
struct Builtin(Device);

/// The storage inside a built-in backend's buffer. Behind a lock so [`Backend::copy`] can
/// overwrite a CPU buffer in place (a GPU buffer is written through its device pointer).
struct Held(RwLock<AnyStorage>);

impl Builtin {
    /// The storage a buffer holds, checked to be one of this backend's.
    fn held<'b>(&self, buf: &'b Buffer) -> Result<&'b Held> {
        buf.handle::<Held>()
            .ok_or_else(|| BackendError::BadArgument {
                op: "buffer",
                msg: format!("a buffer of another backend reached the {} backend", self.0),
            })
    }

    /// A buffer holding `s`.
    fn wrap(s: AnyStorage) -> Buffer {
        let r = s.as_ref();
        Buffer::new(r.dtype(), r.len(), Held(RwLock::new(s)))
    }

    /// Runs `f` on the storages of `bufs`, read-locked.
    fn with<R>(&self, bufs: &[&Buffer], f: impl FnOnce(&[AnyRef]) -> Result<R>) -> Result<R> {
        let held = bufs
            .iter()
            .map(|b| self.held(b))
            .collect::<Result<Vec<_>>>()?;
        let guards: Vec<_> = held
            .iter()
            .map(|h| h.0.read().unwrap_or_else(|p| p.into_inner()))
            .collect();
        let refs: Vec<AnyRef> = guards.iter().map(|g| g.as_ref()).collect();
        f(&refs)
    }
}

impl Backend for Builtin {
    fn name(&self) -> String {
        self.0.to_string()
    }

    fn upload(&self, dtype: DType, bytes: &[u8]) -> Result<Buffer> {
        let host = host_from_bytes(dtype, bytes)?;
        Ok(Self::wrap(host.as_ref().to_device(self.0)?))
    }

    fn download(&self, buf: &Buffer, range: Range<usize>) -> Result<Vec<u8>> {
        self.with(&[buf], |s| s[0].range_bytes(range))
    }

    fn copy(&self, src: &Buffer, range: Range<usize>, dst: &Buffer) -> Result<()> {
        // The range is read out first: `src` and `dst` may be one buffer behind one lock.
        let part = self.with(&[src], |s| s[0].range_to_storage(range))?;
        let mut to = self.held(dst)?.0.write().unwrap_or_else(|p| p.into_inner());
        part.as_ref().copy_into(&mut to)
    }

    fn synchronize(&self) -> Result<()> {
        match self.0 {
            Device::Cuda(n) => crate::cuda::synchronize(n),
            _ => Ok(()),
        }
    }

    fn launch(&self, kernel: &Kernel<'_>) -> Option<Result<Buffer>> {
        Some(match *kernel {
            Kernel::Unary { op, x, layout } => self
                .with(&[x], |s| super::unary_any(op, s[0], layout))
                .map(Self::wrap),
            Kernel::Binary {
                op,
                lhs,
                lhs_layout,
                rhs,
                rhs_layout,
            } => self
                .with(&[lhs, rhs], |s| {
                    super::binary_any(op, (s[0], lhs_layout), (s[1], rhs_layout))
                })
                .map(Self::wrap),
        })
    }

    fn gemm(&self, g: &Gemm<'_>) -> Option<Result<Buffer>> {
        let mut bufs = vec![g.lhs, g.rhs];
        bufs.extend(g.bias.map(|b| b.0));
        let run = self.with(&bufs, |s| {
            let bias = g.bias.map(|(_, l)| (s[2], l));
            super::matmul_any((s[0], g.lhs_layout), (s[1], g.rhs_layout), bias)
        });
        Some(run.map(Self::wrap))
    }

    fn begin_capture(&self) -> Result<()> {
        match self.0 {
            Device::Cuda(n) => crate::cuda::begin_capture(n),
            _ => Err(no_capture(&self.name())),
        }
    }

    fn end_capture(&self) -> Result<Box<dyn Captured>> {
        match self.0 {
            Device::Cuda(n) => Ok(Box::new(crate::cuda::end_capture(n)?)),
            _ => Err(no_capture(&self.name())),
        }
    }
}

impl Captured for crate::cuda::Graph {
    fn replay(&self) -> Result<()> {
        crate::cuda::Graph::replay(self)
    }
}
