//! Optimizers, learning-rate schedules and gradient clipping, written once against
//! [`Module`]: a step visits the model's parameters by name, reads each one's gradient from
//! [`Gradients`], and overwrites the parameter with its update (then a fresh leaf that records
//! gradients again). State (momentum, Adam's moments, step counts) is kept per parameter name
//! and exports as [`OptimState`].
//!
//! Updates follow PyTorch's single-tensor implementations formula for formula and rounding for
//! rounding, through fused CPU kernels (`rtx_backends::cpu::optim`): one pass over the
//! parameter, gradient and state per step, in place. A parameter whose storage is shared (a
//! clone, a view, or a graph still alive from the forward pass) is copied first, so no other
//! tensor ever sees its values change. On a GPU a step is all or nothing: an error part-way
//! (out of memory) leaves every parameter and all state as before the step.

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
use crate::error::{Error, Result, bail, ok};
use crate::nn::{Module, TensorKind, Visitor, VisitorMut};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::{Device, Storage};
use rtx_kernels::Float;
use std::any::Any;
use std::collections::HashMap;

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

    /// The optimizer's state, which a failed step on a GPU puts back as it was.
    fn store(&mut self) -> &mut state::Store;
}

/// The storage of `t`, to be overwritten by an update: its own storage when no view, clone or
/// recorded graph shares it, else a fresh dense copy that replaces it first (whoever shares the
/// old storage keeps the old values, so an update never changes a tensor someone else holds).
pub(crate) fn owned_storage<S: Shape, E: Float>(t: &mut Tensor<S, E>) -> Result<&mut Storage<E>> {
    if t.storage_mut().is_none() {
        let copy = t.storage().contiguous(t.layout())?;
        let node = t.node().cloned();
        *t = Tensor::from_storage(copy, t.shape()).with_node(node);
    }
    match t.storage_mut() {
        Some(s) => Ok(s),
        None => bail!("optimizer", "a fresh copy of a parameter is shared"),
    }
}

