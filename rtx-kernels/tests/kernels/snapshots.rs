//! Snapshot tests of generated CUDA source: each kernel's `KERNEL.source` must equal its
//! checked-in `tests/snapshots/<name>.cu` exactly. After an intended change to the generator,
//! regenerate them with `RTX_BLESS=1 cargo test -p rtx-kernels --test kernels snapshots::` and review
//! the diff.

use rtx_kernels::kernels::every_kernel;
use std::path::PathBuf;

#[test]
fn generated_cuda_matches_snapshots() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let bless = std::env::var("RTX_BLESS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for name in [
        "gelu_tanh",
        "gelu_tanh_grad_x",
        "huber",
        "sum",
        "mean",
        "softmax_rows",
        "log_softmax_rows",
        "logsumexp_rows",
        "dot",
        "matmul_tc",
        "matmul_wgmma",
        "matmul_wgmma_tma",
        "qmatmul_ggml",
        "qmatmul_ggml_tc",
        "qmatvec_ggml",
        "qmatvec_ggml_wide",
        "swiglu_rows",
        "flash_attn_fwd",
        "flash_attn_fwd_wgmma",
        "flash_attn_bwd_rowdot",
        "flash_attn_bwd_dkdv",
        "flash_attn_bwd_dkdv_wgmma",
        "flash_attn_bwd_dq_wgmma",
        "flash_attn_bwd_dq",
        "norm_rows",
        "norm_param_partials",
        "norm_param_finish",
        "im2col",
        "random_uniform",
        "scatter_add_lines",
        "scatter_sort_count",
        "scatter_sort_scan",
        "scatter_sort_place",
        "scatter_add_sorted",
        "concat_rows_into",
        "adam_multi",
        "sum_squares_multi",
        "cast_from_acc_multi",
        "cast_to_acc_multi",
        "cross_entropy_rows",
        "cross_entropy_mean",
        "cross_entropy_backward_rows",
        "random_dropout",
        "binary_scalar",
        "softmax_warp_rows",
        "softmax_backward_rows",
        "norm_warp_rows",
        "norm_backward_warp_rows",
        "qmatmul_ggml",
    ] {
        let k = every_kernel().into_iter().find(|k| k.name == name).unwrap();
        let path = dir.join(format!("{name}.cu"));
        if bless {
            std::fs::write(&path, k.source).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == k.source => {}
            Ok(_) => stale.push(format!("{name}: differs from {}", path.display())),
            Err(e) => stale.push(format!("{name}: cannot read {}: {e}", path.display())),
        }
    }
    assert!(
        stale.is_empty(),
        "generated CUDA changed (rerun with RTX_BLESS=1 if intended):\n{}",
        stale.join("\n")
    );
}
