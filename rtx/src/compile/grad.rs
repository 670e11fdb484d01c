//! Static gradients of the tensor methods a compiled forward may call: each runs the op
//! without recording and returns its backward as a closure, computing the inputs' gradients
//! that its `need` flags ask for with the same code the tape's rule runs.

use crate::error::ok;
use crate::shape::Shape;
use crate::tensor::{MatmulShapes, Tensor};
use rtx_kernels::Num;

/// `a.matmul(b)` with its backward.
///
/// ```
/// use rtx::prelude::*;
/// let a: Tensor<Rank2<1, 2>> = Tensor::from_array([[1.0, 2.0]], Device::Cpu);
/// let b: Tensor<Rank2<2, 1>> = Tensor::from_array([[3.0], [4.0]], Device::Cpu);
/// let (y, backward) = rtx::compile::grad::matmul(&a, &b);
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
pub fn matmul<S, R, E>(
    a: &Tensor<S, E>,
    b: &Tensor<R, E>,
) -> (
    Tensor<<S as MatmulShapes<R>>::Output, E>,
    impl FnOnce(
        &Tensor<<S as MatmulShapes<R>>::Output, E>,
        [bool; 2],
    ) -> (Option<Tensor<S, E>>, Option<Tensor<R, E>>)
    + use<S, R, E>,
)
where
    S: MatmulShapes<R>,
    R: Shape,
    E: Num,
{
    let (y, saved) = ok(a.matmul_saving(b));
    (y, move |dy: &Tensor<_, E>, [need_a, need_b]: [bool; 2]| {
        ok(saved.grads(dy, need_a, need_b))
    })
}
