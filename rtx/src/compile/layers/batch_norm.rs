//! [`StaticForward`] for [`BatchNorm`], step for step as its eager composition: the channel
//! axis moved first and the rest flattened (`[C, M]`), normalized by the batch's statistics in
//! training (updating the running ones, as the eager forward does) or by the running ones in
//! evaluation, then scaled and shifted. The backward applies the tape's rules
//! (`autograd::rules`, `reduce_back`, `sum_to` for the broadcasts) to the saved steps, and
//! adds the three gradients of `[C, M]` (through the centering, the mean and the variance) in
//! the tape's order.

use super::{back1, op};
use crate::autograd::reduce::{ReduceGrad, reduce_back};
use crate::autograd::{rules, sum_to};
use crate::compile::grad::vjp1;
use crate::compile::{Gradients, StaticForward};
use crate::error::{Result, bail, ok};
use crate::ir::{Builder, IrOp, Value};
use crate::nn::BatchNorm;
use crate::shape::{Axes3, Const, Shape, describe};
use crate::tensor::Tensor;
use rtx_kernels::Float;
use rtx_kernels::op::markers::Add;
use rtx_kernels::op::{BinaryOp, Op, ReduceOp, UnaryOp};

impl<S: Shape, const C: usize, E: Float> StaticForward<(Tensor<S, E>,)> for BatchNorm<C, E> {
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
        ok(train(self, &x))
    }

    /// The `[C, M]` rows as a copy, their statistics as `[C, 1]` (the mean's `1/M`, the
    /// variance's and `eps` are constants the IR cannot hold yet), then the scale and shift.
    fn emit_ir(&self, b: &mut Builder, (x,): (Value<S, E>,)) -> Value<S, E> {
        type Rows<const C: usize> = (Const<C>, usize);
        type Col<const C: usize> = (Const<C>, Const<1>);
        let w = b.param::<(Const<C>,), E>("weight");
        let bias = b.param::<(Const<C>,), E>("bias");
        let rows = b.node::<Rows<C>, E>(IrOp::Reshape, &[x.id()]);
        let mean = op::<Col<C>, E>(b, Op::Reduce(ReduceOp::Sum), &[rows.id()]);
        let sub = Op::Binary(BinaryOp::Sub);
        let centered = op::<Rows<C>, E>(b, sub, &[rows.id(), mean.id()]);
        let mul = Op::Binary(BinaryOp::Mul);
        let sq = op::<Rows<C>, E>(b, mul, &[centered.id(), centered.id()]);
        let var = op::<Col<C>, E>(b, Op::Reduce(ReduceOp::Sum), &[sq.id()]);
        let inv = op::<Col<C>, E>(b, Op::Unary(UnaryOp::Rsqrt), &[var.id()]);
        let xhat = op::<Rows<C>, E>(b, mul, &[centered.id(), inv.id()]);
        let scaled = op::<Rows<C>, E>(b, mul, &[xhat.id(), w.id()]);
        let add = Op::Binary(BinaryOp::Add);
        let y = op::<Rows<C>, E>(b, add, &[scaled.id(), bias.id()]);
        b.node(IrOp::Reshape, &[y.id()])
    }
}

