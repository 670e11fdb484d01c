//! The trait every communication backend implements: collectives over raw bytes.
//!
//! [`ProcessGroup`](super::ProcessGroup) turns tensors into byte buffers of a known
//! [`DType`] (the element count is the byte length over the dtype's size) and calls these;
//! the backend never sees shapes or tensor types. The buffer type is the trait's parameter: the
//! TCP backend (`tcp.rs`) implements it on host bytes (`[u8]`, the default), the NCCL backend
//! (`nccl.rs`) on device bytes (`CudaStorage<u8>`), and the group picks the one it was created
//! with, so the public API is the same for both.
//!
//! Contract for implementations: every rank calls the same collectives in the same order with
//! buffers of the same length (a backend should report a mismatch as an error naming the rank,
//! not hang); reductions combine ranks in rank order (`rtx_backends::cpu::ranks`), so every
//! rank ends with the same bits; a peer that dies or does not answer within the group's
//! timeout is an [`Error::Dist`](crate::Error::Dist) naming it, never a hang.

use crate::error::Result;
use rtx_backends::cpu::ranks::ReduceOp;
use rtx_kernels::DType;

/// Collective communication over byte buffers of type `B`, for one rank of a group.
///
/// A backend may fill a buffer in place or replace it by a fresh one (device storage is never
/// written after it is filled, so NCCL returns new buffers).
pub(crate) trait Collectives<B: ?Sized = [u8]>: Send {
    /// The backend's name for messages (`"tcp"`, `"nccl"`).
    fn name(&self) -> &'static str;

    /// Replaces `data` (elements of `dtype`) on every rank by the ranks' element-wise
    /// reduction under `op`.
    fn all_reduce(&mut self, data: &mut B, dtype: DType, op: ReduceOp) -> Result<()>;

    /// Replaces `data` on every rank by rank `root`'s.
    fn broadcast(&mut self, data: &mut B, root: usize) -> Result<()>;

    /// Fills `out` (`world_size * input.len()` bytes) with every rank's `input`, in rank order.
    fn all_gather(&mut self, input: &B, out: &mut B) -> Result<()>;

    /// Reduces `input` (`world_size` blocks of `out.len()` bytes) across ranks and leaves
    /// block `rank` of the reduction in `out`.
    fn reduce_scatter(&mut self, input: &B, out: &mut B, dtype: DType, op: ReduceOp) -> Result<()>;

    /// Returns once every rank has called it.
    fn barrier(&mut self) -> Result<()>;
}
