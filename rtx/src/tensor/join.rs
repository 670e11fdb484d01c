//! Joining and splitting along an axis: concat (two tensors, typed), cat (a slice of
//! same-typed tensors), stack, and the views split, chunk and split2.
//!
//! Sizes along the joined axis follow *specify and verify*: the caller's type states the
//! result's dimension there (`Const<7>`, `usize`, `Dyn<'T'>`), and when every size involved is
//! static an inline `const` check fails the build with the numbers ("concat: 3 + 4 elements
//! along axis 1 cannot become 8"); otherwise the same message is a run-time error. Those
//! const checks fire on a full `cargo build`, not under `cargo check` or rust-analyzer. The
//! other dims of `concat`'s operands must agree by [`ConcatWith`], so a static mismatch is a
//! compile error naming both dims. Splits return views that copy nothing; joins copy.

use super::{Replaced, Tensor};
use crate::autograd::{self, index::slice_of};
use crate::error::{Error, Result, bail, ok};
use crate::shape::rules::ConcatWith;
use crate::shape::{Const, Dim, InsertAxis, ReduceAxis, Shape, describe};
use const_panic::concat_panic;
use rtx_backends::{Layout, Storage};
use rtx_kernels::Element;
use std::marker::PhantomData;

/// Concat of `A` and `B` along `I` into `T`: the sizes must add up when all three are static.
/// It returns a marker of `B` so that a method whose second operand is an unnameable
/// `impl ConcatWith` can still run it in its own `const` block, with `B` inferred through
/// [`operand_is`] (see `crate::shape::checks` for why the block must sit in that method).
#[track_caller]
const fn concat_sizes<A: Shape, B: Shape, T: Dim, const I: usize>() -> PhantomData<B> {
    if let (Some(a), Some(b), Some(t)) = (A::STATIC_DIMS[I], B::STATIC_DIMS[I], T::STATIC)
        && a + b != t
    {
        concat_panic!(
            "concat: ",
            a,
            " + ",
            b,
            " elements along axis ",
            I,
            " cannot become ",
            t,
            " (the sizes must add up)"
        );
    }
    PhantomData
}

/// Ties the marker a `const` block returns to the shape of `other`.
fn operand_is<B: Shape, E: Element>(_other: &Tensor<B, E>, _marker: PhantomData<B>) {}

/// Split of `S` along `I` into `A` and `B`: the sizes must add up when all three are static.
#[track_caller]
const fn split_sizes<S: Shape, A: Dim, B: Dim, const I: usize>() {
    if let (Some(n), Some(a), Some(b)) = (S::STATIC_DIMS[I], A::STATIC, B::STATIC)
        && a + b != n
    {
        concat_panic!(
            "split2: ",
            n,
            " elements along axis ",
            I,
            " cannot become ",
            a,
            " + ",
            b,
            " (the sizes must add up)"
        );
    }
}

/// Stacking needs at least one tensor, to know the sizes and the device.
#[track_caller]
const fn stack_count<const N: usize>() {
    if N == 0 {
        concat_panic!("stack: at least one tensor is needed, not ", N);
    }
}

/// The run-time counterpart of [`concat_sizes`], for `op` with the given parts.
fn joined_dim<D: Dim>(op: &'static str, sizes: &[usize], axis: usize) -> Result<D> {
    let total = sizes.iter().sum();
    D::from_size(total).ok_or_else(|| {
        let parts: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
        Error::BadArgument {
            op,
            msg: format!(
                "{} elements along axis {axis} cannot become {}",
                parts.join(" + "),
                D::STATIC.unwrap_or(total)
            ),
        }
    })
}

