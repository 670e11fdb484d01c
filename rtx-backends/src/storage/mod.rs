//! Storage: a tensor's elements on one device, and the backend entry points that match on the
//! device. Each op family's entry points live in their own file below; the tensor layer calls
//! only these, so adding a device means adding an arm here, not touching `rtx`.

mod attention;
mod builtin;
mod cast_multi;
mod conv;
mod elementwise;
pub mod erased;
mod flash_attention;
mod index;
mod kernel;
mod loss;
mod matmul;
mod norm;
mod on_backend;
mod optim;
mod optim_multi;
mod quant;
mod random;
mod reduce;

pub use builtin::backend;
pub(crate) use elementwise::{binary_any, unary_any};
pub use flash_attention::{AttentionGrads, flash_attention_supported};
pub use kernel::{ReduceNative, SimtBuffer, SimtNative, launch_simt, writable_in_place};
pub(crate) use matmul::matmul_any;
pub use on_backend::{BackendBuffer, BackendStorage};
pub(crate) use on_backend::{host_only, on_host, to_host, upload};
pub use optim_multi::{AdamSlot, DeviceClip, SgdSlot, TableCache};

use crate::cuda::CudaStorage;
use crate::{BackendError, Device, Layout, Result};
pub use loss::CrossEntropySaved;
pub use norm::NormStats;
pub use quant::{QInput, QJoin};
use rtx_kernels::Element;

/// A tensor's elements on one device. Shared between views through an `Arc` in `rtx`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Storage<E> {
    /// Host memory.
    Cpu(Vec<E>),
    /// The memory of one GPU.
    Cuda(CudaStorage<E>),
    /// The memory of a backend registered at run time (`Device::Backend(n)`).
    Backend(BackendStorage<E>),
}

/// Why a typed body has no arm for a registered backend: its erased entry point sent the op
/// to the backend's kernel or to host copies before the body was reached.
pub(crate) const ROUTED: &str = "an op on a registered backend runs through its erased entry point";

/// The error of an op that has no kernel on `device` yet.
pub(crate) fn no_kernel(op: &'static str, device: Device) -> BackendError {
    BackendError::NoKernel { op, device }
}

