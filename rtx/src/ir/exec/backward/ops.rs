//! The backward of every node outside a fused chain: views, reductions, products, the
//! composite ops and the layers' ops, each through its rule in `crate::rules` (or the
//! function that is its rule, see there).
//!
//! Invariant: each gradient has its input's dims and element type.

use super::super::composite::Saved;
use super::super::prim::{conv_params, pool_params, reshape};
use super::super::value::DynTensor;
use super::super::{cast, exec_error, floats};
use super::Reverse;
use crate::compile::layers::attention::{QkvBack, Seq};
use crate::error::Result;
use crate::ir::{Composite, IrOp, NodeId};
use crate::rules::reduce::ReduceGrad;
use crate::rules::{conv, index, loss, norm, reduce, softmax, views};
use crate::tensor::matmul_layouts_grads;
use rtx_backends::storage::{CrossEntropySaved, NormStats};
use rtx_backends::{Layout, Storage};
use rtx_kernels::Float;
use rtx_kernels::op::{Op, ReduceOp, ScatterOp};
use std::sync::Arc;

/// The gradients node `i` gives its inputs from its own gradient `g`.
pub(super) fn backward(
    r: &Reverse<'_, '_>,
    i: NodeId,
    g: &DynTensor,
    saved: Saved,
) -> Result<Vec<(NodeId, DynTensor)>> {
    let n = &r.run.graph().nodes[i];
    let ins = &n.inputs;
    let x = |k: usize| r.run.read_rounded(ins[k]);
    Ok(match &n.op {
        IrOp::Permute(perm) => {
            let mut inverse = vec![0; perm.len()];
            for (k, &p) in perm.iter().enumerate() {
                inverse[p] = k;
            }
            vec![(ins[0], g.with_layout(g.layout().permute(&inverse)))]
        }
        IrOp::Reshape => vec![(ins[0], reshape(g, x(0)?.dims())?)],
        IrOp::Expand => vec![(ins[0], sum_to(g, x(0)?.dims())?)],
        IrOp::Narrow { axis, start } => {
            let dims = x(0)?.dims().to_vec();
            let dx = floats!(g.dtype(), "narrow", E => {
                let s = views::narrow_back(op::<E>(g)?, &dims, *axis, *start)?;
                Ok(DynTensor::dense(s, &dims))
            })?;
            vec![(ins[0], dx)]
        }
        IrOp::Op(Op::Concat) => {
            let axis = n
                .attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let mut start = 0;
            let mut out = Vec::new();
            for (k, &j) in ins.iter().enumerate() {
                let len = x(k)?.dims()[axis];
                let part = views::part_of(g.layout(), axis, start, len, false);
                out.push((j, g.with_layout(part)));
                start += len;
            }
            out
        }
        IrOp::Op(Op::Copy) => vec![(ins[0], g.clone())],
        IrOp::Op(Op::Cast) => {
            let to = x(0)?.dtype();
            vec![(ins[0], cast(g, to)?)]
        }
        IrOp::Op(Op::Reduce(op)) => {
            let axis = n
                .attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let kind = match op {
                ReduceOp::Sum => ReduceGrad::Sum,
                ReduceOp::Prod => ReduceGrad::Prod,
                ReduceOp::Max | ReduceOp::Min => ReduceGrad::Extreme,
                ReduceOp::ArgMax | ReduceOp::ArgMin => {
                    return Err(exec_error(format!("{op:?} has no gradient")));
                }
            };
            let (x, y) = (x(0)?, r.run.read_rounded(i)?);
            vec![(ins[0], reduction(kind, &x, &y, g, axis)?)]
        }
        // `[cond, then, else]`: each branch gets the gradient where it was taken (the rule of
        // `where_cond` and `masked_fill`), summed over the dims it was broadcast along.
        IrOp::Op(Op::Where) => {
            let dims = g.dims().to_vec();
            let cond = x(0)?;
            let lc = cond.layout().broadcast_to(&dims).ok_or_else(|| {
                exec_error(format!(
                    "the mask {:?} does not broadcast to {dims:?}",
                    cond.dims()
                ))
            })?;
            let mut out = Vec::new();
            for (k, taken) in [(1, true), (2, false)] {
                if !r.needs[ins[k]] {
                    continue;
                }
                let d = floats!(g.dtype(), "where", E => {
                    let m = (cond.storage::<bool>()?, &lc);
                    let s = index::where_back((g.storage::<E>()?, g.layout()), m, taken)?;
                    Ok(DynTensor::dense(s, &dims))
                })?;
                out.push((ins[k], sum_to(&d, x(k)?.dims())?));
            }
            out
        }
        IrOp::Composite(c) => {
            let vals: Vec<DynTensor> = (0..ins.len()).map(x).collect::<Result<_>>()?;
            let y = r.run.read_rounded(i)?;
            floats!(g.dtype(), c.name(), E => composite::<E>(r, i, *c, g, &vals, &y, saved))?
        }
        IrOp::Op(
            op @ (Op::MatMul
            | Op::Conv
            | Op::Pool(_)
            | Op::IndexSelect
            | Op::Gather
            | Op::Scatter(_)),
        ) => {
            let vals: Vec<DynTensor> = (0..ins.len()).map(x).collect::<Result<_>>()?;
            floats!(g.dtype(), op.name(), E => layer_op::<E>(r, i, *op, g, &vals))?
        }
        other => {
            return Err(exec_error(format!(
                "the backward does not differentiate {} yet",
                other.name()
            )));
        }
    })
}

