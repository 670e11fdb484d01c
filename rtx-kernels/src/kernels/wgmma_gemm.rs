//! A matrix product on Hopper's warpgroup tensor-core instructions, written with
//! `#[kernel]`: f16 or bf16 inputs, f32 accumulation, `c = a b^T` for `b` stored as `n x k`
//! (a linear layer's weight layout). Tiles are staged in shared memory by `cp_async` in a
//! four-stage pipeline and multiplied by `wgmma_m64n256k16` straight from shared memory, so no
//! fragment passes through the registers. It shows how far the kernel language reaches on an
//! H100 or H200; cuBLAS stays rtx's GEMM path.
//!
//! Invariant: every size works. Edges of M, N and K are zero-filled in shared memory and
//! masked on store; when K is not a multiple of 8 rows are not 16-byte aligned, and the tiles
//! are filled by plain loads instead of `cp_async` (a branch uniform over the grid).

use crate::Float;
use rtx_macros::kernel;

/// Threads per block of [`matmul_wgmma()`]: two warpgroups.
pub const MATMUL_WGMMA_THREADS: u32 = 256;
/// Rows of C per block of [`matmul_wgmma()`].
pub const MATMUL_WGMMA_ROWS: usize = 128;
/// Columns of C per block of [`matmul_wgmma()`].
pub const MATMUL_WGMMA_COLS: usize = 256;

