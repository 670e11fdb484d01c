//! The tile on AVX-512: a 512-bit register holds four lanes of each of four outputs (four
//! weight rows, one activation row), so a half block of activations is loaded once,
//! broadcast to the four 128-bit lanes, and meets four weight rows per instruction. The byte
//! products are VNNI's `dpbusd` (unsigned by signed bytes, four neighbours added into an
//! i32) where the CPU has it, else AVX-512BW's `maddubs` and `madd`; both leave elements 4l
//! to 4l + 3 of a block's half in lane l of its row, which with the half's offset are the
//! lanes [`super::scalar`] defines, and the f32 steps are its fused multiply-adds.

use super::scalar::lanes_sum;
use super::{BLOCK, Chunk, MR, NR, Out, QWeight, Tile, TileKernel, for_tiles};
use std::arch::x86_64::*;

/// [`chunk_bw`] with VNNI's byte dot product.
///
/// # Safety
/// The CPU must run AVX-512 F, BW, VL and VNNI, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn chunk_vnni(ty: QWeight, c: &Chunk<'_>, out: Out) {
    // SAFETY: the features are enabled here.
    unsafe { for_tiles::<Tiles<true>>(ty, c, out) }
}

/// The chunk's outputs, every tile on AVX-512BW.
///
/// # Safety
/// The CPU must run AVX-512 F, BW and VL, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
pub(super) unsafe fn chunk_bw(ty: QWeight, c: &Chunk<'_>, out: Out) {
    // SAFETY: the features are enabled here.
    unsafe { for_tiles::<Tiles<false>>(ty, c, out) }
}

/// The AVX-512 tile, with VNNI's dot product when `VNNI`.
struct Tiles<const VNNI: bool>;

impl<const VNNI: bool> TileKernel for Tiles<VNNI> {
    #[inline(always)]
    unsafe fn tile(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
        let nb = t.blocks(ty);
        // SAFETY: the caller enables the features (VNNI's only in `chunk_vnni`), and `blocks`
        // checked every row's length.
        unsafe { dispatch::<VNNI>(ty, t, nb, out) }
    }
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
            (4, QWeight::Q4_1) => body::<4, true, VNNI>(t, nb, out),
            (5, QWeight::Q4_1) => body::<5, true, VNNI>(t, nb, out),
            (6, QWeight::Q4_1) => body::<6, true, VNNI>(t, nb, out),
            (7, QWeight::Q4_1) => body::<7, true, VNNI>(t, nb, out),
            (_, QWeight::Q4_1) => body::<8, true, VNNI>(t, nb, out),
            (1, QWeight::Q8_0) => body::<1, false, VNNI>(t, nb, out),
            (2, QWeight::Q8_0) => body::<2, false, VNNI>(t, nb, out),
            (3, QWeight::Q8_0) => body::<3, false, VNNI>(t, nb, out),
            (4, QWeight::Q8_0) => body::<4, false, VNNI>(t, nb, out),
            (5, QWeight::Q8_0) => body::<5, false, VNNI>(t, nb, out),
            (6, QWeight::Q8_0) => body::<6, false, VNNI>(t, nb, out),
            (7, QWeight::Q8_0) => body::<7, false, VNNI>(t, nb, out),
            (_, QWeight::Q8_0) => body::<8, false, VNNI>(t, nb, out),
        }
    }
}

