//! Autograd, tier 2: the pieces a compiled forward is made of. `#[model]` on the `impl` that
//! holds `forward` turns each step of a flat forward into a call of this module: a sub-model
//! through [`StaticForward`], a maximal chain of elementwise ops through one generated
//! `#[kernel]` applied by [`fused`]'s functions, and every other tensor method through
//! [`grad`]'s `vjp1` and its kin, which run the method on fresh leaves and keep the rule it
//! records on the tape. The backward it generates is a chain of closures, one per step, built
//! during the forward: no tape spans the model, and nothing walks a graph of it at run time.
//!
//! Invariant: a static backward returns, for each argument, exactly the gradient the tape
//! would (same shape and element type), and adds each parameter's gradient to
//! [`Gradients`] under the parameter's own tape node, so optimizers read both alike.

pub mod fused;
#[doc(hidden)]
pub mod glue;
pub mod grad;
pub(crate) mod layers;
pub mod loss;
mod mixed;
mod mixed_cast;
#[cfg(test)]
mod mixed_tests;
mod sizes;
mod step;

pub use mixed::MixedStep;
pub use step::{StepInputs, TrainStep};

pub use crate::autograd::Gradients;
use crate::ir;

/// A layer or model whose forward can run fused and be differentiated without the tape.
///
/// `Args` is the forward's arguments as a tuple of tensors (`(Tensor<S, E>,)` for a
/// one-argument forward; tensors are cheap handles, and owning them keeps the backward free
/// of the caller's borrows). `ArgGrads` holds one `Option` per argument.
///
/// `Out` names what of the output the arguments do not determine, for layers whose eager
/// forward lets the caller's type state it: a convolution's or a pooling's output sizes
/// (`(HO, WO)`, or `LO` for `Conv1d`), verified when the layer runs. It is `()` for every
/// layer whose output follows from its input, so `StaticForward<Args>` names those; a call
/// `StaticForward::forward_train(&layer, (x.clone(),))` infers it either way, from the output's use
/// as the eager call would.
///
/// ```
/// use rtx::prelude::*;
/// use rtx::compile::{Gradients, StaticForward};
///
/// let mut fc = Linear::<3, 2>::new(Device::Cpu, 0);
/// fc.track_gradients();
/// let x: Tensor<Rank2<4, 3>> = Tensor::ones((Const, Const), Device::Cpu);
/// let (y, backward) = fc.forward_train((x,));
/// let mut grads = Gradients::new();
/// let (dx,) = backward(y.ones_like(), &mut grads, true);
/// assert_eq!(dx.unwrap().dims(), &[4, 3]);
/// assert_eq!(grads.get(&fc.weight).unwrap().to_vec(), vec![4.0; 6]);
/// ```
pub trait StaticForward<Args: ir::IrArgs, Out = ()> {
    /// What the forward returns.
    type Output: ir::IrValue;
    /// The arguments' gradients: one `Option` per argument, `Some` for a float tensor
    /// argument when the backward was asked for them.
    type ArgGrads;

    /// The forward with fused kernels. On tensors that record gradients it records on the
    /// tape as the eager forward does.
    fn forward_fused(&self, args: Args) -> Self::Output;

    /// The forward for training: its output, and the backward. The backward takes the
    /// output's gradient, the [`Gradients`] it adds the parameters' gradients to, and
    /// whether the arguments' gradients are wanted (the data a model is called on needs
    /// none, and skipping it saves a product as large as the first layer's forward). Nothing
    /// is recorded on the tape.
    #[allow(clippy::type_complexity)]
    fn forward_train(
        &self,
        args: Args,
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    );

    /// [`StaticForward::forward_train`] that may leave its last step, a bias add, to the
    /// caller, so the elementwise kernel that follows can add it: the output before the bias,
    /// and the bias broadcast to the output's shape (a view). The backward is the same as
    /// [`StaticForward::forward_train`]'s: since the bias is added, the gradient of the output
    /// (after the bias) is also the gradient of the output before it.
    ///
    /// The default leaves nothing.
    #[allow(clippy::type_complexity)]
    fn forward_train_deferred(
        &self,
        args: Args,
    ) -> (
        Deferred<Self::Output>,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let (value, backward) = self.forward_train(args);
        (Deferred { value, bias: None }, backward)
    }

    /// [`StaticForward::forward_fused`] that may leave its bias add to the caller, as
    /// [`StaticForward::forward_train_deferred`] does. The default leaves nothing.
    fn forward_fused_deferred(&self, args: Args) -> Deferred<Self::Output> {
        Deferred {
            value: self.forward_fused(args),
            bias: None,
        }
    }

    /// Adds the forward's nodes to an IR graph: the arguments are values already in it,
    /// the result is the output's value. Parameters are named under the builder's scope.
    fn emit_ir(
        &self,
        b: &mut ir::Builder,
        args: <Args as ir::IrArgs>::Values,
    ) -> <Self::Output as ir::IrValue>::Value;

    /// [`StaticForward::emit_ir`] for a call whose bias add is left to the caller, as
    /// [`StaticForward::forward_train_deferred`] leaves it: the output's value before the
    /// bias, and the bias's node, for the fused chain after it to add. The default leaves
    /// nothing.
    fn emit_ir_deferred(
        &self,
        b: &mut ir::Builder,
        args: <Args as ir::IrArgs>::Values,
    ) -> DeferredIr<<Self::Output as ir::IrValue>::Value> {
        DeferredIr {
            value: self.emit_ir(b, args),
            bias: None,
        }
    }
}

/// The IR of an output whose bias add was left to the caller ([`Deferred`] in a graph).
#[derive(Clone, Copy, Debug)]
pub struct DeferredIr<V> {
    /// The output's value before the bias.
    pub value: V,
    /// The bias's node (`[O]`, which the add broadcasts along the output's leading dims);
    /// `None` when nothing was left.
    pub bias: Option<ir::NodeId>,
}

/// An output whose last step, adding `bias`, was left to the caller.
#[derive(Clone, Debug)]
pub struct Deferred<T> {
    /// The output before the bias.
    pub value: T,
    /// The bias, broadcast to the output's shape; `None` when nothing was left.
    pub bias: Option<T>,
}
