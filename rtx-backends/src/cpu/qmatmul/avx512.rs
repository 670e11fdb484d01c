//! The tile on AVX-512: a 512-bit register holds the eight f32 lanes of two outputs (two
//! weight rows, one activation row), so a block of activations is loaded once, broadcast to
//! both halves, and meets two weight rows per instruction. The byte products are VNNI's
//! `dpbusd` (unsigned by signed bytes, four neighbours added into an i32) where the CPU has
//! it, else AVX-512BW's `maddubs` and `madd`; both leave elements 4l to 4l + 3 of a block in
//! lane l, as [`super::scalar`] defines, and the f32 steps are its fused multiply-adds.

use super::scalar::lanes_sum;
use super::{BLOCK, MR, NR, QWeight, Tile};
use std::arch::x86_64::*;

/// [`tile_bw`] with VNNI's byte dot product.
///
/// # Safety
/// The CPU must run AVX-512 F, BW, VL and VNNI, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn tile_vnni(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
    let nb = t.blocks(ty);
    // SAFETY: the features are enabled here, and `blocks` checked every row's length.
    unsafe { dispatch::<true>(ty, t, nb, out) }
}

/// The tile's `[mr, NR]` outputs into `out`.
///
/// # Safety
/// The CPU must run AVX-512 F, BW and VL, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
pub(super) unsafe fn tile_bw(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
    let nb = t.blocks(ty);
    // SAFETY: the features are enabled here, and `blocks` checked every row's length.
    unsafe { dispatch::<false>(ty, t, nb, out) }
}

/// [`body`] for the tile's row count and weight type.
///
/// # Safety
/// As [`body`].
#[inline(always)]
unsafe fn dispatch<const VNNI: bool>(
    ty: QWeight,
    t: &Tile<'_>,
    nb: usize,
    out: &mut [[f32; NR]; MR],
) {
    // SAFETY: the caller's contract.
    unsafe {
        match (t.mr, ty) {
            (1, QWeight::Q4_1) => body::<1, true, VNNI>(t, nb, out),
            (2, QWeight::Q4_1) => body::<2, true, VNNI>(t, nb, out),
            (3, QWeight::Q4_1) => body::<3, true, VNNI>(t, nb, out),
            (_, QWeight::Q4_1) => body::<4, true, VNNI>(t, nb, out),
            (1, QWeight::Q8_0) => body::<1, false, VNNI>(t, nb, out),
            (2, QWeight::Q8_0) => body::<2, false, VNNI>(t, nb, out),
            (3, QWeight::Q8_0) => body::<3, false, VNNI>(t, nb, out),
            (_, QWeight::Q8_0) => body::<4, false, VNNI>(t, nb, out),
        }
    }
}

