//! The backward of `index_select` and `gather` (the output's gradient added into zeros where
//! it was read from), of `scatter` and `scatter_add` (the source's gradient read back where it
//! was written), and of the selections by a mask, `where_cond` and `masked_fill` (the output's
//! gradient where a branch was taken, zero elsewhere).

use super::Operand;
use crate::error::Result;
use rtx_backends::{Layout, Storage};
use rtx_kernels::{Element, Num};

/// The gradient `[..dims]` of a tensor of dims `dims` whose slices along `axis` at `idx` were
/// selected, given the selection's gradient `g`: dense, zero where nothing was read.
pub(crate) fn index_select_back<E: Num>(
    g: Operand<'_, E>,
    idx: Operand<'_, i64>,
    dims: &[usize],
    axis: usize,
) -> Result<Storage<E>> {
    // The index vector, repeated with stride 0 across every axis but `axis`, is a gather's
    // index tensor without copying it.
    let mut strides = vec![0; dims.len()];
    strides[axis] = idx.1.strides()[0];
    let il = Layout::new(g.1.dims(), &strides, idx.1.offset());
    gather_back(g, (idx.0, &il), dims, axis)
}

/// The gradient `[..dims]` of a tensor of dims `dims` that `gather` read along `axis` at
/// `idx` (the output's dims), given the output's gradient `g`: `g` scatter-added into zeros
/// (repeated indices accumulate).
pub(crate) fn gather_back<E: Num>(
    g: Operand<'_, E>,
    idx: Operand<'_, i64>,
    dims: &[usize],
    axis: usize,
) -> Result<Storage<E>> {
    let numel = dims.iter().product();
    let zeros = Storage::full(E::ZERO, numel, g.0.device())?;
    Ok(zeros.scatter_add(&Layout::contiguous(dims), idx, g, axis)?)
}

/// The input's gradient of `scatter` along `axis` at `idx`, given the output's gradient `g`:
/// `g` with zeros where the source overwrote the input. (`scatter_add`'s is `g` itself: the
/// input is added to, not replaced.)
pub(crate) fn scatter_input_back<E: Element>(
    g: Operand<'_, E>,
    idx: Operand<'_, i64>,
    axis: usize,
) -> Result<Storage<E>> {
    let dims = idx.1.dims();
    let zeros = Storage::full(E::default(), dims.iter().product(), g.0.device())?;
    Ok(g.0.scatter(g.1, idx, (&zeros, &Layout::contiguous(dims)), axis)?)
}

/// The source's gradient of `scatter` or `scatter_add` along `axis` at `idx`, for a source of
/// dims `src_dims`, given the output's gradient `g`: `g` gathered at the index, in zeros where
/// the source is larger than the index (those elements were never written).
pub(crate) fn scatter_src_back<E: Element>(
    g: Operand<'_, E>,
    idx: Operand<'_, i64>,
    src_dims: &[usize],
    axis: usize,
) -> Result<Storage<E>> {
    let picked = g.0.gather(g.1, idx.0, idx.1, axis)?;
    let d = idx.1.dims();
    if d == src_dims {
        return Ok(picked);
    }
    // Scattering along axis 0 with each position's own row number writes `picked` into the
    // leading block of the zeros.
    let zeros = Storage::full(E::default(), src_dims.iter().product(), g.0.device())?;
    let rows = Storage::from_vec((0..d[0] as i64).collect(), g.0.device())?;
    let mut strides = vec![0; d.len()];
    strides[0] = 1;
    let rl = Layout::new(d, &strides, 0);
    Ok(zeros.scatter(
        &Layout::contiguous(src_dims),
        (&rows, &rl),
        (&picked, &Layout::contiguous(d)),
        0,
    )?)
}

/// The gradient of one branch of a selection by `mask` (`where_cond`'s `self` when `taken` is
/// true, its `other` or `masked_fill`'s input when false), given the output's gradient `g`:
/// `g` where `mask` is `taken`, zero elsewhere, dense in `g`'s dims. `mask` is seen at `g`'s
/// dims (broadcast); summing over the dims a branch was broadcast along is the caller's.
pub(crate) fn where_back<E: Element>(
    g: Operand<'_, E>,
    mask: Operand<'_, bool>,
    taken: bool,
) -> Result<Storage<E>> {
    let zero = Storage::full(E::default(), 1, g.0.device())?;
    let lz = Layout::contiguous(&[])
        .broadcast_to(g.1.dims())
        .expect("a scalar broadcasts");
    let (then, other) = if taken {
        (g, (&zero, &lz))
    } else {
        ((&zero, &lz), g)
    };
    Ok(Storage::where_cond(mask, then, other)?)
}
