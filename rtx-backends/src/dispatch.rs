//! The dispatch counter: every op a backend runs (a CPU entry point, a CUDA kernel launch, a
//! cuBLAS call) adds one, so a test can state "this op cost N dispatches" on any device.
//!
//! Counts are per thread: an op is dispatched from the thread that calls it (rayon's workers
//! inside a CPU op dispatch nothing), so tests running side by side never see each other's ops.

use crate::Device;
use std::cell::RefCell;

thread_local! {
    /// Index 0 counts the CPU, index `2n + 1` counts `Device::Cuda(n)` and `2n + 2`
    /// `Device::Backend(n)`.
    static COUNTS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn slot(device: Device) -> usize {
    match device {
        Device::Cpu => 0,
        Device::Cuda(n) => 2 * n + 1,
        Device::Backend(n) => 2 * n + 2,
    }
}

/// Adds one dispatch on `device` for the calling thread.
pub(crate) fn count(device: Device) {
    COUNTS.with(|c| {
        let mut c = c.borrow_mut();
        let i = slot(device);
        if c.len() <= i {
            c.resize(i + 1, 0);
        }
        c[i] += 1;
    });
}

/// Adds one CPU dispatch (the common line of every CPU entry point).
#[inline]
pub(crate) fn cpu() {
    crate::cpu::keep_freed_buffers();
    count(Device::Cpu);
}

/// Adds one CPU dispatch when `device` is the CPU; GPU dispatches are counted at the launch.
#[inline]
pub(crate) fn on_cpu(device: Device) {
    if device == Device::Cpu {
        cpu();
    }
}

/// The dispatches this thread has made on `device` so far.
///
/// ```
/// # use rtx_backends::{Device, Layout, Storage, launch_count};
/// let s = Storage::from_vec(vec![1.0f32, 2.0], Device::Cpu).unwrap();
/// let before = launch_count(Device::Cpu);
/// s.affine(&Layout::contiguous(&[2]), 2.0, 1.0).unwrap();
/// assert_eq!(launch_count(Device::Cpu) - before, 1);
/// ```
pub fn launch_count(device: Device) -> u64 {
    COUNTS.with(|c| c.borrow().get(slot(device)).copied().unwrap_or(0))
}

/// The dispatches this thread has made on every device together.
pub fn total_launch_count() -> u64 {
    COUNTS.with(|c| c.borrow().iter().sum())
}

/// What a device has done and holds: the calling thread's dispatch count and, on a GPU, the
/// allocator's statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// The dispatches this thread has made on the device (see [`launch_count`]).
    pub launches: u64,
    /// The allocator statistics (`None` on the CPU, or when the GPU cannot be reached).
    pub memory: Option<crate::cuda::MemoryStats>,
}

/// The statistics of `device`.
///
/// ```
/// # use rtx_backends::{Device, stats};
/// assert!(stats(Device::Cpu).memory.is_none());
/// ```
pub fn stats(device: Device) -> Stats {
    Stats {
        launches: launch_count(device),
        memory: match device {
            Device::Cuda(n) => crate::cuda::memory_stats(n).ok(),
            Device::Cpu | Device::Backend(_) => None,
        },
    }
}
