//! rtx-kernels' integration tests, one binary: each module was its own test binary, and one
//! binary links and instantiates the kernels once instead of eighteen times, and lets the long
//! cases of different modules run side by side.

mod flash_common;
mod host_run;

mod cuda_host;
mod cuda_host_cast_multi;
mod cuda_host_multi;
mod cuda_host_scalar;
mod cuda_host_strided;
mod cuda_syntax;
mod example_kernels;
mod flash_attention;
mod flash_attention_bwd;
mod flash_attention_strided;
mod kernels_index;
mod kernels_loss;
mod kernels_norm;
mod kernels_random;
mod kernels_softmax;
mod local_arrays;
mod matmul_tc;
mod matmul_wgmma;
mod nn_kernels;
mod qmatmul;
mod snapshots;
mod tma;
