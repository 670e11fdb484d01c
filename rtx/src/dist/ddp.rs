//! `Ddp`: distributed data-parallel training (PyTorch's `DistributedDataParallel`). Every
//! rank holds the whole model and trains on its own share of each batch; the gradients are
//! averaged over the ranks before each optimizer step, so every rank takes the same step.
//!
//! Invariant: after a synced backward every rank holds the same averaged gradients, bit for
//! bit (the group reduces in rank order), so parameters that start equal (broadcast from
//! rank 0 when the `Ddp` is made) stay equal.
//!
//! Where the buckets go: through host memory on a communication thread for a TCP group
//! (`reducer.rs`); on the GPU for an NCCL group whose GPU holds the parameters
//! (`device_buckets.rs`), where a captured `TrainStep` also puts them inside its CUDA graph,
//! through [`DdpSync`].

use super::ProcessGroup;
use super::device_buckets::{DeviceLauncher, gpu_for};
use super::reducer::{self, DEFAULT_BUCKET_CAP_BYTES, Param, Plan};
use crate::autograd::{Erased, Gradients, Ready};
use crate::error::{Error, Result};
use crate::nn::{Module, TensorKind, VisitorMut};
use crate::optim::{OptimState, Optimizer};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Float;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// How a [`Ddp`] groups gradients.
///
/// ```
/// let o = rtx::dist::DdpOptions::default().bucket_cap_bytes(1 << 20);
/// assert_eq!(o.bucket_cap, 1 << 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DdpOptions {
    /// The most bytes of gradients in one bucket (25 MiB by default, PyTorch's
    /// `bucket_cap_mb=25`); a parameter larger than that gets a bucket of its own. The first
    /// bucket of each element type holds at most 1 MiB (or this, if smaller), as in PyTorch,
    /// so communication starts early in the backward.
    pub bucket_cap: usize,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            bucket_cap: DEFAULT_BUCKET_CAP_BYTES,
        }
    }
}

impl DdpOptions {
    /// Sets the bucket size in bytes: smaller buckets start communicating earlier in the
    /// backward, larger ones send fewer messages.
    pub fn bucket_cap_bytes(mut self, bytes: usize) -> Self {
        self.bucket_cap = bytes;
        self
    }
}

/// What a [`Ddp`] and its [`DdpOptimizer`]s share: the group, the options, the bucket plan
/// of the parameters last seen, and the gradients accumulated under `no_sync`.
struct Reducer {
    pg: Arc<ProcessGroup>,
    options: DdpOptions,
    plan: Option<Plan>,
    accumulated: Gradients,
    /// Buckets launched while the last synced backward was still running.
    overlapped: usize,
}

impl Reducer {
    fn new(pg: Arc<ProcessGroup>, options: DdpOptions) -> Self {
        Reducer {
            pg,
            options,
            plan: None,
            accumulated: Gradients::new(),
            overlapped: 0,
        }
    }

    /// The bucket plan for `params`, remade when they changed (a parameter frozen or
    /// unfrozen: every rank must change alike, as with PyTorch).
    fn plan(&mut self, params: &[Param]) -> &Plan {
        if !self.plan.as_ref().is_some_and(|p| p.fits(params)) {
            self.plan = Some(Plan::new(params, self.options.bucket_cap));
        }
        self.plan.as_ref().expect("made above")
    }

    /// Adds the local gradients of `params` in `grads` to the accumulated ones.
    fn accumulate(&mut self, params: &[Param], grads: &Gradients) {
        for p in params {
            if let Some(g) = grads.get_erased(&p.node) {
                self.accumulated.add_erased(&p.node, g.clone());
            }
        }
    }

