//! The executor's primitive ops and views: each calls the backend entry point the tensor
//! method of the same op calls (`Storage::binary` with the operands broadcast as the typed
//! operators broadcast them, `Storage::reduce`, the planned product, ...), on the layouts
//! alone.
//!
//! Invariant: a view changes only the layout (a reshape copies first only where the tensor
//! method does: when no view has the new dims), and every result has the dims the node's op
//! gives its inputs.

use super::value::DynTensor;
use super::{Run, elements, exec_error, floats, nums};
use crate::error::Result;
use crate::ir::{Attrs, IrOp, NodeId};
use crate::tensor::matmul_layouts;
use rtx_backends::{Conv2dParams, Layout, Pool2dParams, Storage};
use rtx_kernels::op::{BinaryOp, CmpOp, Op, ReduceOp, ScatterOp, UnaryOp, markers};
use rtx_kernels::{DType, Element, Float, Num, Signed, UnaryOpT, UnaryVisitor};

/// Runs node `i`, a primitive op or a view, on its inputs `ins`.
pub(super) fn run(r: &Run<'_>, i: NodeId, ins: &[DynTensor]) -> Result<DynTensor> {
    let n = &r.graph().nodes[i];
    match &n.op {
        IrOp::Op(op) => op_node(*op, &n.attrs, ins, n.dtype),
        IrOp::Permute(perm) => Ok(ins[0].with_layout(ins[0].layout().permute(perm))),
        IrOp::Reshape => reshape(&ins[0], &target(r, i, &ins[0], false)?),
        IrOp::Expand => {
            let dims = target(r, i, &ins[0], true)?;
            let l = ins[0].layout().broadcast_to(&dims).ok_or_else(|| {
                exec_error(format!(
                    "dims {:?} do not broadcast to {dims:?}",
                    ins[0].dims()
                ))
            })?;
            Ok(ins[0].with_layout(l))
        }
        IrOp::Narrow { axis, start } => {
            let len = r.resolve(n).get(*axis).copied().flatten().ok_or_else(|| {
                exec_error(format!(
                    "the length along axis {axis} is not known at run time"
                ))
            })?;
            let size = ins[0].dims()[*axis];
            if start + len > size {
                return Err(exec_error(format!(
                    "range {start}..{} is out of bounds for axis {axis} of size {size}",
                    start + len
                )));
            }
            Ok(ins[0].with_layout(ins[0].layout().narrow(*axis, *start, len)))
        }
        IrOp::Size { axis } => {
            let size = ins[0].dims()[*axis] as f64;
            let device = ins[0].device();
            elements!(n.dtype, "size", E => {
                let s = Storage::<E>::full(E::from_f64(size), 1, device)?;
                Ok(DynTensor::dense(s, &[]))
            })
        }
        IrOp::Input(_) | IrOp::Param(_) | IrOp::Constant(_) | IrOp::Composite(_) => {
            unreachable!("the executor runs these nodes itself")
        }
    }
}

/// The dims a reshape or expand node gives: its shape, sized where it can be; a dim known
/// only at run time is worked out from the element count (reshape, one such dim at most) or
/// taken from the input's aligned dim (expand).
fn target(r: &Run<'_>, i: NodeId, x: &DynTensor, expand: bool) -> Result<Vec<usize>> {
    let n = &r.graph().nodes[i];
    let mut dims = r.resolve(n);
    if expand {
        let lead = dims.len().saturating_sub(x.dims().len());
        for (k, d) in dims.iter_mut().enumerate() {
            if d.is_none() && k >= lead && x.dims()[k - lead] != 1 {
                *d = Some(x.dims()[k - lead]);
            }
        }
    } else {
        let unknown: Vec<usize> = (0..dims.len()).filter(|&k| dims[k].is_none()).collect();
        if let [k] = unknown[..] {
            let known: usize = dims.iter().flatten().product();
            let numel = x.dims().iter().product::<usize>();
            if known == 0 || numel % known != 0 {
                return Err(exec_error(format!(
                    "{numel} elements do not fill a shape of {known} elements per run-time entry"
                )));
            }
            dims[k] = Some(numel / known);
        }
    }
    dims.iter()
        .map(|d| {
            d.ok_or_else(|| {
                exec_error(format!(
                    "its shape {} has a run-time dim that neither the inputs nor the element \
                     count sizes",
                    crate::ir::validate::shape_str(&n.shape)
                ))
            })
        })
        .collect()
}

