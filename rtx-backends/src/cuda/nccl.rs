//! NCCL communicators and their collectives on device buffers, for `rtx::dist`'s GPU backend.
//!
//! Streams: every collective is queued on the GPU's one rtx stream (`context`'s invariant), so
//! it is ordered after the ops that produced its input and before the ops that read its output,
//! and the caching allocator's stream-ordered reuse stays safe with no events between streams.
//! Results go to fresh buffers (storage is never written after it is filled).
//!
//! Timeouts: communicators are created non-blocking (`ncclConfig_t::blocking = 0`), and every
//! call is followed by a wait that polls `ncclCommGetAsyncError` and an event after the queued
//! work until both are done or the communicator's timeout passes. A rank that died, hung or never
//! joined therefore gives an error naming this rank and the timeout; the communicator is then
//! aborted (`ncclCommAbort`, which also frees the GPU from the stuck kernel) and every later call
//! fails at once. The wait makes each collective synchronous with the host.
//!
//! DDP's buckets take another path: [`Communicator::queue_all_reduce_in_place`] queues an
//! all-reduce on the communicator's own *side stream*, forked from the GPU's stream by an
//! event, and returns at once, so the reduction runs while the backward goes on;
//! [`Communicator::join`] makes the GPU's stream wait for the side stream, and
//! [`Communicator::wait`] waits for the GPU's stream within the timeout. Both the fork and the
//! join are events between streams, which CUDA graph capture turns into edges of the graph, so
//! this path also runs inside a capture (NCCL 2.9 and later capture their collectives): the
//! side stream joins the capture at its first fork and must be joined back before the capture
//! ends. The allocator's invariant holds because the side stream touches only the bucket,
//! which the caller keeps alive, and unread, until after the join.

use super::gpu::{Gpu, gpu};
use super::nccl_lib::{IN_PROGRESS, Nccl, SUCCESS, Stream, error_string, last_error, nccl};
use super::storage::CudaStorage;
use crate::cpu::ranks::ReduceOp;
use crate::{BackendError, Device, Result};
use cudarc::driver::CudaStream;
use cudarc::driver::sys::CUevent_flags;
use cudarc::nccl::sys::{ncclComm_t, ncclConfig_t, ncclUniqueId};
use rtx_kernels::DType;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bytes of an NCCL unique id: made by one rank, handed to the others (through rtx's store).
pub const NCCL_ID_BYTES: usize = 128;

/// A fresh NCCL unique id, made by the rank that creates a communicator and handed to the rest.
///
/// # Errors
/// [`BackendError::CudaUnavailable`] when NCCL is missing or cannot make one (no network
/// interface).
pub fn nccl_unique_id() -> Result<[u8; NCCL_ID_BYTES]> {
    let lib = nccl()?;
    let mut id = ncclUniqueId {
        internal: [0; NCCL_ID_BYTES],
    };
    // SAFETY: one out-pointer to a live id.
    let r = unsafe { (lib.get_unique_id)(&mut id) };
    if r != SUCCESS {
        return Err(BackendError::CudaUnavailable {
            msg: format!("ncclGetUniqueId failed: {}", error_string(lib, r)),
        });
    }
    Ok(id.internal.map(|c| c as u8))
}

/// One rank's NCCL communicator on one GPU.
pub struct Communicator {
    comm: ncclComm_t,
    lib: &'static Nccl,
    gpu: Arc<Gpu>,
    /// The stream DDP's queued all-reduces run on, beside the GPU's own (see the module doc).
    side: Arc<CudaStream>,
    rank: usize,
    world: usize,
    timeout: Duration,
    /// The first failure; once set, the communicator is aborted and every call returns it.
    failed: Option<String>,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; `&mut self` on
// every call gives that.
unsafe impl Send for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator(rank {} of {}, cuda:{}, {})",
            self.rank, self.world, self.gpu.ordinal, self.lib.name
        )
    }
}

/// `NCCL_CONFIG_INITIALIZER` for NCCL 2.28, non-blocking: every field NCCL may choose left
/// undefined (`NCCL_CONFIG_UNDEF_INT`, null).
fn config() -> ncclConfig_t {
    const UNDEF: c_int = i32::MIN;
    ncclConfig_t {
        size: std::mem::size_of::<ncclConfig_t>(),
        magic: 0xcafe_beef,
        version: 22800,
        blocking: 0,
        cgaClusterSize: UNDEF,
        minCTAs: UNDEF,
        maxCTAs: UNDEF,
        netName: std::ptr::null(),
        splitShare: UNDEF,
        trafficClass: UNDEF,
        commName: std::ptr::null(),
        collnetEnable: UNDEF,
        CTAPolicy: UNDEF,
        shrinkShare: UNDEF,
        nvlsCTAs: UNDEF,
        nChannelsPerNetPeer: UNDEF,
        nvlinkCentricSched: UNDEF,
    }
}

