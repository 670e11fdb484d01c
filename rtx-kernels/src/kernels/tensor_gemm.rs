//! A matrix product on the tensor cores, written with `#[kernel]`: f16 or bf16 inputs, f32
//! accumulation, tiles staged in shared memory by `cp_async` in a multi-stage pipeline, loaded
//! into fragments by `ldmatrix` and multiplied by `mma_m16n8k16`. It shows that the kernel
//! language reaches the tensor cores; cuBLAS stays rtx's GEMM path.
//!
//! Invariant: every size works. Edges of M, N and K are zero-filled in shared memory and
//! masked on store; when K or N is not a multiple of 8, rows are not 16-byte aligned, and
//! the tiles are filled by plain loads instead of `cp_async` (a branch uniform over the grid).

use crate::Float;
use rtx_macros::kernel;

/// Threads per block of [`matmul_tc()`]: 8 warps.
pub const MATMUL_TC_THREADS: u32 = 256;
/// Rows and columns of C per block of [`matmul_tc()`].
pub const MATMUL_TC_TILE: usize = 128;

/// `c = a b` for row-major `a` (`m x k`), `b` (`k x n`) and `c` (`m x n`), f16 or bf16, on
/// the tensor cores with f32 accumulation (rounded once, to `T`, on store). Launch it on
/// [`MATMUL_TC_THREADS`] threads per block and a grid of `ceil(n / 128) x ceil(m / 128)`
/// blocks; buffers start on 16-byte boundaries (tensors rtx allocates do).
///
/// Each block computes a 128 x 128 tile of C, stepping 64 along K. Three stages of A and B
/// tiles (96 KiB of shared memory, so two blocks fit an SM of 228 KiB) are in flight: while
/// the warps multiply one, `cp_async` fills the next two. Its 8 warps
/// each hold a 64 x 32 part of the tile as 4 x 4 `mma_m16n8k16` accumulators, with two sets of
/// fragments: the next 16-wide K step's are read while this one's products run; its
/// `launch_bounds(256, 2)` holds it to the 128 registers a thread at which two blocks share an
/// SM (a launch of more than 256 threads a block is an error). Shared tiles
/// are swizzled (16-byte chunk `c` of row `r` is stored at `c ^ f(r)`), so the 8 rows an
/// `ldmatrix` reads lie in different banks.
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernel::LaunchConfig;
/// use rtx_kernels::kernels::{matmul_tc, MATMUL_TC_THREADS};
/// let (m, n, k) = (3, 2, 4);
/// let a: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(i as f32)).collect();
/// let b: Vec<bf16> = (0..k * n).map(|i| bf16::from_f32(1.0 - i as f32)).collect();
/// let mut c = vec![bf16::ZERO; m * n];
/// matmul_tc(LaunchConfig::new((1, 1), MATMUL_TC_THREADS), &a, &b, &mut c, m, n, k).unwrap();
/// assert_eq!(c[0].to_f32(), 0.0 * 1.0 + 1.0 * -1.0 + 2.0 * -3.0 + 3.0 * -5.0);
/// ```
// ANCHOR: tc_header
#[kernel(crate = crate, launch_bounds(256, 2))]
pub fn matmul_tc<T: Float>(a: &[T], b: &[T], c: &mut [T], m: usize, n: usize, k: usize) {
    // Stages of the pipeline, and how many of the newest copy groups may still be in flight
    // when the oldest is used (STAGES - 2).
    const STAGES: usize = 3;
    const IN_FLIGHT: usize = 1;
    // Words (two elements each) of one stage's A tile (128 x 64) and B tile (64 x 128).
    const STAGE_WORDS: u32 = 4096;
    // A 64-wide K step doubles the products between barriers over a 32-wide one; its three
    // stages need 96 KiB, past the 48 KiB of static shared memory (`#[kernel]` makes them
    // dynamic).
    #[shared]
    let sa: [u32; 12288];
    #[shared]
    let sb: [u32; 12288];
    // ANCHOR_END: tc_header
    // Index arithmetic within a tile is 32-bit (it stays below 2^32 by the tile sizes), so
    // the address math costs one instruction per step where `usize` costs two or more.
    let tid = thread_idx_x() as u32;
    let lane = tid % 32;
    // The warp's 64 x 32 part of the block's tile.
    let wm = tid / 32 / 4;
    let wn = tid / 32 % 4;
    let m0 = block_idx_y() * 128;
    let n0 = block_idx_x() * 128;
    let aligned = k % 8 == 0 && n % 8 == 0;
    let tiles = (k + 63) / 64;
    // `ldmatrix` addressing: this lane gives row `r8` of matrix `quad`.
    let quad = lane / 8;
    let r8 = lane % 8;
    // A, 32 words a row: row `(quad % 2) * 8 + r8` of each 16-row fragment, chunk
    // `2 ks + quad / 2`, swizzled by the row mod 8, which is `r8` for every such row.
    let a_row = (wm * 64 + (quad % 2) * 8 + r8) * 32;
    // B, 64 words a row, read transposed: k-row `ks * 16 + (quad % 2) * 8 + r8`, chunk
    // `wn * 4 + nj * 2 + quad / 2` along N, swizzled by the k-row mod 8, which is `r8`.
    let b_row = ((quad % 2) * 8 + r8) * 64;
    let b_chunk = wn * 4 + quad / 2;
    // This thread's copies: chunk `tid % 8` of A rows `tid / 8 + 32 i` and chunk `tid % 16`
    // of B k-rows `tid / 16 + 16 i`, for i in 0..4. Each i is the first plus a constant (the
    // swizzle, by the row mod 8, is the same for all four), so only the first is kept: the
    // registers go to the fragments.
    let ar = tid / 8;
    let a_col = ((tid % 8) * 8) as usize;
    let a_src = (m0 + ar as usize) * k + a_col;
    let a_dst = ar * 32 + ((tid % 8) ^ (ar % 8)) * 4;
    let br = tid / 16;
    let b_col = n0 + ((tid % 16) * 8) as usize;
    let b_dst = br * 64 + ((tid % 16) ^ (br % 8)) * 4;
    let mut acc = [0.0; 64];
    // Two sets of fragments: step `ks + 1`'s are read from shared memory while step `ks`'s
    // products run.
    let mut af = [0u32; 32];
    let mut bf = [0u32; 16];
    // Step `kt` loads tile `kt` and multiplies tile `kt - (STAGES - 1)`, so STAGES - 1 tiles
    // are being copied while one is multiplied.
    // ANCHOR: tc_pipeline
    let mut kt = 0;
    let mut load_stage: u32 = 0;
    let mut use_stage: u32 = 0;
    while kt < tiles + STAGES - 1 {
        // The oldest group (the tile multiplied below) has landed, for every thread; and every
        // warp is done with the stage the copies below overwrite.
        cp_async_wait(IN_FLIGHT);
        sync_threads();
        if kt < tiles {
            // ANCHOR_END: tc_pipeline
            let stage = load_stage * STAGE_WORDS;
            let k0 = kt * 64;
            for i in 0..4 {
                let row_ok = m0 + (ar as usize) + 32 * i < m;
                let gk = k0 + a_col;
                let src = a_src + 32 * i * k + k0;
                let gkb = k0 + (br as usize) + 16 * i;
                let gn = b_col;
                let dst = (stage + a_dst + (i as u32) * 1024) as usize;
                let bdst = (stage + b_dst + (i as u32) * 1024) as usize;
                if aligned {
                    let na = if row_ok && gk < k { k - gk } else { 0 };
                    cp_async(&mut sa, dst, a, src, na);
                    let nb = if gkb < k && gn < n { n - gn } else { 0 };
                    cp_async(&mut sb, bdst, b, gkb * n + gn, nb);
                } else {
                    for p in 0..4 {
                        let e = gk + 2 * p;
                        let lo = if row_ok && e < k { a[src + 2 * p] } else { 0.0 };
                        let hi = if row_ok && e + 1 < k {
                            a[src + 2 * p + 1]
                        } else {
                            0.0
                        };
                        sa[dst + p] = pack2(lo, hi);
                        let f = gn + 2 * p;
                        let lo = if gkb < k && f < n {
                            b[gkb * n + f]
                        } else {
                            0.0
                        };
                        let hi = if gkb < k && f + 1 < n {
                            b[gkb * n + f + 1]
                        } else {
                            0.0
                        };
                        sb[bdst + p] = pack2(lo, hi);
                    }
                }
            }
            load_stage = if load_stage == 2 { 0 } else { load_stage + 1 };
        }
        cp_async_commit();
        // ANCHOR: tc_compute
        if kt >= STAGES - 1 {
            let stage = use_stage * STAGE_WORDS;
            // Step `s` reads the fragments of K step `s` into set `s % 2` and multiplies those
            // of step `s - 1`, so each `ldmatrix` has a step's products to land under.
            for step in 0..5 {
                if step < 4 {
                    let fa = (step % 2) * 16;
                    let fb = (step % 2) * 8;
                    for mi in 0..4 {
                        let chunk = (2 * (step as u32) + quad / 2) ^ r8;
                        let word = stage + a_row + (mi as u32) * 512 + chunk * 4;
                        ldmatrix_x4(&mut af, fa + mi * 4, &sa, word as usize);
                    }
                    for nj in 0..2 {
                        let chunk = (b_chunk + (nj as u32) * 2) ^ r8;
                        let word = stage + (step as u32) * 1024 + b_row + chunk * 4;
                        ldmatrix_x4_trans(&mut bf, fb + nj * 4, &sb, word as usize);
                    }
                }
                if step > 0 {
                    let fa = ((step - 1) % 2) * 16;
                    let fb = ((step - 1) % 2) * 8;
                    for mi in 0..4 {
                        for nt in 0..4 {
                            let at = (mi * 4 + nt) * 4;
                            mma_m16n8k16(&mut acc, at, &af, fa + mi * 4, &bf, fb + nt * 2);
                        }
                    }
                }
            }
            use_stage = if use_stage == 2 { 0 } else { use_stage + 1 };
        }
        // ANCHOR_END: tc_compute
        kt += 1;
    }
    // Accumulator element i of fragment (mi, nt): row g + 8 (i / 2), column 2 t + i % 2.
    let g = lane / 4;
    let t4 = lane % 4;
    for mi in 0..4 {
        for nt in 0..4 {
            for i in 0..4 {
                let row = m0 + (wm * 64 + g) as usize + mi * 16 + (i / 2) * 8;
                let col = n0 + (wn * 32 + t4 * 2) as usize + nt * 8 + i % 2;
                if row < m && col < n {
                    c[row * n + col] = acc[(mi * 4 + nt) * 4 + i];
                }
            }
        }
    }
}