    /// The averaged gradients (the accumulated ones included), with `feed` producing the
    /// local ones as in [`reducer::all_reduce`]. On an NCCL group whose GPU holds every
    /// parameter the buckets stay on the GPU (`device_buckets.rs`); `flags` says whether they
    /// carry the missing-gradient flags there (the host path always does).
    fn sync(
        &mut self,
        params: Vec<Param>,
        flags: bool,
        feed: impl FnOnce(Ready<'_>) -> Result<Gradients>,
    ) -> Result<Gradients> {
        self.plan(&params);
        let accumulated = std::mem::take(&mut self.accumulated);
        let plan = self.plan.as_ref().expect("made above");
        if let Some(gpu) = gpu_for(&self.pg, &params) {
            let mut launcher = DeviceLauncher::new(
                self.pg.clone(),
                params,
                plan.clone(),
                gpu,
                accumulated,
                None,
                flags,
            );
            let grads = feed(&mut |id, g| launcher.ready(id, g))?;
            let (grads, early) = launcher.finish(grads, false)?;
            self.overlapped = early;
            return Ok(grads);
        }
        let (grads, early) = reducer::all_reduce(&self.pg, &params, plan, &accumulated, feed)?;
        self.overlapped = early;
        Ok(grads)
    }

    /// [`Reducer::sync`] of gradients already computed (by a static backward).
    fn sync_after(
        &mut self,
        params: Vec<Param>,
        grads: Gradients,
        flags: bool,
    ) -> Result<Gradients> {
        let order: Vec<(u64, Option<Erased>)> = params
            .iter()
            .rev()
            .map(|p| (p.node.id(), grads.get_erased(&p.node).cloned()))
            .collect();
        let averaged = self.sync(params, flags, |ready| {
            // In the order a backward produces them, so the buckets launch as they fill.
            for (id, g) in &order {
                if let Some(g) = g {
                    ready(*id, g)?;
                }
            }
            Ok(grads)
        });
        // The backward had finished before any bucket went out.
        self.overlapped = 0;
        averaged
    }
}

/// A model trained data-parallel across the ranks of a [`ProcessGroup`] (PyTorch's
/// `DistributedDataParallel`).
///
/// [`Ddp::new`] broadcasts rank 0's parameters and buffers to every rank. [`Ddp::backward`]
/// runs the tape's backward and averages the gradients over the ranks: the trainable
/// parameters are grouped into buckets of about [`DdpOptions::bucket_cap`] bytes (25 MiB by
/// default) in reverse registration order, and each bucket is all-reduced as one flat buffer
/// as soon as the backward has produced all of its gradients, while the rest of the backward
/// runs: on a communication thread over TCP, or on the GPU by NCCL on a side stream for an
/// NCCL group (the averaged gradients are then views of the bucket, on the GPU). [`Ddp::no_sync`] accumulates gradients locally for
/// gradient accumulation; the next synced backward averages the sum. A compiled training
/// step ([`crate::compile::TrainStep`]) gets its averaging from [`Ddp::optimizer`].
///
/// A trainable parameter that receives no gradient on some rank in a synced backward is an
/// [`Error::Dist`] on every rank naming it, rather than a hang (PyTorch's
/// `find_unused_parameters` case): freeze it, or leave it out of the model.
///
/// ```
/// use rtx::dist::{Ddp, InitOptions, init_with};
/// use rtx::prelude::*;
/// # fn main() -> rtx::Result<()> {
/// // A group of one here; `rtx::dist::init()?` under `rtx-run` or torchrun.
/// let pg = init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?;
/// let mut fc = Linear::<3, 1>::new(Device::Cpu, 0);
/// fc.track_gradients();
/// let mut ddp = Ddp::new(fc, pg)?;
/// let mut opt = Sgd::new(0.1);
/// let x: Tensor<Rank2<4, 3>> = Tensor::ones((Const, Const), Device::Cpu);
/// let loss = ddp.module().forward(&x).sum_all();
/// let grads = ddp.backward(&loss)?; // averaged over the ranks
/// opt.try_step(ddp.module_mut(), &grads)?;
/// # Ok(())
/// # }
/// ```
pub struct Ddp<M> {
    module: M,
    reducer: Reducer,
    sync: bool,
}

impl<M: Module> Ddp<M> {
    /// Wraps `module` with the default options, broadcasting rank 0's parameters and buffers
    /// to every rank (so ranks seeded differently start equal).
    ///
    /// # Errors
    /// [`Error::Dist`] when a rank fails or its parameters' sizes differ from rank 0's.
    pub fn new(module: M, pg: impl Into<Arc<ProcessGroup>>) -> Result<Self> {
        Self::with_options(module, pg, DdpOptions::default())
    }

    /// [`Ddp::new`] with `options`.
    ///
    /// # Errors
    /// As [`Ddp::new`]; also [`Error::BadArgument`] for a bucket size of 0.
    pub fn with_options(
        mut module: M,
        pg: impl Into<Arc<ProcessGroup>>,
        options: DdpOptions,
    ) -> Result<Self> {
        if options.bucket_cap == 0 {
            return Err(Error::BadArgument {
                op: "Ddp::with_options",
                msg: "the bucket size is 0 bytes: give it room for at least one parameter".into(),
            });
        }
        let pg = pg.into();
        broadcast(&pg, &mut module)?;
        Ok(Ddp {
            module,
            reducer: Reducer::new(pg, options),
            sync: true,
        })
    }

