//! Comparisons into `bool` masks, `where` selecting by a mask, and the casts between floats
//! and `bool`: elementwise kernels with `bool` buffers. Comparisons and `where` are over
//! `T: Element`, so every element type has them (`false < true`, as Rust orders `bool`).
//!
//! Invariant: a comparison widens both sides exactly (f16 and bf16 to f32), so it gives the
//! same answer as comparing the stored values, as the CPU backend does.

use crate::{CmpOp, Element, Float, kernel::KernelSource};
use rtx_macros::kernel;

/// `a == b`.
///
/// ```
/// assert!(rtx_kernels::kernels::eq(1.0f32, 1.0));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn eq<T: Element>(a: T, b: T) -> bool {
    a == b
}

/// `a != b`.
///
/// ```
/// assert!(rtx_kernels::kernels::ne(1.0f32, 2.0));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn ne<T: Element>(a: T, b: T) -> bool {
    a != b
}

/// `a < b`.
///
/// ```
/// assert!(rtx_kernels::kernels::lt(1.0f32, 2.0));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn lt<T: Element>(a: T, b: T) -> bool {
    a < b
}

/// `a <= b`.
///
/// ```
/// assert!(rtx_kernels::kernels::le(2.0f32, 2.0));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn le<T: Element>(a: T, b: T) -> bool {
    a <= b
}

/// `a > b`.
///
/// ```
/// assert!(rtx_kernels::kernels::gt(3.0f32, 2.0));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn gt<T: Element>(a: T, b: T) -> bool {
    a > b
}

/// `a >= b`.
///
/// ```
/// assert!(rtx_kernels::kernels::ge(2.0f32, 2.0));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn ge<T: Element>(a: T, b: T) -> bool {
    a >= b
}

/// `cond ? a : b`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::select(false, 1.0f32, 2.0), 2.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn select<T: Element>(cond: bool, a: T, b: T) -> T {
    if cond { a } else { b }
}

/// A `bool` as a float: 1 or 0.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::from_bool::<f32>(true), 1.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn from_bool<T: Float>(c: bool) -> T {
    if c { 1.0 } else { 0.0 }
}

/// A float as a `bool`: whether it is non-zero (NaN counts as non-zero).
///
/// ```
/// assert!(!rtx_kernels::kernels::to_bool(0.0f32));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn to_bool<T: Float>(x: T) -> bool {
    x != 0.0
}

/// The kernel computing a comparison.
///
/// ```
/// use rtx_kernels::{CmpOp, kernels::cmp_kernel};
/// assert_eq!(cmp_kernel(CmpOp::Le).name, "le");
/// ```
pub fn cmp_kernel(op: CmpOp) -> &'static KernelSource {
    match op {
        CmpOp::Eq => &eq::KERNEL,
        CmpOp::Ne => &ne::KERNEL,
        CmpOp::Lt => &lt::KERNEL,
        CmpOp::Le => &le::KERNEL,
        CmpOp::Gt => &gt::KERNEL,
        CmpOp::Ge => &ge::KERNEL,
    }
}