/// `c = a b^T` for row-major `a` (`m x k`), `b` (`n x k`) and `c` (`m x n`), f16 or bf16, on
/// Hopper's `wgmma` with f32 accumulation (rounded once, to `T`, on store). Launch it on
/// [`MATMUL_WGMMA_THREADS`] threads per block and a grid of `ceil(n / 256) x ceil(m / 128)`
/// blocks; buffers start on 16-byte boundaries (tensors rtx allocates do). On a GPU it needs
/// compute capability 9.0 (`wgmma` is Hopper's alone); the CPU emulates it anywhere.
///
/// Each block computes a 128 x 256 tile of C, stepping 64 along K: each of its two
/// warpgroups holds 64 x 256 of it as 128 f32 accumulators a thread, and issues four
/// `wgmma_m64n256k16` a K step. Both operands sit K-major in shared memory in the 128-byte
/// swizzle `wgmma` reads (16-byte chunk `c` of row `r` at chunk `c ^ (r % 8)`), four stages
/// of 48 KiB: while the tensor cores multiply one stage, `cp_async` fills the stage they
/// finished with, three tiles ahead.
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernel::LaunchConfig;
/// use rtx_kernels::kernels::{matmul_wgmma, MATMUL_WGMMA_THREADS};
/// let (m, n, k) = (3, 2, 4);
/// let a: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(i as f32)).collect();
/// // b is n x k: row j is column j of the product's right-hand side.
/// let b: Vec<bf16> = (0..n * k).map(|i| bf16::from_f32(1.0 - i as f32)).collect();
/// let mut c = vec![bf16::ZERO; m * n];
/// matmul_wgmma(LaunchConfig::new((1, 1), MATMUL_WGMMA_THREADS), &a, &b, &mut c, m, n, k)
///     .unwrap();
/// assert_eq!(c[1].to_f32(), 0.0 * -3.0 + 1.0 * -4.0 + 2.0 * -5.0 + 3.0 * -6.0);
/// ```
// ANCHOR: wgmma_gemm
#[kernel(crate = crate, launch_bounds(256, 1))]
pub fn matmul_wgmma<T: Float>(a: &[T], b: &[T], c: &mut [T], m: usize, n: usize, k: usize) {
    // Four stages: the copies run AHEAD = 3 tiles ahead of the products, so PENDING = 2 copy
    // groups may still be in flight when a tile is used; the fourth stage is the one the
    // products of the iteration before read.
    const AHEAD: usize = 3;
    const PENDING: usize = 2;
    // Words (two elements each) of one stage's A tile (128 x 64) and B tile (256 x 64).
    const A_WORDS: u32 = 4096;
    const B_WORDS: u32 = 8192;
    #[shared]
    let sa: [u32; 16384];
    #[shared]
    let sb: [u32; 32768];
    let tid = thread_idx_x() as u32;
    // This thread's warpgroup: the 64 rows of the block's tile it multiplies.
    let wg = tid / 128;
    let m0 = block_idx_y() * 128;
    let n0 = block_idx_x() * 256;
    let aligned = k % 8 == 0;
    let tiles = (k + 63) / 64;
    // This thread's copies: 16-byte chunk `tid % 8` of rows `tid / 8 + 32 i`, stored swizzled
    // by the row mod 8 (the same for every i), 1024 words further per i. Everything a copy
    // needs but the K offset is worked out here, once: a tile's copies are then an add and a
    // compare each, where the tensor cores' work leaves room for few instructions.
    let row = tid / 8;
    let col = ((tid % 8) * 8) as usize;
    let dst = row * 32 + ((tid % 8) ^ (row % 8)) * 4;
    let a_rows = (m - m0).min(128) as u32;
    let b_rows = (n - n0).min(256) as u32;
    let a_src = (m0 + row as usize) * k + col;
    let b_src = (n0 + row as usize) * k + col;
    let k32 = 32 * k;
    let mut acc = [0.0; 128];
    // Iteration `kt` multiplies tile `kt - AHEAD` (from stage `use_stage`) and loads tile
    // `kt` into stage `load_stage`, whose last tile was multiplied one iteration ago: every
    // warpgroup waited for those products before this iteration's barrier.
    let mut kt = 0;
    let mut load_stage: u32 = 0;
    let mut use_stage: u32 = 0;
    while kt < tiles + AHEAD {
        if kt >= AHEAD {
            // The tile multiplied now has landed for this thread (of the groups committed so
            // far, one per iteration, only the newest PENDING may be pending), is visible to
            // the tensor cores' view of shared memory, and has landed for every thread.
            cp_async_wait(PENDING);
            fence_proxy_async();
            sync_threads();
            let a_tile = use_stage * A_WORDS + wg * 2048;
            let b_tile = use_stage * B_WORDS;
            wgmma_fence();
            // A 16-wide K step is 32 bytes (8 words) further along each 128-byte row.
            for ks in 0..4 {
                let step = (ks * 8) as u32;
                wgmma_m64n256k16(
                    &mut acc,
                    0,
                    &sa,
                    (a_tile + step) as usize,
                    &sb,
                    (b_tile + step) as usize,
                );
            }
            wgmma_commit();
            use_stage = if use_stage == 3 { 0 } else { use_stage + 1 };
        }
        if kt < tiles {
            let k0 = kt * 64;
            let gk = k0 + col;
            // The elements of this thread's chunk in K (all 8 but at K's end).
            let width = if gk + 8 <= k {
                8
            } else if gk < k {
                k - gk
            } else {
                0
            };
            let a_stage = load_stage * A_WORDS + dst;
            let b_stage = load_stage * B_WORDS + dst;
            // Rows `row + 32 i` of B, and for i < 4 of A. The branch on `aligned` stands
            // outside the copies (uniform, taken once a tile): inside, ptxas kept a branch and
            // a convergence barrier around each of the twelve.
            if aligned {
                for i in 0..8 {
                    let r = row + 32 * (i as u32);
                    let to = 1024 * (i as u32);
                    if i < 4 {
                        let na = if r < a_rows { width } else { 0 };
                        cp_async(
                            &mut sa,
                            (a_stage + to) as usize,
                            a,
                            a_src + i * k32 + k0,
                            na,
                        );
                    }
                    let nb = if r < b_rows { width } else { 0 };
                    cp_async(
                        &mut sb,
                        (b_stage + to) as usize,
                        b,
                        b_src + i * k32 + k0,
                        nb,
                    );
                }
            } else {
                for i in 0..8 {
                    let r = row + 32 * (i as u32);
                    let to = 1024 * (i as u32);
                    if i < 4 {
                        let na = if r < a_rows { width } else { 0 };
                        let src = a_src + i * k32 + k0;
                        for p in 0..4 {
                            let lo = if 2 * p < na { a[src + 2 * p] } else { 0.0 };
                            let hi = if 2 * p + 1 < na {
                                a[src + 2 * p + 1]
                            } else {
                                0.0
                            };
                            sa[(a_stage + to) as usize + p] = pack2(lo, hi);
                        }
                    }
                    let nb = if r < b_rows { width } else { 0 };
                    let src = b_src + i * k32 + k0;
                    for p in 0..4 {
                        let lo = if 2 * p < nb { b[src + 2 * p] } else { 0.0 };
                        let hi = if 2 * p + 1 < nb {
                            b[src + 2 * p + 1]
                        } else {
                            0.0
                        };
                        sb[(b_stage + to) as usize + p] = pack2(lo, hi);
                    }
                }
            }
            load_stage = if load_stage == 3 { 0 } else { load_stage + 1 };
        }
        cp_async_commit();
        if kt >= AHEAD {
            // This warpgroup's products are done with the stage, and `acc` is readable.
            wgmma_wait(0, &mut acc);
        }
        kt += 1;
    }
    // ANCHOR_END: wgmma_gemm
    store_wgmma_tile(c, &acc, m, n, m0, n0, tid as usize);
}

/// Stores a block's 128 x 256 tile of C, rows from `m0` and columns from `n0` (those inside
/// `m x n`), from thread `tid`'s 128 accumulators of `wgmma_m64n256k16`.
#[kernel(device, crate = crate)]
pub fn store_wgmma_tile<T: Float>(
    c: &mut [T],
    acc: &[T; 128],
    m: usize,
    n: usize,
    m0: usize,
    n0: usize,
    tid: usize,
) {
    // Accumulator register i of a thread: row 16 w + l / 4 + 8 ((i / 2) % 2) of the
    // warpgroup's 64, column 8 (i / 4) + 2 (l % 4) + i % 2, for warp w and lane l.
    let wg = tid / 128;
    let t = tid % 128;
    let lane = t % 32;
    let r0 = m0 + wg * 64 + (t / 32) * 16 + lane / 4;
    let c0 = n0 + 2 * (lane % 4);
    for j in 0..32 {
        for h in 0..2 {
            for e in 0..2 {
                let r = r0 + 8 * h;
                let cc = c0 + 8 * j + e;
                if r < m && cc < n {
                    c[r * n + cc] = acc[4 * j + 2 * h + e];
                }
            }
        }
    }
}

