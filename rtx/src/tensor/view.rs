//! Views that copy nothing: reshape, flatten, permute, transpose, broadcast, squeeze,
//! unsqueeze, narrow and slice. Each returns a tensor sharing `self`'s storage (reshape and
//! flatten copy only when the input is not contiguous, as PyTorch's `reshape` does).

use super::Tensor;
use crate::error::{Error, Result, ok};
use crate::shape::{
    Dim, HasAxis, InsertAxis, PermuteAxes, ReduceAxis, Shape, SwapAxes, checks, describe,
};
use rtx_backends::Layout;
use rtx_kernels::Element;

/// The shape `S` with axis `I` replaced by dimension `D`.
pub type Replaced<S, const I: usize, D> =
    <<S as ReduceAxis<I>>::Reduced as InsertAxis<I, D>>::Output;

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The same elements with another shape of equal element count (specify and verify: when
    /// both shapes are static, a wrong count fails the build).
    ///
    /// # Panics
    /// When run-time sizes give a different element count (see [`Tensor::try_reshape`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 6>> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let y: Tensor<Rank3<3, 2, 2>> = x.reshape((Const, Const, Const));
    /// assert!(y.shares_storage_with(&x));
    /// ```
    #[track_caller]
    pub fn reshape<T: Shape>(&self, shape: T) -> Tensor<T, E> {
        const { checks::reshape::<S, T>() };
        ok(self.reshape_run(shape))
    }

    /// [`Tensor::reshape`], returning an error naming both shapes.
    pub fn try_reshape<T: Shape>(&self, shape: T) -> Result<Tensor<T, E>> {
        const { checks::reshape::<S, T>() };
        self.reshape_run(shape)
    }

    /// The body of `reshape` and `try_reshape` after their const check, for rtx's own callers:
    /// a const check in them would fail a second time, at rtx's line, for the user's mistake.
    pub(crate) fn reshape_run<T: Shape>(&self, shape: T) -> Result<Tensor<T, E>> {
        if shape.numel() != self.numel() {
            return Err(Error::ShapeMismatch {
                op: "reshape",
                lhs: describe(&self.shape()),
                rhs: describe(&shape),
                rule: "the element counts must be equal",
            });
        }
        self.reshape_unchecked(shape)
    }

    /// A reshape whose element count the caller has checked. Backward rules use it: going back
    /// from `T` to `S` must not instantiate the compile-time check a second time, reversed.
    pub(crate) fn reshape_unchecked<T: Shape>(&self, shape: T) -> Result<Tensor<T, E>> {
        let source = self.try_contiguous()?;
        let layout = source
            .layout()
            .reshape(&shape.dims())
            .expect("contiguous reshape");
        let orig = self.shape();
        Ok(self.track_view(source.view(layout, shape), move |g| {
            g.reshape_unchecked(orig)
        }))
    }

    /// The same dims under another shape type (static dims as run-time ones, say): a view of
    /// any layout, where a reshape would copy a strided one. An error when the dims differ.
    pub(crate) fn retype<T: Shape>(&self, shape: T) -> Result<Tensor<T, E>> {
        if shape.dims().as_ref() != self.dims() {
            return Err(Error::ShapeMismatch {
                op: "retype",
                lhs: describe(&self.shape()),
                rhs: describe(&shape),
                rule: "the dims must be equal",
            });
        }
        let orig = self.shape();
        let out = self.view(*self.layout(), shape);
        Ok(self.track_view(out, move |g| g.retype(orig)))
    }

    /// Merges axes `START..=END` into one; the result shape `T` is specified by the caller (or
    /// inferred from the next use) and verified.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank4<2, 3, 4, 5>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    /// let y: Tensor<Rank2<2, 60>> = x.flatten::<1, 3, _>();
    /// assert_eq!(y.dims(), &[2, 60]);
    /// ```
    #[track_caller]
    pub fn flatten<const START: usize, const END: usize, T: Shape>(&self) -> Tensor<T, E> {
        const { checks::flatten::<S, T, START, END>() };
        ok(self.flatten_run::<START, END, T>())
    }

    /// [`Tensor::flatten`], returning run-time size errors.
    pub fn try_flatten<const START: usize, const END: usize, T: Shape>(
        &self,
    ) -> Result<Tensor<T, E>> {
        const { checks::flatten::<S, T, START, END>() };
        self.flatten_run::<START, END, T>()
    }

    /// The body of `flatten` and `try_flatten` after their const check.
    fn flatten_run<const START: usize, const END: usize, T: Shape>(&self) -> Result<Tensor<T, E>> {
        let d = self.dims();
        let mut dims: Vec<usize> = d[..START].to_vec();
        dims.push(d[START..=END].iter().product());
        dims.extend_from_slice(&d[END + 1..]);
        let shape = T::from_dims(&dims).ok_or_else(|| Error::ShapeMismatch {
            op: "flatten",
            lhs: describe(&self.shape()),
            rhs: format!("{dims:?}"),
            rule: "the result type does not match the flattened sizes",
        })?;
        self.reshape_run(shape)
    }

    /// Reorders the axes: `permute::<Axes3<2, 0, 1>>()` puts axis 2 first.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    /// let y: Tensor<Rank3<4, 2, 3>> = x.permute::<Axes3<2, 0, 1>>();
    /// assert_eq!(y.strides(), &[1, 12, 4]);
    /// ```
    pub fn permute<P>(&self) -> Tensor<<S as PermuteAxes<P>>::Output, E>
    where
        S: PermuteAxes<P>,
    {
        const { checks::permutation(<S as PermuteAxes<P>>::PERM) };
        let layout = self.layout().permute(<S as PermuteAxes<P>>::PERM);
        let shape = <S as PermuteAxes<P>>::Output::from_dims(layout.dims()).expect("permuted dims");
        let orig = self.shape();
        self.track_view(self.view(layout, shape), move |g| {
            let perm = <S as PermuteAxes<P>>::PERM;
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            Ok(g.view(g.layout().permute(&inverse), orig))
        })
    }

    /// Swaps axes `A` and `B`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank3<2, 3, 4>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    /// let y: Tensor<Rank3<4, 3, 2>> = x.transpose::<0, 2>();
    /// # let _ = y;
    /// // A vector's one axis swaps with itself, as `transpose(0, 0)` does in PyTorch.
    /// let v: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
    /// assert_eq!(v.transpose::<0, 0>().to_vec(), vec![1.0, 2.0, 3.0]);
    /// ```
    pub fn transpose<const A: usize, const B: usize>(
        &self,
    ) -> Tensor<<S as SwapAxes<A, B>>::Output, E>
    where
        S: SwapAxes<A, B>,
    {
        let layout = self.layout().transpose(A, B);
        let shape = <S as SwapAxes<A, B>>::Output::from_dims(layout.dims()).expect("swapped dims");
        let orig = self.shape();
        self.track_view(self.view(layout, shape), move |g| {
            Ok(g.view(g.layout().transpose(A, B), orig))
        })
    }

    /// A view repeated to a larger shape: leading axes are added and size-1 axes repeat, with
    /// stride 0 (specify and verify).
    ///
    /// # Panics
    /// When a run-time size is neither 1 nor the target size (see [`Tensor::try_broadcast_to`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let col: Tensor<Rank2<2, 1>> = Tensor::from_array([[1.0], [2.0]], Device::Cpu);
    /// let m: Tensor<Rank2<2, 3>> = col.broadcast_to((Const, Const));
    /// assert_eq!(m.to_vec(), vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn broadcast_to<T: Shape>(&self, shape: T) -> Tensor<T, E> {
        const { checks::broadcast::<S, T>() };
        ok(self.broadcast_run(shape))
    }

    /// [`Tensor::broadcast_to`], returning an error naming both shapes.
    pub fn try_broadcast_to<T: Shape>(&self, shape: T) -> Result<Tensor<T, E>> {
        const { checks::broadcast::<S, T>() };
        self.broadcast_run(shape)
    }

    /// The body of `broadcast_to`, `try_broadcast_to` and `expand` after their const check.
    pub(crate) fn broadcast_run<T: Shape>(&self, shape: T) -> Result<Tensor<T, E>> {
        let layout =
            self.layout()
                .broadcast_to(&shape.dims())
                .ok_or_else(|| Error::ShapeMismatch {
                    op: "broadcast_to",
                    lhs: describe(&self.shape()),
                    rhs: describe(&shape),
                    rule: "each trailing dimension must be equal or 1",
                })?;
        let orig = self.shape();
        Ok(self.track_view(self.view(layout, shape), move |g| {
            crate::autograd::sum_to(g, orig)
        }))
    }

    /// PyTorch's name for [`Tensor::broadcast_to`].
    #[track_caller]
    pub fn expand<T: Shape>(&self, shape: T) -> Tensor<T, E> {
        const { checks::broadcast::<S, T>() };
        ok(self.broadcast_run(shape))
    }

    /// Removes axis `I`, which must have size 1.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank3<2, 1, 3>> = Tensor::zeros((Const, Const, Const), Device::Cpu);
    /// let y: Tensor<Rank2<2, 3>> = x.squeeze::<1>();
    /// # let _ = y;
    /// ```
    #[track_caller]
    pub fn squeeze<const I: usize>(&self) -> Tensor<<S as ReduceAxis<I>>::Reduced, E>
    where
        S: ReduceAxis<I>,
    {
        const { checks::squeeze::<S, I>() };
        ok(self.squeeze_run::<I>())
    }

    /// [`Tensor::squeeze`], returning an error when a run-time axis is not 1.
    pub fn try_squeeze<const I: usize>(&self) -> Result<Tensor<<S as ReduceAxis<I>>::Reduced, E>>
    where
        S: ReduceAxis<I>,
    {
        const { checks::squeeze::<S, I>() };
        self.squeeze_run::<I>()
    }

    /// The body of `squeeze` and `try_squeeze` after their const check.
    fn squeeze_run<const I: usize>(&self) -> Result<Tensor<<S as ReduceAxis<I>>::Reduced, E>>
    where
        S: ReduceAxis<I>,
    {
        if self.dims()[I] != 1 {
            crate::error::bail!(
                "squeeze",
                "axis {I} of {} has size {}, not 1",
                describe(&self.shape()),
                self.dims()[I]
            );
        }
        let mut dims = self.dims().to_vec();
        let mut strides = self.strides().to_vec();
        dims.remove(I);
        strides.remove(I);
        let shape = <S as ReduceAxis<I>>::Reduced::from_dims(&dims).expect("squeezed dims");
        let orig = self.shape();
        let out = self.view(Layout::new(&dims, &strides, self.layout().offset()), shape);
        Ok(self.track_view(out, move |g| g.reshape_unchecked(orig)))
    }

    /// Inserts a size-1 axis before axis `I`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    /// let y: Tensor<Rank2<1, 3>> = x.unsqueeze::<0>();
    /// # let _ = y;
    /// ```
    pub fn unsqueeze<const I: usize>(
        &self,
    ) -> Tensor<<S as InsertAxis<I, crate::shape::Const<1>>>::Output, E>
    where
        S: InsertAxis<I, crate::shape::Const<1>>,
    {
        let mut dims = self.dims().to_vec();
        let mut strides = self.strides().to_vec();
        dims.insert(I, 1);
        strides.insert(I, 0);
        let shape = <S as InsertAxis<I, crate::shape::Const<1>>>::Output::from_dims(&dims)
            .expect("unsqueezed dims");
        let orig = self.shape();
        let out = self.view(Layout::new(&dims, &strides, self.layout().offset()), shape);
        self.track_view(out, move |g| g.reshape_unchecked(orig))
    }

    /// `len` entries of axis `I` starting at `start`; the new size's type is `len`'s type, so a
    /// `Const` length keeps the shape static.
    ///
    /// # Panics
    /// When `start + len` passes the end of the axis (see [`Tensor::try_narrow`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 5>, i32> = Tensor::from_array([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]], Device::Cpu);
    /// let y: Tensor<Rank2<2, 2>, i32> = x.narrow::<1, _>(1, Const);
    /// assert_eq!(y.to_vec(), vec![1, 2, 6, 7]);
    /// ```
    #[track_caller]
    pub fn narrow<const I: usize, D: Dim>(
        &self,
        start: usize,
        len: D,
    ) -> Tensor<Replaced<S, I, D>, E>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        ok(self.try_narrow::<I, D>(start, len))
    }

    /// [`Tensor::narrow`], returning an error naming the axis, the range and the shape.
    pub fn try_narrow<const I: usize, D: Dim>(
        &self,
        start: usize,
        len: D,
    ) -> Result<Tensor<Replaced<S, I, D>, E>>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        let size = self.dims()[I];
        if start + len.size() > size {
            crate::error::bail!(
                "narrow",
                "range {start}..{} is out of bounds for axis {I} of size {size} (shape {})",
                start + len.size(),
                describe(&self.shape())
            );
        }
        let layout = self.layout().narrow(I, start, len.size());
        let shape = Replaced::<S, I, D>::from_dims(layout.dims()).expect("narrowed dims");
        let orig = self.shape();
        let out = self.view(layout, shape);
        Ok(self.track_view(out, move |g| {
            crate::autograd::narrow_back::<I, S, D, E>(g, orig, start)
        }))
    }

    /// Entries `range` of axis `I`, as a run-time sized view (PyTorch's `x[:, a:b]`).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<5>, i32> = Tensor::from_array([0, 1, 2, 3, 4], Device::Cpu);
    /// assert_eq!(x.slice::<0>(1..4).to_vec(), vec![1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn slice<const I: usize>(
        &self,
        range: std::ops::Range<usize>,
    ) -> Tensor<Replaced<S, I, usize>, E>
    where
        S: ReduceAxis<I>,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, usize>,
    {
        ok(self.try_narrow::<I, usize>(range.start, range.end.saturating_sub(range.start)))
    }

    /// The size of axis `I` as its typed dimension.
    pub fn dim<const I: usize>(&self) -> <S as HasAxis<I>>::Dim
    where
        S: HasAxis<I>,
    {
        self.shape().axis_dim()
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Gives a view (or a copy) of `self` the backward rule `back`, when recording.
    pub(crate) fn track_view<S2: Shape>(
        &self,
        out: Tensor<S2, E>,
        back: impl Fn(&Tensor<S2, E>) -> Result<Tensor<S, E>> + Send + Sync + 'static,
    ) -> Tensor<S2, E> {
        if !crate::autograd::must_record(&[self.node()]) {
            return out;
        }
        // Boxed here rather than through `record`, whose own closure would be one more type
        // (compiled in the user's crate) for every view op of every shape.
        let rule: crate::autograd::Backward = Box::new(move |g, _| {
            let g = crate::autograd::grad_as::<S2, E>(g);
            Ok(vec![crate::autograd::erase(back(g)?)])
        });
        out.record_boxed(vec![self.node().cloned()], rule)
    }
}

impl<A: Dim, B: Dim, E: Element> Tensor<(A, B), E> {
    /// The transpose of a matrix (a view).
    pub fn t(&self) -> Tensor<(B, A), E> {
        self.transpose::<0, 1>()
    }
}
