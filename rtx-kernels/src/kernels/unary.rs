//! The unary ops of [`UnaryOp`](crate::UnaryOp) as elementwise kernels, one per op: each is
//! the op's only formula, which the CPU backend runs natively, the GPU backend as CUDA, and
//! other kernels (`#[model]`'s fused chains among them) call. `neg` and `abs` are over
//! `T: Num` (integers too), the rest over `T: Float` with derivatives derived by `#[kernel]`.
//! Also `copy` and `cast`, in every element type.
//!
//! Invariant: every op of the registry (`rtx-macros/src/ops.rs`) has the kernel of its name
//! here or, for `gelu_tanh`, in `activation.rs`.

use crate::{Element, Float, Num};
use rtx_macros::kernel;

/// `-x` (integers wrap).
///
/// ```
/// assert_eq!(rtx_kernels::kernels::neg(2.0f32), -2.0);
/// assert_eq!(rtx_kernels::kernels::neg(i32::MIN), i32::MIN);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn neg<T: Num>(x: T) -> T {
    -x
}

/// `|x|` (integers wrap at the minimum).
///
/// ```
/// assert_eq!(rtx_kernels::kernels::abs(-2.0f32), 2.0);
/// assert_eq!(rtx_kernels::kernels::abs(-7i64), 7);
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn abs<T: Num>(x: T) -> T {
    x.abs()
}

/// `e^x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::exp(0.0f32), 1.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn exp<T: Float>(x: T) -> T {
    x.exp()
}

/// `ln x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::log(1.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn log<T: Float>(x: T) -> T {
    x.ln()
}

/// `ln(1 + x)`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::log1p(0.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn log1p<T: Float>(x: T) -> T {
    x.ln_1p()
}

/// `sqrt x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::sqrt(4.0f32), 2.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn sqrt<T: Float>(x: T) -> T {
    x.sqrt()
}

/// `1 / sqrt x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::rsqrt(4.0f32), 0.5);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn rsqrt<T: Float>(x: T) -> T {
    1.0 / x.sqrt()
}

/// `1 / x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::recip(4.0f32), 0.25);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn recip<T: Float>(x: T) -> T {
    1.0 / x
}

/// `sin x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::sin(0.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn sin<T: Float>(x: T) -> T {
    x.sin()
}

/// `cos x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::cos(0.0f32), 1.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn cos<T: Float>(x: T) -> T {
    x.cos()
}

/// `tanh x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::tanh(0.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn tanh<T: Float>(x: T) -> T {
    x.tanh()
}

/// `erf x`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::erf(0.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn erf<T: Float>(x: T) -> T {
    x.erf()
}

/// `max(x, 0)`; a NaN stays NaN.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::relu(-2.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn relu<T: Float>(x: T) -> T {
    if x < 0.0 { 0.0 } else { x }
}

/// `1 / (1 + e^-x)`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::sigmoid(0.0f32), 0.5);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn sigmoid<T: Float>(x: T) -> T {
    1.0 / (1.0 + (-x).exp())
}

/// `x/2 * (1 + erf(x / sqrt 2))`, the exact gelu.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::gelu(0.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn gelu<T: Float>(x: T) -> T {
    0.5 * x * (1.0 + (x * 0.7071067811865476).erf())
}

/// `x / (1 + e^-x)`.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::silu(0.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn silu<T: Float>(x: T) -> T {
    x / (1.0 + (-x).exp())
}

/// `ln(1 + e^x)`, and `x` itself above 20 where the two agree to rounding.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::softplus(30.0f32), 30.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn softplus<T: Float>(x: T) -> T {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

/// `x * relu6(x + 3) / 6`: 0 up to -3, `x` from 3, a parabola between (PyTorch's
/// `hardswish`).
///
/// ```
/// use rtx_kernels::kernels::hardswish;
/// assert_eq!(hardswish(-4.0f32), 0.0);
/// assert_eq!(hardswish(1.0f32), 1.0 * 4.0 / 6.0);
/// assert_eq!(hardswish(5.0f64), 5.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn hardswish<T: Float>(x: T) -> T {
    if x <= -3.0 {
        0.0
    } else if x >= 3.0 {
        x
    } else {
        x * (x + 3.0) / 6.0
    }
}

/// `x * tanh(softplus(x))` (PyTorch's `mish`), through [`softplus`](softplus()).
///
/// ```
/// use rtx_kernels::kernels::mish;
/// assert_eq!(mish(0.0f32), 0.0);
/// assert!((mish(1.0f64) - 0.8650983882673103).abs() < 1e-12);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn mish<T: Float>(x: T) -> T {
    x * softplus(x).tanh()
}

/// The identity: the strided path of this kernel is the dense copy of a view (`contiguous`),
/// in every element type.
///
/// ```
/// assert_eq!(rtx_kernels::kernels::copy(3.0f32), 3.0);
/// assert!(rtx_kernels::kernels::copy(true));
/// ```
#[kernel(elementwise, no_grad, crate = crate)]
pub fn copy<T: Element>(x: T) -> T {
    x
}

/// An element converted to another element type, exactly as `Element::cast` converts it:
/// between integer types (and `bool`) through i64, otherwise through f64 (floats to integers
/// truncate and saturate, NaN becomes 0; anything to `bool` is "not zero").
///
/// ```
/// use rtx_kernels::{bf16, kernels::cast};
/// assert_eq!(cast::<f32, bf16>(1.0), bf16::ONE);
/// assert_eq!(cast::<f32, u8>(300.5), 255);
/// assert_eq!(cast::<i64, i32>(1 << 32 | 5), 5);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn cast<T: Element, U: Element>(x: T) -> U {
    x
}