/// `M` activation rows by the tile's four weight rows, `Q4` for `Q4_1` (else `Q8_0`). Inlined
/// into the `chunk_*` functions, whose target features its intrinsics take.
///
/// A block's values go in two registers of four 128-bit lanes, one lane per weight row: the
/// first holds each row's elements 0-15, the second its elements 16-31 (for `Q4_1` these are
/// the low and the high halves of the block's 16 packed bytes, so unpacking is one mask and
/// one shift for all four rows). The activations' halves are broadcast to the four lanes to
/// match, and each register's byte products leave, per row, the partial sums of lanes 0-3
/// and of lanes 4-7 of [`super::scalar`]'s definition.
///
/// # Safety
/// The features of the calling `chunk_*` (VNNI's only when `VNNI`), and every row of `t`
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
        let nibble = _mm512_set1_epi8(0x0f);
        // Each row's scale across its lane: d0 x4, d1 x4, d2 x4, d3 x4.
        let pick_d = _mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0);
        let pick_m = _mm256_set_epi32(7, 5, 3, 1, 7, 5, 3, 1);
        let w = [
            t.w[0].as_ptr(),
            t.w[1].as_ptr(),
            t.w[2].as_ptr(),
            t.w[3].as_ptr(),
        ];
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        let mut mins = [_mm_setzero_ps(); M];
        for b in 0..nb {
            // The bytes of a tile further on (`ahead`), at the pace this tile's are read.
            for line in (0..NR * bb).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(t.ahead.wrapping_add(NR * bb * b + line).cast());
            }
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
            let dw = _mm512_permutexvar_ps(pick_d, _mm512_castps256_ps512(dm));
            let mw = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(dm, pick_m));
            // The values as the unsigned operand: Q4_1's 0..15 as they are, Q8_0's magnitudes
            // (|-128| reads as 128 unsigned), with the negative ones' mask to move their signs
            // onto the activations.
            let wv = if Q4 {
                let packed = lanes(blk, 4);
                [
                    _mm512_and_si512(packed, nibble),
                    _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble),
                ]
            } else {
                [lanes(blk, 2), lanes(blk, 18)]
            };
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
                let xq = x.q.as_ptr().add(b * BLOCK);
                let xv = [
                    _mm512_broadcast_i32x4(_mm_loadu_si128(xq.cast())),
                    _mm512_broadcast_i32x4(_mm_loadu_si128(xq.add(16).cast())),
                ];
                let d = _mm512_mul_ps(dw, _mm512_set1_ps(*x.d.get_unchecked(b)));
                for h in 0..2 {
                    let xs = if Q4 {
                        xv[h]
                    } else {
                        _mm512_mask_sub_epi8(xv[h], neg[h], zero, xv[h])
                    };
                    let sums = if VNNI {
                        _mm512_dpbusd_epi32(zero, wu[h], xs)
                    } else {
                        // A pair of products is at most 2 · 128 · 127, inside i16.
                        _mm512_madd_epi16(_mm512_maddubs_epi16(wu[h], xs), ones)
                    };
                    acc[h] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc[h]);
                }
                if Q4 {
                    *mins = _mm_fmadd_ps(mw, _mm_set1_ps(*x.s.get_unchecked(b)), *mins);
                }
            }
        }
        for ((o, acc), mins) in out.iter_mut().zip(&acc).zip(&mins) {
            let mut m = [0.0f32; 4];
            _mm_storeu_ps(m.as_mut_ptr(), *mins);
            let (mut lo, mut hi) = ([0.0f32; 16], [0.0f32; 16]);
            _mm512_storeu_ps(lo.as_mut_ptr(), acc[0]);
            _mm512_storeu_ps(hi.as_mut_ptr(), acc[1]);
            for (r, o) in o.iter_mut().enumerate() {
                let mut l = [0.0f32; 8];
                l[..4].copy_from_slice(&lo[4 * r..][..4]);
                l[4..].copy_from_slice(&hi[4 * r..][..4]);
                *o = lanes_sum(&l) + m[r];
            }
        }
    }
}

/// The 16 bytes at offset `off` of each of the four blocks, one block per 128-bit lane.
///
/// # Safety
/// AVX-512F must be enabled in the caller, into which this is inlined, and the bytes
/// readable.
#[inline(always)]
unsafe fn lanes(blk: [*const u8; 4], off: usize) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe {
        let v = _mm512_castsi128_si512(_mm_loadu_si128(blk[0].add(off).cast()));
        let v = _mm512_inserti32x4(v, _mm_loadu_si128(blk[1].add(off).cast()), 1);
        let v = _mm512_inserti32x4(v, _mm_loadu_si128(blk[2].add(off).cast()), 2);
        _mm512_inserti32x4(v, _mm_loadu_si128(blk[3].add(off).cast()), 3)
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