/// The input's gradient of the reduction `kind` of `x` along `axis` that gave `y`, given
/// `y`'s gradient `g`: the reductions' rule.
fn reduction(
    kind: ReduceGrad,
    x: &DynTensor,
    y: &DynTensor,
    g: &DynTensor,
    axis: usize,
) -> Result<DynTensor> {
    floats!(g.dtype(), "reduce", E => {
        let (xs, ys, gs) = (x.storage_arc::<E>()?, y.storage_arc::<E>()?, g.storage_arc::<E>()?);
        let (xs, ys, gs) = ((&xs, x.layout()), (&ys, y.layout()), (&gs, g.layout()));
        let (s, l) = reduce::reduce_back(kind, xs, ys, gs, Some(axis))?;
        Ok(DynTensor::from_arc(s, l))
    })
}

/// `g` summed over the dims it was broadcast along from `dims`: dense.
fn sum_to(g: &DynTensor, dims: &[usize]) -> Result<DynTensor> {
    floats!(g.dtype(), "expand", E => {
        let s = crate::autograd::sum_to_storage(g.storage::<E>()?, g.layout(), dims)?;
        Ok(DynTensor::dense(s, dims))
    })
}

/// A gradient's storage seen through `layout`.
fn viewed<E: Float>((s, l): (Storage<E>, Layout)) -> DynTensor {
    DynTensor::from_arc(Arc::new(s), l)
}

/// An operand as a rule reads it.
fn op<E: Float>(t: &DynTensor) -> Result<(&Storage<E>, &Layout)> {
    Ok((t.storage::<E>()?, t.layout()))
}

/// The backward of a composite node `i` (`c`) with input values `vals` and output `y`.
fn composite<E: Float>(
    r: &Reverse<'_, '_>,
    i: NodeId,
    c: Composite,
    g: &DynTensor,
    vals: &[DynTensor],
    y: &DynTensor,
    saved: Saved,
) -> Result<Vec<(NodeId, DynTensor)>> {
    let ins = &r.run.graph().nodes[i].inputs;
    let want = |k: usize| r.wants(i, k);
    let mut out = Vec::new();
    match c {
        Composite::Linear => {
            // The weight `[O, I]` was read transposed; its gradient comes back as `[I, O]`.
            let wt = vals[1].layout().transpose(0, 1);
            let deferred = r.deferred.get(&i).copied();
            let bias = match (ins.get(2), deferred) {
                (Some(&b), _) | (None, Some(b)) => Some(b).filter(|&b| r.needs[b]),
                (None, None) => None,
            };
            let (dx, dwt, db) = matmul_layouts_grads(
                op::<E>(&vals[0])?,
                (vals[1].storage::<E>()?, &wt),
                op::<E>(g)?,
                [want(0), want(1)],
                bias.is_some(),
            )?;
            if let Some(dx) = dx {
                out.push((ins[0], viewed(dx)));
            }
            if let Some((s, l)) = dwt {
                out.push((ins[1], viewed((s, l.transpose(0, 1)))));
            }
            if let (Some(b), Some(db)) = (bias, db) {
                let dims = r.run.read_rounded(b)?.dims().to_vec();
                out.push((b, DynTensor::dense(db, &dims)));
            }
        }
        Composite::LayerNorm { .. } | Composite::RmsNorm { .. } => {
            let stats = saved
                .as_ref()
                .and_then(|s| s.downcast_ref::<NormStats>())
                .ok_or_else(|| exec_error("the forward kept no norm statistics".into()))?;
            let weight = vals.get(1).map(op::<E>).transpose()?;
            let (dx, dw, db) = norm::norm_back(
                op::<E>(g)?,
                op::<E>(&vals[0])?,
                weight,
                stats,
                [want(0), want(1), want(2)],
            )?;
            let grads = [dx, dw, db];
            for (k, d) in grads.into_iter().enumerate() {
                if let Some(d) = d {
                    out.push((ins[k], DynTensor::dense(d, vals[k].dims())));
                }
            }
        }
        Composite::Softmax { axis } | Composite::LogSoftmax { axis } => {
            let log = matches!(c, Composite::LogSoftmax { .. });
            let (ys, gs) = (y.storage_arc::<E>()?, g.storage_arc::<E>()?);
            let (ys, gs) = ((&ys, y.layout()), (&gs, g.layout()));
            let (s, l) = softmax::softmax_back(ys, gs, axis, log)?;
            out.push((ins[0], DynTensor::from_arc(s, l)));
        }
        Composite::CausalAttention { .. } => {
            let back = saved
                .and_then(|s| s.downcast::<QkvBack<E>>().ok())
                .ok_or_else(|| exec_error("the forward kept no attention backward".into()))?;
            let dy: Seq<E> = g.to_tensor()?;
            out.push((ins[0], DynTensor::of(&back(&dy))));
        }
        Composite::Mean { axis, .. } => {
            let dx = reduction(ReduceGrad::Mean, &vals[0], y, g, axis)?;
            out.push((ins[0], dx));
        }
        Composite::CrossEntropy { .. } => {
            let stats = saved
                .as_ref()
                .and_then(|s| s.downcast_ref::<CrossEntropySaved>())
                .ok_or_else(|| exec_error("the forward kept no cross entropy statistics".into()))?;
            let t = (vals[1].storage::<i64>()?, vals[1].layout());
            let dx = loss::cross_entropy_back(op::<E>(g)?, op::<E>(&vals[0])?, t, stats)?;
            out.push((ins[0], DynTensor::dense(dx, vals[0].dims())));
        }
    }
    Ok(out)
}

