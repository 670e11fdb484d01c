//! 2x2 max pooling of f32 rows with AVX-512, forward and backward: 16 windows at a time, with
//! masked loads and stores for the last ones, so no window takes a scalar, branchy path.
//!
//! Each window's values are visited as the general loops in `pool.rs` visit them (the top row,
//! then the bottom row, each left to right), with the same rules written as vector masks: the
//! forward keeps a value that is larger or NaN; the backward picks the first maximum, or the
//! first NaN. So results are bitwise those of the general loops.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Whether the CPU runs these kernels.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The maxima of the 2x2 windows over the rows `top` and `bottom` into `out` (one per window).
///
/// # Panics
/// When a row holds fewer than `2 * out.len()` values, or [`available`] is false.
pub(super) fn forward_row(top: &[f32], bottom: &[f32], out: &mut [f32]) {
    let n = out.len();
    assert!(top.len() >= 2 * n && bottom.len() >= 2 * n && available());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512F is present (asserted), and the masked loads and stores stay within
    // `2 * n` values of each row and `n` of `out` (asserted above).
    unsafe {
        forward_avx512(top.as_ptr(), bottom.as_ptr(), out.as_mut_ptr(), n)
    }
}

/// The gradient of [`forward_row`]: each window's gradient `grad[i]` (as `0 + g`) goes to its
/// first maximum (first NaN) in `out_top` / `out_bottom` (the window's places in the two rows),
/// zero to the other three places. Writes the first `2 * grad.len()` values of both.
///
/// # Panics
/// When a row holds fewer than `2 * grad.len()` values, or [`available`] is false.
pub(super) fn backward_row(
    top: &[f32],
    bottom: &[f32],
    grad: &[f32],
    out_top: &mut [std::mem::MaybeUninit<f32>],
    out_bottom: &mut [std::mem::MaybeUninit<f32>],
) {
    let n = grad.len();
    assert!(top.len() >= 2 * n && bottom.len() >= 2 * n && available());
    assert!(out_top.len() >= 2 * n && out_bottom.len() >= 2 * n);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `forward_row`; the stores cover `2 * n` values of each output row.
    unsafe {
        backward_avx512(
            top.as_ptr(),
            bottom.as_ptr(),
            grad.as_ptr(),
            (out_top.as_mut_ptr().cast(), out_bottom.as_mut_ptr().cast()),
            n,
        )
    }
}

/// The masks of the first `n` (at most 16) lanes, and of the first `2n` values split into two
/// vectors of 16.
#[cfg(target_arch = "x86_64")]
fn masks(n: usize) -> (__mmask16, __mmask16, __mmask16) {
    let lanes = |k: usize| -> __mmask16 {
        if k >= 16 {
            0xffff
        } else {
            ((1u32 << k) - 1) as __mmask16
        }
    };
    (lanes(n), lanes(2 * n), lanes((2 * n).saturating_sub(16)))
}

/// The even and odd values of the `2n` at `p`: the windows' left and right columns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn columns(p: *const f32, lo: __mmask16, hi: __mmask16) -> (__m512, __m512) {
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    // SAFETY: the caller's masks cover only values inside its row (a masked-off lane is not
    // read, so `p + 16` may lie past the row's end).
    let (a, b) = unsafe {
        (
            _mm512_maskz_loadu_ps(lo, p),
            _mm512_maskz_loadu_ps(hi, p.wrapping_add(16)),
        )
    };
    (
        _mm512_permutex2var_ps(a, even, b),
        _mm512_permutex2var_ps(a, odd, b),
    )
}

/// Lanes that are NaN.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn nan(v: __m512) -> __mmask16 {
    _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn forward_avx512(top: *const f32, bottom: *const f32, out: *mut f32, n: usize) {
    let mut i = 0;
    while i < n {
        let (m16, lo, hi) = masks(n - i);
        // SAFETY: the masks stop at the rows' `2n` values and `out`'s `n`.
        unsafe {
            let (a, b) = columns(top.add(2 * i), lo, hi);
            let (c, d) = columns(bottom.add(2 * i), lo, hi);
            let mut m = _mm512_set1_ps(f32::NEG_INFINITY);
            for v in [a, b, c, d] {
                let take = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, m) | nan(v);
                m = _mm512_mask_mov_ps(m, take, v);
            }
            _mm512_mask_storeu_ps(out.add(i), m16, m);
        }
        i += 16;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn backward_avx512(
    top: *const f32,
    bottom: *const f32,
    grad: *const f32,
    (out_top, out_bottom): (*mut f32, *mut f32),
    n: usize,
) {
    // Interleaves the left and right columns back into row order.
    let first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    let mut i = 0;
    while i < n {
        let (m16, lo, hi) = masks(n - i);
        // SAFETY: the masks stop at the rows' `2n` values and `grad`'s `n`.
        unsafe {
            let (a, b) = columns(top.add(2 * i), lo, hi);
            let (c, d) = columns(bottom.add(2 * i), lo, hi);
            // The pick of `pool::pick`: a value replaces the running maximum when larger or
            // NaN, until the first NaN.
            let mut m = a;
            let mut done = nan(a);
            let mut took = [0 as __mmask16; 3];
            for (t, v) in took.iter_mut().zip([b, c, d]) {
                let nv = nan(v);
                *t = !done & (nv | _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, m));
                m = _mm512_mask_mov_ps(m, *t, v);
                done |= nv;
            }
            let [tb, tc, td] = took;
            let wins = [!(tb | tc | td), tb & !(tc | td), tc & !td, td];
            let g = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m16, grad.add(i)));
            let [wa, wb, wc, wd] = [
                _mm512_maskz_mov_ps(wins[0], g),
                _mm512_maskz_mov_ps(wins[1], g),
                _mm512_maskz_mov_ps(wins[2], g),
                _mm512_maskz_mov_ps(wins[3], g),
            ];
            for (row, (l, r)) in [(out_top, (wa, wb)), (out_bottom, (wc, wd))] {
                let p = row.add(2 * i);
                _mm512_mask_storeu_ps(p, lo, _mm512_permutex2var_ps(l, first, r));
                _mm512_mask_storeu_ps(p.wrapping_add(16), hi, _mm512_permutex2var_ps(l, second, r));
            }
        }
        i += 16;
    }
}