/// NCCL's element type for a reduction over `dtype`.
fn nccl_dtype(dtype: DType) -> Option<c_int> {
    Some(match dtype {
        DType::U8 => 1,
        DType::I32 => 2,
        DType::I64 => 4,
        DType::F16 => 6,
        DType::F32 => 7,
        DType::F64 => 8,
        DType::BF16 => 9,
        _ => return None,
    })
}

/// NCCL's operation for `op` (`ncclAvg` divides by the world size on the device).
fn nccl_op(op: ReduceOp) -> c_int {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Product => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
        ReduceOp::Avg => 4,
    }
}

/// `ncclUint8`, for the collectives that only move bytes.
const BYTES: c_int = 1;

impl Communicator {
    /// Joins the communicator of `world` ranks named by `id` as rank `rank`, on GPU `ordinal`,
    /// waiting up to `timeout` for every rank to join.
    ///
    /// # Errors
    /// [`BackendError::CudaUnavailable`] without NCCL or the GPU; [`BackendError::Cuda`] naming
    /// the rank and NCCL's message when init fails, or the timeout when the other ranks do not
    /// join in time (the half-made communicator is aborted).
    pub fn init(
        ordinal: usize,
        rank: usize,
        world: usize,
        id: &[u8; NCCL_ID_BYTES],
        timeout: Duration,
    ) -> Result<Communicator> {
        let lib = nccl()?;
        let g = gpu(ordinal)?;
        // NCCL picks the device from the current context (`cudaGetDevice`).
        g.bind()?;
        let (Ok(n), Ok(r)) = (c_int::try_from(world), c_int::try_from(rank)) else {
            return Err(BackendError::BadArgument {
                op: "ncclCommInitRankConfig",
                msg: format!("rank {rank} of {world} does not fit NCCL's int"),
            });
        };
        let id = ncclUniqueId {
            internal: id.map(|b| b as _),
        };
        // Made now, never while a graph is captured: creating a stream may synchronize.
        let side = g.ctx.new_stream().map_err(|e| g.err("cuStreamCreate", e))?;
        let mut cfg = config();
        let mut comm: ncclComm_t = std::ptr::null_mut();
        // SAFETY: out-pointer to a live handle, the id by value, a config NCCL 2.28 reads.
        let res = unsafe { (lib.comm_init_rank_config)(&mut comm, n, id, r, &mut cfg) };
        let mut c = Communicator {
            comm,
            lib,
            gpu: g,
            side,
            rank,
            world,
            timeout,
            failed: None,
        };
        if res != SUCCESS && res != IN_PROGRESS {
            let msg = c.describe("ncclCommInitRankConfig", res);
            return Err(c.fail("ncclCommInitRankConfig", msg));
        }
        c.wait_ready("ncclCommInitRankConfig", Instant::now())?;
        Ok(c)
    }

    /// This communicator's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The CUDA ordinal of the GPU this rank uses.
    pub fn ordinal(&self) -> usize {
        self.gpu.ordinal
    }

