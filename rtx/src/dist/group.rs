//! `ProcessGroup`: the ranks of one job and the collectives on tensors among them.
//!
//! Invariant: a group's collectives go through one [`Collectives`] backend behind a lock, one
//! at a time, and a group that failed stays failed (every later call returns the first error).
//! The backend is chosen once, when the group is made ([`Backend`]): TCP on host bytes, or NCCL
//! on the bytes of one GPU's tensors.

use super::collectives::Collectives;
use super::env::{Env, timeout_from_env};
use super::nccl::Nccl;
use super::store::{Store, StoreServer, secs};
use super::tcp::Tcp;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::cpu::ranks::{ReduceOp, check};
use rtx_backends::cuda::CudaStorage;
use rtx_backends::{Layout, Storage, bytes_of, vec_from_bytes};
use rtx_kernels::Element;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The store keys of the default group start with this.
const PREFIX: &str = "rtx/default";

/// Which communication backend a group uses: PyTorch's `backend=` argument, chosen explicitly
/// as PyTorch users do (`backend="nccl"`), never guessed from whether a GPU exists, so the
/// same program behaves the same on every machine.
///
/// ```
/// use rtx::dist::{Backend, InitOptions};
/// let o = InitOptions::new(0, 1, "127.0.0.1", 0).backend(Backend::Nccl(0));
/// assert_eq!(o.backend, Backend::Nccl(0));
/// assert_eq!(InitOptions::new(0, 1, "127.0.0.1", 0).backend, Backend::Tcp);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// Rank-to-rank TCP on host memory, in the role of PyTorch's Gloo: works everywhere, and
    /// takes tensors on any device (GPU tensors through host copies).
    #[default]
    Tcp,
    /// NCCL on GPU `Device::Cuda(n)` (usually `n` = the local rank): collectives run on that
    /// GPU's tensors, queued on its stream, and other tensors are refused. Needs NCCL
    /// (`libnccl.so.2` or `libnccl.so`) and the GPU; without them making the group is an error.
    Nccl(usize),
}

impl Backend {
    /// The backend `RTX_DIST_BACKEND` names (`tcp`, unset or empty: TCP; `nccl`: NCCL on GPU
    /// `local_rank`), as torchrun scripts pass `backend="nccl"`.
    ///
    /// # Errors
    /// [`Error::Dist`] for any other value.
    pub fn from_env(local_rank: usize) -> Result<Backend> {
        match std::env::var("RTX_DIST_BACKEND").unwrap_or_default().trim() {
            "" | "tcp" | "gloo" => Ok(Backend::Tcp),
            "nccl" => Ok(Backend::Nccl(local_rank)),
            other => Err(Error::Dist {
                rank: None,
                msg: format!("RTX_DIST_BACKEND={other:?}: expected \"tcp\" or \"nccl\""),
            }),
        }
    }
}

/// How to build a [`ProcessGroup`] without reading the environment (or after adjusting what
/// was read from it).
///
/// ```
/// use rtx::dist::InitOptions;
/// use std::time::Duration;
/// let o = InitOptions::new(1, 4, "10.0.0.1", 29500).timeout(Duration::from_secs(30));
/// assert_eq!((o.rank, o.world_size, o.timeout), (1, 4, Some(Duration::from_secs(30))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitOptions {
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// The host on which rank 0 serves the store.
    pub master_addr: String,
    /// The store's port (rank 0 may pass 0 for a free one when it is the only rank).
    pub master_port: u16,
    /// How long any wait for another rank may take: connecting, a store key, one socket read or
    /// write in a collective. `None` reads `RTX_DIST_TIMEOUT` (seconds), else 300 s.
    pub timeout: Option<Duration>,
    /// The communication backend ([`Backend::Tcp`] unless set).
    pub backend: Backend,
}

impl InitOptions {
    /// Rank `rank` of `world_size`, with the store at `master_addr:master_port`.
    pub fn new(
        rank: usize,
        world_size: usize,
        master_addr: impl Into<String>,
        master_port: u16,
    ) -> Self {
        InitOptions {
            rank,
            world_size,
            master_addr: master_addr.into(),
            master_port,
            timeout: None,
            backend: Backend::Tcp,
        }
    }

