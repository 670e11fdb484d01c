//! Backend entry points for reductions along one axis (sum, prod, max, min, argmax, argmin,
//! mean, variance, logsumexp), full reductions, and softmax / log-softmax.
//!
//! Every reduction returns fresh contiguous storage with the reduced axis removed (the tensor
//! layer views it with the axis kept as 1 for `keepdim`); softmax keeps the input's sizes.

use super::Storage;
use crate::cpu::reduce as cpu;
use crate::{BackendError, Layout, Result};
use rtx_kernels::op::ReduceOp;
use rtx_kernels::{Element, Float, Num, Op};

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
            _ => Err(super::no_kernel(Op::Reduce(op).name(), self.device())),
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
            _ => Err(super::no_kernel(Op::Reduce(op).name(), self.device())),
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
            _ => Err(super::no_kernel(Op::Reduce(op).name(), self.device())),
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
            _ => Err(super::no_kernel("mean", self.device())),
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
            _ => Err(super::no_kernel("mean_all", self.device())),
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
            _ => Err(super::no_kernel(
                if sqrt { "std" } else { "var" },
                self.device(),
            )),
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
            _ => Err(super::no_kernel("logsumexp", self.device())),
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
            _ => Err(super::no_kernel("softmax", self.device())),
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
            _ => Err(super::no_kernel("log_softmax", self.device())),
        }
    }
}
