//! The tile on AVX2: one 256-bit register of eight f32 lanes per output, so four activation
//! rows at a time (a tile of more is two such) run as two passes of two weight rows (eight
//! accumulators). The byte
//! products are `maddubs` (unsigned by signed bytes, neighbours added) and `madd` (pairs of
//! those added), which leaves elements 4l to 4l + 3 of a block in lane l, as [`super::scalar`]
//! defines; the f32 steps are its fused multiply-adds.

use super::avx512::values;
use super::scalar::lanes_sum;
use super::{BLOCK, Chunk, MR, NR, Out, QWeight, Tile, TileKernel, for_tiles};
use std::arch::x86_64::*;

/// The chunk's outputs, every tile on AVX2.
///
/// # Safety
/// The CPU must run AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn chunk(ty: QWeight, c: &Chunk<'_>, out: Out) {
    // SAFETY: the features are enabled here.
    unsafe { for_tiles::<Tiles>(ty, c, out) }
}

/// The AVX2 tile.
struct Tiles;

impl TileKernel for Tiles {
    #[inline(always)]
    unsafe fn tile(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
        // SAFETY: the caller enables the features.
        unsafe { tile(ty, t, out) }
    }
}

/// The tile's `[mr, NR]` outputs into `out`.
///
/// # Safety
/// AVX2, FMA and F16C must be enabled in the caller, into which this is inlined.
#[inline(always)]
unsafe fn tile(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
    let nb = t.blocks(ty);
    // SAFETY: the caller enables the features, and `blocks` checked every row's length.
    unsafe { rows4(ty, t, nb, out) };
    if t.mr > 4 {
        // Rows 4.. as a second tile of the same weight rows: AVX2's 16 registers hold the
        // sums of four rows.
        let upper = Tile {
            w: t.w,
            x: std::array::from_fn(|r| t.x[(r + 4).min(MR - 1)]),
            mr: t.mr - 4,
            ahead: t.ahead,
        };
        let mut o = [[0.0f32; NR]; MR];
        // SAFETY: as above; the rows are the tile's own.
        unsafe { rows4(ty, &upper, nb, &mut o) };
        out[4..].copy_from_slice(&o[..MR - 4]);
    }
}

/// The tile's first four (or fewer) rows.
///
/// # Safety
/// As [`tile`], and every row of `t` holds `nb` blocks.
#[inline(always)]
unsafe fn rows4(ty: QWeight, t: &Tile<'_>, nb: usize, out: &mut [[f32; NR]; MR]) {
    // SAFETY: the caller's contract.
    unsafe {
        match (t.mr.min(4), ty) {
            (1, QWeight::Q4_1) => body::<1, true>(t, nb, out),
            (2, QWeight::Q4_1) => body::<2, true>(t, nb, out),
            (3, QWeight::Q4_1) => body::<3, true>(t, nb, out),
            (_, QWeight::Q4_1) => body::<4, true>(t, nb, out),
            (1, QWeight::Q8_0) => body::<1, false>(t, nb, out),
            (2, QWeight::Q8_0) => body::<2, false>(t, nb, out),
            (3, QWeight::Q8_0) => body::<3, false>(t, nb, out),
            (_, QWeight::Q8_0) => body::<4, false>(t, nb, out),
        }
    }
}

/// `M` activation rows by the tile's weight rows, `Q4` for `Q4_1` (else `Q8_0`). Inlined into
/// [`chunk`], whose target features its intrinsics take.
///
/// # Safety
/// As [`tile`], and every row of `t` holds `nb` blocks.
#[inline(always)]
unsafe fn body<const M: usize, const Q4: bool>(t: &Tile<'_>, nb: usize, out: &mut [[f32; NR]; MR]) {
    let bb = if Q4 { 20 } else { 34 };
    // SAFETY: the caller's contract: the features are enabled, and every block read below is
    // inside its row (`b < nb` blocks of `bb` bytes; 32 activation bytes per block).
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let nibble = _mm_set1_epi8(0x0f);
        for half in 0..NR / 2 {
            let w = [t.w[2 * half].as_ptr(), t.w[2 * half + 1].as_ptr()];
            let mut acc = [[_mm256_setzero_ps(); 2]; M];
            let mut mins = [[0.0f32; 2]; M];
            for b in 0..nb {
                // The bytes of a tile further on (`ahead`), at the pace this tile's are read
                // (on the first pass; the second finds them in cache).
                if half == 0 {
                    for line in (0..NR * bb).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            t.ahead.wrapping_add(NR * bb * b + line).cast(),
                        );
                    }
                }
                let blk = [w[0].add(b * bb), w[1].add(b * bb)];
                // Both rows' scale and minimum (Q8_0: its first two value bytes, unused)
                // widened at once: d0, m0, d1, m1.
                let dm = _mm_cvtph_ps(_mm_set_epi32(
                    0,
                    0,
                    blk[1].cast::<i32>().read_unaligned(),
                    blk[0].cast::<i32>().read_unaligned(),
                ));
                let mut dmv = [0.0f32; 4];
                _mm_storeu_ps(dmv.as_mut_ptr(), dm);
                let (dw, mw) = ([dmv[0], dmv[2]], [dmv[1], dmv[3]]);
                // The values as the unsigned operand (Q4_1's 0..15 as they are; Q8_0's
                // magnitudes, its signs moved onto the activations below).
                let v = [values::<Q4>(blk[0], nibble), values::<Q4>(blk[1], nibble)];
                let (wu, ws) = if Q4 {
                    (v, v)
                } else {
                    (
                        [_mm256_sign_epi8(v[0], v[0]), _mm256_sign_epi8(v[1], v[1])],
                        v,
                    )
                };
                for (i, (acc, mins)) in acc.iter_mut().zip(&mut mins).enumerate() {
                    let x = &t.x[i];
                    let xv = _mm256_loadu_si256(x.q.as_ptr().add(b * BLOCK).cast());
                    let xd = *x.d.get_unchecked(b);
                    for j in 0..2 {
                        let xs = if Q4 { xv } else { _mm256_sign_epi8(xv, ws[j]) };
                        // A pair of products is at most 2 · 128 · 127, inside i16.
                        let sums = _mm256_madd_epi16(_mm256_maddubs_epi16(wu[j], xs), ones);
                        let d = _mm256_set1_ps(dw[j] * xd);
                        acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc[j]);
                        if Q4 {
                            mins[j] = mw[j].mul_add(*x.s.get_unchecked(b), mins[j]);
                        }
                    }
                }
            }
            for ((o, acc), mins) in out.iter_mut().zip(&acc).zip(&mins) {
                for j in 0..2 {
                    let mut lanes = [0.0f32; 8];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc[j]);
                    o[2 * half + j] = lanes_sum(&lanes) + mins[j];
                }
            }
        }
    }
}
