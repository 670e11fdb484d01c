//! DDP's gradient buckets: which parameters share one flat buffer, packing their gradients
//! into it as they become ready, all-reducing each buffer on a communication thread, and
//! writing the averages back into [`Gradients`]. This is the path through host memory (the
//! TCP backend, or parameters off an NCCL group's GPU); `device_buckets.rs` keeps the buckets
//! on the GPU for an NCCL group, with the same plan, order and flags.
//!
//! Invariants: every rank forms the same buckets (they are a function of the parameters'
//! names, sizes and element types, in registration order) and launches them in bucket order,
//! each exactly once per synced step, whatever gradients it has: a gradient a rank lacks is
//! sent as zeros with a flag, one element per parameter after the gradients, so the ranks
//! agree on which parameters were missing (and fail together) instead of hanging or
//! averaging a mismatch.

use super::ProcessGroup;
use crate::autograd::{Erased, Gradients, Node, Ready, grad_as};
use crate::error::{Error, Result};
use crate::nn::{Module, TensorKind, Visitor};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::cpu::ranks::ReduceOp;
use rtx_backends::cuda::CudaStorage;
use rtx_backends::{Device, Layout, Storage, bytes_of, vec_from_bytes};
use rtx_kernels::{DType, Element, Float};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc;

/// PyTorch's default bucket size, `bucket_cap_mb = 25` (MiB).
pub const DEFAULT_BUCKET_CAP_BYTES: usize = 25 * 1024 * 1024;

/// The cap of each element type's first bucket, as PyTorch's `_DEFAULT_FIRST_BUCKET_BYTES`:
/// a small first bucket (the last layers' gradients) starts communicating early in the
/// backward instead of waiting for 25 MiB of gradients.
pub const FIRST_BUCKET_CAP_BYTES: usize = 1024 * 1024;

/// Makes a gradient of one parameter's type and device from native bytes.
type Unpack = Box<dyn Fn(&[u8]) -> Result<Erased> + Send + Sync>;

/// A gradient of one parameter's type seen in a device bucket, from its first element.
type View = Box<dyn Fn(&CudaStorage<u8>, usize) -> Result<Erased> + Send + Sync>;

/// One trainable parameter as the reducer sees it: its name, tape node and how to move its
/// gradient in and out of a bucket without its shape type.
pub(crate) struct Param {
    pub name: String,
    pub node: Arc<Node>,
    pub numel: usize,
    pub dtype: DType,
    pub device: Device,
    /// Appends the gradient's elements, in logical order, as native bytes.
    pack: fn(&Erased, &mut Vec<u8>) -> Result<()>,
    /// A gradient of the parameter's type and device from native bytes.
    unpack: Unpack,
    /// The gradient's elements, in logical order, as dense bytes on its GPU.
    pub dense: fn(&Erased) -> Result<CudaStorage<u8>>,
    /// The gradient as a view of a device bucket, from element `at` on.
    pub view: View,
    /// The native bytes of a flag value in the parameter's element type.
    pub encode: fn(f64) -> Vec<u8>,
    /// A flag value from its native bytes.
    pub decode: fn(&[u8]) -> f64,
}

fn pack<S: Shape, E: Float>(g: &Erased, out: &mut Vec<u8>) -> Result<()> {
    let t = grad_as::<S, E>(g);
    let values = t.storage().try_to_vec(t.layout())?;
    out.extend_from_slice(bytes_of(&values));
    Ok(())
}

fn dense<S: Shape, E: Float>(g: &Erased) -> Result<CudaStorage<u8>> {
    let t = grad_as::<S, E>(g);
    let l = t.layout();
    // The gradient's own buffer when it is already dense (no copy), else a dense copy made
    // on the device (a transposed weight gradient, a broadcast sum gradient).
    let storage = if l.is_contiguous() && l.offset() == 0 && t.storage().len() == l.numel() {
        t.storage().clone()
    } else {
        t.storage().contiguous(l)?
    };
    match storage {
        Storage::Cuda(c) => Ok(c.into_bytes()),
        _ => Err(Error::BadArgument {
            op: "Ddp",
            msg: format!(
                "a gradient on {:?} in a device bucket: every parameter must be on the NCCL \
                 group's GPU",
                t.device()
            ),
        }),
    }
}

