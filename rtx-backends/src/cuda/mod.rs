//! The CUDA runtime: GPUs found and driven at run time through `cudarc`'s dynamic loading, so
//! rtx builds where no CUDA is installed and runs on the CPU where no GPU or library exists.
//!
//! Pieces, one file each, in layers: a module uses only modules listed before it, so the
//! dependencies form a stack without cycles, and the state of one GPU is composed in one
//! place (`gpu`) rather than every subsystem reaching into every other through it.
//!
//! 1. `probe` (are the libraries there), `nccl_lib` (NCCL opened by hand, by every name it
//!    goes by) and `disk_cache` (the on-disk kernel cache).
//! 2. `context`: the bare handle of one GPU, its context and the stream all its work is
//!    queued on, and the driver calls that need nothing else.
//! 3. The subsystems, each owning its per-GPU state and taking the bare handle: `alloc` (the
//!    caching allocator, its statistics, and the capture state it hands blocks out by),
//!    `kernel` (NVRTC compilation for the GPU's architecture, the loaded modules), `blas`
//!    (the cuBLAS handle and call, the GEMM settings), then `blas_lt` (cuBLASLt handles and
//!    plans, for products described by `blas`'s types).
//! 4. `gpu`: the per-GPU state composed of the handle and every subsystem's state, and the
//!    process-wide registry of it.
//! 5. On the registry: `memory` (the allocator's entry points, by ordinal), `event` (timing),
//!    `launch` (the one launch point, which counts dispatches, and making kernels ready),
//!    then `storage` (device buffers and copies) and `graph` (capture and replay), which
//!    dispatch through `launch`, and `nccl` (communicators and their collectives on storage,
//!    queued on the GPU's stream and waited for within a timeout).
//! 6. `kernels` (entries of `#[kernel]` sources, launched with checked arguments) and
//!    `matmul` (products of storage through cuBLAS or cuBLASLt).
//! 7. `ops` (the storage entry points' GPU side, and the helpers the other `ops_*` files
//!    share), then `ops_conv`, `ops_optim` and `ops_norm` for convolution and pooling,
//!    optimizer updates and fused norms, `ops_softmax` for softmax and its fused gradient,
//!    `ops_index` for indexing, joining and argmax, `ops_random` for random draws,
//!    `ops_quant` for dequantizing, `ops_loss` for fused cross entropy and dropout, and
//!    `ops_optim_multi` then `ops_cast_multi` for multi-tensor updates and casts.
//!
//! Every entry point returns an error rather than panicking when CUDA is missing.

mod alloc;
mod blas;
mod blas_lt;
mod context;
mod disk_cache;
mod event;
mod gpu;
mod graph;
mod kernel;
mod kernels;
mod launch;
mod matmul;
mod memory;
mod nccl;
mod nccl_lib;
pub(crate) mod ops;
pub(crate) mod ops_attention;
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
mod tensor_map;

pub use alloc::MemoryStats;
pub use blas::{GemmLibrary, allow_tf32, gemm_library, set_allow_tf32, set_gemm_library};
pub use disk_cache::{kernel_cache_dir, set_kernel_cache_dir};
pub use event::Event;
pub use gpu::{GpuInfo, gpu_info, multiprocessors, synchronize};
pub use graph::{Graph, begin_capture, end_capture, is_capturing};
pub use kernel::{Kernel, KernelOrigin, nvrtc_version};
pub use kernels::{Arg, entry_kernel, kernel_entry, launch_entry};
pub use launch::{
    DevicePtr, KernelArg, LaunchArgs, LaunchConfig, forget_loaded_kernels, launch, load_kernel,
};
pub use memory::{
    empty_cache, memory_limit, memory_stats, reset_peak_stats, set_memory_fraction,
    set_memory_limit,
};
pub use nccl::{Communicator, NCCL_ID_BYTES, nccl_unique_id};
pub use nccl_lib::{nccl_available, nccl_version};
pub use storage::CudaStorage;

pub(crate) use matmul::{matmul, matmul_bias, matmul_row_sums};

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
    gpu::gpu(0).map(|g| g.device())
}
