//! The CPU backend: loops over host memory, parallel over all cores with rayon.
//!
//! Invariant: work is split into fixed-size chunks of the output, never by how rayon happens
//! to steal, so every result (float sums included) is the same run to run and on any number
//! of threads.

pub mod attention;
pub mod cast_multi;
pub mod conv;
mod conv_direct;
pub mod elementwise;
pub mod index;
pub mod loss;
pub mod matmul;
pub mod norm;
pub mod optim;
pub mod pool;
mod pool_simd;
pub mod qmatmul;
pub mod quant;
pub mod random;
pub mod reduce;
pub mod softmax_back;

/// Elements per parallel task. Fixed, so chunk boundaries never depend on the thread count.
pub const CHUNK: usize = 1 << 14;

/// Tells glibc's allocator, once per process, to keep freed tensor buffers for reuse instead
/// of handing them back to the kernel.
///
/// A training step allocates and frees the same few buffer sizes (activations, gradients,
/// im2col matrices) hundreds of times a second. By default glibc serves blocks above its mmap
/// threshold with fresh `mmap`s and returns them with `munmap`, and trims the heap top as it
/// shrinks: every step then pays page faults, page zeroing and TLB shootdowns for memory it
/// just gave back (measured here: the MNIST MLP step at batch 128 went from 7.5 to 4.4 ms, the
/// CNN step from 107 to 64 ms, with the thresholds raised). Raising the mmap threshold to its
/// maximum (32 MiB) and the trim threshold to 1 GiB keeps those blocks in the heap, much as a
/// caching allocator would. Blocks above 32 MiB (a BERT layer's feed-forward activations at
/// batch 64 x 128 are 50 MB) would still be mmapped one by one, so glibc is also told to
/// serve every block from its heap (`M_MMAP_MAX` 0). Memory freed by rtx is then reused by later allocations rather
/// than returned to the OS until the process ends, which is what PyTorch's GPU allocator does
/// too. Only glibc on Linux has these knobs; elsewhere this does nothing.
pub(crate) fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only changes allocator thresholds; it is safe to call at any
            // time, and a value it rejects leaves the setting as it was.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
                libc::mallopt(libc::M_MMAP_MAX, 0);
            }
        });
    }
}