    /// The reduction under `op` of every rank's `input` (elements of `dtype`), in a fresh buffer.
    ///
    /// # Errors
    /// As [`Communicator::init`], for this call; also a `dtype` NCCL cannot reduce.
    pub fn all_reduce(
        &mut self,
        input: &CudaStorage<u8>,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<CudaStorage<u8>> {
        let t = self.reducible("ncclAllReduce", dtype)?;
        let out = self.output(input.len())?;
        let count = input.len() / dtype.size_in_bytes();
        let (lib, comm, s) = (self.lib, self.comm, self.stream());
        self.run("ncclAllReduce", || {
            // SAFETY: both buffers hold `count` elements on this communicator's GPU and stay
            // alive until the wait below returns.
            unsafe {
                (lib.all_reduce)(
                    ptr(input),
                    ptr(&out) as *mut _,
                    count,
                    t,
                    nccl_op(op),
                    comm,
                    s,
                )
            }
        })?;
        Ok(out)
    }

    /// Rank `root`'s `data`, on every rank, in a fresh buffer.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`]; also `root` not below the world size.
    pub fn broadcast(&mut self, data: &CudaStorage<u8>, root: usize) -> Result<CudaStorage<u8>> {
        if root >= self.world {
            return Err(BackendError::BadArgument {
                op: "ncclBroadcast",
                msg: format!(
                    "root rank {root} is not below the world size {}",
                    self.world
                ),
            });
        }
        let out = self.output(data.len())?;
        let (lib, comm, s) = (self.lib, self.comm, self.stream());
        self.run("ncclBroadcast", || {
            // SAFETY: as in `all_reduce`, over bytes.
            unsafe {
                (lib.broadcast)(
                    ptr(data),
                    ptr(&out) as *mut _,
                    data.len(),
                    BYTES,
                    root as c_int,
                    comm,
                    s,
                )
            }
        })?;
        Ok(out)
    }

    /// Every rank's `input`, in rank order, in a fresh buffer of `world * input.len()` bytes.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`].
    pub fn all_gather(&mut self, input: &CudaStorage<u8>) -> Result<CudaStorage<u8>> {
        let out = self.output(input.len() * self.world)?;
        let (lib, comm, s) = (self.lib, self.comm, self.stream());
        self.run("ncclAllGather", || {
            // SAFETY: `out` holds `world` blocks of `input.len()` bytes, as NCCL writes them.
            unsafe {
                (lib.all_gather)(ptr(input), ptr(&out) as *mut _, input.len(), BYTES, comm, s)
            }
        })?;
        Ok(out)
    }

    /// Block `rank` of the reduction under `op` of every rank's `input` (`world` equal blocks of
    /// elements of `dtype`), in a fresh buffer.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`]; also an input that does not split into `world` blocks.
    pub fn reduce_scatter(
        &mut self,
        input: &CudaStorage<u8>,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<CudaStorage<u8>> {
        let t = self.reducible("ncclReduceScatter", dtype)?;
        let block = input.len() / self.world;
        if block * self.world != input.len() || !block.is_multiple_of(dtype.size_in_bytes()) {
            return Err(BackendError::BadArgument {
                op: "ncclReduceScatter",
                msg: format!(
                    "{} bytes do not split into {} blocks of {dtype:?} elements",
                    input.len(),
                    self.world
                ),
            });
        }
        let out = self.output(block)?;
        let count = block / dtype.size_in_bytes();
        let (lib, comm, s) = (self.lib, self.comm, self.stream());
        self.run("ncclReduceScatter", || {
            // SAFETY: `input` holds `world * count` elements and `out` `count`, on this GPU.
            unsafe {
                (lib.reduce_scatter)(
                    ptr(input),
                    ptr(&out) as *mut _,
                    count,
                    t,
                    nccl_op(op),
                    comm,
                    s,
                )
            }
        })?;
        Ok(out)
    }

    /// Queues the reduction under `op` of every rank's `data` (elements of `dtype`), written
    /// back into `data`, on the side stream after all the work queued so far on the GPU's
    /// stream, and returns without waiting: DDP's gradient buckets, reduced while the backward
    /// goes on. Allowed while a CUDA graph is captured; the graph then holds the collective.
    ///
    /// The caller owns `data` (no other handle reads it) and keeps it alive until after
    /// [`Communicator::join`], and calls `join` before reading it or ending a capture.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`]; a failure here aborts the communicator.
    pub fn queue_all_reduce_in_place(
        &mut self,
        data: &CudaStorage<u8>,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<()> {
        let t = self.reducible("ncclAllReduce", dtype)?;
        if data.ordinal() != self.gpu.ordinal {
            return Err(BackendError::BadArgument {
                op: "ncclAllReduce",
                msg: format!(
                    "a bucket on GPU {} for the communicator of GPU {}",
                    data.ordinal(),
                    self.gpu.ordinal
                ),
            });
        }
        self.gpu.bind()?;
        // The fork: the side stream waits for what produced the bucket.
        self.side
            .join(&self.gpu.stream)
            .map_err(|e| self.gpu.err("cuStreamWaitEvent", e))?;
        let count = data.len() / dtype.size_in_bytes();
        let (lib, comm, s) = (self.lib, self.comm, self.side.cu_stream() as Stream);
        let start = Instant::now();
        // SAFETY: `data` holds `count` elements on this communicator's GPU; NCCL reads and
        // writes it in place, and the caller keeps it alive until the side stream is joined.
        let res = unsafe {
            (lib.all_reduce)(
                ptr(data),
                ptr(data) as *mut _,
                count,
                t,
                nccl_op(op),
                comm,
                s,
            )
        };
        if res != SUCCESS && res != IN_PROGRESS {
            let msg = self.describe("ncclAllReduce", res);
            return Err(self.fail("ncclAllReduce", msg));
        }
        // A non-blocking communicator may still be queueing the call.
        self.wait_ready("ncclAllReduce", start)
    }

    /// Makes the GPU's stream wait for everything queued on the side stream (the join of
    /// [`Communicator::queue_all_reduce_in_place`]'s fork); returns without waiting on the host.
    /// Allowed while a graph is captured, and required before the capture ends.
    ///
    /// # Errors
    /// [`BackendError::Cuda`] when the driver refuses the event.
    pub fn join(&mut self) -> Result<()> {
        self.gpu.bind()?;
        self.gpu
            .stream
            .join(&self.side)
            .map_err(|e| self.gpu.err("cuStreamWaitEvent", e))
    }

    /// Waits until the work queued so far on the GPU's stream has finished, within the
    /// timeout, watching NCCL's asynchronous errors meanwhile: how a rank learns that a queued
    /// collective (or a replayed graph holding one) failed or hung, instead of hanging itself.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`]; also an error while a graph is being captured.
    pub fn wait(&mut self, call: &'static str) -> Result<()> {
        self.healthy(call)?;
        self.gpu.not_capturing(call)?;
        self.gpu.bind()?;
        self.wait_stream(call, Instant::now())
    }

    /// Returns once every rank has called it: an all-reduce of one element, waited for.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`].
    pub fn barrier(&mut self) -> Result<()> {
        let one = CudaStorage::<f32>::filled(self.gpu.ordinal, 1, 1.0)?.into_bytes();
        self.all_reduce(&one, DType::F32, ReduceOp::Sum).map(drop)
    }

    /// NCCL's data type for `dtype`, or an error naming `call`.
    fn reducible(&self, call: &'static str, dtype: DType) -> Result<c_int> {
        self.healthy(call)?;
        nccl_dtype(dtype).ok_or_else(|| BackendError::BadArgument {
            op: call,
            msg: format!("NCCL cannot reduce {dtype:?} elements"),
        })
    }

    /// A fresh output buffer on this GPU (after checking the communicator still works).
    fn output(&self, bytes: usize) -> Result<CudaStorage<u8>> {
        self.healthy("nccl")?;
        CudaStorage::<u8>::alloc_on(&self.gpu, bytes)
    }

    fn stream(&self) -> Stream {
        self.gpu.stream.cu_stream() as Stream
    }

    /// The first failure again, once there was one.
    fn healthy(&self, call: &'static str) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(first) => Err(self.err(
                call,
                format!("the communicator was aborted after an earlier failure: {first}"),
            )),
        }
    }

