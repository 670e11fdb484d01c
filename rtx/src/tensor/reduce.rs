//! Reductions along a typed axis (sum, prod, max, min, argmax, argmin, mean, var, std,
//! logsumexp), full reductions (`sum_all`, ...), and softmax / log-softmax.
//!
//! The axis is a const parameter checked by [`ReduceAxis`]: `x.sum::<1>()` on a rank-1 tensor
//! does not compile. A reduction removes the axis ([`Reduced`]); its `_keepdim` form keeps it
//! as `Const<1>` ([`Kept`]), ready to expand back to the input's shape with `broadcast_to`.
//! Float results are computed in `E::Acc` (f32 for f16 and bf16) and rounded once. Sums split
//! long axes into fixed blocks, so results are bitwise the same on any number of threads.
//!
//! Empty axes: `sum` gives 0, `prod` 1, `mean` and `var` NaN, `logsumexp` -inf, while `max`,
//! `min`, `argmax` and `argmin` have no value: their `try_` forms return an error naming the
//! op, the axis and the shape, and the plain forms panic with it.

use super::Tensor;
use crate::autograd::{
    self,
    reduce::{ReduceGrad, reduce_back, softmax_back},
};
use crate::error::{Result, bail, ok};
use crate::shape::{ReduceAxis, Shape, describe};
use rtx_backends::Storage;
use rtx_kernels::op::ReduceOp;
use rtx_kernels::{Element, Float, Num};

/// The shape `S` with axis `I` removed, as a reduction returns it.
pub type Reduced<S, const I: usize> = <S as ReduceAxis<I>>::Reduced;