/// `x` with dims `dims`: a view where the layout allows one, else a dense copy first, as
/// `Tensor::reshape` does.
pub(super) fn reshape(x: &DynTensor, dims: &[usize]) -> Result<DynTensor> {
    let (from, to) = (
        x.dims().iter().product::<usize>(),
        dims.iter().product::<usize>(),
    );
    if from != to {
        return Err(exec_error(format!(
            "{:?} ({from} elements) cannot become {dims:?} ({to} elements)",
            x.dims()
        )));
    }
    if let Some(l) = x.layout().reshape(dims) {
        return Ok(x.with_layout(l));
    }
    let dense = contiguous(x)?;
    Ok(dense.with_layout(Layout::contiguous(dims).with_offset(dense.layout().offset())))
}

/// A dense copy of `x`.
pub(super) fn contiguous(x: &DynTensor) -> Result<DynTensor> {
    elements!(x.dtype(), "copy", E => {
        let s = x.storage::<E>()?.contiguous(x.layout())?;
        Ok(DynTensor::dense(s, x.dims()))
    })
}

/// The broadcast of two operands' dims: the longer's, when the shorter broadcasts to it.
pub(super) fn broadcast_dims(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let (big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let lead = big.len() - small.len();
    let mut out = big.to_vec();
    for (k, &s) in small.iter().enumerate() {
        let d = &mut out[lead + k];
        match (*d, s) {
            (x, y) if x == y => {}
            (1, y) => *d = y,
            (_, 1) => {}
            _ => {
                return Err(exec_error(format!("dims {a:?} and {b:?} do not broadcast")));
            }
        }
    }
    Ok(out)
}

/// `x`'s layout broadcast to `dims`.
fn seen_at(x: &DynTensor, dims: &[usize]) -> Result<Layout> {
    x.layout()
        .broadcast_to(dims)
        .ok_or_else(|| exec_error(format!("dims {:?} do not broadcast to {dims:?}", x.dims())))
}

/// A primitive op on its inputs; `dtype` is the node's element type.
pub(super) fn op_node(op: Op, attrs: &Attrs, ins: &[DynTensor], dtype: DType) -> Result<DynTensor> {
    let name = op.name();
    match op {
        Op::Unary(u @ (UnaryOp::Neg | UnaryOp::Abs)) if !ins[0].dtype().is_float() => {
            let x = &ins[0];
            match x.dtype() {
                DType::I32 => signed::<i32>(x, u),
                DType::I64 => signed::<i64>(x, u),
                other => Err(exec_error(format!("{name} is not defined for {other}"))),
            }
        }
        Op::Unary(u) => floats!(ins[0].dtype(), name, E => unary::<E>(&ins[0], u)),
        Op::Binary(b) => {
            let dims = broadcast_dims(ins[0].dims(), ins[1].dims())?;
            let (la, lb) = (seen_at(&ins[0], &dims)?, seen_at(&ins[1], &dims)?);
            nums!(ins[0].dtype(), name, E => {
                let (a, c) = (ins[0].storage::<E>()?, ins[1].storage::<E>()?);
                Ok(DynTensor::dense(binary(b, (a, &la), (c, &lb))?, &dims))
            })
        }
        Op::Cmp(c) => {
            let dims = broadcast_dims(ins[0].dims(), ins[1].dims())?;
            let (la, lb) = (seen_at(&ins[0], &dims)?, seen_at(&ins[1], &dims)?);
            elements!(ins[0].dtype(), name, E => {
                let (a, b) = (ins[0].storage::<E>()?, ins[1].storage::<E>()?);
                Ok(DynTensor::dense(compare(c, (a, &la), (b, &lb))?, &dims))
            })
        }
        Op::Where => {
            // Any of the three may be broadcast: `masked_fill` is `[mask, fill, x]`, with a
            // scalar fill.
            let (cond, x, other) = (&ins[0], &ins[1], &ins[2]);
            let dims = broadcast_dims(&broadcast_dims(cond.dims(), x.dims())?, other.dims())?;
            let (lc, lx, lo) = (
                seen_at(cond, &dims)?,
                seen_at(x, &dims)?,
                seen_at(other, &dims)?,
            );
            elements!(x.dtype(), name, E => {
                let s = Storage::where_cond(
                    (cond.storage::<bool>()?, &lc),
                    (x.storage::<E>()?, &lx),
                    (other.storage::<E>()?, &lo),
                )?;
                Ok(DynTensor::dense(s, &dims))
            })
        }
        Op::Reduce(r) => {
            let axis = attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let x = &ins[0];
            let mut dims = x.dims().to_vec();
            dims.remove(axis);
            let y = nums!(x.dtype(), name, E => {
                let s = x.storage::<E>()?;
                match r {
                    ReduceOp::ArgMax | ReduceOp::ArgMin => {
                        Ok(DynTensor::dense(s.arg_reduce(x.layout(), axis, r)?, &dims))
                    }
                    _ => Ok(DynTensor::dense(s.reduce(x.layout(), axis, r)?, &dims)),
                }
            })?;
            Ok(if attrs.keepdim { kept(&y, axis) } else { y })
        }
        Op::Cast => super::cast(&ins[0], dtype),
        Op::Copy => contiguous(&ins[0]),
        Op::MatMul => nums!(ins[0].dtype(), name, E => {
            let (a, b) = (&ins[0], &ins[1]);
            let (s, dims) = matmul_layouts(
                (a.storage::<E>()?, a.layout()),
                (b.storage::<E>()?, b.layout()),
                None,
            )?;
            Ok(DynTensor::dense(s, &dims))
        }),
        Op::Conv => conv(attrs, ins),
        Op::Pool(kind) => {
            let (p, params) = pool_params(attrs)?;
            let x = &ins[0];
            if x.dims().len() != 4 {
                return Err(exec_error(format!(
                    "pools {:?}, not [N, C, H, W]",
                    x.dims()
                )));
            }
            let d = x.dims();
            let size = |a: usize| {
                params.output_size(a, d[2 + a]).ok_or_else(|| {
                    exec_error(format!("the window {p:?} does not fit the input {d:?}"))
                })
            };
            let dims = [d[0], d[1], size(0)?, size(1)?];
            floats!(x.dtype(), name, E => {
                let s = x.storage::<E>()?.pool2d(x.layout(), kind, &params)?;
                Ok(DynTensor::dense(s, &dims))
            })
        }
        Op::IndexSelect => {
            let axis = attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let (x, idx) = (&ins[0], &ins[1]);
            let mut dims = x.dims().to_vec();
            dims[axis] = idx.dims()[0];
            elements!(x.dtype(), name, E => {
                let s = x.storage::<E>()?.index_select(
                    x.layout(),
                    idx.storage::<i64>()?,
                    idx.layout(),
                    axis,
                )?;
                Ok(DynTensor::dense(s, &dims))
            })
        }
        Op::Gather => {
            let axis = attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let (x, idx) = (&ins[0], &ins[1]);
            elements!(x.dtype(), name, E => {
                let s = x.storage::<E>()?.gather(
                    x.layout(),
                    idx.storage::<i64>()?,
                    idx.layout(),
                    axis,
                )?;
                Ok(DynTensor::dense(s, idx.dims()))
            })
        }
        Op::Concat => {
            let axis = attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let mut dims = ins[0].dims().to_vec();
            dims[axis] = ins.iter().map(|t| t.dims()[axis]).sum();
            elements!(ins[0].dtype(), name, E => {
                let parts = ins
                    .iter()
                    .map(|t| Ok((t.storage::<E>()?, t.layout())))
                    .collect::<Result<Vec<_>>>()?;
                Ok(DynTensor::dense(Storage::concat(&parts, axis)?, &dims))
            })
        }
        Op::Scatter(kind) => {
            let axis = attrs
                .axis
                .ok_or_else(|| exec_error("needs an axis".into()))?;
            let (x, idx, src) = (&ins[0], &ins[1], &ins[2]);
            let idx = (idx.storage::<i64>()?, idx.layout());
            match kind {
                ScatterOp::Set => elements!(x.dtype(), name, E => {
                    let src = (src.storage::<E>()?, src.layout());
                    let s = x.storage::<E>()?.scatter(x.layout(), idx, src, axis)?;
                    Ok(DynTensor::dense(s, x.dims()))
                }),
                ScatterOp::Add => nums!(x.dtype(), name, E => {
                    let src = (src.storage::<E>()?, src.layout());
                    let s = x.storage::<E>()?.scatter_add(x.layout(), idx, src, axis)?;
                    Ok(DynTensor::dense(s, x.dims()))
                }),
            }
        }
        Op::Random(_) => Err(exec_error(format!(
            "the executor does not run {name} yet (no compiled forward emits it)"
        ))),
    }
}

/// `y` with a size-1 axis inserted at `axis` (a reduction's kept axis).
fn kept(y: &DynTensor, axis: usize) -> DynTensor {
    let mut dims = y.dims().to_vec();
    dims.insert(axis, 1);
    y.with_layout(Layout::contiguous(&dims).with_offset(y.layout().offset()))
}

/// A float unary op, by its marker (the op's one kernel).
fn unary<E: Float>(x: &DynTensor, op: UnaryOp) -> Result<DynTensor> {
    struct Apply<'a, E: Float>(&'a Storage<E>, &'a Layout);
    impl<E: Float> UnaryVisitor for Apply<'_, E> {
        type Out = rtx_backends::Result<Storage<E>>;
        fn visit<O: UnaryOpT>(self) -> Self::Out {
            self.0.unary::<O>(self.1)
        }
    }
    let s = op.visit(Apply(x.storage::<E>()?, x.layout()))?;
    Ok(DynTensor::dense(s, x.dims()))
}