    /// Queues one NCCL call on the rtx stream and waits for it within the timeout.
    fn run(&mut self, call: &'static str, f: impl FnOnce() -> c_int) -> Result<()> {
        self.healthy(call)?;
        self.gpu.not_capturing(call)?;
        self.gpu.bind()?;
        let start = Instant::now();
        let res = f();
        if res != SUCCESS && res != IN_PROGRESS {
            let msg = self.describe(call, res);
            return Err(self.fail(call, msg));
        }
        // A non-blocking communicator may still be queueing the call.
        self.wait_ready(call, start)?;
        self.wait_stream(call, start)
    }

    /// Polls an event after the work queued on the GPU's stream, and NCCL's state, until the
    /// event has passed or NCCL failed or the timeout has passed since `start`.
    fn wait_stream(&mut self, call: &'static str, start: Instant) -> Result<()> {
        let event = self
            .gpu
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(|e| self.gpu.err("cuEventCreate", e))?;
        event
            .record(&self.gpu.stream)
            .map_err(|e| self.gpu.err("cuEventRecord", e))?;
        loop {
            match event.try_is_complete() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(self.gpu.err("cuEventQuery", e)),
            }
            self.poll(call, start)?;
        }
    }

    /// Polls until NCCL no longer reports the last call in progress, or fails.
    fn wait_ready(&mut self, call: &'static str, start: Instant) -> Result<()> {
        loop {
            if self.poll(call, start)? == SUCCESS {
                return Ok(());
            }
        }
    }

    /// One look at the communicator's asynchronous state: `SUCCESS`, `IN_PROGRESS` (after a
    /// short sleep), or the error (the communicator then aborted) when NCCL failed or the
    /// timeout has passed since `start`.
    fn poll(&mut self, call: &'static str, start: Instant) -> Result<c_int> {
        let mut state: c_int = SUCCESS;
        // SAFETY: a live communicator and an out-pointer to a live integer.
        let r = unsafe { (self.lib.comm_get_async_error)(self.comm, &mut state) };
        let state = if r == SUCCESS { state } else { r };
        if state != SUCCESS && state != IN_PROGRESS {
            let msg = self.describe(call, state);
            return Err(self.fail(call, msg));
        }
        if start.elapsed() >= self.timeout {
            let msg = format!(
                "not finished after {:.1} s (the group's timeout): another rank died, hung or \
                 never joined",
                self.timeout.as_secs_f64()
            );
            return Err(self.fail(call, msg));
        }
        if state == IN_PROGRESS {
            std::thread::sleep(Duration::from_micros(200));
        } else {
            // Waiting for the stream's event: a short pause keeps latency low without spinning.
            std::thread::yield_now();
        }
        Ok(state)
    }

    /// NCCL's name for `res` and its last detailed message.
    fn describe(&self, call: &'static str, res: c_int) -> String {
        let detail = last_error(self.lib, self.comm);
        let text = error_string(self.lib, res);
        match detail.is_empty() {
            true => format!("{call}: {text}"),
            false => format!("{call}: {text} ({detail})"),
        }
    }

    /// Records the first failure, aborts the communicator and returns the error.
    fn fail(&mut self, call: &'static str, msg: String) -> BackendError {
        if self.failed.is_none() {
            self.failed = Some(msg.clone());
            self.abort();
        }
        self.err(call, msg)
    }

    fn err(&self, call: &'static str, msg: String) -> BackendError {
        BackendError::Cuda {
            device: Device::Cuda(self.gpu.ordinal),
            call,
            msg: format!("NCCL rank {} of {}: {msg}", self.rank, self.world),
        }
    }

    /// Aborts the communicator on a helper thread, waiting at most the timeout: an abort that
    /// itself hangs (a peer mid-handshake) leaks the communicator rather than this rank.
    fn abort(&mut self) {
        let comm = std::mem::replace(&mut self.comm, std::ptr::null_mut());
        if comm.is_null() {
            return;
        }
        let (lib, wait) = (self.lib, self.timeout.max(Duration::from_secs(5)));
        let comm = SendComm(comm);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let comm = comm;
            // SAFETY: the communicator is live and no other call uses it any more.
            unsafe { (lib.comm_abort)(comm.0) };
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(wait);
    }
}

