//! rtx: a deep-learning framework in which the compiler checks tensor shapes and element types.
//!
//! A [`Tensor<S, E>`](Tensor) carries its shape `S` (a tuple of [`Const<N>`](shape::Const),
//! `usize` and named [`Dyn<'B'>`](shape::Dyn) dims) and its element type `E` in its type.
//! Start with [`prelude`], the book's "Tensors and shapes" chapter, and ARCHITECTURE.md.
//!
//! ```
//! use rtx::prelude::*;
//! let w: Tensor<Rank2<3, 2>> = Tensor::ones((Const, Const), Device::Cpu);
//! let x: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::full((Dyn(4), Const), 0.5, Device::Cpu);
//! let y = x.matmul(&w).relu(); // [B, 3] x [3, 2] -> [B, 2], checked when compiling
//! assert_eq!(y.dims(), &[4, 2]);
//! ```

#![warn(missing_docs)]

pub mod autograd;
pub mod compile;
pub mod data;
pub mod dist;
mod error;
pub mod io;
pub mod ir;
pub mod kernel;
pub mod nn;
pub mod optim;
pub mod quant;
mod rules;
pub mod shape;
mod tensor;

pub use autograd::{Gradients, is_grad_enabled, no_grad};
pub use error::{Error, Result};
pub use rtx_backends::Device;
pub use rtx_backends::{Stats, launch_count, stats, total_launch_count};
/// rtx's own kernels, written with `#[kernel]`: call them from your kernels
/// (`rtx::kernels::gelu_tanh(x)`), or apply their `name::Op` to tensors.
pub use rtx_kernels::kernels;
pub use rtx_kernels::op;
pub use rtx_kernels::{DType, Element, Float, Num, Signed, bf16, f16};
pub use rtx_macros::{kernel, model};
pub use tensor::*;

pub mod cuda;

/// What the code `#[model]` emits refers to, so user crates need only depend on `rtx`.
#[doc(hidden)]
pub mod __private {
    pub use crate::nn::{Init, Module, TensorKind, Visitor, VisitorMut};
    pub use rtx_backends::Device;
    /// `#[kernel]`'s generated code names `::rtx::__private::rtx_kernels::...`.
    pub use rtx_kernels;
}

/// Everything a model file usually needs, in one import.
pub mod prelude {
    pub use crate::data::{Collate, DataLoader, Dataset};
    pub use crate::nn::{
        AvgPool2d, BatchNorm, BatchNorm1d, BatchNorm2d, CausalSelfAttention, Conv1d, Conv2d,
        CrossEntropy, Dropout, Embedding, GELU, Init, LayerNorm, Linear, MaxPool2d, ModelExt,
        Module, RMSNorm, ReLU, SiLU, Sigmoid, Tanh, binary_cross_entropy_with_logits,
        cross_entropy, cross_entropy_with, l1_loss, mse_loss, nll_loss, try_cross_entropy_with,
        try_nll_loss,
    };
    pub use crate::optim::{
        Adam, AdamW, Constant, CosineAnnealing, LinearWarmup, OptimState, Optimizer, Schedule, Sgd,
        StepLR, clip_grad_norm,
    };
    pub use crate::shape::{
        Axes2, Axes3, Axes4, Axes5, Axes6, Const, ConstShape, Dim, Dyn, Rank0, Rank1, Rank2, Rank3,
        Rank4, Rank5, Rank6, Shape,
    };
    pub use crate::tensor::*;
    pub use crate::{DType, Device, Element, Error, Float, Num, Result, Signed, bf16, f16, model};
}
