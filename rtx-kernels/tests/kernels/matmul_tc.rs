//! The tensor-core matrix product written with `#[kernel]` (`kernels::matmul_tc`), run on the
//! CPU's block emulation against a plain product, over sizes with ragged edges in every dim:
//! aligned ones take the `cp_async` path, the others the plain-load path. The emulation
//! computes what the GPU computes (PTX's fragment layouts, `cp.async` landing at its wait), so
//! this is the test of the kernel's indexing; `tests/devices/tensor_cores.rs` holds the GPU to
//! it.

use half::{bf16, f16};
use rtx_kernels::kernel::{KernelKind, LaunchConfig, LaunchError};
use rtx_kernels::kernels::{MATMUL_TC_THREADS, MATMUL_TC_TILE, matmul_tc};
use rtx_kernels::{DType, Element, Float};

/// Small integers scaled by 1/8: exact in f16 and bf16, and every partial sum exact in f32.
fn input(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed * 13) % 11) as f32 / 8.0 - 0.625)
        .collect()
}

fn launch(m: usize, n: usize) -> LaunchConfig {
    let t = MATMUL_TC_TILE;
    LaunchConfig::new(
        (n.div_ceil(t) as u32, m.div_ceil(t) as u32),
        MATMUL_TC_THREADS,
    )
}

fn check<T: Float>(m: usize, n: usize, k: usize, from: fn(f32) -> T, to: fn(T) -> f32) {
    let gemm = |a: &[T], b: &[T], c: &mut [T]| matmul_tc(launch(m, n), a, b, c, m, n, k);
    check_gemm(gemm, false, (m, n, k), from, to);
}

/// Holds `gemm` (`c = a b`, or `a b^T` for `b` stored `n x k` when `b_t`) to the exact
/// product rounded once to `T`, on inputs whose every partial sum is exact.
pub(crate) fn check_gemm<T: Float>(
    gemm: impl Fn(&[T], &[T], &mut [T]) -> Result<(), LaunchError>,
    b_t: bool,
    (m, n, k): (usize, usize, usize),
    from: fn(f32) -> T,
    to: fn(T) -> f32,
) {
    let (a32, b32) = (input(m * k, 1), input(k * n, 2));
    let a: Vec<T> = a32.iter().map(|&x| from(x)).collect();
    let b: Vec<T> = b32.iter().map(|&x| from(x)).collect();
    let mut c = vec![from(-7.0); m * n];
    gemm(&a, &b, &mut c).unwrap();
    let b_at = |p: usize, j: usize| if b_t { b32[j * k + p] } else { b32[p * n + j] };
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|p| a32[i * k + p] * b_at(p, j)).sum();
            // One rounding, to T, of the exact sum.
            let want = to(from(want));
            assert_eq!(
                to(c[i * n + j]),
                want,
                "{:?} {m}x{n}x{k}: c[{i}][{j}]",
                T::DTYPE
            );
        }
    }
}

#[test]
fn bf16_products_match_a_plain_product_with_ragged_edges() {
    // (m, n, k): one tile exactly, ragged M and N, K a multiple of 8 but not of 64, more
    // K tiles than pipeline stages, and sizes whose rows are not 16-byte aligned.
    for (m, n, k) in [
        (128, 128, 64),
        (128, 136, 32),
        (40, 16, 328),
        (130, 136, 72),
        (17, 24, 160),
        (1, 8, 8),
        (33, 40, 9),
        (20, 13, 40),
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
fn three_stages_take_dynamic_shared_memory() {
    // Two arrays of 12288 words: past the 48 KiB a kernel may declare statically, so the
    // launcher asks for them dynamically (and the CUDA source declares them `extern`).
    let k = &matmul_tc::KERNEL;
    assert_eq!(
        k.kind,
        KernelKind::Simt {
            uses_sync: true,
            dynamic_shared: 2 * 12288 * 4,
            grid_sync: false,
        }
    );
    assert!(k.source.contains("extern __shared__"));
}

#[test]
fn launch_bounds_hold_on_every_device() {
    // `launch_bounds(256, 2)`: the CUDA entries carry it, and a larger block is refused by the
    // emulation as a GPU refuses it.
    assert!(
        matmul_tc::KERNEL
            .source
            .contains("__launch_bounds__(256, 2) matmul_tc_bf16(")
    );
    let mut c = vec![bf16::ZERO; 1];
    let big = LaunchConfig::new((1, 1), 512);
    let one = [bf16::ONE];
    let err = matmul_tc(big, &one, &one, &mut c, 1, 1, 1).unwrap_err();
    assert!(
        err.message().contains("more than its launch_bounds of 256"),
        "{err}"
    );
}

// ANCHOR: bounds_per_entry
/// One body, two specialized entries with bounds of their own and a general entry with the
/// kernel-wide ones: `launch_bounds(.., n = 1)` is `n = 1`'s alone.
#[rtx_macros::kernel(
    crate = rtx_kernels,
    specialize(n = 1, 2),
    launch_bounds(256, 1),
    launch_bounds(64, 4, n = 1)
)]
fn bounded_fill<T: Float>(out: &mut [T], n: usize) {
    out[thread_idx_x()] = n as T;
}
// ANCHOR_END: bounds_per_entry