    /// The options torchrun's (or `rtx-run`'s) environment gives: see [`Env::from_env`], and
    /// the backend from `RTX_DIST_BACKEND` ([`Backend::from_env`], on GPU `LOCAL_RANK`).
    pub fn from_env() -> Result<InitOptions> {
        let env = Env::from_env()?;
        let backend = Backend::from_env(env.local_rank)?;
        Ok(
            InitOptions::new(env.rank, env.world_size, env.master_addr, env.master_port)
                .backend(backend),
        )
    }

    /// Sets the communication backend.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Sets the timeout instead of reading `RTX_DIST_TIMEOUT`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// Joins the default group from the environment torchrun and `rtx-run` set (`RANK`,
/// `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`, and `RTX_DIST_TIMEOUT` if set): PyTorch's
/// `init_process_group()` in one line.
///
/// # Errors
/// [`Error::Dist`] naming a missing or bad variable, or the rank or address that could not be
/// reached within the timeout.
///
/// ```no_run
/// let pg = rtx::dist::init()?;
/// println!("rank {} of {}", pg.rank(), pg.world_size());
/// # Ok::<(), rtx::Error>(())
/// ```
pub fn init() -> Result<ProcessGroup> {
    init_with(InitOptions::from_env()?)
}

/// Joins a group described by `options`: rank 0 serves the store, every rank connects to it,
/// publishes its address and connects to every other rank. Returns when all ranks are
/// connected.
///
/// # Errors
/// As [`init`]; also `rank >= world_size`.
///
/// ```
/// use rtx::dist::{InitOptions, ReduceOp, init_with};
/// use rtx::prelude::*;
/// // One rank on its own (port 0: any free port) is a whole group.
/// let pg = init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?;
/// let mut t: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
/// pg.all_reduce(&mut t, ReduceOp::Sum)?;
/// assert_eq!(t.to_vec(), [1.0, 2.0, 3.0]);
/// # Ok::<(), rtx::Error>(())
/// ```
pub fn init_with(options: InitOptions) -> Result<ProcessGroup> {
    let InitOptions {
        rank,
        world_size: world,
        master_addr,
        master_port,
        timeout,
        backend,
    } = options;
    if rank >= world {
        return Err(Error::Dist {
            rank: Some(rank),
            msg: format!("rank {rank} is not below the world size {world} (RANK, WORLD_SIZE)"),
        });
    }
    let timeout = match timeout {
        Some(t) if t.is_zero() => {
            return Err(Error::Dist {
                rank: Some(rank),
                msg: "the timeout is 0: every wait for another rank would fail at once".into(),
            });
        }
        Some(t) => t,
        None => timeout_from_env()?,
    };
    let server = match rank {
        0 => Some(StoreServer::bind(&master_addr, master_port)?),
        _ => None,
    };
    // Rank 0 talks to its own server by the address it got (port 0 picks one).
    let addr = match &server {
        Some(s) => s.addr().to_string(),
        None if master_addr.contains(':') && !master_addr.starts_with('[') => {
            format!("[{master_addr}]:{master_port}")
        }
        None => format!("{master_addr}:{master_port}"),
    };
    let store = Arc::new(Store::connect(&addr, timeout).map_err(|e| match e {
        Error::Dist { rank: r, msg } => Error::Dist {
            rank: r,
            msg: format!("rank {rank}: {msg}"),
        },
        e => e,
    })?);
    let comm = match backend {
        Backend::Tcp => Comm::Host(Box::new(Tcp::connect(
            rank,
            world,
            store.clone(),
            PREFIX,
            timeout,
        )?)),
        Backend::Nccl(ordinal) => Comm::Device(Nccl::connect(
            rank, world, ordinal, &store, PREFIX, timeout,
        )?),
    };
    Ok(ProcessGroup {
        backend: Mutex::new(comm),
        rank,
        world,
        timeout,
        store,
        server,
        failed: AtomicBool::new(false),
    })
}

/// The ranks of one job, and collectives on tensors among them (PyTorch's process group).
///
/// Every rank must call the same collectives in the same order on tensors of the same shape
/// and element type; a rank that does not, dies, or does not answer within the timeout makes
/// the others fail with an [`Error::Dist`] whose `rank` names it. Collectives return
/// `Result` rather than panicking, unlike shape errors: their failures come from other
/// processes, not from a bug in the calling code. They record no gradient history; a tensor
/// they change keeps its own.
///
/// Tensors of f32, f64, f16, bf16, i32, i64 and u8 can be reduced, all element types
/// broadcast and gathered. A [`Backend::Tcp`] group communicates over TCP from host memory
/// (GPU tensors through host copies); a [`Backend::Nccl`] group through NCCL on its GPU's
/// tensors, on the GPU's stream.
pub struct ProcessGroup {
    // Fields drop in order: the connections first, the store's server last.
    backend: Mutex<Comm>,
    rank: usize,
    world: usize,
    timeout: Duration,
    store: Arc<Store>,
    server: Option<StoreServer>,
    /// Whether a collective failed (then rank 0 keeps the store up for the others a while).
    failed: AtomicBool,
}

/// On rank 0 after a failure, waits (up to the timeout) for the other ranks to disconnect from
/// the store, which they read to agree on whom to blame.
impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Some(server) = &mut self.server
            && self.failed.load(Ordering::Acquire)
        {
            server.linger_on_drop(self.timeout);
        }
    }
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("rank", &self.rank)
            .field("world_size", &self.world)
            .field("backend", &self.backend_name())
            .field("timeout", &secs(self.timeout))
            .field("store", &self.store.addr())
            .finish()
    }
}

