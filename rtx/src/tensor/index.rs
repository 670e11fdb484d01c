//! Indexing ops: index_select, gather, scatter, scatter_add, index_add, and the triangular
//! masks tril/triu. PyTorch semantics; indices are `i64` tensors.
//!
//! The axis is a const parameter checked against the shape when compiling. What the types
//! cannot prove is checked when the op runs and reported naming the op: an index out of
//! `0..size` (negative indices are errors, as in PyTorch's gather and index_select), and an
//! index tensor larger than the data it indexes. Scatter is functional: it returns a new
//! tensor and leaves `self` untouched.

use super::{Replaced, Tensor};
use crate::autograd;
use crate::error::{Result, bail, ok};
use crate::shape::{Dim, HasAxis, InsertAxis, ReduceAxis, Shape, describe};
use const_panic::concat_panic;
use rtx_backends::Layout;
use rtx_kernels::{Element, Num};
use std::marker::PhantomData;

/// Gather and scatter index with a tensor of the data's own rank (checked when compiling).
/// Returns a marker of `B`, so a method whose operand is an unnameable `impl Shape` can run the
/// check in its own `const` block, `B` inferred through [`operand_is`] (the block must sit in
/// the method the user calls: see `crate::shape::checks`).
#[track_caller]
const fn same_rank<A: Shape, B: Shape>(op: &str, what: &str) -> PhantomData<B> {
    if A::RANK != B::RANK {
        concat_panic!({}: op, ": the ", {}: what, " has rank ", B::RANK, " but the input has rank ", A::RANK, " (they must be equal)");
    }
    PhantomData
}

/// Ties the marker a `const` block returns to the shape of `operand`.
fn operand_is<B: Shape, E: Element>(_operand: &Tensor<B, E>, _marker: PhantomData<B>) {}

