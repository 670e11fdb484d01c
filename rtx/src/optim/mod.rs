//! Optimizers, learning-rate schedules and gradient clipping, written once against
//! [`Module`]: a step visits the model's parameters by name, reads each one's gradient from
//! [`Gradients`], and replaces the parameter with its update (a fresh leaf that records
//! gradients again). State (momentum, Adam's moments, step counts) is kept per parameter name
//! and exports as [`OptimState`].
//!
//! Updates follow PyTorch's single-tensor implementations formula for formula and rounding for
//! rounding, through fused CPU kernels (`rtx_backends::cpu::optim`): one pass over the
//! parameter, gradient and state per step.

mod adam;
mod adamw;
mod clip;
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
use crate::error::{Error, Result, ok};
use crate::nn::{Module, TensorKind, VisitorMut};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Float;

/// An optimizer: updates a model's parameters from the gradients of one backward pass.
/// Parameters without a gradient and buffers are left alone.
pub trait Optimizer {
    /// One update of every trainable parameter of `model` that has a gradient in `grads`.
    /// On an error (state that does not fit a parameter, invalid hyper-parameters) the
    /// parameters visited before it are already updated.
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
}

/// One optimizer's update of one parameter, given its gradient; returns the new value.
pub(crate) trait ParamUpdate {
    fn update<S: Shape, E: Float>(
        &mut self,
        name: &str,
        param: &Tensor<S, E>,
        grad: &Tensor<S, E>,
    ) -> Result<Tensor<S, E>>;
}

/// Runs `u` on every parameter of `model` that has a gradient, under `no_grad`, and puts each
/// result back as a leaf; stops at the first error.
pub(crate) fn apply<M: Module, U: ParamUpdate>(
    model: &mut M,
    grads: &Gradients,
    u: &mut U,
) -> Result<()> {
    struct Apply<'a, U> {
        u: &'a mut U,
        grads: &'a Gradients,
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
            // Looked up by the tensor's tape node, so before the tensor is replaced.
            let Some(g) = self.grads.get(t) else {
                return;
            };
            match crate::no_grad(|| self.u.update(name, t, &g)) {
                Ok(new) => *t = new.requires_grad(),
                Err(e) => self.err = Some(e),
            }
        }
    }
    let mut a = Apply {
        u,
        grads,
        err: None,
    };
    model.visit_mut("", &mut a);
    a.err.map_or(Ok(()), Err)
}
