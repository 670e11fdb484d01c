//! Products of activations with ggml-quantized weights (`Q8_0`, `Q4_1`) on a GPU that never
//! dequantize the weight into memory: [`qmatmul_ggml()`] decodes each weight block in
//! registers as it multiplies it, with the formulas of
//! [`dequantize_ggml()`](super::dequantize_ggml()), so a product equals the dequantized
//! weight's up to the order of the f32 sums.
//!
//! Invariant: a warp computes whole outputs and reduces them with a butterfly, so no output
//! depends on another warp, and the order of each sum is fixed by the launch shape alone.

use super::{ggml_f16, ggml_i8, warp_sum_xor};
use crate::Float;
use rtx_macros::kernel;

/// Threads per block of [`qmatmul_ggml()`]: 4 warps, one weight row each.
pub const QMATMUL_THREADS: u32 = 128;
/// Rows of activations each warp of [`qmatmul_ggml()`] multiplies by its weight row: the weight
/// block decoded once serves all of them (a decoding step has 1, a prefill many).
pub const QMATMUL_ROWS: usize = 8;
/// `out[r * n + c] = Σ_j x[r * k + j] · W[c, j]` for the quantized weight `W` `[n, k]` in `w`
/// (ggml blocks of 32 values as little-endian words, GGUF type `kind`: 8 for `Q8_0`, 3 for
/// `Q4_1`, no other) and activations `x` `[m, k]`, `k` a multiple of 32: a Linear's `x · Wᵀ`. Launch
/// exactly [`QMATMUL_THREADS`] threads per block (the staging's steps assume it) on a grid of
/// `ceil(n / 4) x ceil(m / 8)` blocks.
///
/// Warp `w` of block `(bx, by)` takes weight row `c = 4 bx + w` and activation rows
/// `8 by ..`; each step the warp takes 8 blocks of 32 values, lane `l` decoding the 8 values
/// `8 (l % 4) ..` of block `l / 4` and multiplying them with the same 8 of each activation
/// row, and the lanes' sums meet at the end. The step's 256 values of each activation row
/// are first staged in shared memory by the whole block (loads of 128 contiguous bytes a
/// warp), one padding slot after each 32, so the lanes' reads, 8 values apart, fall in
/// distinct banks: read from global memory, those reads bound the vocabulary's product by
/// the L1 cache's throughput (an H100: 80% busy, DRAM 14%).
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
    #[shared]
    let xs: [T; 2112];
    let lane = lane_id();
    let tid = thread_idx_x();
    let nt = block_dim_x();
    let col = block_idx_x() * (nt / 32) + tid / 32;
    // A warp past the last weight row still stages activations: every thread reaches every
    // barrier.
    let active = col < n;
    let r0 = block_idx_y() * 8;
    let rows = (m - r0).min(8);
    let blocks = k / 32;
    let bytes = if kind == 8 { 34 } else { 20 };
    let quarter = lane % 4;
    let mut acc = [0.0; 8];
    let mut v = [0.0; 8];
    let mut b0 = 0;
    while b0 < blocks {
        // Values `32 b0 ..` of each row (fewer at a row's end), value `t` of row `r` at
        // `264 r + t + t / 32`.
        let width = (blocks - b0).min(8) * 32;
        if rows == 8 {
            // A full tile of rows (a batch of 8 or more, a prefill): value `i = tid + 128 q`
            // of the step is row `q / 2`'s value `i % 256`, unrolled, so each thread's loads
            // are in flight together (a loop issued them one at a time, and the products of
            // 32 rows waited on it: an H100 took 47 µs for the down projection's product where
            // this takes 26).
            for q in 0..16 {
                let i = tid + 128 * q;
                let t = i % 256;
                if t < width {
                    xs[(q / 2) * 264 + t + t / 32] = x[(r0 + q / 2) * k + b0 * 32 + t];
                }
            }
        } else {
            // Fewer rows (decoding one sequence): a loop over just those, which at one row is
            // two steps where the sixteen unrolled ones cost 9% of a decode step.
            let mut i = tid;
            while i < rows * 256 {
                let t = i % 256;
                if t < width {
                    xs[(i / 256) * 264 + t + t / 32] = x[(r0 + i / 256) * k + b0 * 32 + t];
                }
                i += nt;
            }
        }
        sync_threads();
        let b = b0 + lane / 4;
        if active && b < blocks {
            let base = (col * blocks + b) * bytes;
            // The block's scale (and minimum) once for the lane's 8 values, and its bytes a
            // word at a time: the formulas of `ggml_q8_0` and `ggml_q4_q5` with the decoding
            // they share taken out of the loop.
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
                    let c: i32 = ggml_i8((hi >> (8 * e)) & 255);
                    v[e] = (a as T) * d;
                    v[e + 4] = (c as T) * d;
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
            // The lane's values are `t0 ..= t0 + 7` of the step, `t0 = 8 lane`.
            let at = 8 * lane + lane / 4;
            for r in 0..8 {
                if r < rows {
                    for e in 0..8 {
                        acc[r] += v[e] * xs[r * 264 + at + e];
                    }
                }
            }
        }
        // The next step restages `xs`.
        sync_threads();
        b0 += 8;
    }
    if active {
        for r in 0..8 {
            let s = warp_sum_xor(acc[r]);
            if lane == 0 && r < rows {
                out[(r0 + r) * n + col] = s;
            }
        }
    }
}