    /// The wrapped model.
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped model, mutably (for the optimizer's step).
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.module
    }

    /// The wrapped model, unwrapped.
    pub fn into_inner(self) -> M {
        self.module
    }

    /// The group the gradients are averaged over.
    pub fn process_group(&self) -> &ProcessGroup {
        &self.reducer.pg
    }

    /// The options the `Ddp` was made with.
    pub fn options(&self) -> DdpOptions {
        self.reducer.options
    }

    /// Back-propagates from `loss` and returns the gradients averaged over the ranks (the
    /// tape's [`Tensor::try_backward`], synchronized).
    ///
    /// Each bucket is all-reduced on a communication thread as soon as its last gradient is
    /// final, while the backward goes on; buckets go out in order, so a bucket waits for the
    /// ones before it. Inside [`Ddp::no_sync`], returns this backward's local gradients and
    /// adds them to the accumulated ones instead; a synced backward averages its gradients
    /// plus the accumulated ones and clears them.
    ///
    /// # Errors
    /// The backward's own errors; [`Error::Dist`] when a rank fails, or naming the trainable
    /// parameters that received no gradient on some rank (every rank gets it).
    pub fn backward<E: Float>(&mut self, loss: &Tensor<(), E>) -> Result<Gradients> {
        let params = reducer::params(&self.module);
        if !self.sync {
            let grads = loss.try_backward()?;
            self.reducer.accumulate(&params, &grads);
            return Ok(grads);
        }
        self.reducer.sync(params, true, |ready| {
            loss.try_backward_observed(Some(ready))
        })
    }

    /// Averages gradients computed without the tape (a static backward,
    /// [`crate::compile::StaticForward::forward_train`]) over the ranks, after the backward;
    /// inside [`Ddp::no_sync`] it accumulates them and returns them unchanged.
    ///
    /// # Errors
    /// As [`Ddp::backward`].
    pub fn all_reduce_gradients(&mut self, grads: Gradients) -> Result<Gradients> {
        let params = reducer::params(&self.module);
        if !self.sync {
            self.reducer.accumulate(&params, &grads);
            return Ok(grads);
        }
        self.reducer.sync_after(params, grads, true)
    }

    /// Runs `f` with gradient synchronization off (PyTorch's `no_sync()`): backward passes
    /// inside accumulate their gradients locally, with no communication, and the first synced
    /// backward after it averages the accumulated sum. Take no optimizer step inside: the
    /// accumulated gradients belong to the parameters as they are.
    ///
    /// ```
    /// # use rtx::dist::{Ddp, InitOptions, init_with};
    /// # use rtx::prelude::*;
    /// # let pg = init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?;
    /// let mut w: Tensor<Rank1<2>> = Tensor::from_array([1.0, 2.0], Device::Cpu).requires_grad();
    /// let mut ddp = Ddp::new(w, pg)?;
    /// ddp.no_sync(|ddp| {
    ///     let loss = ddp.module().sum_all();
    ///     ddp.backward(&loss).map(drop)
    /// })?;
    /// let loss = ddp.module().sum_all();
    /// let grads = ddp.backward(&loss)?; // the two backward passes' sum
    /// assert_eq!(grads.get(ddp.module()).unwrap().to_vec(), [2.0, 2.0]);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn no_sync<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let before = std::mem::replace(&mut self.sync, false);
        // Restored on a panic too, so a caught panic does not leave syncing off.
        struct Restore<'a, M>(&'a mut Ddp<M>, bool);
        impl<M> Drop for Restore<'_, M> {
            fn drop(&mut self) {
                self.0.sync = self.1;
            }
        }
        let guard = Restore(self, before);
        f(guard.0)
    }

    /// The names of the trainable parameters in each bucket, in the order the buckets are
    /// all-reduced.
    pub fn buckets(&mut self) -> Vec<Vec<String>> {
        let params = reducer::params(&self.module);
        let plan = self.reducer.plan(&params);
        plan.buckets
            .iter()
            .map(|m| m.iter().map(|&i| params[i].name.clone()).collect())
            .collect()
    }

    /// How many buckets the last synced [`Ddp::backward`] started all-reducing while its
    /// backward pass was running (the rest went out after it); 0 after
    /// [`Ddp::all_reduce_gradients`], which starts after the backward.
    pub fn overlapped_buckets(&self) -> usize {
        self.reducer.overlapped
    }

    /// An optimizer that averages the gradients it is given over the ranks before `opt`'s
    /// update: the averaging for steps that call the optimizer themselves, such as the
    /// compiled [`crate::compile::TrainStep`] and [`crate::compile::MixedStep`], in the same
    /// buckets. It ignores [`Ddp::no_sync`] (a compiled step steps every time).
    ///
    /// A [`crate::compile::TrainStep`] captured on an NCCL group's GPU puts the averaging in
    /// its CUDA graph: each bucket is all-reduced by NCCL on the GPU as soon as the static
    /// backward has added its last gradient, on a side stream, overlapping the rest of the
    /// backward (see [`crate::compile::TrainStep`]). Otherwise (the CPU, a TCP group, the
    /// uncaptured first run, [`crate::compile::MixedStep`], whose f32 gradients exist only
    /// after its graph) the buckets are all-reduced after the backward: on the GPU for an
    /// NCCL group, through host memory for TCP.
    pub fn optimizer<O: Optimizer>(&self, opt: O) -> DdpOptimizer<O> {
        DdpOptimizer {
            inner: opt,
            sync: DdpSync {
                reducer: Reducer::new(self.reducer.pg.clone(), self.reducer.options),
                counts: HashMap::new(),
                checked: None,
                averaged: false,
            },
        }
    }
}