fn encode<E: Element>(x: f64) -> Vec<u8> {
    bytes_of(&[E::from_f64(x)]).to_vec()
}

fn decode<E: Element>(bytes: &[u8]) -> f64 {
    vec_from_bytes::<E>("Ddp", bytes).map_or(f64::NAN, |v| v[0].to_f64())
}

/// The trainable parameters of `model` (those that track gradients; frozen ones are left
/// out, as PyTorch leaves out `requires_grad=False`), in registration order.
pub(crate) fn params<M: Module>(model: &M) -> Vec<Param> {
    struct Collect(Vec<Param>);
    impl Visitor for Collect {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
            let Some(node) = t.node().filter(|_| kind == TensorKind::Parameter) else {
                return;
            };
            let (shape, device) = (t.shape(), t.device());
            self.0.push(Param {
                name: name.to_string(),
                node: node.clone(),
                numel: t.numel(),
                dtype: E::DTYPE,
                device,
                pack: pack::<S, E>,
                unpack: Box::new(move |bytes| {
                    let values: Vec<E> = vec_from_bytes("Ddp", bytes)?;
                    let g = Tensor::from_storage(Storage::from_vec(values, device)?, shape);
                    Ok(Arc::new(g) as Erased)
                }),
                dense: dense::<S, E>,
                view: Box::new(move |bucket, at| {
                    let elems = CudaStorage::<E>::from_bytes(bucket.clone())?;
                    let layout = Layout::contiguous(&shape.dims()).with_offset(at);
                    let g = Tensor::from_storage_layout(Storage::Cuda(elems), layout, shape);
                    Ok(Arc::new(g) as Erased)
                }),
                encode: encode::<E>,
                decode: decode::<E>,
            });
        }
    }
    let mut c = Collect(Vec::new());
    model.visit("", &mut c);
    c.0
}

/// Which parameters share a bucket, in launch order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    /// What the plan was made from: each parameter's name, size and element type.
    signature: Vec<(String, usize, DType)>,
    /// Per bucket, indices into the parameter list, in packing order.
    pub buckets: Vec<Vec<usize>>,
    /// Per parameter, its bucket.
    bucket_of: Vec<usize>,
}

impl Plan {
    /// Buckets of at most `cap` bytes (a parameter larger than that gets one of its own), one
    /// element type each, filled in reverse registration order: the order in which a backward
    /// pass usually produces the gradients, so the first buckets fill first. Each element
    /// type has its own open bucket, the first one capped at [`FIRST_BUCKET_CAP_BYTES`] (or
    /// `cap`, if smaller), as in PyTorch.
    pub fn new(params: &[Param], cap: usize) -> Plan {
        let mut buckets: Vec<Vec<usize>> = Vec::new();
        // Per element type, the open bucket's index, its size in bytes and its cap.
        let mut open: HashMap<DType, (usize, usize, usize)> = HashMap::new();
        for (i, p) in params.iter().enumerate().rev() {
            let bytes = p.numel * p.dtype.size_in_bytes();
            match open.get_mut(&p.dtype) {
                Some((b, used, limit)) if *used + bytes <= *limit => {
                    buckets[*b].push(i);
                    *used += bytes;
                }
                Some(slot) => {
                    *slot = (buckets.len(), bytes, cap);
                    buckets.push(vec![i]);
                }
                None => {
                    let limit = cap.min(FIRST_BUCKET_CAP_BYTES);
                    open.insert(p.dtype, (buckets.len(), bytes, limit));
                    buckets.push(vec![i]);
                }
            }
        }
        let mut bucket_of = vec![0; params.len()];
        for (b, members) in buckets.iter().enumerate() {
            for &i in members {
                bucket_of[i] = b;
            }
        }
        Plan {
            signature: signature(params),
            buckets,
            bucket_of,
        }
    }

    /// Whether the plan was made for these parameters.
    pub fn fits(&self, params: &[Param]) -> bool {
        self.signature == signature(params)
    }
}

fn signature(params: &[Param]) -> Vec<(String, usize, DType)> {
    params
        .iter()
        .map(|p| (p.name.clone(), p.numel, p.dtype))
        .collect()
}

/// Which buckets are complete and which goes out next: buckets launch strictly in order, so
/// every rank's collectives match.
pub(crate) struct Progress {
    /// Per bucket, how many of its parameters have no final gradient yet.
    left: Vec<usize>,
    /// The next bucket to launch.
    next: usize,
}