/// Checks that the index shape is no larger than `big` (named `what`) on every axis but
/// `skip`, naming both shapes.
fn check_fits<A: Shape, B: Shape>(
    op: &'static str,
    index: &A,
    what: &str,
    big: &B,
    skip: Option<usize>,
) -> Result<()> {
    let (s, b) = (index.dims(), big.dims());
    if let Some(i) = (0..s.len()).find(|&i| Some(i) != skip && s[i] > b[i]) {
        bail!(
            op,
            "index shape {} is larger than {what} shape {} at axis {i} ({} > {})",
            describe(index),
            describe(big),
            s[i],
            b[i]
        );
    }
    Ok(())
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The slices of axis `I` at `indices`, in order (PyTorch's `index_select`); the new size
    /// along `I` is the number of indices, with its dimension type.
    ///
    /// # Panics
    /// When an index is negative or not below the size of axis `I` (see
    /// [`Tensor::try_index_select`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<3, 2>, i32> = Tensor::from_array([[1, 2], [3, 4], [5, 6]], Device::Cpu);
    /// let idx: Tensor<Rank1<2>, i64> = Tensor::from_array([2, 0], Device::Cpu);
    /// let y: Tensor<Rank2<2, 2>, i32> = x.index_select::<0, _>(&idx);
    /// assert_eq!(y.to_vec(), vec![5, 6, 1, 2]);
    /// ```
    #[track_caller]
    pub fn index_select<const I: usize, D: Dim>(
        &self,
        indices: &Tensor<(D,), i64>,
    ) -> Tensor<Replaced<S, I, D>, E>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        ok(self.try_index_select::<I, D>(indices))
    }

    /// [`Tensor::index_select`], returning an error that names the bad index, the axis and its
    /// size.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let idx: Tensor<Rank1<2>, i64> = Tensor::from_array([1, 3], Device::Cpu);
    /// let err = x.try_index_select::<1, _>(&idx).err().unwrap();
    /// assert_eq!(err.to_string(), "index_select: index 3 at [1] is out of bounds for axis 1 of size 3");
    /// ```
    pub fn try_index_select<const I: usize, D: Dim>(
        &self,
        indices: &Tensor<(D,), i64>,
    ) -> Result<Tensor<Replaced<S, I, D>, E>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        let out =
            self.storage()
                .index_select(self.layout(), indices.storage(), indices.layout(), I)?;
        let mut dims = self.dims().to_vec();
        dims[I] = indices.numel();
        let shape = Replaced::<S, I, D>::from_dims(&dims).expect("index_select dims");
        let out = Tensor::from_storage(out, shape);
        if !autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        let (orig, idx) = (self.shape(), indices.clone());
        Ok(out.record(vec![self.node().cloned()], move |g| {
            let dx = autograd::index::index_select_back::<I, S, D, E>(g, orig, &idx)?;
            Ok(vec![autograd::erase(dx)])
        }))
    }

    /// `out[p] = self[p with axis I replaced by index[p]]` (PyTorch's `gather`). The index has
    /// the input's rank and the output has the index's shape; off axis `I` the index may be
    /// smaller than the input, never larger.
    ///
    /// # Panics
    /// When an index is out of range or the index shape does not fit (see
    /// [`Tensor::try_gather`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu);
    /// let idx: Tensor<Rank2<2, 2>, i64> = Tensor::from_array([[2, 0], [1, 1]], Device::Cpu);
    /// assert_eq!(x.gather::<1, _>(&idx).to_vec(), vec![3.0, 1.0, 5.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn gather<const I: usize, S2: Shape>(&self, index: &Tensor<S2, i64>) -> Tensor<S2, E>
    where
        S: HasAxis<I>,
    {
        const { same_rank::<S, S2>("gather", "index") };
        ok(self.gather_run::<I, S2>(index))
    }

    /// [`Tensor::gather`], returning an error naming the bad index or both shapes.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<(usize, Const<3>)> = Tensor::zeros((2, Const), Device::Cpu);
    /// let idx: Tensor<Rank2<3, 1>, i64> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let err = x.try_gather::<1, _>(&idx).err().unwrap();
    /// assert_eq!(err.to_string(), "gather: index shape [3, 1] is larger than input shape [2, 3] at axis 0 (3 > 2)");
    /// ```
    pub fn try_gather<const I: usize, S2: Shape>(
        &self,
        index: &Tensor<S2, i64>,
    ) -> Result<Tensor<S2, E>>
    where
        S: HasAxis<I>,
    {
        const { same_rank::<S, S2>("gather", "index") };
        self.gather_run::<I, S2>(index)
    }

    /// The body of `gather` and `try_gather` after their const check.
    pub(crate) fn gather_run<const I: usize, S2: Shape>(
        &self,
        index: &Tensor<S2, i64>,
    ) -> Result<Tensor<S2, E>>
    where
        S: HasAxis<I>,
    {
        check_fits("gather", &index.shape(), "input", &self.shape(), Some(I))?;
        let out = self
            .storage()
            .gather(self.layout(), index.storage(), index.layout(), I)?;
        let out = Tensor::from_storage(out, index.shape());
        if !autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        let (orig, idx) = (self.shape(), index.clone());
        Ok(out.record(vec![self.node().cloned()], move |g| {
            let dx = autograd::index::gather_back::<I, S, S2, E>(g, orig, &idx)?;
            Ok(vec![autograd::erase(dx)])
        }))
    }

    /// A copy of `self` with `src[p]` written at `p with axis I replaced by index[p]`, for
    /// every position `p` of `index` (PyTorch's out-of-place `scatter`). The index has the
    /// input's rank, fits inside `src`, and inside `self` off axis `I`. Where an index repeats
    /// along a line, the last write in logical order wins (PyTorch leaves that unspecified).
    ///
    /// # Panics
    /// When an index is out of range or a shape does not fit (see [`Tensor::try_scatter`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>, i32> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let idx: Tensor<Rank2<2, 1>, i64> = Tensor::from_array([[2], [0]], Device::Cpu);
    /// let src: Tensor<Rank2<2, 1>, i32> = Tensor::from_array([[7], [8]], Device::Cpu);
    /// assert_eq!(x.scatter::<1>(&idx, &src).to_vec(), vec![0, 0, 7, 8, 0, 0]);
    /// ```
    #[track_caller]
    pub fn scatter<const I: usize>(
        &self,
        index: &Tensor<impl Shape, i64>,
        src: &Tensor<impl Shape, E>,
    ) -> Self
    where
        S: HasAxis<I>,
    {
        operand_is(index, const { same_rank::<S, _>("scatter", "index") });
        operand_is(src, const { same_rank::<S, _>("scatter", "source") });
        ok(self.scatter_run::<I>(index, src))
    }

    /// [`Tensor::scatter`], returning an error naming the bad index or the shapes.
    pub fn try_scatter<const I: usize>(
        &self,
        index: &Tensor<impl Shape, i64>,
        src: &Tensor<impl Shape, E>,
    ) -> Result<Self>
    where
        S: HasAxis<I>,
    {
        operand_is(index, const { same_rank::<S, _>("scatter", "index") });
        operand_is(src, const { same_rank::<S, _>("scatter", "source") });
        self.scatter_run::<I>(index, src)
    }

    /// The body of `scatter` and `try_scatter` after their const checks.
    pub(crate) fn scatter_run<const I: usize>(
        &self,
        index: &Tensor<impl Shape, i64>,
        src: &Tensor<impl Shape, E>,
    ) -> Result<Self>
    where
        S: HasAxis<I>,
    {
        let (il, sl) = scatter_checks::<I, false, _, _, _, _>(self, index, src)?;
        let out = self.storage().scatter(
            self.layout(),
            (index.storage(), &il),
            (src.storage(), &sl),
            I,
        )?;
        Ok(track_scatter::<I, false, _, _, _, _>(
            Tensor::from_storage(out, self.shape()),
            self,
            index,
            src,
        ))
    }

    /// The elements on and below diagonal `k` of the last two axes, zero (`false` for bool)
    /// above it (PyTorch's `tril`): `k = 0` is the main diagonal, `k > 0` above it, `k < 0`
    /// below. Leading axes are a batch of matrices. The tensor needs rank 2 or more, which the
    /// bound `S: HasAxis<1>` checks when compiling.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>, i32> = Tensor::from_array([[1, 2, 3], [4, 5, 6]], Device::Cpu);
    /// assert_eq!(x.tril(0).to_vec(), vec![1, 0, 0, 4, 5, 0]);
    /// assert_eq!(x.tril(-1).to_vec(), vec![0, 0, 0, 4, 0, 0]);
    /// ```
    pub fn tril(&self, k: i64) -> Self
    where
        S: HasAxis<1>,
    {
        ok(self.try_tril(k))
    }

    /// [`Tensor::tril`], returning device errors.
    pub fn try_tril(&self, k: i64) -> Result<Self>
    where
        S: HasAxis<1>,
    {
        let out = Tensor::from_storage(
            self.storage().triangle(self.layout(), k, false)?,
            self.shape(),
        );
        Ok(self.track_view(out, move |g| g.try_tril(k)))
    }

    /// The elements on and above diagonal `k` of the last two axes, zero (`false` for bool)
    /// below it (PyTorch's `triu`); rank 2 or more, as for [`Tensor::tril`].
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let causal: Tensor<Rank2<3, 3>, bool> = Tensor::full((Const, Const), true, Device::Cpu);
    /// let future = causal.triu(1);
    /// assert_eq!(future.to_vec(), vec![false, true, true, false, false, true, false, false, false]);
    /// ```
    pub fn triu(&self, k: i64) -> Self
    where
        S: HasAxis<1>,
    {
        ok(self.try_triu(k))
    }

    /// [`Tensor::triu`], returning device errors.
    pub fn try_triu(&self, k: i64) -> Result<Self>
    where
        S: HasAxis<1>,
    {
        let out = Tensor::from_storage(
            self.storage().triangle(self.layout(), k, true)?,
            self.shape(),
        );
        Ok(self.track_view(out, move |g| g.try_triu(k)))
    }
}

