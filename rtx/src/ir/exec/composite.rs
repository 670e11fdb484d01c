//! The executor's composite ops, each through the function the compiled forward calls for
//! it: the backend's softmax and mean, the fused norm (`Storage::norm_rows`, what the static
//! forward of `LayerNorm` and `RMSNorm` runs), the planned product with its bias epilogue
//! (`matmul_layouts`, what `Linear`'s static forward runs through
//! `Tensor::matmul_saving_bias`), `attend`, the attention `CausalSelfAttention`'s static
//! forward runs, and the fused cross entropy (`Storage::cross_entropy`, what
//! `nn::cross_entropy_with` and its static form run).
//!
//! Invariant: for the same operands on the same device, each result is bitwise the compiled
//! forward's, since it is the same call on the same layouts; and what a node keeps for its
//! backward is what the compiled forward keeps (the same statistics, the same backward).

use super::value::DynTensor;
use super::{exec_error, floats};
use crate::compile::layers::attention::{Seq, attend};
use crate::error::Result;
use crate::ir::Composite;
use crate::tensor::matmul_layouts;
use rtx_backends::Layout;
use rtx_kernels::Float;
use std::any::Any;

/// What a composite op's forward keeps for its backward: a norm's statistics
/// (`NormStats`), attention's backward (`QkvBack<E>`), cross entropy's row statistics
/// (`CrossEntropySaved`); `None` for the others.
pub(super) type Saved = Option<Box<dyn Any>>;

/// Runs the composite op `c` on its inputs `ins`: its output, and what its backward needs.
pub(super) fn run(c: Composite, ins: &[DynTensor]) -> Result<(DynTensor, Saved)> {
    let x = &ins[0];
    floats!(x.dtype(), c.name(), E => typed::<E>(c, ins))
}

/// [`run`] for the element type `E`.
fn typed<E: Float>(c: Composite, ins: &[DynTensor]) -> Result<(DynTensor, Saved)> {
    let x = &ins[0];
    let s = x.storage::<E>()?;
    let l = x.layout();
    let param = |k: usize| -> Result<Option<(&rtx_backends::Storage<E>, &Layout)>> {
        match ins.get(k) {
            Some(t) => Ok(Some((t.storage::<E>()?, t.layout()))),
            None => Ok(None),
        }
    };
    match c {
        Composite::Softmax { axis } => Ok((DynTensor::dense(s.softmax(l, axis)?, x.dims()), None)),
        Composite::LogSoftmax { axis } => {
            Ok((DynTensor::dense(s.log_softmax(l, axis)?, x.dims()), None))
        }
        Composite::Mean { axis, keepdim } => {
            let mut dims = x.dims().to_vec();
            if keepdim {
                dims[axis] = 1;
            } else {
                dims.remove(axis);
            }
            Ok((DynTensor::dense(s.mean(l, axis)?, &dims), None))
        }
        Composite::LayerNorm { eps } | Composite::RmsNorm { eps } => {
            let centered = matches!(c, Composite::LayerNorm { .. });
            let (y, stats) = s.norm_rows(l, param(1)?, param(2)?, eps, centered)?;
            Ok((DynTensor::dense(y, x.dims()), Some(Box::new(stats))))
        }
        Composite::Linear => {
            let w = &ins[1];
            if w.dims().len() != 2 {
                return Err(exec_error(format!(
                    "the weight {:?} is not [O, I]",
                    w.dims()
                )));
            }
            // The weight `[O, I]` read transposed, as the layer's `weight.t()` view reads it.
            let wt = w.layout().transpose(0, 1);
            let (y, dims) = matmul_layouts((s, l), (w.storage::<E>()?, &wt), param(2)?)?;
            Ok((DynTensor::dense(y, &dims), None))
        }
        Composite::CausalAttention { heads } => {
            let d = x.dims();
            if d.len() != 3 || heads == 0 || !d[2].is_multiple_of(3 * heads) {
                return Err(exec_error(format!(
                    "{d:?} is not a projection [B, T, 3D] that splits into {heads} heads"
                )));
            }
            let qkv: Seq<E> = x.to_tensor()?;
            let (y, backward) = attend(&qkv, heads);
            Ok((DynTensor::of(&y), Some(Box::new(backward))))
        }
        Composite::CrossEntropy {
            ignore_index,
            label_smoothing,
        } => {
            let t = &ins[1];
            let targets = (t.storage::<i64>()?, t.layout());
            let (loss, saved) =
                s.cross_entropy("cross_entropy", l, targets, ignore_index, label_smoothing)?;
            Ok((DynTensor::dense(loss, &[]), Some(Box::new(saved))))
        }
    }
}
