//! Distributed training: process groups, collectives on tensors, and the rendezvous that
//! starts them, as PyTorch's `torch.distributed` does.
//!
//! One process runs per rank (per GPU, or several on one CPU machine), started by torchrun or
//! `rtx-run`, which set `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` and `MASTER_PORT`.
//! [`init`] reads them ([`Env`]), rank 0 serves a small key-value [`Store`] at
//! `MASTER_ADDR:MASTER_PORT`, every rank publishes its own address there and connects to the
//! others, and the [`ProcessGroup`] it returns runs collectives: [`ProcessGroup::all_reduce`]
//! with a [`ReduceOp`], [`broadcast`](ProcessGroup::broadcast),
//! [`all_gather`](ProcessGroup::all_gather), [`reduce_scatter`](ProcessGroup::reduce_scatter)
//! and [`barrier`](ProcessGroup::barrier). [`Ddp`] trains a model data-parallel on top of
//! a group (gradient buckets averaged while the backward runs). Each rank reads its share of a data set through
//! [`DistributedSampler`](crate::data::DistributedSampler).
//!
//! # Guarantees
//! - Reductions combine the ranks in rank order in a fixed accumulation type, so every rank
//!   gets the same bits, run after run.
//! - A rank that exits, crashes or does not answer within the timeout (`RTX_DIST_TIMEOUT`
//!   seconds, default 300) makes every other rank's collective fail with an
//!   [`Error::Dist`](crate::Error::Dist) whose `rank` is the one that failed, never a hang:
//!   after the timeout, ranks take up to a quarter of it more to agree on whom to blame
//!   (`fault.rs` explains how).
//! - Ranks that call different collectives, or pass tensors of different sizes, get an error
//!   naming the rank that disagrees.
//!
//! # Backends
//! The collectives reach the network through one internal trait over byte buffers
//! (`Collectives`, in `collectives.rs`), chosen when the group is made ([`Backend`], as PyTorch's
//! `backend=`): TCP between hosts' memory (`tcp.rs`, the default, for tensors on any device), or
//! NCCL on one GPU's tensors (`nccl.rs`, `Backend::Nccl(gpu)` or `RTX_DIST_BACKEND=nccl`), each
//! call queued on the GPU's stream and waited for within the timeout. [`Ddp`] builds on
//! [`ProcessGroup`], so neither backend changes this API; on an NCCL group its gradient
//! buckets stay on the GPU and are all-reduced on a side stream beside the backward, inside
//! the CUDA graph of a captured [`TrainStep`](crate::compile::TrainStep).
//!
//! ```no_run
//! use rtx::dist::{self, ReduceOp};
//! use rtx::prelude::*;
//! // Started as `torchrun --nproc-per-node 2 ...` or `rtx-run --nproc-per-node 2 -- ...`.
//! let pg = dist::init()?;
//! let mut grad: Tensor<Rank1<4>> = Tensor::full((Const,), pg.rank() as f32, Device::Cpu);
//! pg.all_reduce(&mut grad, ReduceOp::Avg)?;
//! // Every rank now holds the mean of 0, 1, ..., world_size - 1.
//! # Ok::<(), rtx::Error>(())
//! ```

mod collectives;
mod ddp;
mod device_buckets;
mod env;
mod fault;
mod group;
mod nccl;
mod reducer;
mod store;
mod tcp;
mod wire;

pub use ddp::{Ddp, DdpOptimizer, DdpOptions, DdpSync};
pub use env::{DEFAULT_TIMEOUT, Env, timeout_from_env};
pub use group::{Backend, InitOptions, ProcessGroup, init, init_with};
pub use rtx_backends::cpu::ranks::ReduceOp;
pub use store::{Store, StoreServer};
