//! The tape's adapters of the reduction and softmax rules (`crate::rules::reduce`,
//! `crate::rules::softmax`) to typed tensors. The static backward reaches them through the
//! nodes the tape records (`compile::grad`), and layers' static forwards (batch norm) call
//! them directly, so the tape and the compiled model share each rule through one function.

use super::{as_float, from_float, with_float};
use crate::error::Result;
use crate::rules;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::{Element, Float};

pub(crate) use crate::rules::reduce::ReduceGrad;

/// The input gradient of a reduction of `x` (along `axis`, or all axes) that gave `y`.
pub(crate) fn reduce_back<S: Shape, S2: Shape, E: Element>(
    kind: ReduceGrad,
    x: &Tensor<S, E>,
    y: &Tensor<S2, E>,
    g: &Tensor<S2, E>,
    axis: Option<usize>,
) -> Result<Tensor<S, E>> {
    fn rule<S: Shape, S2: Shape, F: Float>(
        kind: ReduceGrad,
        x: &Tensor<S, F>,
        y: &Tensor<S2, F>,
        g: &Tensor<S2, F>,
        axis: Option<usize>,
    ) -> Result<Tensor<S, F>> {
        let (s, l) = rules::reduce::reduce_back(kind, shared(x), shared(y), shared(g), axis)?;
        Ok(Tensor::from_arc_layout(s, l, x.shape()))
    }
    Ok(with_float!(E, F => from_float(rule::<S, S2, F>(
        kind,
        as_float(x),
        as_float(y),
        as_float(g),
        axis,
    )?)))
}

/// The input gradient of softmax (`log = false`) or log-softmax (`log = true`) along `axis`,
/// given the output `y` and its gradient `g` (all of one shape).
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
        let (s, l) = rules::softmax::softmax_back(shared(y), shared(g), axis, log)?;
        Ok(Tensor::from_arc_layout(s, l, y.shape()))
    }
    Ok(with_float!(E, F => from_float(rule::<S, F>(as_float(y), as_float(g), axis, log)?)))
}

/// `t` as a rule reads it.
fn shared<S: Shape, F: Float>(t: &Tensor<S, F>) -> rules::Shared<'_, F> {
    (t.storage_arc(), t.layout())
}