impl ProcessGroup {
    /// This process's rank, `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// How long a wait for another rank may take before it is an error.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The store served by rank 0, for exchanging small values between ranks (the NCCL unique
    /// id, a run's name).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The backend's name: `"tcp"` or `"nccl"`.
    pub fn backend_name(&self) -> &'static str {
        match &*self.backend() {
            Comm::Host(b) => b.name(),
            Comm::Device(n) => n.name(),
        }
    }

    /// Notes a collective's failure (see `Drop`) and passes its result on.
    fn watch<T>(&self, r: Result<T>) -> Result<T> {
        if r.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        r
    }

    fn backend(&self) -> std::sync::MutexGuard<'_, Comm> {
        // A panic inside a collective leaves the backend's state as broken as an error would;
        // its sockets are what matters, and they report their own state.
        self.backend.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces `tensor` on every rank by the element-wise reduction of all ranks' values,
    /// combined in rank order so every rank gets the same bits (`dist.all_reduce`).
    ///
    /// The handle receives a fresh buffer; other handles sharing the old storage keep the
    /// old values, as with the optimizers' updates.
    ///
    /// ```
    /// # use rtx::dist::{InitOptions, ReduceOp, init_with};
    /// # use rtx::prelude::*;
    /// # let pg = init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?;
    /// let mut t: Tensor<Rank1<2>, i64> = Tensor::from_array([4, -2], Device::Cpu);
    /// pg.all_reduce(&mut t, ReduceOp::Max)?;
    /// assert_eq!(t.to_vec(), [4, -2]);
    /// assert!(pg.all_reduce(&mut t, ReduceOp::Avg).is_err()); // integers have no mean
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn all_reduce<S: Shape, E: Element>(
        &self,
        tensor: &mut Tensor<S, E>,
        op: ReduceOp,
    ) -> Result<()> {
        check("all_reduce", E::DTYPE, op)?;
        match &mut *self.backend() {
            Comm::Host(b) => {
                let mut bytes = host_bytes(tensor)?;
                self.watch(b.all_reduce(&mut bytes, E::DTYPE, op))?;
                replace(tensor, &bytes)
            }
            Comm::Device(n) => {
                let mut buf = device_bytes(n, "all_reduce", tensor)?;
                self.watch(n.all_reduce(&mut buf, E::DTYPE, op))?;
                replace_device(tensor, buf)
            }
        }
    }

    /// Replaces `tensor` on every rank by rank `root`'s (`dist.broadcast`).
    ///
    /// ```
    /// # use rtx::dist::{InitOptions, init_with};
    /// # use rtx::prelude::*;
    /// # let pg = init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?;
    /// let mut t: Tensor<Rank1<2>, bf16> = Tensor::ones((Const,), Device::Cpu);
    /// pg.broadcast(&mut t, 0)?;
    /// assert!(pg.broadcast(&mut t, 1).is_err()); // no rank 1 in a group of one
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn broadcast<S: Shape, E: Element>(
        &self,
        tensor: &mut Tensor<S, E>,
        root: usize,
    ) -> Result<()> {
        self.check_rank("broadcast", root)?;
        match &mut *self.backend() {
            Comm::Host(b) => {
                let mut bytes = host_bytes(tensor)?;
                self.watch(b.broadcast(&mut bytes, root))?;
                replace(tensor, &bytes)
            }
            Comm::Device(n) => {
                let mut buf = device_bytes(n, "broadcast", tensor)?;
                self.watch(n.broadcast(&mut buf, root))?;
                replace_device(tensor, buf)
            }
        }
    }

    /// Every rank's `tensor`, in rank order, on every rank: a list as PyTorch's
    /// `dist.all_gather(tensor_list, tensor)` fills (stack or concatenate it for
    /// `all_gather_into_tensor`'s layout).
    ///
    /// ```
    /// # use rtx::dist::{InitOptions, init_with};
    /// # use rtx::prelude::*;
    /// # let pg = init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?;
    /// let t: Tensor<Rank2<2, 2>, i32> = Tensor::from_array([[1, 2], [3, 4]], Device::Cpu);
    /// let all = pg.all_gather(&t)?;
    /// assert_eq!(all.len(), pg.world_size());
    /// assert_eq!(all[pg.rank()].to_vec(), t.to_vec());
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn all_gather<S: Shape, E: Element>(
        &self,
        tensor: &Tensor<S, E>,
    ) -> Result<Vec<Tensor<S, E>>> {
        let mut backend = self.backend();
        let b = match &mut *backend {
            Comm::Host(b) => b,
            Comm::Device(n) => {
                let buf = device_bytes(n, "all_gather", tensor)?;
                // NCCL replaces the output with a fresh buffer; this one only holds its place.
                let mut out = buf.clone();
                self.watch(n.all_gather(&buf, &mut out))?;
                let each = buf.len();
                return (0..self.world)
                    .map(|q| {
                        let block = out.copy_range_to(q * each..(q + 1) * each, out.ordinal())?;
                        Ok(Tensor::from_storage(
                            Storage::Cuda(CudaStorage::from_bytes(block)?),
                            tensor.shape(),
                        ))
                    })
                    .collect();
            }
        };
        let bytes = host_bytes(tensor)?;
        let mut out = vec![0u8; bytes.len() * self.world];
        self.watch(b.all_gather(&bytes, &mut out))?;
        let each = bytes.len();
        (0..self.world)
            .map(|q| {
                let v: Vec<E> = vec_from_bytes("all_gather", &out[q * each..][..each])?;
                Ok(Tensor::from_storage(
                    Storage::from_vec(v, tensor.device())?,
                    tensor.shape(),
                ))
            })
            .collect()
    }

    /// The reduction across ranks of `inputs[rank]`: rank `q` contributes `inputs`, one tensor
    /// per rank, and receives the reduction of every rank's `inputs[q]` (PyTorch's
    /// `dist.reduce_scatter(output, input_list, op)`, with the output returned).
    ///
    /// # Errors
    /// [`Error::BadArgument`] when `inputs` does not hold one tensor per rank, all of the same
    /// size; [`Error::Dist`] as for every collective.
    ///
    /// ```
    /// # use rtx::dist::{InitOptions, ReduceOp, init_with};
    /// # use rtx::prelude::*;
    /// # let pg = init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?;
    /// let mine: Vec<Tensor<Rank1<2>>> = (0..pg.world_size())
    ///     .map(|q| Tensor::full((Const,), q as f32, Device::Cpu))
    ///     .collect();
    /// let out = pg.reduce_scatter(&mine, ReduceOp::Sum)?;
    /// assert_eq!(out.to_vec(), [0.0, 0.0]); // rank 0's block, summed over one rank
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn reduce_scatter<S: Shape, E: Element>(
        &self,
        inputs: &[Tensor<S, E>],
        op: ReduceOp,
    ) -> Result<Tensor<S, E>> {
        check("reduce_scatter", E::DTYPE, op)?;
        let Some(first) = inputs.first().filter(|_| inputs.len() == self.world) else {
            return Err(Error::BadArgument {
                op: "reduce_scatter",
                msg: format!(
                    "{} input tensors for a group of {} ranks: pass one per rank",
                    inputs.len(),
                    self.world
                ),
            });
        };
        if let Some(t) = inputs.iter().find(|t| t.dims() != first.dims()) {
            return Err(Error::ShapeMismatch {
                op: "reduce_scatter",
                lhs: format!("{:?}", first.dims()),
                rhs: format!("{:?}", t.dims()),
                rule: "every rank's block must have the same size",
            });
        }
        let mut backend = self.backend();
        let b = match &mut *backend {
            Comm::Host(b) => b,
            Comm::Device(n) => {
                let joined = join_on_device(n, inputs)?;
                let mut out = joined.clone();
                self.watch(n.reduce_scatter(&joined, &mut out, E::DTYPE, op))?;
                let mut t = first.clone();
                replace_device(&mut t, out)?;
                return Ok(t);
            }
        };
        let mut input = Vec::new();
        for t in inputs {
            input.extend_from_slice(&host_bytes(t)?);
        }
        let mut out = vec![0u8; input.len() / self.world];
        self.watch(b.reduce_scatter(&input, &mut out, E::DTYPE, op))?;
        let v: Vec<E> = vec_from_bytes("reduce_scatter", &out)?;
        Ok(Tensor::from_storage(
            Storage::from_vec(v, first.device())?,
            first.shape(),
        ))
    }

    /// [`ProcessGroup::all_reduce`] on a flat buffer of `dtype` elements in native bytes: what
    /// DDP reduces its gradient buckets with, from its communication thread.
    pub(crate) fn all_reduce_bytes(
        &self,
        bytes: &mut [u8],
        dtype: rtx_kernels::DType,
        op: ReduceOp,
    ) -> Result<()> {
        check("all_reduce", dtype, op)?;
        match &mut *self.backend() {
            Comm::Host(b) => self.watch(b.all_reduce(bytes, dtype, op)),
            // DDP's buckets are host buffers for now: through the group's GPU and back.
            Comm::Device(n) => {
                let rtx_backends::Device::Cuda(gpu) = n.device() else {
                    unreachable!("an NCCL group lives on a GPU")
                };
                let mut buf = CudaStorage::<u8>::from_slice(gpu, bytes)?;
                self.watch(n.all_reduce(&mut buf, dtype, op))?;
                bytes.copy_from_slice(&buf.to_host()?);
                Ok(())
            }
        }
    }

    /// The GPU of an NCCL group (`None` for TCP): DDP keeps its buckets there.
    pub(crate) fn nccl_gpu(&self) -> Option<usize> {
        match &*self.backend() {
            Comm::Host(_) => None,
            Comm::Device(n) => match n.device() {
                rtx_backends::Device::Cuda(gpu) => Some(gpu),
                _ => None,
            },
        }
    }

    /// On an NCCL group, queues an in-place all-reduce of the device bytes `data` (elements of
    /// `dtype`) on the communicator's side stream and returns at once; may run while a CUDA
    /// graph is captured. The caller keeps `data` alive and unread until after
    /// [`ProcessGroup::join_queued`].
    ///
    /// # Errors
    /// [`Error::BadArgument`] on a TCP group or for a dtype without `op`; [`Error::Dist`]
    /// naming this rank when NCCL fails.
    pub(crate) fn queue_all_reduce(
        &self,
        data: &CudaStorage<u8>,
        dtype: rtx_kernels::DType,
        op: ReduceOp,
    ) -> Result<()> {
        check("all_reduce", dtype, op)?;
        match &mut *self.backend() {
            Comm::Device(n) => self.watch(n.queue_all_reduce(data, dtype, op)),
            Comm::Host(_) => Err(not_nccl("queue_all_reduce")),
        }
    }

    /// Makes the GPU's stream wait for the all-reduces [`ProcessGroup::queue_all_reduce`]
    /// queued, without waiting on the host (allowed while capturing).
    pub(crate) fn join_queued(&self) -> Result<()> {
        match &mut *self.backend() {
            Comm::Device(n) => self.watch(n.join()),
            Comm::Host(_) => Err(not_nccl("join_queued")),
        }
    }

    /// Waits, within the group's timeout, for the work queued on the NCCL group's GPU (the
    /// collectives among it included), so a peer that died or hung is an error here rather
    /// than a hang in a later read.
    pub(crate) fn wait_queued(&self, call: &'static str) -> Result<()> {
        match &mut *self.backend() {
            Comm::Device(n) => self.watch(n.wait(call)),
            Comm::Host(_) => Err(not_nccl(call)),
        }
    }

    /// Returns once every rank has called it (`dist.barrier`).
    ///
    /// ```
    /// # let pg = rtx::dist::init_with(rtx::dist::InitOptions::new(0, 1, "127.0.0.1", 0))?;
    /// pg.barrier()?;
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn barrier(&self) -> Result<()> {
        let r = match &mut *self.backend() {
            Comm::Host(b) => b.barrier(),
            Comm::Device(n) => n.barrier(),
        };
        self.watch(r)
    }

    fn check_rank(&self, op: &'static str, root: usize) -> Result<()> {
        if root < self.world {
            return Ok(());
        }
        Err(Error::BadArgument {
            op,
            msg: format!(
                "root rank {root} is not below the world size {}",
                self.world
            ),
        })
    }
}

