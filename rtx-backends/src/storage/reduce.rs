//! Backend entry points for reductions along one axis (sum, prod, max, min, argmax, argmin,
//! mean, variance, logsumexp), full reductions, and softmax / log-softmax.
//!
//! Every reduction returns fresh contiguous storage with the reduced axis removed (the tensor
//! layer views it with the axis kept as 1 for `keepdim`); softmax keeps the input's sizes.

use super::Storage;
use crate::cpu::reduce as cpu;
use crate::cuda::{CudaStorage, ops as gpu};
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
        check_axis(Op::Reduce(op).name(), l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::reduce(v, l, axis, op)?)),
            Storage::Cuda(c) => Ok(Storage::Cuda(cuda_reduce(c, l, axis, op)?)),
        }
    }

    /// Argmax or argmin along `axis`: the index of the first extreme, NaN counting as both.
    pub fn arg_reduce(&self, l: &Layout, axis: usize, op: ReduceOp) -> Result<Storage<i64>>
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
        }
    }

    /// Sum, product, max or min of every element, as one element. The order of the elements
    /// may follow storage rather than logical order, which only changes float rounding, and
    /// never with the thread count.
    pub fn reduce_all(&self, l: &Layout, op: ReduceOp) -> Result<Self>
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
        }
    }

    /// The mean along `axis`, accumulated in `E::Acc`.
    pub fn mean(&self, l: &Layout, axis: usize) -> Result<Self>
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
        }
    }

    /// The mean of every element, as one element.
    pub fn mean_all(&self, l: &Layout) -> Result<Self>
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
        }
    }

    /// The variance along `axis` divided by `size - correction` (two passes in `E::Acc`), or
    /// the standard deviation when `sqrt` is set.
    pub fn var(&self, l: &Layout, axis: usize, correction: usize, sqrt: bool) -> Result<Self>
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
        }
    }

    /// `ln Σ exp(x)` along `axis`, shifted by the maximum.
    pub fn logsumexp(&self, l: &Layout, axis: usize) -> Result<Self>
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
        }
    }

    /// Softmax along `axis`, computed in `E::Acc`; the output has the input's sizes.
    pub fn softmax(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        check_axis("softmax", l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::softmax(v, l, axis, false))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::softmax(c, l, axis, false)?)),
        }
    }

    /// Log-softmax along `axis`, computed as `(x - max) - ln Σ exp(x - max)` in `E::Acc`.
    pub fn log_softmax(&self, l: &Layout, axis: usize) -> Result<Self>
    where
        E: Float,
    {
        check_axis("log_softmax", l, axis)?;
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::softmax(v, l, axis, true))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::softmax(c, l, axis, true)?)),
        }
    }
}
