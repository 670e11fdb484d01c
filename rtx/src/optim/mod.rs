//! Optimizers, learning-rate schedules and gradient clipping, written once against
//! [`Module`]: a step visits the model's parameters by name, reads each one's gradient from
//! [`Gradients`], and overwrites the parameter with its update (then a fresh leaf that records
//! gradients again). State (momentum, Adam's moments, step counts) is kept per parameter name
//! and exports as [`OptimState`].
//!
//! Updates follow PyTorch's single-tensor implementations formula for formula and rounding for
//! rounding, through fused CPU kernels (`rtx_backends::cpu::optim`): one pass over the
//! parameter, gradient and state per step, in place. On a GPU the updates of a step are queued
//! and launched together at its end, one multi-tensor launch per element type (`multi.rs`),
//! with the same formulas and roundings, also in place. A parameter whose storage is shared (a
//! clone, a view, or a graph still alive from the forward pass) is copied first, so no other
//! tensor ever sees its values change. On a GPU a step is all or nothing: an error part-way
//! (out of memory) leaves every parameter and all state as before the step.

mod adam;
mod adamw;
mod clip;
mod clip_device;
mod multi;
mod schedule;
mod sgd;
mod state;

pub use adam::Adam;
pub use adamw::AdamW;
pub use clip::{clip_grad_norm, try_clip_grad_norm};
pub use schedule::{Constant, CosineAnnealing, LinearWarmup, Schedule, StepLR};
pub use sgd::Sgd;
pub use state::{OptimState, StateTensor};

use crate::autograd::Gradients;
use crate::error::{Error, Result, bail, ok};
use crate::nn::{Module, TensorKind, Visitor, VisitorMut};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Float};
use std::any::Any;
use std::sync::Arc;

/// An optimizer: updates a model's parameters from the gradients of one backward pass.
/// Parameters without a gradient and buffers are left alone.
pub trait Optimizer {
    /// One update of every trainable parameter of `model` that has a gradient in `grads`.
    /// On an error (state that does not fit a parameter, invalid hyper-parameters, out of
    /// memory) on a GPU, no parameter and no state has changed; on the CPU the parameters
    /// visited before it are already updated.
    fn try_step(&mut self, model: &mut impl Module, grads: &Gradients) -> Result<()>;

    /// [`Optimizer::try_step`], panicking on error.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut w: Tensor<Rank1<2>> = Tensor::from_array([1.0, -2.0], Device::Cpu).requires_grad();
    /// let grads = (&w * &w).sum_all().backward(); // gradient 2w
    /// Sgd::new(0.25).step(&mut w, &grads);
    /// assert_eq!(w.to_vec(), vec![0.5, -1.0]);
    /// ```
    ///
    /// # Panics
    /// When [`Optimizer::try_step`] fails.
    #[track_caller]
    fn step(&mut self, model: &mut impl Module, grads: &Gradients) {
        ok(self.try_step(model, grads))
    }

    /// The learning rate of the next step.
    fn lr(&self) -> f64;

    /// Sets the learning rate (a schedule calls this between steps).
    fn set_lr(&mut self, lr: f64);

    /// The state, exported (see [`OptimState`] for names).
    fn state_dict(&self) -> OptimState;

    /// Replaces the state (and `lr`, when present) with an exported one. Tensors are checked
    /// against their parameters at the next step.
    fn try_load_state(&mut self, state: OptimState) -> Result<()>;

    /// [`Optimizer::try_load_state`], panicking on error.
    ///
    /// # Panics
    /// When a state tensor's element type is not a float type or its values do not fill its
    /// dims.
    #[track_caller]
    fn load_state(&mut self, state: OptimState) {
        ok(self.try_load_state(state))
    }

    /// DDP's hooks for a compiled step that averages gradients inside its CUDA graph:
    /// `Some` for [`crate::dist::DdpOptimizer`] only. Not for direct use.
    #[doc(hidden)]
    fn ddp_sync(&mut self) -> Option<&mut crate::dist::DdpSync> {
        None
    }
}

