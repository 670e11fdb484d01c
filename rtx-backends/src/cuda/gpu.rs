//! One [`Gpu`] per device, created on first use and kept in a process-wide registry: the bare
//! [`Context`] composed with the state of each subsystem below (the allocator with its
//! capture state, the loaded kernels, the cuBLAS and cuBLASLt handles). This is the layer
//! where they meet; each subsystem takes only the context and its own state, and the modules
//! above (launch, storage, graphs, events, products, ops) take the whole `Gpu`.

use super::alloc::{self, Allocator};
use super::blas::Blas;
use super::blas_lt::BlasLt;
use super::context::{Context, count, lock, mem_info};
use super::kernel::LoadedKernels;
use crate::{BackendError, Result};
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

/// A GPU's live state.
pub(crate) struct Gpu {
    /// The context and stream.
    cx: Context,
    /// The caching allocator and the capture state; shared with the buffers it hands out,
    /// which give their blocks back to it when dropped.
    pub alloc: Arc<Mutex<Allocator>>,
    /// Kernels loaded into this context, by cache key.
    pub kernels: Mutex<LoadedKernels>,
    /// The cuBLAS handle, created on the first matrix product.
    pub blas: Mutex<Option<Blas>>,
    /// The cuBLASLt handle and its plans, created on the first product through cuBLASLt.
    pub blas_lt: Mutex<Option<BlasLt>>,
}

/// A `Gpu` is used wherever its bare context is wanted (the subsystems take only that), and
/// the context's fields and driver calls read as the GPU's own.
impl Deref for Gpu {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.cx
    }
}

impl Gpu {
    /// Whether a graph is being captured on this GPU.
    pub fn capturing(&self) -> bool {
        lock(&self.alloc).capturing.is_some()
    }

    /// An error when a graph is being captured on this GPU, for work a graph cannot hold
    /// (waiting for the GPU, copying from host memory whose contents a replay would not see).
    pub fn not_capturing(&self, what: &str) -> Result<()> {
        lock(&self.alloc).not_capturing(what)
    }

    /// Waits for all work queued on this GPU's stream.
    pub fn synchronize(&self) -> Result<()> {
        alloc::synchronize(&self.cx, &self.alloc)
    }
}

fn registry() -> &'static Mutex<HashMap<usize, Arc<Gpu>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
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
    let g = Arc::new(Gpu {
        cx: Context::open(ordinal)?,
        alloc: Arc::new(Mutex::new(Allocator::default())),
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
    /// Streaming multiprocessors (132 on an H100 or H200 SXM): with the blocks each holds, the
    /// largest grid a kernel that calls `grid_sync` may launch.
    pub multiprocessors: usize,
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
        multiprocessors: g.multiprocessors,
        free_memory: free,
        total_memory: total,
    })
}

/// The streaming multiprocessors of GPU `ordinal` (as [`GpuInfo::multiprocessors`], without
/// asking the driver for its free memory): a grid that calls `grid_sync` holds at most this
/// many times the blocks each multiprocessor holds.
pub fn multiprocessors(ordinal: usize) -> Result<usize> {
    Ok(gpu(ordinal)?.multiprocessors)
}

/// Waits until every op queued on GPU `ordinal` has finished (as `torch.cuda.synchronize`).
pub fn synchronize(ordinal: usize) -> Result<()> {
    gpu(ordinal)?.synchronize()
}
