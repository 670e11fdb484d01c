//! The backward of the ops that read a part of their input or hand each input a part of
//! their output: `narrow` (its gradient placed back at its entries, in zeros) and the joins,
//! concatenation and stacking (each input's gradient a view of its part of the output's).

use super::Operand;
use super::index::index_select_back;
use crate::error::Result;
use rtx_backends::{Layout, Storage};
use rtx_kernels::Num;

/// The gradient of a tensor of dims `dims` narrowed to `start..start + len` along `axis`,
/// given the narrowed part's gradient `g`: dense, zero outside the part. It is
/// `index_select`'s rule with the indices `start..start + len`, so the two launch the same
/// kernels.
pub(crate) fn narrow_back<E: Num>(
    g: Operand<'_, E>,
    dims: &[usize],
    axis: usize,
    start: usize,
) -> Result<Storage<E>> {
    let len = g.1.dims()[axis];
    let idx: Vec<i64> = (start..start + len).map(|i| i as i64).collect();
    let idx = Storage::from_vec(idx, g.0.device())?;
    index_select_back(g, (&idx, &Layout::contiguous(&[len])), dims, axis)
}

/// The layout of the part of a join's gradient `g` that belongs to one input: entries
/// `start..start + len` of `axis`, with that axis dropped when `drop_axis` (a stacked input,
/// `len` 1).
pub(crate) fn part_of(
    g: &Layout,
    axis: usize,
    start: usize,
    len: usize,
    drop_axis: bool,
) -> Layout {
    let l = g.narrow(axis, start, len);
    if !drop_axis {
        return l;
    }
    let (mut dims, mut strides) = (l.dims().to_vec(), l.strides().to_vec());
    dims.remove(axis);
    strides.remove(axis);
    Layout::new(&dims, &strides, l.offset())
}