/// `M` activation rows by the tile's four weight rows (two pairs), `Q4` for `Q4_1` (else
/// `Q8_0`). Inlined into the `tile_*` functions, whose target features its intrinsics take.
///
/// # Safety
/// The features of the calling `tile_*` (VNNI's only when `VNNI`), and every row of `t`
/// holds `nb` blocks.
#[inline(always)]
unsafe fn body<const M: usize, const Q4: bool, const VNNI: bool>(
    t: &Tile<'_>,
    nb: usize,
    out: &mut [[f32; NR]; MR],
) {
    let bb = if Q4 { 20 } else { 34 };
    // SAFETY: the caller's contract: the features are enabled, and every block read below is
    // inside its row (`b < nb` blocks of `bb` bytes; 32 activation bytes per block).
    unsafe {
        let ones = _mm512_set1_epi16(1);
        let zero = _mm512_setzero_si512();
        let nibble = _mm_set1_epi8(0x0f);
        // Lanes 0-7 take the pair's first row's scale, lanes 8-15 the second's.
        let pick = [
            _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0),
            _mm512_set_epi32(6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 4, 4, 4, 4),
        ];
        let w = [
            t.w[0].as_ptr(),
            t.w[1].as_ptr(),
            t.w[2].as_ptr(),
            t.w[3].as_ptr(),
        ];
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        let mut mins = [_mm_setzero_ps(); M];
        for b in 0..nb {
            let blk = [
                w[0].add(b * bb),
                w[1].add(b * bb),
                w[2].add(b * bb),
                w[3].add(b * bb),
            ];
            // The four rows' first four bytes (Q4_1: scale and minimum; Q8_0: scale and two
            // values, unused) widened at once as f16 pairs: d0 m0 d1 m1 d2 m2 d3 m3.
            let dm = _mm256_cvtph_ps(_mm_set_epi32(
                word(blk[3]),
                word(blk[2]),
                word(blk[1]),
                word(blk[0]),
            ));
            let dm16 = _mm512_castps256_ps512(dm);
            let dw = [
                _mm512_permutexvar_ps(pick[0], dm16),
                _mm512_permutexvar_ps(pick[1], dm16),
            ];
            let mw = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(
                dm,
                _mm256_set_epi32(7, 5, 3, 1, 7, 5, 3, 1),
            ));
            // The values as the unsigned operand: Q4_1's 0..15 as they are, Q8_0's magnitudes
            // (|-128| reads as 128 unsigned), with the negative ones' mask to move their signs
            // onto the activations.
            let wv = [
                pair::<Q4>(blk[0], blk[1], nibble),
                pair::<Q4>(blk[2], blk[3], nibble),
            ];
            let (wu, neg) = if Q4 {
                (wv, [0, 0])
            } else {
                (
                    [_mm512_abs_epi8(wv[0]), _mm512_abs_epi8(wv[1])],
                    [_mm512_movepi8_mask(wv[0]), _mm512_movepi8_mask(wv[1])],
                )
            };
            for (i, (acc, mins)) in acc.iter_mut().zip(&mut mins).enumerate() {
                let x = &t.x[i];
                let xv =
                    _mm512_broadcast_i64x4(_mm256_loadu_si256(x.q.as_ptr().add(b * BLOCK).cast()));
                let xd = _mm512_set1_ps(*x.d.get_unchecked(b));
                for p in 0..2 {
                    let xs = if Q4 {
                        xv
                    } else {
                        _mm512_mask_sub_epi8(xv, neg[p], zero, xv)
                    };
                    let sums = if VNNI {
                        _mm512_dpbusd_epi32(zero, wu[p], xs)
                    } else {
                        // A pair of products is at most 2 · 128 · 127, inside i16.
                        _mm512_madd_epi16(_mm512_maddubs_epi16(wu[p], xs), ones)
                    };
                    let d = _mm512_mul_ps(dw[p], xd);
                    acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc[p]);
                }
                if Q4 {
                    *mins = _mm_fmadd_ps(mw, _mm_set1_ps(*x.s.get_unchecked(b)), *mins);
                }
            }
        }
        for ((o, acc), mins) in out.iter_mut().zip(&acc).zip(&mins) {
            let mut m = [0.0f32; 4];
            _mm_storeu_ps(m.as_mut_ptr(), *mins);
            for (p, a) in acc.iter().enumerate() {
                let mut lanes = [0.0f32; 16];
                _mm512_storeu_ps(lanes.as_mut_ptr(), *a);
                for h in 0..2 {
                    let l: &[f32; 8] = lanes[8 * h..][..8].try_into().unwrap();
                    o[2 * p + h] = lanes_sum(l) + m[2 * p + h];
                }
            }
        }
    }
}

/// A block's first four bytes as a little-endian word.
///
/// # Safety
/// The four bytes at `p` must be readable.
#[inline(always)]
unsafe fn word(p: *const u8) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<i32>().read_unaligned() }
}

/// Two weight rows' blocks at `a` and `b` as one register of values (Q4_1's unpacked).
///
/// # Safety
/// AVX-512 F and BW must be enabled in the caller, into which this is inlined, and both
/// blocks readable.
#[inline(always)]
unsafe fn pair<const Q4: bool>(a: *const u8, b: *const u8, nibble: __m128i) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe {
        _mm512_inserti64x4(
            _mm512_castsi256_si512(values::<Q4>(a, nibble)),
            values::<Q4>(b, nibble),
            1,
        )
    }
}

/// One weight block's 32 values: Q4_1's low halves (elements 0-15) then its high halves
/// (16-31), or Q8_0's bytes.
///
/// # Safety
/// AVX2 must be enabled in the caller, into which this is inlined, and the block readable.
#[inline(always)]
pub(super) unsafe fn values<const Q4: bool>(p: *const u8, nibble: __m128i) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        if Q4 {
            let packed = _mm_loadu_si128(p.add(4).cast());
            let lo = _mm_and_si128(packed, nibble);
            let hi = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
            _mm256_set_m128i(hi, lo)
        } else {
            _mm256_loadu_si256(p.add(2).cast())
        }
    }
}
