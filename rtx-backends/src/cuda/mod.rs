//! The CUDA runtime: GPUs found and driven at run time through `cudarc`'s dynamic loading, so
//! rtx builds where no CUDA is installed and runs on the CPU where no GPU or library exists.
//!
//! Pieces, one file each: `probe` (are the libraries there), `context` (one context and
//! stream per GPU, in a global registry), `alloc` (the caching allocator and its statistics),
//! `storage` (device buffers and copies), `event` (timing), `kernel` and `disk_cache` (NVRTC
//! compilation for the GPU's architecture, cached on disk), `launch` (the one launch point,
//! which counts dispatches), `kernels` (entries of `#[kernel]` sources, launched with checked
//! arguments), `ops` (the storage entry points' GPU side; `ops_conv`, `ops_norm` and
//! `ops_optim` for convolution and pooling, fused norms and optimizer updates, `ops_softmax`
//! for softmax and its fused gradient, `ops_index` for indexing, joining and argmax,
//! `ops_random` for random draws, `ops_loss` for fused cross entropy and dropout,
//! `ops_optim_multi` and `ops_cast_multi` for multi-tensor updates and casts), `blas` and
//! `blas_lt` (cuBLAS and cuBLASLt matrix products).
//!
//! Every entry point returns an error rather than panicking when CUDA is missing.

mod alloc;
mod blas;
mod blas_lt;
mod context;
mod disk_cache;
mod event;
mod graph;
mod kernel;
mod kernels;
mod launch;
pub(crate) mod ops;
pub(crate) mod ops_cast_multi;
pub(crate) mod ops_conv;
pub(crate) mod ops_index;
pub(crate) mod ops_loss;
pub(crate) mod ops_norm;
pub(crate) mod ops_optim;
pub(crate) mod ops_optim_multi;
pub(crate) mod ops_quant;
pub(crate) mod ops_random;
pub(crate) mod ops_softmax;
mod probe;
mod storage;

pub use alloc::{
    MemoryStats, empty_cache, memory_limit, memory_stats, reset_peak_stats, set_memory_fraction,
    set_memory_limit,
};
pub use blas::{GemmLibrary, allow_tf32, gemm_library, set_allow_tf32, set_gemm_library};
pub use context::{GpuInfo, gpu_info, synchronize};
pub use disk_cache::{kernel_cache_dir, set_kernel_cache_dir};
pub use event::Event;
pub use graph::{Graph, begin_capture, end_capture, is_capturing};
pub use kernel::{Kernel, KernelOrigin, forget_loaded_kernels, load_kernel, nvrtc_version};
pub use kernels::{Arg, entry_kernel, kernel_entry, launch_entry};
pub use launch::{DevicePtr, KernelArg, LaunchArgs, LaunchConfig, launch};
pub use storage::CudaStorage;

pub(crate) use blas::{matmul, matmul_bias, matmul_row_sums};

use crate::{BackendError, Device, Result};

/// The number of CUDA GPUs usable here: 0 when the driver library is missing or sees none.
///
/// ```
/// # use rtx_backends::cuda;
/// println!("{} GPU(s)", cuda::device_count());
/// ```
pub fn device_count() -> usize {
    context::count().unwrap_or(0)
}

/// Whether at least one CUDA GPU can be used.
pub fn is_available() -> bool {
    first_usable_gpu().is_ok()
}

/// `Device::Cuda(0)` when its context can be created, else why not.
pub(crate) fn first_usable_gpu() -> Result<Device> {
    let n = context::count()?;
    if n == 0 {
        return Err(BackendError::CudaUnavailable {
            msg: "the CUDA driver loaded but sees no GPU".into(),
        });
    }
    context::gpu(0).map(|g| g.device())
}
