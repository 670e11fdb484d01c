//! The binary ops of [`BinaryOp`](crate::BinaryOp) as elementwise kernels (their strided
//! entries broadcast with zero strides), and the scalar maps `affine` and `clamp`, whose
//! scalars are `#[uniform]` arguments rather than broadcast tensors. All but `pow` are over
//! `T: Num`, so integer tensors have them too (wrapping, and dividing by zero into 0, as
//! [`Num`](crate::Num) does); integer `pow` has no kernel yet.
//!
//! Invariant: each formula is its marker's in `op.rs`, NaN rules included.

use crate::{BinaryOp, Float, Num, kernel::KernelSource};
use rtx_macros::kernel;

/// `a + b`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::add(1.0f32, 2.0), 3.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn add<T: Num>(a: T, b: T) -> T {
    a + b
}

/// `a - b`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::sub(1.0f32, 2.0), -1.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn sub<T: Num>(a: T, b: T) -> T {
    a - b
}

/// `a * b`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::mul(3.0f32, 2.0), 6.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn mul<T: Num>(a: T, b: T) -> T {
    a * b
}

/// `a / b` (integers truncate, and dividing by zero gives 0).
///
/// ```
/// assert_eq!(rtx_kernels::kernels::div(3.0f32, 2.0), 1.5);
/// assert_eq!(rtx_kernels::kernels::div(7i32, 0), 0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn div<T: Num>(a: T, b: T) -> T {
    a / b
}

/// The larger of `a` and `b`; a NaN on either side wins (PyTorch's `maximum`).
///
/// ```
/// assert!(rtx_kernels::kernels::maximum(1.0f32, f32::NAN).is_nan());
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn maximum<T: Num>(a: T, b: T) -> T {
    if a < b {
        b
    } else if b != b {
        b
    } else {
        a
    }
}

/// The smaller of `a` and `b`; a NaN on either side wins (PyTorch's `minimum`).
///
/// ```
/// assert_eq!(rtx_kernels::kernels::minimum(1.0f32, 2.0), 1.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn minimum<T: Num>(a: T, b: T) -> T {
    if a > b {
        b
    } else if b != b {
        b
    } else {
        a
    }
}

/// `a ^ b`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::pow(2.0f32, 3.0), 8.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn pow<T: Float>(a: T, b: T) -> T {
    a.powf(b)
}

/// `x * mul + add` (scalar arithmetic and scaling in one pass).
///
/// ```
/// assert_eq!(rtx_kernels::kernels::affine(2.0f32, 3.0, 1.0), 7.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn affine<T: Num>(x: T, #[uniform] mul: T, #[uniform] add: T) -> T {
    x * mul + add
}

/// `x` clamped into `[lo, hi]`; a NaN stays NaN.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::clamp(5.0f32, 0.0, 1.0), 1.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn clamp<T: Num>(x: T, #[uniform] lo: T, #[uniform] hi: T) -> T {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}

/// The kernel computing a binary op.
///
/// ```
/// use rtx_kernels::{BinaryOp, kernels::binary_kernel};
/// assert_eq!(binary_kernel(BinaryOp::Max).name, "maximum");
/// ```
pub fn binary_kernel(op: BinaryOp) -> &'static KernelSource {
    match op {
        BinaryOp::Add => &add::KERNEL,
        BinaryOp::Sub => &sub::KERNEL,
        BinaryOp::Mul => &mul::KERNEL,
        BinaryOp::Div => &div::KERNEL,
        BinaryOp::Max => &maximum::KERNEL,
        BinaryOp::Min => &minimum::KERNEL,
        BinaryOp::Pow => &pow::KERNEL,
    }
}