/// The error for a device-only path asked of a TCP group.
fn not_nccl(op: &'static str) -> Error {
    Error::BadArgument {
        op,
        msg: "the group communicates over TCP: only an NCCL group queues collectives on a GPU"
            .into(),
    }
}

/// The tensor's elements in logical order, as native bytes on the host.
fn host_bytes<S: Shape, E: Element>(t: &Tensor<S, E>) -> Result<Vec<u8>> {
    let values = t.storage().try_to_vec(t.layout())?;
    Ok(bytes_of(&values).to_vec())
}

/// Gives `t` a fresh dense buffer on its device holding `bytes`.
fn replace<S: Shape, E: Element>(t: &mut Tensor<S, E>, bytes: &[u8]) -> Result<()> {
    let values: Vec<E> = vec_from_bytes("dist", bytes)?;
    let device = t.device();
    let (storage, layout) = t.parts_mut();
    *storage = Arc::new(Storage::from_vec(values, device)?);
    *layout = Layout::contiguous(layout.dims());
    Ok(())
}

/// A group's backend: host bytes over TCP, or one GPU's bytes through NCCL.
enum Comm {
    Host(Box<dyn Collectives>),
    Device(Nccl),
}

/// The tensor's elements as one dense device buffer on the NCCL group's GPU (the tensor's own
/// storage when it is already one, else a copy made on the device).
fn device_bytes<S: Shape, E: Element>(
    n: &Nccl,
    op: &'static str,
    t: &Tensor<S, E>,
) -> Result<CudaStorage<u8>> {
    if t.device() != n.device() {
        return Err(Error::BadArgument {
            op,
            msg: format!(
                "the group communicates through NCCL on {:?}, but the tensor is on {:?}: move \
                 it there first (a TCP group takes tensors on any device)",
                n.device(),
                t.device()
            ),
        });
    }
    let l = t.layout();
    let dense = if l.is_contiguous() && l.offset() == 0 && t.storage().len() == l.numel() {
        t.storage().clone()
    } else {
        t.storage().contiguous(l)?
    };
    match dense {
        Storage::Cuda(c) => Ok(c.into_bytes()),
        _ => Err(Error::BadArgument {
            op,
            msg: format!("a tensor on {:?} without device storage", t.device()),
        }),
    }
}

/// Every rank block of a reduce-scatter, joined into one device buffer in rank order.
fn join_on_device<S: Shape, E: Element>(
    n: &Nccl,
    inputs: &[Tensor<S, E>],
) -> Result<CudaStorage<u8>> {
    let blocks = inputs
        .iter()
        .map(|t| device_bytes(n, "reduce_scatter", t))
        .collect::<Result<Vec<_>>>()?;
    Ok(CudaStorage::concat(&blocks)?)
}

/// Gives `t` the device buffer `buf` (its own dense elements) as its storage.
fn replace_device<S: Shape, E: Element>(t: &mut Tensor<S, E>, buf: CudaStorage<u8>) -> Result<()> {
    let (storage, layout) = t.parts_mut();
    *storage = Arc::new(Storage::Cuda(CudaStorage::from_bytes(buf)?));
    *layout = Layout::contiguous(layout.dims());
    Ok(())
}
