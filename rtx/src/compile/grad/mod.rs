//! Static gradients of the tensor methods a compiled forward may call, as the extension trait
//! [`StaticOps`]: each method has the name and the generic parameters of the `Tensor` method
//! it mirrors, runs that method on its inputs without recording, and returns its output with
//! its backward as a closure. `#[model]` emits `StaticOps::softmax::<1>(&x)` for a user's
//! `x.softmax::<1>()`, so turbofish arguments carry over unchanged.
//!
//! A backward takes the output's gradient and one `need` flag per tensor input, and returns
//! the gradients asked for: a bare `Option` for a one-input op (as
//! [`fused1_train`](super::fused::fused1_train) does), a tuple of them for more. Only float
//! tensors get gradients (as on the tape, where only they carry history); for other element
//! types every gradient is `None`.
//!
//! A trait is one declaration, so its methods are written by concept in `views.rs`,
//! `reduce.rs`, `index.rs` and `join.rs`, each as a macro expanded inside the declaration
//! below (the names they use are imported here).
//!
//! Invariant: a backward computes its gradients with the function the tape's rule for the
//! same method calls (`reduce_back`, `softmax_back`, `narrow_back`, `sum_to`, the saved
//! operands of `MatmulGrad`, ...), so a static gradient equals the tape's.

mod index;
mod join;
mod reduce;
mod views;

use crate::autograd::index::{gather_back, index_select_back, slice_of};
use crate::autograd::reduce::{ReduceGrad, reduce_back, softmax_back};
use crate::autograd::{narrow_back, sum_to};
use crate::error::ok;
use crate::shape::rules::{BroadcastShapes, ConcatWith};
use crate::shape::{Const, Dim, HasAxis, InsertAxis, PermuteAxes, ReduceAxis, Shape, SwapAxes};
use crate::tensor::{Kept, MatmulShapes, Operand, Reduced, Replaced, Tensor};
use index::index_methods;
use join::join_methods;
use reduce::{reduce_methods, reductions};
use rtx_backends::Storage;
use rtx_kernels::{Element, Float, Num};
use views::view_methods;

mod sealed {
    use crate::shape::Shape;
    use crate::tensor::Tensor;
    use rtx_kernels::Element;

    /// Hands [`StaticOps`](super::StaticOps)'s methods the tensor they run on. Only `Tensor`
    /// implements it, so the trait's methods cannot be replaced outside rtx.
    pub trait Sealed<S: Shape, E: Element> {
        /// The tensor itself.
        fn tensor(&self) -> &Tensor<S, E>;
    }
}

impl<S: Shape, E: Element> sealed::Sealed<S, E> for Tensor<S, E> {
    fn tensor(&self) -> &Tensor<S, E> {
        self
    }
}

impl<S: Shape, E: Element> StaticOps<S, E> for Tensor<S, E> {}

/// Whether a gradient asked for with `need` is computed: only float tensors take gradients.
fn wants<E: Element>(need: bool) -> bool {
    need && E::DTYPE.is_float()
}

/// The tensor methods of a compiled forward with their static backwards (see the module
/// docs). Implemented for every `Tensor<S, E>`; call it by path, as `#[model]` does.
///
/// ```
/// use rtx::prelude::*;
/// use rtx::compile::grad::StaticOps;
///
/// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
/// let (y, backward) = StaticOps::sum::<1>(&x);
/// assert_eq!(y.to_vec(), vec![3.0, 7.0]);
/// let dx = backward(&Tensor::from_array([1.0, 10.0], Device::Cpu), [true]).unwrap();
/// assert_eq!(dx.to_vec(), vec![1.0, 1.0, 10.0, 10.0]);
/// ```
pub trait StaticOps<S: Shape, E: Element>: sealed::Sealed<S, E> {
    /// [`Tensor::matmul`] with its backward (`dA = G Bᵀ`, `dB = Aᵀ G`, through the product's
    /// saved operands as on the tape).
    ///
    /// ```
    /// use rtx::prelude::*;
    /// use rtx::compile::grad::StaticOps;
    /// let a: Tensor<Rank2<1, 2>> = Tensor::from_array([[1.0, 2.0]], Device::Cpu);
    /// let b: Tensor<Rank2<2, 1>> = Tensor::from_array([[3.0], [4.0]], Device::Cpu);
    /// let (y, backward) = StaticOps::matmul(&a, &b);
    /// assert_eq!(y.to_vec(), vec![11.0]);
    /// let (da, db) = backward(&y.ones_like(), [true, true]);
    /// assert_eq!(da.unwrap().to_vec(), vec![3.0, 4.0]);
    /// assert_eq!(db.unwrap().to_vec(), vec![1.0, 2.0]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::matmul`] does, and when the device fails in the backward.
    #[track_caller]
    #[allow(clippy::type_complexity)]
    fn matmul<R: Shape>(
        &self,
        rhs: &Tensor<R, E>,
    ) -> (
        Tensor<<S as MatmulShapes<R>>::Output, E>,
        impl FnOnce(
            &Tensor<<S as MatmulShapes<R>>::Output, E>,
            [bool; 2],
        ) -> (Option<Tensor<S, E>>, Option<Tensor<R, E>>)
        + use<Self, S, E, R>,
    )
    where
        E: Num,
        S: MatmulShapes<R>,
    {
        let (y, saved) = ok(self.tensor().matmul_saving(rhs));
        (y, move |dy: &Tensor<_, E>, [need_a, need_b]: [bool; 2]| {
            ok(saved.grads(dy, wants::<E>(need_a), wants::<E>(need_b)))
        })
    }

    view_methods!();

    reduce_methods!();

    index_methods!();

    join_methods!();
}

/// `mask` seen at `x`'s shape (a broadcast view), as the eager masked ops see it; they have
/// already checked that it broadcasts.
fn mask_at<C: Shape, S: Shape, E: Element>(
    mask: &Tensor<C, bool>,
    x: &Tensor<S, E>,
) -> Tensor<S, bool> {
    let layout = mask
        .layout()
        .broadcast_to(x.dims())
        .unwrap_or_else(|| unreachable!("the eager op checked that the mask broadcasts"));
    mask.view(layout, x.shape())
}