/// Broadcasts rank 0's parameters and buffers to every rank.
fn broadcast<M: Module>(pg: &ProcessGroup, module: &mut M) -> Result<()> {
    struct Bcast<'a>(&'a ProcessGroup, Result<()>);
    impl VisitorMut for Bcast<'_> {
        fn visit_mut<S: Shape, E: Float>(
            &mut self,
            name: &str,
            t: &mut Tensor<S, E>,
            _: TensorKind,
        ) {
            if self.1.is_ok() {
                self.1 = self.0.broadcast(t, 0).map_err(|e| match e {
                    Error::Dist { rank, msg } => Error::Dist {
                        rank,
                        msg: format!("Ddp: broadcasting `{name}` from rank 0: {msg}"),
                    },
                    e => e,
                });
            }
        }
    }
    let mut b = Bcast(pg, Ok(()));
    module.visit_mut("", &mut b);
    b.1
}

/// An optimizer whose steps first average the gradients over the ranks (see
/// [`Ddp::optimizer`]).
pub struct DdpOptimizer<O> {
    inner: O,
    sync: DdpSync,
}

impl<O> DdpOptimizer<O> {
    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// How many buckets the last captured step's graph launched while its static backward
    /// was still running (the rest after it); 0 before a step was captured.
    pub fn overlapped_buckets(&self) -> usize {
        self.sync.reducer.overlapped
    }
}

impl<O: Optimizer> Optimizer for DdpOptimizer<O> {
    fn try_step(&mut self, model: &mut impl Module, grads: &Gradients) -> Result<()> {
        if std::mem::take(&mut self.sync.averaged) {
            // A captured step's graph averaged these gradients already.
            return self.inner.try_step(model, grads);
        }
        let params = reducer::params(model);
        // A copy of the parameters' gradients (handles, not values): the reducer replaces
        // them by the averages.
        let mut local = Gradients::new();
        for p in &params {
            if let Some(g) = grads.get_erased(&p.node) {
                local.set_erased(p.node.id(), g.clone());
            }
        }
        // A compiled step's backward gives the same parameters gradients every step, so the
        // missing-gradient flags (and the host read they cost on a GPU) are needed only on
        // the first step of each set of parameters.
        let signature = signature(&params);
        let flags = self.sync.checked.as_ref() != Some(&signature);
        let averaged = self.sync.reducer.sync_after(params, local, flags)?;
        self.sync.checked = Some(signature);
        self.inner.try_step(model, &averaged)
    }

    fn lr(&self) -> f64 {
        self.inner.lr()
    }

    fn set_lr(&mut self, lr: f64) {
        self.inner.set_lr(lr)
    }

    fn state_dict(&self) -> OptimState {
        self.inner.state_dict()
    }

    fn try_load_state(&mut self, state: OptimState) -> Result<()> {
        self.inner.try_load_state(state)
    }

    fn ddp_sync(&mut self) -> Option<&mut DdpSync> {
        Some(&mut self.sync)
    }
}

/// The parameters' names, in order: what the missing-gradient check was made for.
fn signature(params: &[Param]) -> Vec<String> {
    params.iter().map(|p| p.name.clone()).collect()
}

