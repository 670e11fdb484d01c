//! Backend entry points for reductions along one axis (sum, prod, max, min, argmax, argmin,
//! mean, variance, logsumexp), full reductions, softmax / log-softmax and their fused input
//! gradient along the last axis.
//!
//! Every reduction returns fresh contiguous storage with the reduced axis removed (the tensor
//! layer views it with the axis kept as 1 for `keepdim`); softmax keeps the input's sizes.

use super::erased::{AnyRef, AnyStorage, ForFloat, ForNum};
use super::{Storage, host_only, same_device};
use crate::cpu::reduce as cpu;
use crate::cuda::{CudaStorage, ops as gpu, ops_softmax};
use crate::{BackendError, Layout, Result};
use rtx_kernels::kernel::KernelSource;
use rtx_kernels::kernels;
use rtx_kernels::op::ReduceOp;
use rtx_kernels::{Element, Float, Num, Op};

/// The reduce kernel of an op (the arg ops return indices: `cuda::ops_index::arg_reduce`).
fn reduce_kernel(op: ReduceOp) -> Option<&'static KernelSource> {
    match op {
        ReduceOp::Sum => Some(&kernels::sum::KERNEL),
        ReduceOp::Prod => Some(&kernels::prod::KERNEL),
        ReduceOp::Max => Some(&kernels::amax::KERNEL),
        ReduceOp::Min => Some(&kernels::amin::KERNEL),
        ReduceOp::ArgMax | ReduceOp::ArgMin => None,
    }
}

/// `op` along `axis` of a GPU view, with the CPU backend's errors (an empty axis has no max).
fn cuda_reduce<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    axis: usize,
    op: ReduceOp,
) -> Result<CudaStorage<E>> {
    if matches!(op, ReduceOp::Max | ReduceOp::Min) && l.dims()[axis] == 0 {
        return Err(cpu::empty_axis(op, l, axis));
    }
    let kernel = reduce_kernel(op).ok_or(BackendError::NoKernel {
        op: Op::Reduce(op).name(),
        device: crate::Device::Cuda(c.ordinal()),
    })?;
    gpu::reduce(c, l, axis, kernel)
}

/// A GPU view seen as one flat axis (a dense copy first when it is not contiguous).
fn flat<E: Element>(c: &CudaStorage<E>, l: &Layout) -> Result<(CudaStorage<E>, Layout)> {
    let n = l.numel();
    if l.is_contiguous() {
        Ok((c.clone(), Layout::new(&[n], &[1], l.offset())))
    } else {
        Ok((gpu::dense(c, l)?, Layout::contiguous(&[n])))
    }
}

/// The elements of `l` in row-major order: borrowed when they are one contiguous range.
fn dense_rows<'a, E: Element>(v: &'a [E], l: &Layout) -> std::borrow::Cow<'a, [E]> {
    match l.contiguous_range() {
        Some(r) => std::borrow::Cow::Borrowed(&v[r]),
        None => std::borrow::Cow::Owned(crate::cpu::elementwise::map(v, l, |x| x)),
    }
}

/// Checks that `axis` exists in `l`, naming the op otherwise.
fn check_axis(op: &'static str, l: &Layout, axis: usize) -> Result<()> {
    if axis < l.rank() {
        Ok(())
    } else {
        Err(BackendError::BadArgument {
            op,
            msg: format!("axis {axis} is out of range for sizes {:?}", l.dims()),
        })
    }
}

impl<E: Element> Storage<E> {
    /// Sum, product, max or min along `axis` (max and min of an empty axis are errors).
    pub fn reduce(&self, l: &Layout, axis: usize, op: ReduceOp) -> Result<Self>
    where
        E: Num,
    {
        Ok(num_reduce_any(AnyRef::of(self), l, NumReduction::Axis(op, axis))?.into_typed())
    }

    /// Argmax or argmin along `axis`: the index of the first extreme, NaN counting as both.
    pub fn arg_reduce(&self, l: &Layout, axis: usize, op: ReduceOp) -> Result<Storage<i64>>
    where
        E: Num,
    {
        Ok(num_reduce_any(AnyRef::of(self), l, NumReduction::Arg(op, axis))?.into_typed())
    }