/// The shape checks shared by scatter and scatter_add; returns the index and source
/// layouts to pass on.
fn scatter_checks<const I: usize, const ADD: bool, S: Shape, S2: Shape, S3: Shape, E: Element>(
    x: &Tensor<S, E>,
    index: &Tensor<S2, i64>,
    src: &Tensor<S3, E>,
) -> Result<(Layout, Layout)> {
    let op = if ADD { "scatter_add" } else { "scatter" };
    check_fits(op, &index.shape(), "input", &x.shape(), Some(I))?;
    check_fits(op, &index.shape(), "source", &src.shape(), None)?;
    Ok((*index.layout(), *src.layout()))
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// A copy of `self` with `src[p]` added at `p with axis I replaced by index[p]`, for every
    /// position `p` of `index` (PyTorch's out-of-place `scatter_add`). Sums along a repeated
    /// index run in logical order, so float results never depend on the thread count.
    ///
    /// # Panics
    /// When an index is out of range or a shape does not fit (see
    /// [`Tensor::try_scatter_add`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    /// let idx: Tensor<Rank1<4>, i64> = Tensor::from_array([0, 2, 0, 0], Device::Cpu);
    /// let src: Tensor<Rank1<4>> = Tensor::from_array([1.0, 2.0, 3.0, 4.0], Device::Cpu);
    /// assert_eq!(x.scatter_add::<0>(&idx, &src).to_vec(), vec![8.0, 0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn scatter_add<const I: usize>(
        &self,
        index: &Tensor<impl Shape, i64>,
        src: &Tensor<impl Shape, E>,
    ) -> Self
    where
        E: Num,
        S: HasAxis<I>,
    {
        operand_is(index, const { same_rank::<S, _>("scatter_add", "index") });
        operand_is(src, const { same_rank::<S, _>("scatter_add", "source") });
        ok(self.scatter_add_run::<I>(index, src))
    }

    /// [`Tensor::scatter_add`], returning an error naming the bad index or the shapes.
    pub fn try_scatter_add<const I: usize>(
        &self,
        index: &Tensor<impl Shape, i64>,
        src: &Tensor<impl Shape, E>,
    ) -> Result<Self>
    where
        E: Num,
        S: HasAxis<I>,
    {
        operand_is(index, const { same_rank::<S, _>("scatter_add", "index") });
        operand_is(src, const { same_rank::<S, _>("scatter_add", "source") });
        self.scatter_add_run::<I>(index, src)
    }

    /// The body of `scatter_add` and `try_scatter_add` after their const checks.
    pub(crate) fn scatter_add_run<const I: usize>(
        &self,
        index: &Tensor<impl Shape, i64>,
        src: &Tensor<impl Shape, E>,
    ) -> Result<Self>
    where
        E: Num,
        S: HasAxis<I>,
    {
        let (il, sl) = scatter_checks::<I, true, _, _, _, _>(self, index, src)?;
        let out = self.storage().scatter_add(
            self.layout(),
            (index.storage(), &il),
            (src.storage(), &sl),
            I,
        )?;
        Ok(track_scatter::<I, true, _, _, _, _>(
            Tensor::from_storage(out, self.shape()),
            self,
            index,
            src,
        ))
    }

    /// A copy of `self` with slice `j` of `src` along axis `I` added to slice `indices[j]`
    /// (PyTorch's out-of-place `index_add`); repeated indices accumulate in order.
    ///
    /// # Panics
    /// When an index is out of range or `src` does not match `self` off axis `I` (see
    /// [`Tensor::try_index_add`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<3, 2>> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let idx: Tensor<Rank1<2>, i64> = Tensor::from_array([2, 2], Device::Cpu);
    /// let src: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
    /// assert_eq!(x.index_add::<0, _>(&idx, &src).to_vec(), vec![0.0, 0.0, 0.0, 0.0, 4.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn index_add<const I: usize, D: Dim>(
        &self,
        indices: &Tensor<(D,), i64>,
        src: &Tensor<Replaced<S, I, D>, E>,
    ) -> Self
    where
        E: Num,
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        ok(self.try_index_add::<I, D>(indices, src))
    }

    /// [`Tensor::index_add`], returning an error naming the bad index or the shapes.
    pub fn try_index_add<const I: usize, D: Dim>(
        &self,
        indices: &Tensor<(D,), i64>,
        src: &Tensor<Replaced<S, I, D>, E>,
    ) -> Result<Self>
    where
        E: Num,
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        let (sd, xd) = (src.dims(), self.dims());
        if sd[I] != indices.numel() || (0..S::RANK).any(|i| i != I && sd[i] != xd[i]) {
            bail!(
                "index_add",
                "source shape {} does not match input shape {} with {} indices along axis {I}",
                describe(&src.shape()),
                describe(&self.shape()),
                indices.numel()
            );
        }
        // The index vector, repeated with stride 0 across every axis but `I`, is a full index
        // tensor for scatter_add without copying it.
        let mut strides = vec![0; S::RANK];
        strides[I] = indices.strides()[0];
        let il = Layout::new(sd, &strides, indices.layout().offset());
        let out = self.storage().scatter_add(
            self.layout(),
            (indices.storage(), &il),
            (src.storage(), src.layout()),
            I,
        )?;
        let out = Tensor::from_storage(out, self.shape());
        if !autograd::must_record(&[self.node(), src.node()]) {
            return Ok(out);
        }
        // d/dself = g; d/dsrc = the slices of g the source was added to.
        let idx = indices.clone();
        let inputs = vec![self.node().cloned(), src.node().cloned()];
        Ok(out.record(inputs, move |g| {
            Ok(vec![
                autograd::erase(g.clone()),
                autograd::erase(g.try_index_select::<I, D>(&idx)?),
            ])
        }))
    }
}

