//! Binary ops and comparisons between a tensor and one plain scalar, with the scalar, the op
//! and the side as `#[uniform]` arguments: a scalar never becomes a (broadcast) tensor, so
//! `x * 2.0` on a GPU uploads nothing (it can be captured in a CUDA graph) and reads one
//! input at copy bandwidth with vector loads.
//!
//! Invariant: for every op, side and element type, each kernel computes bit for bit what the
//! tensor-tensor kernel of `binary.rs` or `compare.rs` computes for the same two values (the
//! same expression of the same widened operands: each op's formula is its marker's in
//! `op.rs`, NaN rules included). `binary_scalar` covers the ops over `T: Num` (integers
//! wrap, and divide by zero into 0); `pow_scalar` is over `T: Float`, as `pow` is.

use crate::{BinaryOp, CmpOp, Element, Float, Num, kernel::KernelSource};
use rtx_macros::kernel;

/// `x op c`, or `c op x` when `left` is not 0, for the op numbered `op` by
/// [`binary_scalar_code`] (every [`BinaryOp`] but `Pow`, which is [`pow_scalar()`]).
///
/// ```
/// use rtx_kernels::{BinaryOp, kernels::{binary_scalar, binary_scalar_code}};
/// let code = |op| binary_scalar_code(op).unwrap();
/// assert_eq!(binary_scalar(5.0f32, 2.0, code(BinaryOp::Sub), 0), 3.0);
/// assert_eq!(binary_scalar(5.0f32, 2.0, code(BinaryOp::Sub), 1), -3.0);
/// assert_eq!(binary_scalar(7i32, 0, code(BinaryOp::Div), 0), 0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn binary_scalar<T: Num>(x: T, #[uniform] c: T, #[uniform] op: u32, #[uniform] left: u32) -> T {
    let a = if left != 0 { c } else { x };
    let b = if left != 0 { x } else { c };
    // Each arm is the body of the tensor-tensor kernel of the same op.
    if op == 0 {
        a + b
    } else if op == 1 {
        a - b
    } else if op == 2 {
        a * b
    } else if op == 3 {
        a / b
    } else if op == 4 {
        if a < b {
            b
        } else if b != b {
            b
        } else {
            a
        }
    } else if a > b {
        b
    } else if b != b {
        b
    } else {
        a
    }
}

/// `x ^ c`, or `c ^ x` when `left` is not 0.
///
/// ```
/// use rtx_kernels::kernels::pow_scalar;
/// assert_eq!(pow_scalar(3.0f32, 2.0, 0), 9.0);
/// assert_eq!(pow_scalar(3.0f32, 2.0, 1), 8.0);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn pow_scalar<T: Float>(x: T, #[uniform] c: T, #[uniform] left: u32) -> T {
    if left != 0 { c.powf(x) } else { x.powf(c) }
}

/// `x cmp c` for the comparison numbered `op` by [`cmp_scalar_code`]. The scalar is always on
/// the right: a scalar on the left is the mirrored comparison (`c < x` is `x > c`).
///
/// ```
/// use rtx_kernels::{CmpOp, kernels::{cmp_scalar, cmp_scalar_code}};
/// assert!(cmp_scalar(3.0f32, 2.0, cmp_scalar_code(CmpOp::Gt)));
/// assert!(!cmp_scalar(f32::NAN, 2.0, cmp_scalar_code(CmpOp::Le)));
/// ```
#[kernel(elementwise, crate = crate)]
pub fn cmp_scalar<T: Element>(x: T, #[uniform] c: T, #[uniform] op: u32) -> bool {
    if op == 0 {
        x == c
    } else if op == 1 {
        x != c
    } else if op == 2 {
        x < c
    } else if op == 3 {
        x <= c
    } else if op == 4 {
        x > c
    } else {
        x >= c
    }
}

/// The `op` uniform of [`binary_scalar()`] for a binary op, or `None` for `Pow` (which has its
/// own kernel, [`pow_scalar()`], over floats only).
///
/// ```
/// use rtx_kernels::{BinaryOp, kernels::binary_scalar_code};
/// assert_eq!(binary_scalar_code(BinaryOp::Add), Some(0));
/// assert_eq!(binary_scalar_code(BinaryOp::Pow), None);
/// ```
pub fn binary_scalar_code(op: BinaryOp) -> Option<u32> {
    match op {
        BinaryOp::Add => Some(0),
        BinaryOp::Sub => Some(1),
        BinaryOp::Mul => Some(2),
        BinaryOp::Div => Some(3),
        BinaryOp::Max => Some(4),
        BinaryOp::Min => Some(5),
        BinaryOp::Pow => None,
    }
}

/// The `op` uniform of [`cmp_scalar()`] for a comparison.
///
/// ```
/// use rtx_kernels::{CmpOp, kernels::cmp_scalar_code};
/// assert_eq!(cmp_scalar_code(CmpOp::Ge), 5);
/// ```
pub fn cmp_scalar_code(op: CmpOp) -> u32 {
    match op {
        CmpOp::Eq => 0,
        CmpOp::Ne => 1,
        CmpOp::Lt => 2,
        CmpOp::Le => 3,
        CmpOp::Gt => 4,
        CmpOp::Ge => 5,
    }
}

/// The kernel computing `x op c` (and `c op x`) for a binary op, with its `op` uniform:
/// [`binary_scalar()`] and the op's code, or [`pow_scalar()`] and `None`.
///
/// ```
/// use rtx_kernels::{BinaryOp, kernels::binary_scalar_kernel};
/// assert_eq!(binary_scalar_kernel(BinaryOp::Max).0.name, "binary_scalar");
/// assert_eq!(binary_scalar_kernel(BinaryOp::Pow).0.name, "pow_scalar");
/// ```
pub fn binary_scalar_kernel(op: BinaryOp) -> (&'static KernelSource, Option<u32>) {
    match binary_scalar_code(op) {
        Some(code) => (&binary_scalar::KERNEL, Some(code)),
        None => (&pow_scalar::KERNEL, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::markers::{Add, Div, Max, Min, Mul, Pow, Sub};
    use crate::{BinaryOpT, f16};

    /// The native kernels against the markers' scalar functions, on both sides.
    #[test]
    fn native_kernels_are_the_markers_on_both_sides() {
        fn check<O: BinaryOpT>() {
            let (k, code) = binary_scalar_kernel(O::OP);
            let vals = [-2.5f32, -0.0, 0.0, 1.0, 3.0, f32::NAN, f32::INFINITY];
            for &x in &vals {
                for &c in &vals {
                    for left in [0u32, 1] {
                        let want = if left == 1 {
                            O::apply(c, x)
                        } else {
                            O::apply(x, c)
                        };
                        let got = match code {
                            Some(op) => binary_scalar(x, c, op, left),
                            None => pow_scalar(x, c, left),
                        };
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{} {x} {c} left {left}",
                            k.name
                        );
                    }
                }
            }
        }
        check::<Add>();
        check::<Sub>();
        check::<Mul>();
        check::<Div>();
        check::<Max>();
        check::<Min>();
        check::<Pow>();
        let h = f16::from_f32(0.1);
        assert_eq!(binary_scalar(h, h, 0, 0), Add::apply(h, h));
        assert_eq!(binary_scalar(i32::MIN, -1, 3, 0), 0);
        assert_eq!(binary_scalar(250u8, 10, 0, 1), 4);
    }
}
