//! The backward rules of the elementwise primitives, one line each (ARCHITECTURE.md). Composite
//! ops built from primitives get their backward from the rules of their parts.
//!
//! Each rule maps the output gradient `g` to the input's gradient, given the input `x` (and
//! for some binary ops the output `y`); all tensors have the same shape, and rules run under
//! `no_grad`.

use crate::error::Result;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::op::markers::{Add, Div, Log, Mul, Pow, Sub};
use rtx_kernels::{BinaryOp, Float, Num, UnaryOp};

/// d(op(x))/dx times `g`: the derivative `#[kernel]` derived from the op's own formula, in one
/// launch computed in the compute type (rounded once), the same kernel a fused chain of
/// `#[model]` and the IR's backward run for the op, so every backward differentiates it alike.
/// The ops whose kernels are not differentiable formulas have their rule here: negation,
/// `abs` (whose derivative at 0 is 0, as PyTorch's), and `relu` (0 at 0, as PyTorch's).
pub(crate) fn unary<S: Shape, E: Float>(
    op: UnaryOp,
    x: &Tensor<S, E>,
    g: &Tensor<S, E>,
) -> Result<Tensor<S, E>> {
    match op {
        UnaryOp::Neg => g.try_neg(),
        UnaryOp::Abs => g.try_same::<Mul>(&x.try_sign()?),
        UnaryOp::Relu => x.try_relu_grad(g),
        _ => x.try_derived_grad(op, g),
    }
}

/// d(clamp(x))/dx times `g`, given the output `y`: `g` where `x` is inside the bounds (both
/// included, as PyTorch does) and so equals `y`, 0 where it was clamped.
pub(crate) fn clamp<S: Shape, E: Num>(
    x: &Tensor<S, E>,
    y: &Tensor<S, E>,
    g: &Tensor<S, E>,
) -> Result<Tensor<S, E>> {
    g.try_same::<Mul>(&x.try_equal(y)?)
}

/// The gradients of a binary op for its two (broadcast) inputs `a` and `b`, given the output `y`
/// and its gradient `g`; the caller sums them back to the inputs' shapes. Ties of max and min
/// split the gradient evenly, as PyTorch does.
pub(crate) fn binary<S: Shape, E: Num>(
    op: BinaryOp,
    a: &Tensor<S, E>,
    b: &Tensor<S, E>,
    y: &Tensor<S, E>,
    g: &Tensor<S, E>,
) -> Result<(Tensor<S, E>, Tensor<S, E>)> {
    let half = |t: Tensor<S, E>| t.try_scalar::<Mul>(E::from_f64(0.5));
    Ok(match op {
        BinaryOp::Add => (g.clone(), g.clone()),
        BinaryOp::Sub => (g.clone(), g.try_scalar::<Mul>(E::from_f64(-1.0))?),
        BinaryOp::Mul => (g.try_same::<Mul>(b)?, g.try_same::<Mul>(a)?),
        BinaryOp::Div => (
            g.try_same::<Div>(b)?,
            g.try_same::<Mul>(y)?
                .try_same::<Div>(b)?
                .try_scalar::<Mul>(E::from_f64(-1.0))?,
        ),
        BinaryOp::Max | BinaryOp::Min => {
            let wins = if op == BinaryOp::Max {
                a.try_above(b)?
            } else {
                b.try_above(a)?
            };
            let ties = half(a.try_equal(b)?)?;
            let share_a = wins.try_same::<Add>(&ties)?;
            let share_b = share_a
                .try_scalar::<Mul>(E::from_f64(-1.0))?
                .try_scalar::<Add>(E::from_f64(1.0))?;
            (g.try_same::<Mul>(&share_a)?, g.try_same::<Mul>(&share_b)?)
        }
        BinaryOp::Pow => {
            // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b ln a (ln through f64, since only the
            // float instantiation ever runs).
            let da =
                b.try_same::<Mul>(&a.try_same::<Pow>(&b.try_scalar::<Sub>(E::from_f64(1.0))?)?)?;
            let ln_a = a.try_cast::<f64>()?.try_unary::<Log>()?.try_cast::<E>()?;
            (
                g.try_same::<Mul>(&da)?,
                g.try_same::<Mul>(y)?.try_same::<Mul>(&ln_a)?,
            )
        }
    })
}

/// The gradient of `x op c` (or of `c op x` when `scalar_left`) for the tensor `x`, given the
/// output `y` and its gradient `g`: [`binary`]'s rule for that side with the scalar `c` as
/// the other operand, computed with scalar kernels (nothing uploaded), bit for bit what
/// `binary` gives against a tensor holding `c`. The scalar needs no gradient.
pub(crate) fn binary_scalar<S: Shape, E: Num>(
    op: BinaryOp,
    x: &Tensor<S, E>,
    c: E,
    scalar_left: bool,
    y: &Tensor<S, E>,
    g: &Tensor<S, E>,
) -> Tensor<S, E> {
    use rtx_kernels::op::markers::{Eq, Gt, Log, Lt, Pow};
    use rtx_kernels::{BinaryOpT, UnaryOpT};
    match (op, scalar_left) {
        (BinaryOp::Add, _) | (BinaryOp::Sub, false) => g.clone(),
        (BinaryOp::Sub, true) => g.scalar::<Mul>(E::from_f64(-1.0)),
        (BinaryOp::Mul, _) => g.scalar::<Mul>(c),
        (BinaryOp::Div, false) => g.scalar::<Div>(c),
        (BinaryOp::Div, true) => g
            .same::<Mul>(y)
            .same::<Div>(x)
            .scalar::<Mul>(E::from_f64(-1.0)),
        (BinaryOp::Max | BinaryOp::Min, _) => {
            // `binary`'s shares with (a, b) = (x, c), or (c, x) for a scalar on the left: `a`
            // takes 1 where it wins (max: a > b; min: b > a) and 1/2 on ties, `b` the rest.
            let wins = match (op == BinaryOp::Max, scalar_left) {
                (true, false) | (false, true) => x.mask_scalar::<Gt>(c),
                (false, false) | (true, true) => x.mask_scalar::<Lt>(c),
            };
            let ties = x.mask_scalar::<Eq>(c).scalar::<Mul>(E::from_f64(0.5));
            let share_a = wins.same::<Add>(&ties);
            let share = if scalar_left {
                share_a
                    .scalar::<Mul>(E::from_f64(-1.0))
                    .scalar::<Add>(E::from_f64(1.0))
            } else {
                share_a
            };
            g.same::<Mul>(&share)
        }
        (BinaryOp::Pow, false) => {
            // d(x^c)/dx = c x^(c-1), with c - 1 rounded in `E` as `binary` rounds it.
            let c1 = <Sub as BinaryOpT>::apply(c, E::from_f64(1.0));
            let da = x.scalar::<Pow>(c1).scalar_on::<Mul>(c, true);
            g.same::<Mul>(&da)
        }
        (BinaryOp::Pow, true) => {
            // d(c^x)/dx = c^x ln c, ln c through f64 as `binary` takes it.
            let ln_c = E::from_f64(<Log as UnaryOpT>::apply::<f64>(c.to_f64()));
            g.same::<Mul>(y).scalar::<Mul>(ln_c)
        }
    }
}
