//! A training step compiled once and run every iteration: the compiled forward, the loss,
//! the static backward and the optimizer's update, in one call.
//!
//! On a GPU the forward, loss and backward are captured as a CUDA graph on the second run
//! (the first runs uncaptured: it compiles the kernels, loads cuBLAS and fills the
//! allocator's cache) and replayed on every later run, so the launches of a whole step cost
//! one graph launch; the optimizer's update follows as its own multi-tensor launch, with
//! this step's scalars (learning rate, bias corrections) as arguments, so schedules need
//! nothing special. On the CPU every run simply executes the step.
//!
//! A graph holds the sizes it was captured with, so a step keeps one graph per input size
//! (the run-time sizes of the inputs and targets, for a model generic over its batch dim):
//! a size's first run is uncaptured, its second captures, later ones replay. At most
//! [`TrainStep::DEFAULT_MAX_SIZES`] sizes are kept (see [`TrainStep::max_sizes`]), the least
//! recently used dropped first (`sizes.rs`).
//!
//! Invariants of a captured step: its inputs and targets are copied into buffers the graph
//! owns; the gradients and the loss live in buffers the graph writes on each replay; the
//! parameters are updated in place (a replay reads them where the capture found them, which
//! [`TrainStep::run`] checks after every update).
//!
//! Data-parallel: with a [`crate::dist::DdpOptimizer`] of an NCCL group on the step's GPU, the
//! graph also holds the gradients' averaging. The static backward adds each gradient to a
//! [`Gradients`] that DDP observes; once a bucket's gradients are final (after as many
//! additions as the uncaptured first run counted) it is packed on the GPU and all-reduced by
//! NCCL on a side stream forked from the step's stream, so the collectives overlap the rest
//! of the backward inside the graph; the side stream is joined before the capture ends. After
//! each replay the step waits for the GPU within the group's timeout (a rank that died or hung
//! is an error, not a hang), then the optimizer updates from the averaged gradients. The first
//! run, uncaptured, averages after its backward and checks that every rank has every
//! gradient. `RTX_DDP_GRAPH=0` leaves the all-reduces out of the graph: the optimizer then
//! averages after each replay, still on the GPU.
//!
//! What a graph cannot hold is an error from the capturing run, not a silent difference:
//! host reads and uploads, and dropout masks in training mode (the mask's seed is a launch
//! argument, so every replay would repeat it; evaluation mode captures). Index lookups are
//! not checked against their axis inside a replay: the kernels clamp (lookups) or skip
//! (gradient sums) an out-of-range index instead, and the uncaptured first run checks.

use super::sizes::{DEFAULT_MAX_SIZES, PerSize};
use super::{Gradients, StaticForward};
use crate::autograd::Erased;
use crate::error::{Error, Result};
use crate::ir::IrArgs;
use crate::nn::{Module, TensorKind, Visitor};
use crate::optim::Optimizer;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::{Device, cuda};
use rtx_kernels::{Element, Float};
use std::collections::HashMap;

/// The tensors a step reads: copied into the graph's own buffers before each replay.
pub trait StepInputs: Sized {
    /// The device the tensors live on.
    fn device(&self) -> Device;
    /// Dense copies in fresh buffers.
    fn fresh_copy(&self) -> Result<Self>;
    /// Overwrites `dst`'s buffers with these tensors' values.
    fn copy_into(&self, dst: &mut Self) -> Result<()>;
    /// Appends every tensor's sizes to `out`: what a captured step is kept per.
    fn sizes(&self, out: &mut Vec<usize>);
}

impl<S: Shape, E: Element> StepInputs for Tensor<S, E> {
    fn device(&self) -> Device {
        Tensor::device(self)
    }

    fn fresh_copy(&self) -> Result<Self> {
        let storage = self.storage().contiguous(self.layout())?;
        Ok(Tensor::from_storage(storage, self.shape()))
    }

    fn copy_into(&self, dst: &mut Self) -> Result<()> {
        if self.dims() != dst.dims() {
            return Err(Error::BadArgument {
                op: "TrainStep::run",
                msg: format!(
                    "an input of shape {:?} does not fit the captured step's {:?}: a captured \
                     graph keeps the shapes it was captured with",
                    self.dims(),
                    dst.dims()
                ),
            });
        }
        let storage = dst.storage_mut().ok_or_else(|| Error::BadArgument {
            op: "TrainStep::run",
            msg: "the captured step's input buffer is shared; it cannot be refilled".into(),
        })?;
        Ok(self.storage().copy_into(self.layout(), storage)?)
    }

    fn sizes(&self, out: &mut Vec<usize>) {
        out.extend_from_slice(self.dims());
    }
}