/// What a compiled training step asks of a [`DdpOptimizer`] to put the gradients' averaging
/// inside its CUDA graph (reached through `Optimizer::ddp_sync`; not for direct use).
///
/// The static backward has no tape to report readiness, but it adds every gradient to a
/// [`Gradients`], which can be observed; a parameter's gradient is final after as many
/// additions as the step's uncaptured first run made (more than one for a weight used
/// twice), which an uncaptured run records by parameter name.
#[doc(hidden)]
pub struct DdpSync {
    reducer: Reducer,
    /// Per parameter name, how many additions make its gradient final.
    counts: HashMap<String, usize>,
    /// The parameters whose gradients were last checked with the missing-gradient flags.
    checked: Option<Vec<String>>,
    /// Whether the gradients of the next `try_step` were averaged in a graph already.
    averaged: bool,
}

/// A launcher shared with the observer of a captured static backward.
type Shared = Arc<Mutex<DeviceLauncher>>;

/// What [`DdpSync::counting`] counts: additions per tape node id.
type Counter = Arc<Mutex<HashMap<u64, usize>>>;

impl DdpSync {
    /// Empty gradients that count each addition, for an uncaptured run of a compiled step;
    /// hand them to [`DdpSync::learn`] after the backward.
    pub(crate) fn counting(&self) -> (Gradients, Counter) {
        let counter = Counter::default();
        let c = counter.clone();
        let grads = Gradients::observed(Box::new(move |id, _| {
            *c.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(id)
                .or_default() += 1;
        }));
        (grads, counter)
    }

    /// Records the additions `counter` saw, per parameter of `model`, and stops observing.
    pub(crate) fn learn<M: Module>(&mut self, model: &M, grads: &mut Gradients, counter: Counter) {
        grads.unobserve();
        let seen = counter.lock().unwrap_or_else(PoisonError::into_inner);
        self.counts = reducer::params(model)
            .iter()
            .filter_map(|p| Some((p.name.clone(), *seen.get(&p.node.id())?)))
            .collect();
    }

    /// Empty gradients for the static backward of a step being captured on GPU `gpu`, whose
    /// observer packs and all-reduces each bucket as soon as it is complete; `None` when this
    /// step cannot average inside its graph (a TCP group, parameters off the group's GPU, no
    /// uncaptured run recorded yet, or `RTX_DDP_GRAPH=0`), and the optimizer then averages
    /// after each replay.
    pub(crate) fn capturing<M: Module>(
        &mut self,
        model: &M,
        gpu: usize,
    ) -> Option<(Gradients, Shared)> {
        // `RTX_DDP_GRAPH=0` keeps the all-reduces out of the graph (averaged after each
        // replay instead): a switch for comparing the two, or for an NCCL that cannot be
        // captured.
        if std::env::var("RTX_DDP_GRAPH").is_ok_and(|v| v.trim() == "0") {
            return None;
        }
        let params = reducer::params(model);
        if gpu_for(&self.reducer.pg, &params) != Some(gpu) {
            return None;
        }
        let needed = params
            .iter()
            .map(|p| self.counts.get(&p.name).copied())
            .collect::<Option<Vec<usize>>>()?;
        let plan = self.reducer.plan(&params).clone();
        let launcher = DeviceLauncher::new(
            self.reducer.pg.clone(),
            params,
            plan,
            gpu,
            Gradients::new(),
            Some(needed),
            false,
        );
        let shared = Arc::new(Mutex::new(launcher));
        let observer = shared.clone();
        let grads = Gradients::observed(Box::new(move |id, g| {
            observer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .observe(id, g)
        }));
        Some((grads, shared))
    }

    /// Launches the buckets the captured backward left, joins the side stream into the
    /// capture and returns the averaged gradients (views of the buckets, which the graph
    /// writes on every replay).
    ///
    /// # Errors
    /// As `DeviceLauncher::finish`.
    pub(crate) fn finish_capture(
        &mut self,
        mut grads: Gradients,
        shared: Shared,
    ) -> Result<Gradients> {
        // Dropping the observer drops its handle on the launcher.
        grads.unobserve();
        let launcher = Arc::try_unwrap(shared)
            .map_err(|_| Error::BadArgument {
                op: "Ddp",
                msg: "the captured backward kept its gradients' observer".into(),
            })?
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let (averaged, early) = launcher.finish(grads, true)?;
        self.reducer.overlapped = early;
        Ok(averaged)
    }

    /// After a replay of a graph that averages: waits for it within the group's timeout (a
    /// peer that died or hung is an error naming this rank, not a hang) and tells the next
    /// `try_step` that its gradients are averaged already.
    ///
    /// # Errors
    /// [`Error::Dist`] when NCCL failed or the timeout passed.
    pub(crate) fn replayed(&mut self) -> Result<()> {
        self.reducer.pg.wait_queued("Ddp captured step")?;
        self.averaged = true;
        Ok(())
    }
}
