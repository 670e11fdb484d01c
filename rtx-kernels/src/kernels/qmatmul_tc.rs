//! Products of many activation rows with ggml-quantized weights (`Q8_0`, `Q4_1`) on the tensor
//! cores: a prefill's products. [`qmatmul_ggml_tc()`] multiplies the weight's quant integers,
//! exact in bf16, with the activations split in two bf16 parts, and applies each block's
//! scale (and minimum) to the f32 sums, so it never dequantizes the weight and keeps about 16
//! bits of every activation: its products are within about 4e-6 of the dequantized weight's,
//! relative to the sum of the terms' magnitudes.
//!
//! Invariant: a block owns a 64 x 64 tile of the output and its sums run in a fixed order,
//! so a result depends on the launch shape alone.

use super::{ggml_min, ggml_octet};
use crate::Float;
use rtx_macros::kernel;

/// Threads per block of [`qmatmul_ggml_tc()`]: 4 warps.
pub const QMATMUL_TC_THREADS: u32 = 128;
/// Rows of activations, and rows of the weight, per block of [`qmatmul_ggml_tc()`].
pub const QMATMUL_TC_TILE: usize = 64;

/// `out[r * n + c] = Σ_j x[r * k + j] · W[c, j]`, as [`qmatmul_ggml()`](super::qmatmul_ggml())
/// computes it (the same arguments: ggml blocks of GGUF type `kind`, 8 for `Q8_0` or 3 for
/// `Q4_1`, as little-endian words; `k` a multiple of 32), on the tensor cores. Launch its bf16
/// entry (the split below needs bf16's exponent range) on [`QMATMUL_TC_THREADS`] threads per
/// block and a grid of `ceil(n / 64) x ceil(m / 64)` blocks.
///
/// A block takes 64 activation rows and 64 weight rows and steps 64 values along K (two ggml
/// blocks). Each step stages in shared memory:
/// - the activations as two bf16 parts, `hi` (the value with 8 significant bits, split off
///   exactly in f64) and `lo` (the rest, rounded), so `hi + lo` is the value to about 2^-18;
/// - the weight's quant integers (`q` of `d q` or `d q + m`), which bf16 holds exactly;
/// - each weight row's scale `d` and minimum `m` per block, and each activation row's sum per
///   block.
///
/// Warp `w` multiplies activation rows `16 w ..` with all 64 weight rows by `mma_m16n8k16`
/// (`hi` and `lo` each), a block's 32 values into a fresh accumulator, then adds `d` times it
/// and `m` times the row's sum to the output's: `Σ x (d q + m) = d Σ x q + m Σ x`.
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernel::LaunchConfig;
/// use rtx_kernels::kernels::{qmatmul_ggml_tc, QMATMUL_TC_THREADS};
/// // One Q8_0 block of scale 0.5 (f16 0x3800) and values 0, 1, ..., 31, as words.
/// let mut bytes = vec![0x00, 0x38];
/// bytes.extend(0..32u8);
/// bytes.resize(36, 0);
/// let w: Vec<i32> = bytes.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
/// let x = vec![1.0f32; 32];
/// let mut out = vec![0.0f32; 1];
/// let config = LaunchConfig::new((1, 1), QMATMUL_TC_THREADS);
/// qmatmul_ggml_tc::<bf16>(config, &w, &x, &[], &mut out, 1, 1, 32, 8, 0).unwrap();
/// assert_eq!(out[0], 0.5 * (0..32).sum::<i32>() as f32);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn qmatmul_ggml_tc<T: Float>(
    w: &[i32],
    x: &[T::Acc],
    res: &[T::Acc],
    out: &mut [T::Acc],
    m: usize,
    n: usize,
    k: usize,
    kind: u32,
    add: u32,
) {
    // A step's tiles, 64 rows of 64 bf16 values (32 words), 16-byte chunk `c` of row `r`
    // stored at chunk `c ^ (r % 8)` so the 8 rows an `ldmatrix` reads lie in distinct banks.
    #[shared]
    let xh: [u32; 2048];
    #[shared]
    let xl: [u32; 2048];
    #[shared]
    let wq: [u32; 2048];
    // Per weight row and block of the step (`2 row + block`): its scale and minimum; per
    // activation row and block: the sum of its values.
    #[shared]
    let sd: [T; 128];
    #[shared]
    let smn: [T; 128];
    #[shared]
    let sx: [T; 128];
    let tid = thread_idx_x();
    let lane = lane_id();
    let warp = tid / 32;
    let m0 = block_idx_y() * 64;
    let n0 = block_idx_x() * 64;
    let blocks = k / 32;
    let bytes = if kind == 8 { 34 } else { 20 };
    // `ldmatrix` addressing: this lane gives row `r8` of matrix `quad`.
    let quad = lane / 8;
    let r8 = lane % 8;
    let a_row = warp * 16 + (quad % 2) * 8 + r8;
    let mut acc = [0.0; 32];
    let mut part = [0.0; 32];
    let mut ah = [0u32; 4];
    let mut al = [0u32; 4];
    let mut bq = [0u32; 16];
    let mut b0 = 0;
    while b0 < blocks {
        // This thread's staging: chunk `c = tid % 8` (8 values; block `c / 4` of the step) of
        // rows `tid / 8 + 16 i`.
        let c = tid % 8;
        let b = b0 + c / 4;
        for i in 0..4 {
            let r = tid / 8 + 16 * i;
            let word = r * 32 + (c ^ (r % 8)) * 4;
            // Activations.
            let row = m0 + r;
            let live = row < m && b < blocks;
            let at = row * k + b0 * 32 + c * 8;
            let mut sum = 0.0;
            for p in 0..4 {
                let mut v = [0.0; 2];
                for e in 0..2 {
                    if live {
                        v[e] = x[at + 2 * p + e];
                    }
                }
                // Veltkamp's split in f64 (which rounds every operation: no fused
                // multiply-add undoes it): `hi` keeps the top 8 of the 53 bits.
                let v0 = v[0] as f64;
                let v1 = v[1] as f64;
                let c0 = v0 * 35184372088833.0;
                let c1 = v1 * 35184372088833.0;
                let h0 = c0 - (c0 - v0);
                let h1 = c1 - (c1 - v1);
                xh[word + p] = pack2(h0 as T, h1 as T);
                xl[word + p] = pack2((v0 - h0) as T, (v1 - h1) as T);
                sum += v[0] + v[1];
            }
            // The block's sum over its 4 chunks: lanes `4 j .. 4 j + 3` hold one row's.
            sum += warp_shuffle_xor(sum, 1);
            sum += warp_shuffle_xor(sum, 2);
            if c % 4 == 0 {
                sx[r * 2 + c / 4] = sum;
            }
            // Weight quants: values `8 (c % 4) ..` of block `b` of weight row `n0 + r`.
            let col = n0 + r;
            let mut q = [0.0; 8];
            let mut d = 0.0;
            let mut mn = 0.0;
            if col < n && b < blocks {
                let base = (col * blocks + b) * bytes;
                d = ggml_octet(w, base, c % 4, kind, &mut q);
                mn = ggml_min(w[base / 4] as u32, kind);
            }
            for p in 0..4 {
                wq[word + p] = pack2(q[2 * p], q[2 * p + 1]);
            }
            if c % 4 == 0 {
                sd[r * 2 + c / 4] = d;
                smn[r * 2 + c / 4] = mn;
            }
        }
        sync_threads();
        let g = lane / 4;
        let t4 = lane % 4;
        for kb in 0..2 {
            for i in 0..32 {
                part[i] = 0.0;
            }
            for s in 0..2 {
                // K columns `16 (2 kb + s) ..` of the step: chunks `2 ks` and `2 ks + 1`.
                let ks = 2 * kb + s;
                let chunk = 2 * ks + quad / 2;
                let word = a_row * 32 + (chunk ^ r8) * 4;
                ldmatrix_x4(&mut ah, 0, &xh, word);
                ldmatrix_x4(&mut al, 0, &xl, word);
                for j in 0..4 {
                    // Weight rows `16 j ..`: matrices 0 and 1 are fragment `2 j`'s two halves
                    // of K, matrices 2 and 3 fragment `2 j + 1`'s.
                    let nr = 16 * j + (quad / 2) * 8 + r8;
                    let chunk = 2 * ks + quad % 2;
                    ldmatrix_x4(&mut bq, 4 * j, &wq, nr * 32 + (chunk ^ r8) * 4);
                }
                for f in 0..8 {
                    mma_m16n8k16(&mut part, f * 4, &ah, 0, &bq, f * 2);
                    mma_m16n8k16(&mut part, f * 4, &al, 0, &bq, f * 2);
                }
            }
            // Element `i` of fragment `f`: activation row `16 warp + g + 8 (i / 2)`, weight
            // row `8 f + 2 t4 + i % 2`.
            for f in 0..8 {
                for i in 0..4 {
                    let r = warp * 16 + g + 8 * (i / 2);
                    let cw = f * 8 + t4 * 2 + i % 2;
                    let e = f * 4 + i;
                    acc[e] += sd[cw * 2 + kb] * part[e] + smn[cw * 2 + kb] * sx[r * 2 + kb];
                }
            }
        }
        // The next step restages the tiles.
        sync_threads();
        b0 += 2;
    }
    let g = lane / 4;
    let t4 = lane % 4;
    for f in 0..8 {
        for i in 0..4 {
            let row = m0 + warp * 16 + g + 8 * (i / 2);
            let col = n0 + f * 8 + t4 * 2 + i % 2;
            if row < m && col < n {
                if add == 1 {
                    out[row * n + col] = acc[f * 4 + i] + res[row * n + col];
                } else {
                    out[row * n + col] = acc[f * 4 + i];
                }
            }
        }
    }
}
