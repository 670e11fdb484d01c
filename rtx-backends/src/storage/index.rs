//! Backend entry points for indexing and joining: index_select, gather, scatter and
//! scatter_add, concat, and the triangular masks behind tril/triu.
//!
//! Indices are `i64` storage on the same device as the data; an index out of range is a
//! [`BackendError::BadArgument`](crate::BackendError) naming the index, its position, the axis
//! and the axis size, reported before anything is written, with the same words on every
//! device. On a GPU each op is one kernel launch (see `cuda::ops_index`).

use super::erased::{AnyRef, AnyStorage, ForElement, ForNum};
use super::{Storage, host_only, same_device};
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
        let (x, i) = ((AnyRef::of(self), l), (AnyRef::of(indices), il));
        Ok(index_any(Index::Select { x, i, axis })?.into_typed())
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
        let (x, i) = ((AnyRef::of(self), l), (AnyRef::of(index), il));
        Ok(index_any(Index::Gather { x, i, axis })?.into_typed())
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
        let (x, i, src) = (
            (AnyRef::of(self), l),
            (AnyRef::of(index), il),
            (AnyRef::of(src), sl),
        );
        let add = false;
        Ok(index_any(Index::Scatter {
            x,
            i,
            src,
            axis,
            add,
        })?
        .into_typed())
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
        let (x, i, src) = (
            (AnyRef::of(self), l),
            (AnyRef::of(index), il),
            (AnyRef::of(src), sl),
        );
        let add = true;
        Ok(index_any(Index::Scatter {
            x,
            i,
            src,
            axis,
            add,
        })?
        .into_typed())
    }

    /// The parts joined along `axis` into one dense tensor; they agree on every other size.
    /// No parts give empty host storage (callers always pass at least one).
    pub fn concat(parts: &[(&Self, &Layout)], axis: usize) -> Result<Self> {
        if parts.is_empty() {
            // No part names an element type to erase; the CPU join of nothing is nothing.
            crate::dispatch::cpu();
            return Ok(Storage::Cpu(Vec::new()));
        }
        let parts: Vec<Operand> = parts.iter().map(|&(s, l)| (AnyRef::of(s), l)).collect();
        Ok(concat_any(&parts, axis)?.into_typed())
    }

    /// The elements on and below diagonal `k` of the last two axes (or on and above, when
    /// `upper`), with `E::default()` (zero, or `false`) elsewhere.
    pub fn triangle(&self, l: &Layout, k: i64, upper: bool) -> Result<Self> {
        let x = (AnyRef::of(self), l);
        Ok(index_any(Index::Triangle { x, k, upper })?.into_typed())
    }
}

// The entry points with the element type erased: not generic, so compiled once, here (see
// `erased.rs`).

/// A storage operand and its layout.
type Operand<'a> = (AnyRef<'a>, &'a Layout);

/// One call of an indexing op, its storages erased (`i` holds `i64` indices).
#[derive(Clone, Copy)]
enum Index<'a> {
    /// [`Storage::index_select`].
    Select {
        x: Operand<'a>,
        i: Operand<'a>,
        axis: usize,
    },
    /// [`Storage::gather`].
    Gather {
        x: Operand<'a>,
        i: Operand<'a>,
        axis: usize,
    },
    /// [`Storage::scatter`], or [`Storage::scatter_add`] when `add`.
    Scatter {
        x: Operand<'a>,
        i: Operand<'a>,
        src: Operand<'a>,
        axis: usize,
        add: bool,
    },
    /// [`Storage::triangle`].
    Triangle { x: Operand<'a>, k: i64, upper: bool },
}

impl<'a> Index<'a> {
    /// The op's name, as its errors give it.
    fn name(&self) -> &'static str {
        match self {
            Index::Select { .. } => "index_select",
            Index::Gather { .. } => "gather",
            Index::Scatter { add: false, .. } => "scatter",
            Index::Scatter { add: true, .. } => "scatter_add",
            Index::Triangle { upper: false, .. } => "tril",
            Index::Triangle { upper: true, .. } => "triu",
        }
    }

    /// The storage operands, the data (which decides the element type) first.
    fn args(&self) -> Vec<AnyRef<'a>> {
        match *self {
            Index::Select { x, i, .. } | Index::Gather { x, i, .. } => vec![x.0, i.0],
            Index::Scatter { x, i, src, .. } => vec![x.0, i.0, src.0],
            Index::Triangle { x, .. } => vec![x.0],
        }
    }

    /// The same call on the storages `h`, given in the order of [`Index::args`]: how the host
    /// copies of a registered backend's operands are run.
    fn on<'b>(self, h: &[AnyRef<'b>]) -> Index<'b>
    where
        'a: 'b,
    {
        match self {
            Index::Select { x, i, axis } => Index::Select {
                x: (h[0], x.1),
                i: (h[1], i.1),
                axis,
            },
            Index::Gather { x, i, axis } => Index::Gather {
                x: (h[0], x.1),
                i: (h[1], i.1),
                axis,
            },
            Index::Scatter {
                x,
                i,
                src,
                axis,
                add,
            } => Index::Scatter {
                x: (h[0], x.1),
                i: (h[1], i.1),
                src: (h[2], src.1),
                axis,
                add,
            },
            Index::Triangle { x, k, upper } => Index::Triangle {
                x: (h[0], x.1),
                k,
                upper,
            },
        }
    }
}

