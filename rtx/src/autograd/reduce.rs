//! Backward rules of the reductions, softmax and log-softmax. A reduction's gradient is the
//! output gradient broadcast back along the reduced axis (a stride-0 view), scaled by the
//! local derivative.

use super::{as_float, from_float, with_float};
use crate::error::Result;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::Layout;
use rtx_kernels::op::ReduceOp;
use rtx_kernels::op::markers::{Add, Div, Exp, Mul, Sub};
use rtx_kernels::{Element, Float};

/// Which rule a reduction records.
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

/// The input gradient of a reduction of `x` (along `axis`, or all axes) that gave `y`.
pub(crate) fn reduce_back<S: Shape, S2: Shape, E: Element>(
    kind: ReduceGrad,
    x: &Tensor<S, E>,
    y: &Tensor<S2, E>,
    g: &Tensor<S2, E>,
    axis: Option<usize>,
) -> Result<Tensor<S, E>> {
    Ok(with_float!(E, F => from_float(float_rule::<S, S2, F>(
        kind,
        as_float(x),
        as_float(y),
        as_float(g),
        axis,
    )?)))
}

/// `t`, whose elements are those of a reduction of a tensor shaped `like`, viewed as `like`'s
/// shape by repeating along the reduced axis (stride 0).
fn expand<S: Shape, S2: Shape, F: Float>(
    t: &Tensor<S2, F>,
    like: &Tensor<S, F>,
    axis: Option<usize>,
) -> Result<Tensor<S, F>> {
    let t = t.try_contiguous()?;
    let dims = like.dims();
    let strides: Vec<usize> = match axis {
        None => vec![0; dims.len()],
        Some(a) => {
            let mut s = vec![0; dims.len()];
            let mut stride = 1;
            for i in (0..dims.len()).rev() {
                if i != a {
                    s[i] = stride;
                    stride *= dims[i];
                }
            }
            s
        }
    };
    Ok(t.view(
        Layout::new(dims, &strides, t.layout().offset()),
        like.shape(),
    ))
}

/// Σ over `axis` of `t`, repeated back along it (`t`'s shape).
fn sum_back<S: Shape, F: Float>(t: &Tensor<S, F>, axis: Option<usize>) -> Result<Tensor<S, F>> {
    reduce_expand(t, axis, ReduceOp::Sum)
}

/// The reduction `op` over `axis` of `t`, repeated back along it (`t`'s shape).
fn reduce_expand<S: Shape, F: Float>(
    t: &Tensor<S, F>,
    axis: Option<usize>,
    op: ReduceOp,
) -> Result<Tensor<S, F>> {
    let reduced = match axis {
        Some(a) => t.storage().reduce(t.layout(), a, op)?,
        None => t.storage().reduce_all(t.layout(), op)?,
    };
    let n = reduced.len();
    let flat = Tensor::from_storage(reduced, (n,));
    expand(&flat, t, axis)
}

fn float_rule<S: Shape, S2: Shape, F: Float>(
    kind: ReduceGrad,
    x: &Tensor<S, F>,
    y: &Tensor<S2, F>,
    g: &Tensor<S2, F>,
    axis: Option<usize>,
) -> Result<Tensor<S, F>> {
    let count = match axis {
        Some(a) => x.dims()[a],
        None => x.numel(),
    } as f64;
    let c = |v: f64| F::from_f64(v);
    match kind {
        ReduceGrad::Sum => expand(g, x, axis),
        ReduceGrad::Mean => expand(g, x, axis)?.try_scalar::<Div>(c(count)),
        ReduceGrad::Extreme => {
            let mask = x.try_equal(&expand(y, x, axis)?)?;
            expand(g, x, axis)?
                .try_same::<Mul>(&mask)?
                .try_same::<Div>(&sum_back(&mask, axis)?)
        }
        ReduceGrad::LogSumExp => expand(g, x, axis)?.try_same::<Mul>(
            &x.try_same::<Sub>(&expand(y, x, axis)?)?
                .try_unary::<Exp>()?,
        ),
        ReduceGrad::Var(k) | ReduceGrad::Std(k) => {
            let mean = sum_back(x, axis)?.try_scalar::<Div>(c(count))?;
            let centered = x.try_same::<Sub>(&mean)?;
            let scale = c(1.0 / (count - k as f64));
            let d = if let ReduceGrad::Var(_) = kind {
                centered.try_scalar::<Mul>(c(2.0))?
            } else {
                centered.try_same::<Div>(&expand(y, x, axis)?)?
            };
            expand(g, x, axis)?
                .try_same::<Mul>(&d)?
                .try_scalar::<Mul>(scale)
        }
        ReduceGrad::Prod => {
            // d/dx_i of Π x = Π_{j≠i} x_j. Dividing y by x_i is wrong at zeros, so count them
            // per slice: with none, the product of the others is P / x_i (P over non-zeros);
            // with exactly one, it is P at the zero and 0 elsewhere; with more, 0 everywhere.
            let zero = x.try_equal(&x.try_zeros_like()?)?;
            let nonzero = x.try_same::<Add>(&zero)?;
            let p = reduce_expand(&nonzero, axis, ReduceOp::Prod)?;
            let count = sum_back(&zero, axis)?;
            let none = count.try_equal(&count.try_zeros_like()?)?;
            let one = count.try_equal(&count.try_ones_like()?)?;
            let d = none
                .try_same::<Mul>(&p.try_same::<Div>(&nonzero)?)?
                .try_same::<Add>(&one.try_same::<Mul>(&zero)?.try_same::<Mul>(&p)?)?;
            expand(g, x, axis)?.try_same::<Mul>(&d)
        }
    }
}