impl<A: StepInputs> StepInputs for (A,) {
    fn device(&self) -> Device {
        self.0.device()
    }
    fn fresh_copy(&self) -> Result<Self> {
        Ok((self.0.fresh_copy()?,))
    }
    fn copy_into(&self, dst: &mut Self) -> Result<()> {
        self.0.copy_into(&mut dst.0)
    }
    fn sizes(&self, out: &mut Vec<usize>) {
        self.0.sizes(out)
    }
}

impl<A: StepInputs, B: StepInputs> StepInputs for (A, B) {
    fn device(&self) -> Device {
        self.0.device()
    }
    fn fresh_copy(&self) -> Result<Self> {
        Ok((self.0.fresh_copy()?, self.1.fresh_copy()?))
    }
    fn copy_into(&self, dst: &mut Self) -> Result<()> {
        self.0.copy_into(&mut dst.0)?;
        self.1.copy_into(&mut dst.1)
    }
    fn sizes(&self, out: &mut Vec<usize>) {
        self.0.sizes(out);
        self.1.sizes(out);
    }
}

/// The key of a step's per-size cache: the sizes of every input and target tensor.
pub(super) fn size_key<A: StepInputs, Y: StepInputs>(args: &A, targets: &Y) -> Vec<usize> {
    let mut key = Vec::new();
    args.sizes(&mut key);
    targets.sizes(&mut key);
    key
}

/// What a captured step keeps between runs.
struct Captured<Args, Y, E: Element> {
    graph: cuda::Graph,
    inputs: Args,
    targets: Y,
    loss: Tensor<(), E>,
    /// The loss's seed gradient (1), which the graph reads: kept, or its memory would go back
    /// to the pool and the next uncaptured step (another size's) could overwrite it.
    _seed: Tensor<(), E>,
    /// The gradients the graph writes, by parameter name (an optimizer step gives the
    /// parameters new tape leaves, so they are matched by name on each run).
    grads: HashMap<String, Erased>,
    /// Where each parameter's storage was when the step was captured.
    params: Vec<(String, usize)>,
    /// Whether the graph averages the gradients over a DDP group (see the module doc).
    ddp: bool,
}

/// A training step: forward, loss, static backward and optimizer update in one call, captured
/// as a CUDA graph on a GPU.
///
/// `loss` maps the model's output and the targets to the loss and its static backward (the
/// functions of [`crate::compile::loss`] have this form).
///
/// ```
/// use rtx::compile::TrainStep;
/// use rtx::prelude::*;
///
/// #[model]
/// struct Net {
///     fc: Linear<3, 1>,
/// }
///
/// #[model]
/// impl Net {
///     fn forward(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 1>> {
///         self.fc.forward(x)
///     }
/// }
///
/// let mut net = Net::init(&Device::Cpu, 0);
/// net.track_gradients();
/// let mut opt = Sgd::new(0.01);
/// let x: Tensor<Rank2<4, 3>> = Tensor::ones((Const, Const), Device::Cpu);
/// let y: Tensor<Rank2<4, 1>> = Tensor::zeros((Const, Const), Device::Cpu);
/// // The loss and its static backward: sum((y - t)²), whose gradient is 2 (y - t).
/// let sse = |y: &Tensor<Rank2<4, 1>>, t: &Tensor<Rank2<4, 1>>| {
///     let d = y - t;
///     let loss = (&d * &d).sum_all();
///     (loss, move |g: &Tensor<()>| &d * 2.0 * g)
/// };
/// let mut step = TrainStep::new(sse);
/// let first = step.run(&mut net, &mut opt, (x.clone(),), &y).unwrap().item();
/// for _ in 0..20 {
///     step.run(&mut net, &mut opt, (x.clone(),), &y).unwrap();
/// }
/// assert!(step.run(&mut net, &mut opt, (x,), &y).unwrap().item() < first);
/// ```
pub struct TrainStep<L, Args, Y, E: Element> {
    loss: L,
    /// Per input size: `None` once seen, the graph once captured.
    sizes: PerSize<Option<Captured<Args, Y, E>>>,
}

impl<L, Args, Y, E: Float> TrainStep<L, Args, Y, E> {
    /// How many input sizes a step keeps by default: a training and an evaluation batch
    /// size, each with its smaller last batch.
    pub const DEFAULT_MAX_SIZES: usize = DEFAULT_MAX_SIZES;

    /// A step computing `loss(output, targets)`.
    pub fn new(loss: L) -> Self {
        TrainStep {
            loss,
            sizes: PerSize::new(Self::DEFAULT_MAX_SIZES),
        }
    }

