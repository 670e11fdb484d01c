//! Events on a GPU's stream: mark a point in the queued work, wait for it, and time the work
//! between two marks (the way to time GPU code: host clocks see only the queueing).

use super::gpu::{Gpu, gpu};
use crate::Result;
use cudarc::driver::CudaEvent;
use cudarc::driver::sys::CUevent_flags;
use std::sync::Arc;

/// A point in a GPU's queued work.
///
/// ```
/// # use rtx_backends::cuda::Event;
/// if let (Ok(start), Ok(end)) = (Event::new(0), Event::new(0)) {
///     start.record().unwrap();
///     end.record().unwrap();
///     assert!(start.elapsed_ms(&end).unwrap() >= 0.0);
/// }
/// ```
pub struct Event {
    event: CudaEvent,
    gpu: Arc<Gpu>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event(cuda:{})", self.gpu.ordinal)
    }
}

impl Event {
    /// A new timing event on GPU `ordinal`, not yet recorded.
    pub fn new(ordinal: usize) -> Result<Event> {
        let g = gpu(ordinal)?;
        g.bind()?;
        let event = g
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| g.err("cuEventCreate", e))?;
        Ok(Event { event, gpu: g })
    }

    /// Marks the current end of the GPU's queued work.
    pub fn record(&self) -> Result<()> {
        self.event
            .record(&self.gpu.stream)
            .map_err(|e| self.gpu.err("cuEventRecord", e))
    }

    /// Waits until the work before the last [`Event::record`] has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.event
            .synchronize()
            .map_err(|e| self.gpu.err("cuEventSynchronize", e))
    }

    /// Milliseconds of GPU time from this event to `end` (both recorded; waits for `end`).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.event
            .elapsed_ms(&end.event)
            .map_err(|e| self.gpu.err("cuEventElapsedTime", e))
    }
}
