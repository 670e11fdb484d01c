//! The backward of the reductions (sum, mean, max and min, log Σ exp, variance, standard
//! deviation, product), along one axis or over every element: the output's gradient spread
//! back along the reduced axis (a stride-0 view), scaled by the local derivative.

use super::{Grad, Shared};
use crate::error::Result;
use rtx_backends::{Layout, Storage};
use rtx_kernels::Float;
use rtx_kernels::op::ReduceOp;
use rtx_kernels::op::markers::{Add, Div, Eq, Exp, Mul, Sub};
use rtx_kernels::op::{BinaryOpT, UnaryOpT};
use std::sync::Arc;

/// Which reduction a gradient is of.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReduceGrad {
    /// Sum: the gradient spreads unchanged.
    Sum,
    /// Mean: spread and divided by the count.
    Mean,
    /// Max or min: to the elements equal to the result, split evenly among ties.
    Extreme,
    /// log Σ exp: weighted by the softmax.
    LogSumExp,
    /// Variance with this correction.
    Var(usize),
    /// Standard deviation with this correction.
    Std(usize),
    /// Product: the product of the other elements, exact when some are zero.
    Prod,
}

/// The input's gradient of the reduction `kind` of `x` (along `axis`, or over every element)
/// that gave `y`, given `y`'s gradient `g`: at `x`'s dims, a view of `g` where the rule is a
/// plain spread (sum), fresh storage otherwise.
pub(crate) fn reduce_back<F: Float>(
    kind: ReduceGrad,
    x: Shared<'_, F>,
    y: Shared<'_, F>,
    g: Shared<'_, F>,
    axis: Option<usize>,
) -> Result<Grad<F>> {
    let dims = x.1.dims();
    let count = match axis {
        Some(a) => dims[a],
        None => dims.iter().product(),
    } as f64;
    let c = |v: f64| F::from_f64(v);
    let spread = |t: Shared<'_, F>| expand(t, dims, axis);
    match kind {
        ReduceGrad::Sum => spread(g),
        ReduceGrad::Mean => scalar::<Div, F>(r(&spread(g)?), c(count)),
        ReduceGrad::Extreme => {
            let mask = equal(x, r(&spread(y)?))?;
            let picked = same::<Mul, F>(r(&spread(g)?), r(&mask))?;
            same::<Div, F>(r(&picked), r(&sum_back(r(&mask), axis)?))
        }
        ReduceGrad::LogSumExp => {
            let g = spread(g)?;
            let centered = same::<Sub, F>(x, r(&spread(y)?))?;
            same::<Mul, F>(r(&g), r(&unary::<Exp, F>(r(&centered))?))
        }
        ReduceGrad::Var(k) | ReduceGrad::Std(k) => {
            let mean = scalar::<Div, F>(r(&sum_back(x, axis)?), c(count))?;
            let centered = same::<Sub, F>(x, r(&mean))?;
            let scale = c(1.0 / (count - k as f64));
            let d = match kind {
                ReduceGrad::Var(_) => scalar::<Mul, F>(r(&centered), c(2.0))?,
                _ => same::<Div, F>(r(&centered), r(&spread(y)?))?,
            };
            let dx = same::<Mul, F>(r(&spread(g)?), r(&d))?;
            scalar::<Mul, F>(r(&dx), scale)
        }
        ReduceGrad::Prod => {
            // d/dx_i of Π x = Π_{j≠i} x_j. Dividing y by x_i is wrong at zeros, so count them
            // per slice: with none, the product of the others is P / x_i (P over non-zeros);
            // with exactly one, it is P at the zero and 0 elsewhere; with more, 0 everywhere.
            let zero = equal(x, r(&full(x, F::ZERO)?))?;
            let nonzero = same::<Add, F>(x, r(&zero))?;
            let p = reduce_expand(r(&nonzero), axis, ReduceOp::Prod)?;
            let count = sum_back(r(&zero), axis)?;
            let none = equal(r(&count), r(&full(r(&count), F::ZERO)?))?;
            let one = equal(r(&count), r(&full(r(&count), F::ONE)?))?;
            let others = same::<Mul, F>(r(&none), r(&same::<Div, F>(r(&p), r(&nonzero))?))?;
            let at_zero = same::<Mul, F>(r(&same::<Mul, F>(r(&one), r(&zero))?), r(&p))?;
            let d = same::<Add, F>(r(&others), r(&at_zero))?;
            same::<Mul, F>(r(&spread(g)?), r(&d))
        }
    }
}

