//! Storage: a tensor's elements on one device, and the backend entry points that match on the
//! device. Each op family's entry points live in their own file below; the tensor layer calls
//! only these, so adding a device means adding an arm here, not touching `rtx`.

mod conv;
mod elementwise;
mod index;
mod matmul;
mod optim;
mod random;
mod reduce;

use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::Element;

/// A tensor's elements on one device. Shared between views through an `Arc` in `rtx`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Storage<E> {
    /// Host memory.
    Cpu(Vec<E>),
}

impl<E: Element> Storage<E> {
    /// Moves a host vector onto `device`.
    pub fn from_vec(data: Vec<E>, device: Device) -> Result<Self> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
        }
    }

    /// The device the elements live on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
        }
    }

    /// The number of elements held (not the number a layout views).
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(v) => v.len(),
        }
    }

    /// Whether the storage holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The host slice of CPU storage. Backends use it; `rtx` does not.
    pub fn as_cpu_slice(&self) -> &[E] {
        match self {
            Storage::Cpu(v) => v,
        }
    }

    /// The elements a layout views, copied to the host in logical order.
    pub fn to_vec(&self, layout: &Layout) -> Vec<E> {
        match self {
            Storage::Cpu(v) => match layout.contiguous_range() {
                Some(r) => v[r].to_vec(),
                None => crate::cpu::elementwise::map(v, layout, |x| x),
            },
        }
    }

    /// Appends the elements a layout views, in logical order, to a host vector: how the data
    /// loader gathers samples into one batch buffer without a temporary per sample.
    pub fn extend_host(&self, layout: &Layout, out: &mut Vec<E>) {
        match self {
            Storage::Cpu(v) => match layout.contiguous_range() {
                Some(r) => out.extend_from_slice(&v[r]),
                None => out.extend(crate::cpu::elementwise::map(v, layout, |x| x)),
            },
        }
    }

    /// A dense copy of the viewed elements on the same device.
    pub fn contiguous(&self, layout: &Layout) -> Result<Self> {
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(crate::cpu::elementwise::map(v, layout, |x| x))),
        }
    }

    /// The elements on another device (a copy, even onto the same device).
    pub fn to_device(&self, layout: &Layout, device: Device) -> Result<Self> {
        Storage::from_vec(self.to_vec(layout), device)
    }
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
