//! Backend entry points for indexing and joining: index_select, gather, scatter and
//! scatter_add, concat, and the triangular masks behind tril/triu.
//!
//! Indices are `i64` storage on the same device as the data; an index out of range is a
//! [`BackendError::BadArgument`](crate::BackendError) naming the index, its position, the axis
//! and the axis size, reported before anything is written, with the same words on every
//! device. On a GPU each op is one kernel launch (see `cuda::ops_index`).

use super::{Storage, same_device};
use crate::cpu::index as cpu;
use crate::cuda::ops_index as gpu;
use crate::{BackendError, Layout, Result};
use rtx_kernels::{Element, Num};

impl<E: Element> Storage<E> {
    /// The slices `indices` (a rank-1 layout) of axis `axis`, as a dense tensor.
    pub fn index_select(
        &self,
        l: &Layout,
        indices: &Storage<i64>,
        il: &Layout,
        axis: usize,
    ) -> Result<Self> {
        same_device("index_select", self, indices)?;
        crate::dispatch::on_cpu(self.device());
        match (self, indices) {
            (Storage::Cpu(v), Storage::Cpu(i)) => {
                Ok(Storage::Cpu(cpu::index_select(v, l, i, il, axis)?))
            }
            (Storage::Cuda(v), Storage::Cuda(i)) => Ok(Storage::Cuda(
                crate::cuda::ops::index_select(v, l, i, il, axis)?,
            )),
            _ => Err(super::no_kernel("index_select", self.device())),
        }
    }

    /// `self[.., index[p], ..]` along `axis` for every position `p` of `index`, which has the
    /// same rank and fits inside `self` off `axis`.
    pub fn gather(
        &self,
        l: &Layout,
        index: &Storage<i64>,
        il: &Layout,
        axis: usize,
    ) -> Result<Self> {
        same_device("gather", self, index)?;
        crate::dispatch::on_cpu(self.device());
        match (self, index) {
            (Storage::Cpu(v), Storage::Cpu(i)) => Ok(Storage::Cpu(cpu::gather(v, l, i, il, axis)?)),
            (Storage::Cuda(v), Storage::Cuda(i)) => {
                Ok(Storage::Cuda(gpu::gather(v, l, i, il, axis)?))
            }
            _ => Err(super::no_kernel("gather", self.device())),
        }
    }

    /// A dense copy of `self` with `src[p]` written at `[.., index[p], ..]` along `axis`; a
    /// repeated index keeps the last write in logical order.
    pub fn scatter(
        &self,
        l: &Layout,
        (index, il): (&Storage<i64>, &Layout),
        (src, sl): (&Self, &Layout),
        axis: usize,
    ) -> Result<Self> {
        self.scatter_with(
            "scatter",
            l,
            (index, il),
            (src, sl),
            axis,
            None::<fn(E, E) -> E>,
        )
    }

    /// A dense copy of `self` with `src[p]` added at `[.., index[p], ..]` along `axis`, in a
    /// fixed order (so float sums are reproducible).
    pub fn scatter_add(
        &self,
        l: &Layout,
        (index, il): (&Storage<i64>, &Layout),
        (src, sl): (&Self, &Layout),
        axis: usize,
    ) -> Result<Self>
    where
        E: Num,
    {
        self.scatter_with(
            "scatter_add",
            l,
            (index, il),
            (src, sl),
            axis,
            Some(Num::add),
        )
    }

    /// Scatter with `combine(old, new)`, or a plain write when `combine` is `None`.
    fn scatter_with(
        &self,
        op: &'static str,
        l: &Layout,
        (index, il): (&Storage<i64>, &Layout),
        (src, sl): (&Self, &Layout),
        axis: usize,
        combine: Option<impl Fn(E, E) -> E + Sync>,
    ) -> Result<Self> {
        same_device(op, self, index)?;
        same_device(op, self, src)?;
        crate::dispatch::on_cpu(self.device());
        match (self, index, src) {
            (Storage::Cpu(d), Storage::Cpu(i), Storage::Cpu(s)) => {
                let out = match combine {
                    Some(f) => cpu::scatter((d, l), (i, il), (s, sl), axis, op, f)?,
                    None => cpu::scatter((d, l), (i, il), (s, sl), axis, op, |_, s| s)?,
                };
                Ok(Storage::Cpu(out))
            }
            (Storage::Cuda(d), Storage::Cuda(i), Storage::Cuda(s)) => Ok(Storage::Cuda(
                gpu::scatter(op, (d, l), (i, il), (s, sl), axis, combine.is_some())?,
            )),
            _ => Err(super::no_kernel(op, self.device())),
        }
    }

    /// The parts joined along `axis` into one dense tensor; they agree on every other size.
    /// No parts give empty host storage (callers always pass at least one).
    pub fn concat(parts: &[(&Self, &Layout)], axis: usize) -> Result<Self> {
        if let Some(&(first, _)) = parts.first() {
            for &(p, _) in &parts[1..] {
                same_device("concat", first, p)?;
            }
        }
        if let Some(&(Storage::Cuda(_), _)) = parts.first() {
            let mut gpu_parts = Vec::with_capacity(parts.len());
            for &(s, l) in parts {
                match s {
                    Storage::Cuda(c) => gpu_parts.push((c, l)),
                    _ => return Err(super::no_kernel("concat", s.device())),
                }
            }
            return Ok(Storage::Cuda(gpu::concat(&gpu_parts, axis)?));
        }
        let mut host: Vec<(&[E], &Layout)> = Vec::with_capacity(parts.len());
        for &(s, l) in parts {
            match s {
                Storage::Cpu(v) => host.push((v.as_slice(), l)),
                _ => return Err(super::no_kernel("concat", s.device())),
            }
        }
        crate::dispatch::cpu();
        Ok(Storage::Cpu(cpu::concat(&host, axis)))
    }

    /// The elements on and below diagonal `k` of the last two axes (or on and above, when
    /// `upper`), with `E::default()` (zero, or `false`) elsewhere.
    pub fn triangle(&self, l: &Layout, k: i64, upper: bool) -> Result<Self> {
        if l.rank() < 2 {
            return Err(BackendError::BadArgument {
                op: if upper { "triu" } else { "tril" },
                msg: format!("needs a tensor of rank 2 or more, not rank {}", l.rank()),
            });
        }
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(cpu::triangle(v, l, k, upper, E::default()))),
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::triangle(c, l, k, upper)?)),
            Storage::Backend(_) => Err(super::no_kernel("triangle", self.device())),
        }
    }
}