/// Gives a scatter (`ADD = false`) or scatter_add output its backward rule, when recording:
/// `self` gets `g` (with the overwritten positions zeroed for scatter), the source gets `g`
/// gathered at the index. Where a plain scatter's index repeats along a line, the source
/// entries whose writes were overwritten still get the gradient of the position they
/// targeted (PyTorch leaves that case unspecified too).
fn track_scatter<const I: usize, const ADD: bool, S, S2, S3, E>(
    out: Tensor<S, E>,
    x: &Tensor<S, E>,
    index: &Tensor<S2, i64>,
    src: &Tensor<S3, E>,
) -> Tensor<S, E>
where
    S: HasAxis<I>,
    S2: Shape,
    S3: Shape,
    E: Element,
{
    if !autograd::must_record(&[x.node(), src.node()]) {
        return out;
    }
    let (idx, src_shape) = (index.clone(), src.shape());
    let inputs = vec![x.node().cloned(), src.node().cloned()];
    out.record(inputs, move |g| {
        let dx = if ADD {
            g.clone()
        } else {
            autograd::index::scatter_input_back::<I, S, S2, E>(g, &idx)?
        };
        let dsrc = autograd::index::gather_into::<I, S, S2, S3, E>(g, &idx, src_shape)?;
        Ok(vec![autograd::erase(dx), autograd::erase(dsrc)])
    })
}
