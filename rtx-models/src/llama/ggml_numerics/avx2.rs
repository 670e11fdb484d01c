//! The loops of `ggml_numerics` in AVX2 and FMA intrinsics: the same operations in the same
//! order as the scalar definitions there (and as ggml's AVX2 code), eight lanes a register,
//! so the results are the same bits. Every function needs a CPU with AVX2 and FMA, and the
//! attention tile has a second entry for AVX-512 ([`attend_tile_512`]), whose registers hold
//! two of those eight-lane registers side by side: each element still sees the same
//! operations, with half the instructions.

use super::Tile;
use std::arch::x86_64::*;

/// `f32::from_bits(bits)` in every lane.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn splat(bits: u32) -> __m256 {
    _mm256_set1_ps(f32::from_bits(bits))
}

/// Eight lanes of `super::expf`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn expf8(x: __m256) -> __m256 {
    let shift = splat(0x4b40_0000);
    let z = _mm256_fmadd_ps(x, splat(0x3fb8_aa3b), shift);
    let n = _mm256_sub_ps(z, shift);
    let b = _mm256_fnmadd_ps(
        n,
        splat(0x35bf_be8e),
        _mm256_fnmadd_ps(n, splat(0x3f31_7200), x),
    );
    let e = _mm256_slli_epi32::<23>(_mm256_castps_si256(z));
    let k = _mm256_castsi256_ps(_mm256_add_epi32(
        e,
        _mm256_castps_si256(_mm256_set1_ps(1.0)),
    ));
    let abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0), n);
    let c = _mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(126.0));
    let u = _mm256_mul_ps(b, b);
    let j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(splat(0x3c07_2010), b, splat(0x3d2b_9f17)),
            u,
            _mm256_fmadd_ps(splat(0x3e2a_af33), b, splat(0x3eff_fedb)),
        ),
        u,
        _mm256_mul_ps(splat(0x3f7f_fff6), b),
    );
    let inside = _mm256_fmadd_ps(j, k, k);
    if _mm256_movemask_ps(c) == 0 {
        return inside;
    }
    let le = _mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps());
    let g = _mm256_and_si256(
        _mm256_castps_si256(le),
        _mm256_set1_epi32(0x8200_0000u32 as i32),
    );
    let s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f00_0000)));
    let s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    let d = _mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(192.0));
    let edge = _mm256_blendv_ps(
        _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1),
        _mm256_mul_ps(s1, s1),
        d,
    );
    _mm256_blendv_ps(inside, edge, c)
}

/// `super::hsum_dot` of one register.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum_dot(v: __m256) -> f32 {
    let t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let t = _mm_hadd_ps(t, t);
    _mm_cvtss_f32(_mm_hadd_ps(t, t))
}

/// `super::hsum_tile` of one register.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum_tile(v: __m256) -> f32 {
    let t = _mm_add_ps(_mm256_extractf128_ps::<1>(v), _mm256_castps256_ps128(v));
    let t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)))
}

/// Eight floats from `x[at..]`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load(x: &[f32], at: usize) -> __m256 {
    assert!(at + 8 <= x.len(), "eight floats from {at} of {}", x.len());
    // SAFETY: `x` holds the eight floats read, checked above (the loops' bounds let the
    // compiler drop the check).
    unsafe { _mm256_loadu_ps(x.as_ptr().add(at)) }
}

/// Eight floats from `x[at..]`, unchecked: for the innermost loops, whose bounds their
/// function checks once.
///
/// # Safety
/// `at + 8 <= x.len()`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load_unchecked(x: &[f32], at: usize) -> __m256 {
    debug_assert!(at + 8 <= x.len());
    // SAFETY: the caller's contract.
    unsafe { _mm256_loadu_ps(x.as_ptr().add(at)) }
}

/// Eight floats into `x[at..]`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn store(x: &mut [f32], at: usize, v: __m256) {
    assert!(at + 8 <= x.len(), "eight floats from {at} of {}", x.len());
    // SAFETY: `x` holds the eight floats written, checked above.
    unsafe { _mm256_storeu_ps(x.as_mut_ptr().add(at), v) }
}

