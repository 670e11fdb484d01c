//! Reductions along one axis, written as combine functions with `#[kernel(reduce(..))]`.
//! `sum`, `prod`, `amax` and `amin` are over `T: Num` (integers wrap, as the CPU backend's
//! reductions do); the others are float-only.

use crate::{Float, Num};
use rtx_macros::kernel;

/// Sum.
///
/// ```
/// let (v, shape) = rtx_kernels::kernels::sum::reduce_axis(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], 1, true).unwrap();
/// assert_eq!((v, shape), (vec![3.0, 7.0], vec![2, 1]));
/// ```
#[kernel(reduce(identity = 0.0), crate = crate)]
pub fn sum<T: Num>(acc: T, x: T) -> T {
    acc + x
}

/// Maximum (a NaN is skipped, as C's `fmax` does).
///
/// ```
/// let (v, _) = rtx_kernels::kernels::max::reduce_axis(&[1.0f32, 5.0, 3.0, 4.0], &[2, 2], 0, false).unwrap();
/// assert_eq!(v, vec![3.0, 5.0]);
/// ```
#[kernel(reduce(identity = T::NEG_INFINITY), crate = crate)]
pub fn max<T: Float>(acc: T, x: T) -> T {
    acc.max(x)
}

/// Mean: a sum finished by dividing by the axis length.
///
/// ```
/// let (v, _) = rtx_kernels::kernels::mean::reduce_axis(&[1.0f64, 2.0, 6.0], &[3], 0, false).unwrap();
/// assert_eq!(v, vec![3.0]);
/// ```
#[kernel(reduce(identity = 0.0, finish = |acc, n| acc / n), crate = crate)]
pub fn mean<T: Float>(acc: T, x: T) -> T {
    acc + x
}

/// Sum of squares: a sum of mapped elements.
///
/// ```
/// let (v, _) = rtx_kernels::kernels::sum_squares::reduce_axis(&[3.0f32, 4.0], &[2], 0, false).unwrap();
/// assert_eq!(v, vec![25.0]);
/// ```
#[kernel(reduce(identity = 0.0, map = |x| x * x), crate = crate)]
pub fn sum_squares<T: Float>(acc: T, x: T) -> T {
    acc + x
}

/// Product.
///
/// ```
/// let (v, _) = rtx_kernels::kernels::prod::reduce_axis(&[2.0f32, 3.0, 4.0], &[3], 0, false).unwrap();
/// assert_eq!(v, vec![24.0]);
/// ```
#[kernel(reduce(identity = 1.0), crate = crate)]
pub fn prod<T: Num>(acc: T, x: T) -> T {
    acc * x
}

/// Maximum, NaN-propagating (PyTorch's `amax`, and the CPU backend's `ReduceOp::Max`).
///
/// ```
/// let (v, _) = rtx_kernels::kernels::amax::reduce_axis(&[1.0f32, f32::NAN, 3.0], &[3], 0, false).unwrap();
/// assert!(v[0].is_nan());
/// ```
#[kernel(reduce(identity = T::LOWEST), crate = crate)]
pub fn amax<T: Num>(acc: T, x: T) -> T {
    if acc < x {
        x
    } else if x != x {
        x
    } else {
        acc
    }
}

/// Minimum, NaN-propagating (PyTorch's `amin`).
///
/// ```
/// let (v, _) = rtx_kernels::kernels::amin::reduce_axis(&[2.0f32, 1.0, 3.0], &[3], 0, false).unwrap();
/// assert_eq!(v, vec![1.0]);
/// ```
#[kernel(reduce(identity = T::HIGHEST), crate = crate)]
pub fn amin<T: Num>(acc: T, x: T) -> T {
    if acc > x {
        x
    } else if x != x {
        x
    } else {
        acc
    }
}