/// The backward of a product, a convolution, a pooling, an `index_select`, a `gather` or a
/// `scatter` node `i`.
fn layer_op<E: Float>(
    r: &Reverse<'_, '_>,
    i: NodeId,
    o: Op,
    g: &DynTensor,
    vals: &[DynTensor],
) -> Result<Vec<(NodeId, DynTensor)>> {
    let n = &r.run.graph().nodes[i];
    let ins = &n.inputs;
    let want = |k: usize| r.wants(i, k);
    let mut out = Vec::new();
    match o {
        Op::MatMul => {
            let (da, db, _) = matmul_layouts_grads(
                op::<E>(&vals[0])?,
                op::<E>(&vals[1])?,
                op::<E>(g)?,
                [want(0), want(1)],
                false,
            )?;
            out.extend(da.map(|d| (ins[0], viewed(d))));
            out.extend(db.map(|d| (ins[1], viewed(d))));
        }
        Op::Conv => {
            let (_, p) = conv_params(&n.attrs)?;
            let (dx, dw, db) = conv::conv2d_back(
                op::<E>(g)?,
                op::<E>(&vals[0])?,
                op::<E>(&vals[1])?,
                &p,
                [want(0), want(1), want(2)],
            )?;
            for (k, d) in [dx, dw, db].into_iter().enumerate() {
                if let Some(d) = d {
                    out.push((ins[k], DynTensor::dense(d, vals[k].dims())));
                }
            }
        }
        Op::Pool(kind) => {
            let (_, p) = pool_params(&n.attrs)?;
            let dx = conv::pool2d_back(op::<E>(g)?, op::<E>(&vals[0])?, kind, &p)?;
            out.push((ins[0], DynTensor::dense(dx, vals[0].dims())));
        }
        Op::IndexSelect | Op::Gather => {
            let axis = n
                .attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let idx = (vals[1].storage::<i64>()?, vals[1].layout());
            let (g, dims) = (op::<E>(g)?, vals[0].dims());
            let d = if o == Op::IndexSelect {
                index::index_select_back(g, idx, dims, axis)?
            } else {
                index::gather_back(g, idx, dims, axis)?
            };
            out.push((ins[0], DynTensor::dense(d, dims)));
        }
        Op::Scatter(kind) => {
            let axis = n
                .attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let idx = (vals[1].storage::<i64>()?, vals[1].layout());
            if want(0) {
                // `scatter_add` adds to its input, so the input's gradient is the output's.
                let dx = match kind {
                    ScatterOp::Add => g.clone(),
                    ScatterOp::Set => {
                        let d = index::scatter_input_back(op::<E>(g)?, idx, axis)?;
                        DynTensor::dense(d, vals[0].dims())
                    }
                };
                out.push((ins[0], dx));
            }
            if want(2) {
                let dims = vals[2].dims();
                let d = index::scatter_src_back(op::<E>(g)?, idx, dims, axis)?;
                out.push((ins[2], DynTensor::dense(d, dims)));
            }
        }
        _ => unreachable!("only these ops come here"),
    }
    Ok(out)
}
