//! The CUDA runtime's user-facing controls: allocator statistics, cache and limit,
//! synchronization, timing events, GPU facts, the compiled-kernel cache directory, TF32 for f32
//! matrix products, and CUDA graph capture. Every function returns an error (or 0 / false)
//! where no GPU or CUDA library exists.
//!
//! ```
//! # use rtx::prelude::*;
//! if rtx::cuda::is_available() {
//!     let x: Tensor<Rank1<1024>> = Tensor::ones((Const,), Device::Cuda(0));
//!     let stats = rtx::cuda::memory_stats(0).unwrap();
//!     assert!(stats.allocated >= 4096 && stats.reserved >= stats.allocated);
//!     drop(x);
//! }
//! ```
//!
//! **Graphs.** [`capture`] records the GPU work a closure queues as a [`Graph`] that
//! [`Graph::replay`] runs again with one launch: the same kernels on the same addresses. So
//! what changes between replays must live in device buffers the graph reads, refilled in
//! place before each replay, and the tensors the closure made and returned are the graph's
//! own (each replay overwrites them). Nothing that needs the host may run while capturing
//! (reading a value back, uploading host data): it is an error from [`capture`].

pub use rtx_backends::cuda::{
    Event, GpuInfo, Graph, MemoryStats, allow_tf32, device_count, empty_cache, gpu_info,
    is_available, is_capturing, kernel_cache_dir, memory_limit, memory_stats, multiprocessors,
    nvrtc_version, reset_peak_stats, set_allow_tf32, set_kernel_cache_dir, set_memory_fraction,
    set_memory_limit, synchronize,
};

use crate::error::{Error, Result};

/// Captures the work `f` queues on GPU `ordinal`'s stream as a graph, returning it with
/// `f`'s result (whose tensors the graph writes on every replay). Nothing runs until the
/// first [`Graph::replay`]. Run the work once uncaptured before capturing it, so that its
/// kernels are compiled and loaded and the allocator's cache is warm.
///
/// ```
/// # use rtx::prelude::*;
/// if rtx::cuda::is_available() {
///     let x: Tensor<Rank1<4>> = Tensor::ones((Const,), Device::Cuda(0));
///     let (graph, y) = rtx::cuda::capture(0, || Ok(&x * 2.0)).unwrap();
///     graph.replay().unwrap();
///     assert_eq!(y.to_vec(), vec![2.0; 4]);
/// }
/// ```
///
/// # Errors
/// No GPU `ordinal`, a capture already under way on it, `f`'s error or panic (the capture is
/// ended first, so the GPU stays usable), or work the graph cannot hold.
pub fn capture<R>(ordinal: usize, f: impl FnOnce() -> Result<R>) -> Result<(Graph, R)> {
    rtx_backends::cuda::begin_capture(ordinal)?;
    let traced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    // Always end the capture, so the GPU's stream is usable whatever happened.
    let graph = rtx_backends::cuda::end_capture(ordinal);
    let out = traced.map_err(|panic| Error::BadArgument {
        op: "rtx::cuda::capture",
        msg: format!(
            "the work failed while it was being captured: {}",
            crate::error::panic_message(&*panic)
        ),
    })??;
    Ok((graph?, out))
}
