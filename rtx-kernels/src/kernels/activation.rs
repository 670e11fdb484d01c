//! Elementwise kernels: activations and a loss, each with derivative kernels derived by
//! `#[kernel]` (`<name>_grad_<input>`); and SwiGLU over rows of stacked halves.

use super::silu;
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

/// SwiGLU of rows of stacked halves: `out[r, j] = silu(x[r, j]) * x[r, k + j]` for `x`
/// `[m, 2 k]` (a Llama block's gate and up projections side by side, one product) and `out`
/// `[m, k]`; one thread per output, in a grid-stride loop. Quantized products that take SwiGLU
/// joined (`qmatvec_ggml`) compute the same values.
///
/// ```
/// use rtx_kernels::{kernel::LaunchConfig, kernels::swiglu_rows};
/// let x = [0.0f32, 1.0, 5.0, 7.0]; // one row: gates 0 and 1, ups 5 and 7
/// let mut out = [9.0f32; 2];
/// swiglu_rows(LaunchConfig::new(1, 32), &x, &mut out, 1, 2).unwrap();
/// assert_eq!(out, [0.0, rtx_kernels::kernels::silu(1.0f32) * 7.0]);
/// ```
#[kernel(crate = crate)]
pub fn swiglu_rows<T: Float>(x: &[T], out: &mut [T], m: usize, k: usize) {
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < m * k {
        let r = i / k;
        let j = i % k;
        out[i] = silu(x[r * 2 * k + j]) * x[r * 2 * k + k + j];
        i += grid_dim_x() * block_dim_x();
    }
}
