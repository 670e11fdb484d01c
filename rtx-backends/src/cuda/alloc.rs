//! The caching allocator: device memory is taken from the driver in size classes and a freed
//! block goes back to its class's pool, to be handed out again without a driver call (as
//! PyTorch's caching allocator does). Invariant: a pooled block is only reused by work queued
//! on the GPU's one stream after the free, so stream order makes the reuse safe.
//!
//! The allocator also keeps the GPU's capture state, since a capture changes where blocks
//! come from and go to: while a CUDA graph is captured (the `graph` module drives it), every
//! block handed out belongs to that graph: the graph's replays write it whenever they run, so
//! it must never serve anything else. Such a block, freed, goes back to its graph's own pool
//! (reused only by later allocations of the same capture, whose order replays repeat), and
//! returns to the common pools only when the graph is dropped. One lock guards both, so a
//! block's pool and the capture it belongs to never disagree.
//!
//! The functions here take the GPU's bare [`Context`] and its allocator; the per-ordinal
//! entry points (`memory_stats` and the rest) look the GPU up in the registry, in the `memory`
//! module.

use super::context::{Context, lock, mem_info};
use crate::{BackendError, Device, Result};
use cudarc::driver::sys::CUdeviceptr;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Requests up to this size are rounded to 512 bytes; larger ones to 2 MiB.
const SMALL: usize = 1 << 20;

/// The block size a request of `bytes` gets: fewer distinct sizes means more reuse.
pub(crate) fn size_class(bytes: usize) -> usize {
    let step = if bytes <= SMALL { 512 } else { 2 << 20 };
    bytes.div_ceil(step).saturating_mul(step)
}

/// What a GPU's allocator holds and has done, as `memory_stats` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in blocks handed out to live buffers (block sizes, so rounding included).
    pub allocated: usize,
    /// Bytes the live buffers asked for.
    pub requested: usize,
    /// Bytes held from the driver: `allocated` plus the cache.
    pub reserved: usize,
    /// The most `allocated` has been since the start or `reset_peak_stats`.
    pub peak_allocated: usize,
    /// The most `reserved` has been since the start or `reset_peak_stats`.
    pub peak_reserved: usize,
    /// Blocks handed out and not yet freed.
    pub live_blocks: usize,
    /// Freed blocks waiting in the pools.
    pub cached_blocks: usize,
    /// Allocations served, from the cache or the driver.
    pub allocs: u64,
    /// Allocations served from the cache, without a driver call.
    pub cache_hits: u64,
    /// Blocks taken from the driver (cuMemAlloc).
    pub driver_allocs: u64,
    /// Blocks given back to the driver (cuMemFree), by `empty_cache` or an allocation retry.
    pub driver_frees: u64,
}

impl MemoryStats {
    /// Bytes cached: reserved but not handed out.
    pub fn cached(&self) -> usize {
        self.reserved - self.allocated
    }

    /// The share of reserved memory not in live buffers: cached blocks and the rounding inside
    /// live ones, over `reserved` (0 when nothing is reserved).
    pub fn fragmentation(&self) -> f64 {
        if self.reserved == 0 {
            0.0
        } else {
            1.0 - self.requested as f64 / self.reserved as f64
        }
    }
}

/// Free blocks by size.
type Pools = BTreeMap<usize, Vec<CUdeviceptr>>;

/// A GPU's pools and counters.
#[derive(Default)]
pub(crate) struct Allocator {
    /// Free blocks by size.
    pools: Pools,
    stats: MemoryStats,
    /// The most bytes live buffers may hold (block sizes), set by `set_memory_limit`.
    limit: Option<usize>,
    /// The graph being captured, whose pool new blocks belong to.
    pub(crate) capturing: Option<u64>,
    /// The free blocks of each live graph, by graph id.
    graph_pools: BTreeMap<u64, Pools>,
}

/// A block of at least `size` bytes and at most a quarter more from `pools`, smallest first.
fn take_from(pools: &mut Pools, size: usize) -> Option<(CUdeviceptr, usize)> {
    let limit = size.saturating_add(size / 4);
    let (&found, _) = pools.range_mut(size..=limit).find(|(_, v)| !v.is_empty())?;
    let list = pools.get_mut(&found)?;
    let ptr = list.pop()?;
    if list.is_empty() {
        pools.remove(&found);
    }
    Some((ptr, found))
}

impl Allocator {
    /// A cached block of at least `size` bytes: while capturing, from the graph's own pool
    /// first, then from the common pools.
    fn take_cached(&mut self, size: usize) -> Option<(CUdeviceptr, usize)> {
        if let Some(id) = self.capturing
            && let Some(found) = self
                .graph_pools
                .get_mut(&id)
                .and_then(|p| take_from(p, size))
        {
            self.stats.cached_blocks -= 1;
            return Some(found);
        }
        let found = take_from(&mut self.pools, size)?;
        self.stats.cached_blocks -= 1;
        Some(found)
    }

