//! The backward of a 2-d convolution (input, weight and bias) and of 2-d pooling, through the
//! backend's backward kernels.

use super::Operand;
use crate::error::Result;
use rtx_backends::{Conv2dParams, Layout, Pool2dParams, Storage};
use rtx_kernels::Float;
use rtx_kernels::op::{PoolOp, ReduceOp};

/// `l`'s sizes as the four of a 2-d operand.
fn dims4(l: &Layout) -> [usize; 4] {
    let d = l.dims();
    [d[0], d[1], d[2], d[3]]
}

/// What [`conv2d_back`] returns: the gradients of the input, the weight and the bias, dense
/// at their operands' dims, each `None` when not asked for.
pub(crate) type ConvGrads<E> = (Option<Storage<E>>, Option<Storage<E>>, Option<Storage<E>>);

/// The gradients of a convolution of `x` `[N, C, H, W]` with `w` under `p`, given the output's
/// gradient `dy` `[N, O, HO, WO]`; `need` says which of the input, the weight and the bias are
/// wanted. The bias's is `dy` summed over positions per image, then over images.
pub(crate) fn conv2d_back<E: Float>(
    dy: Operand<'_, E>,
    x: Operand<'_, E>,
    w: Operand<'_, E>,
    p: &Conv2dParams,
    [need_x, need_w, need_b]: [bool; 3],
) -> Result<ConvGrads<E>> {
    let dx = match need_x {
        true => Some(dy.0.conv2d_backward_input(dy.1, w.0, w.1, dims4(x.1), p)?),
        false => None,
    };
    let dw = match need_w {
        true => Some(dy.0.conv2d_backward_weight(dy.1, x.0, x.1, dims4(w.1), p)?),
        false => None,
    };
    let db = match need_b {
        true => {
            let [n, o, ho, wo] = dims4(dy.1);
            let dense;
            let (g, offset) = match dy.1.is_contiguous() {
                true => (dy.0, dy.1.offset()),
                false => {
                    dense = dy.0.contiguous(dy.1)?;
                    (&dense, 0)
                }
            };
            let l = Layout::contiguous(&[n, o, ho * wo]).with_offset(offset);
            let per_image = g.reduce(&l, 2, ReduceOp::Sum)?;
            Some(per_image.reduce(&Layout::contiguous(&[n, o]), 0, ReduceOp::Sum)?)
        }
        false => None,
    };
    Ok((dx, dw, db))
}

/// The input's gradient of pooling `kind` of `x` under `p`, given the output's gradient `dy`:
/// dense at `x`'s dims.
pub(crate) fn pool2d_back<E: Float>(
    dy: Operand<'_, E>,
    x: Operand<'_, E>,
    kind: PoolOp,
    p: &Pool2dParams,
) -> Result<Storage<E>> {
    Ok(dy.0.pool2d_backward(dy.1, x.0, x.1, kind, p)?)
}