impl Progress {
    pub fn new(plan: &Plan) -> Self {
        Progress {
            left: plan.buckets.iter().map(Vec::len).collect(),
            next: 0,
        }
    }

    /// Counts parameter `i`'s final gradient in; returns the buckets that may launch now.
    pub fn arrived(&mut self, plan: &Plan, i: usize) -> std::ops::Range<usize> {
        self.left[plan.bucket_of[i]] -= 1;
        let from = self.next;
        while self.next < self.left.len() && self.left[self.next] == 0 {
            self.next += 1;
        }
        from..self.next
    }

    /// The buckets not launched yet (after the backward), now counted as launched.
    pub fn rest(&mut self) -> std::ops::Range<usize> {
        let from = self.next;
        self.next = self.left.len();
        from..self.next
    }

    /// How many buckets have been launched.
    pub fn launched(&self) -> usize {
        self.next
    }
}

/// The trainable parameters' indices by tape node id.
pub(crate) fn index_by_id(params: &[Param]) -> HashMap<u64, usize> {
    params
        .iter()
        .enumerate()
        .map(|(i, p)| (p.node.id(), i))
        .collect()
}

/// Packs buckets as their gradients become ready and hands each, in bucket order, to `sink`.
struct Launcher<'a> {
    params: &'a [Param],
    plan: &'a Plan,
    by_id: HashMap<u64, usize>,
    /// Gradients received, the accumulated ones of `no_sync` steps added.
    grads: Vec<Option<Erased>>,
    accumulated: &'a Gradients,
    progress: Progress,
}

impl<'a> Launcher<'a> {
    fn new(params: &'a [Param], plan: &'a Plan, accumulated: &'a Gradients) -> Self {
        Launcher {
            params,
            plan,
            by_id: index_by_id(params),
            grads: vec![None; params.len()],
            accumulated,
            progress: Progress::new(plan),
        }
    }

    /// Takes the final local gradient of tape node `id`, and launches every bucket that is
    /// now complete and next in order.
    fn ready(
        &mut self,
        id: u64,
        g: &Erased,
        sink: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let Some(&i) = self.by_id.get(&id) else {
            // A leaf that is not one of the model's trainable parameters (an input).
            return Ok(());
        };
        if self.grads[i].is_some() {
            return Ok(());
        }
        let node = &self.params[i].node;
        self.grads[i] = Some(match self.accumulated.get_erased(node) {
            Some(acc) => node.add_grads(acc, g)?,
            None => g.clone(),
        });
        for b in self.progress.arrived(self.plan, i) {
            let bucket = self.pack(b)?;
            sink(b, bucket)?;
        }
        Ok(())
    }

    /// Launches the buckets still waiting (after the backward): a parameter without a fresh
    /// gradient contributes its accumulated one, or zeros and a missing flag. Returns how
    /// many buckets were launched before this.
    fn finish(&mut self, sink: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>) -> Result<usize> {
        let early = self.progress.launched();
        for b in self.progress.rest() {
            for &i in &self.plan.buckets[b] {
                if self.grads[i].is_none() {
                    self.grads[i] = self.accumulated.get_erased(&self.params[i].node).cloned();
                }
            }
            let bucket = self.pack(b)?;
            sink(b, bucket)?;
        }
        Ok(early)
    }

    /// Bucket `b` as one flat buffer: every parameter's gradient (zeros when it has none),
    /// then one flag per parameter, 1 when this rank has no gradient for it.
    fn pack(&self, b: usize) -> Result<Vec<u8>> {
        let members = &self.plan.buckets[b];
        let size = self.params[members[0]].dtype.size_in_bytes();
        let elems: usize = members.iter().map(|&i| self.params[i].numel).sum();
        let mut buf = Vec::with_capacity((elems + members.len()) * size);
        for &i in members {
            match &self.grads[i] {
                Some(g) => (self.params[i].pack)(g, &mut buf)?,
                None => buf.resize(buf.len() + self.params[i].numel * size, 0),
            }
        }
        for &i in members {
            let missing = if self.grads[i].is_some() { 0.0 } else { 1.0 };
            buf.extend_from_slice(&(self.params[i].encode)(missing));
        }
        Ok(buf)
    }
}

