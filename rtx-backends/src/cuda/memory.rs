//! The allocator's entry points for GPU `ordinal`, as `torch.cuda` has them: statistics,
//! limits and emptying the cache. They find the GPU in the registry and act on its allocator
//! (the `alloc` module, which knows nothing of ordinals).

use super::alloc::{MemoryStats, free_cached};
use super::context::{lock, mem_info};
use super::gpu::gpu;
use crate::{BackendError, Result};

/// The allocator statistics of GPU `ordinal`.
///
/// ```
/// # use rtx_backends::cuda;
/// if let Ok(s) = cuda::memory_stats(0) {
///     assert!(s.allocated <= s.reserved && s.reserved <= s.peak_reserved.max(s.reserved));
/// }
/// ```
pub fn memory_stats(ordinal: usize) -> Result<MemoryStats> {
    Ok(lock(&gpu(ordinal)?.alloc).stats())
}

/// Returns every cached (freed, unused) block of GPU `ordinal` to the driver, as
/// `torch.cuda.empty_cache`; live tensors keep their memory.
pub fn empty_cache(ordinal: usize) -> Result<()> {
    let g = gpu(ordinal)?;
    free_cached(&g, &g.alloc)
}

/// Limits the bytes GPU `ordinal`'s live tensors may hold (counted in allocator blocks, as
/// [`MemoryStats::allocated`]), or lifts the limit with `None`: an allocation that would go
/// past it fails with the out-of-memory error, whose "free" and "of" figures are then measured
/// against the limit. Like PyTorch's `torch.cuda.set_per_process_memory_fraction`, it keeps a
/// process inside a share of the GPU and makes running out of memory testable. Cached blocks
/// do not count; a limit below what is live already only stops new allocations.
///
/// ```
/// # use rtx_backends::cuda;
/// if cuda::is_available() {
///     cuda::set_memory_limit(0, Some(1 << 30)).unwrap();
///     assert_eq!(cuda::memory_limit(0).unwrap(), Some(1 << 30));
///     cuda::set_memory_limit(0, None).unwrap();
/// }
/// ```
pub fn set_memory_limit(ordinal: usize, limit: Option<usize>) -> Result<()> {
    lock(&gpu(ordinal)?.alloc).set_limit(limit);
    Ok(())
}

/// The limit [`set_memory_limit`] set on GPU `ordinal`, if any.
pub fn memory_limit(ordinal: usize) -> Result<Option<usize>> {
    Ok(lock(&gpu(ordinal)?.alloc).limit())
}

/// [`set_memory_limit`] as a share of the GPU's total memory (PyTorch's
/// `set_per_process_memory_fraction`); `fraction` must lie in [0, 1].
pub fn set_memory_fraction(ordinal: usize, fraction: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&fraction) {
        return Err(BackendError::BadArgument {
            op: "set_memory_fraction",
            msg: format!("fraction must lie in [0, 1], got {fraction}"),
        });
    }
    let g = gpu(ordinal)?;
    g.bind()?;
    let (_, total) = mem_info(&g)?;
    set_memory_limit(ordinal, Some((total as f64 * fraction) as usize))
}

/// Starts the peak statistics of GPU `ordinal` again from the current values.
pub fn reset_peak_stats(ordinal: usize) -> Result<()> {
    let g = gpu(ordinal)?;
    lock(&g.alloc).reset_peaks();
    Ok(())
}
