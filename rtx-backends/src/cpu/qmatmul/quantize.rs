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
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU runs AVX-512F.
        unsafe { quantize_row_avx512(x, q, d, s) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU runs AVX2.
        unsafe { quantize_row_avx2(x, q, d, s) };
        return;
    }
    quantize_row_body(x, q, d, s);
}

/// [`quantize_row_body`] in AVX2 intrinsics, a block as four registers, for the reasons and
/// with the equalities of [`quantize_row_avx512`] (the narrowing is two saturating packs,
/// whose interleaved 4-byte groups one permutation puts back in order).
///
/// # Safety
/// The CPU must run AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_row_avx2(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    use std::arch::x86_64::*;
    let blocks = x
        .chunks_exact(BLOCK)
        .zip(q.chunks_exact_mut(BLOCK))
        .zip(d.iter_mut().zip(s));
    let magnitude = _mm256_set1_ps(-0.0);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for ((xb, qb), (d, s)) in blocks {
        // SAFETY: each chunk holds exactly 32 values and 32 bytes, four registers' worth.
        unsafe {
            let v: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(xb.as_ptr().add(8 * i)));
            let abs = |v| _mm256_andnot_ps(magnitude, v);
            let m = _mm256_max_ps(
                _mm256_max_ps(abs(v[0]), abs(v[1])),
                _mm256_max_ps(abs(v[2]), abs(v[3])),
            );
            let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
            let scale = amax / 127.0;
            let inv = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
            let qi: [__m256i; 4] =
                std::array::from_fn(|i| _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv)));
            let bytes = _mm256_packs_epi16(
                _mm256_packs_epi32(qi[0], qi[1]),
                _mm256_packs_epi32(qi[2], qi[3]),
            );
            let bytes = _mm256_permutevar8x32_epi32(bytes, order);
            _mm256_storeu_si256(qb.as_mut_ptr().cast(), bytes);
            let t = _mm256_add_epi32(
                _mm256_add_epi32(qi[0], qi[1]),
                _mm256_add_epi32(qi[2], qi[3]),
            );
            let t = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256::<1>(t));
            let t = _mm_add_epi32(t, _mm_shuffle_epi32::<0b01_00_11_10>(t));
            let sum = _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32::<0b10_11_00_01>(t)));
            *d = f16::from_f32(scale).to_f32();
            *s = f16::from_f32(scale * sum as f32).to_f32();
        }
    }
}

/// [`quantize_row_body`] in AVX-512 intrinsics, a block as two registers: the compiler does
/// not vectorize the body's maximum and rounding across a block, which made the quantization
/// a tenth of a prefill's products. The same values for finite inputs: the maximum of the
/// magnitudes is exact in any order, each value is the same f32 product rounded half to even
/// (the conversion's default mode), the saturating narrowing is the body's clamp, and the
/// integer sum is exact.
///
/// # Safety
/// The CPU must run AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn quantize_row_avx512(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    use std::arch::x86_64::*;
    let blocks = x
        .chunks_exact(BLOCK)
        .zip(q.chunks_exact_mut(BLOCK))
        .zip(d.iter_mut().zip(s));
    for ((xb, qb), (d, s)) in blocks {
        // SAFETY: each chunk holds exactly 32 values and 32 bytes, two registers' worth.
        unsafe {
            let a = _mm512_loadu_ps(xb.as_ptr());
            let b = _mm512_loadu_ps(xb.as_ptr().add(16));
            let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
            let scale = amax / 127.0;
            let inv = _mm512_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
            let qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, inv));
            let qbv = _mm512_cvtps_epi32(_mm512_mul_ps(b, inv));
            _mm_storeu_si128(qb.as_mut_ptr().cast(), _mm512_cvtsepi32_epi8(qa));
            _mm_storeu_si128(qb.as_mut_ptr().add(16).cast(), _mm512_cvtsepi32_epi8(qbv));
            let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qbv));
            *d = f16::from_f32(scale).to_f32();
            *s = f16::from_f32(scale * sum as f32).to_f32();
        }
    }
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

    /// The AVX2 and AVX-512 copies of the quantization give the baseline's bytes and scales,
    /// ties and zero blocks included.
    #[test]
    fn the_simd_copies_quantize_as_the_baseline() {
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
        let run = |copy: u8| {
            let (mut q, mut d, mut s) = (vec![0i8; x.len()], vec![0.0; 40], vec![0.0; 40]);
            match copy {
                // SAFETY: checked above.
                2 => unsafe { quantize_row_avx2(&x, &mut q, &mut d, &mut s) },
                // SAFETY: checked by the caller.
                5 => unsafe { quantize_row_avx512(&x, &mut q, &mut d, &mut s) },
                _ => quantize_row_body(&x, &mut q, &mut d, &mut s),
            }
            (q, d, s)
        };
        let (a, b) = (run(2), run(0));
        assert_eq!(a, b);
        assert_eq!(a.0[65], 2);
        if std::arch::is_x86_feature_detected!("avx512f") {
            assert_eq!(run(5), b);
        }
    }
}
