//! The backward of the fused cross entropy (`Storage::cross_entropy`): the logits' gradient
//! from what the forward saved (on a GPU, one launch).

use super::Operand;
use crate::error::Result;
use rtx_backends::Storage;
use rtx_backends::storage::CrossEntropySaved;
use rtx_kernels::Float;

/// The gradient of cross entropy over the logits `x` `[B, C]` against the class indices `t`
/// `[B]`, given the loss's gradient `g` (a scalar) and the forward's `saved`: dense at `x`'s
/// dims.
pub(crate) fn cross_entropy_back<E: Float>(
    g: Operand<'_, E>,
    x: Operand<'_, E>,
    t: Operand<'_, i64>,
    saved: &CrossEntropySaved,
) -> Result<Storage<E>> {
    Ok(g.0.cross_entropy_backward(g.1, x, t, saved)?)
}
