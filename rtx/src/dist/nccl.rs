//! The GPU backend: [`Collectives`] on device bytes through an NCCL communicator.
//!
//! Rank 0 makes the NCCL unique id and publishes it in the store; the others wait for it there
//! (within the group's timeout), and every rank then joins the communicator on its GPU. The
//! communicator itself (`rtx_backends::cuda::Communicator`) queues each collective on the GPU's
//! rtx stream and waits for it within the timeout, aborting on failure; this file only turns
//! its errors into [`Error::Dist`] naming the rank. DDP's device buckets use the
//! communicator's queued path instead (`queue_all_reduce`, `join`, `wait`): all-reduces on a
//! side stream that return at once and may be captured in a CUDA graph.

use super::collectives::Collectives;
use super::store::{Store, secs};
use crate::error::{Error, Result};
use rtx_backends::cpu::ranks::ReduceOp;
use rtx_backends::cuda::{self, Communicator, CudaStorage, NCCL_ID_BYTES};
use rtx_backends::{BackendError, Device};
use rtx_kernels::DType;
use std::time::Duration;

/// One rank's NCCL backend.
pub(crate) struct Nccl {
    comm: Communicator,
}

impl Nccl {
    /// Joins the NCCL communicator of the group whose store keys start with `prefix`, as `rank`
    /// of `world` on GPU `ordinal`.
    ///
    /// # Errors
    /// [`Error::Dist`] naming this rank: NCCL or the GPU missing, the unique id not published
    /// within the timeout, or a rank that does not join in time.
    pub fn connect(
        rank: usize,
        world: usize,
        ordinal: usize,
        store: &Store,
        prefix: &str,
        timeout: Duration,
    ) -> Result<Nccl> {
        let dist = |what: &str, e: Error| Error::Dist {
            rank: Some(rank),
            msg: format!("rank {rank} (NCCL on cuda:{ordinal}): {what}: {e}"),
        };
        // Fail before rendezvous when this rank cannot run NCCL at all, so the message names the
        // library rather than a peer that gave up waiting.
        cuda::nccl_version().map_err(|e| dist("NCCL cannot be used", e.into()))?;
        let key = format!("{prefix}/nccl_id");
        let id = match rank {
            0 => {
                let id = cuda::nccl_unique_id().map_err(|e| dist("no unique id", e.into()))?;
                store
                    .set(&key, &id)
                    .map_err(|e| dist("publishing the unique id", e))?;
                id
            }
            _ => {
                let bytes = store
                    .get(&key)
                    .map_err(|e| dist("waiting for rank 0's unique id", e))?;
                bytes.try_into().map_err(|b: Vec<u8>| Error::Dist {
                    rank: Some(0),
                    msg: format!(
                        "rank {rank}: rank 0 published a {}-byte NCCL id, not {NCCL_ID_BYTES}",
                        b.len()
                    ),
                })?
            }
        };
        let comm = Communicator::init(ordinal, rank, world, &id, timeout).map_err(|e| {
            dist(
                &format!(
                    "joining the communicator of {world} ranks (timeout {})",
                    secs(timeout)
                ),
                e.into(),
            )
        })?;
        Ok(Nccl { comm })
    }

    /// The GPU this rank communicates from.
    pub fn device(&self) -> Device {
        Device::Cuda(self.comm.ordinal())
    }

    /// Queues an in-place all-reduce of `data` on the communicator's side stream, without
    /// waiting (see `Communicator::queue_all_reduce_in_place`).
    pub fn queue_all_reduce(
        &mut self,
        data: &CudaStorage<u8>,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<()> {
        self.comm
            .queue_all_reduce_in_place(data, dtype, op)
            .map_err(|e| self.err(e))
    }

    /// Makes the GPU's stream wait for the queued all-reduces.
    pub fn join(&mut self) -> Result<()> {
        self.comm.join().map_err(|e| self.err(e))
    }

    /// Waits for the GPU's queued work within the timeout, watching NCCL's errors.
    pub fn wait(&mut self, call: &'static str) -> Result<()> {
        self.comm.wait(call).map_err(|e| self.err(e))
    }

    /// A communicator error as [`Error::Dist`] naming this rank.
    fn err(&self, e: BackendError) -> Error {
        match e {
            // Bad arguments are the caller's, not a fault of the group.
            e @ BackendError::BadArgument { .. } => e.into(),
            e => Error::Dist {
                rank: Some(self.comm.rank()),
                msg: format!("rank {}: {e}", self.comm.rank()),
            },
        }
    }
}

impl Collectives<CudaStorage<u8>> for Nccl {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn all_reduce(&mut self, data: &mut CudaStorage<u8>, dtype: DType, op: ReduceOp) -> Result<()> {
        *data = self
            .comm
            .all_reduce(data, dtype, op)
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn broadcast(&mut self, data: &mut CudaStorage<u8>, root: usize) -> Result<()> {
        *data = self.comm.broadcast(data, root).map_err(|e| self.err(e))?;
        Ok(())
    }

    fn all_gather(&mut self, input: &CudaStorage<u8>, out: &mut CudaStorage<u8>) -> Result<()> {
        *out = self.comm.all_gather(input).map_err(|e| self.err(e))?;
        Ok(())
    }

    fn reduce_scatter(
        &mut self,
        input: &CudaStorage<u8>,
        out: &mut CudaStorage<u8>,
        dtype: DType,
        op: ReduceOp,
    ) -> Result<()> {
        *out = self
            .comm
            .reduce_scatter(input, dtype, op)
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn barrier(&mut self) -> Result<()> {
        self.comm.barrier().map_err(|e| self.err(e))
    }
}
