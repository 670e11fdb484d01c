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
pub mod ranks;
pub mod reduce;
pub mod softmax_back;

/// Runs `job(i)` for every `i` in `0..count` on the thread pool.
///
/// Not generic, so rayon's machinery (jobs, joins, the splitting of ranges) is compiled once,
/// here. Loops generic over an element type or a closure that called rayon directly were
/// instantiated, rayon and all, in every crate that used them at a new type: most of a user's
/// release build went to that. Those loops hand this function a `&dyn Fn` instead.
pub fn parallel_for(count: usize, job: &(dyn Fn(usize) + Sync)) {
    use rayon::prelude::*;
    (0..count).into_par_iter().for_each(job);
}

/// Runs `job(i)` for every `i` in `0..count`, with the calling thread taking part: the
/// indices are handed out one at a time, in order, to whichever of the caller and up to
/// `threads - 1` pool threads asks next, and the call returns once every index is done.
///
/// Meant for passes of tens of microseconds that run back to back (a decoding step's
/// products), where [`parallel_for`] loses much of the pass to the hand-over: called from
/// outside the pool it queues the whole range and sleeps until a pool thread, perhaps asleep
/// itself, has woken and finished it. Here the caller starts at once, a pool thread that wakes
/// late finds less or nothing left, and the caller waits only for indices already begun,
/// never for a helper that has not started (a helper that starts after the end finds no index
/// and returns). What `job(i)` computes must not depend on which thread runs it; then the
/// results are those of a sequential loop.
pub fn parallel_for_dynamic(count: usize, job: &(dyn Fn(usize) + Sync)) {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Acquire;
    let helpers = rayon::current_num_threads()
        .saturating_sub(1)
        .min(count.saturating_sub(1));
    if helpers == 0 {
        (0..count).for_each(job);
        return;
    }
    let shared = Arc::new(Claims {
        next: std::sync::atomic::AtomicUsize::new(0),
        done: std::sync::atomic::AtomicUsize::new(0),
        count,
        // SAFETY (of the lifetime's erasure): `job` is called only for an index below `count`
        // claimed from `next`, and this function returns only once `done` counts all of
        // them, so no call outlives the borrow; a helper that starts later only reads the
        // counters, which its `Arc` keeps alive.
        job: unsafe {
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
                job,
            )
        },
        panic: std::sync::Mutex::new(None),
    });
    for _ in 0..helpers {
        let shared = Arc::clone(&shared);
        rayon::spawn(move || shared.work());
    }
    shared.work();
    // Every index is claimed; wait for the ones still running elsewhere. A helper holds an
    // index for one job's time, so spin, yielding now and then to a helper that shares this
    // core.
    let mut spins = 0u32;
    while shared.done.load(Acquire) < count {
        spins += 1;
        if spins.is_multiple_of(64) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    if let Some(payload) = shared
        .panic
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        std::panic::resume_unwind(payload);
    }
}

/// The state [`parallel_for_dynamic`] shares with its helpers.
struct Claims {
    /// The next index to hand out (it runs past `count` as late helpers ask).
    next: std::sync::atomic::AtomicUsize,
    /// How many indices have finished.
    done: std::sync::atomic::AtomicUsize,
    count: usize,
    /// The job, valid for indices below `count` until `done` reaches it.
    job: *const (dyn Fn(usize) + Sync),
    /// The first panic of a job, raised again on the calling thread.
    panic: std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

// SAFETY: `job` points to a `Sync` closure, called through a shared reference only.
unsafe impl Send for Claims {}
// SAFETY: as above; the counters are atomics and the payload is behind a mutex.
unsafe impl Sync for Claims {}

impl Claims {
    /// Claims and runs indices until none is left. A panicking job still counts as done (its
    /// payload is kept for the caller), so the caller's wait always ends.
    fn work(&self) {
        use std::sync::atomic::Ordering::{AcqRel, Release};
        loop {
            let i = self.next.fetch_add(1, AcqRel);
            if i >= self.count {
                return;
            }
            // SAFETY: `i < count` was claimed here, so the caller is still waiting (see
            // `parallel_for_dynamic`) and the job it borrowed is alive.
            let job = unsafe { &*self.job };
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(i))) {
                let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(p);
            }
            self.done.fetch_add(1, Release);
        }
    }
}

/// Runs `f(i, chunk)` on the pool for every `size`-element chunk of `data` (the last may be
/// shorter), `i` counting from 0. Generic only over the element type; see [`parallel_for`].
pub fn for_chunks_mut<T: Send>(data: &mut [T], size: usize, f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    let (len, base) = (data.len(), SharedMut(data.as_mut_ptr()));
    let size = size.max(1);
    parallel_for(len.div_ceil(size), &|i| {
        let start = i * size;
        // SAFETY: chunk `i` is `start..start + its length`, inside `data` and disjoint from
        // every other chunk; `data` stays borrowed mutably for the whole call.
        f(i, unsafe { base.slice(start, size.min(len - start)) })
    });
}

/// `f(i)` for every `i` in `0..count`, computed on the pool, in order. Generic only over the
/// result type; see [`parallel_for`].
pub fn parallel_map<T: Send>(count: usize, f: &(dyn Fn(usize) -> T + Sync)) -> Vec<T> {
    let mut out = Vec::with_capacity(count);
    let base = SharedMut(out.spare_capacity_mut().as_mut_ptr());
    parallel_for(count, &|i| {
        // SAFETY: slot `i` is written by job `i` alone, and lies inside the capacity.
        unsafe { base.slice(i, 1)[0].write(f(i)) };
    });
    // SAFETY: every slot `0..count` was written above (a panic in `f` unwinds past this).
    unsafe { out.set_len(count) };
    out
}

/// A pointer that parallel jobs may share: each job writes only its own disjoint part of the
/// buffer behind it.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut<T>(pub(crate) *mut T);
// SAFETY: users of `SharedMut` give each job a disjoint range, so no element is written by
// two threads or read while another writes it.
unsafe impl<T: Send> Sync for SharedMut<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// The pointer (a method, so closures capture the whole wrapper and its `Sync`, not the
    /// bare field).
    pub(crate) fn ptr(&self) -> *mut T {
        self.0
    }

    /// The `len` elements from `start`.
    ///
    /// # Safety
    /// The range lies inside the buffer, and no other live slice overlaps it.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, start: usize, len: usize) -> &mut [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(start), len) }
    }
}

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

#[cfg(test)]
mod tests {
    use super::parallel_for_dynamic;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every index runs exactly once, from inside and outside the pool alike, and the call
    /// returns only after all of them.
    #[test]
    fn dynamic_runs_every_index_once() {
        for count in [0, 1, 2, 3, 17, 1000] {
            let hits: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
            parallel_for_dynamic(count, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            rayon::scope(|_| {
                parallel_for_dynamic(count, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                })
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 2));
        }
    }

    /// A job's panic reaches the caller once every index has finished, whichever thread ran
    /// it.
    #[test]
    fn dynamic_passes_a_panic_on() {
        let done = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(|| {
            parallel_for_dynamic(64, &|i| {
                done.fetch_add(1, Ordering::Relaxed);
                assert!(i != 40, "job 40 fails");
            })
        });
        let payload = caught.unwrap_err();
        let msg = (payload.downcast_ref::<String>().map(String::as_str))
            .or_else(|| payload.downcast_ref::<&str>().copied());
        assert_eq!(msg, Some("job 40 fails"));
        assert_eq!(done.load(Ordering::Relaxed), 64);
    }
}