/// One optimizer's update of one parameter, given its gradient: the parameter is overwritten
/// with its new value (in place when nothing else shares its storage, see [`owned_storage`];
/// on a GPU, out of place into fresh storage, which leaves the old storage to whoever holds it).
pub(crate) trait ParamUpdate {
    fn update<S: Shape, E: Float>(
        &mut self,
        name: &str,
        param: &mut Tensor<S, E>,
        grad: &Tensor<S, E>,
    ) -> Result<()>;
}

/// A parameter as an update sees it, without its shape type (so that an update's body is
/// compiled once per element type, not once per parameter shape): its storage handle and its
/// layout, which [`owned_storage`] may replace by a dense copy of the same dims.
pub(crate) struct Param<'a, E> {
    pub storage: &'a mut Arc<Storage<E>>,
    pub layout: &'a mut Layout,
}

/// A parameter and its gradient with the element type erased as well: what an update's shell
/// hands to the update's body, a function that is not generic and runs the body for the
/// concrete float type ([`AnyParam::typed`]). The body is then compiled once, in rtx, and a
/// user's crate compiles only the shell.
pub(crate) struct AnyParam<'a> {
    dtype: DType,
    storage: &'a mut dyn Any,
    layout: &'a mut Layout,
    grad: (&'a dyn Any, &'a Layout),
}

impl<'a> AnyParam<'a> {
    /// The parameter `p` with its gradient `g`.
    pub fn of<S: Shape, E: Float>(p: &'a mut Tensor<S, E>, g: &'a Tensor<S, E>) -> Self {
        let (storage, layout) = p.parts_mut();
        AnyParam {
            dtype: E::DTYPE,
            storage,
            layout,
            grad: (g.storage(), g.layout()),
        }
    }

    /// The parameter's element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The parameter and its gradient as elements of `F`, which must be the parameter's type.
    #[allow(clippy::type_complexity)]
    pub fn typed<F: Float>(self) -> (Param<'a, F>, (&'a Storage<F>, &'a Layout)) {
        let storage = self.storage.downcast_mut().expect("element type");
        let grad = self.grad.0.downcast_ref().expect("element type");
        let param = Param {
            storage,
            layout: self.layout,
        };
        (param, (grad, self.grad.1))
    }
}

/// The storage behind `storage` seen through `layout`, to be overwritten by an update: its own
/// storage when no view, clone or recorded graph shares it and `layout` is dense over all of
/// it, else a fresh dense copy that replaces it first (`layout` becoming dense; whoever shares
/// the old storage keeps the old values, so an update never changes a tensor someone else
/// holds).
pub(crate) fn owned_storage<'a, E: Float>(
    storage: &'a mut Arc<Storage<E>>,
    layout: &mut Layout,
) -> Result<&'a mut Storage<E>> {
    let whole = layout.contiguous_range() == Some(0..storage.len());
    if !whole || Arc::get_mut(storage).is_none() {
        *storage = Arc::new(storage.contiguous(layout)?);
        *layout = Layout::contiguous(layout.dims());
    }
    match Arc::get_mut(storage) {
        Some(s) => Ok(s),
        None => bail!("optimizer", "a fresh copy of a parameter is shared"),
    }
}

/// Runs `u` on every parameter of `model` that has a gradient, under `no_grad`, and makes each
/// updated parameter a fresh leaf (at once when `renew` is set, else in [`finish_step`]);
/// stops at the first error. CPU updates happen here, one parameter after another; GPU updates
/// are only queued, for [`finish_step`] to launch.
pub(crate) fn apply<M: Module, U: ParamUpdate>(
    model: &mut M,
    grads: &Gradients,
    u: &mut U,
    renew: bool,
) -> Result<()> {
    struct Apply<'a, U> {
        u: &'a mut U,
        grads: &'a Gradients,
        renew: bool,
        err: Option<Error>,
    }
    impl<U: ParamUpdate> VisitorMut for Apply<'_, U> {
        fn visit_mut<S: Shape, E: Float>(
            &mut self,
            name: &str,
            t: &mut Tensor<S, E>,
            kind: TensorKind,
        ) {
            if kind != TensorKind::Parameter || self.err.is_some() {
                return;
            }
            // Looked up by the tensor's tape node, so before the tensor gets a new one.
            let Some(g) = self.grads.get(t) else {
                return;
            };
            match crate::no_grad(|| self.u.update(name, t, &g)) {
                Ok(()) if self.renew => *t = t.detach().requires_grad(),
                Ok(()) => {}
                Err(e) => self.err = Some(e),
            }
        }
    }
    let mut a = Apply {
        u,
        grads,
        renew,
        err: None,
    };
    model.visit_mut("", &mut a);
    a.err.map_or(Ok(()), Err)
}

