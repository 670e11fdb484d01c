//! Native emulation of CUDA's execution model for general SIMT kernels: grids of blocks of
//! threads with shared memory, barriers and warp shuffles, so a GPU kernel written with
//! `#[kernel]` runs (slowly, but exactly) on the CPU and can be tested without a GPU.
//!
//! Blocks run in parallel on rayon's threads when no block can see another's writes during
//! the launch (the kernel never calls `atomic_add`, `thread_fence` or `grid_sync`, itself or
//! through a device function): then the order does not change a number. A kernel that adds
//! atomically or fences runs its blocks one after another, in grid order; one that calls
//! `grid_sync` runs them at once, an OS thread each ([`run_blocks_together`]), as a
//! cooperative launch keeps them all resident on a GPU. Within a block, a body that never synchronizes runs its
//! threads one after another; a body that calls `sync_threads` or a warp shuffle runs each
//! thread as a coroutine with its own stack (`corosensei`), all on the calling OS thread: a
//! thread that reaches a barrier suspends, and a round-robin scheduler resumes the others until
//! every live thread has arrived. A barrier therefore costs a stack switch per thread, not an OS
//! context switch. As on the GPU, a thread that has returned no longer counts at a barrier, so
//! `if i >= n { return; }` before a barrier works; threads that wait at different barriers
//! forever (a hang on the GPU) are a launch error here.
//!
//! Invariant: everything threads share (global buffers written by the kernel, shared arrays,
//! warp exchange slots) is accessed through atomics with relaxed ordering; the threads of a
//! block interleave only at barriers, on one OS thread, so a racy kernel gives the numbers of one
//! interleaving, never undefined behavior in Rust. Blocks running together meet at the grid's
//! barrier (a mutex), which orders what each wrote before it for every reader after it.

use super::LaunchError;
use super::tensor_core::AsyncCopies;
use super::tma::Mbarrier;
use crate::{Element, FloatMath};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::mem::{align_of, size_of, transmute_copy};
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Threads per warp, as on every NVIDIA GPU.
pub const WARP_SIZE: usize = 32;

/// A grid or block extent in up to three dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    /// Extent along x (the fastest-varying thread index).
    pub x: u32,
    /// Extent along y.
    pub y: u32,
    /// Extent along z.
    pub z: u32,
}

impl Dim3 {
    /// Number of points.
    pub fn count(self) -> usize {
        self.x as usize * self.y as usize * self.z as usize
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

/// The grid and block a SIMT kernel runs with, natively or on a GPU.
///
/// ```
/// let cfg = rtx_kernels::kernel::LaunchConfig::new(8, 256);
/// assert_eq!((cfg.grid.x, cfg.block.x, cfg.block.y), (8, 256, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block (at most 1024 in all).
    pub block: Dim3,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads each.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
        }
    }
}

/// A value that fits a 64-bit word, so threads can exchange it through atomics.
pub trait Word: Copy + Send + Sync + 'static {
    /// The bits.
    fn to_word(self) -> u64;
    /// Back from the bits.
    fn from_word(w: u64) -> Self;
}

impl<A: FloatMath> Word for A {
    #[inline]
    fn to_word(self) -> u64 {
        // Both compute types widen exactly to f64, so this round trip is lossless.
        self.to_f64().to_bits()
    }
    #[inline]
    fn from_word(w: u64) -> Self {
        A::c(f64::from_bits(w))
    }
}

macro_rules! int_word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            #[inline]
            fn to_word(self) -> u64 {
                self as u64
            }
            #[inline]
            fn from_word(w: u64) -> Self {
                w as $t
            }
        }
    )*};
}
int_word!(usize, u32, u64, i32, i64, u8);

impl Word for bool {
    #[inline]
    fn to_word(self) -> u64 {
        self as u64
    }
    #[inline]
    fn from_word(w: u64) -> Self {
        w != 0
    }
}

/// A reusable barrier whose party shrinks as threads exit, like `__syncthreads` on threads
/// that have returned. Its threads are coroutines of one OS thread, so plain cells suffice.
pub(crate) struct Barrier {
    live: Cell<usize>,
    arrived: Cell<usize>,
    generation: Cell<u64>,
}

impl Barrier {
    fn new(parties: usize) -> Self {
        Barrier {
            live: Cell::new(parties),
            arrived: Cell::new(0),
            generation: Cell::new(0),
        }
    }

    /// Counts the caller in; true when it was the last one the barrier waited for.
    fn arrive(&self) -> bool {
        self.arrived.set(self.arrived.get() + 1);
        self.release_if_full()
    }

    fn leave(&self) {
        self.live.set(self.live.get() - 1);
        if self.arrived.get() > 0 {
            self.release_if_full();
        }
    }

    fn release_if_full(&self) -> bool {
        if self.arrived.get() < self.live.get() {
            return false;
        }
        self.arrived.set(0);
        self.generation.set(self.generation.get() + 1);
        true
    }
}