/// The averaged gradients of `params`, written into `out` under each parameter's node.
///
/// `feed` produces the local gradients, calling the hook it gets with each parameter's
/// final gradient as soon as it has it (the tape's backward does so while it runs; a finished
/// [`Gradients`] can be fed all at once); each bucket that completes is all-reduced on a
/// communication thread meanwhile. Returns `feed`'s gradients with the parameters' replaced
/// by the averages, and how many buckets were launched while `feed` ran.
///
/// # Errors
/// `feed`'s error; a collective's [`Error::Dist`]; and an [`Error::Dist`] naming every
/// parameter that received no gradient on some rank (on every rank alike).
pub(crate) fn all_reduce(
    pg: &ProcessGroup,
    params: &[Param],
    plan: &Plan,
    accumulated: &Gradients,
    feed: impl FnOnce(Ready<'_>) -> Result<Gradients>,
) -> Result<(Gradients, usize)> {
    let mut launcher = Launcher::new(params, plan, accumulated);
    let dtypes: Vec<DType> = plan.buckets.iter().map(|m| params[m[0]].dtype).collect();
    let (grads, early, reduced) = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, Vec<u8>)>();
        // The communication thread: CPU collectives block on sockets, so they run beside the
        // backward. An NCCL backend would enqueue the same all-reduces on its communication
        // stream from here instead, after an event recorded on the compute stream.
        let comm = s.spawn(move || -> Result<Vec<(usize, Vec<u8>)>> {
            let mut done = Vec::new();
            for (b, mut buf) in rx {
                pg.all_reduce_bytes(&mut buf, dtypes[b], ReduceOp::Avg)?;
                done.push((b, buf));
            }
            Ok(done)
        });
        // A send fails only when the thread stopped on an error, which its join reports.
        let mut sink = |b: usize, buf: Vec<u8>| -> Result<()> {
            let _ = tx.send((b, buf));
            Ok(())
        };
        let fed = feed(&mut |id, g| launcher.ready(id, g, &mut sink));
        let finished = fed.and_then(|g| Ok((g, launcher.finish(&mut sink)?)));
        drop(tx);
        let reduced = comm.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        finished.map(|(g, early)| (g, early, reduced))
    })?;
    let reduced = reduced?;
    let mut grads = grads;
    let mut missing = Vec::new();
    for (b, buf) in reduced {
        let members = &plan.buckets[b];
        let size = params[members[0]].dtype.size_in_bytes();
        let flags = buf.len() - members.len() * size;
        let mut at = 0;
        for (k, &i) in members.iter().enumerate() {
            let p = &params[i];
            let ranks = (p.decode)(&buf[flags + k * size..][..size]) * pg.world_size() as f64;
            if ranks != 0.0 {
                missing.push((p.name.clone(), ranks.round() as usize));
            }
            let bytes = &buf[at..at + p.numel * size];
            at += p.numel * size;
            grads.set_erased(p.node.id(), (p.unpack)(bytes)?);
        }
    }
    if !missing.is_empty() {
        return Err(unused_error(pg, params, &launcher.grads, missing));
    }
    Ok((grads, early))
}

/// The error for parameters that got no gradient on some rank during a synced backward.
pub(crate) fn unused_error(
    pg: &ProcessGroup,
    params: &[Param],
    local: &[Option<Erased>],
    mut missing: Vec<(String, usize)>,
) -> Error {
    missing.sort();
    let here: Vec<&str> = params
        .iter()
        .zip(local)
        .filter(|(_, g)| g.is_none())
        .map(|(p, _)| p.name.as_str())
        .collect();
    let list: Vec<String> = missing
        .iter()
        .map(|(name, ranks)| format!("`{name}` (on {ranks} of {} ranks)", pg.world_size()))
        .collect();
    Error::Dist {
        rank: (!here.is_empty()).then_some(pg.rank()),
        msg: format!(
            "Ddp: parameters received no gradient in a synced backward: {}; this rank ({}) \
             lacks {}. Every trainable parameter must contribute to the loss on every rank: \
             freeze the ones this loss does not use, or leave them out of the model",
            list.join(", "),
            pg.rank(),
            if here.is_empty() {
                "none of them".to_string()
            } else {
                here.join(", ")
            }
        ),
    }
}