    /// Sum, product, max or min of every element, as one element. The order of the elements
    /// may follow storage rather than logical order, which only changes float rounding, and
    /// never with the thread count.
    pub fn reduce_all(&self, l: &Layout, op: ReduceOp) -> Result<Self>
    where
        E: Num,
    {
        Ok(num_reduce_any(AnyRef::of(self), l, NumReduction::All(op))?.into_typed())
    }

    /// The mean along `axis`, accumulated in `E::Acc`.
    pub fn mean(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        Ok(float_reduce_any(AnyRef::of(self), l, FloatReduction::Mean(axis))?.into_typed())
    }

    /// The mean of every element, as one element.
    pub fn mean_all(&self, l: &Layout) -> Result<Self>
    where
        E: Float,
    {
        Ok(float_reduce_any(AnyRef::of(self), l, FloatReduction::MeanAll)?.into_typed())
    }

    /// The variance along `axis` divided by `size - correction` (two passes in `E::Acc`), or
    /// the standard deviation when `sqrt` is set.
    pub fn var(&self, l: &Layout, axis: usize, correction: usize, sqrt: bool) -> Result<Self>
    where
        E: Float,
    {
        let r = FloatReduction::Var {
            axis,
            correction,
            sqrt,
        };
        Ok(float_reduce_any(AnyRef::of(self), l, r)?.into_typed())
    }

    /// `ln Σ exp(x)` along `axis`, shifted by the maximum.
    pub fn logsumexp(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        Ok(float_reduce_any(AnyRef::of(self), l, FloatReduction::LogSumExp(axis))?.into_typed())
    }

    /// Softmax along `axis`, computed in `E::Acc`; the output has the input's sizes.
    pub fn softmax(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        Ok(float_reduce_any(AnyRef::of(self), l, FloatReduction::Softmax(axis))?.into_typed())
    }

    /// Log-softmax along `axis`, computed as `(x - max) - ln Σ exp(x - max)` in `E::Acc`.
    pub fn log_softmax(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        let r = FloatReduction::LogSoftmax(axis);
        Ok(float_reduce_any(AnyRef::of(self), l, r)?.into_typed())
    }

    /// The input gradient of softmax (`log` false) or log-softmax along the last axis, fused:
    /// `self` viewed by `l` is the forward's output `y` and `g` its gradient (the same
    /// sizes); returns the dense `y (g - Σ g y)` or `g - exp(y) Σ g`, each row's sum and every
    /// output computed in `E::Acc` and rounded once. One launch on a GPU. (An optimization of
    /// the composition of primitive ops that `rtx` also defines.)
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// let l = Layout::contiguous(&[1, 2]);
    /// let y = Storage::from_vec(vec![0.25f32, 0.75], Device::Cpu).unwrap();
    /// let g = Storage::from_vec(vec![1.0f32, 3.0], Device::Cpu).unwrap();
    /// let dx = y.softmax_backward(&l, (&g, &l), false).unwrap();
    /// assert_eq!(dx.to_vec(&l), vec![-0.375, 0.375]);
    /// ```
    pub fn softmax_backward(&self, l: &Layout, (g, gl): (&Self, &Layout), log: bool) -> Result<Self>
    where
        E: Float,
    {
        let r = FloatReduction::SoftmaxBackward(AnyRef::of(g), gl, log);
        Ok(float_reduce_any(AnyRef::of(self), l, r)?.into_typed())
    }
}

// The entry points with the element type erased: not generic, so compiled once, here (see
// `erased.rs`).

/// A reduction of any numeric type.
#[derive(Clone, Copy)]
enum NumReduction {
    /// `reduce` along an axis.
    Axis(ReduceOp, usize),
    /// `arg_reduce` along an axis.
    Arg(ReduceOp, usize),
    /// `reduce_all`.
    All(ReduceOp),
}

fn num_reduce_any(x: AnyRef, l: &Layout, r: NumReduction) -> Result<AnyStorage> {
    if let Some(out) = host_only("reduce", &[x], &|h| num_reduce_any(h[0], l, r)) {
        return out;
    }
    struct Body<'a>(&'a Layout, NumReduction);
    impl ForNum for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<N: Num>(self, s: &Storage<N>) -> Self::Out {
            let l = self.0;
            Ok(match self.1 {
                NumReduction::Axis(op, axis) => AnyStorage::from_typed(s.reduce_body(l, axis, op)?),
                NumReduction::Arg(op, axis) => AnyStorage::I64(s.arg_reduce_body(l, axis, op)?),
                NumReduction::All(op) => AnyStorage::from_typed(s.reduce_all_body(l, op)?),
            })
        }
    }
    let op = match r {
        NumReduction::Axis(op, _) | NumReduction::Arg(op, _) | NumReduction::All(op) => op,
    };
    x.nums(Op::Reduce(op).name(), Body(l, r))
}