/// One warp's exchange slots and the barrier its shuffles meet at.
pub(crate) struct Warp {
    slots: [AtomicU64; WARP_SIZE],
    /// [`WIDE`] words per lane, for the warp-wide exchanges of the tensor-core intrinsics.
    pub(crate) wide: Box<[AtomicU64]>,
    pub(crate) len: usize,
    pub(crate) barrier: Barrier,
}

/// Words per lane in [`Warp::wide`].
pub(crate) const WIDE: usize = 4;

/// What the threads of one block share when they synchronize.
pub(crate) struct BlockSync {
    barrier: Barrier,
    warps: Vec<Warp>,
    /// Arrivals at barriers and threads that returned, so the scheduler can tell a hang.
    pub(crate) progress: Cell<u64>,
    /// The block's `mbarrier`s, as their intrinsics left them (`tma.rs`).
    pub(crate) mbarriers: RefCell<Vec<Mbarrier>>,
    /// The grid barriers the block has passed (`grid_sync`).
    grid_passes: Cell<u64>,
}

/// One block of a native launch.
pub struct BlockCtx {
    kernel: &'static str,
    block_idx: Dim3,
    pub(crate) launch: LaunchConfig,
    uses_sync: bool,
    /// The grid's barrier, when the blocks run together ([`run_blocks_together`]).
    grid: Option<Arc<GridBarrier>>,
}

/// One thread of a native launch: its indices, and the block's barrier and warps.
pub struct ThreadCtx<'a> {
    thread_idx: Dim3,
    pub(crate) linear: usize,
    pub(crate) block: &'a BlockCtx,
    pub(crate) sync: Option<&'a BlockSync>,
    /// Suspends this thread's coroutine while it waits at a barrier.
    yielder: Option<&'a Yielder<(), ()>>,
    /// The thread's `cp_async` copies not yet waited for (`tensor_core.rs`).
    pub(crate) copies: RefCell<AsyncCopies>,
}

/// How the emulation runs a launch's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockOrder {
    /// In parallel on rayon's threads: no block sees another's writes during the launch (the
    /// kernel never calls `atomic_add`, `thread_fence` or `grid_sync`), so the order changes
    /// no number.
    Parallel,
    /// One after another in grid order (x fastest): the kernel adds atomically or fences.
    InOrder,
    /// All at once, an OS thread each: the kernel calls `grid_sync`
    /// ([`run_blocks_together`]).
    Together,
}

/// Runs `block_fn` for every block of the grid in `order`. An error is the first in grid
/// order whatever the order the blocks ran in.
pub fn run_blocks(
    kernel: &'static str,
    launch: LaunchConfig,
    uses_sync: bool,
    order: BlockOrder,
    block_fn: impl Fn(&BlockCtx) -> Result<(), LaunchError> + Sync,
) -> Result<(), LaunchError> {
    if order == BlockOrder::Together {
        return run_blocks_together(kernel, launch, block_fn);
    }
    check_block(kernel, launch)?;
    let blocks = launch.grid.count();
    let block = |i: usize| {
        block_fn(&BlockCtx {
            kernel,
            block_idx: block_at(launch.grid, i),
            launch,
            uses_sync,
            grid: None,
        })
    };
    if order == BlockOrder::Parallel && blocks > 1 && rayon::current_num_threads() > 1 {
        use rayon::prelude::*;
        let failed = (0..blocks)
            .into_par_iter()
            .filter_map(|i| block(i).err().map(|e| (i, e)))
            .min_by_key(|(i, _)| *i);
        return failed.map_or(Ok(()), |(_, e)| Err(e));
    }
    (0..blocks).try_for_each(block)
}

/// The index of block `i` of `grid`, counting x fastest.
fn block_at(grid: Dim3, i: usize) -> Dim3 {
    let (gx, gy) = (grid.x as usize, grid.y as usize);
    Dim3 {
        x: (i % gx) as u32,
        y: (i / gx % gy) as u32,
        z: (i / (gx * gy)) as u32,
    }
}

/// An error unless a block of `launch` has 1 to 1024 threads.
fn check_block(kernel: &str, launch: LaunchConfig) -> Result<(), LaunchError> {
    let threads = launch.block.count();
    if threads == 0 || threads > 1024 {
        return Err(LaunchError::new(format!(
            "kernel `{kernel}`: a block of {:?} has {threads} threads; blocks hold 1 to 1024",
            launch.block
        )));
    }
    Ok(())
}

/// Blocks a grid that synchronizes may have in the emulation (an OS thread each).
pub const MAX_BLOCKS_TOGETHER: usize = 1024;

