//! [`StaticForward`] for [`Linear`]: the product through `MatmulGrad` (the tape's saved
//! operands), the bias left to the caller when it asks ([`StaticForward::forward_train_deferred`]).

use crate::compile::{Deferred, DeferredIr, Gradients, StaticForward};
use crate::error::ok;
use crate::ir::{Builder, Value};
use crate::nn::{Linear, LinearOut};
use crate::shape::rules::BroadcastShapes;
use crate::shape::{Const, Shape};
use crate::tensor::{MatmulShapes, Tensor};
use rtx_kernels::Float;

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
        (x,): (Tensor<S, E>,),
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        train(self, &x)
    }

    fn forward_train_deferred(
        &self,
        (x,): (Tensor<S, E>,),
    ) -> (
        Deferred<Self::Output>,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        train_deferred(self, &x)
    }

    fn forward_fused_deferred(&self, (x,): (Tensor<S, E>,)) -> Deferred<Self::Output> {
        let raw = x.matmul(&self.weight.t());
        let bias = self.bias.as_ref().map(|b| bias_view(b, &raw));
        Deferred { value: raw, bias }
    }

    fn emit_ir(&self, b: &mut Builder, (x,): (Value<S, E>,)) -> Value<LinearOut<S, I, O>, E> {
        emit(self, b, x)
    }

    fn emit_ir_deferred(
        &self,
        b: &mut Builder,
        (x,): (Value<S, E>,),
    ) -> DeferredIr<Value<LinearOut<S, I, O>, E>> {
        let w = b.param::<(Const<O>, Const<I>), E>("weight");
        let value = b.linear::<LinearOut<S, I, O>, _, _, E>(x, w, None);
        let bias = self.bias.as_ref();
        let bias = bias.map(|_| b.param::<(Const<O>,), E>("bias").id());
        DeferredIr { value, bias }
    }
}

/// The static forward of `layer` on `x` and its backward; the backward borrows the layer but
/// not `x`, so a layer that calls a `Linear` on a tensor of its own (attention's output
/// projection) can return it.
#[allow(clippy::type_complexity)]
pub(super) fn train<'l, S, const I: usize, const O: usize, E>(
    layer: &'l Linear<I, O, E>,
    x: &Tensor<S, E>,
) -> (
    Tensor<LinearOut<S, I, O>, E>,
    impl FnOnce(Tensor<LinearOut<S, I, O>, E>, &mut Gradients, bool) -> (Option<Tensor<S, E>>,)
    + use<'l, S, I, O, E>,
)
where
    S: MatmulShapes<(Const<I>, Const<O>)>,
    LinearOut<S, I, O>: BroadcastShapes<(Const<O>,), Output = LinearOut<S, I, O>>,
    E: Float,
{
    let bias = layer.bias.as_ref().map(|b| (b.storage(), b.layout()));
    let (d, backward) = train_with(layer, x, bias);
    (d.value, backward)
}

/// [`train`] with the bias add left to the caller, as [`Deferred`] describes.
#[allow(clippy::type_complexity)]
fn train_deferred<'l, S, const I: usize, const O: usize, E>(
    layer: &'l Linear<I, O, E>,
    x: &Tensor<S, E>,
) -> (
    Deferred<Tensor<LinearOut<S, I, O>, E>>,
    impl FnOnce(Tensor<LinearOut<S, I, O>, E>, &mut Gradients, bool) -> (Option<Tensor<S, E>>,)
    + use<'l, S, I, O, E>,
)
where
    S: MatmulShapes<(Const<I>, Const<O>)>,
    E: Float,
{
    train_with(layer, x, None)
}

/// The static forward of `layer` on `x`, with `bias` (the layer's own) added by the product
/// (see `Tensor::matmul_saving_bias`), or without it left to the caller, as [`Deferred`]
/// describes; and the backward.
#[allow(clippy::type_complexity)]
fn train_with<'l, S, const I: usize, const O: usize, E>(
    layer: &'l Linear<I, O, E>,
    x: &Tensor<S, E>,
    add_bias: Option<(&rtx_backends::Storage<E>, &rtx_backends::Layout)>,
) -> (
    Deferred<Tensor<LinearOut<S, I, O>, E>>,
    impl FnOnce(Tensor<LinearOut<S, I, O>, E>, &mut Gradients, bool) -> (Option<Tensor<S, E>>,)
    + use<'l, S, I, O, E>,
)
where
    S: MatmulShapes<(Const<I>, Const<O>)>,
    E: Float,
{
    let wt = layer.weight.detach().t();
    let (raw, saved) = ok(x.matmul_saving_bias(&wt, add_bias));
    let bias = match add_bias {
        Some(_) => None,
        None => layer.bias.as_ref().map(|b| bias_view(b, &raw)),
    };
    let backward = move |dy: Tensor<LinearOut<S, I, O>, E>, grads: &mut Gradients, need_x| {
        let need_w = layer.weight.tracks_grad();
        // The bias's gradient, dy summed down its rows, comes with the weight's product (in
        // its epilogue on a GPU).
        let bias = layer.bias.as_ref().filter(|b| b.tracks_grad());
        let (dx, dwt, db) = ok(saved.grads_with_bias(&dy, need_x, need_w, bias.map(|b| b.shape())));
        if let (Some(b), Some(db)) = (bias, db) {
            grads.add(b, db);
        }
        if let Some(dwt) = dwt {
            grads.add(&layer.weight, dwt.t());
        }
        (dx,)
    };
    (Deferred { value: raw, bias }, backward)
}

/// The IR of `layer` on `x`: one `linear` node, the product with the bias its epilogue adds.
pub(super) fn emit<S, const I: usize, const O: usize, E>(
    layer: &Linear<I, O, E>,
    b: &mut Builder,
    x: Value<S, E>,
) -> Value<LinearOut<S, I, O>, E>
where
    S: MatmulShapes<(Const<I>, Const<O>)>,
    E: Float,
{
    let w = b.param::<(Const<O>, Const<I>), E>("weight");
    let bias = layer
        .bias
        .as_ref()
        .map(|_| b.param::<(Const<O>,), E>("bias").id());
    b.linear::<LinearOut<S, I, O>, _, _, E>(x, w, bias)
}

/// The bias `[O]` seen at the output's shape `[.., O]` (a broadcast view, no copy), without
/// gradient history: the static backward adds its gradient itself.
fn bias_view<Y: Shape, const O: usize, E: Float>(
    bias: &Tensor<(Const<O>,), E>,
    out: &Tensor<Y, E>,
) -> Tensor<Y, E> {
    let layout = bias
        .layout()
        .broadcast_to(out.dims())
        .unwrap_or_else(|| unreachable!("a Linear's output ends in its bias's size"));
    bias.view(layout, out.shape())
}
