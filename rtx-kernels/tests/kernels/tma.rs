//! Hopper's tensor memory accelerator in `#[kernel]` (`tma_load_2d` and the `mbarrier`
//! intrinsics), on the CPU's block emulation: a box lands in the 128-byte swizzle with what
//! lies outside the view as zeros, a barrier's phases complete after their arrivals and
//! bytes, a tile read before its wait is stale, misuse panics by name, and
//! `kernels::matmul_wgmma_tma` equals a plain product with ragged edges.
//! `tests/devices/tensor_cores.rs` holds the GPU to the same kernels.

use half::{bf16, f16};
use rtx_kernels::Float;
use rtx_kernels::kernel::{KernelKind, LaunchConfig, ParamType, TensorMap};
use rtx_kernels::kernels::matmul_wgmma_tma;
use rtx_macros::kernel;

use super::matmul_tc::check_gemm;
use super::matmul_wgmma::launch;

/// Copies the box at (`row`, `col`) of a `rows x cols` view of `x` into a 16-row tile, waits
/// for it, and writes the tile's words (each as its two elements) to `out`, in the order they
/// lie in shared memory. `early` gets the tile's first word read before the wait.
#[kernel(crate = rtx_kernels)]
fn box_copy<T: Float>(
    x: &[T],
    map: TensorMap,
    out: &mut [T],
    early: &mut [T],
    col: usize,
    row: usize,
) {
    #[shared]
    let tile: [u32; 512];
    #[shared]
    let bar: [u64; 1];
    let tid = thread_idx_x();
    if tid == 0 {
        mbarrier_init(&mut bar, 0, 1);
        fence_proxy_async();
    }
    sync_threads();
    if tid == 0 {
        mbarrier_arrive_expect_tx(&mut bar, 0, 16 * 128);
        tma_load_2d(&mut tile, 0, x, map, col, row, &mut bar, 0);
        // Not yet landed: the tile still holds what it held.
        early[0] = (tile[0] & 65535) as T;
    }
    mbarrier_wait(&mut bar, 0, 0);
    for w in 0..16 {
        let i = tid * 16 + w;
        out[2 * i] = (tile[i] & 65535) as T;
        out[2 * i + 1] = (tile[i] >> 16) as T;
    }
}

/// The elements of a box at (`row`, `col`) of a `rows x cols` view of `x` (rows `stride`
/// apart) in shared-memory order: 16-byte chunk `c` of box row `r` at chunk `c ^ (r % 8)`,
/// zeros outside the view.
fn swizzled_box(
    x: &[u16],
    (rows, cols, stride): (usize, usize, usize),
    row: usize,
    col: usize,
) -> Vec<u16> {
    let mut out = vec![0u16; 16 * 64];
    for r in 0..16 {
        for e in 0..64 {
            let (gr, gc) = (row + r, col + e);
            let v = if gr < rows && gc < cols {
                x[gr * stride + gc]
            } else {
                0
            };
            let at = r * 64 + ((e / 8) ^ (r % 8)) * 8 + e % 8;
            out[at] = v;
        }
    }
    out
}

#[test]
fn a_box_lands_swizzled_with_zeros_outside_the_view() {
    // A view of 20 x 70 elements in rows of 72: the box at row 10, column 8 runs past both
    // the last row and the last column.
    let (rows, cols, stride) = (20, 70, 72);
    // Patterns below 2048 read back exactly as f16 values by `as T`.
    let x: Vec<f16> = (0..rows * stride)
        .map(|i| f16::from_bits(1 + i as u16))
        .collect();
    let bits: Vec<u16> = x.iter().map(|v| v.to_bits()).collect();
    let map = TensorMap::new(rows, cols, stride, 16).unwrap();
    for (row, col) in [(0, 0), (10, 8), (19, 64)] {
        let mut out = vec![f16::ZERO; 1024];
        let mut early = vec![f16::from_f32(-1.0); 1];
        box_copy(
            LaunchConfig::new(1, 32),
            &x,
            map,
            &mut out,
            &mut early,
            col,
            row,
        )
        .unwrap();
        let got: Vec<u16> = out.iter().map(|v| v.to_f32() as u16).collect();
        let want = swizzled_box(&bits, (rows, cols, stride), row, col);
        assert_eq!(got, want, "box at ({row}, {col})");
        assert_eq!(early[0].to_f32(), 0.0, "the tile was read before its wait");
    }
}

/// Two phases of one barrier, each waiting for two threads' arrivals: the first thread to
/// wait sees the second phase incomplete until the last arrival.
#[kernel(crate = rtx_kernels)]
fn two_phases<T: Float>(out: &mut [T]) {
    #[shared]
    let bar: [u64; 1];
    #[shared]
    let seen: [u32; 4];
    let tid = thread_idx_x();
    if tid == 0 {
        mbarrier_init(&mut bar, 0, 2);
    }
    sync_threads();
    // Phase 0: warps 0 and 1's first threads arrive, everyone waits.
    if tid % 32 == 0 {
        mbarrier_arrive(&mut bar, 0);
    }
    mbarrier_wait(&mut bar, 0, 0);
    if tid == 0 {
        seen[0] = 1;
    }
    sync_threads();
    // Phase 1: only after warp 1 wrote `seen[1]` does it arrive.
    if tid == 32 {
        seen[1] = 2;
        mbarrier_arrive(&mut bar, 0);
    }
    if tid == 0 {
        mbarrier_arrive(&mut bar, 0);
    }
    mbarrier_wait(&mut bar, 0, 1);
    out[tid] = (seen[0] + seen[1]) as T;
}

