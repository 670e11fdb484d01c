//! One context per GPU, created on first use and kept in a process-wide registry: the primary
//! context, the stream every rtx op on that GPU is queued on, the allocator, the loaded kernels
//! and the cuBLAS handle. Invariant: all rtx work on a GPU goes through its one stream, so
//! stream order alone makes reusing a freed block safe.

use super::alloc::Allocator;
use super::blas::Blas;
use super::blas_lt::BlasLt;
use super::kernel::LoadedKernels;
use super::probe::{Lib, guard, require};
use crate::{BackendError, Device, Result};
use cudarc::driver::{CudaContext, CudaStream, DriverError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A GPU's live state.
pub(crate) struct Gpu {
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
    /// The caching allocator.
    pub alloc: Mutex<Allocator>,
    /// Kernels loaded into this context, by cache key.
    pub kernels: Mutex<LoadedKernels>,
    /// The cuBLAS handle, created on the first matrix product.
    pub blas: Mutex<Option<Blas>>,
    /// The cuBLASLt handle and its plans, created on the first product through cuBLASLt.
    pub blas_lt: Mutex<Option<BlasLt>>,
}

impl Gpu {
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

    /// Whether a graph is being captured on this GPU.
    pub fn capturing(&self) -> bool {
        lock(&self.alloc).capturing.is_some()
    }

    /// An error when a graph is being captured on this GPU, for work a graph cannot hold
    /// (waiting for the GPU, copying from host memory whose contents a replay would not see).
    pub fn not_capturing(&self, what: &str) -> Result<()> {
        match lock(&self.alloc).capturing {
            None => Ok(()),
            Some(_) => Err(BackendError::BadArgument {
                op: "cuda graph capture",
                msg: format!(
                    "{what} is not possible while a CUDA graph is being captured: run the \
                     step once uncaptured first (it compiles kernels and fills caches), and \
                     keep host reads and uploads out of the captured step"
                ),
            }),
        }
    }

    /// A driver error on this GPU as a [`BackendError`].
    pub fn err(&self, call: &'static str, e: DriverError) -> BackendError {
        driver_err(self.device(), call, e)
    }

    /// Waits for all work queued on this GPU's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.not_capturing("waiting for the GPU (reading a value back to the host)")?;
        self.bind()?;
        self.stream
            .synchronize()
            .map_err(|e| self.err("cuStreamSynchronize", e))
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

fn registry() -> &'static Mutex<HashMap<usize, Arc<Gpu>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
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

/// The state of GPU `ordinal`, creating its context on first use.
pub(crate) fn gpu(ordinal: usize) -> Result<Arc<Gpu>> {
    if let Some(g) = lock(registry()).get(&ordinal) {
        return Ok(g.clone());
    }
    let n = count()?;
    if ordinal >= n {
        return Err(BackendError::CudaUnavailable {
            msg: format!("cuda:{ordinal} does not exist: the driver sees {n} GPU(s)"),
        });
    }
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
    let g = Arc::new(Gpu {
        ordinal,
        ctx,
        stream,
        name,
        cc: (major as u32, minor as u32),
        alloc: Mutex::new(Allocator::default()),
        kernels: Mutex::new(LoadedKernels::default()),
        blas: Mutex::new(None),
        blas_lt: Mutex::new(None),
    });
    // Two threads may race to create the same GPU; the first one stored wins and the other's
    // context handle (the same primary context) is dropped.
    Ok(lock(registry()).entry(ordinal).or_insert(g).clone())
}

/// What a GPU is: its name, compute capability and memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// The CUDA ordinal.
    pub ordinal: usize,
    /// The device's name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability (major, minor), e.g. (9, 0) on Hopper.
    pub compute_capability: (u32, u32),
    /// Bytes free now (cuMemGetInfo).
    pub free_memory: usize,
    /// Bytes in all.
    pub total_memory: usize,
}

/// The name, compute capability and memory of GPU `ordinal`.
///
/// ```
/// # use rtx_backends::cuda;
/// match cuda::gpu_info(0) {
///     Ok(info) => assert!(info.total_memory > 0),
///     Err(e) => println!("no GPU here: {e}"),
/// }
/// ```
pub fn gpu_info(ordinal: usize) -> Result<GpuInfo> {
    let g = gpu(ordinal)?;
    let (free, total) = mem_info(&g)?;
    Ok(GpuInfo {
        ordinal,
        name: g.name.clone(),
        compute_capability: g.cc,
        free_memory: free,
        total_memory: total,
    })
}

/// (free, total) bytes of a GPU.
pub(crate) fn mem_info(g: &Gpu) -> Result<(usize, usize)> {
    g.bind()?;
    cudarc::driver::result::mem_get_info().map_err(|e| g.err("cuMemGetInfo", e))
}

/// Waits until every op queued on GPU `ordinal` has finished (as `torch.cuda.synchronize`).
pub fn synchronize(ordinal: usize) -> Result<()> {
    gpu(ordinal)?.synchronize()
}