/// `super::dot`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let whole = x.len() / 32 * 32;
    let mut acc = [_mm256_setzero_ps(); 4];
    for i in (0..whole).step_by(32) {
        for (j, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(load(x, i + 8 * j), load(y, i + 8 * j), *a);
        }
    }
    let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    super::dot_tail(hsum_dot(v), &x[whole..], &y[whole..])
}

/// [`dot`] of four consecutive rows of `keys` (`hd` each, a multiple of 32) with `q`: the
/// same lanes and sums, the last folds of the four done together by horizontal adds, which
/// pair the same values as `hsum_dot`: `hadd(hadd(t0, t1), hadd(t2, t3))` is `(t0[0] +
/// t0[1]) + (t0[2] + t0[3])` for each of the four.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn dot4(keys: &[f32], q: &[f32]) -> __m128 {
    let hd = q.len();
    assert!(
        hd.is_multiple_of(32) && keys.len() >= 4 * hd,
        "four keys of a multiple of 32"
    );
    let mut acc = [[_mm256_setzero_ps(); 4]; 4];
    for i in (0..hd).step_by(32) {
        for j in 0..4 {
            // SAFETY: `i + 8 j + 8 <= hd`, and key `k < 4` ends at `(k + 1) hd <= keys.len()`,
            // both checked above.
            let y = unsafe { load_unchecked(q, i + 8 * j) };
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: as above.
                let x = unsafe { load_unchecked(keys, k * hd + i + 8 * j) };
                a[j] = _mm256_fmadd_ps(x, y, a[j]);
            }
        }
    }
    let mut t = [_mm_setzero_ps(); 4];
    for (t, a) in t.iter_mut().zip(&acc) {
        let v = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
        *t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    }
    _mm_hadd_ps(_mm_hadd_ps(t[0], t[1]), _mm_hadd_ps(t[2], t[3]))
}

/// Four floats into `x` (`x.len() == 4`).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn store4(x: &mut [f32], v: __m128) {
    assert_eq!(x.len(), 4);
    // SAFETY: `x` holds the four floats written, checked above.
    unsafe { _mm_storeu_ps(x.as_mut_ptr(), v) }
}

/// `super::softmax` (`row.len()` a multiple of eight).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn softmax(row: &mut [f32], seen: usize, scale: f32) {
    // Scaled and masked eight at a time; the maximum is the same value in any order.
    let (sc, neg_inf) = (_mm256_set1_ps(scale), _mm256_set1_ps(f32::NEG_INFINITY));
    let mut mx = neg_inf;
    for at in (0..row.len()).step_by(8) {
        let mut v = _mm256_mul_ps(load(row, at), sc);
        if at + 8 > seen {
            let live: [f32; 8] = std::array::from_fn(|l| if at + l < seen { 0.0 } else { -1.0 });
            let masked = _mm256_cmp_ps::<_CMP_LT_OQ>(load(&live, 0), _mm256_setzero_ps());
            v = _mm256_blendv_ps(v, neg_inf, masked);
        }
        store(row, at, v);
        mx = _mm256_max_ps(mx, v);
    }
    let h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps::<1>(mx));
    let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    let max = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
    let m = _mm256_set1_ps(max);
    let mut sum = 0f64;
    for at in (0..row.len()).step_by(8) {
        let v = expf8(_mm256_sub_ps(load(row, at), m));
        store(row, at, v);
        sum += f64::from(hsum_tile(v));
    }
    let inv = _mm256_set1_ps((1.0 / sum) as f32);
    for at in (0..row.len()).step_by(8) {
        store(row, at, _mm256_mul_ps(load(row, at), inv));
    }
}

