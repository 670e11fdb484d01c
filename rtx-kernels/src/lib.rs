//! rtx's kernel library: the element-type traits, the primitive-op list with each op's scalar
//! function, and the Philox generator. Backends run these definitions; rtx-kernels knows
//! nothing about devices, layouts or autograd.

#![warn(missing_docs)]

pub mod dtype;
pub mod fastmath;
pub mod kernel;
pub mod kernels;
pub mod op;
pub mod philox;

pub use dtype::{DType, Element, Float, FloatMath, Num, Signed};
pub use half::{bf16, f16};
pub use op::{BinaryOp, BinaryOpT, CmpOp, CmpOpT, Op, UnaryOp, UnaryOpT, UnaryVisitor};
pub use philox::Philox;

/// What `#[kernel]`'s output joins sources with (not part of the API).
#[doc(hidden)]
pub use const_format as __const_format;