/// Whether a parameter of `model` with a gradient in `grads` lives on a GPU.
pub(crate) fn on_gpu<M: Module>(model: &M, grads: &Gradients) -> bool {
    struct Find<'a> {
        grads: &'a Gradients,
        gpu: bool,
    }
    impl Visitor for Find<'_> {
        fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, kind: TensorKind) {
            if kind == TensorKind::Parameter && !self.gpu && t.device() != Device::Cpu {
                self.gpu = self.grads.get(t).is_some();
            }
        }
    }
    let mut f = Find { grads, gpu: false };
    model.visit("", &mut f);
    f.gpu
}

/// Ends a step after [`apply`]: launches the queued GPU updates (one launch per group). On a
/// GPU a step is all or nothing: values change only in those launches, so a step that failed
/// before them (out of memory while copying a shared parameter, say) launches nothing and puts
/// the step counts back, leaving parameters and state as they were. A model with parameters of
/// several element types launches one group per type; if a later group's launch fails, the
/// earlier groups' updates stay applied.
/// The parameters keep their tape nodes until the launch succeeded (`apply` ran with `renew`
/// off), so that the same gradients still find them when the step is tried again.
pub(crate) fn finish_step<M: Module>(
    (model, grads): (&mut M, &Gradients),
    on_gpu: bool,
    visited: Result<()>,
    (mark, store): (state::Mark, &mut state::Store),
    queue: &mut multi::GpuSteps,
) -> Result<()> {
    let result = match visited {
        Ok(()) => queue.flush(),
        Err(e) => {
            queue.discard();
            Err(e)
        }
    };
    match (&result, on_gpu) {
        (Err(_), true) => store.rollback(mark),
        (Ok(()), true) => renew_leaves(model, grads),
        _ => {}
    }
    result
}

/// Makes every parameter of `model` that has a gradient in `grads` a fresh leaf.
fn renew_leaves<M: Module>(model: &mut M, grads: &Gradients) {
    struct Renew<'a>(&'a Gradients);
    impl VisitorMut for Renew<'_> {
        fn visit_mut<S: Shape, E: Float>(&mut self, _: &str, t: &mut Tensor<S, E>, k: TensorKind) {
            if k == TensorKind::Parameter && self.0.get(t).is_some() {
                *t = t.detach().requires_grad();
            }
        }
    }
    model.visit_mut("", &mut Renew(grads));
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    /// The address of a CPU tensor's storage.
    fn addr(t: &Tensor<Rank1<3>>) -> *const f32 {
        t.storage()
            .as_cpu_slice()
            .map_or(std::ptr::null(), |s| s.as_ptr())
    }

    #[test]
    fn shared_parameters_are_copied_and_owned_ones_updated_in_place() {
        let mut w: Tensor<Rank1<3>> =
            Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu).requires_grad();
        let before = w.detach();
        let grads = (&w * &w).sum_all().backward();
        Sgd::new(0.25).step(&mut w, &grads);
        // `before` shares the old storage, so the update went to a copy.
        assert_eq!(before.to_vec(), vec![1.0, 2.0, 3.0]);
        assert_eq!(w.to_vec(), vec![0.5, 1.0, 1.5]);
        assert!(!w.shares_storage_with(&before));
        drop(before);
        // Nothing shares it now (the graph died with its loss): written where it lies.
        let at = addr(&w);
        let grads = (&w * &w).sum_all().backward();
        let mut adam = Adam::new(0.1);
        adam.step(&mut w, &grads);
        assert_eq!(addr(&w), at);
        assert!(w.tracks_grad());
        // A loss kept alive holds the graph, which holds the parameter: copied again.
        let loss = (&w * &w).sum_all();
        let grads = loss.backward();
        let kept = w.to_vec();
        adam.step(&mut w, &grads);
        assert_ne!(addr(&w), at);
        assert_ne!(w.to_vec(), kept);
        let want: f32 = kept.iter().map(|x| x * x).sum();
        assert!((loss.item() - want).abs() <= 1e-6 * want);
    }
}
