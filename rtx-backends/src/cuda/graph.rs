//! CUDA graphs: the work one step queues on a GPU's stream, captured once and replayed with
//! one launch. A replay repeats the captured launches exactly: the same kernels, the same
//! arguments, the same device addresses. So the buffers a capture allocates belong to its
//! graph for as long as the graph lives (see the allocator's graph pools), and nothing that
//! needs the host (reading a value back, uploading host data) may happen while capturing:
//! it is an error naming what was tried.
//!
//! Capture in relaxed mode: allocating from the driver stays allowed (the caching allocator
//! may need a new block the first time), and only this thread's stream is captured. Which
//! graph is being captured is the allocator's state (it decides where blocks go); this module
//! starts and ends captures, and a replay is one dispatch through the launch point.

use super::context::lock;
use super::gpu::{Gpu, gpu};
use super::launch::submit_driver;
use crate::{BackendError, Result};
use cudarc::driver::safe::CudaGraph as Exec;
use cudarc::driver::sys;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A captured graph, ready to replay on its GPU's stream.
pub struct Graph {
    exec: Exec,
    gpu: Arc<Gpu>,
    id: u64,
}

// SAFETY: the graph is only launched through `&self` methods that bind the context and lock
// nothing else; CUDA graph execs may be launched from any thread when calls are serialized,
// which the `&mut`/`&` discipline of the owner provides (replays take `&self` but launch on
// the GPU's one stream, which serializes them).
unsafe impl Send for Graph {}

impl Graph {
    /// Queues one replay of the captured work on the GPU's stream.
    pub fn replay(&self) -> Result<()> {
        submit_driver(&self.gpu, "cuGraphLaunch", |_| self.exec.launch())
    }

    /// The graph's identity in the allocator (its pool).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        lock(&self.gpu.alloc).end_graph(self.id);
    }
}

/// A capture asked for in the wrong state.
fn misuse(msg: String) -> BackendError {
    BackendError::BadArgument {
        op: "cuda graph capture",
        msg,
    }
}

/// Starts capturing the work queued on GPU `ordinal`'s stream. Everything until
/// [`end_capture`] is recorded, not run; buffers allocated meanwhile belong to the graph.
///
/// ```
/// # use rtx_backends::cuda;
/// if cuda::is_available() {
///     cuda::begin_capture(0).unwrap();
///     let graph = cuda::end_capture(0).unwrap();
///     graph.replay().unwrap();
/// }
/// ```
pub fn begin_capture(ordinal: usize) -> Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let g = gpu(ordinal)?;
    {
        let mut a = lock(&g.alloc);
        if a.capturing.is_some() {
            return Err(misuse(format!(
                "GPU {ordinal} is already capturing a graph"
            )));
        }
        a.start_graph(NEXT.fetch_add(1, Ordering::Relaxed));
    }
    let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    if let Err(e) = g.stream.begin_capture(mode) {
        let mut a = lock(&g.alloc);
        if let Some(id) = a.capturing {
            a.end_graph(id);
        }
        return Err(g.err("cuStreamBeginCapture", e));
    }
    Ok(())
}

/// Ends the capture [`begin_capture`] started on GPU `ordinal` and instantiates the graph.
/// On failure (a launch the graph cannot hold was queued), the capture is abandoned and its
/// buffers go back to the common pools once freed.
pub fn end_capture(ordinal: usize) -> Result<Graph> {
    let g = gpu(ordinal)?;
    let id = lock(&g.alloc)
        .capturing
        .ok_or_else(|| misuse(format!("GPU {ordinal} is not capturing a graph")))?;
    // Stop handing out graph blocks before anything else can fail.
    lock(&g.alloc).capturing = None;
    let flags = sys::CUgraphInstantiate_flags(0);
    match g.stream.end_capture(flags) {
        Ok(Some(exec)) => Ok(Graph { exec, gpu: g, id }),
        Ok(None) => {
            lock(&g.alloc).end_graph(id);
            Err(misuse("the capture recorded no graph".into()))
        }
        Err(e) => {
            lock(&g.alloc).end_graph(id);
            Err(g.err("cuStreamEndCapture", e))
        }
    }
}

/// Whether GPU `ordinal` is capturing a graph.
pub fn is_capturing(ordinal: usize) -> Result<bool> {
    Ok(lock(&gpu(ordinal)?.alloc).capturing.is_some())
}