    /// Keeps at most `n` input sizes (at least 1), each with its captured graph on a GPU,
    /// dropping the least recently used when a new size comes.
    pub fn max_sizes(mut self, n: usize) -> Self {
        self.sizes.set_cap(n);
        self
    }

    /// Whether the most recent run's input size runs as a replayed CUDA graph.
    pub fn is_captured(&self) -> bool {
        matches!(self.sizes.last(), Some(Some(_)))
    }

    /// The input sizes the step keeps, least recently used first: each the sizes of every
    /// input and target tensor, in order.
    pub fn sizes(&self) -> Vec<Vec<usize>> {
        self.sizes.keys()
    }

    /// How many captured graphs the step keeps (one per size, on a GPU).
    pub fn captured_graphs(&self) -> usize {
        self.sizes.values().filter(|c| c.is_some()).count()
    }

    /// Runs one step on `args` and `targets`: forward, loss, backward, and `opt`'s update of
    /// `model`. Returns the loss. On a GPU, from a size's third run on, the returned loss is
    /// the graph's own buffer, overwritten by the next run of that size: read it (or copy
    /// it) before then.
    pub fn run<M, O, B>(
        &mut self,
        model: &mut M,
        opt: &mut O,
        args: Args,
        targets: &Y,
    ) -> Result<Tensor<(), E>>
    where
        M: StaticForward<Args> + Module,
        O: Optimizer,
        Args: IrArgs + StepInputs + Clone,
        Y: StepInputs,
        L: Fn(&M::Output, &Y) -> (Tensor<(), E>, B),
        B: FnOnce(&Tensor<(), E>) -> M::Output,
    {
        let key = size_key(&args, targets);
        let Some(slot) = self.sizes.get_mut(&key) else {
            // A new size: run uncaptured, capture on its next run.
            self.sizes.insert(key, None);
            return self.eager(model, opt, args, targets);
        };
        let captured = slot.is_some();
        let Device::Cuda(ordinal) = args.device() else {
            return self.eager(model, opt, args, targets);
        };
        if captured {
            if let Some(Some(c)) = self.sizes.get_mut(&key) {
                args.copy_into(&mut c.inputs)?;
                targets.copy_into(&mut c.targets)?;
            }
        } else {
            let c = self.capture(ordinal, model, opt, args, targets)?;
            if let Some(slot) = self.sizes.get_mut(&key) {
                *slot = Some(c);
            }
        }
        // The entry of `key` is the most recently used.
        let Some(Some(c)) = self.sizes.last() else {
            unreachable!("captured above")
        };
        c.graph.replay()?;
        if c.ddp
            && let Some(sync) = opt.ddp_sync()
        {
            sync.replayed()?;
        }
        let grads = grads_for(model, &c.grads);
        opt.try_step(model, &grads)?;
        check_in_place(model, &c.params)?;
        Ok(c.loss.clone())
    }

    /// The step, uncaptured.
    fn eager<M, O, B>(
        &self,
        model: &mut M,
        opt: &mut O,
        args: Args,
        targets: &Y,
    ) -> Result<Tensor<(), E>>
    where
        M: StaticForward<Args> + Module,
        O: Optimizer,
        Args: IrArgs,
        L: Fn(&M::Output, &Y) -> (Tensor<(), E>, B),
        B: FnOnce(&Tensor<(), E>) -> M::Output,
    {
        let (loss, grads) = {
            let (out, backward) = model.forward_train(args);
            let (loss, loss_backward) = (self.loss)(&out, targets);
            let seed = Tensor::try_full((), E::from_f64(1.0), loss.device())?;
            // Under DDP, count how many additions make each gradient final, for a capture.
            let (mut grads, counter) = match opt.ddp_sync().map(|s| s.counting()) {
                Some((grads, counter)) => (grads, Some(counter)),
                None => (Gradients::new(), None),
            };
            backward(loss_backward(&seed), &mut grads, false);
            if let (Some(counter), Some(sync)) = (counter, opt.ddp_sync()) {
                sync.learn(model, &mut grads, counter);
            }
            (loss, grads)
        };
        opt.try_step(model, &grads)?;
        Ok(loss)
    }