/// A reduction (or a softmax) of any float type.
#[derive(Clone, Copy)]
enum FloatReduction<'a> {
    /// `mean` along an axis.
    Mean(usize),
    /// `mean_all`.
    MeanAll,
    /// `var` along an axis.
    Var {
        axis: usize,
        correction: usize,
        sqrt: bool,
    },
    /// `logsumexp` along an axis.
    LogSumExp(usize),
    /// `softmax` along an axis.
    Softmax(usize),
    /// `log_softmax` along an axis.
    LogSoftmax(usize),
    /// The fused input gradient: the output gradient and its layout, and whether of
    /// log-softmax.
    SoftmaxBackward(AnyRef<'a>, &'a Layout, bool),
}

fn float_reduce_any(x: AnyRef, l: &Layout, r: FloatReduction) -> Result<AnyStorage> {
    let host = match r {
        FloatReduction::SoftmaxBackward(g, gl, log) => host_only("softmax", &[x, g], &|h| {
            float_reduce_any(h[0], l, FloatReduction::SoftmaxBackward(h[1], gl, log))
        }),
        _ => host_only("reduce", &[x], &|h| float_reduce_any(h[0], l, r)),
    };
    if let Some(out) = host {
        return out;
    }
    struct Body<'a>(&'a Layout, FloatReduction<'a>);
    impl ForFloat for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            let l = self.0;
            match self.1 {
                FloatReduction::Mean(axis) => s.mean_body(l, axis),
                FloatReduction::MeanAll => s.mean_all_body(l),
                FloatReduction::Var {
                    axis,
                    correction,
                    sqrt,
                } => s.var_body(l, axis, correction, sqrt),
                FloatReduction::LogSumExp(axis) => s.logsumexp_body(l, axis),
                FloatReduction::Softmax(axis) => s.softmax_body(l, axis),
                FloatReduction::LogSoftmax(axis) => s.log_softmax_body(l, axis),
                FloatReduction::SoftmaxBackward(g, gl, log) => {
                    let g = g.typed::<F>("softmax_backward")?;
                    s.softmax_backward_body(l, (g, gl), log)
                }
            }
            .map(AnyStorage::from_typed)
        }
    }
    let name = match r {
        FloatReduction::Mean(_) | FloatReduction::MeanAll => "mean",
        FloatReduction::Var { .. } => "var",
        FloatReduction::LogSumExp(_) => "logsumexp",
        FloatReduction::Softmax(_) => "softmax",
        FloatReduction::LogSoftmax(_) => "log_softmax",
        FloatReduction::SoftmaxBackward(..) => "softmax_backward",
    };
    x.floats(name, Body(l, r))
}

