//! The backward of softmax and log-softmax along the last axis: the backend's fused row
//! kernel (`Storage::softmax_backward`: one launch on a GPU, the sum and every output in the
//! compute type, rounded once).

use super::Operand;
use crate::error::Result;
use rtx_backends::Storage;
use rtx_kernels::Float;

/// The input's gradient of softmax (`log = false`) or log-softmax (`log = true`) along the
/// last axis, given the output `y` and its gradient `g` (of one shape): dense at `y`'s dims.
pub(crate) fn softmax_back_rows<E: Float>(
    y: Operand<'_, E>,
    g: Operand<'_, E>,
    log: bool,
) -> Result<Storage<E>> {
    Ok(y.0.softmax_backward(y.1, g, log)?)
}
