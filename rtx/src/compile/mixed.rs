//! Mixed precision for a training step, as PyTorch's autocast with f32 master weights does:
//! the forward and backward run on a low-precision copy of the model (bf16 GEMMs and
//! activations), while the optimizer keeps f32 weights and f32 state.
//!
//! Each step casts the f32 master weights into the working (bf16) model, runs the compiled
//! forward, the loss and the static backward there, casts the gradients to f32 and updates
//! the master weights. Each cast is one launch per pair of element types, whatever the
//! number of tensors (`mixed_cast.rs`): the weights are written into the working model's
//! own buffers, the gradients into f32 buffers. On a GPU the weights' cast, forward, loss and
//! backward are captured as one CUDA graph on the second run, as
//! [`TrainStep`](super::TrainStep) does; the gradients' cast follows each replay as one
//! launch (its table of buffers names the graph's gradient buffers, which exist only once
//! captured, and nothing may be uploaded while capturing), into buffers kept between steps.
//!
//! In f16, whose range is narrow, the loss is scaled before the backward and the gradients
//! unscaled after, with a dynamic scale as PyTorch's `GradScaler` keeps it: it starts at
//! 2^16, halves (and the step is skipped) when a gradient is not finite, and doubles after
//! 2000 steps without one. The check reads one number back per step. bf16 has f32's range and
//! needs no scale.

use super::mixed_cast::{Caches, GradCast, Keep, copy_weights};
use super::sizes::{DEFAULT_MAX_SIZES, PerSize};
use super::step::{StepInputs, check_in_place, grads_by_name, param_places, size_key};
use super::{Gradients, StaticForward};
use crate::autograd::Erased;
use crate::error::Result;
use crate::ir::IrArgs;
use crate::nn::{Module, TensorKind, Visitor};
use crate::optim::Optimizer;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::{Device, cuda};
use rtx_kernels::Float;
use std::collections::HashMap;
use std::marker::PhantomData;

/// The dynamic loss scale of an f16 step.
#[derive(Clone, Copy, Debug)]
struct LossScale {
    scale: f64,
    good_steps: u32,
}

impl LossScale {
    const GROWTH_INTERVAL: u32 = 2000;

    /// After a step: halves on a non-finite gradient, doubles after enough finite ones.
    /// Returns whether the step's gradients may be used.
    fn update(&mut self, finite: bool) -> bool {
        if finite {
            self.good_steps += 1;
            if self.good_steps == Self::GROWTH_INTERVAL {
                self.scale *= 2.0;
                self.good_steps = 0;
            }
        } else {
            self.scale *= 0.5;
            self.good_steps = 0;
        }
        finite
    }
}

/// What a captured mixed step keeps between runs. The graph comes first, so it is dropped
/// before the buffers it reads and writes.
struct Captured<Args, Y, W: Float> {
    graph: cuda::Graph,
    inputs: Args,
    targets: Y,
    /// The loss's seed gradient (the loss scale), refilled before each replay.
    seed: Tensor<(), W>,
    /// `1 / scale` in f32, refilled before each replay.
    unscale: Tensor<(), f32>,
    loss: Tensor<(), W>,
    /// The cast of the gradients the graph writes into `grads`, launched after each replay.
    grad_cast: GradCast<W>,
    /// The f32 gradients, by parameter name.
    grads: HashMap<String, Erased>,
    params: Vec<(String, usize)>,
    /// The table of the captured weights' cast, which the graph reads.
    _copy_tables: Caches,
    /// The buffers the captured weights' cast reads and writes.
    _copy_buffers: Keep,
}

/// A training step in mixed precision: the model runs in `W` (bf16), the optimizer updates
/// the f32 master weights. Arguments are given in the working type.
///
/// ```
/// use rtx::compile::MixedStep;
/// use rtx::prelude::*;
///
/// #[model]
/// struct Net<E: Float> {
///     fc: Linear<3, 2, E>,
/// }
///
/// #[model]
/// impl<E: Float> Net<E> {
///     fn forward(&self, x: &Tensor<Rank2<4, 3>, E>) -> Tensor<Rank2<4, 2>, E> {
///         self.fc.forward(x)
///     }
/// }
///
/// let mut master = Net::<f32>::init(&Device::Cpu, 0);
/// master.track_gradients();
/// let mut working = Net::<bf16>::init(&Device::Cpu, 0);
/// working.track_gradients();
/// let mut opt = Adam::new(1e-2);
/// let x: Tensor<Rank2<4, 3>, bf16> = Tensor::ones((Const, Const), Device::Cpu);
/// let y: Tensor<(Const<4>,), i64> = Tensor::from_array([0, 1, 0, 1], Device::Cpu);
/// let mut step = MixedStep::new(rtx::compile::loss::cross_entropy);
/// for _ in 0..3 {
///     step.run(&mut master, &mut working, &mut opt, (x.clone(),), &y).unwrap();
/// }
/// assert_eq!(master.fc.weight.dtype(), DType::F32);
/// ```
pub struct MixedStep<L, Args, Y, W: Float> {
    loss: L,
    /// Per input size: `None` once seen, the graph once captured (as `TrainStep` keeps it).
    sizes: PerSize<Option<Captured<Args, Y, W>>>,
    scaler: Option<LossScale>,
    skipped: u64,
    /// The tables of the uncaptured weights' cast.
    tables: Caches,
    _w: PhantomData<W>,
}