impl<E: Element> Storage<E> {
    /// The body of [`Storage::reduce`] for one element type.
    fn reduce_body(&self, l: &Layout, axis: usize, op: ReduceOp) -> Result<Self>
    where
        E: Num,
    {
        check_axis(Op::Reduce(op).name(), l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::reduce(v, l, axis, op)?)),
            Storage::Cuda(c) => Ok(Storage::Cuda(cuda_reduce(c, l, axis, op)?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::arg_reduce`] for one element type.
    fn arg_reduce_body(&self, l: &Layout, axis: usize, op: ReduceOp) -> Result<Storage<i64>>
    where
        E: Num,
    {
        check_axis(Op::Reduce(op).name(), l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::arg_reduce(v, l, axis, op)?)),
            Storage::Cuda(c) => {
                let max = match op {
                    ReduceOp::ArgMax => true,
                    ReduceOp::ArgMin => false,
                    _ => {
                        return Err(BackendError::BadArgument {
                            op: Op::Reduce(op).name(),
                            msg: "gives values, not indices: call reduce".into(),
                        });
                    }
                };
                if l.dims()[axis] == 0 {
                    return Err(cpu::empty_axis(op, l, axis));
                }
                Ok(Storage::Cuda(crate::cuda::ops_index::arg_reduce(
                    c, l, axis, max,
                )?))
            }
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::reduce_all`] for one element type.
    fn reduce_all_body(&self, l: &Layout, op: ReduceOp) -> Result<Self>
    where
        E: Num,
    {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => {
                let flat = cpu::dense_elements(v, l);
                let fl = Layout::contiguous(&[flat.len()]);
                Ok(Storage::Cpu(cpu::reduce(&flat, &fl, 0, op)?))
            }
            Storage::Cuda(c) => {
                let (x, fl) = flat(c, l)?;
                Ok(Storage::Cuda(cuda_reduce(&x, &fl, 0, op)?))
            }
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::mean`] for one element type.
    fn mean_body(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        check_axis("mean", l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::mean(v, l, axis))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::reduce(
                c,
                l,
                axis,
                &kernels::mean::KERNEL,
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::mean_all`] for one element type.
    fn mean_all_body(&self, l: &Layout) -> Result<Self>
    where
        E: Float,
    {
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => {
                let flat = cpu::dense_elements(v, l);
                Ok(Storage::Cpu(cpu::mean(
                    &flat,
                    &Layout::contiguous(&[flat.len()]),
                    0,
                )))
            }
            Storage::Cuda(c) => {
                let (x, fl) = flat(c, l)?;
                Ok(Storage::Cuda(gpu::reduce(
                    &x,
                    &fl,
                    0,
                    &kernels::mean::KERNEL,
                )?))
            }
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::var`] for one element type.
    fn var_body(&self, l: &Layout, axis: usize, correction: usize, sqrt: bool) -> Result<Self>
    where
        E: Float,
    {
        check_axis(if sqrt { "std" } else { "var" }, l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::var(v, l, axis, correction, sqrt))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::row_stat(
                c,
                l,
                axis,
                &kernels::var_rows::KERNEL,
                &[
                    crate::cuda::Arg::U64(correction as u64),
                    crate::cuda::Arg::U32(sqrt as u32),
                ],
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::logsumexp`] for one element type.
    fn logsumexp_body(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        check_axis("logsumexp", l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::logsumexp(v, l, axis))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::row_stat(
                c,
                l,
                axis,
                &kernels::logsumexp_rows::KERNEL,
                &[],
            )?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::softmax`] for one element type.
    fn softmax_body(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        check_axis("softmax", l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::softmax(v, l, axis, false))),
            Storage::Cuda(c) => Ok(Storage::Cuda(ops_softmax::softmax(c, l, axis, false)?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::log_softmax`] for one element type.
    fn log_softmax_body(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        check_axis("log_softmax", l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::softmax(v, l, axis, true))),
            Storage::Cuda(c) => Ok(Storage::Cuda(ops_softmax::softmax(c, l, axis, true)?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::softmax_backward`] for one element type.
    fn softmax_backward_body(
        &self,
        l: &Layout,
        (g, gl): (&Self, &Layout),
        log: bool,
    ) -> Result<Self>
    where
        E: Float,
    {
        let op = if log {
            "log_softmax backward"
        } else {
            "softmax backward"
        };
        same_device(op, self, g)?;
        if l.rank() == 0 || gl.dims() != l.dims() {
            return Err(BackendError::BadArgument {
                op,
                msg: format!(
                    "output {:?} and gradient {:?} must have the same sizes, with a last axis",
                    l.dims(),
                    gl.dims()
                ),
            });
        }
        crate::dispatch::on_cpu(self.device());
        match (self, g) {
            (Storage::Cpu(y), Storage::Cpu(gv)) => {
                let cols = l.dims()[l.rank() - 1];
                let (y, gv) = (dense_rows(y, l), dense_rows(gv, gl));
                Ok(Storage::Cpu(crate::cpu::softmax_back::softmax_backward(
                    &y, &gv, cols, log,
                )))
            }
            (Storage::Cuda(y), Storage::Cuda(gc)) => Ok(Storage::Cuda(
                ops_softmax::softmax_backward((y, l), (gc, gl), log)?,
            )),
            _ => Err(BackendError::DeviceMismatch {
                op,
                lhs: self.device(),
                rhs: g.device(),
            }),
        }
    }
}