/// A communicator handle moved to the aborting thread.
struct SendComm(ncclComm_t);
// SAFETY: the handle is only used by the thread it is moved to.
unsafe impl Send for SendComm {}

/// A buffer's device address as NCCL takes it.
fn ptr(s: &CudaStorage<u8>) -> *const c_void {
    s.device_ptr().0 as usize as *const c_void
}

/// Finalizes and destroys a healthy communicator (waiting up to the timeout for queued work);
/// one that failed was already aborted. Never panics.
impl Drop for Communicator {
    fn drop(&mut self) {
        if self.comm.is_null() {
            return;
        }
        if self.gpu.bind().is_err() {
            self.abort();
            return;
        }
        // SAFETY: a live communicator, used by no one else.
        let r = unsafe { (self.lib.comm_finalize)(self.comm) };
        let done = (r == SUCCESS || r == IN_PROGRESS)
            && self.wait_ready("ncclCommFinalize", Instant::now()).is_ok();
        if done && !self.comm.is_null() {
            // SAFETY: finalized, so destroy frees it without communicating.
            unsafe { (self.lib.comm_destroy)(self.comm) };
        } else {
            self.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reducible_dtypes_map_to_ncclh_codes() {
        let got: Vec<_> = [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::I64,
            DType::U8,
        ]
        .map(nccl_dtype)
        .into();
        assert_eq!(
            got,
            [7, 8, 6, 9, 2, 4, 1].map(Some),
            "nccl.h 2.28's ncclDataType_t"
        );
        assert_eq!(nccl_dtype(DType::Bool), None);
        assert_eq!(
            ReduceOp::ALL.map(nccl_op),
            [0, 4, 2, 3, 1],
            "Sum Avg Max Min Product"
        );
    }

    #[test]
    fn the_config_is_nccl_2_28s_initializer() {
        let c = config();
        assert_eq!(c.size, std::mem::size_of::<ncclConfig_t>());
        assert_eq!((c.magic, c.version, c.blocking), (0xcafe_beef, 22800, 0));
    }
}