impl<L, Args, Y, W: Float> MixedStep<L, Args, Y, W> {
    /// A step computing `loss(output, targets)` in the working type.
    pub fn new(loss: L) -> Self {
        let scaler = (W::DTYPE == rtx_kernels::DType::F16).then_some(LossScale {
            scale: 65536.0,
            good_steps: 0,
        });
        MixedStep {
            loss,
            sizes: PerSize::new(DEFAULT_MAX_SIZES),
            scaler,
            skipped: 0,
            tables: Caches::new(),
            _w: PhantomData,
        }
    }

    /// The current loss scale (1 outside f16).
    pub fn loss_scale(&self) -> f64 {
        self.scaler.map_or(1.0, |s| s.scale)
    }

    /// The steps skipped because a gradient was not finite (f16 only).
    pub fn skipped_steps(&self) -> u64 {
        self.skipped
    }

    /// Updates the master weights unless the loss scale rejects the gradients.
    fn update<M: Module, O: Optimizer>(
        &mut self,
        master: &mut M,
        opt: &mut O,
        grads: &Gradients,
    ) -> Result<()> {
        if let Some(s) = &mut self.scaler {
            let finite = all_finite(master, grads)?;
            if !s.update(finite) {
                self.skipped += 1;
                return Ok(());
            }
        }
        opt.try_step(master, grads)
    }

    /// Keeps at most `n` input sizes (at least 1), as [`TrainStep::max_sizes`](super::TrainStep::max_sizes).
    pub fn max_sizes(mut self, n: usize) -> Self {
        self.sizes.set_cap(n);
        self
    }

    /// Whether the most recent run's input size runs as a replayed CUDA graph.
    pub fn is_captured(&self) -> bool {
        matches!(self.sizes.last(), Some(Some(_)))
    }

    /// The input sizes the step keeps, least recently used first.
    pub fn sizes(&self) -> Vec<Vec<usize>> {
        self.sizes.keys()
    }

    /// One step: `working` takes `master`'s weights (cast), runs forward, loss and backward on
    /// `args` and `targets`, and `opt` updates `master` with the gradients cast to f32.
    /// Returns the loss (in the working type; on a GPU from a size's third run on, the
    /// graph's own buffer, overwritten by the next run of that size).
    pub fn run<M, N, O, B>(
        &mut self,
        master: &mut M,
        working: &mut N,
        opt: &mut O,
        args: Args,
        targets: &Y,
    ) -> Result<Tensor<(), W>>
    where
        M: Module,
        N: StaticForward<Args> + Module,
        O: Optimizer,
        Args: IrArgs + StepInputs + Clone,
        Y: StepInputs,
        L: Fn(&N::Output, &Y) -> (Tensor<(), W>, B),
        B: FnOnce(&Tensor<(), W>) -> N::Output,
    {
        let key = size_key(&args, targets);
        let Some(slot) = self.sizes.get_mut(&key) else {
            // A new size: run uncaptured, capture on its next run.
            self.sizes.insert(key, None);
            return self.eager(master, working, opt, args, targets);
        };
        let captured = slot.is_some();
        let Device::Cuda(ordinal) = args.device() else {
            return self.eager(master, working, opt, args, targets);
        };
        if captured {
            if let Some(Some(c)) = self.sizes.get_mut(&key) {
                args.copy_into(&mut c.inputs)?;
                targets.copy_into(&mut c.targets)?;
            }
        } else {
            let c = self.capture(ordinal, master, working, args, targets)?;
            if let Some(slot) = self.sizes.get_mut(&key) {
                *slot = Some(c);
            }
        }
        let scale = self.loss_scale();
        let scaled = self.scaler.is_some();
        // The entry of `key` is the most recently used.
        let Some(Some(c)) = self.sizes.get_mut(&key) else {
            unreachable!("captured above")
        };
        if scaled {
            fill(&mut c.seed, scale)?;
            fill(&mut c.unscale, 1.0 / scale)?;
        }
        c.graph.replay()?;
        c.grad_cast.launch(scaled.then_some(&c.unscale))?;
        let grads = super::step::grads_for(master, &c.grads);
        let (loss, params) = (c.loss.clone(), c.params.clone());
        self.update(master, opt, &grads)?;
        check_in_place(master, &params)?;
        Ok(loss)
    }