/// The static forward of `bn` on `x` and its backward (see the module docs).
#[allow(clippy::type_complexity)]
fn train<'l, S: Shape, const C: usize, E: Float>(
    bn: &'l BatchNorm<C, E>,
    x: &Tensor<S, E>,
) -> Result<(
    Tensor<S, E>,
    impl FnOnce(Tensor<S, E>, &mut Gradients, bool) -> (Option<Tensor<S, E>>,) + use<'l, S, C, E>,
)> {
    let d = x.dims();
    if d.len() < 2 || d[1] != C {
        bail!(
            "batch_norm",
            "input {} does not have {C} channels on axis 1",
            describe(&x.shape())
        );
    }
    let training = bn.is_training();
    let (n, rest) = (d[0], d[2..].iter().product::<usize>());
    if training && n * rest < 2 {
        bail!(
            "batch_norm",
            "training needs more than one value per channel, got input {}",
            describe(&x.shape())
        );
    }
    let x = x.detach();
    let (x3, back_x3) = vjp1(&x, &|z| z.reshape((n, Const::<C>, rest)));
    let (xp, back_xp) = vjp1(&x3, &|z| z.permute::<Axes3<1, 0, 2>>());
    let (x2, back_x2) = vjp1(&xp, &|z| z.reshape((Const::<C>, n * rest)));
    let (full, col) = (x2.shape(), (Const::<C>, Const::<1>));
    let (mean, var) = if training {
        let stats = (x2.mean_keepdim::<1>(), x2.var_keepdim::<1>(0));
        bn.update_running(&x2);
        stats
    } else {
        (
            bn.running_mean().reshape(col),
            bn.running_var().reshape(col),
        )
    };
    let v = &var + E::from_f64(bn.eps);
    let inv = v.rsqrt();
    let (mean_b, inv_b) = (mean.broadcast_to(full), inv.broadcast_to(full));
    let centered = &x2 - &mean_b;
    let xhat = &centered * &inv_b;
    let w_b = bn.weight.detach().reshape(col).broadcast_to(full);
    let b_b = bn.bias.detach().reshape(col).broadcast_to(full);
    let xw = &xhat * &w_b;
    let y2 = &xw + &b_b;
    let (y3, back_y3) = vjp1(&y2, &|z| z.reshape((Const::<C>, n, rest)));
    let (yp, back_yp) = vjp1(&y3, &|z| z.permute::<Axes3<1, 0, 2>>());
    let (y, back_y) = vjp1(&yp, &|z| z.reshape(x.shape()));
    let backward = move |dy: Tensor<S, E>, grads: &mut Gradients, need_x: bool| {
        let g = back1(back_y3, &back1(back_yp, &back1(back_y, &dy)));
        // The composition's rules are fallible (a device can fail); as with every static
        // backward, a failure panics with the error's message.
        let dx2 = ok((|| -> Result<Option<Tensor<(Const<C>, usize), E>>> {
            // A `[C]` parameter's gradient from its `[C, M]` broadcast's.
            let param = |g: &Tensor<(Const<C>, usize), E>| -> Result<Tensor<(Const<C>,), E>> {
                sum_to(g, col)?.reshape_unchecked((Const,))
            };
            let (g_xw, g_b) = rules::binary(BinaryOp::Add, &xw, &b_b, &y2, &g)?;
            if bn.bias.tracks_grad() {
                grads.add(&bn.bias, param(&g_b)?);
            }
            let (g_xhat, g_w) = rules::binary(BinaryOp::Mul, &xhat, &w_b, &xw, &g_xw)?;
            if bn.weight.tracks_grad() {
                grads.add(&bn.weight, param(&g_w)?);
            }
            if !need_x {
                return Ok(None);
            }
            let (g_c, g_inv) = rules::binary(BinaryOp::Mul, &centered, &inv_b, &xhat, &g_xhat)?;
            let (mut dx2, g_mean) = rules::binary(BinaryOp::Sub, &x2, &mean_b, &centered, &g_c)?;
            if training {
                // The batch's statistics depend on `x2` too: through the mean and the
                // variance (`rsqrt(var + eps)`, the `+ eps` passing the gradient unchanged).
                let g_mean = sum_to(&g_mean, col)?;
                let d_mean = reduce_back(ReduceGrad::Mean, &x2, &mean, &g_mean, Some(1))?;
                let g_var = rules::unary(UnaryOp::Rsqrt, &v, &sum_to(&g_inv, col)?)?;
                let d_var = reduce_back(ReduceGrad::Var(0), &x2, &var, &g_var, Some(1))?;
                dx2 = dx2.same::<Add>(&d_mean).same::<Add>(&d_var);
            }
            Ok(Some(dx2))
        })());
        let Some(dx2) = dx2 else {
            return (None,);
        };
        let dx3 = back1(back_xp, &back1(back_x2, &dx2));
        (Some(back1(back_x3, &dx3)),)
    };
    Ok((y, backward))
}
