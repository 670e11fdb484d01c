//! Storage on a registered backend (`Device::Backend(n)`): its buffer, the copies to and from
//! the host, and the host fallback that runs any op the backend has no kernel for.
//!
//! The fallback downloads each operand whole, runs the CPU op on the copies with the same
//! layouts, and uploads the result: correct for every op, at the cost of two copies. A backend
//! that runs a kernel natively answers [`Backend::launch`] or [`Backend::gemm`] instead.

use super::Storage;
use super::erased::{AnyRef, AnyStorage};
use crate::backend::{Backend, Buffer, bytes_of, registered, vec_from_bytes};
use crate::{BackendError, Device, Result};
use rtx_kernels::Element;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

/// Elements of type `E` in the memory of a registered backend.
pub struct BackendStorage<E> {
    at: BackendBuffer,
    _e: PhantomData<E>,
}

/// A buffer with the backend that owns it and the device it is: storage on a registered
/// backend with its element type as the buffer's tag.
#[derive(Clone)]
pub struct BackendBuffer {
    /// The device, `Device::Backend(n)`.
    pub device: Device,
    /// Its backend.
    pub backend: Arc<dyn Backend>,
    /// The elements.
    pub buffer: Buffer,
}

impl<E> Clone for BackendStorage<E> {
    fn clone(&self) -> Self {
        BackendStorage {
            at: self.at.clone(),
            _e: PhantomData,
        }
    }
}

impl<E> std::fmt::Debug for BackendStorage<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BackendStorage({}, {:?})",
            self.at.device, self.at.buffer
        )
    }
}

impl<E: Element> BackendStorage<E> {
    /// `data` uploaded to backend device `device`.
    pub fn upload(device: Device, data: &[E]) -> Result<Self> {
        let backend = backend_of(device)?;
        let buffer = backend.upload(E::DTYPE, bytes_of(data))?;
        Self::from_buffer(BackendBuffer {
            device,
            backend,
            buffer,
        })
    }

    /// `len` copies of `value` on backend device `device`.
    pub fn filled(device: Device, len: usize, value: E) -> Result<Self> {
        let backend = backend_of(device)?;
        let buffer = backend.fill(E::DTYPE, bytes_of(&[value]), len)?;
        Self::from_buffer(BackendBuffer {
            device,
            backend,
            buffer,
        })
    }

    /// A buffer a backend made, checked to hold elements of type `E`.
    pub fn from_buffer(at: BackendBuffer) -> Result<Self> {
        if at.buffer.dtype() != E::DTYPE {
            return Err(BackendError::BadArgument {
                op: "backend buffer",
                msg: format!(
                    "the {} backend returned {} elements where {} were asked for",
                    at.device,
                    at.buffer.dtype().name(),
                    E::DTYPE.name()
                ),
            });
        }
        Ok(BackendStorage {
            at,
            _e: PhantomData,
        })
    }

    /// The buffer, its backend and device, with the element type as a tag.
    pub fn erased(&self) -> BackendBuffer {
        self.at.clone()
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.at.device
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.at.buffer.len()
    }

    /// Whether no elements are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements `range`, copied to the host.
    pub fn range_to_host(&self, range: Range<usize>) -> Result<Vec<E>> {
        let bytes = self.at.backend.download(&self.at.buffer, range.clone())?;
        let v = vec_from_bytes::<E>("download", &bytes)?;
        if v.len() != range.len() {
            return Err(BackendError::BadArgument {
                op: "download",
                msg: format!(
                    "the {} backend returned {} elements for the range {range:?}",
                    self.at.device,
                    v.len()
                ),
            });
        }
        Ok(v)
    }

    /// Overwrites this buffer with elements `range` of `src` (of `self.len()` elements).
    pub fn copy_from_range(&self, src: &Self, range: Range<usize>) -> Result<()> {
        self.at.backend.copy(&src.at.buffer, range, &self.at.buffer)
    }
}

/// The backend of a `Device::Backend(n)`.
fn backend_of(device: Device) -> Result<Arc<dyn Backend>> {
    match device {
        Device::Backend(n) => registered(n),
        other => Err(BackendError::BadArgument {
            op: "backend storage",
            msg: format!("{other} is a built-in device, not a registered backend"),
        }),
    }
}

