//! [`StaticForward`] for rtx's own layers, so a `#[model]` forward that calls them compiles.
//!
//! Each layer's static backward computes exactly what the tape's rules for its eager forward
//! would, through the same saved-operand code (`MatmulGrad` for products).

use super::{Deferred, Gradients, StaticForward};
use crate::autograd::sum_to;
use crate::error::ok;
use crate::ir::{Builder, Value};
use crate::nn::{Linear, LinearOut};
use crate::no_grad;
use crate::shape::Const;
use crate::shape::rules::BroadcastShapes;
use crate::tensor::{MatmulShapes, Tensor};
use rtx_kernels::Float;
use rtx_kernels::op::BinaryOp;

impl<S, const I: usize, const O: usize, E> StaticForward<(Tensor<S, E>,)> for Linear<I, O, E>
where
    S: MatmulShapes<(Const<I>, Const<O>)>,
    LinearOut<S, I, O>: BroadcastShapes<(Const<O>,), Output = LinearOut<S, I, O>>,
    E: Float,
{
    type Output = Tensor<LinearOut<S, I, O>, E>;
    type ArgGrads = (Option<Tensor<S, E>>,);

    fn forward_fused(&self, (x,): (Tensor<S, E>,)) -> Self::Output {
        self.forward(&x)
    }

    fn forward_train(
        &self,
        args: (Tensor<S, E>,),
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let (d, backward) = self.forward_train_deferred(args);
        let y = match &self.bias {
            Some(b) => no_grad(|| &d.value + b),
            None => d.value,
        };
        (y, backward)
    }

    fn forward_train_deferred(
        &self,
        (x,): (Tensor<S, E>,),
    ) -> (
        Deferred<Self::Output>,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let wt = self.weight.detach().t();
        let (raw, saved) = ok(x.detach().matmul_saving(&wt));
        let bias = self.bias.as_ref().map(|b| bias_view(b, &raw));
        let backward = move |dy: Self::Output, grads: &mut Gradients, need_x: bool| {
            let need_w = self.weight.tracks_grad();
            let (dx, dwt) = ok(saved.grads(&dy, need_x, need_w));
            if let Some(dwt) = dwt {
                grads.add(&self.weight, dwt.t());
            }
            if let Some(b) = self.bias.as_ref().filter(|b| b.tracks_grad()) {
                grads.add(b, ok(sum_to(&dy, b.shape())));
            }
            (dx,)
        };
        (Deferred { value: raw, bias }, backward)
    }

    fn forward_fused_deferred(&self, (x,): (Tensor<S, E>,)) -> Deferred<Self::Output> {
        let raw = x.matmul(&self.weight.t());
        let bias = self.bias.as_ref().map(|b| bias_view(b, &raw));
        Deferred { value: raw, bias }
    }

    fn emit_ir(&self, b: &mut Builder, (x,): (Value<S, E>,)) -> Value<LinearOut<S, I, O>, E> {
        let w = b.param::<(Const<O>, Const<I>), E>("weight");
        let wt = b.t(w);
        let y = b.matmul(x, wt);
        match &self.bias {
            Some(_) => {
                let bias = b.param::<(Const<O>,), E>("bias");
                b.binary(y, bias, BinaryOp::Add)
            }
            None => y,
        }
    }
}

/// The bias `[O]` seen at the output's shape `[.., O]` (a broadcast view, no copy), without
/// gradient history: the static backward adds its gradient itself.
fn bias_view<Y: crate::shape::Shape, const O: usize, E: Float>(
    bias: &Tensor<(Const<O>,), E>,
    out: &Tensor<Y, E>,
) -> Tensor<Y, E> {
    let layout = bias
        .layout()
        .broadcast_to(out.dims())
        .unwrap_or_else(|| unreachable!("a Linear's output ends in its bias's size"));
    bias.view(layout, out.shape())
}