/// Runs `u` on every parameter of `model` that has a gradient, under `no_grad`, and makes each
/// updated parameter a fresh leaf; stops at the first error.
///
/// On a GPU the step is all or nothing: every update is computed out of place first (the
/// backends' GPU updates write fresh storage anyway) while the model keeps its parameters and
/// a snapshot keeps the state; only when all have succeeded do the new parameters replace the
/// old ones. An error part-way (out of memory, most likely) leaves parameters and state as
/// they were, so training can go on after memory is freed. The price is that the old
/// parameters and state stay alive until the end of the step. On the CPU, where updates run in
/// place and an allocation failure aborts the process, parameters are updated one by one.
pub(crate) fn apply<M: Module, U: ParamUpdate>(
    model: &mut M,
    grads: &Gradients,
    u: &mut U,
) -> Result<()> {
    if on_gpu(model, grads) {
        return apply_all_or_nothing(model, grads, u);
    }
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
            // Looked up by the tensor's tape node, so before the tensor gets a new one.
            let Some(g) = self.grads.get(t) else {
                return;
            };
            match crate::no_grad(|| self.u.update(name, t, &g)) {
                Ok(()) => *t = t.detach().requires_grad(),
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

/// Adam's per-parameter update, for tests that drive [`apply_all_or_nothing`] directly.
#[cfg(test)]
pub(crate) fn adam_step_for_tests(adam: &mut Adam) -> impl ParamUpdate + '_ {
    adam::AdamStep(adam)
}

/// Whether a parameter of `model` with a gradient in `grads` lives on a GPU.
fn on_gpu<M: Module>(model: &M, grads: &Gradients) -> bool {
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

/// [`apply`] as one transaction: updates computed on handles to the parameters, the state
/// snapshotted, and the new parameters put in place only when every update succeeded.
fn apply_all_or_nothing<M: Module, U: ParamUpdate>(
    model: &mut M,
    grads: &Gradients,
    u: &mut U,
) -> Result<()> {
    /// The first pass: each parameter's new value, by name.
    struct Compute<'a, U> {
        u: &'a mut U,
        grads: &'a Gradients,
        staged: HashMap<String, Box<dyn Any>>,
        err: Option<Error>,
    }
    impl<U: ParamUpdate> VisitorMut for Compute<'_, U> {
        fn visit_mut<S: Shape, E: Float>(
            &mut self,
            name: &str,
            t: &mut Tensor<S, E>,
            kind: TensorKind,
        ) {
            if kind != TensorKind::Parameter || self.err.is_some() {
                return;
            }
            let Some(g) = self.grads.get(t) else {
                return;
            };
            // A handle: the update replaces it with fresh storage and leaves `t` alone.
            let mut p = t.clone();
            match crate::no_grad(|| self.u.update(name, &mut p, &g)) {
                Ok(()) => {
                    let fresh: Tensor<S, E> = p.detach().requires_grad();
                    self.staged.insert(name.to_string(), Box::new(fresh));
                }
                Err(e) => self.err = Some(e),
            }
        }
    }
    /// The second pass: the new values replace the parameters.
    struct Commit(HashMap<String, Box<dyn Any>>);
    impl VisitorMut for Commit {
        fn visit_mut<S: Shape, E: Float>(
            &mut self,
            name: &str,
            t: &mut Tensor<S, E>,
            kind: TensorKind,
        ) {
            if kind != TensorKind::Parameter {
                return;
            }
            if let Some(new) = self.0.remove(name)
                && let Ok(new) = new.downcast::<Tensor<S, E>>()
            {
                *t = *new;
            }
        }
    }
    let snapshot = u.store().clone();
    let mut c = Compute {
        u,
        grads,
        staged: HashMap::new(),
        err: None,
    };
    model.visit_mut("", &mut c);
    if let Some(e) = c.err {
        *c.u.store() = snapshot;
        return Err(e);
    }
    drop(snapshot);
    model.visit_mut("", &mut Commit(c.staged));
    Ok(())
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

    /// The all-or-nothing step (what GPUs run) on the CPU, where it runs the same code: a step
    /// that fails at the second parameter leaves the first and all state untouched, and a
    /// later step gives what the per-parameter step gives.
    #[test]
    fn a_failed_all_or_nothing_step_changes_nothing() {
        use super::state::{OptimState, StateTensor};
        use crate::nn::Linear;
        let x: Tensor<Rank2<3, 2>> =
            Tensor::from_array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], Device::Cpu);
        let loss = |m: &Linear<2, 2>| m.forward(&x).sum_all();
        let mut fc = Linear::<2, 2>::new(Device::Cpu, 3);
        let mut reference = Linear::<2, 2>::new(Device::Cpu, 3);
        fc.track_gradients();
        reference.track_gradients();
        let mut adam = Adam::new(0.1);
        let mut adam_ref = Adam::new(0.1);
        // One good step each way first, so there is state to keep.
        let g = loss(&fc).backward();
        super::apply_all_or_nothing(&mut fc, &g, &mut super::adam_step_for_tests(&mut adam))
            .unwrap();
        let g = loss(&reference).backward();
        adam_ref.step(&mut reference, &g);
        assert_eq!(fc.weight.to_vec(), reference.weight.to_vec());
        assert_eq!(adam.state_dict(), adam_ref.state_dict());
        assert_eq!(adam.state_dict().tensors.len(), 4);
        // The bias's exp_avg now has the wrong dims: the step fails at the bias, after the
        // weight's update was computed.
        let mut state: OptimState = adam.state_dict();
        state.tensors.insert(
            "state.bias.exp_avg".into(),
            StateTensor {
                dtype: DType::F32,
                dims: vec![3],
                values: vec![0.0; 3],
            },
        );
        let bad = state.clone();
        adam.load_state(state);
        let before = (fc.weight.to_vec(), fc.bias.as_ref().map(|b| b.to_vec()));
        let g = loss(&fc).backward();
        let err =
            super::apply_all_or_nothing(&mut fc, &g, &mut super::adam_step_for_tests(&mut adam));
        assert!(err.is_err());
        assert_eq!(
            (fc.weight.to_vec(), fc.bias.as_ref().map(|b| b.to_vec())),
            before
        );
        assert_eq!(adam.state_dict(), bad, "the state is the snapshot's");
        // Repaired, the next step matches the per-parameter one.
        adam.load_state(adam_ref.state_dict());
        let g = loss(&fc).backward();
        super::apply_all_or_nothing(&mut fc, &g, &mut super::adam_step_for_tests(&mut adam))
            .unwrap();
        let g = loss(&reference).backward();
        adam_ref.step(&mut reference, &g);
        assert_eq!(fc.weight.to_vec(), reference.weight.to_vec());
        assert_eq!(
            fc.bias.as_ref().map(|b| b.to_vec()),
            reference.bias.as_ref().map(|b| b.to_vec())
        );
        assert_eq!(adam.state_dict(), adam_ref.state_dict());
        assert!(fc.weight.tracks_grad());
    }
}
