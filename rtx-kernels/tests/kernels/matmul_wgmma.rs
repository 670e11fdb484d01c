//! The `wgmma` matrix product written with `#[kernel]` (`kernels::matmul_wgmma`, `c = a b^T`),
//! run on the CPU's block emulation against a plain product, over sizes with ragged edges in
//! every dim: K a multiple of 8 takes the `cp_async` path, the others the plain-load path. The
//! emulation reads the swizzled tiles as the hardware does (the 128-byte swizzle on the
//! address), so this tests the kernel's indexing; `tests/devices/tensor_cores.rs` holds the
//! GPU to it.

use half::{bf16, f16};
use rtx_kernels::kernel::{KernelKind, LaunchConfig};
use rtx_kernels::kernels::{
    MATMUL_WGMMA_COLS, MATMUL_WGMMA_ROWS, MATMUL_WGMMA_THREADS, matmul_wgmma,
};
use rtx_kernels::{DType, Float};

use super::matmul_tc::check_gemm;

/// The launch of the `wgmma` GEMMs over an `m x n` product.
pub(crate) fn launch(m: usize, n: usize) -> LaunchConfig {
    LaunchConfig::new(
        (
            n.div_ceil(MATMUL_WGMMA_COLS) as u32,
            m.div_ceil(MATMUL_WGMMA_ROWS) as u32,
        ),
        MATMUL_WGMMA_THREADS,
    )
}

fn check<T: Float>(m: usize, n: usize, k: usize, from: fn(f32) -> T, to: fn(T) -> f32) {
    let gemm = |a: &[T], b: &[T], c: &mut [T]| matmul_wgmma(launch(m, n), a, b, c, m, n, k);
    check_gemm(gemm, true, (m, n, k), from, to);
}

#[test]
fn bf16_products_match_a_plain_product_with_ragged_edges() {
    // (m, n, k): one tile exactly, ragged M and N past one tile, K a multiple of 8 but not of
    // 64, more K tiles than pipeline stages, and sizes whose rows are not 16-byte aligned.
    for (m, n, k) in [
        (128, 256, 64),
        (130, 264, 72),
        (40, 16, 328),
        (1, 8, 8),
        (33, 40, 9),
        (5, 3, 1),
    ] {
        check::<bf16>(m, n, k, bf16::from_f32, bf16::to_f32);
    }
}

#[test]
fn f16_products_match_a_plain_product() {
    check::<f16>(70, 48, 96, f16::from_f32, f16::to_f32);
}

#[test]
fn four_stages_take_dynamic_shared_memory_on_1024_byte_boundaries() {
    let k = &matmul_wgmma::KERNEL;
    assert_eq!(
        k.kind,
        KernelKind::Simt {
            uses_sync: true,
            dynamic_shared: (16384 + 32768) * 4,
            grid_sync: false,
        }
    );
    assert!(k.source.contains("extern __shared__ __align__(1024)"));
    assert!(
        k.source
            .contains("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16")
    );
    let dtypes: Vec<DType> = k.entries.iter().map(|e| e.dtype).collect();
    assert_eq!(dtypes, [DType::F16, DType::BF16]);
}

#[test]
fn a_block_of_partial_warpgroups_is_refused() {
    let one = [bf16::ONE];
    let mut c = vec![bf16::ZERO; 1];
    let run = std::panic::catch_unwind(move || {
        matmul_wgmma(LaunchConfig::new((1, 1), 96), &one, &one, &mut c, 1, 1, 1)
    });
    let message = match run {
        Ok(Err(e)) => e.to_string(),
        Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
        Ok(Ok(())) => String::new(),
    };
    assert!(message.contains("whole warpgroups"), "{message}");
}
