//! [`StaticForward`] for [`LayerNorm`] and [`RMSNorm`], through the backend's fused norm
//! (`Storage::norm_rows` forward, `Storage::norm_rows_backward` backward) on every device.
//!
//! On a GPU that is exactly what the eager layers run and record; on the CPU the eager layers
//! run their composition of primitive ops, which the fused kernels are held to (in f64 to
//! about 1e-12, see `nn/fused_norm.rs`), so there the static path agrees with the tape to
//! rounding rather than bit for bit.

use super::op;
use crate::compile::{Gradients, StaticForward};
use crate::error::{Result, bail, ok};
use crate::ir::{Builder, Value};
use crate::nn::{LayerNorm, RMSNorm};
use crate::shape::{Const, Shape, describe};
use crate::tensor::Tensor;
use rtx_kernels::Float;
use rtx_kernels::op::{BinaryOp, Op, ReduceOp, UnaryOp};

/// A `[D]` parameter of a norm.
type Param<const D: usize, E> = Tensor<(Const<D>,), E>;

impl<S: Shape, const D: usize, E: Float> StaticForward<(Tensor<S, E>,)> for LayerNorm<D, E> {
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
        emit(b, x, w, Some(bias), true)
    }
}

impl<S: Shape, const D: usize, E: Float> StaticForward<(Tensor<S, E>,)> for RMSNorm<D, E> {
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
        emit(b, x, w, None, false)
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
        let want = (weight.tracks_grad(), bias.is_some_and(|b| b.tracks_grad()));
        if !need_x && !want.0 && !want.1 {
            return (None,);
        }
        let out = dy.storage().norm_rows_backward(
            dy.layout(),
            (x.storage(), x.layout()),
            Some((weight.storage(), weight.layout())),
            &stats,
            want,
        );
        let (dx, dw, db) = ok(out.map_err(Into::into));
        let param = |s| Param::<D, E>::from_storage(s, (Const,));
        if let Some(dw) = dw {
            grads.add(weight, param(dw));
        }
        if let (Some(db), Some(b)) = (db, bias) {
            grads.add(b, param(db));
        }
        (need_x.then(|| Tensor::from_storage(dx, x.shape())),)
    };
    Ok((out, backward))
}

/// The IR of a norm over `x`'s `[D]` rows: the rows as `[rows, D]`, their statistics as
/// `[rows, 1]`, then the scale (and shift), back at `x`'s shape.
fn emit<S: Shape, E: Float, const D: usize>(
    b: &mut Builder,
    x: Value<S, E>,
    weight: Value<(Const<D>,), E>,
    bias: Option<Value<(Const<D>,), E>>,
    centered: bool,
) -> Value<S, E> {
    type Rows<const D: usize> = (usize, Const<D>);
    type Stat = (usize, Const<1>);
    let bin = |o| Op::Binary(o);
    let rows = op::<Rows<D>, E>(b, Op::Copy, &[x.id()]);
    let centered_rows = if centered {
        // The mean is Σ x / D; the 1/D is a constant the IR cannot hold yet.
        let mean = op::<Stat, E>(b, Op::Reduce(ReduceOp::Sum), &[rows.id()]);
        op::<Rows<D>, E>(b, bin(BinaryOp::Sub), &[rows.id(), mean.id()])
    } else {
        rows
    };
    let sq = op::<Rows<D>, E>(
        b,
        bin(BinaryOp::Mul),
        &[centered_rows.id(), centered_rows.id()],
    );
    // Σ x² (times 1/D, plus eps: constants again), then its inverse square root.
    let ms = op::<Stat, E>(b, Op::Reduce(ReduceOp::Sum), &[sq.id()]);
    let inv = op::<Stat, E>(b, Op::Unary(UnaryOp::Rsqrt), &[ms.id()]);
    let normed = op::<Rows<D>, E>(b, bin(BinaryOp::Mul), &[centered_rows.id(), inv.id()]);
    let mut y = op::<Rows<D>, E>(b, bin(BinaryOp::Mul), &[normed.id(), weight.id()]);
    if let Some(bias) = bias {
        y = op::<Rows<D>, E>(b, bin(BinaryOp::Add), &[y.id(), bias.id()]);
    }
    op::<S, E>(b, Op::Copy, &[y.id()])
}