#[test]
fn a_phase_completes_after_its_arrivals() {
    let mut out = vec![f16::ZERO; 64];
    two_phases(LaunchConfig::new(1, 64), &mut out).unwrap();
    assert!(out.iter().all(|v| v.to_f32() == 3.0), "{out:?}");
}

#[kernel(crate = rtx_kernels)]
fn waits_forever<T: Float>(out: &mut [T]) {
    #[shared]
    let bar: [u64; 1];
    if thread_idx_x() == 0 {
        mbarrier_init(&mut bar, 0, 1);
    }
    sync_threads();
    // Nobody arrives.
    mbarrier_wait(&mut bar, 0, 0);
    out[0] = 1.0;
}

#[kernel(crate = rtx_kernels)]
fn never_initialized<T: Float>(out: &mut [T]) {
    #[shared]
    let bar: [u64; 1];
    mbarrier_arrive(&mut bar, 0);
    out[0] = 1.0;
}

fn message(
    run: impl FnOnce() -> Result<(), rtx_kernels::kernel::LaunchError> + std::panic::UnwindSafe,
) -> String {
    match std::panic::catch_unwind(run) {
        Ok(Err(e)) => e.to_string(),
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
        Ok(Ok(())) => String::new(),
    }
}

#[test]
fn misuse_is_an_error_or_a_panic_by_name() {
    let m = message(|| waits_forever(LaunchConfig::new(1, 32), &mut [bf16::ZERO; 1]));
    assert!(m.contains("would hang"), "{m}");
    let m = message(|| never_initialized(LaunchConfig::new(1, 32), &mut [bf16::ZERO; 1]));
    assert!(m.contains("never initialized"), "{m}");
    let x = vec![bf16::ONE; 64 * 16];
    let map = TensorMap::new(16, 64, 64, 16).unwrap();
    // A box landing off a 1024-byte boundary.
    let m =
        message(move || box_copy_at(LaunchConfig::new(1, 32), &x, map, &mut [bf16::ZERO; 1], 4));
    assert!(m.contains("1024-byte aligned"), "{m}");
    let bad = TensorMap::new(4, 100, 100, 4).unwrap_err();
    assert!(bad.message().contains("multiple of 8"), "{}", bad.message());
    assert!(TensorMap::new(4, 64, 64, 257).is_err());
}

#[kernel(crate = rtx_kernels)]
fn box_copy_at<T: Float>(x: &[T], map: TensorMap, out: &mut [T], word: usize) {
    #[shared]
    let tile: [u32; 2048];
    #[shared]
    let bar: [u64; 1];
    if thread_idx_x() == 0 {
        mbarrier_init(&mut bar, 0, 1);
        mbarrier_arrive_expect_tx(&mut bar, 0, 16 * 128);
        tma_load_2d(&mut tile, word, x, map, 0, 0, &mut bar, 0);
    }
    mbarrier_wait(&mut bar, 0, 0);
    out[0] = (tile[word] & 1) as T;
}

fn check<T: Float>(m: usize, n: usize, k: usize, from: fn(f32) -> T, to: fn(T) -> f32) {
    let am = TensorMap::new(m, k, k, 128).unwrap();
    let bm = TensorMap::new(n, k, k, 256).unwrap();
    let gemm =
        |a: &[T], b: &[T], c: &mut [T]| matmul_wgmma_tma(launch(m, n), a, b, am, bm, c, m, n, k);
    check_gemm(gemm, true, (m, n, k), from, to);
}

#[test]
fn tma_products_match_a_plain_product_with_ragged_edges() {
    // One tile exactly; ragged M and N past one tile with K not a multiple of 64; more K
    // tiles than stages (the barriers' second phases); a single row and column.
    for (m, n, k) in [(128, 256, 64), (130, 264, 72), (40, 16, 328), (1, 8, 8)] {
        check::<bf16>(m, n, k, bf16::from_f32, bf16::to_f32);
    }
    check::<f16>(70, 48, 96, f16::from_f32, f16::to_f32);
}

#[test]
fn the_entry_takes_tensor_maps_by_value_in_1024_byte_aligned_shared_memory() {
    let k = &matmul_wgmma_tma::KERNEL;
    let KernelKind::Simt {
        uses_sync,
        dynamic_shared,
        ..
    } = k.kind
    else {
        panic!("{:?}", k.kind)
    };
    assert!(uses_sync);
    assert_eq!(dynamic_shared, (16384 + 32768) * 4 + 1024);
    let params: Vec<ParamType> = k.entries[0].params.iter().map(|p| p.ty).collect();
    assert_eq!(params[2], ParamType::TensorMap);
    assert!(k.source.contains("const __grid_constant__ rtx_tensor_map"));
    assert!(
        k.source
            .contains("cp.async.bulk.tensor.2d.shared::cluster.global.tile")
    );
    assert!(
        k.source
            .contains("mbarrier.try_wait.parity.shared::cta.b64")
    );
}