/// Checks that two shapes agree on every axis but `axis`, naming both.
fn agree_off_axis<A: Shape, B: Shape>(op: &'static str, a: &A, b: &B, axis: usize) -> Result<()> {
    let (da, db) = (a.dims(), b.dims());
    if da.len() != db.len() || (0..da.len()).any(|i| i != axis && da[i] != db[i]) {
        bail!(
            op,
            "shapes {} and {} differ outside axis {axis}",
            describe(a),
            describe(b)
        );
    }
    Ok(())
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// `self` followed by `other` along axis `I` (PyTorch's `torch.cat([a, b], dim=I)`). The
    /// other dims must agree ([`ConcatWith`]: a static mismatch does not compile), and the
    /// result's dimension type `D` along `I` comes from the caller: a `Const` is verified
    /// against the sum (when compiling if both inputs are static too), `usize` or `Dyn` take it.
    ///
    /// # Panics
    /// When run-time sizes disagree (see [`Tensor::try_concat`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<Rank2<2, 3>, i32> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let b: Tensor<Rank2<2, 4>, i32> = Tensor::ones((Const, Const), Device::Cpu);
    /// let c: Tensor<Rank2<2, 7>, i32> = a.concat::<1, _>(&b);
    /// assert_eq!(c.to_vec(), vec![0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1]);
    /// let d: Tensor<(usize, Const<3>), i32> = a.concat::<0, usize>(&a);
    /// assert_eq!(d.dims(), &[4, 3]);
    /// ```
    ///
    /// A wrong static size fails `cargo build` ("concat: 3 + 4 elements along axis 1 cannot
    /// become 8"):
    ///
    /// ```compile_fail
    /// # use rtx::prelude::*;
    /// let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let b: Tensor<Rank2<2, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let c: Tensor<Rank2<2, 8>> = a.concat::<1, _>(&b);
    /// ```
    #[track_caller]
    pub fn concat<const I: usize, D: Dim>(
        &self,
        other: &Tensor<impl ConcatWith<S, I>, E>,
    ) -> Tensor<Replaced<S, I, D>, E>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        operand_is(other, const { concat_sizes::<S, _, D, I>() });
        ok(concat_two::<I, D, S, _, E>(self, other))
    }

    /// [`Tensor::concat`], returning an error naming the shapes or the sizes along `I`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<(usize, Const<3>)> = Tensor::zeros((2, Const), Device::Cpu);
    /// let b: Tensor<(usize, Const<3>)> = Tensor::zeros((3, Const), Device::Cpu);
    /// let err = a.try_concat::<0, Const<4>>(&b).err().unwrap();
    /// assert_eq!(err.to_string(), "concat: 2 + 3 elements along axis 0 cannot become 4");
    /// ```
    pub fn try_concat<const I: usize, D: Dim>(
        &self,
        other: &Tensor<impl ConcatWith<S, I>, E>,
    ) -> Result<Tensor<Replaced<S, I, D>, E>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        operand_is(other, const { concat_sizes::<S, _, D, I>() });
        concat_two::<I, D, S, _, E>(self, other)
    }

    /// Views of at most `size` entries along axis `I`, in order, the last one shorter when
    /// `size` does not divide the axis (PyTorch's `split` with an int). An empty axis gives one
    /// empty view.
    ///
    /// # Panics
    /// When `size` is 0 and the axis is not empty (see [`Tensor::try_split`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<5>, i32> = Tensor::from_array([0, 1, 2, 3, 4], Device::Cpu);
    /// let parts = x.split::<0>(2);
    /// let got: Vec<Vec<i32>> = parts.iter().map(|p| p.to_vec()).collect();
    /// assert_eq!(got, vec![vec![0, 1], vec![2, 3], vec![4]]);
    /// assert!(parts[0].shares_storage_with(&x));
    /// ```
    #[track_caller]
    pub fn split<const I: usize>(&self, size: usize) -> Vec<Tensor<Replaced<S, I, usize>, E>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, usize>,
    {
        ok(self.try_split::<I>(size))
    }

    /// [`Tensor::split`], returning an error for a zero chunk size.
    pub fn try_split<const I: usize>(
        &self,
        size: usize,
    ) -> Result<Vec<Tensor<Replaced<S, I, usize>, E>>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, usize>,
    {
        let n = self.dims()[I];
        if size == 0 && n > 0 {
            bail!(
                "split",
                "a chunk size of 0 cannot split axis {I} of size {n}"
            );
        }
        if n == 0 {
            return Ok(vec![self.try_narrow::<I, usize>(0, 0)?]);
        }
        (0..n)
            .step_by(size)
            .map(|start| self.try_narrow::<I, usize>(start, size.min(n - start)))
            .collect()
    }

    /// `chunks` views along axis `I` of `ceil(size / chunks)` entries each, the last one
    /// shorter; fewer views when the axis runs out first (PyTorch's `chunk`).
    ///
    /// # Panics
    /// When `chunks` is 0 (see [`Tensor::try_chunk`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 5>, i32> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let sizes: Vec<usize> = x.chunk::<1>(3).iter().map(|c| c.dims()[1]).collect();
    /// assert_eq!(sizes, vec![2, 2, 1]);
    /// ```
    #[track_caller]
    pub fn chunk<const I: usize>(&self, chunks: usize) -> Vec<Tensor<Replaced<S, I, usize>, E>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, usize>,
    {
        ok(self.try_chunk::<I>(chunks))
    }

    /// [`Tensor::chunk`], returning an error for zero chunks.
    pub fn try_chunk<const I: usize>(
        &self,
        chunks: usize,
    ) -> Result<Vec<Tensor<Replaced<S, I, usize>, E>>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, usize>,
    {
        if chunks == 0 {
            bail!("chunk", "the number of chunks must be at least 1, not 0");
        }
        let n = self.dims()[I];
        if n == 0 {
            // As PyTorch: an empty axis still gives the requested number of (empty) chunks.
            return (0..chunks)
                .map(|_| self.try_narrow::<I, usize>(0, 0))
                .collect();
        }
        self.try_split::<I>(n.div_ceil(chunks))
    }

    /// Two views along axis `I` of sizes `a` and `b`, typed by their dimension types
    /// (PyTorch's `split(x, [a, b], dim=I)`); they must add up to the axis, checked when
    /// compiling where all three sizes are static.
    ///
    /// # Panics
    /// When run-time sizes do not add up (see [`Tensor::try_split2`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 5>, i32> = Tensor::from_array([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]], Device::Cpu);
    /// let (l, r): (Tensor<Rank2<2, 2>, i32>, Tensor<Rank2<2, 3>, i32>) = x.split2::<1, _, _>(Const, Const);
    /// assert_eq!(l.to_vec(), vec![0, 1, 5, 6]);
    /// assert_eq!(r.to_vec(), vec![2, 3, 4, 7, 8, 9]);
    /// let (_, tail) = x.split2::<1, _, usize>(Const::<1>, 4);
    /// assert_eq!(tail.dims(), &[2, 4]);
    /// ```
    #[track_caller]
    #[allow(clippy::type_complexity)]
    pub fn split2<const I: usize, A: Dim, B: Dim>(
        &self,
        a: A,
        b: B,
    ) -> (Tensor<Replaced<S, I, A>, E>, Tensor<Replaced<S, I, B>, E>)
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, A> + InsertAxis<I, B>,
    {
        const { split_sizes::<S, A, B, I>() };
        ok(self.split2_run::<I, A, B>(a, b))
    }

    /// [`Tensor::split2`], returning an error naming the sizes.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<(usize,)> = Tensor::zeros((5,), Device::Cpu);
    /// let err = x.try_split2::<0, usize, usize>(2, 2).err().unwrap();
    /// assert_eq!(err.to_string(), "split2: 5 elements along axis 0 cannot become 2 + 2");
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn try_split2<const I: usize, A: Dim, B: Dim>(
        &self,
        a: A,
        b: B,
    ) -> Result<(Tensor<Replaced<S, I, A>, E>, Tensor<Replaced<S, I, B>, E>)>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, A> + InsertAxis<I, B>,
    {
        const { split_sizes::<S, A, B, I>() };
        self.split2_run::<I, A, B>(a, b)
    }

    /// The body of `split2` and `try_split2` after their const check.
    #[allow(clippy::type_complexity)]
    fn split2_run<const I: usize, A: Dim, B: Dim>(
        &self,
        a: A,
        b: B,
    ) -> Result<(Tensor<Replaced<S, I, A>, E>, Tensor<Replaced<S, I, B>, E>)>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, A> + InsertAxis<I, B>,
    {
        let n = self.dims()[I];
        if a.size() + b.size() != n {
            bail!(
                "split2",
                "{n} elements along axis {I} cannot become {} + {}",
                a.size(),
                b.size()
            );
        }
        Ok((
            self.try_narrow::<I, A>(0, a)?,
            self.try_narrow::<I, B>(a.size(), b)?,
        ))
    }
}

