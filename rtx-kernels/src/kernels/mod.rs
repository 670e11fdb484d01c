//! Kernels written with `#[kernel]`: each exists natively (call it like any Rust function)
//! and as CUDA C source in its module's `KERNEL`. [`ALL`] lists every kernel's source so a
//! backend, a test or a script can compile them all with NVRTC.
//!
//! ```
//! use rtx_kernels::kernels::{ALL, gelu_tanh};
//! assert!((gelu_tanh(1.0f64) - 0.8411919906082768).abs() < 1e-12);
//! assert!(ALL.iter().any(|k| k.name == "softmax_rows"));
//! ```

mod activation;
mod reduce;
mod simt;

pub use activation::*;
pub use reduce::*;
pub use simt::*;

use crate::kernel::KernelSource;

/// Every kernel of this crate, derivative kernels included.
pub static ALL: &[&KernelSource] = &[
    &gelu_tanh::KERNEL,
    &gelu_tanh_grad_x::KERNEL,
    &leaky_relu::KERNEL,
    &leaky_relu_grad_x::KERNEL,
    &huber::KERNEL,
    &huber_grad_x::KERNEL,
    &huber_grad_y::KERNEL,
    &sum::KERNEL,
    &max::KERNEL,
    &mean::KERNEL,
    &sum_squares::KERNEL,
    &axpy::KERNEL,
    &softmax_rows::KERNEL,
    &dot::KERNEL,
];