#[test]
fn launch_bounds_can_differ_by_specialized_entry() {
    let src = bounded_fill::KERNEL.source;
    assert!(
        src.contains("__launch_bounds__(64, 4) bounded_fill_f32__n1("),
        "{src}"
    );
    assert!(src.contains("__launch_bounds__(256, 1) bounded_fill_f32__n2("));
    assert!(src.contains("__launch_bounds__(256, 1) bounded_fill_f32("));
    // The emulation holds each launch to the entry a GPU would take for its arguments: 128
    // threads pass with n = 2 (its entry) and n = 3 (the general one), not with n = 1.
    let mut out = vec![0.0f32; 128];
    for n in [2, 3] {
        bounded_fill(LaunchConfig::new(1, 128), &mut out, n).unwrap();
        assert!(out.iter().all(|&x| x == n as f32));
    }
    let err = bounded_fill(LaunchConfig::new(1, 128), &mut out, 1).unwrap_err();
    assert!(
        err.message()
            .contains("a block of 128 threads is more than its launch_bounds of 64"),
        "{err}"
    );
    bounded_fill(LaunchConfig::new(1, 64), &mut out, 1).unwrap();
    assert_eq!(out[..64], [1.0; 64]);
    let err = bounded_fill(LaunchConfig::new(1, 512), &mut out, 2).unwrap_err();
    assert!(err.message().contains("launch_bounds of 256"), "{err}");
}

// ANCHOR: store2
/// Each thread writes its pair `(2i, 2i + 1)` at `at + 2i` with one `store2`.
#[rtx_macros::kernel(crate = rtx_kernels)]
fn pairs_out<T: Float>(o: &mut [T], at: usize) {
    let i = thread_idx_x();
    store2(o, at + 2 * i, (2 * i) as T, (2 * i + 1) as T);
}
// ANCHOR_END: store2

#[test]
fn store2_writes_pairs_at_even_indices_only() {
    assert!(
        pairs_out::KERNEL
            .source
            .contains("rtx_store2<S>(o + ((at + (2ull * i))), ")
    );
    let mut o = vec![bf16::ZERO; 10];
    pairs_out(LaunchConfig::new(1, 4), &mut o, 2).unwrap();
    let got: Vec<f32> = o.iter().map(|x| x.to_f32()).collect();
    assert_eq!(got, [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
}

#[test]
#[should_panic(expected = "`store2` at index 1: its 32-bit store needs an even index")]
fn store2_at_an_odd_index_panics_as_a_gpu_faults() {
    // A misaligned 32-bit store faults on a GPU; the emulation stops at it the same way.
    let mut o = vec![bf16::ZERO; 10];
    let _ = pairs_out(LaunchConfig::new(1, 4), &mut o, 1);
}

#[test]
fn f32_is_an_error_not_a_launch() {
    let mut c = vec![0.0f32; 1];
    let err = matmul_tc(launch(1, 1), &[1.0f32], &[1.0], &mut c, 1, 1, 1).unwrap_err();
    assert!(err.message().contains("tensor cores"), "{err}");
    let k = &matmul_tc::KERNEL;
    let dtypes: Vec<DType> = k.entries.iter().map(|e| e.dtype).collect();
    assert_eq!(dtypes, [DType::F16, DType::BF16]);
    let _ = <f32 as Element>::DTYPE;
}