/// The input gradient of softmax (`log = false`) or log-softmax (`log = true`) along `axis`,
/// given the output `y` and its gradient `g` (all of one shape). Along the last axis it is
/// the backend's fused row kernel (`Storage::softmax_backward`: one launch on a GPU, the
/// sum and every output in the compute type, rounded once); along another axis, the
/// composition of primitive ops, which the fused form equals within rounding.
pub(crate) fn softmax_back<S: Shape, E: Element>(
    y: &Tensor<S, E>,
    g: &Tensor<S, E>,
    axis: usize,
    log: bool,
) -> Result<Tensor<S, E>> {
    fn rule<S: Shape, F: Float>(
        y: &Tensor<S, F>,
        g: &Tensor<S, F>,
        axis: usize,
        log: bool,
    ) -> Result<Tensor<S, F>> {
        if axis + 1 == y.rank() {
            let dx = crate::rules::softmax::softmax_back_rows(
                (y.storage(), y.layout()),
                (g.storage(), g.layout()),
                log,
            )?;
            return Ok(Tensor::from_storage(dx, y.shape()));
        }
        softmax_back_composed(y, g, axis, log)
    }
    Ok(with_float!(E, F => from_float(rule::<S, F>(as_float(y), as_float(g), axis, log)?)))
}

/// [`softmax_back`] as a composition of primitive ops: `g - exp(y) Σ g` for log-softmax,
/// `y (g - Σ g y)` for softmax, each step rounded to `F`.
fn softmax_back_composed<S: Shape, F: Float>(
    y: &Tensor<S, F>,
    g: &Tensor<S, F>,
    axis: usize,
    log: bool,
) -> Result<Tensor<S, F>> {
    if log {
        let sum = sum_back(g, Some(axis))?;
        g.try_same::<Sub>(&y.try_unary::<Exp>()?.try_same::<Mul>(&sum)?)
    } else {
        let sum = sum_back(&g.try_same::<Mul>(y)?, Some(axis))?;
        y.try_same::<Mul>(&g.try_same::<Sub>(&sum)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    /// Reproducible values in [lo, hi), rounded to `F`.
    fn values<F: Float>(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<F> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
                F::from_f64(lo + (hi - lo) * r)
            })
            .collect()
    }

    /// The fused last-axis gradient against the composition, on rows held in registers and
    /// on a transposed (strided) gradient, for softmax and log-softmax.
    fn fused_matches_composition<F: Float>(tol: f64) {
        let (r, c) = (6usize, 37usize);
        let x = Tensor::from_vec(values::<F>(r * c, 1, -3.0, 3.0), (r, c), Device::Cpu);
        let g = Tensor::from_vec(values::<F>(r * c, 2, -1.0, 1.0), (r, c), Device::Cpu);
        let gt = Tensor::from_vec(values::<F>(r * c, 3, -1.0, 1.0), (c, r), Device::Cpu);
        for log in [false, true] {
            let y = if log {
                x.log_softmax::<1>()
            } else {
                x.softmax::<1>()
            };
            for g in [g.clone(), gt.t()] {
                let fused = softmax_back(&y, &g, 1, log).unwrap().to_vec();
                let composed = softmax_back_composed(&y, &g, 1, log).unwrap().to_vec();
                for (i, (a, b)) in fused.iter().zip(&composed).enumerate() {
                    let (a, b) = (a.to_f64(), b.to_f64());
                    assert!(
                        (a - b).abs() <= tol * (1.0 + b.abs()),
                        "{:?} log {log} element {i}: fused {a}, composed {b}",
                        F::DTYPE
                    );
                }
            }
        }
    }

    #[test]
    fn fused_softmax_backward_matches_the_composition() {
        fused_matches_composition::<f64>(1e-14);
        fused_matches_composition::<f32>(1e-6);
        // The composition rounds each of its four steps to 16 bits, the fused form once: a
        // few half-ulps apart (2^-11 for f16, 2^-8 for bf16).
        fused_matches_composition::<rtx_kernels::f16>(2e-3);
        fused_matches_composition::<rtx_kernels::bf16>(1e-2);
    }
}