/// Σ over `axis` (or every element) of `t`, repeated back along it (`t`'s dims).
pub(crate) fn sum_back<F: Float>(t: Shared<'_, F>, axis: Option<usize>) -> Result<Grad<F>> {
    reduce_expand(t, axis, ReduceOp::Sum)
}

/// A value as a rule reads it, from one it holds.
fn r<F: Float>((s, l): &Grad<F>) -> Shared<'_, F> {
    (s, l)
}

/// `t`, the result of a reduction of a tensor of dims `dims`, seen at `dims` by repeating it
/// along the reduced axis (stride 0), after a dense copy if it is strided.
fn expand<F: Float>((s, l): Shared<'_, F>, dims: &[usize], axis: Option<usize>) -> Result<Grad<F>> {
    let (s, offset) = match l.is_contiguous() {
        true => (s.clone(), l.offset()),
        false => (Arc::new(s.contiguous(l)?), 0),
    };
    let mut strides = vec![0; dims.len()];
    if let Some(a) = axis {
        let mut stride = 1;
        for i in (0..dims.len()).rev().filter(|&i| i != a) {
            strides[i] = stride;
            stride *= dims[i];
        }
    }
    Ok((s, Layout::new(dims, &strides, offset)))
}

/// The reduction `op` over `axis` (or every element) of `t`, repeated back along it.
fn reduce_expand<F: Float>(t: Shared<'_, F>, axis: Option<usize>, op: ReduceOp) -> Result<Grad<F>> {
    let reduced = match axis {
        Some(a) => t.0.reduce(t.1, a, op)?,
        None => t.0.reduce_all(t.1, op)?,
    };
    let flat = Layout::contiguous(&[reduced.len()]);
    expand((&Arc::new(reduced), &flat), t.1.dims(), axis)
}

/// Fresh dense storage of `dims`.
fn dense<F: Float>(s: Storage<F>, dims: &[usize]) -> Grad<F> {
    (Arc::new(s), Layout::contiguous(dims))
}

/// `a O b` elementwise, at `a`'s dims.
fn same<O: BinaryOpT, F: Float>(a: Shared<'_, F>, b: Shared<'_, F>) -> Result<Grad<F>> {
    Ok(dense(a.0.binary::<O>(a.1, b.0, b.1)?, a.1.dims()))
}

/// `a O c` elementwise.
fn scalar<O: BinaryOpT, F: Float>(a: Shared<'_, F>, c: F) -> Result<Grad<F>> {
    Ok(dense(a.0.binary_scalar::<O>(a.1, c, false)?, a.1.dims()))
}

/// `O(a)` elementwise.
fn unary<O: UnaryOpT, F: Float>(a: Shared<'_, F>) -> Result<Grad<F>> {
    Ok(dense(a.0.unary::<O>(a.1)?, a.1.dims()))
}

/// 1 where `a` equals `b`, 0 elsewhere.
fn equal<F: Float>(a: Shared<'_, F>, b: Shared<'_, F>) -> Result<Grad<F>> {
    let dims = a.1.dims();
    let m = a.0.cmp::<Eq>(a.1, b.0, b.1)?;
    Ok(dense(m.cast::<F>(&Layout::contiguous(dims))?, dims))
}

/// `v` at `like`'s dims.
fn full<F: Float>(like: Shared<'_, F>, v: F) -> Result<Grad<F>> {
    let dims = like.1.dims();
    let s = Storage::full(v, dims.iter().product(), like.0.device())?;
    Ok(dense(s, dims))
}
