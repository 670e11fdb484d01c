//! [`StaticForward`] for [`Dropout`]. In training each call draws the same Philox mask the
//! eager `forward` would (through `Dropout::next_mask`, which counts the call), applies it
//! with the backend's fused op, and the backward applies the mask regenerated from its seed,
//! as the tape's rule does. In evaluation it is the identity, and so is its backward.

use super::op;
use crate::compile::{Gradients, StaticForward};
use crate::error::ok;
use crate::ir::{Builder, Value};
use crate::nn::Dropout;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Float;
use rtx_kernels::op::{BinaryOp, Op, RandomOp};

/// What the forward applied, which the backward applies again to the gradient.
enum Applied {
    /// Nothing (evaluation, or `p` 0).
    Identity,
    /// Everything dropped (`p` 1): the eager forward multiplies by 0.
    Zeros,
    /// The mask of `seed`, kept with probability `keep_p`, survivors scaled by `1 / keep_p`.
    Mask { keep_p: f64, seed: u64 },
}

impl<S: Shape, E: Float> StaticForward<(Tensor<S, E>,)> for Dropout {
    type Output = Tensor<S, E>;
    type ArgGrads = (Option<Tensor<S, E>>,);

    fn forward_fused(&self, (x,): (Tensor<S, E>,)) -> Tensor<S, E> {
        self.forward(&x)
    }

    fn forward_train(
        &self,
        (x,): (Tensor<S, E>,),
    ) -> (
        Tensor<S, E>,
        impl FnOnce(Tensor<S, E>, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let x = x.detach();
        let (y, applied) = match self.next_mask() {
            None => (x, Applied::Identity),
            Some((0.0, _)) => (zeroed(&x), Applied::Zeros),
            Some((keep_p, seed)) => (masked(&x, keep_p, seed), Applied::Mask { keep_p, seed }),
        };
        let backward = move |dy: Tensor<S, E>, _: &mut Gradients, need_x: bool| {
            let dx = need_x.then(|| match applied {
                Applied::Identity => dy,
                Applied::Zeros => zeroed(&dy),
                Applied::Mask { keep_p, seed } => masked(&dy, keep_p, seed),
            });
            (dx,)
        };
        (y, backward)
    }

    /// In training, a Bernoulli draw times the input (the scale `1 / (1 - p)` is a constant
    /// the IR cannot hold yet); in evaluation, the input itself.
    fn emit_ir(&self, b: &mut Builder, (x,): (Value<S, E>,)) -> Value<S, E> {
        if !self.is_training() || self.p() == 0.0 {
            return x;
        }
        let keep = op::<S, E>(b, Op::Random(RandomOp::Bernoulli), &[]);
        op(b, Op::Binary(BinaryOp::Mul), &[x.id(), keep.id()])
    }
}

/// `t` times the Bernoulli(`keep_p`) mask of `seed`, scaled by `1 / keep_p`: the backend's
/// fused dropout, which the eager forward and the tape's backward both run.
fn masked<S: Shape, E: Float>(t: &Tensor<S, E>, keep_p: f64, seed: u64) -> Tensor<S, E> {
    let s = t.storage().dropout(t.layout(), keep_p, 1.0 / keep_p, seed);
    Tensor::from_storage(ok(s.map_err(Into::into)), t.shape())
}

/// `t` times 0, as the eager forward computes it when `p` is 1 (and the tape's rule for that
/// product computes the gradient).
fn zeroed<S: Shape, E: Float>(t: &Tensor<S, E>) -> Tensor<S, E> {
    let flat = t.reshape((t.numel(),));
    (flat * E::from_f64(0.0)).reshape(t.shape())
}