/// The shape `S` with axis `I` set to `Const<1>`, as a `_keepdim` reduction returns it.
pub type Kept<S, const I: usize> = <S as ReduceAxis<I>>::Kept;

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The sizes with axis `I` removed, as the reduced shape type.
    fn reduced_shape<const I: usize>(&self) -> Reduced<S, I>
    where
        S: ReduceAxis<I>,
    {
        let mut dims = self.dims().to_vec();
        dims.remove(I);
        Reduced::<S, I>::from_dims(&dims).expect("reduced dims")
    }

    /// The sizes with axis `I` set to 1, as the kept shape type.
    fn kept_shape<const I: usize>(&self) -> Kept<S, I>
    where
        S: ReduceAxis<I>,
    {
        let mut dims = self.dims().to_vec();
        dims[I] = 1;
        Kept::<S, I>::from_dims(&dims).expect("kept dims")
    }

    /// Fails for ops that have no value on an empty axis.
    fn check_axis_nonempty<const I: usize>(&self, op: &'static str) -> Result<()> {
        if self.dims()[I] == 0 {
            bail!(
                op,
                "cannot reduce axis {I} of shape {}: the axis is empty",
                describe(&self.shape())
            );
        }
        Ok(())
    }

    /// Fails for full reductions of a tensor with no elements.
    fn check_nonempty(&self, op: &'static str) -> Result<()> {
        if self.numel() == 0 {
            bail!(
                op,
                "cannot reduce a tensor of shape {}: it has no elements",
                describe(&self.shape())
            );
        }
        Ok(())
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    fn reduce_op<const I: usize>(&self, op: ReduceOp) -> Result<Storage<E>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        if matches!(op, ReduceOp::Max | ReduceOp::Min) {
            self.check_axis_nonempty::<I>(rtx_kernels::Op::Reduce(op).name())?;
        }
        Ok(self.storage().reduce(self.layout(), I, op)?)
    }

    fn arg_op<const I: usize>(&self, op: ReduceOp) -> Result<Storage<i64>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        self.check_axis_nonempty::<I>(rtx_kernels::Op::Reduce(op).name())?;
        Ok(self.storage().arg_reduce(self.layout(), I, op)?)
    }

    fn reduce_all_op(&self, op: ReduceOp, name: &'static str) -> Result<Tensor<(), E>>
    where
        E: Num,
    {
        if matches!(op, ReduceOp::Max | ReduceOp::Min) {
            self.check_nonempty(name)?;
        }
        Ok(Tensor::from_storage(
            self.storage().reduce_all(self.layout(), op)?,
            (),
        ))
    }

    /// The sum along axis `I` (integers wrap; an empty axis sums to 0).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu);
    /// let rows: Tensor<Rank1<2>> = x.sum::<1>();
    /// assert_eq!(rows.to_vec(), vec![6.0, 15.0]);
    /// assert_eq!(x.sum::<0>().to_vec(), vec![5.0, 7.0, 9.0]);
    /// ```
    pub fn sum<const I: usize>(&self) -> Tensor<Reduced<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.reduce_op::<I>(ReduceOp::Sum)),
                self.reduced_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Sum,
        )
    }

    /// The sum along axis `I`, keeping it as size 1.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>, i32> = Tensor::from_array([[1, 2, 3], [4, 5, 6]], Device::Cpu);
    /// let s: Tensor<Rank2<2, 1>, i32> = x.sum_keepdim::<1>();
    /// assert_eq!(s.to_vec(), vec![6, 15]);
    /// ```
    pub fn sum_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.reduce_op::<I>(ReduceOp::Sum)),
                self.kept_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Sum,
        )
    }

    /// The product along axis `I` (integers wrap; an empty axis gives 1). Its gradient is the
    /// product of the other elements, exact where elements are zero.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>, i64> = Tensor::from_array([[1, 2, 3], [4, 5, 6]], Device::Cpu);
    /// assert_eq!(x.prod::<1>().to_vec(), vec![6, 120]);
    /// ```
    pub fn prod<const I: usize>(&self) -> Tensor<Reduced<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.reduce_op::<I>(ReduceOp::Prod)),
                self.reduced_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Prod,
        )
    }

    /// The product along axis `I`, keeping it as size 1.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
    /// let p: Tensor<Rank2<1, 2>> = x.prod_keepdim::<0>();
    /// assert_eq!(p.to_vec(), vec![3.0, 8.0]);
    /// ```
    pub fn prod_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.reduce_op::<I>(ReduceOp::Prod)),
                self.kept_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Prod,
        )
    }

    /// The maximum along axis `I`; NaN wins, as in PyTorch.
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_max`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], Device::Cpu);
    /// assert_eq!(x.max::<1>().to_vec(), vec![5.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn max<const I: usize>(&self) -> Tensor<Reduced<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_max::<I>())
    }

    /// [`Tensor::max`], returning an error when axis `I` is empty.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<(usize, usize)> = Tensor::zeros((2, 0), Device::Cpu);
    /// let err = x.try_max::<1>().err().unwrap();
    /// assert_eq!(err.to_string(), "max: cannot reduce axis 1 of shape [2, 0]: the axis is empty");
    /// ```
    pub fn try_max<const I: usize>(&self) -> Result<Tensor<Reduced<S, I>, E>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(self.track_reduce(
            Tensor::from_storage(
                self.reduce_op::<I>(ReduceOp::Max)?,
                self.reduced_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Extreme,
        ))
    }

    /// The maximum along axis `I`, keeping it as size 1.
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_max_keepdim`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 5.0], [4.0, 2.0]], Device::Cpu);
    /// let m: Tensor<Rank2<2, 1>> = x.max_keepdim::<1>();
    /// assert_eq!((&x - m.broadcast_to(x.shape())).to_vec(), vec![-4.0, 0.0, 0.0, -2.0]);
    /// ```
    #[track_caller]
    pub fn max_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_max_keepdim::<I>())
    }

    /// [`Tensor::max_keepdim`], returning an error when axis `I` is empty.
    pub fn try_max_keepdim<const I: usize>(&self) -> Result<Tensor<Kept<S, I>, E>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(self.track_reduce(
            Tensor::from_storage(self.reduce_op::<I>(ReduceOp::Max)?, self.kept_shape::<I>()),
            Some(I),
            ReduceGrad::Extreme,
        ))
    }

    /// The minimum along axis `I`; NaN wins, as in PyTorch.
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_min`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>, i32> = Tensor::from_array([[1, 5, 3], [4, 2, 6]], Device::Cpu);
    /// assert_eq!(x.min::<0>().to_vec(), vec![1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn min<const I: usize>(&self) -> Tensor<Reduced<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_min::<I>())
    }

    /// [`Tensor::min`], returning an error when axis `I` is empty.
    pub fn try_min<const I: usize>(&self) -> Result<Tensor<Reduced<S, I>, E>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(self.track_reduce(
            Tensor::from_storage(
                self.reduce_op::<I>(ReduceOp::Min)?,
                self.reduced_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Extreme,
        ))
    }

    /// The minimum along axis `I`, keeping it as size 1.
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_min_keepdim`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>, i32> = Tensor::from_array([[1, 5], [4, 2]], Device::Cpu);
    /// let m: Tensor<Rank2<1, 2>, i32> = x.min_keepdim::<0>();
    /// assert_eq!(m.to_vec(), vec![1, 2]);
    /// ```
    #[track_caller]
    pub fn min_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, E>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_min_keepdim::<I>())
    }

    /// [`Tensor::min_keepdim`], returning an error when axis `I` is empty.
    pub fn try_min_keepdim<const I: usize>(&self) -> Result<Tensor<Kept<S, I>, E>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(self.track_reduce(
            Tensor::from_storage(self.reduce_op::<I>(ReduceOp::Min)?, self.kept_shape::<I>()),
            Some(I),
            ReduceGrad::Extreme,
        ))
    }

    /// The index of the first maximum along axis `I` (the first NaN, if any, as in PyTorch).
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_argmax`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 5.0, 5.0], [4.0, 2.0, 6.0]], Device::Cpu);
    /// let i: Tensor<Rank1<2>, i64> = x.argmax::<1>();
    /// assert_eq!(i.to_vec(), vec![1, 2]);
    /// ```
    #[track_caller]
    pub fn argmax<const I: usize>(&self) -> Tensor<Reduced<S, I>, i64>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_argmax::<I>())
    }

    /// [`Tensor::argmax`], returning an error when axis `I` is empty.
    pub fn try_argmax<const I: usize>(&self) -> Result<Tensor<Reduced<S, I>, i64>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(Tensor::from_storage(
            self.arg_op::<I>(ReduceOp::ArgMax)?,
            self.reduced_shape::<I>(),
        ))
    }

    /// The index of the first maximum along axis `I`, keeping it as size 1.
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_argmax_keepdim`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 5.0], [4.0, 2.0]], Device::Cpu);
    /// let i: Tensor<Rank2<2, 1>, i64> = x.argmax_keepdim::<1>();
    /// assert_eq!(i.to_vec(), vec![1, 0]);
    /// ```
    #[track_caller]
    pub fn argmax_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, i64>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_argmax_keepdim::<I>())
    }

    /// [`Tensor::argmax_keepdim`], returning an error when axis `I` is empty.
    pub fn try_argmax_keepdim<const I: usize>(&self) -> Result<Tensor<Kept<S, I>, i64>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(Tensor::from_storage(
            self.arg_op::<I>(ReduceOp::ArgMax)?,
            self.kept_shape::<I>(),
        ))
    }

    /// The index of the first minimum along axis `I` (the first NaN, if any, as in PyTorch).
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_argmin`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>, i32> = Tensor::from_array([[3, 1, 1], [0, 2, 6]], Device::Cpu);
    /// assert_eq!(x.argmin::<1>().to_vec(), vec![1, 0]);
    /// ```
    #[track_caller]
    pub fn argmin<const I: usize>(&self) -> Tensor<Reduced<S, I>, i64>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_argmin::<I>())
    }

    /// [`Tensor::argmin`], returning an error when axis `I` is empty.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<(usize, usize), i32> = Tensor::zeros((0, 3), Device::Cpu);
    /// let err = x.try_argmin::<0>().err().unwrap();
    /// assert_eq!(err.to_string(), "argmin: cannot reduce axis 0 of shape [0, 3]: the axis is empty");
    /// ```
    pub fn try_argmin<const I: usize>(&self) -> Result<Tensor<Reduced<S, I>, i64>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(Tensor::from_storage(
            self.arg_op::<I>(ReduceOp::ArgMin)?,
            self.reduced_shape::<I>(),
        ))
    }

    /// The index of the first minimum along axis `I`, keeping it as size 1.
    ///
    /// # Panics
    /// When axis `I` is empty (see [`Tensor::try_argmin_keepdim`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 5.0], [0.0, 2.0]], Device::Cpu);
    /// let i: Tensor<Rank2<1, 2>, i64> = x.argmin_keepdim::<0>();
    /// assert_eq!(i.to_vec(), vec![1, 1]);
    /// ```
    #[track_caller]
    pub fn argmin_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, i64>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        ok(self.try_argmin_keepdim::<I>())
    }

    /// [`Tensor::argmin_keepdim`], returning an error when axis `I` is empty.
    pub fn try_argmin_keepdim<const I: usize>(&self) -> Result<Tensor<Kept<S, I>, i64>>
    where
        E: Num,
        S: ReduceAxis<I>,
    {
        Ok(Tensor::from_storage(
            self.arg_op::<I>(ReduceOp::ArgMin)?,
            self.kept_shape::<I>(),
        ))
    }

    /// The sum of every element, as a scalar tensor (0 for no elements). Long inputs are
    /// summed in fixed blocks, so the result does not depend on the thread count.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
    /// assert_eq!(x.sum_all().item(), 10.0);
    /// ```
    pub fn sum_all(&self) -> Tensor<(), E>
    where
        E: Num,
    {
        self.track_reduce(
            ok(self.reduce_all_op(ReduceOp::Sum, "sum_all")),
            None,
            ReduceGrad::Sum,
        )
    }

    /// The product of every element, as a scalar tensor (1 for no elements).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>, i32> = Tensor::from_array([[1, 2], [3, 4]], Device::Cpu);
    /// assert_eq!(x.prod_all().item(), 24);
    /// ```
    pub fn prod_all(&self) -> Tensor<(), E>
    where
        E: Num,
    {
        self.track_reduce(
            ok(self.reduce_all_op(ReduceOp::Prod, "prod_all")),
            None,
            ReduceGrad::Prod,
        )
    }

    /// The largest element (NaN wins), as a scalar tensor.
    ///
    /// # Panics
    /// When the tensor has no elements (see [`Tensor::try_max_all`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 7.0], [3.0, 4.0]], Device::Cpu);
    /// assert_eq!(x.max_all().item(), 7.0);
    /// ```
    #[track_caller]
    pub fn max_all(&self) -> Tensor<(), E>
    where
        E: Num,
    {
        ok(self.try_max_all())
    }

    /// [`Tensor::max_all`], returning an error when the tensor has no elements.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<(usize, usize)> = Tensor::zeros((0, 3), Device::Cpu);
    /// let err = x.try_max_all().err().unwrap();
    /// assert_eq!(err.to_string(), "max_all: cannot reduce a tensor of shape [0, 3]: it has no elements");
    /// ```
    pub fn try_max_all(&self) -> Result<Tensor<(), E>>
    where
        E: Num,
    {
        Ok(self.track_reduce(
            self.reduce_all_op(ReduceOp::Max, "max_all")?,
            None,
            ReduceGrad::Extreme,
        ))
    }

    /// The smallest element (NaN wins), as a scalar tensor.
    ///
    /// # Panics
    /// When the tensor has no elements (see [`Tensor::try_min_all`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>, i64> = Tensor::from_array([[1, 7], [-3, 4]], Device::Cpu);
    /// assert_eq!(x.min_all().item(), -3);
    /// ```
    #[track_caller]
    pub fn min_all(&self) -> Tensor<(), E>
    where
        E: Num,
    {
        ok(self.try_min_all())
    }

    /// [`Tensor::min_all`], returning an error when the tensor has no elements.
    pub fn try_min_all(&self) -> Result<Tensor<(), E>>
    where
        E: Num,
    {
        Ok(self.track_reduce(
            self.reduce_all_op(ReduceOp::Min, "min_all")?,
            None,
            ReduceGrad::Extreme,
        ))
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The mean along axis `I`, summed in `E::Acc` (NaN for an empty axis, as in PyTorch).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu);
    /// assert_eq!(x.mean::<1>().to_vec(), vec![2.0, 5.0]);
    /// ```
    pub fn mean<const I: usize>(&self) -> Tensor<Reduced<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(ok(self.mean_op::<I>()), self.reduced_shape::<I>()),
            Some(I),
            ReduceGrad::Mean,
        )
    }

    /// The mean along axis `I`, keeping it as size 1.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 3.0], [5.0, 7.0]], Device::Cpu);
    /// let centered = &x - x.mean_keepdim::<0>().broadcast_to(x.shape());
    /// assert_eq!(centered.to_vec(), vec![-2.0, -2.0, 2.0, 2.0]);
    /// ```
    pub fn mean_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(ok(self.mean_op::<I>()), self.kept_shape::<I>()),
            Some(I),
            ReduceGrad::Mean,
        )
    }

    fn mean_op<const I: usize>(&self) -> Result<Storage<E>>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        Ok(self.storage().mean(self.layout(), I)?)
    }

    /// The mean of every element, as a scalar tensor (NaN for no elements).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 6.0]], Device::Cpu);
    /// assert_eq!(x.mean_all().item(), 3.0);
    /// ```
    pub fn mean_all(&self) -> Tensor<(), E>
    where
        E: Float,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.storage().mean_all(self.layout()).map_err(Into::into)),
                (),
            ),
            None,
            ReduceGrad::Mean,
        )
    }

    /// The variance along axis `I`: the sum of squared deviations from the mean divided by
    /// `size - correction` (PyTorch's `correction`: 1 is the unbiased estimate, 0 the
    /// population variance). Computed in two passes in `E::Acc`, the mean first, so large
    /// offsets do not cancel. An axis of at most `correction` elements gives NaN or infinity,
    /// as in PyTorch.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 4>> = Tensor::from_array([[1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]], Device::Cpu);
    /// assert_eq!(x.var::<1>(0).to_vec(), vec![1.25, 0.0]);
    /// assert_eq!(x.var::<1>(1).to_vec(), vec![5.0 / 3.0, 0.0]);
    /// ```
    pub fn var<const I: usize>(&self, correction: usize) -> Tensor<Reduced<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.var_op::<I>(correction, false)),
                self.reduced_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Var(correction),
        )
    }

    /// The variance along axis `I` (see [`Tensor::var`]), keeping it as size 1.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 3.0], [5.0, 9.0]], Device::Cpu);
    /// let v: Tensor<Rank2<2, 1>> = x.var_keepdim::<1>(0);
    /// assert_eq!(v.to_vec(), vec![1.0, 4.0]);
    /// ```
    pub fn var_keepdim<const I: usize>(&self, correction: usize) -> Tensor<Kept<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.var_op::<I>(correction, false)),
                self.kept_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Var(correction),
        )
    }

    /// The standard deviation along axis `I`: the square root of [`Tensor::var`], taken
    /// before rounding to `E`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<4>> = Tensor::from_array([2.0, 4.0, 4.0, 6.0], Device::Cpu);
    /// assert_eq!(x.std::<0>(0).item(), 2.0f32.sqrt());
    /// ```
    pub fn std<const I: usize>(&self, correction: usize) -> Tensor<Reduced<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.var_op::<I>(correction, true)),
                self.reduced_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Std(correction),
        )
    }

    /// The standard deviation along axis `I`, keeping it as size 1.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 3.0], [5.0, 9.0]], Device::Cpu);
    /// let s: Tensor<Rank2<2, 1>> = x.std_keepdim::<1>(0);
    /// assert_eq!(s.to_vec(), vec![1.0, 2.0]);
    /// ```
    pub fn std_keepdim<const I: usize>(&self, correction: usize) -> Tensor<Kept<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(
                ok(self.var_op::<I>(correction, true)),
                self.kept_shape::<I>(),
            ),
            Some(I),
            ReduceGrad::Std(correction),
        )
    }

    fn var_op<const I: usize>(&self, correction: usize, sqrt: bool) -> Result<Storage<E>>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        Ok(self.storage().var(self.layout(), I, correction, sqrt)?)
    }

    /// `ln Σ exp(x)` along axis `I`, shifted by the maximum so it neither overflows nor
    /// underflows; a row of -inf (or an empty axis) gives -inf, not NaN.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let ninf = f32::NEG_INFINITY;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1000.0, 1000.0], [ninf, ninf]], Device::Cpu);
    /// let y = x.logsumexp::<1>().to_vec();
    /// assert_eq!(y[0], 1000.0 + 2.0f32.ln());
    /// assert_eq!(y[1], f32::NEG_INFINITY);
    /// ```
    pub fn logsumexp<const I: usize>(&self) -> Tensor<Reduced<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(ok(self.logsumexp_op::<I>()), self.reduced_shape::<I>()),
            Some(I),
            ReduceGrad::LogSumExp,
        )
    }

    /// [`Tensor::logsumexp`], keeping axis `I` as size 1.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<1, 2>> = Tensor::from_array([[0.0, 0.0]], Device::Cpu);
    /// let y: Tensor<Rank2<1, 1>> = x.logsumexp_keepdim::<1>();
    /// assert_eq!(y.to_vec(), vec![2.0f32.ln()]);
    /// ```
    pub fn logsumexp_keepdim<const I: usize>(&self) -> Tensor<Kept<S, I>, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        self.track_reduce(
            Tensor::from_storage(ok(self.logsumexp_op::<I>()), self.kept_shape::<I>()),
            Some(I),
            ReduceGrad::LogSumExp,
        )
    }

    fn logsumexp_op<const I: usize>(&self) -> Result<Storage<E>>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        Ok(self.storage().logsumexp(self.layout(), I)?)
    }

    /// `exp(x - max) / Σ exp(x - max)` along axis `I`: the same shape, each slice along the
    /// axis summing to 1. The last axis takes one fused pass per row in `E::Acc`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[0.0, 0.0], [1000.0, 1000.0]], Device::Cpu);
    /// assert_eq!(x.softmax::<1>().to_vec(), vec![0.5, 0.5, 0.5, 0.5]);
    /// ```
    pub fn softmax<const I: usize>(&self) -> Tensor<S, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        let out = Tensor::from_storage(
            ok(self.storage().softmax(self.layout(), I).map_err(Into::into)),
            self.shape(),
        );
        self.track_view_like(out, I, false)
    }

    /// `(x - max) - ln Σ exp(x - max)` along axis `I`: the log of [`Tensor::softmax`],
    /// computed without taking the log of a rounded probability.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank1<2>> = Tensor::from_array([0.0, -200.0], Device::Cpu);
    /// let y = x.log_softmax::<0>().to_vec();
    /// assert_eq!(y, vec![0.0, -200.0]); // softmax(x)[1] underflows to 0; its log does not
    /// ```
    pub fn log_softmax<const I: usize>(&self) -> Tensor<S, E>
    where
        E: Float,
        S: ReduceAxis<I>,
    {
        let out = Tensor::from_storage(
            ok(self
                .storage()
                .log_softmax(self.layout(), I)
                .map_err(Into::into)),
            self.shape(),
        );
        self.track_view_like(out, I, true)
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Gives a reduction's output its backward rule, when recording.
    fn track_reduce<S2: Shape>(
        &self,
        out: Tensor<S2, E>,
        axis: Option<usize>,
        kind: ReduceGrad,
    ) -> Tensor<S2, E> {
        if !autograd::must_record(&[self.node()]) {
            return out;
        }
        let (x, y) = (self.detach(), out.detach());
        out.record(vec![self.node().cloned()], move |g| {
            Ok(vec![autograd::erase(reduce_back(kind, &x, &y, g, axis)?)])
        })
    }

    /// Gives a softmax (`log = false`) or log-softmax output its backward rule, when recording.
    fn track_view_like(&self, out: Tensor<S, E>, axis: usize, log: bool) -> Tensor<S, E> {
        if !autograd::must_record(&[self.node()]) {
            return out;
        }
        let y = out.detach();
        out.record(vec![self.node().cloned()], move |g| {
            Ok(vec![autograd::erase(softmax_back(&y, g, axis, log)?)])
        })
    }
}