    /// Starts giving new blocks to graph `id`.
    pub(crate) fn start_graph(&mut self, id: u64) {
        self.capturing = Some(id);
        self.graph_pools.entry(id).or_default();
    }

    /// Graph `id` is gone: its free blocks go back to the common pools, and its live blocks
    /// will when they are freed.
    pub(crate) fn end_graph(&mut self, id: u64) {
        if self.capturing == Some(id) {
            self.capturing = None;
        }
        if let Some(pools) = self.graph_pools.remove(&id) {
            for (size, ptrs) in pools {
                self.pools.entry(size).or_default().extend(ptrs);
            }
        }
    }

    /// An error while a graph is being captured, for work a graph cannot hold (waiting for
    /// the GPU, copying from host memory whose contents a replay would not see).
    pub(crate) fn not_capturing(&self, what: &str) -> Result<()> {
        match self.capturing {
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

    /// The statistics so far.
    pub(crate) fn stats(&self) -> MemoryStats {
        self.stats
    }

    /// Starts the peak statistics again from the current values.
    pub(crate) fn reset_peaks(&mut self) {
        self.stats.peak_allocated = self.stats.allocated;
        self.stats.peak_reserved = self.stats.reserved;
    }

    /// The most bytes live buffers may hold, if limited.
    pub(crate) fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// Limits the bytes live buffers may hold, or lifts the limit with `None`.
    pub(crate) fn set_limit(&mut self, limit: Option<usize>) {
        self.limit = limit;
    }

    /// The out-of-memory error for a request of `bytes` (a block of `size`) that would take
    /// the live blocks past the limit, if one is set and it would.
    fn over_limit(&self, device: Device, bytes: usize, size: usize) -> Option<BackendError> {
        let limit = self.limit?;
        let s = &self.stats;
        (s.allocated.saturating_add(size) > limit).then(|| BackendError::OutOfMemory {
            device,
            requested: bytes,
            free: limit.saturating_sub(s.allocated),
            total: limit,
            allocated: s.allocated,
            cached: s.cached(),
        })
    }

    fn hand_out(&mut self, size: usize, requested: usize) {
        let s = &mut self.stats;
        s.allocated += size;
        s.requested += requested;
        s.live_blocks += 1;
        s.allocs += 1;
        s.peak_allocated = s.peak_allocated.max(s.allocated);
        s.peak_reserved = s.peak_reserved.max(s.reserved);
    }

    fn give_back(&mut self, ptr: CUdeviceptr, size: usize, requested: usize, graph: u64) {
        let s = &mut self.stats;
        s.allocated -= size;
        s.requested -= requested;
        s.live_blocks -= 1;
        s.cached_blocks += 1;
        let pools = match self.graph_pools.get_mut(&graph) {
            Some(p) => p,
            None => &mut self.pools,
        };
        pools.entry(size).or_default().push(ptr);
    }

    /// Every cached block of the common pools, removed from them (the caller frees them);
    /// graphs keep theirs.
    fn drain(&mut self) -> Vec<(CUdeviceptr, usize)> {
        let pools = std::mem::take(&mut self.pools);
        let out: Vec<_> = pools
            .into_iter()
            .flat_map(|(size, v)| v.into_iter().map(move |p| (p, size)))
            .collect();
        self.stats.cached_blocks = 0;
        out
    }
}

/// A block of device memory owned by one buffer; dropping it returns the block to its pool.
pub(crate) struct DeviceBuffer {
    /// The block's address (0 for an empty buffer).
    pub ptr: CUdeviceptr,
    /// The block's size.
    size: usize,
    /// The bytes asked for.
    requested: usize,
    /// The allocator of the GPU it lives on, which takes the block back.
    owner: Arc<Mutex<Allocator>>,
    /// The graph whose capture allocated it (0: none).
    graph: u64,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.size > 0 {
            lock(&self.owner).give_back(self.ptr, self.size, self.requested, self.graph);
        }
    }
}

/// `bytes` of uninitialized memory on the GPU of `cx`, whose allocator is `mem`, from the
/// cache when a block fits.
pub(crate) fn alloc(
    cx: &Context,
    mem: &Arc<Mutex<Allocator>>,
    bytes: usize,
) -> Result<DeviceBuffer> {
    let graph = lock(mem).capturing.unwrap_or(0);
    let buffer = |ptr, size| DeviceBuffer {
        ptr,
        size,
        requested: bytes,
        owner: mem.clone(),
        graph,
    };
    if bytes == 0 {
        return Ok(buffer(0, 0));
    }
    let size = size_class(bytes);
    {
        let mut a = lock(mem);
        if let Some(e) = a.over_limit(cx.device(), bytes, size) {
            return Err(e);
        }
        if let Some((ptr, found)) = a.take_cached(size) {
            a.stats.cache_hits += 1;
            a.hand_out(found, bytes);
            return Ok(buffer(ptr, found));
        }
    }
    cx.bind()?;
    let (free, total) = mem_info(cx)?;
    // A request over what is free cannot succeed from the driver: return the cache first
    // (not while capturing, when waiting for the stream is not allowed).
    if size > free && graph == 0 {
        free_cached(cx, mem)?;
    }
    let first = unsafe_malloc(size);
    let ptr = match first {
        Ok(p) => p,
        Err(_) => {
            if graph == 0 {
                free_cached(cx, mem)?;
            }
            match unsafe_malloc(size) {
                Ok(p) => p,
                Err(_) => {
                    let (free, total) = mem_info(cx).unwrap_or((free, total));
                    let s = lock(mem).stats;
                    return Err(BackendError::OutOfMemory {
                        device: cx.device(),
                        requested: bytes,
                        free,
                        total,
                        allocated: s.allocated,
                        cached: s.cached(),
                    });
                }
            }
        }
    };
    let mut a = lock(mem);
    a.stats.driver_allocs += 1;
    a.stats.reserved += size;
    a.hand_out(size, bytes);
    Ok(buffer(ptr, size))
}

fn unsafe_malloc(size: usize) -> std::result::Result<CUdeviceptr, cudarc::driver::DriverError> {
    // SAFETY: the caller bound the GPU's context; the block is owned by a DeviceBuffer.
    unsafe { cudarc::driver::result::malloc_sync(size) }
}

/// Waits for all work queued on the GPU's stream; an error while a graph is being captured
/// (see [`Allocator::not_capturing`]).
pub(crate) fn synchronize(cx: &Context, mem: &Mutex<Allocator>) -> Result<()> {
    lock(mem).not_capturing("waiting for the GPU (reading a value back to the host)")?;
    cx.bind()?;
    cx.stream
        .synchronize()
        .map_err(|e| cx.err("cuStreamSynchronize", e))
}

/// Waits for the GPU's stream, then returns every cached block to the driver.
pub(crate) fn free_cached(cx: &Context, mem: &Mutex<Allocator>) -> Result<()> {
    synchronize(cx, mem)?;
    let blocks = lock(mem).drain();
    for (ptr, size) in blocks {
        // SAFETY: a cached block is owned by no buffer, and the stream that used it is idle.
        unsafe { cudarc::driver::result::free_sync(ptr) }.map_err(|e| cx.err("cuMemFree", e))?;
        let mut a = lock(mem);
        a.stats.reserved -= size;
        a.stats.driver_frees += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up() {
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(SMALL), SMALL);
        assert_eq!(size_class(SMALL + 1), 2 << 20);
        assert_eq!(size_class((64 << 20) + 1), 66 << 20);
    }

    #[test]
    fn pools_reuse_close_sizes_only() {
        let mut a = Allocator::default();
        a.stats.reserved = 4096 + (1 << 20);
        a.hand_out(4096, 4000);
        a.hand_out(1 << 20, 1 << 20);
        a.give_back(0x1000, 4096, 4000, 0);
        a.give_back(0x9000, 1 << 20, 1 << 20, 0);
        assert_eq!(a.stats.cached_blocks, 2);
        // 3584 rounds to 3584; a 4096 block is within a quarter more, so it is reused.
        assert_eq!(a.take_cached(3584), Some((0x1000, 4096)));
        // A 1 MiB block is far more than 512 KiB asks for: not reused.
        assert_eq!(a.take_cached(512 << 10), None);
        assert_eq!(a.drain(), vec![(0x9000, 1 << 20)]);
        assert_eq!(a.stats.cached_blocks, 0);
    }

    #[test]
    fn the_limit_counts_live_blocks() {
        let mut a = Allocator::default();
        a.stats.reserved = 4096;
        a.hand_out(4096, 4000);
        let dev = Device::Cuda(0);
        assert!(
            a.over_limit(dev, 1 << 40, 1 << 40).is_none(),
            "no limit by default"
        );
        a.limit = Some(8192);
        assert!(a.over_limit(dev, 4000, 4096).is_none());
        let msg = a.over_limit(dev, 4100, 4608).map(|e| e.to_string());
        let msg = msg.unwrap_or_default();
        assert!(
            msg.contains("(4100 bytes)") && msg.contains("4.00 KiB free of 8.00 KiB"),
            "{msg}"
        );
    }

    #[test]
    fn fragmentation_counts_cache_and_rounding() {
        let s = MemoryStats {
            allocated: 1024,
            requested: 1000,
            reserved: 2048,
            ..Default::default()
        };
        assert_eq!(s.cached(), 1024);
        assert!((s.fragmentation() - (1.0 - 1000.0 / 2048.0)).abs() < 1e-12);
    }
}