/// The body of `concat` and `try_concat` after their const check.
fn concat_two<const I: usize, D: Dim, S, T: Shape, E: Element>(
    a: &Tensor<S, E>,
    b: &Tensor<T, E>,
) -> Result<Tensor<Replaced<S, I, D>, E>>
where
    S: ReduceAxis<I>,
    <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
{
    agree_off_axis("concat", &a.shape(), &b.shape(), I)?;
    let d: D = joined_dim("concat", &[a.dims()[I], b.dims()[I]], I)?;
    let out = Storage::concat(&[(a.storage(), a.layout()), (b.storage(), b.layout())], I)?;
    let mut dims = a.dims().to_vec();
    dims[I] = d.size();
    let shape = Replaced::<S, I, D>::from_dims(&dims).expect("concat dims");
    let out = Tensor::from_storage(out, shape);
    if !autograd::must_record(&[a.node(), b.node()]) {
        return Ok(out);
    }
    let (sa, sb) = (a.shape(), b.shape());
    let split = a.dims()[I];
    Ok(
        out.record(vec![a.node().cloned(), b.node().cloned()], move |g| {
            Ok(vec![
                autograd::erase(slice_of(g, sa, I, 0, false)),
                autograd::erase(slice_of(g, sb, I, split, false)),
            ])
        }),
    )
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Any number of same-typed tensors joined along axis `I` (PyTorch's `torch.cat`); the
    /// result's dimension type `D` along `I` comes from the caller and is checked when the op
    /// runs. For two tensors of different types, see [`Tensor::concat`].
    ///
    /// # Panics
    /// When the slice is empty or the sizes disagree (see [`Tensor::try_cat`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<(usize,), i32> = Tensor::from_vec(vec![1, 2], (2,), Device::Cpu);
    /// let b: Tensor<(usize,), i32> = Tensor::from_vec(vec![3], (1,), Device::Cpu);
    /// let c: Tensor<Rank1<5>, i32> = Tensor::cat::<0, _>(&[&a, &b, &a]);
    /// assert_eq!(c.to_vec(), vec![1, 2, 3, 1, 2]);
    /// ```
    #[track_caller]
    #[doc(alias = "concatenate")]
    pub fn cat<const I: usize, D: Dim>(tensors: &[&Tensor<S, E>]) -> Tensor<Replaced<S, I, D>, E>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        ok(Self::try_cat::<I, D>(tensors))
    }

    /// [`Tensor::cat`], returning an error naming the shapes or the sizes along `I`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<(usize, usize)> = Tensor::zeros((2, 3), Device::Cpu);
    /// let b: Tensor<(usize, usize)> = Tensor::zeros((2, 4), Device::Cpu);
    /// let err = Tensor::try_cat::<0, usize>(&[&a, &b]).err().unwrap();
    /// assert_eq!(err.to_string(), "cat: shapes [2, 3] and [2, 4] differ outside axis 0");
    /// ```
    pub fn try_cat<const I: usize, D: Dim>(
        tensors: &[&Tensor<S, E>],
    ) -> Result<Tensor<Replaced<S, I, D>, E>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        let Some(first) = tensors.first() else {
            bail!("cat", "no tensors given; at least one is needed");
        };
        for t in &tensors[1..] {
            agree_off_axis("cat", &first.shape(), &t.shape(), I)?;
        }
        let sizes: Vec<usize> = tensors.iter().map(|t| t.dims()[I]).collect();
        let d: D = joined_dim("cat", &sizes, I)?;
        let parts: Vec<(&Storage<E>, &Layout)> =
            tensors.iter().map(|t| (t.storage(), t.layout())).collect();
        let out = Storage::concat(&parts, I)?;
        let mut dims = first.dims().to_vec();
        dims[I] = d.size();
        let shape = Replaced::<S, I, D>::from_dims(&dims).expect("cat dims");
        let out = Tensor::from_storage(out, shape);
        let nodes: Vec<_> = tensors.iter().map(|t| t.node()).collect();
        if !autograd::must_record(&nodes) {
            return Ok(out);
        }
        let shapes: Vec<S> = tensors.iter().map(|t| t.shape()).collect();
        let inputs = tensors.iter().map(|t| t.node().cloned()).collect();
        Ok(out.record(inputs, move |g| {
            let mut start = 0;
            Ok(shapes
                .iter()
                .map(|&shape| {
                    let part = slice_of(g, shape, I, start, false);
                    start += shape.dims()[I];
                    autograd::erase(part)
                })
                .collect())
        }))
    }

    /// `N` tensors of one shape joined along a new axis `I` of size `N` (PyTorch's
    /// `torch.stack`). `N` is checked to be at least 1 when compiling.
    ///
    /// # Panics
    /// When run-time sizes differ between the tensors (see [`Tensor::try_stack`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<Rank1<2>, i32> = Tensor::from_array([1, 2], Device::Cpu);
    /// let b: Tensor<Rank1<2>, i32> = Tensor::from_array([3, 4], Device::Cpu);
    /// let rows: Tensor<Rank2<3, 2>, i32> = Tensor::stack::<0, _>([&a, &b, &a]);
    /// assert_eq!(rows.to_vec(), vec![1, 2, 3, 4, 1, 2]);
    /// let cols = Tensor::stack::<1, 2>([&a, &b]);
    /// assert_eq!(cols.to_vec(), vec![1, 3, 2, 4]);
    /// ```
    #[track_caller]
    pub fn stack<const I: usize, const N: usize>(
        tensors: [&Tensor<S, E>; N],
    ) -> Tensor<<S as InsertAxis<I, Const<N>>>::Output, E>
    where
        S: InsertAxis<I, Const<N>>,
    {
        const { stack_count::<N>() };
        ok(Self::stack_run::<I, N>(tensors))
    }

    /// [`Tensor::stack`], returning an error naming the first two shapes that differ.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<(usize,)> = Tensor::zeros((2,), Device::Cpu);
    /// let b: Tensor<(usize,)> = Tensor::zeros((3,), Device::Cpu);
    /// let err = Tensor::try_stack::<0, 2>([&a, &b]).err().unwrap();
    /// assert_eq!(err.to_string(), "stack: shape mismatch: [2] vs [3]: every tensor stacked must have the same shape");
    /// ```
    pub fn try_stack<const I: usize, const N: usize>(
        tensors: [&Tensor<S, E>; N],
    ) -> Result<Tensor<<S as InsertAxis<I, Const<N>>>::Output, E>>
    where
        S: InsertAxis<I, Const<N>>,
    {
        const { stack_count::<N>() };
        Self::stack_run::<I, N>(tensors)
    }

    /// The body of `stack` and `try_stack` after their const check.
    fn stack_run<const I: usize, const N: usize>(
        tensors: [&Tensor<S, E>; N],
    ) -> Result<Tensor<<S as InsertAxis<I, Const<N>>>::Output, E>>
    where
        S: InsertAxis<I, Const<N>>,
    {
        let first = tensors[0];
        if let Some(t) = tensors.iter().find(|t| t.dims() != first.dims()) {
            return Err(Error::ShapeMismatch {
                op: "stack",
                lhs: describe(&first.shape()),
                rhs: describe(&t.shape()),
                rule: "every tensor stacked must have the same shape",
            });
        }
        // Each input viewed with a size-1 axis at `I`; joining those along `I` is the stack.
        let layouts: Vec<Layout> = tensors
            .iter()
            .map(|t| {
                let (mut dims, mut strides) = (t.dims().to_vec(), t.strides().to_vec());
                dims.insert(I, 1);
                strides.insert(I, 0);
                Layout::new(&dims, &strides, t.layout().offset())
            })
            .collect();
        let parts: Vec<(&Storage<E>, &Layout)> =
            tensors.iter().map(|t| t.storage()).zip(&layouts).collect();
        let out = Storage::concat(&parts, I)?;
        let mut dims = first.dims().to_vec();
        dims.insert(I, N);
        let shape = <S as InsertAxis<I, Const<N>>>::Output::from_dims(&dims).expect("stack dims");
        let out = Tensor::from_storage(out, shape);
        if !autograd::must_record(&tensors.map(|t| t.node())) {
            return Ok(out);
        }
        let shape = first.shape();
        let inputs = tensors.iter().map(|t| t.node().cloned()).collect();
        Ok(out.record(inputs, move |g| {
            Ok((0..N)
                .map(|k| autograd::erase(slice_of(g, shape, I, k, true)))
                .collect())
        }))
    }
}
