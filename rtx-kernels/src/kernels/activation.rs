//! Elementwise kernels: activations and a loss, each with derivative kernels derived by
//! `#[kernel]` (`<name>_grad_<input>`).

use crate::Float;
use rtx_macros::kernel;

/// GELU, tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
///
/// ```
/// use rtx_kernels::kernels::gelu_tanh;
/// assert_eq!(gelu_tanh(0.0f32), 0.0);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn gelu_tanh<T: Float>(x: T) -> T {
    let inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + inner.tanh())
}

/// Leaky ReLU with a uniform slope for negative inputs.
///
/// ```
/// use rtx_kernels::kernels::leaky_relu;
/// assert_eq!(leaky_relu(-2.0f32, 0.1), -0.2);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn leaky_relu<T: Float>(x: T, #[uniform] slope: T) -> T {
    if x > 0.0 { x } else { slope * x }
}

/// The Huber loss of a prediction `x` against a target `y`: quadratic within `delta`,
/// linear beyond.
///
/// ```
/// use rtx_kernels::kernels::huber;
/// assert_eq!(huber(3.0f64, 1.0, 1.0), 1.5);
/// ```
#[kernel(elementwise, crate = crate)]
pub fn huber<T: Float>(x: T, y: T, #[uniform] delta: T) -> T {
    let d = (x - y).abs();
    if d < delta {
        0.5 * d * d
    } else {
        delta * (d - 0.5 * delta)
    }
}
