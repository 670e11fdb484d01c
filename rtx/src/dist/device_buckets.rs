//! DDP's gradient buckets on an NCCL group's GPU: each bucket is packed by device copies as
//! soon as its gradients are final, all-reduced in place by NCCL on the communicator's side
//! stream while the backward goes on, and handed back as views of the bucket (no host round
//! trip, no copy out). Nothing here waits on the host until [`DeviceLauncher::finish`], so the
//! same code runs inside a CUDA graph capture: the compiled step's graph then holds the
//! packing copies, the collectives and the join.
//!
//! Invariants, as `reducer.rs`'s: the same plan on every rank, buckets launched strictly in
//! order, each exactly once per synced step. The flags (one element per parameter after the
//! gradients, 1 where this rank has no gradient) go with the bucket when the caller asks for
//! them; they are uploaded from the host and read back after the step, so a captured step,
//! which can do neither, runs without them (its first, uncaptured run checked them).
//! A bucket is kept alive from its launch until after the join, since the side stream reads
//! and writes it meanwhile and the allocator may only reuse a block in the GPU stream's order.

use super::ProcessGroup;
use super::reducer::{Param, Plan, Progress, index_by_id, unused_error};
use crate::autograd::{Erased, Gradients};
use crate::error::{Error, Result};
use rtx_backends::Device;
use rtx_backends::cpu::ranks::ReduceOp;
use rtx_backends::cuda::CudaStorage;
use std::collections::HashMap;
use std::sync::Arc;

/// The GPU the buckets of `params` can stay on: the group's, when it is an NCCL group and
/// every parameter lives there (else the host path of `reducer.rs` is taken).
pub(crate) fn gpu_for(pg: &ProcessGroup, params: &[Param]) -> Option<usize> {
    let gpu = pg.nccl_gpu()?;
    params
        .iter()
        .all(|p| p.device == Device::Cuda(gpu))
        .then_some(gpu)
}

/// One synced step's buckets on the GPU: gradients in, buckets launched in order, averaged
/// views out.
pub(crate) struct DeviceLauncher {
    pg: Arc<ProcessGroup>,
    params: Vec<Param>,
    plan: Plan,
    gpu: usize,
    by_id: HashMap<u64, usize>,
    /// Final gradients received, the accumulated ones of `no_sync` steps added.
    grads: Vec<Option<Erased>>,
    accumulated: Gradients,
    /// Per parameter, how many additions make its gradient final (1 for the tape, which
    /// reports only final gradients; learned from an uncaptured run for a static backward,
    /// which reports each addition), and how many came so far.
    needed: Vec<usize>,
    seen: Vec<usize>,
    progress: Progress,
    flags: bool,
    /// Each launched bucket, which NCCL reduces in place on the side stream.
    buckets: Vec<Option<CudaStorage<u8>>>,
    /// Whether buckets were queued since the last join.
    unjoined: bool,
    /// The first error of a readiness report that could not return it (an observer's).
    error: Option<Error>,
}

impl DeviceLauncher {
    /// A launcher for `params` on GPU `gpu` (see [`gpu_for`]). `needed` gives per parameter
    /// how many reported additions make its gradient final (`None`: one each, the tape's
    /// readiness); `flags` whether the buckets carry the missing-gradient flags.
    pub fn new(
        pg: Arc<ProcessGroup>,
        params: Vec<Param>,
        plan: Plan,
        gpu: usize,
        accumulated: Gradients,
        needed: Option<Vec<usize>>,
        flags: bool,
    ) -> Self {
        let n = params.len();
        DeviceLauncher {
            by_id: index_by_id(&params),
            progress: Progress::new(&plan),
            buckets: vec![None; plan.buckets.len()],
            needed: needed.unwrap_or_else(|| vec![1; n]),
            seen: vec![0; n],
            grads: vec![None; n],
            pg,
            params,
            plan,
            gpu,
            accumulated,
            flags,
            unjoined: false,
            error: None,
        }
    }

    /// Takes one reported gradient of tape node `id` (the sum so far, for an observed static
    /// backward), and launches every bucket that is now complete and next in order.
    pub fn ready(&mut self, id: u64, g: &Erased) -> Result<()> {
        let Some(&i) = self.by_id.get(&id) else {
            // A leaf that is not one of the model's trainable parameters (an input).
            return Ok(());
        };
        if self.seen[i] >= self.needed[i] {
            return Ok(());
        }
        self.seen[i] += 1;
        if self.seen[i] < self.needed[i] {
            return Ok(());
        }
        let node = &self.params[i].node;
        self.grads[i] = Some(match self.accumulated.get_erased(node) {
            Some(acc) => node.add_grads(acc, g)?,
            None => g.clone(),
        });
        for b in self.progress.arrived(&self.plan, i) {
            self.launch(b)?;
        }
        Ok(())
    }

