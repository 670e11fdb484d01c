//! [`StaticForward`] for [`LayerNorm`] and [`RMSNorm`], through the backend's fused norm
//! (`Storage::norm_rows` forward, the rule `rules::norm::norm_back` backward) on every
//! device.
//!
//! On a GPU that is exactly what the eager layers run and record; on the CPU the eager layers
//! run their composition of primitive ops, which the fused kernels are held to (in f64 to
//! about 1e-12, see `nn/fused_norm.rs`), so there the static path agrees with the tape to
//! rounding rather than bit for bit.

use crate::compile::{Gradients, StaticForward};
use crate::error::{Result, bail, ok};
use crate::ir::{Builder, LastAxis, Value};
use crate::nn::{LayerNorm, RMSNorm};
use crate::rules::norm::norm_back;
use crate::shape::{Const, Shape, describe};
use crate::tensor::Tensor;
use rtx_kernels::Float;

/// A `[D]` parameter of a norm.
type Param<const D: usize, E> = Tensor<(Const<D>,), E>;

impl<S: LastAxis<Last = Const<D>>, const D: usize, E: Float> StaticForward<(Tensor<S, E>,)>
    for LayerNorm<D, E>
{
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
        let (w, b) = (&self.weight, Some(&self.bias));
        ok(train("layer_norm", &x, w, b, self.eps, true))
    }

    fn emit_ir(&self, b: &mut Builder, (x,): (Value<S, E>,)) -> Value<S, E> {
        let w = b.param::<(Const<D>,), E>("weight");
        let bias = b.param::<(Const<D>,), E>("bias");
        b.layer_norm(x, Some(w), Some(bias), self.eps)
    }
}

impl<S: LastAxis<Last = Const<D>>, const D: usize, E: Float> StaticForward<(Tensor<S, E>,)>
    for RMSNorm<D, E>
{
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
        let eps = self.resolved_eps();
        ok(train("rms_norm", &x, &self.weight, None, eps, false))
    }

    fn emit_ir(&self, b: &mut Builder, (x,): (Value<S, E>,)) -> Value<S, E> {
        let w = b.param::<(Const<D>,), E>("weight");
        b.rms_norm(x, Some(w), self.resolved_eps())
    }
}

/// The fused norm of `x`'s `[D]` rows (`centered`: layer norm, else RMS norm) and its
/// backward, which adds the weight's and the bias's gradients when they track gradients.
#[allow(clippy::type_complexity)]
fn train<'l, S: Shape, E: Float, const D: usize>(
    op: &'static str,
    x: &Tensor<S, E>,
    weight: &'l Param<D, E>,
    bias: Option<&'l Param<D, E>>,
    eps: f64,
    centered: bool,
) -> Result<(
    Tensor<S, E>,
    impl FnOnce(Tensor<S, E>, &mut Gradients, bool) -> (Option<Tensor<S, E>>,) + use<'l, S, E, D>,
)> {
    if x.dims().last() != Some(&D) {
        bail!(
            op,
            "the last axis of input {} is not {D} long",
            describe(&x.shape())
        );
    }
    let (y, stats) = x.storage().norm_rows(
        x.layout(),
        Some((weight.storage(), weight.layout())),
        bias.map(|b| (b.storage(), b.layout())),
        eps,
        centered,
    )?;
    let (x, out) = (x.detach(), Tensor::from_storage(y, x.shape()));
    let backward = move |dy: Tensor<S, E>, grads: &mut Gradients, need_x: bool| {
        let need = [
            need_x,
            weight.tracks_grad(),
            bias.is_some_and(|b| b.tracks_grad()),
        ];
        let (dx, dw, db) = ok(norm_back(
            (dy.storage(), dy.layout()),
            (x.storage(), x.layout()),
            Some((weight.storage(), weight.layout())),
            &stats,
            need,
        ));
        let param = |s| Param::<D, E>::from_storage(s, (Const,));
        if let Some(dw) = dw {
            grads.add(weight, param(dw));
        }
        if let (Some(db), Some(b)) = (db, bias) {
            grads.add(b, param(db));
        }
        (dx.map(|dx| Tensor::from_storage(dx, x.shape())),)
    };
    Ok((out, backward))
}
