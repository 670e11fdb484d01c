//! rtx's devices: the CPU backend, the CUDA runtime, storage, layouts and the device error.
//!
//! rtx-backends knows nothing about shapes as types or about autograd: it receives sizes and
//! strides as plain numbers ([`Layout`]) and element types as [`rtx_kernels::Element`]s.

#![warn(missing_docs)]

mod backend;
pub mod cpu;
pub mod cuda;
mod device;
mod dispatch;
mod error;
mod layout;
mod params;
pub mod storage;
#[cfg(test)]
mod test_values;

pub use backend::{
    Backend, Buffer, Captured, Gemm, Kernel, bytes_of, register_backend, vec_from_bytes,
};
pub use device::Device;
pub use dispatch::{Stats, launch_count, stats, total_launch_count};
pub use error::{BackendError, Result, human_bytes};
pub use layout::{Layout, MAX_RANK, StridedOffsets};
pub use params::{
    AdamScalars, AttentionDims, AttentionLayout, Conv2dParams, HeadStrides, Pool2dParams,
    SgdScalars,
};
pub use storage::{Storage, backend};