    /// [`DeviceLauncher::ready`] for a report that cannot fail (a [`Gradients`] observer):
    /// the first error is kept for [`DeviceLauncher::finish`], and nothing more is launched.
    pub fn observe(&mut self, id: u64, g: &Erased) {
        if self.error.is_none()
            && let Err(e) = self.ready(id, g)
        {
            self.error = Some(e);
        }
    }

    /// Packs bucket `b` on the GPU (every gradient, zeros where there is none, then the flags
    /// when asked for) and queues its all-reduce.
    fn launch(&mut self, b: usize) -> Result<()> {
        let members = &self.plan.buckets[b];
        let first = &self.params[members[0]];
        let (dtype, size) = (first.dtype, first.dtype.size_in_bytes());
        let mut parts = Vec::with_capacity(members.len() + 1);
        for &i in members {
            parts.push(match &self.grads[i] {
                Some(g) => (self.params[i].dense)(g)?,
                // A memset: allowed while capturing, unlike an upload.
                None => CudaStorage::<u8>::filled(self.gpu, self.params[i].numel * size, 0)?,
            });
        }
        if self.flags {
            let mut flags = Vec::with_capacity(members.len() * size);
            for &i in members {
                let missing = if self.grads[i].is_some() { 0.0 } else { 1.0 };
                flags.extend_from_slice(&(self.params[i].encode)(missing));
            }
            parts.push(CudaStorage::<u8>::from_slice(self.gpu, &flags)?);
        }
        let bucket = CudaStorage::concat(&parts)?;
        self.unjoined = true;
        self.pg.queue_all_reduce(&bucket, dtype, ReduceOp::Avg)?;
        self.buckets[b] = Some(bucket);
        Ok(())
    }

    /// Launches the buckets still waiting, joins the side stream and returns `grads` with
    /// every parameter's gradient replaced by its average (a view of its bucket), and how
    /// many buckets went out before this call (while the backward ran).
    ///
    /// Outside a capture (`capturing` false) it then waits for the GPU within the group's
    /// timeout and, with flags, reads them back: a parameter without a gradient on some rank
    /// is an [`Error::Dist`] naming it on every rank. While capturing it waits for nothing,
    /// and a parameter without a gradient here is an error before anything is launched.
    ///
    /// # Errors
    /// The first error of an observed report; a collective's [`Error::Dist`]; the
    /// missing-gradient errors above.
    pub fn finish(mut self, mut grads: Gradients, capturing: bool) -> Result<(Gradients, usize)> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let early = self.progress.launched();
        let rest = self.progress.rest();
        for b in rest.clone() {
            for &i in &self.plan.buckets[b] {
                if self.grads[i].is_none() {
                    self.grads[i] = self.accumulated.get_erased(&self.params[i].node).cloned();
                }
            }
        }
        if !self.flags {
            let missing: Vec<&str> = self
                .params
                .iter()
                .zip(&self.grads)
                .filter(|(_, g)| g.is_none())
                .map(|(p, _)| p.name.as_str())
                .collect();
            if !missing.is_empty() {
                return Err(Error::Dist {
                    rank: Some(self.pg.rank()),
                    msg: format!(
                        "Ddp: rank {}: parameters received no gradient in a captured step: {}; \
                         the step's uncaptured first run had them. Freeze the parameters the \
                         loss does not use, or leave them out of the model",
                        self.pg.rank(),
                        missing.join(", ")
                    ),
                });
            }
        }
        for b in rest {
            self.launch(b)?;
        }
        self.pg.join_queued()?;
        self.unjoined = false;
        if !capturing {
            self.pg.wait_queued("Ddp all-reduce")?;
        }
        let mut missing = Vec::new();
        for (b, members) in self.plan.buckets.iter().enumerate() {
            let Some(bucket) = &self.buckets[b] else {
                unreachable!("every bucket was launched above")
            };
            let size = self.params[members[0]].dtype.size_in_bytes();
            let mut at = 0;
            for &i in members {
                let p = &self.params[i];
                grads.set_erased(p.node.id(), (p.view)(bucket, at)?);
                at += p.numel;
            }
            if self.flags {
                let flags = bucket.range_to_host(at * size..(at + members.len()) * size)?;
                for (k, &i) in members.iter().enumerate() {
                    let p = &self.params[i];
                    let mean = (p.decode)(&flags[k * size..][..size]);
                    let ranks = mean * self.pg.world_size() as f64;
                    if ranks != 0.0 {
                        missing.push((p.name.clone(), ranks.round() as usize));
                    }
                }
            }
        }
        if !missing.is_empty() {
            return Err(unused_error(&self.pg, &self.params, &self.grads, missing));
        }
        Ok((grads, early))
    }
}

/// A launcher dropped with buckets in flight (its step failed) joins the side stream first:
/// the buckets' blocks must not go back to the allocator while NCCL may still use them.
impl Drop for DeviceLauncher {
    fn drop(&mut self) {
        if self.unjoined {
            let _ = self.pg.join_queued();
        }
    }
}