    /// The weights' cast (with `tables`), forward, loss and backward: the part a graph
    /// captures. Returns the loss, the working gradients by name, and the GPU buffers the
    /// cast read and wrote.
    #[allow(clippy::type_complexity)]
    fn trace<M, N, B>(
        &self,
        master: &M,
        working: &mut N,
        args: Args,
        targets: &Y,
        seed: &Tensor<(), W>,
        tables: &mut Caches,
    ) -> Result<(Tensor<(), W>, HashMap<String, Erased>, Keep)>
    where
        M: Module,
        N: StaticForward<Args> + Module,
        Args: IrArgs,
        L: Fn(&N::Output, &Y) -> (Tensor<(), W>, B),
        B: FnOnce(&Tensor<(), W>) -> N::Output,
    {
        let keep = copy_weights(master, working, tables)?;
        let (out, backward) = working.forward_train(args);
        let (loss, loss_backward) = (self.loss)(&out, targets);
        let mut grads = Gradients::new();
        backward(loss_backward(seed), &mut grads, false);
        Ok((loss, grads_by_name(working, &grads), keep))
    }

    /// The step, uncaptured.
    fn eager<M, N, O, B>(
        &mut self,
        master: &mut M,
        working: &mut N,
        opt: &mut O,
        args: Args,
        targets: &Y,
    ) -> Result<Tensor<(), W>>
    where
        M: Module,
        N: StaticForward<Args> + Module,
        O: Optimizer,
        Args: IrArgs + StepInputs,
        L: Fn(&N::Output, &Y) -> (Tensor<(), W>, B),
        B: FnOnce(&Tensor<(), W>) -> N::Output,
    {
        let scale = self.loss_scale();
        let device = args.device();
        let seed = Tensor::try_full((), W::from_f64(scale), device)?;
        let unscale = match self.scaler {
            Some(_) => Some(Tensor::try_full((), (1.0 / scale) as f32, device)?),
            None => None,
        };
        let mut tables = std::mem::take(&mut self.tables);
        let traced = self.trace(master, working, args, targets, &seed, &mut tables);
        self.tables = tables;
        let (loss, by_name, _) = traced?;
        let mut cast = GradCast::<W>::new(master, &by_name)?;
        cast.launch(unscale.as_ref())?;
        let grads = super::step::grads_for(master, &cast.into_grads());
        self.update(master, opt, &grads)?;
        Ok(loss)
    }

    /// Captures the traced part on fixed copies of the inputs.
    fn capture<M, N, B>(
        &self,
        ordinal: usize,
        master: &M,
        working: &mut N,
        args: Args,
        targets: &Y,
    ) -> Result<Captured<Args, Y, W>>
    where
        M: Module,
        N: StaticForward<Args> + Module,
        Args: IrArgs + StepInputs + Clone,
        Y: StepInputs,
        L: Fn(&N::Output, &Y) -> (Tensor<(), W>, B),
        B: FnOnce(&Tensor<(), W>) -> N::Output,
    {
        let inputs = args.fresh_copy()?;
        let tgt = targets.fresh_copy()?;
        let dev = Device::Cuda(ordinal);
        let scale = self.loss_scale();
        let seed = Tensor::<(), W>::try_full((), W::from_f64(scale), dev)?;
        let unscale = Tensor::<(), f32>::try_full((), (1.0 / scale) as f32, dev)?;
        // The weights' cast once before capturing: it uploads the launch's table, which the
        // captured cast (over the same buffers) then finds cached, as nothing may be
        // uploaded while capturing.
        let mut tables = Caches::new();
        copy_weights(master, working, &mut tables)?;
        let trace_inputs = inputs.clone();
        cuda::begin_capture(ordinal)?;
        let traced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.trace(master, working, trace_inputs, &tgt, &seed, &mut tables)
        }));
        let graph = cuda::end_capture(ordinal);
        let (loss, working_grads, keep) = traced.map_err(super::step::capture_failed)??;
        let graph = graph?;
        let grad_cast = GradCast::<W>::new(master, &working_grads)?;
        let grads = grad_cast.shared()?;
        Ok(Captured {
            graph,
            inputs,
            targets: tgt,
            seed,
            unscale,
            loss,
            grad_cast,
            grads,
            params: param_places(master),
            _copy_tables: tables,
            _copy_buffers: keep,
        })
    }
}

/// Whether every gradient in `grads` of `model`'s parameters is finite (one number read
/// back: the sum of all of them is finite exactly when each is).
fn all_finite<M: Module>(model: &M, grads: &Gradients) -> Result<bool> {
    struct Sum<'a>(&'a Gradients, Option<Tensor<(), f64>>);
    impl Visitor for Sum<'_> {
        fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, kind: TensorKind) {
            if kind == TensorKind::Parameter
                && let Some(g) = self.0.get(t)
            {
                let part = g.cast::<f64>().sum_all();
                self.1 = Some(match self.1.take() {
                    None => part,
                    Some(total) => total.same::<rtx_kernels::op::markers::Add>(&part),
                });
            }
        }
    }
    let mut s = Sum(grads, None);
    crate::no_grad(|| model.visit("", &mut s));
    Ok(s.1.map_or(0.0, |t| t.item()).is_finite())
}

/// Overwrites a one-element tensor with `v` (an upload outside any capture).
fn fill<E: Float>(t: &mut Tensor<(), E>, v: f64) -> Result<()> {
    let src = Tensor::try_full((), E::from_f64(v), t.device())?;
    src.copy_into(t)
}