/// [`dot4`] in 512-bit registers (AVX-512F): each key's accumulators 0 and 1 side by side
/// in one register and 2 and 3 in another, so adding the two registers is the first fold,
/// `(a0 + a2) | (a1 + a3)`, and the halves of that the second: the same sums in the same
/// order.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn dot4_512(keys: &[f32], q: &[f32]) -> __m128 {
    let hd = q.len();
    assert!(
        hd.is_multiple_of(32) && keys.len() >= 4 * hd,
        "four keys of a multiple of 32"
    );
    let mut acc = [[_mm512_setzero_ps(); 2]; 4];
    for i in (0..hd).step_by(32) {
        // SAFETY: `i + 32 <= hd`, and key `k < 4` ends at `(k + 1) hd <= keys.len()`, both
        // checked above.
        let y = unsafe {
            [
                _mm512_loadu_ps(q.as_ptr().add(i)),
                _mm512_loadu_ps(q.as_ptr().add(i + 16)),
            ]
        };
        for (k, a) in acc.iter_mut().enumerate() {
            for (h, a) in a.iter_mut().enumerate() {
                // SAFETY: as above.
                let x = unsafe { _mm512_loadu_ps(keys.as_ptr().add(k * hd + i + 16 * h)) };
                *a = _mm512_fmadd_ps(x, y[h], *a);
            }
        }
    }
    let mut t = [_mm_setzero_ps(); 4];
    for (t, a) in t.iter_mut().zip(&acc) {
        let s = _mm512_add_ps(a[0], a[1]);
        let v = _mm256_add_ps(
            _mm512_castps512_ps256(s),
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s))),
        );
        *t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    }
    _mm_hadd_ps(_mm_hadd_ps(t[0], t[1]), _mm_hadd_ps(t[2], t[3]))
}

/// [`value_sums`] in 512-bit registers (AVX-512F): a lane's register holds 16 dims, two
/// registers a lane cover 32 dims at a time (16 accumulators), and each dim sees the same
/// operations and fold. `hd` is a multiple of 32.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn value_sums_512(values: &[f32], probs: &[f32], seen: usize, o: &mut [f32]) {
    let hd = o.len();
    assert!(hd.is_multiple_of(32) && values.len() >= seen * hd && probs.len() >= seen);
    for d in (0..hd).step_by(32) {
        let mut lanes = [[_mm512_setzero_ps(); 2]; 8];
        let add = |lane: &mut [__m512; 2], j: usize| {
            let p = _mm512_set1_ps(probs[j]);
            for (h, l) in lane.iter_mut().enumerate() {
                // SAFETY: `j < seen` and `d + 32 <= hd` (checked above), so the sixteen
                // floats lie inside `values`, `seen` rows of `hd`.
                let v = unsafe { _mm512_loadu_ps(values.as_ptr().add(j * hd + d + 16 * h)) };
                *l = _mm512_fmadd_ps(v, p, *l);
            }
        };
        let full = seen / 8 * 8;
        for j0 in (0..full).step_by(8) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                add(lane, j0 + l);
            }
        }
        for (l, lane) in lanes.iter_mut().enumerate().take(seen - full) {
            add(lane, full + l);
        }
        for h in 0..2 {
            let t: [__m512; 4] =
                std::array::from_fn(|m| _mm512_add_ps(lanes[m + 4][h], lanes[m][h]));
            let sum = _mm512_add_ps(_mm512_add_ps(t[0], t[2]), _mm512_add_ps(t[1], t[3]));
            let at = &mut o[d + 16 * h..][..16];
            // SAFETY: `at` holds the sixteen floats written.
            unsafe { _mm512_storeu_ps(at.as_mut_ptr(), sum) };
        }
    }
}

/// `super::attend_tile` (`hd` a multiple of eight).
#[target_feature(enable = "avx2,fma")]
pub(super) fn attend_tile(tile: &Tile<'_>, out: &mut [f32]) {
    // SAFETY: AVX2 and FMA are enabled here, which is all the body needs without `WIDE`.
    unsafe { tile_body::<false>(tile, out) }
}

/// `super::attend_tile` with the dot products and the value sums in 512-bit registers (`hd` a
/// multiple of 32).
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) fn attend_tile_512(tile: &Tile<'_>, out: &mut [f32]) {
    assert!(
        tile.shape.3.is_multiple_of(32),
        "head dim {} is not a multiple of 32",
        tile.shape.3
    );
    // SAFETY: AVX-512F, AVX2 and FMA are enabled here.
    unsafe { tile_body::<true>(tile, out) }
}