    /// Captures forward, loss and backward on fixed copies of the inputs, and under DDP on an
    /// NCCL group the gradients' averaging.
    fn capture<M, O, B>(
        &self,
        ordinal: usize,
        model: &M,
        opt: &mut O,
        args: Args,
        targets: &Y,
    ) -> Result<Captured<Args, Y, E>>
    where
        M: StaticForward<Args> + Module,
        O: Optimizer,
        Args: IrArgs + StepInputs + Clone,
        Y: StepInputs,
        L: Fn(&M::Output, &Y) -> (Tensor<(), E>, B),
        B: FnOnce(&Tensor<(), E>) -> M::Output,
    {
        let inputs = args.fresh_copy()?;
        let tgt = targets.fresh_copy()?;
        // Made before capturing: filling a tensor uploads host data.
        let seed = Tensor::<(), E>::try_full((), E::from_f64(1.0), Device::Cuda(ordinal))?;
        let trace_inputs = inputs.clone();
        let ddp = opt.ddp_sync().and_then(|s| s.capturing(model, ordinal));
        let averages = ddp.is_some();
        cuda::begin_capture(ordinal)?;
        let traced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (out, backward) = model.forward_train(trace_inputs);
            let (loss, loss_backward) = (self.loss)(&out, &tgt);
            let (mut grads, launcher) = match ddp {
                Some((grads, launcher)) => (grads, Some(launcher)),
                None => (Gradients::new(), None),
            };
            backward(loss_backward(&seed), &mut grads, false);
            let grads = match (launcher, opt.ddp_sync()) {
                (Some(launcher), Some(sync)) => sync.finish_capture(grads, launcher)?,
                _ => grads,
            };
            Ok::<_, Error>((loss, grads))
        }));
        // Always end the capture, so the GPU's stream is usable whatever happened.
        let graph = cuda::end_capture(ordinal);
        let (loss, grads) = traced.map_err(capture_failed)??;
        let graph = graph?;
        Ok(Captured {
            graph,
            inputs,
            targets: tgt,
            loss,
            _seed: seed,
            grads: grads_by_name(model, &grads),
            params: param_places(model),
            ddp: averages,
        })
    }
}

/// A panic raised while the step was being captured (the static forward and backward panic
/// on device errors, such as a dropout mask drawn under capture), as an error with its
/// message. The capture has been ended by then, so the GPU stays usable.
pub(super) fn capture_failed(panic: Box<dyn std::any::Any + Send>) -> Error {
    Error::BadArgument {
        op: "captured step",
        msg: format!(
            "the step failed while it was being captured: {}",
            crate::error::panic_message(&*panic)
        ),
    }
}

/// The gradients of `model`'s parameters in `grads`, by parameter name.
pub(super) fn grads_by_name<M: Module>(model: &M, grads: &Gradients) -> HashMap<String, Erased> {
    struct Collect<'a>(&'a Gradients, HashMap<String, Erased>);
    impl Visitor for Collect<'_> {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
            // The gradient is kept as the tape holds it (its type erased), so nothing here
            // depends on the shape beyond finding the node.
            if kind == TensorKind::Parameter
                && let Some(g) = t.node().and_then(|n| self.0.get_erased(n))
            {
                self.1.insert(name.to_string(), g.clone());
            }
        }
    }
    let mut c = Collect(grads, HashMap::new());
    model.visit("", &mut c);
    c.1
}

/// [`Gradients`] for `model`'s current parameters from gradients kept by name.
pub(super) fn grads_for<M: Module>(model: &M, by_name: &HashMap<String, Erased>) -> Gradients {
    struct Build<'a>(&'a HashMap<String, Erased>, Gradients);
    impl Visitor for Build<'_> {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
            if kind == TensorKind::Parameter
                && let Some(g) = self
                    .0
                    .get(name)
                    .and_then(|g| g.downcast_ref::<Tensor<S, E>>())
            {
                self.1.add(t, g.clone());
            }
        }
    }
    let mut b = Build(by_name, Gradients::new());
    model.visit("", &mut b);
    b.1
}

/// Where each parameter's storage is.
pub(super) fn param_places<M: Module>(model: &M) -> Vec<(String, usize)> {
    struct Places(Vec<(String, usize)>);
    impl Visitor for Places {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
            if kind == TensorKind::Parameter {
                self.0.push((name.to_string(), t.storage_place()));
            }
        }
    }
    let mut p = Places(Vec::new());
    model.visit("", &mut p);
    p.0
}

/// An error when an update moved a parameter: the graph would read the old buffer.
pub(super) fn check_in_place<M: Module>(model: &M, at_capture: &[(String, usize)]) -> Result<()> {
    for ((name, now), (_, then)) in param_places(model).iter().zip(at_capture) {
        if now != then {
            return Err(Error::BadArgument {
                op: "TrainStep::run",
                msg: format!(
                    "the optimizer moved parameter `{name}` to a new buffer, but the captured \
                     graph reads the old one: keep no other handle on the model's parameters \
                     while training with a captured step"
                ),
            });
        }
    }
    Ok(())
}
