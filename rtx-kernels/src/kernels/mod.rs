//! Kernels written with `#[kernel]`: each exists natively (call it like any Rust function)
//! and as CUDA C source in its module's `KERNEL`. [`every_kernel`] lists every kernel's source so a
//! backend, a test or a script can compile them all with NVRTC.
//!
//! ```
//! use rtx_kernels::kernels::{every_kernel, gelu_tanh};
//! assert!((gelu_tanh(1.0f64) - 0.8411919906082768).abs() < 1e-12);
//! assert!(every_kernel().iter().any(|k| k.name == "softmax_rows"));
//! assert!(every_kernel().iter().any(|k| k.name == "mish_grad_x"));
//! ```

mod activation;
mod arg;
mod binary;
mod cast_multi;
mod compare;
mod conv;
mod dequant;
mod dropout;
mod flash_attention;
mod flash_attention_bwd;
mod flash_attention_bwd_wgmma;
mod flash_attention_wgmma;
mod gather;
mod index;
mod join;
mod log_softmax;
mod logsumexp;
mod loss;
mod norm;
mod norm_warp;
mod optim;
mod optim_multi;
mod pool;
mod qmatmul;
mod qmatmul_tc;
mod random;
mod reduce;
mod rows;
mod scalar_ops;
mod scatter_sort;
mod simt;
mod softmax;
mod softmax_backward;
mod softmax_warp;
mod tensor_gemm;
mod unary;
mod variance;
mod wgmma_gemm;

pub use activation::*;
pub use arg::*;
pub use binary::*;
pub use cast_multi::*;
pub use compare::*;
pub use conv::*;
pub use dequant::*;
pub use dropout::*;
pub use flash_attention::*;
pub use flash_attention_bwd::*;
pub use flash_attention_bwd_wgmma::*;
pub use flash_attention_wgmma::*;
pub use gather::*;
pub use index::*;
pub use join::*;
pub use log_softmax::*;
pub use logsumexp::*;
pub use loss::*;
pub use norm::*;
pub use norm_warp::*;
pub use optim::*;
pub use optim_multi::*;
pub use pool::*;
pub use qmatmul::*;
pub use qmatmul_tc::*;
pub use random::*;
pub use reduce::*;
pub use rows::*;
pub use scalar_ops::*;
pub use scatter_sort::*;
pub use simt::*;
pub use softmax::*;
pub use softmax_backward::*;
pub use softmax_warp::*;
pub use tensor_gemm::*;
pub use unary::*;
pub use variance::*;
pub use wgmma_gemm::*;

use crate::kernel::{Elementwise, KernelSource};
use crate::{UnaryOp, UnaryOpT, UnaryVisitor};

/// Every kernel of this crate: [`ALL`], then each unary op's kernel and its derived derivative,
/// taken from the op registry (so a new op needs no line here), each kernel once.
pub fn every_kernel() -> Vec<&'static KernelSource> {
    struct Grad;
    impl UnaryVisitor for Grad {
        type Out = Option<&'static KernelSource>;
        fn visit<O: UnaryOpT>(self) -> Self::Out {
            <O::Kernel as Elementwise<1>>::GRADS[0]
        }
    }
    let mut out: Vec<&'static KernelSource> = ALL.to_vec();
    for op in UnaryOp::ALL {
        for k in [Some(op.kernel()), op.visit(Grad)].into_iter().flatten() {
            if !out.iter().any(|o| o.name == k.name) {
                out.push(k);
            }
        }
    }
    out
}

/// The kernels of this crate other than the unary ops' (which [`every_kernel`] adds from the
/// op registry), derivative kernels included.
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
    &matmul_tc::KERNEL,
    &matmul_wgmma::KERNEL,
    &matmul_wgmma_tma::KERNEL,
    &flash_attn_fwd::KERNEL,
    &flash_attn_fwd_wgmma::KERNEL,
    &flash_attn_bwd_rowdot::KERNEL,
    &flash_attn_bwd_dkdv::KERNEL,
    &flash_attn_bwd_dkdv_wgmma::KERNEL,
    &flash_attn_bwd_dq_wgmma::KERNEL,
    &flash_attn_bwd_dq::KERNEL,
    &copy::KERNEL,
    &cast::KERNEL,
    &add::KERNEL,
    &sub::KERNEL,
    &mul::KERNEL,
    &div::KERNEL,
    &maximum::KERNEL,
    &minimum::KERNEL,
    &pow::KERNEL,
    &affine::KERNEL,
    &clamp::KERNEL,
    &binary_scalar::KERNEL,
    &pow_scalar::KERNEL,
    &cmp_scalar::KERNEL,
    &eq::KERNEL,
    &ne::KERNEL,
    &lt::KERNEL,
    &le::KERNEL,
    &gt::KERNEL,
    &ge::KERNEL,
    &select::KERNEL,
    &from_bool::KERNEL,
    &to_bool::KERNEL,
    &prod::KERNEL,
    &amax::KERNEL,
    &amin::KERNEL,
    &log_softmax_rows::KERNEL,
    &logsumexp_rows::KERNEL,
    &var_rows::KERNEL,
    &index_select_axis::KERNEL,
    &im2col::KERNEL,
    &col2im::KERNEL,
    &pool2d_forward::KERNEL,
    &pool2d_backward::KERNEL,
    &norm_rows::KERNEL,
    &norm_backward_rows::KERNEL,
    &norm_param_partials::KERNEL,
    &norm_param_finish::KERNEL,
    &adam_step::KERNEL,
    &adam_multi::KERNEL,
    &sgd_multi::KERNEL,
    &sum_squares_multi::KERNEL,
    &clip_coef::KERNEL,
    &scale_multi::KERNEL,
    &cast_from_acc_multi::KERNEL,
    &cast_to_acc_multi::KERNEL,
    &sgd_step::KERNEL,
    &arg_reduce_axis::KERNEL,
    &gather_strided::KERNEL,
    &scatter_lines::KERNEL,
    &scatter_add_lines::KERNEL,
    &scatter_sort_count::KERNEL,
    &scatter_sort_scan::KERNEL,
    &scatter_sort_place::KERNEL,
    &scatter_add_sorted::KERNEL,
    &concat_into::KERNEL,
    &concat_rows_into::KERNEL,
    &triangle::KERNEL,
    &random_uniform::KERNEL,
    &random_normal::KERNEL,
    &random_bernoulli::KERNEL,
    &random_int::KERNEL,
    &random_dropout::KERNEL,
    &cross_entropy_rows::KERNEL,
    &cross_entropy_mean::KERNEL,
    &cross_entropy_backward_rows::KERNEL,
    &softmax_warp_rows::KERNEL,
    &softmax_backward_rows::KERNEL,
    &norm_warp_rows::KERNEL,
    &norm_backward_warp_rows::KERNEL,
    &dequantize_ggml::KERNEL,
    &qmatmul_ggml::KERNEL,
    &qmatmul_ggml_tc::KERNEL,
    &qmatvec_ggml::KERNEL,
    &qmatvec_ggml_wide::KERNEL,
    &swiglu_rows::KERNEL,
];