/// The tile loop of both entries, inlined into each: `WIDE` takes the 512-bit dot products
/// and value sums.
///
/// # Safety
/// The caller enables AVX2 and FMA, and AVX-512F when `WIDE` (then `hd` is a multiple of 32).
#[inline(always)]
unsafe fn tile_body<const WIDE: bool>(tile: &Tile<'_>, out: &mut [f32]) {
    let (heads, group, kvh, hd) = tile.shape;
    assert!(hd.is_multiple_of(8), "head dim {hd} is not a multiple of 8");
    let (r0, first) = tile.rows;
    let rows = out.len() / (group * hd);
    let mut probs = vec![0f32; (first + r0 + rows).div_ceil(8) * 8];
    for r in 0..rows {
        let seen = first + r0 + r + 1;
        let width = seen.div_ceil(8) * 8;
        for hg in 0..group {
            let h = kvh * group + hg;
            let qi = &tile.q[(r0 + r) * heads * hd + h * hd..][..hd];
            let by4 = if hd % 32 == 0 { seen / 4 * 4 } else { 0 };
            for j in (0..by4).step_by(4) {
                let keys = &tile.keys[j * hd..][..4 * hd];
                // SAFETY: the caller's features.
                let r = unsafe {
                    if WIDE {
                        dot4_512(keys, qi)
                    } else {
                        dot4(keys, qi)
                    }
                };
                // SAFETY: as above.
                unsafe { store4(&mut probs[j..j + 4], r) };
            }
            for (j, s) in probs[..seen].iter_mut().enumerate().skip(by4) {
                // SAFETY: as above.
                *s = unsafe { dot(&tile.keys[j * hd..][..hd], qi) };
            }
            // SAFETY: as above.
            unsafe { softmax(&mut probs[..width], seen, tile.scale) };
            let o = &mut out[(r * group + hg) * hd..][..hd];
            let values = &tile.values[..seen * hd];
            if WIDE {
                // SAFETY: as above; `hd` is a multiple of 32.
                unsafe { value_sums_512(values, &probs, seen, o) };
            } else {
                // SAFETY: as above.
                unsafe { value_sums(values, &probs, seen, o) };
            }
        }
    }
}

/// The value sums of [`tile_body`]: key `j` goes to lane `j % 8`, each lane's sums taken in
/// key order, then folded as `hsum_tile`: (l4 + l0) + (l6 + l2) and (l5 + l1) + (l7 + l3),
/// then those two. A lane at a time over 64 dims (eight registers), so each probability
/// broadcast serves eight value loads; past `seen` a lane adds nothing. Dims past the last
/// multiple of 64 take eight at a time, all lanes at once.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn value_sums(values: &[f32], probs: &[f32], seen: usize, o: &mut [f32]) {
    let hd = o.len();
    assert!(values.len() >= seen * hd && probs.len() >= seen);
    let wide = hd / 64 * 64;
    let fold = |lanes: &[__m256; 8]| {
        let t: [__m256; 4] = std::array::from_fn(|m| _mm256_add_ps(lanes[m + 4], lanes[m]));
        _mm256_add_ps(_mm256_add_ps(t[0], t[2]), _mm256_add_ps(t[1], t[3]))
    };
    for d in (0..wide).step_by(64) {
        // lanes[l][c]: lane l, dims d + 8c...
        let lanes: [[__m256; 8]; 8] = std::array::from_fn(|l| {
            let mut acc = [_mm256_setzero_ps(); 8];
            for j in (l..seen).step_by(8) {
                let p = _mm256_broadcast_ss(&probs[j]);
                for (c, a) in acc.iter_mut().enumerate() {
                    // SAFETY: `j < seen` and `d + 8c + 8 <= hd`, so the eight floats lie
                    // inside `values`, `seen` rows of `hd` (checked above).
                    let v = unsafe { load_unchecked(values, j * hd + d + 8 * c) };
                    *a = _mm256_fmadd_ps(v, p, *a);
                }
            }
            acc
        });
        let by_dims: [[__m256; 8]; 8] = std::array::from_fn(|c| lanes.map(|lane| lane[c]));
        for (c, lanes) in by_dims.iter().enumerate() {
            store(o, d + 8 * c, fold(lanes));
        }
    }
    for d in (wide..hd).step_by(8) {
        let mut lanes = [_mm256_setzero_ps(); 8];
        for (j, &p) in probs[..seen].iter().enumerate() {
            // SAFETY: `j < seen` and `d + 8 <= hd` (`hd` a multiple of 8, checked by the
            // tile), so the eight floats lie inside `values`, `seen` rows of `hd`.
            let v = unsafe { load_unchecked(values, j * hd + d) };
            lanes[j % 8] = _mm256_fmadd_ps(v, _mm256_set1_ps(p), lanes[j % 8]);
        }
        store(o, d, fold(&lanes));
    }
}

