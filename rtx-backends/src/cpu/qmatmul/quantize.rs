//! The activations' on-the-fly quantization: 8 bits per block of 32, with the block's scale
//! and its sum rounded to f16, the numbers llama.cpp's CPU backend (ggml's `Q8_0` and `Q8_1`
//! activation blocks) multiplies with, so the products see the same integers and scales.

use super::BLOCK;
use rayon::prelude::*;
use rtx_kernels::f16;

/// Rows of activations quantized to 8 bits per block. Per block: the scale `d`, the sum
/// `s = d Σ q` that `Q4_1`'s minimum needs, and the 32 signed values `q`.
pub struct QActivations {
    /// Per block, `d`: the largest magnitude over 127, rounded to f16 (held widened).
    pub d: Vec<f32>,
    /// Per block, `s`: the unrounded `d` times `Σ q`, rounded to f16 (held widened).
    pub s: Vec<f32>,
    /// The values, 32 per block.
    pub q: Vec<i8>,
}

/// Rows at or above which the rows are quantized in parallel (a prefill; one decoding row is
/// a few microseconds of work, less than a task costs).
const PARALLEL_ROWS: usize = 16;

/// Quantizes `x` (rows of `k` values, `k` a multiple of 32) block by block.
///
/// Per block, with `a` the largest magnitude: `q = round(x · (127 / a))`, ties to even (0 for
/// an all-zero block); `d = f16(a / 127)`; `s = f16((a / 127) Σ q)`. These are the values
/// llama.cpp computes (its x86 quantization multiplies by `127 / a` rather than dividing by
/// `d`, rounds ties to even, and keeps `d` and `s` as f16): a different rounding of one value
/// would change a block's integer dot product by a whole step, more than any f32 rounding.
pub fn quantize_rows(x: &[f32], k: usize) -> QActivations {
    debug_assert!(k.is_multiple_of(BLOCK) && x.len().is_multiple_of(k.max(1)));
    let blocks = x.len() / BLOCK;
    let mut out = QActivations {
        d: vec![0.0; blocks],
        s: vec![0.0; blocks],
        q: vec![0; x.len()],
    };
    let rows = x.len().checked_div(k).unwrap_or(0);
    let nb = k / BLOCK;
    if rows >= PARALLEL_ROWS {
        x.par_chunks(k)
            .zip(out.q.par_chunks_mut(k))
            .zip(out.d.par_chunks_mut(nb).zip(out.s.par_chunks_mut(nb)))
            .for_each(|((x, q), (d, s))| quantize_row(x, q, d, s));
    } else {
        quantize_row(x, &mut out.q, &mut out.d, &mut out.s);
    }
    out
}

/// [`quantize_rows`] for consecutive blocks, compiled for AVX2 where the CPU has it: the
/// baseline target has no rounding instruction, so each value would cost a call of `rintf`.
fn quantize_row(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU runs AVX2.
        unsafe { quantize_row_avx2(x, q, d, s) };
        return;
    }
    quantize_row_body(x, q, d, s);
}

/// [`quantize_row_body`] with AVX2 enabled (the same operations, vectorized).
///
/// # Safety
/// The CPU must run AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_row_avx2(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    quantize_row_body(x, q, d, s);
}

/// The blocks' quantization.
#[inline(always)]
fn quantize_row_body(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    let blocks = x
        .chunks_exact(BLOCK)
        .zip(q.chunks_exact_mut(BLOCK))
        .zip(d.iter_mut().zip(s));
    for ((xb, qb), (d, s)) in blocks {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let scale = amax / 127.0;
        let inv = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let mut sum = 0i32;
        for (q, v) in qb.iter_mut().zip(xb) {
            // |v · inv| rounds to at most 127, so the clamp (a saturating pack's) changes
            // nothing for a finite block.
            *q = ((v * inv).round_ties_even() as i32).clamp(-128, 127) as i8;
            sum += i32::from(*q);
        }
        *d = f16::from_f32(scale).to_f32();
        *s = f16::from_f32(scale * sum as f32).to_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 copy of the quantization gives the baseline's bytes and scales, ties and
    /// zero blocks included.
    #[test]
    fn the_avx2_copy_quantizes_as_the_baseline() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut x: Vec<f32> = crate::test_values::values(32 * 40, 5)
            .into_iter()
            .map(|v| (v * 3.0) as f32)
            .collect();
        x[32..64].fill(0.0);
        x[64] = 127.0;
        x[65] = 2.5;
        let run = |avx2: bool| {
            let (mut q, mut d, mut s) = (vec![0i8; x.len()], vec![0.0; 40], vec![0.0; 40]);
            if avx2 {
                // SAFETY: checked above.
                unsafe { quantize_row_avx2(&x, &mut q, &mut d, &mut s) };
            } else {
                quantize_row_body(&x, &mut q, &mut d, &mut s);
            }
            (q, d, s)
        };
        let (a, b) = (run(true), run(false));
        assert_eq!(a, b);
        assert_eq!(a.0[65], 2);
    }
}