/// An indexing op of any element type, erased: compiled once, here. A registered backend runs
/// it on host copies.
fn index_any(c: Index) -> Result<AnyStorage> {
    let args = c.args();
    if let Some(out) = host_only(c.name(), &args, &|h| index_any(c.on(h))) {
        return out;
    }
    /// The ops for every element type.
    struct Body<'a>(Index<'a>);
    impl ForElement for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<E: Element>(self, s: &Storage<E>) -> Self::Out {
            let name = self.0.name();
            match self.0 {
                Index::Select { x, i, axis } => {
                    s.index_select_body(x.1, i.0.typed(name)?, i.1, axis)
                }
                Index::Gather { x, i, axis } => s.gather_body(x.1, i.0.typed(name)?, i.1, axis),
                Index::Scatter {
                    x, i, src, axis, ..
                } => s.scatter_with(
                    name,
                    x.1,
                    (i.0.typed(name)?, i.1),
                    (src.0.typed(name)?, src.1),
                    axis,
                    None::<fn(E, E) -> E>,
                ),
                Index::Triangle { x, k, upper } => s.triangle_body(x.1, k, upper),
            }
            .map(AnyStorage::from_typed)
        }
    }
    /// `scatter_add`, for numeric types only.
    struct Add<'a>(&'a Layout, Operand<'a>, Operand<'a>, usize);
    impl ForNum for Add<'_> {
        type Out = Result<AnyStorage>;
        fn run<N: Num>(self, s: &Storage<N>) -> Self::Out {
            let (op, (i, il), (src, sl)) = ("scatter_add", self.1, self.2);
            let (i, src) = (i.typed(op)?, src.typed(op)?);
            let add = Some(Num::add);
            s.scatter_with(op, self.0, (i, il), (src, sl), self.3, add)
                .map(AnyStorage::from_typed)
        }
    }
    match c {
        Index::Scatter {
            x,
            i,
            src,
            axis,
            add: true,
        } => x.0.nums("scatter_add", Add(x.1, i, src, axis)),
        _ => args[0].elements(Body(c)),
    }
}

/// The join of one or more parts of any element type, erased: compiled once, here. A
/// registered backend runs it on host copies.
fn concat_any(parts: &[Operand], axis: usize) -> Result<AnyStorage> {
    let args: Vec<AnyRef> = parts.iter().map(|p| p.0).collect();
    let on_copies = |h: &[AnyRef]| {
        let copies: Vec<Operand> = h.iter().zip(parts).map(|(&c, p)| (c, p.1)).collect();
        concat_any(&copies, axis)
    };
    if let Some(out) = host_only("concat", &args, &on_copies) {
        return out;
    }
    /// The body, run on the concrete element type.
    struct Body<'a>(&'a [Operand<'a>], usize);
    impl ForElement for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<E: Element>(self, _: &Storage<E>) -> Self::Out {
            let parts = self
                .0
                .iter()
                .map(|&(s, l)| Ok((s.typed::<E>("concat")?, l)))
                .collect::<Result<Vec<_>>>()?;
            Storage::concat_body(&parts, self.1).map(AnyStorage::from_typed)
        }
    }
    args[0].elements(Body(parts, axis))
}

impl<E: Element> Storage<E> {
    /// The body of [`Storage::index_select`] for one element type and a built-in device.
    fn index_select_body(
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

    /// The body of [`Storage::gather`] for one element type and a built-in device.
    fn gather_body(
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

    /// The body of [`Storage::concat`] for one element type and built-in devices.
    fn concat_body(parts: &[(&Self, &Layout)], axis: usize) -> Result<Self> {
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

    /// The body of [`Storage::triangle`] for one element type and a built-in device.
    fn triangle_body(&self, l: &Layout, k: i64, upper: bool) -> Result<Self> {
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
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }
}
