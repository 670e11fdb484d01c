//! Backward rules of the indexing ops and joins: index_select and gather send the gradient
//! back with an index-add / scatter-add into zeros, scatter's source reads it back with a
//! gather, and the joins hand each input its own slice of the output gradient (a view).

use super::{as_float, from_float};
use crate::error::Result;
use crate::shape::{Dim, HasAxis, InsertAxis, ReduceAxis, Shape};
use crate::tensor::{Replaced, Tensor};

use rtx_kernels::{DType, Element, Num};

/// Runs `$body` with `$f` naming the concrete float type that `$e` is (only float tensors
/// carry gradient history, while many ops are generic over any element type).
macro_rules! by_float {
    ($e:ty, $f:ident => $body:expr) => {
        match <$e as Element>::DTYPE {
            DType::F32 => {
                type $f = f32;
                $body
            }
            DType::F64 => {
                type $f = f64;
                $body
            }
            DType::F16 => {
                type $f = rtx_kernels::f16;
                $body
            }
            DType::BF16 => {
                type $f = rtx_kernels::bf16;
                $body
            }
            _ => unreachable!("only float tensors carry gradient history"),
        }
    };
}

/// The gradient of `index_select` along `I`: `g`'s slices added into zeros shaped `orig` at
/// `idx` (repeated indices accumulate).
pub(crate) fn index_select_back<const I: usize, S, D, E>(
    g: &Tensor<Replaced<S, I, D>, E>,
    orig: S,
    idx: &Tensor<(D,), i64>,
) -> Result<Tensor<S, E>>
where
    S: ReduceAxis<I>,
    D: Dim,
    E: Element,
    <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
{
    fn place<const I: usize, S, D, F: Num>(
        g: &Tensor<Replaced<S, I, D>, F>,
        orig: S,
        idx: &Tensor<(D,), i64>,
    ) -> Result<Tensor<S, F>>
    where
        S: ReduceAxis<I>,
        D: Dim,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        let (g, idx) = ((g.storage(), g.layout()), (idx.storage(), idx.layout()));
        let s = crate::rules::index::index_select_back(g, idx, &orig.dims(), I)?;
        Ok(Tensor::from_storage(s, orig))
    }
    by_float!(E, F => Ok(from_float(place::<I, S, D, F>(as_float(g), orig, idx)?)))
}

/// The gradient of `gather` along `I`: `g` scatter-added into zeros shaped `orig`.
pub(crate) fn gather_back<const I: usize, S, S2, E>(
    g: &Tensor<S2, E>,
    orig: S,
    index: &Tensor<S2, i64>,
) -> Result<Tensor<S, E>>
where
    S: HasAxis<I>,
    S2: Shape,
    E: Element,
{
    fn place<const I: usize, S: HasAxis<I>, S2: Shape, F: Num>(
        g: &Tensor<S2, F>,
        orig: S,
        index: &Tensor<S2, i64>,
    ) -> Result<Tensor<S, F>> {
        let (g, idx) = ((g.storage(), g.layout()), (index.storage(), index.layout()));
        let s = crate::rules::index::gather_back(g, idx, &orig.dims(), I)?;
        Ok(Tensor::from_storage(s, orig))
    }
    by_float!(E, F => Ok(from_float(place::<I, S, S2, F>(as_float(g), orig, index)?)))
}

/// The gradient of a scatter's source: `g` gathered at the index along `I`, in zeros shaped
/// like the source where the source is larger than the index.
pub(crate) fn gather_into<const I: usize, S, S2, S3, E>(
    g: &Tensor<S, E>,
    index: &Tensor<S2, i64>,
    src: S3,
) -> Result<Tensor<S3, E>>
where
    S: HasAxis<I>,
    S2: Shape,
    S3: Shape,
    E: Element,
{
    let (gl, idx) = ((g.storage(), g.layout()), (index.storage(), index.layout()));
    let s = crate::rules::index::scatter_src_back(gl, idx, &src.dims(), I)?;
    Ok(Tensor::from_storage(s, src))
}

/// The input's gradient of `scatter` along `I`: `g` with zeros where the source was written.
pub(crate) fn scatter_input_back<const I: usize, S, S2, E>(
    g: &Tensor<S, E>,
    index: &Tensor<S2, i64>,
) -> Result<Tensor<S, E>>
where
    S: HasAxis<I>,
    S2: Shape,
    E: Element,
{
    let (gl, idx) = ((g.storage(), g.layout()), (index.storage(), index.layout()));
    let s = crate::rules::index::scatter_input_back(gl, idx, I)?;
    Ok(Tensor::from_storage(s, g.shape()))
}

/// The part of a join's gradient `g` that belongs to an input shaped `shape`: entries
/// `start..start + len` of axis `axis` (a view), with that axis dropped when `drop_axis`
/// (a stacked input).
pub(crate) fn slice_of<S: Shape, T: Shape, E: Element>(
    g: &Tensor<S, E>,
    shape: T,
    axis: usize,
    start: usize,
    drop_axis: bool,
) -> Tensor<T, E> {
    let len = if drop_axis { 1 } else { shape.dims()[axis] };
    let l = crate::rules::views::part_of(g.layout(), axis, start, len, drop_axis);
    g.view(l, shape)
}