/// Negation or absolute value of a signed integer type.
fn signed<E: Signed>(x: &DynTensor, op: UnaryOp) -> Result<DynTensor> {
    let s = x.storage::<E>()?.signed_unary(op, x.layout())?;
    Ok(DynTensor::dense(s, x.dims()))
}

/// A binary op by its marker, both operands already broadcast.
fn binary<E: Num>(
    op: BinaryOp,
    (a, la): (&Storage<E>, &Layout),
    (b, lb): (&Storage<E>, &Layout),
) -> rtx_backends::Result<Storage<E>> {
    use markers as m;
    match op {
        BinaryOp::Add => a.binary::<m::Add>(la, b, lb),
        BinaryOp::Sub => a.binary::<m::Sub>(la, b, lb),
        BinaryOp::Mul => a.binary::<m::Mul>(la, b, lb),
        BinaryOp::Div => a.binary::<m::Div>(la, b, lb),
        BinaryOp::Max => a.binary::<m::Max>(la, b, lb),
        BinaryOp::Min => a.binary::<m::Min>(la, b, lb),
        BinaryOp::Pow => a.binary::<m::Pow>(la, b, lb),
    }
}

/// A comparison by its marker, both operands already broadcast.
fn compare<E: Element>(
    op: CmpOp,
    (a, la): (&Storage<E>, &Layout),
    (b, lb): (&Storage<E>, &Layout),
) -> rtx_backends::Result<Storage<bool>> {
    use markers as m;
    match op {
        CmpOp::Eq => a.cmp::<m::Eq>(la, b, lb),
        CmpOp::Ne => a.cmp::<m::Ne>(la, b, lb),
        CmpOp::Lt => a.cmp::<m::Lt>(la, b, lb),
        CmpOp::Le => a.cmp::<m::Le>(la, b, lb),
        CmpOp::Gt => a.cmp::<m::Gt>(la, b, lb),
        CmpOp::Ge => a.cmp::<m::Ge>(la, b, lb),
    }
}