impl<E: Element> Storage<E> {
    /// Moves a host vector onto `device`.
    pub fn from_vec(data: Vec<E>, device: Device) -> Result<Self> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
            Device::Cuda(n) => Ok(Storage::Cuda(CudaStorage::from_slice(n, &data)?)),
            Device::Backend(_) => Ok(Storage::Backend(BackendStorage::upload(device, &data)?)),
        }
    }

    /// `len` copies of `value` on `device`. On a GPU a memset writes them (nothing uploaded,
    /// so it can be captured in a CUDA graph) for every value but 8-byte ones whose halves
    /// differ.
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// let s = Storage::full(1.5f32, 3, Device::Cpu).unwrap();
    /// assert_eq!(s.to_vec(&Layout::contiguous(&[3])), [1.5; 3]);
    /// ```
    pub fn full(value: E, len: usize, device: Device) -> Result<Self> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(vec![value; len])),
            Device::Cuda(n) => Ok(Storage::Cuda(CudaStorage::filled(n, len, value)?)),
            Device::Backend(_) => Ok(Storage::Backend(BackendStorage::filled(
                device, len, value,
            )?)),
        }
    }

    /// The device the elements live on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(c) => Device::Cuda(c.ordinal()),
            Storage::Backend(b) => b.device(),
        }
    }

    /// The number of elements held (not the number a layout views).
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(v) => v.len(),
            Storage::Cuda(c) => c.len(),
            Storage::Backend(b) => b.len(),
        }
    }

    /// Whether the storage holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The host slice of CPU storage (`None` on a GPU). Backends use it; `rtx` does not.
    pub fn as_cpu_slice(&self) -> Option<&[E]> {
        match self {
            Storage::Cpu(v) => Some(v),
            Storage::Cuda(_) | Storage::Backend(_) => None,
        }
    }

    /// The elements a layout views, copied to the host in logical order.
    ///
    /// # Panics
    /// When the copy from a GPU fails (the device is gone, or an earlier kernel faulted); use
    /// [`Storage::try_to_vec`] to get the error instead.
    #[track_caller]
    pub fn to_vec(&self, layout: &Layout) -> Vec<E> {
        match self.try_to_vec(layout) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    /// The elements a layout views, copied to the host in logical order.
    pub fn try_to_vec(&self, layout: &Layout) -> Result<Vec<E>> {
        match self {
            Storage::Cpu(v) => Ok(match layout.contiguous_range() {
                Some(r) => v[r].to_vec(),
                None => crate::cpu::elementwise::map(v, layout, |x| x),
            }),
            Storage::Cuda(c) => gather_span(layout, |r| c.range_to_host(r)),
            Storage::Backend(b) => gather_span(layout, |r| b.range_to_host(r)),
        }
    }

    /// Appends the elements a layout views, in logical order, to a host vector: how the data
    /// loader gathers samples into one batch buffer without a temporary per sample.
    pub fn extend_host(&self, layout: &Layout, out: &mut Vec<E>) -> Result<()> {
        match self {
            Storage::Cpu(v) => match layout.contiguous_range() {
                Some(r) => out.extend_from_slice(&v[r]),
                None => out.extend(crate::cpu::elementwise::map(v, layout, |x| x)),
            },
            Storage::Cuda(_) | Storage::Backend(_) => out.extend(self.try_to_vec(layout)?),
        }
        Ok(())
    }

    /// A dense copy of the viewed elements on the same device.
    pub fn contiguous(&self, layout: &Layout) -> Result<Self> {
        match self {
            Storage::Cpu(v) => {
                crate::dispatch::cpu();
                Ok(Storage::Cpu(crate::cpu::elementwise::map(v, layout, |x| x)))
            }
            Storage::Cuda(c) => Ok(Storage::Cuda(cuda_dense(c, layout)?)),
            Storage::Backend(b) => match layout.contiguous_range() {
                Some(r) => {
                    let dense = BackendStorage::filled(b.device(), r.len(), E::default())?;
                    dense.copy_from_range(b, r)?;
                    Ok(Storage::Backend(dense))
                }
                None => Storage::from_vec(self.try_to_vec(layout)?, b.device()),
            },
        }
    }

    /// Overwrites `dst` (dense, as many elements as `layout` views) with the elements this
    /// storage holds through `layout`, in place: a captured CUDA graph reads its inputs from
    /// fixed addresses, so new inputs are copied into them.
    pub fn copy_into(&self, layout: &Layout, dst: &mut Storage<E>) -> Result<()> {
        if dst.len() != layout.numel() {
            return Err(BackendError::BadArgument {
                op: "copy",
                msg: format!(
                    "{} elements cannot overwrite a buffer of {}",
                    layout.numel(),
                    dst.len()
                ),
            });
        }
        match (self, dst) {
            (Storage::Cpu(v), Storage::Cpu(d)) => {
                crate::dispatch::cpu();
                let dense = crate::cpu::elementwise::map(v, layout, |x| x);
                d.copy_from_slice(&dense);
                Ok(())
            }
            (Storage::Cuda(c), Storage::Cuda(d)) => match layout.contiguous_range() {
                Some(r) => d.copy_from_range(c, r),
                None => {
                    let dense = cuda_dense(c, layout)?;
                    d.copy_from_range(&dense, 0..dense.len())
                }
            },
            (Storage::Backend(c), Storage::Backend(d)) if c.device() == d.device() => {
                match layout.contiguous_range() {
                    Some(r) => d.copy_from_range(c, r),
                    None => {
                        let dense = BackendStorage::upload(c.device(), &self.try_to_vec(layout)?)?;
                        d.copy_from_range(&dense, 0..dense.len())
                    }
                }
            }
            (a, b) => Err(BackendError::BadArgument {
                op: "copy",
                msg: format!("cannot copy from {} into {}", a.device(), b.device()),
            }),
        }
    }

    /// The elements on another device (a copy, even onto the same device).
    pub fn to_device(&self, layout: &Layout, device: Device) -> Result<Self> {
        match (self, device, layout.contiguous_range()) {
            (Storage::Cuda(c), Device::Cuda(n), Some(r)) => {
                Ok(Storage::Cuda(c.copy_range_to(r, n)?))
            }
            _ => Storage::from_vec(self.try_to_vec(layout)?, device),
        }
    }
}

/// The elements a layout views, from a device that copies ranges to the host: the one range
/// when the view is contiguous, else the span the view touches, gathered on the host (a
/// strided copy needs no kernel this way).
fn gather_span<E: Element>(
    layout: &Layout,
    range_to_host: impl FnOnce(std::ops::Range<usize>) -> Result<Vec<E>>,
) -> Result<Vec<E>> {
    match layout.contiguous_range() {
        Some(r) => range_to_host(r),
        None if layout.numel() == 0 => Ok(Vec::new()),
        None => {
            // Strides are unsigned, so the view spans offset..required_len.
            let host = range_to_host(layout.offset()..layout.required_len())?;
            let shifted = layout.with_offset(0);
            Ok(crate::cpu::elementwise::map(&host, &shifted, |x| x))
        }
    }
}

/// A dense copy of a GPU view on its GPU: a device copy when the view is one contiguous range,
/// else one launch of the strided `copy` kernel.
pub(crate) fn cuda_dense<E: Element>(
    c: &CudaStorage<E>,
    layout: &Layout,
) -> Result<CudaStorage<E>> {
    crate::cuda::ops::dense(c, layout)
}

/// Checks that two operands share a device, naming the op otherwise.
pub fn same_device<A: Element, B: Element>(
    op: &'static str,
    a: &Storage<A>,
    b: &Storage<B>,
) -> Result<Device> {
    if a.device() == b.device() {
        Ok(a.device())
    } else {
        Err(BackendError::DeviceMismatch {
            op,
            lhs: a.device(),
            rhs: b.device(),
        })
    }
}