/// Runs `block_fn` for every block of the grid at once, an OS thread each, for a kernel that
/// calls `grid_sync` (its blocks wait for each other there, so none may wait for another to
/// finish first). A block that returns or fails while others wait at the grid's barrier
/// breaks it: they panic rather than hang (on a GPU the launch would hang). The first block
/// error in grid order is returned; a panic is resumed, the block's own before the broken
/// barrier's it caused.
pub fn run_blocks_together(
    kernel: &'static str,
    launch: LaunchConfig,
    block_fn: impl Fn(&BlockCtx) -> Result<(), LaunchError> + Sync,
) -> Result<(), LaunchError> {
    check_block(kernel, launch)?;
    let blocks = launch.grid.count();
    if blocks > MAX_BLOCKS_TOGETHER {
        return Err(LaunchError::new(format!(
            "kernel `{kernel}` calls grid_sync, so its blocks run together, an OS thread each in \
             the emulation: a grid of {:?} has {blocks} blocks, more than {MAX_BLOCKS_TOGETHER}",
            launch.grid
        )));
    }
    let grid = Arc::new(GridBarrier::new(blocks));
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..blocks)
            .map(|i| {
                let (grid, block_fn) = (Arc::clone(&grid), &block_fn);
                let block_idx = block_at(launch.grid, i);
                scope.spawn(move || {
                    let _exit = GridExit(&grid);
                    block_fn(&BlockCtx {
                        kernel,
                        block_idx,
                        launch,
                        uses_sync: true,
                        grid: Some(Arc::clone(&grid)),
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    let mut broken = None;
    let mut first_err = None;
    for r in results {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(payload) if payload.is::<GridBroken>() => {
                broken.get_or_insert(payload);
            }
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if let Some(payload) = broken {
        let GridBroken(msg) = *payload.downcast::<GridBroken>().expect("checked above");
        return Err(LaunchError::new(msg));
    }
    Ok(())
}

/// The barrier every block of a grid meets at in `grid_sync`: a generation count, and the
/// blocks that have left the launch (which no block may then wait for).
pub(crate) struct GridBarrier {
    state: Mutex<GridState>,
    turn: Condvar,
    blocks: usize,
}

struct GridState {
    arrived: usize,
    generation: u64,
    exited: usize,
}

/// The panic of a block left waiting at a grid barrier another block will never reach.
struct GridBroken(String);

impl GridBarrier {
    fn new(blocks: usize) -> Self {
        GridBarrier {
            state: Mutex::new(GridState {
                arrived: 0,
                generation: 0,
                exited: 0,
            }),
            turn: Condvar::new(),
            blocks,
        }
    }

    /// Blocks the calling OS thread until every block of the grid has arrived.
    fn wait(&self, kernel: &str, block: Dim3) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = s.generation;
        s.arrived += 1;
        if s.arrived == self.blocks {
            s.arrived = 0;
            s.generation += 1;
            self.turn.notify_all();
            return;
        }
        loop {
            if s.generation != generation {
                return;
            }
            if s.exited > 0 {
                drop(s);
                std::panic::panic_any(GridBroken(format!(
                    "kernel `{kernel}`: block {block:?} waits at grid_sync for blocks that have \
                     returned or failed (on a GPU this launch would hang)"
                )));
            }
            s = self.turn.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Counts its block out of the grid's barrier when the block returns or unwinds.
struct GridExit<'a>(&'a GridBarrier);

impl Drop for GridExit<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.exited += 1;
        self.0.turn.notify_all();
    }
}

impl BlockCtx {
    fn thread_at(&self, linear: usize) -> Dim3 {
        let b = self.launch.block;
        let (bx, by) = (b.x as usize, b.y as usize);
        Dim3 {
            x: (linear % bx) as u32,
            y: (linear / bx % by) as u32,
            z: (linear / (bx * by)) as u32,
        }
    }

    /// Runs every thread of this block through `body`.
    pub fn run_threads<F>(&self, body: F) -> Result<(), LaunchError>
    where
        F: Fn(&ThreadCtx<'_>) + Sync,
    {
        let n = self.launch.block.count();
        if !self.uses_sync {
            for linear in 0..n {
                let ctx = ThreadCtx {
                    thread_idx: self.thread_at(linear),
                    linear,
                    block: self,
                    sync: None,
                    yielder: None,
                    copies: RefCell::default(),
                };
                body(&ctx);
                ctx.finish_copies();
            }
            return Ok(());
        }
        let sync = BlockSync {
            barrier: Barrier::new(n),
            warps: (0..n.div_ceil(WARP_SIZE))
                .map(|w| {
                    let len = WARP_SIZE.min(n - w * WARP_SIZE);
                    Warp {
                        slots: std::array::from_fn(|_| AtomicU64::new(0)),
                        wide: (0..WARP_SIZE * WIDE).map(|_| AtomicU64::new(0)).collect(),
                        len,
                        barrier: Barrier::new(len),
                    }
                })
                .collect(),
            progress: Cell::new(0),
            mbarriers: RefCell::default(),
            grid_passes: Cell::new(0),
        };
        let (sync, body) = (&sync, &body);
        let mut threads = Vec::with_capacity(n);
        for linear in 0..n {
            let stack = match take_stack() {
                Ok(stack) => stack,
                Err(e) => {
                    for rest in linear..n {
                        ExitGuard(sync, rest).leave();
                    }
                    return Err(LaunchError::new(format!(
                        "kernel `{}`: no stack for emulated thread {linear} of {n}: {e}",
                        self.kernel
                    )));
                }
            };
            let thread = move |yielder: &Yielder<(), ()>, ()| {
                let ctx = ThreadCtx {
                    thread_idx: self.thread_at(linear),
                    linear,
                    block: self,
                    sync: Some(sync),
                    yielder: Some(yielder),
                    copies: RefCell::default(),
                };
                // Leaves the barriers when the body returns or unwinds, so the other threads
                // are not left waiting for it.
                let _exit = ExitGuard(sync, linear);
                body(&ctx);
                ctx.finish_copies();
            };
            // SAFETY: the closure borrows `self`, `sync` and `body`, which outlive `threads`:
            // every coroutine is run to completion or dropped (which unwinds its stack) before
            // this function returns, and none is forgotten.
            threads.push(unsafe { Coroutine::with_stack_unchecked(stack, thread) });
        }
        schedule(self.kernel, sync, threads)
    }
}

/// A coroutine that runs one emulated thread.
type Thread = Coroutine<(), (), (), DefaultStack>;

/// Bytes of stack per emulated thread, as the OS threads this emulator once used had.
const STACK_BYTES: usize = 1 << 20;

thread_local! {
    /// Stacks of finished emulated threads, reused by the next block run on this OS thread.
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

fn take_stack() -> std::io::Result<DefaultStack> {
    match STACKS.with_borrow_mut(Vec::pop) {
        Some(stack) => Ok(stack),
        None => DefaultStack::new(STACK_BYTES),
    }
}

/// Resumes the block's threads round-robin until all have returned. A thread suspends only
/// while it waits at a barrier, so a full round in which no thread arrives anywhere, passes a
/// barrier or returns means every live thread waits for one that never comes.
fn schedule(kernel: &str, sync: &BlockSync, mut threads: Vec<Thread>) -> Result<(), LaunchError> {
    while !threads.is_empty() {
        let before = sync.progress.get();
        let mut i = 0;
        while i < threads.len() {
            match threads[i].resume(()) {
                CoroutineResult::Yield(()) => i += 1,
                CoroutineResult::Return(()) => {
                    let done = threads.swap_remove(i);
                    STACKS.with_borrow_mut(|pool| pool.push(done.into_stack()));
                }
            }
        }
        if !threads.is_empty() && sync.progress.get() == before {
            return Err(LaunchError::new(format!(
                "kernel `{kernel}`: {} threads of the block wait at barriers no other thread \
                 reaches (on a GPU this launch would hang)",
                threads.len()
            )));
        }
    }
    Ok(())
}

struct ExitGuard<'a>(&'a BlockSync, usize);

impl ExitGuard<'_> {
    fn leave(&self) {
        self.0.barrier.leave();
        self.0.warps[self.1 / WARP_SIZE].barrier.leave();
        self.0.progress.set(self.0.progress.get() + 1);
    }
}

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

impl ThreadCtx<'_> {
    /// `threadIdx.x`.
    pub fn thread_idx_x(&self) -> usize {
        self.thread_idx.x as usize
    }
    /// `threadIdx.y`.
    pub fn thread_idx_y(&self) -> usize {
        self.thread_idx.y as usize
    }
    /// `threadIdx.z`.
    pub fn thread_idx_z(&self) -> usize {
        self.thread_idx.z as usize
    }
    /// `blockIdx.x`.
    pub fn block_idx_x(&self) -> usize {
        self.block.block_idx.x as usize
    }
    /// `blockIdx.y`.
    pub fn block_idx_y(&self) -> usize {
        self.block.block_idx.y as usize
    }
    /// `blockIdx.z`.
    pub fn block_idx_z(&self) -> usize {
        self.block.block_idx.z as usize
    }
    /// `blockDim.x`.
    pub fn block_dim_x(&self) -> usize {
        self.block.launch.block.x as usize
    }
    /// `blockDim.y`.
    pub fn block_dim_y(&self) -> usize {
        self.block.launch.block.y as usize
    }
    /// `blockDim.z`.
    pub fn block_dim_z(&self) -> usize {
        self.block.launch.block.z as usize
    }
    /// `gridDim.x`.
    pub fn grid_dim_x(&self) -> usize {
        self.block.launch.grid.x as usize
    }
    /// `gridDim.y`.
    pub fn grid_dim_y(&self) -> usize {
        self.block.launch.grid.y as usize
    }
    /// `gridDim.z`.
    pub fn grid_dim_z(&self) -> usize {
        self.block.launch.grid.z as usize
    }
    /// The lane within the warp (linear thread index mod 32).
    pub fn lane_id(&self) -> usize {
        self.linear % WARP_SIZE
    }

    /// This thread's warp, when the block runs its threads concurrently.
    pub(crate) fn warp(&self) -> Option<&Warp> {
        self.sync.map(|s| &s.warps[self.linear / WARP_SIZE])
    }

    /// Waits at `barrier` until every live thread it counts has arrived, suspending this
    /// thread's coroutine so the others run.
    pub(crate) fn wait_at(&self, barrier: &Barrier) {
        let (Some(sync), Some(yielder)) = (self.sync, self.yielder) else {
            return;
        };
        let generation = barrier.generation.get();
        sync.progress.set(sync.progress.get() + 1);
        if barrier.arrive() {
            return;
        }
        while barrier.generation.get() == generation {
            yielder.suspend(());
        }
    }

    /// Suspends this thread's coroutine for a round of the block's others (a thread that
    /// polls a condition, such as an `mbarrier` phase, between its checks).
    pub(crate) fn suspend(&self) {
        if let Some(yielder) = self.yielder {
            yielder.suspend(());
        }
    }

    /// `__syncthreads()`.
    pub fn sync_threads(&self) {
        if let Some(sync) = self.sync {
            self.wait_at(&sync.barrier);
        }
    }

    /// `grid_sync()`: waits until every thread of every block of the grid has arrived. The
    /// block's last thread to arrive waits for the other blocks (blocking this OS thread, on
    /// which the block's other threads are suspended at the block's barrier).
    ///
    /// # Panics
    /// When the blocks do not run together (a launch through [`run_blocks`]), or when a thread
    /// of the block has returned before the barrier: on a GPU either would hang.
    pub fn grid_sync(&self) {
        let b = self.block;
        let (Some(grid), Some(sync), Some(yielder)) = (&b.grid, self.sync, self.yielder) else {
            panic!(
                "kernel `{}`: grid_sync in a launch whose blocks do not run together",
                b.kernel
            );
        };
        let barrier = &sync.barrier;
        let n = b.launch.block.count();
        let returned = || {
            panic!(
                "kernel `{}`: {} of the {n} threads of block {:?} returned before grid_sync \
                 (every thread must reach it; on a GPU this launch would hang)",
                b.kernel,
                n - barrier.live.get(),
                b.block_idx
            )
        };
        let generation = barrier.generation.get();
        let passes = sync.grid_passes.get();
        sync.progress.set(sync.progress.get() + 1);
        if barrier.arrive() {
            if barrier.live.get() != n {
                returned();
            }
            grid.wait(b.kernel, b.block_idx);
            sync.grid_passes.set(passes + 1);
            return;
        }
        while barrier.generation.get() == generation {
            yielder.suspend(());
        }
        // Released by a thread that returned instead of arriving: the grid was not waited for.
        if sync.grid_passes.get() == passes {
            returned();
        }
    }

    fn exchange<V: Word>(&self, v: V, src_lane: impl Fn(usize) -> usize) -> V {
        let Some(sync) = self.sync else { return v };
        let warp = &sync.warps[self.linear / WARP_SIZE];
        let lane = self.linear % WARP_SIZE;
        warp.slots[lane].store(v.to_word(), Relaxed);
        self.wait_at(&warp.barrier);
        let src = src_lane(lane);
        let out = if src < warp.len {
            V::from_word(warp.slots[src].load(Relaxed))
        } else {
            v
        };
        // Nobody may overwrite a slot before every lane has read it.
        self.wait_at(&warp.barrier);
        out
    }

    /// `__shfl_down_sync(full mask, v, offset)`: the value of lane `lane + offset`, or `v`
    /// itself past the end of the warp.
    pub fn shuffle_down<V: Word>(&self, v: V, offset: u32) -> V {
        self.exchange(v, |lane| lane + offset as usize)
    }

    /// `__shfl_xor_sync(full mask, v, mask)`: the value of lane `lane ^ mask`.
    pub fn shuffle_xor<V: Word>(&self, v: V, mask: u32) -> V {
        self.exchange(v, |lane| lane ^ mask as usize)
    }
}

/// A `__shared__` array of one block.
pub struct SharedArray<V, const N: usize> {
    /// Shared by reference count, so a `cp_async` copy can hold on to its destination until
    /// the thread waits for it.
    pub(crate) cells: Arc<[AtomicU64]>,
    _v: PhantomData<V>,
}

impl<V: Word, const N: usize> SharedArray<V, N> {
    /// `N` zeroed cells (CUDA leaves shared memory uninitialized; zero is one such value).
    pub fn new() -> Self {
        SharedArray {
            cells: (0..N).map(|_| AtomicU64::new(0)).collect(),
            _v: PhantomData,
        }
    }
    /// Reads cell `i`.
    #[track_caller]
    pub fn get(&self, i: usize) -> V {
        V::from_word(self.cells[i].load(Relaxed))
    }
    /// Writes cell `i`.
    #[track_caller]
    pub fn set(&self, i: usize, v: V) {
        self.cells[i].store(v.to_word(), Relaxed)
    }
    /// Atomically replaces cell `i` by `f(old)`, and returns `old`.
    #[track_caller]
    pub fn update(&self, i: usize, f: impl Fn(V) -> V) -> V {
        let cell = &self.cells[i];
        let mut old = cell.load(Relaxed);
        loop {
            let new = f(V::from_word(old)).to_word();
            match cell.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                Ok(_) => return V::from_word(old),
                Err(now) => old = now,
            }
        }
    }
}

impl<V: Word, const N: usize> Default for SharedArray<V, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A global buffer a kernel reads: its own `&[T]` parameters, and, handed to a device
/// function's `&[T]` parameter, a buffer it writes in another phase (a `GlobalMut`). Device
/// functions take their read-only buffers as `&(impl Read<T> + ?Sized)`, so one function
/// reads either.
pub trait Read<E> {
    /// Element `i`; out of bounds, a panic naming the length and the index.
    fn read(&self, i: usize) -> E;
}

impl<E: Copy> Read<E> for [E] {
    #[inline(always)]
    #[track_caller]
    fn read(&self, i: usize) -> E {
        self[i]
    }
}

impl<E: Copy> Read<E> for GlobalMut<'_, E> {
    #[inline(always)]
    #[track_caller]
    fn read(&self, i: usize) -> E {
        self.load(i)
    }
}

impl<E, R: Read<E> + ?Sized> Read<E> for &R {
    #[inline(always)]
    #[track_caller]
    fn read(&self, i: usize) -> E {
        (**self).read(i)
    }
}

/// A kernel's writable global buffer, shared by all emulated threads.
pub struct GlobalMut<'a, E> {
    ptr: *mut E,
    len: usize,
    _borrow: PhantomData<&'a mut [E]>,
}

// SAFETY: every access goes through an atomic of the element's size (see `load`/`store`),
// so sharing across threads cannot race in the Rust sense.
unsafe impl<E: Send> Send for GlobalMut<'_, E> {}
// SAFETY: as above.
unsafe impl<E: Send> Sync for GlobalMut<'_, E> {}

impl<'a, E: Element> GlobalMut<'a, E> {
    /// Wraps a mutable element buffer.
    pub fn new(kernel: &str, name: &str, s: &'a mut [E]) -> Result<Self, LaunchError> {
        Self::wrap(kernel, name, s)
    }
}

impl<'a> GlobalMut<'a, usize> {
    /// Wraps a mutable index buffer.
    pub fn new_usize(kernel: &str, name: &str, s: &'a mut [usize]) -> Result<Self, LaunchError> {
        Self::wrap(kernel, name, s)
    }
}

impl<'a> GlobalMut<'a, u32> {
    /// Wraps a mutable `u32` buffer.
    pub fn new_u32(kernel: &str, name: &str, s: &'a mut [u32]) -> Result<Self, LaunchError> {
        Self::wrap(kernel, name, s)
    }
}

impl<'a, A: FloatMath> GlobalMut<'a, A> {
    /// Wraps a mutable buffer of a compute type (`&mut [T::Acc]`: f32 or f64).
    pub fn new_acc(kernel: &str, name: &str, s: &'a mut [A]) -> Result<Self, LaunchError> {
        Self::wrap(kernel, name, s)
    }
}

impl<'a> GlobalMut<'a, u64> {
    /// Wraps a mutable `u64` buffer.
    pub fn new_u64(kernel: &str, name: &str, s: &'a mut [u64]) -> Result<Self, LaunchError> {
        Self::wrap(kernel, name, s)
    }
}

impl<'a, E: Copy> GlobalMut<'a, E> {
    /// Only for plain-bits types (every bit pattern read back was written as an `E`) of size
    /// 1, 2, 4 or 8: the public constructors restrict `E` to those.
    fn wrap(kernel: &str, name: &str, s: &'a mut [E]) -> Result<Self, LaunchError> {
        let align = match size_of::<E>() {
            1 => align_of::<AtomicU8>(),
            2 => align_of::<AtomicU16>(),
            4 => align_of::<AtomicU32>(),
            8 => align_of::<AtomicU64>(),
            n => {
                return Err(LaunchError::new(format!(
                    "kernel `{kernel}`: `{name}` has {n}-byte elements; only 1, 2, 4 and 8 bytes \
                     can be emulated"
                )));
            }
        };
        if !(s.as_ptr() as usize).is_multiple_of(align) {
            return Err(LaunchError::new(format!(
                "kernel `{kernel}`: `{name}` is not aligned to {align} bytes for atomic access"
            )));
        }
        Ok(GlobalMut {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            _borrow: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[track_caller]
    fn at(&self, i: usize) -> *mut E {
        assert!(
            i < self.len,
            "index out of bounds: the len is {} but the index is {i}",
            self.len
        );
        // SAFETY: `i < len`, inside the borrowed slice.
        unsafe { self.ptr.add(i) }
    }

    /// Reads element `i`.
    #[track_caller]
    pub fn load(&self, i: usize) -> E {
        let p = self.at(i);
        // SAFETY: `p` is in bounds and aligned for the atomic of E's size (checked in `wrap`);
        // the bits read were written as an `E`, so transmuting them back is valid.
        unsafe {
            match size_of::<E>() {
                1 => transmute_copy(&(*(p as *const AtomicU8)).load(Relaxed)),
                2 => transmute_copy(&(*(p as *const AtomicU16)).load(Relaxed)),
                4 => transmute_copy(&(*(p as *const AtomicU32)).load(Relaxed)),
                _ => transmute_copy(&(*(p as *const AtomicU64)).load(Relaxed)),
            }
        }
    }

    /// Writes element `i`.
    #[track_caller]
    pub fn store(&self, i: usize, v: E) {
        let p = self.at(i);
        // SAFETY: as in `load`; `v` is an `E`, so its bits are a valid `E`.
        unsafe {
            match size_of::<E>() {
                1 => (*(p as *const AtomicU8)).store(transmute_copy(&v), Relaxed),
                2 => (*(p as *const AtomicU16)).store(transmute_copy(&v), Relaxed),
                4 => (*(p as *const AtomicU32)).store(transmute_copy(&v), Relaxed),
                _ => (*(p as *const AtomicU64)).store(transmute_copy(&v), Relaxed),
            }
        }
    }

    /// Atomically replaces element `i` by `f(old)` (`atomicAdd` and friends), and returns
    /// `old`.
    #[track_caller]
    pub fn update(&self, i: usize, f: impl Fn(E) -> E) -> E {
        let p = self.at(i);
        macro_rules! cas {
            ($atomic:ty) => {{
                // SAFETY: as in `load` and `store`.
                let a = unsafe { &*(p as *const $atomic) };
                let mut old = a.load(Relaxed);
                loop {
                    // SAFETY: `old` holds the bits of an `E`, and `f` returns an `E`.
                    let new = unsafe { transmute_copy(&f(transmute_copy(&old))) };
                    match a.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                        // SAFETY: `old` holds the bits of an `E`.
                        Ok(_) => return unsafe { transmute_copy(&old) },
                        Err(now) => old = now,
                    }
                }
            }};
        }
        match size_of::<E>() {
            1 => cas!(AtomicU8),
            2 => cas!(AtomicU16),
            4 => cas!(AtomicU32),
            _ => cas!(AtomicU64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent blocks run on more than one OS thread when rayon has several, and a
    /// failure is still the first in grid order.
    #[test]
    fn independent_blocks_run_in_parallel_and_fail_in_grid_order() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        let mut out = vec![0usize; 64];
        let g = GlobalMut::new_usize("t", "out", &mut out).unwrap();
        pool.install(|| {
            run_blocks(
                "t",
                LaunchConfig::new(64, 8),
                false,
                BlockOrder::Parallel,
                |blk| {
                    threads.lock().unwrap().insert(std::thread::current().id());
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    blk.run_threads(|t| {
                        if t.thread_idx_x() == 0 {
                            g.store(t.block_idx_x(), 3 * t.block_idx_x());
                        }
                    })
                },
            )
            .unwrap()
        });
        assert_eq!(out, (0..64).map(|b| 3 * b).collect::<Vec<_>>());
        assert!(
            threads.lock().unwrap().len() > 1,
            "the blocks ran on one thread"
        );
        let err = pool.install(|| {
            run_blocks(
                "t",
                LaunchConfig::new(64, 1),
                false,
                BlockOrder::Parallel,
                |blk| {
                    let b = blk.block_idx.x;
                    if b == 9 || b == 40 {
                        return Err(LaunchError::new(format!("block {b} fails")));
                    }
                    Ok(())
                },
            )
            .unwrap_err()
        });
        assert_eq!(err.message(), "block 9 fails");
    }

    #[test]
    fn barrier_orders_shared_writes_and_shuffles_reduce_a_warp() {
        let mut out = vec![0.0f32; 2];
        let g = GlobalMut::new("t", "out", &mut out).unwrap();
        run_blocks(
            "t",
            LaunchConfig::new(2, 64),
            true,
            BlockOrder::InOrder,
            |blk| {
                let s = SharedArray::<f32, 64>::new();
                blk.run_threads(|t| {
                    let tid = t.thread_idx_x();
                    s.set(tid, (tid + 1) as f32);
                    t.sync_threads();
                    // Every thread reads a neighbour's write: only correct after the barrier.
                    let mut v = s.get(63 - tid);
                    let mut off = 16;
                    while off > 0 {
                        v += t.shuffle_down(v, off);
                        off /= 2;
                    }
                    if t.lane_id() == 0 {
                        g.update(t.block_idx_x(), |o| o + v);
                    }
                })
            },
        )
        .unwrap();
        assert_eq!(out, vec![2080.0, 2080.0]);
    }

    #[test]
    fn returned_threads_do_not_block_the_barrier() {
        let mut out = vec![0usize; 40];
        let g = GlobalMut::new_usize("t", "out", &mut out).unwrap();
        run_blocks(
            "t",
            LaunchConfig::new(1, 40),
            true,
            BlockOrder::InOrder,
            |blk| {
                blk.run_threads(|t| {
                    let i = t.thread_idx_x();
                    if i >= 30 {
                        return;
                    }
                    t.sync_threads();
                    g.store(i, i * 2);
                })
            },
        )
        .unwrap();
        assert_eq!(out[29], 58);
        assert_eq!(out[30], 0);
    }

    #[test]
    fn threads_waiting_at_different_barriers_are_an_error_not_a_hang() {
        let err = run_blocks(
            "diverge",
            LaunchConfig::new(1, 32),
            true,
            BlockOrder::InOrder,
            |blk| {
                blk.run_threads(|t| {
                    // Lane 0 waits at the warp's barrier, the others at the block's.
                    if t.lane_id() == 0 {
                        t.shuffle_xor(1.0f32, 1);
                    } else {
                        t.sync_threads();
                    }
                })
            },
        )
        .unwrap_err();
        assert!(err.message().contains("kernel `diverge`"), "{err}");
        assert!(err.message().contains("32 threads"), "{err}");
    }

    #[test]
    fn a_panicking_thread_unwinds_the_launch_and_the_next_one_runs() {
        let caught = std::panic::catch_unwind(|| {
            run_blocks(
                "boom",
                LaunchConfig::new(1, 64),
                true,
                BlockOrder::InOrder,
                |blk| {
                    blk.run_threads(|t| {
                        t.sync_threads();
                        assert!(t.thread_idx_x() != 40, "thread 40 fails");
                        t.sync_threads();
                    })
                },
            )
        });
        let msg = caught.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"thread 40 fails"));
        // The emulator is left usable: stacks and barriers of the failed launch are gone.
        barrier_orders_shared_writes_and_shuffles_reduce_a_warp();
    }

    /// Block `b` writes its slot, and after the grid's barrier reads the slot of block `b + 1`:
    /// correct only if every block wrote before any read.
    #[test]
    fn blocks_running_together_see_each_others_writes_after_grid_sync() {
        let blocks = 5;
        let mut slots = vec![0usize; blocks];
        let mut seen = vec![0usize; blocks * 32];
        let (s, out) = (
            GlobalMut::new_usize("t", "slots", &mut slots).unwrap(),
            GlobalMut::new_usize("t", "seen", &mut seen).unwrap(),
        );
        run_blocks(
            "t",
            LaunchConfig::new(blocks as u32, 32),
            true,
            BlockOrder::Together,
            |blk| {
                blk.run_threads(|t| {
                    let b = t.block_idx_x();
                    if t.thread_idx_x() == 0 {
                        s.store(b, 10 * (b + 1));
                    }
                    t.grid_sync();
                    out.store(b * 32 + t.thread_idx_x(), s.load((b + 1) % blocks));
                    t.grid_sync();
                    // Nobody writes the slots again until all have read them.
                    if t.thread_idx_x() == 0 {
                        s.store(b, 0);
                    }
                })
            },
        )
        .unwrap();
        let want: Vec<usize> = (0..blocks * 32)
            .map(|i| 10 * ((i / 32 + 1) % blocks + 1))
            .collect();
        assert_eq!(seen, want);
        assert_eq!(slots, vec![0; blocks]);
    }

    #[test]
    fn a_block_that_skips_grid_sync_is_an_error_not_a_hang() {
        let err = run_blocks(
            "skip",
            LaunchConfig::new(3, 32),
            true,
            BlockOrder::Together,
            |blk| {
                blk.run_threads(|t| {
                    if t.block_idx_x() != 1 {
                        t.grid_sync();
                    }
                })
            },
        )
        .unwrap_err();
        assert!(err.message().contains("kernel `skip`"), "{err}");
        assert!(err.message().contains("grid_sync"), "{err}");
    }

    #[test]
    fn a_thread_that_returns_before_grid_sync_is_named() {
        let caught = std::panic::catch_unwind(|| {
            run_blocks(
                "early",
                LaunchConfig::new(2, 64),
                true,
                BlockOrder::Together,
                |blk| {
                    blk.run_threads(|t| {
                        if t.block_idx_x() == 1 && t.thread_idx_x() >= 60 {
                            return;
                        }
                        t.grid_sync();
                    })
                },
            )
        });
        let payload = caught.unwrap_err();
        let msg = payload
            .downcast_ref::<String>()
            .expect("a formatted message");
        assert!(msg.contains("4 of the 64 threads"), "{msg}");
        assert!(msg.contains("returned before grid_sync"), "{msg}");
    }

    #[test]
    fn oversized_blocks_are_an_error() {
        let err = run_blocks(
            "t",
            LaunchConfig::new(1, 2048),
            false,
            BlockOrder::InOrder,
            |_| Ok(()),
        )
        .unwrap_err();
        assert!(err.message().contains("2048 threads"), "{err}");
    }
}