/// A 2-d convolution `[N, C, H, W]` with its weight (and bias), as `Tensor::conv2d_bias`
/// runs it.
fn conv(attrs: &Attrs, ins: &[DynTensor]) -> Result<DynTensor> {
    let (c, p) = conv_params(attrs)?;
    let (x, w) = (&ins[0], &ins[1]);
    if x.dims().len() != 4 || w.dims().len() != 4 {
        return Err(exec_error(format!(
            "input {:?} and weight {:?}: the executor runs 2-d convolutions only",
            x.dims(),
            w.dims()
        )));
    }
    let (xd, wd) = (x.dims(), w.dims());
    let size = |a: usize| {
        p.output_size(a, xd[2 + a], wd[2 + a]).ok_or_else(|| {
            exec_error(format!(
                "the kernel {wd:?} does not fit the input {xd:?} ({c:?})"
            ))
        })
    };
    let dims = [xd[0], wd[0], size(0)?, size(1)?];
    floats!(x.dtype(), "conv", E => {
        let bias = match ins.get(2) {
            Some(b) => Some((b.storage::<E>()?, b.layout())),
            None => None,
        };
        let s = x.storage::<E>()?.conv2d(x.layout(), w.storage::<E>()?, w.layout(), bias, &p)?;
        Ok(DynTensor::dense(s, &dims))
    })
}

/// A convolution node's geometry, and the backend's settings for it.
pub(super) fn conv_params(attrs: &Attrs) -> Result<(crate::ir::ConvAttrs, Conv2dParams)> {
    let c = attrs
        .conv
        .ok_or_else(|| exec_error("needs conv geometry".into()))?;
    let p = Conv2dParams {
        stride: [c.stride; 2],
        padding: [c.padding; 2],
        dilation: [c.dilation; 2],
        groups: c.groups,
    };
    Ok((c, p))
}

/// A pooling node's window, and the backend's settings for it.
pub(super) fn pool_params(attrs: &Attrs) -> Result<(crate::ir::PoolAttrs, Pool2dParams)> {
    let p = attrs
        .pool
        .ok_or_else(|| exec_error("needs a pooling window".into()))?;
    let params = Pool2dParams {
        kernel: [p.kernel; 2],
        stride: [p.stride; 2],
        padding: [p.padding; 2],
    };
    Ok((p, params))
}