/// `super::swiglu_row`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn swiglu_row(out: &mut [f32], row: &[f32]) {
    let ff = out.len();
    let whole = ff / 8 * 8;
    let one = _mm256_set1_ps(1.0);
    for i in (0..whole).step_by(8) {
        let g = load(row, i);
        let e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        let silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
        store(out, i, _mm256_mul_ps(silu, load(row, ff + i)));
    }
    super::swiglu_tail(&mut out[whole..], &row[whole..ff], &row[ff + whole..]);
}

#[cfg(test)]
mod tests {
    use super::super::{
        Tile, attend_tile as scalar_tile, expf, has_avx512, has_fma, swiglu_row as scalar_swiglu,
    };

    fn values(n: usize, k: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32) * k).sin() * 3.0).collect()
    }

    /// The intrinsics give the scalar definitions' bits: the exponential over its whole range
    /// and past both ends, SwiGLU with a tail past the last multiple of eight, and attention
    /// tiles.
    #[test]
    fn intrinsics_are_the_scalar_definitions_bit_for_bit() {
        if !has_fma() {
            println!("skipped: this CPU has no AVX2 and FMA");
            return;
        }
        let mut xs: Vec<f32> = (0..40_000).map(|i| -120.0 + i as f32 * 0.0053).collect();
        xs.extend([f32::NEG_INFINITY, -0.0, 0.0, 88.5, 200.0]);
        for c in xs.chunks(8).filter(|c| c.len() == 8) {
            let mut got = [0f32; 8];
            // SAFETY: the CPU has AVX2 and FMA, checked above.
            unsafe {
                let v = super::expf8(std::arch::x86_64::_mm256_loadu_ps(c.as_ptr()));
                std::arch::x86_64::_mm256_storeu_ps(got.as_mut_ptr(), v);
            }
            for (g, &x) in got.iter().zip(c) {
                assert_eq!(g.to_bits(), expf(x).to_bits(), "exp({x})");
            }
        }
        let ff = 21;
        let row = values(2 * ff, 0.7);
        let (mut a, mut b) = (vec![0f32; ff], vec![0f32; ff]);
        // SAFETY: as above.
        unsafe { super::swiglu_row(&mut a, &row) };
        scalar_swiglu(&mut b, &row);
        assert_eq!(a, b);
        // Head dims of whole 64-dim groups, and one with eight dims past them.
        for hd in [64, 136] {
            let (heads, group, first, rows) = (4, 2, 5, 19);
            let q = values(rows * heads * hd, 0.31);
            let keys = values((first + rows) * hd, 0.17);
            let vals = values((first + rows) * hd, 0.23);
            let tile = Tile {
                q: &q,
                keys: &keys,
                values: &vals,
                shape: (heads, group, 1, hd),
                rows: (0, first),
                scale: 0.125,
            };
            let (mut a, mut b) = (vec![0f32; rows * group * hd], vec![0f32; rows * group * hd]);
            // SAFETY: as above, and hd is a multiple of 8.
            unsafe { super::attend_tile(&tile, &mut a) };
            scalar_tile(&tile, &mut b);
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "the AVX2 tile, head dim {hd}"
            );
            if has_avx512() && hd % 32 == 0 {
                let mut c = vec![0f32; rows * group * hd];
                // SAFETY: the CPU has AVX-512F, checked above, and hd is a multiple of 32.
                unsafe { super::attend_tile_512(&tile, &mut c) };
                assert!(
                    c.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "the 512-bit tile"
                );
            } else {
                println!("the 512-bit tile, head dim {hd}: skipped (no AVX-512F, or not 32k)");
            }
        }
    }
}
