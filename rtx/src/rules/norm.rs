//! The backward of the fused layer norm and RMS norm (`Storage::norm_rows`): the input's,
//! weight's and bias's gradients from the statistics the forward saved.

use super::Operand;
use crate::error::Result;
use rtx_backends::Storage;
use rtx_backends::storage::NormStats;
use rtx_kernels::Float;

/// What [`norm_back`] returns: the input's gradient and the weight's and the bias's, each
/// dense at its operand's dims, each `None` when not asked for.
pub(crate) type NormGrads<E> = (Option<Storage<E>>, Option<Storage<E>>, Option<Storage<E>>);

/// The gradients of a norm over the rows of `x` (with `weight`) given the output's gradient
/// `dy` and the forward's `stats`; `need` says which of the input, the weight and the bias
/// are wanted. Nothing runs when none is.
pub(crate) fn norm_back<E: Float>(
    dy: Operand<'_, E>,
    x: Operand<'_, E>,
    weight: Option<Operand<'_, E>>,
    stats: &NormStats,
    [need_x, need_w, need_b]: [bool; 3],
) -> Result<NormGrads<E>> {
    if !need_x && !need_w && !need_b {
        return Ok((None, None, None));
    }
    let (dx, dw, db) =
        dy.0.norm_rows_backward(dy.1, x, weight, stats, (need_w, need_b))?;
    Ok((need_x.then_some(dx), dw, db))
}