/// The one registered-backend device among `args`: `None` when none is on one, an error when
/// two devices differ.
fn backend_device(op: &'static str, args: &[AnyRef]) -> Result<Option<BackendBuffer>> {
    let Some(first) = args.iter().find_map(|a| a.on_backend()) else {
        return Ok(None);
    };
    for a in args {
        let d = a.device();
        if d != first.device {
            return Err(BackendError::DeviceMismatch {
                op,
                lhs: first.device,
                rhs: d,
            });
        }
    }
    Ok(Some(first))
}

/// Runs `op` on host copies when an operand lives on a registered backend, uploading what it
/// returns there; `None` when every operand is on a built-in device (the caller runs the op
/// itself). `native` is the backend's own kernel, tried first.
pub(crate) fn on_host(
    op: &'static str,
    args: &[AnyRef],
    native: &dyn Fn(&BackendBuffer) -> Option<Result<Buffer>>,
    run: &dyn Fn(&[AnyRef]) -> Result<AnyStorage>,
) -> Option<Result<AnyStorage>> {
    let at = match backend_device(op, args) {
        Ok(None) => return None,
        Ok(Some(at)) => at,
        Err(e) => return Some(Err(e)),
    };
    if let Some(out) = native(&at) {
        return Some(out.and_then(|buffer| {
            wrap(BackendBuffer {
                device: at.device,
                backend: at.backend.clone(),
                buffer,
            })
        }));
    }
    let hosts = match copies(args) {
        Ok(h) => h,
        Err(e) => return Some(Err(e)),
    };
    let refs: Vec<AnyRef> = hosts.iter().map(AnyStorage::as_ref).collect();
    Some(run(&refs).and_then(|out| out.as_ref().to_device(at.device)))
}

/// Every operand, copied whole to the host.
fn copies(args: &[AnyRef]) -> Result<Vec<AnyStorage>> {
    args.iter().map(|a| a.to_device(Device::Cpu)).collect()
}

/// Host copies of `args` and the registered backend device they live on, for an op whose
/// result is not one storage (several storages, or statistics kept for a backward): the
/// caller runs the op on the copies and uploads each storage it returns. `None` when every
/// operand is on a built-in device; an error when the operands' devices differ.
pub(crate) fn to_host(
    op: &'static str,
    args: &[AnyRef],
) -> Option<Result<(Device, Vec<AnyStorage>)>> {
    match backend_device(op, args) {
        Ok(None) => None,
        Ok(Some(at)) => Some(copies(args).map(|h| (at.device, h))),
        Err(e) => Some(Err(e)),
    }
}

/// `s`, run on host copies, moved onto the registered backend device `device`.
pub(crate) fn upload(s: AnyStorage, device: Device) -> Result<AnyStorage> {
    s.as_ref().to_device(device)
}

/// A buffer a backend returned, as storage of its element type.
fn wrap(at: BackendBuffer) -> Result<AnyStorage> {
    use rtx_kernels::DType;
    use rtx_kernels::{bf16, f16};
    fn typed<E: Element>(at: BackendBuffer) -> Result<AnyStorage> {
        BackendStorage::<E>::from_buffer(at).map(|s| AnyStorage::from_typed(Storage::Backend(s)))
    }
    match at.buffer.dtype() {
        DType::F32 => typed::<f32>(at),
        DType::F64 => typed::<f64>(at),
        DType::F16 => typed::<f16>(at),
        DType::BF16 => typed::<bf16>(at),
        DType::I32 => typed::<i32>(at),
        DType::I64 => typed::<i64>(at),
        DType::U8 => typed::<u8>(at),
        DType::Bool => typed::<bool>(at),
    }
}

/// [`on_host`] for an op that no backend runs natively.
pub(crate) fn host_only(
    op: &'static str,
    args: &[AnyRef],
    run: &dyn Fn(&[AnyRef]) -> Result<AnyStorage>,
) -> Option<Result<AnyStorage>> {
    on_host(op, args, &|_| None, run)
}
