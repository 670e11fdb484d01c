//! The backward of `index_select`: the output's gradient rows added into zeros at the
//! indices they were read from.

use super::Operand;
use crate::error::Result;
use rtx_backends::{Layout, Storage};
use rtx_kernels::Num;

/// The gradient `[..dims]` of a tensor of dims `dims` whose slices along `axis` at `idx` were
/// selected, given the selection's gradient `g`: dense, zero where nothing was read.
pub(crate) fn index_select_back<E: Num>(
    g: Operand<'_, E>,
    idx: Operand<'_, i64>,
    dims: &[usize],
    axis: usize,
) -> Result<Storage<E>> {
    let numel = dims.iter().product();
    let zeros = Storage::full(E::ZERO, numel, g.0.device())?;
    // The index vector, repeated with stride 0 across every axis but `axis`, is a full index
    // tensor for scatter_add without copying it.
    let mut strides = vec![0; dims.len()];
    strides[axis] = idx.1.strides()[0];
    let il = Layout::new(g.1.dims(), &strides, idx.1.offset());
    Ok(zeros.scatter_add(&Layout::contiguous(dims), (idx.0, &il), g, axis)?)
}
