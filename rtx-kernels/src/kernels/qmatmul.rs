//! Products of activations with ggml-quantized weights (`Q8_0`, `Q4_1`) on a GPU that never
//! dequantize the weight into memory: [`qmatmul_ggml()`] decodes each weight block in
//! registers as it multiplies it, with the formulas of
//! [`dequantize_ggml()`](super::dequantize_ggml()), so a product equals the dequantized
//! weight's up to the order of the f32 sums.
//!
//! Invariant: a warp computes whole outputs and reduces them with a butterfly, so no output
//! depends on another warp, and the order of each sum is fixed by the launch shape alone.

use super::{ggml_f16, ggml_i8, ggml_q4_q5, ggml_q8_0, warp_sum_xor};
use crate::Float;
use rtx_macros::kernel;

/// Threads per block of [`qmatmul_ggml()`]: 4 warps, one weight row each.
pub const QMATMUL_THREADS: u32 = 128;
/// Rows of activations each warp of [`qmatmul_ggml()`] multiplies by its weight row: the weight
/// block decoded once serves all of them (a decoding step has 1, a prefill many).
pub const QMATMUL_ROWS: usize = 8;
/// Most rows of activations for which [`qmatmul_ggml()`] has each lane decode 8 values: that
/// layout shortens a decoding step's chain of dependent loads, but it reads each activation
/// row 32 bytes a lane, which cost a 32-row decoding step a third of its speed (an H100).
pub const QMATMUL_FEW_ROWS: usize = 4;

/// `out[r * n + c] = Σ_j x[r * k + j] · W[c, j]` for the quantized weight `W` `[n, k]` in `w`
/// (ggml blocks of 32 values as little-endian words, GGUF type `kind`: 8 for `Q8_0`, 3 for
/// `Q4_1`, no other) and activations `x` `[m, k]`, `k` a multiple of 32: a Linear's `x · Wᵀ`. Launch
/// [`QMATMUL_THREADS`] threads per block on a grid of `ceil(n / 4) x ceil(m / 8)` blocks.
///
/// Warp `w` of block `(bx, by)` takes weight row `c = 4 bx + w` and activation rows
/// `8 by ..`, and the lanes' sums meet at the end. Two layouts, chosen by `m`:
/// - up to [`QMATMUL_FEW_ROWS`] rows (decoding), each step the warp takes 8 blocks of 32
///   values, lane `l` decoding the 8 values `8 (l % 4) ..` of block `l / 4` and multiplying
///   them with the same 8 of each activation row;
/// - more rows, each step the warp takes one block, lane `l` decoding its value `l` and
///   multiplying it with value `l` of each row, so each load of activations is 128
///   contiguous bytes a warp.
///
/// ```
/// use rtx_kernels::{kernels::qmatmul_ggml, kernel::LaunchConfig};
/// // One Q8_0 block of scale 0.5 (f16 0x3800) and values 0, 1, ..., 31, as words.
/// let mut bytes = vec![0x00, 0x38];
/// bytes.extend(0..32u8);
/// bytes.resize(36, 0);
/// let w: Vec<i32> = bytes.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
/// let x = vec![1.0f32; 32];
/// let mut out = vec![0.0f32; 1];
/// qmatmul_ggml(LaunchConfig::new((1, 1), 128), &w, &x, &mut out, 1, 1, 32, 8).unwrap();
/// assert_eq!(out[0], 0.5 * (0..32).sum::<i32>() as f32);
/// ```
#[kernel(crate = crate)]
pub fn qmatmul_ggml<T: Float>(
    w: &[i32],
    x: &[T],
    out: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    kind: u32,
) {
    let lane = lane_id();
    let col = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // The whole warp leaves together, and no other warp waits for it.
    if col >= n {
        return;
    }
    let r0 = block_idx_y() * 8;
    let blocks = k / 32;
    let bytes = if kind == 8 { 34 } else { 20 };
    let mut acc = [0.0; 8];
    if m <= 4
    /* QMATMUL_FEW_ROWS */
    {
        // Lane `l` decodes values `8 q .. 8 q + 8` (`q = l % 4`) of block `b + l / 4`, so a
        // step of the warp covers 8 blocks: the loads of a step do not wait on each other, and
        // a row of K = 576 takes 3 steps where one block a step takes 18 dependent ones
        // (decoding one row is bound by these latencies, not by bandwidth).
        let quarter = lane % 4;
        let mut v = [0.0; 8];
        let mut b = lane / 4;
        while b < blocks {
            let base = (col * blocks + b) * bytes;
            // The block's scale (and minimum) once for the lane's 8 values, and its bytes a
            // word at a time: the formulas of `ggml_q8_0` and `ggml_q4_q5` with the decoding
            // they share taken out of the loop (decoding one value at a time made the
            // vocabulary's product bound by instructions).
            let head = w[base / 4] as u32;
            if kind == 8 {
                // Values `8 q ..` are the bytes from `o`, an even offset: two words, or
                // three when `o` falls mid-word (the third still inside the buffer, which
                // holds the block's last bytes in it).
                let d: T = ggml_f16((head >> ((base % 4) * 8)) & 65535);
                let o = base + 2 + quarter * 8;
                let w0 = w[o / 4] as u32;
                let w1 = w[o / 4 + 1] as u32;
                let mut lo = w0;
                let mut hi = w1;
                if o % 4 != 0 {
                    let w2 = w[o / 4 + 2] as u32;
                    lo = (w0 >> 16) | (w1 << 16);
                    hi = (w1 >> 16) | (w2 << 16);
                }
                for e in 0..4 {
                    let a: i32 = ggml_i8((lo >> (8 * e)) & 255);
                    let b: i32 = ggml_i8((hi >> (8 * e)) & 255);
                    v[e] = (a as T) * d;
                    v[e + 4] = (b as T) * d;
                }
            } else {
                // Q4_1's blocks are whole words: the scale and minimum, then 16 bytes whose
                // low halves are values 0..16 and high halves 16..32.
                let d: T = ggml_f16(head & 65535);
                let mn: T = ggml_f16(head >> 16);
                let o = base / 4 + 1 + (quarter % 2) * 2;
                let lo = w[o] as u32;
                let hi = w[o + 1] as u32;
                let shift = (quarter / 2) * 4;
                for e in 0..4 {
                    v[e] = d * (((lo >> (8 * e + shift)) & 15) as T) + mn;
                    v[e + 4] = d * (((hi >> (8 * e + shift)) & 15) as T) + mn;
                }
            }
            let at = b * 32 + quarter * 8;
            for r in 0..4 {
                if r0 + r < m {
                    let row = (r0 + r) * k + at;
                    for e in 0..8 {
                        acc[r] += v[e] * x[row + e];
                    }
                }
            }
            b += 8;
        }
    } else {
        let mut b = 0;
        while b < blocks {
            let base = (col * blocks + b) * bytes;
            let v: T = if kind == 8 {
                ggml_q8_0(w, base, lane)
            } else {
                ggml_q4_q5(w, base, lane, kind)
            };
            let at = b * 32 + lane;
            for r in 0..8 {
                if r0 + r < m {
                    acc[r] += v * x[(r0 + r) * k + at];
                }
            }
            b += 1;
        }
    }
    for r in 0..8 {
        let s = warp_sum_xor(acc[r]);
        if lane == 0 && r0 + r < m {
            out[(r0 + r) * n + col] = s;
        }
    }
}