/// [`matmul_wgmma()`] with its tiles copied by Hopper's tensor memory accelerator: one thread
/// issues two box copies a K step (A's 128 x 64 and B's 256 x 64, through the tensor maps
/// `am` over `a` and `bm` over `b`, boxes of 128 and 256 rows), and a shared-memory barrier
/// per stage counts their bytes, so the other 255 threads spend no instruction on copies.
/// The launch is `matmul_wgmma`'s; the maps need `k` a multiple of 8 (rows on 16-byte
/// boundaries), and the tensor memory accelerator zero-fills what lies past `m`, `n` and `k`.
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernel::{LaunchConfig, TensorMap};
/// use rtx_kernels::kernels::{matmul_wgmma_tma, MATMUL_WGMMA_THREADS};
/// let (m, n, k) = (3, 2, 8);
/// let a: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(i as f32)).collect();
/// let b: Vec<bf16> = (0..n * k).map(|i| bf16::from_f32(1.0 - i as f32)).collect();
/// let (am, bm) = (TensorMap::new(m, k, k, 128).unwrap(), TensorMap::new(n, k, k, 256).unwrap());
/// let mut c = vec![bf16::ZERO; m * n];
/// let launch = LaunchConfig::new((1, 1), MATMUL_WGMMA_THREADS);
/// matmul_wgmma_tma(launch, &a, &b, am, bm, &mut c, m, n, k).unwrap();
/// let want: f32 = (0..k).map(|i| i as f32 * (1.0 - (k + i) as f32)).sum();
/// assert_eq!(c[1].to_f32(), want);
/// ```
// ANCHOR: wgmma_tma_gemm
#[kernel(crate = crate, launch_bounds(256, 1))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_wgmma_tma<T: Float>(
    a: &[T],
    b: &[T],
    am: TensorMap,
    bm: TensorMap,
    c: &mut [T],
    m: usize,
    n: usize,
    k: usize,
) {
    const A_WORDS: usize = 4096;
    const B_WORDS: usize = 8192;
    // Bytes a K step copies: A's 128 x 64 and B's 256 x 64 tiles of 16-bit elements.
    const STAGE_BYTES: usize = 49152;
    #[shared]
    let sa: [u32; 16384];
    #[shared]
    let sb: [u32; 32768];
    // Stage `s` has landed when barrier `s` completes a phase: one arrival (the copying
    // thread's, announcing the stage's bytes) and the bytes themselves.
    #[shared]
    let full: [u64; 4];
    let tid = thread_idx_x();
    let wg = tid / 128;
    let m0 = block_idx_y() * 128;
    let n0 = block_idx_x() * 256;
    let tiles = (k + 63) / 64;
    if tid == 0 {
        for s in 0..4 {
            mbarrier_init(&mut full, s, 1);
        }
        // The barriers are initialized before the copies (another proxy) count on them.
        fence_proxy_async();
        // The first three tiles.
        for s in 0..3 {
            if s < tiles {
                mbarrier_arrive_expect_tx(&mut full, s, STAGE_BYTES);
                tma_load_2d(&mut sa, s * A_WORDS, a, am, s * 64, m0, &mut full, s);
                tma_load_2d(&mut sb, s * B_WORDS, b, bm, s * 64, n0, &mut full, s);
            }
        }
    }
    sync_threads();
    let mut acc = [0.0; 128];
    let mut kt = 0;
    while kt < tiles {
        // Tile `kt` is the `kt / 4`-th use of its stage.
        let stage = kt % 4;
        mbarrier_wait(&mut full, stage, (kt / 4) % 2);
        // Every warpgroup waited for its products of tile `kt - 1` before this barrier, so
        // that tile's stage may be refilled (with tile `kt + 3`) once it is passed.
        sync_threads();
        wgmma_fence();
        for ks in 0..4 {
            wgmma_m64n256k16(
                &mut acc,
                0,
                &sa,
                stage * A_WORDS + wg * 2048 + ks * 8,
                &sb,
                stage * B_WORDS + ks * 8,
            );
        }
        wgmma_commit();
        if tid == 0 && kt + 3 < tiles {
            let s = (kt + 3) % 4;
            let k0 = (kt + 3) * 64;
            mbarrier_arrive_expect_tx(&mut full, s, STAGE_BYTES);
            tma_load_2d(&mut sa, s * A_WORDS, a, am, k0, m0, &mut full, s);
            tma_load_2d(&mut sb, s * B_WORDS, b, bm, k0, n0, &mut full, s);
        }
        wgmma_wait(0, &mut acc);
        kt += 1;
    }
    store_wgmma_tile(c, &acc, m, n, m0, n0, tid);
}
// ANCHOR_END: wgmma_tma_gemm
