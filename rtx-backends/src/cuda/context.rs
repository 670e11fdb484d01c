//! The bare handle of one GPU, the bottom of the CUDA layers: its primary context, the stream
//! every rtx op on it is queued on, and the driver calls that need nothing else. The
//! subsystems above (allocator, kernels, cuBLAS) take this handle rather than the composed
//! GPU, so they need not know of one another. Invariant: all rtx work on a GPU goes through
//! its one stream, so stream order alone makes reusing a freed block safe.

use super::probe::{Lib, guard, require};
use crate::{BackendError, Device, Result};
use cudarc::driver::{CudaContext, CudaStream, DriverError};
use std::sync::{Arc, Mutex, MutexGuard};

/// A GPU's context and stream, with what the driver says it is.
pub(crate) struct Context {
    /// The CUDA ordinal.
    pub ordinal: usize,
    /// The primary context.
    pub ctx: Arc<CudaContext>,
    /// The stream all rtx work on this GPU is queued on.
    pub stream: Arc<CudaStream>,
    /// The device's name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability (major, minor).
    pub cc: (u32, u32),
    /// Streaming multiprocessors.
    pub multiprocessors: usize,
}

impl Context {
    /// Retains GPU `ordinal`'s primary context and creates its stream (the ordinal is checked
    /// by the caller against [`count`]).
    pub fn open(ordinal: usize) -> Result<Context> {
        let device = Device::Cuda(ordinal);
        let ctx = guard("cuDevicePrimaryCtxRetain", || CudaContext::new(ordinal))?
            .map_err(|e| driver_err(device, "cuDevicePrimaryCtxRetain", e))?;
        let stream = ctx
            .new_stream()
            .map_err(|e| driver_err(device, "cuStreamCreate", e))?;
        let name = ctx
            .name()
            .map_err(|e| driver_err(device, "cuDeviceGetName", e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| driver_err(device, "cuDeviceGetAttribute", e))?;
        let multiprocessors = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(|e| driver_err(device, "cuDeviceGetAttribute", e))?;
        Ok(Context {
            ordinal,
            ctx,
            stream,
            name,
            cc: (major as u32, minor as u32),
            multiprocessors: multiprocessors.max(0) as usize,
        })
    }

    /// This GPU as a [`Device`].
    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// Makes this GPU's context current on the calling thread (driver calls act on it).
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| self.err("cuCtxSetCurrent", e))
    }

    /// A driver error on this GPU as a [`BackendError`].
    pub fn err(&self, call: &'static str, e: DriverError) -> BackendError {
        driver_err(self.device(), call, e)
    }
}

/// Locks a mutex, carrying on after a panic elsewhere: the data behind these locks (pools,
/// counters, caches) stays consistent at every await-free step, so poisoning says nothing here.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A driver error as a [`BackendError`] naming the call and the device.
pub(crate) fn driver_err(device: Device, call: &'static str, e: DriverError) -> BackendError {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    BackendError::Cuda {
        device,
        call,
        msg: format!("{name}: {text}"),
    }
}

/// The number of CUDA GPUs the driver sees (0 when the driver is missing).
pub(crate) fn count() -> Result<usize> {
    require(Lib::Driver)?;
    let n = guard(
        "cuDeviceGetCount",
        cudarc::driver::result::device::get_count,
    )?
    .map_err(|e| driver_err(Device::Cuda(0), "cuDeviceGetCount", e))?;
    Ok(n.max(0) as usize)
}

/// (free, total) bytes of a GPU.
pub(crate) fn mem_info(cx: &Context) -> Result<(usize, usize)> {
    cx.bind()?;
    cudarc::driver::result::mem_get_info().map_err(|e| cx.err("cuMemGetInfo", e))
}
