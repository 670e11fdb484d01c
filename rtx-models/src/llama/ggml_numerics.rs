//! The f32 steps of a Llama step on the CPU, done with llama.cpp's arithmetic: the RMS norm
//! (squares summed in f64), SwiGLU through ggml's vectorized exponential, and attention with
//! ggml's dot-product order, softmax and value product.
//!
//! Why: the quantized products round each activation to 8 bits, so a last-bit difference in
//! any f32 step before them now and then moves an activation across a rounding boundary, and
//! a token's keys and values then carry the change to every later position (that alone held
//! the most likely token equal to llama.cpp's at 97% of positions). With these steps done as
//! llama.cpp's CPU build does them (its AVX2 build: ggml's `vec.h`, `ops.cpp` and the tiled
//! f32 product), the quantized model's logits equal llama.cpp's bit for bit. They are as
//! accurate as rtx's own ops (the exponential is within 1.5 ulp), and the dense model uses
//! them too, so the CPU has one Llama path.
//!
//! The loops work on `[f32; 8]` lanes, ggml's AVX2 width, and run compiled with AVX2 and FMA
//! where the CPU has them ([`has_fma`]); elsewhere the same operations run scalar (fused
//! multiply-adds then come from the C library), with the same results.

use super::Matrix;
use rayon::prelude::*;
use rtx::prelude::*;

#[cfg(target_arch = "x86_64")]
mod avx2;

/// Eight lanes, as one AVX2 register.
type Lanes = [f32; 8];

/// Whether the CPU has AVX2 and FMA, for which the loops below have copies in intrinsics
/// (`avx2.rs`, the same operations eight lanes at a time; the compiler does not vectorize
/// these scalar definitions well, and without FMA every `mul_add` is a library call).
fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU also has AVX-512F, for the attention tile's 512-bit entry (the same
/// results, half the instructions).
fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_fma() && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// ggml's vectorized `expf` (from Arm's optimized routines: a degree-5 polynomial in `x - n
/// ln 2`, scaled by `2^n`, with the scale split in two near the ends of the range), one lane,
/// without branches so that eight lanes vectorize. Within 1.5 ulp of `exp`; `-inf` gives 0.
#[inline(always)]
fn expf(x: f32) -> f32 {
    let shift = f32::from_bits(0x4b40_0000); // 0x1.8p23: rounds to an integer
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), shift); // x log2(e)
    let n = z - shift;
    // x - n ln 2, with ln 2 in two parts (0x1.62e4p-1 + 0x1.7f7d1cp-20).
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),
        (-n).mul_add(f32::from_bits(0x3f31_7200), x),
    );
    let e = z.to_bits() << 23;
    let k = f32::from_bits(e.wrapping_add(1f32.to_bits()));
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010)
        .mul_add(b, f32::from_bits(0x3d2b_9f17))
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)),
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6) * b);
    let inside = j.mul_add(k, k);
    // Near the ends of the range 2^n is applied as two factors, past them it saturates.
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    let edge = if n.abs() > 192.0 {
        s1 * s1
    } else {
        s2.mul_add(j, s2) * s1
    };
    if n.abs() > 126.0 { edge } else { inside }
}

/// Eight lanes summed as `ggml_vec_dot_f32`'s reduction does: the high half added to the
/// low, then two horizontal adds, `(0 + 1) + (2 + 3)`.
#[inline(always)]
fn hsum_dot(v: Lanes) -> f32 {
    let t = [v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]];
    (t[0] + t[1]) + (t[2] + t[3])
}

/// Eight lanes summed as the softmax and the tiled product do: the high half added to the
/// low, then `(0 + 2) + (1 + 3)`.
#[inline(always)]
fn hsum_tile(v: Lanes) -> f32 {
    let t = [v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]];
    (t[0] + t[2]) + (t[1] + t[3])
}

/// `x · y` in `ggml_vec_dot_f32`'s order: four accumulators of eight lanes take 32 values a
/// step by fused multiply-adds, then `(a0 + a2) + (a1 + a3)` lane by lane, [`hsum_dot`], and
/// any values past the last multiple of 32 added one at a time.
#[inline(always)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let whole = x.len() / 32 * 32;
    let mut acc = [[0f32; 8]; 4];
    for (xs, ys) in x[..whole].chunks_exact(32).zip(y[..whole].chunks_exact(32)) {
        for (a, (xa, ya)) in acc
            .iter_mut()
            .zip(xs.chunks_exact(8).zip(ys.chunks_exact(8)))
        {
            for l in 0..8 {
                a[l] = xa[l].mul_add(ya[l], a[l]);
            }
        }
    }
    let mut v = [0f32; 8];
    for l in 0..8 {
        v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    }
    dot_tail(hsum_dot(v), &x[whole..], &y[whole..])
}

/// The end of [`dot`]: the folded lanes widened to f64 and the values past the last multiple
/// of 32 added one product at a time, as `ggml_vec_dot_f32` does.
#[inline(always)]
fn dot_tail(folded: f32, x: &[f32], y: &[f32]) -> f32 {
    let mut sum = f64::from(folded);
    for (a, b) in x.iter().zip(y) {
        sum += f64::from(a * b);
    }
    sum as f32
}

/// The RMS norm of every row of `x` (`[rows, D]`) times `w`, as ggml's `rms_norm` then `mul`:
/// the squares rounded to f32 and summed in f64, the mean rounded to f32, each element times
/// `1 / sqrt(mean + eps)`, then times its weight.
pub(super) fn rms_norm(x: &Matrix, w: &Tensor<(usize,)>, eps: f64) -> Result<Matrix> {
    let [rows, cols] = x.dims()[..] else {
        unreachable!("a matrix")
    };
    let (x, w) = (x.contiguous(), w.contiguous());
    let (xs, ws) = (host(&x), host(&w));
    let eps = eps as f32;
    let mut out = vec![0f32; rows * cols];
    let row = |(o, r): (&mut [f32], &[f32])| {
        let sum: f64 = r.iter().map(|&v| f64::from(v * v)).sum();
        let mean = (sum / cols as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        for ((o, &v), &w) in o.iter_mut().zip(r).zip(ws) {
            *o = v * scale * w;
        }
    };
    if rows * cols < PARALLEL {
        out.chunks_mut(cols).zip(xs.chunks(cols)).for_each(row);
    } else {
        out.par_chunks_mut(cols)
            .zip(xs.par_chunks(cols))
            .for_each(row);
    }
    Tensor::try_from_vec(out, (rows, cols), x.device())
}

/// `silu(gate) * up` of the stacked feed-forward projection (`[rows, 2 ff]`: the gate's `ff`
/// columns, then up's) as ggml's `swiglu`: `x / (1 + expf(0 - x))` with ggml's [`expf`],
/// rounded, times up.
pub(super) fn swiglu(gate_up: &Matrix) -> Result<Matrix> {
    let [rows, two_ff] = gate_up.dims()[..] else {
        unreachable!("a matrix")
    };
    let ff = two_ff / 2;
    let gate_up = gate_up.contiguous();
    let src = host(&gate_up);
    let mut out = vec![0f32; rows * ff];
    let fma = has_fma();
    let row = |(o, r): (&mut [f32], &[f32])| {
        #[cfg(target_arch = "x86_64")]
        if fma {
            // SAFETY: the CPU has AVX2 and FMA (`has_fma`).
            return unsafe { avx2::swiglu_row(o, r) };
        }
        let _ = fma;
        swiglu_row(o, r);
    };
    if rows * ff < PARALLEL {
        out.chunks_mut(ff).zip(src.chunks(two_ff)).for_each(row);
    } else {
        out.par_chunks_mut(ff)
            .zip(src.par_chunks(two_ff))
            .for_each(row);
    }
    Tensor::try_from_vec(out, (rows, ff), gate_up.device())
}

/// One row of [`swiglu`]: `out[i] = silu(gate[i]) * up[i]` for the row's halves, blocks of
/// eight through [`expf`], the rest as ggml's scalar tail ([`swiglu_tail`]).
fn swiglu_row(out: &mut [f32], row: &[f32]) {
    let ff = out.len();
    let whole = ff / 8 * 8;
    let (gate, up) = row.split_at(ff);
    for ((o, &g), &u) in out[..whole].iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + expf(0.0 - g)) * u;
    }
    swiglu_tail(&mut out[whole..], &gate[whole..], &up[whole..]);
}

/// SwiGLU past the last multiple of eight, as ggml's scalar loop: the C library's `expf`.
fn swiglu_tail(out: &mut [f32], gate: &[f32], up: &[f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + (-g).exp()) * u;
    }
}

/// Elements below which a pass runs on the calling thread (handing it out costs more).
const PARALLEL: usize = 1 << 15;

/// Query rows per task of [`attention`].
const TILE: usize = 16;

/// Where [`attention`] finds a sequence's keys and values: the caches (`[batch, kv_heads,
/// max_len, hd]`, dense on the CPU), the sequence, and the positions it holds.
pub(super) struct CacheSlab<'a> {
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub seq: usize,
    pub max_len: usize,
}

/// Causal attention of `t` query rows (`q`, `[t, heads * hd]`, row `i` at position `first +
/// i`) over a sequence's cached keys and values (positions up to `first + t - 1` written),
/// as llama.cpp computes it: scores by [`dot`] (key · query), scaled, masked and turned into
/// probabilities by [`softmax`], and each output dim a sum over the keys in eight lanes (key
/// `j` in lane `j % 8`, fused multiply-adds in key order) folded by [`hsum_tile`], which is
/// ggml's tiled product of the probabilities with the transposed values. Returns `[t, heads
/// * hd]`.
pub(super) fn attention(
    q: &[f32],
    (t, heads, kv_heads, hd): (usize, usize, usize, usize),
    cache: &CacheSlab<'_>,
    first: usize,
    scale: f32,
) -> Vec<f32> {
    let group = heads / kv_heads;
    let tiles = t.div_ceil(TILE);
    let fma = has_fma();
    let wide = has_avx512();
    let task = |i: usize| -> Vec<f32> {
        let (kvh, r0) = (i / tiles, i % tiles * TILE);
        let rows = TILE.min(t - r0);
        let at = (cache.seq * kv_heads + kvh) * cache.max_len * hd;
        let keys = &cache.keys[at..at + (first + t) * hd];
        let values = &cache.values[at..at + (first + t) * hd];
        let mut out = vec![0f32; rows * group * hd];
        let tile = Tile {
            q,
            keys,
            values,
            shape: (heads, group, kvh, hd),
            rows: (r0, first),
            scale,
        };
        #[cfg(target_arch = "x86_64")]
        if wide && hd % 32 == 0 {
            // SAFETY: the CPU has AVX-512F, AVX2 and FMA (`has_avx512`), and `hd` is a
            // multiple of 32.
            unsafe { avx2::attend_tile_512(&tile, &mut out) };
            return out;
        }
        #[cfg(target_arch = "x86_64")]
        if fma && hd % 8 == 0 {
            // SAFETY: the CPU has AVX2 and FMA (`has_fma`), and `hd` is a multiple of 8.
            unsafe { avx2::attend_tile(&tile, &mut out) };
            return out;
        }
        attend_tile(&tile, &mut out);
        out
    };
    let count = kv_heads * tiles;
    let work = kv_heads * group * t * (first + t) * hd;
    let parts: Vec<Vec<f32>> = if work < PARALLEL * 8 {
        (0..count).map(task).collect()
    } else {
        (0..count).into_par_iter().map(task).collect()
    };
    let mut out = vec![0f32; t * heads * hd];
    for (i, part) in parts.iter().enumerate() {
        let (kvh, r0) = (i / tiles, i % tiles * TILE);
        for (r, row) in part.chunks(group * hd).enumerate() {
            out[(r0 + r) * heads * hd + kvh * group * hd..][..group * hd].copy_from_slice(row);
        }
    }
    out
}

/// One task of [`attention`]: the query rows `r0..r0 + out.len() / (group hd)` of key-value
/// head `kvh`'s query heads, over that head's keys and values (`[positions, hd]`).
pub(super) struct Tile<'a> {
    q: &'a [f32],
    keys: &'a [f32],
    values: &'a [f32],
    /// `(heads, group, kv head, hd)`.
    shape: (usize, usize, usize, usize),
    /// `(r0, first)`: the tile's first row, and the position of the step's first row.
    rows: (usize, usize),
    scale: f32,
}

/// The rows of `tile`, written `[rows, group, hd]` into `out` (see [`attention`]).
fn attend_tile(tile: &Tile<'_>, out: &mut [f32]) {
    let (heads, group, kvh, hd) = tile.shape;
    let (r0, first) = tile.rows;
    let rows = out.len() / (group * hd);
    let mut probs = vec![0f32; (first + r0 + rows).div_ceil(8) * 8];
    let mut acc = vec![0f32; 8 * hd];
    for r in 0..rows {
        let seen = first + r0 + r + 1;
        let width = seen.div_ceil(8) * 8;
        for hg in 0..group {
            let h = kvh * group + hg;
            let qi = &tile.q[(r0 + r) * heads * hd + h * hd..][..hd];
            for (j, s) in probs[..seen].iter_mut().enumerate() {
                *s = dot(&tile.keys[j * hd..][..hd], qi);
            }
            softmax(&mut probs[..width], seen, tile.scale);
            acc.fill(0.0);
            for (j, &p) in probs[..seen].iter().enumerate() {
                let lane = &mut acc[j % 8 * hd..][..hd];
                for (a, &v) in lane.iter_mut().zip(&tile.values[j * hd..][..hd]) {
                    *a = v.mul_add(p, *a);
                }
            }
            let o = &mut out[(r * group + hg) * hd..][..hd];
            for (d, o) in o.iter_mut().enumerate() {
                *o = hsum_tile(std::array::from_fn(|l| acc[l * hd + d]));
            }
        }
    }
}

/// ggml's softmax of one row of scores in place (`soft_max` with a scale and the causal
/// mask): the first `seen` entries scaled, the rest of `row` (up to a multiple of eight)
/// masked; exponentials of `x - max` by [`expf`] in blocks of eight (masked ones give zero),
/// each block's sum folded by [`hsum_tile`] and added in f64; then every entry times
/// `1 / sum` rounded to f32.
#[inline(always)]
fn softmax(row: &mut [f32], seen: usize, scale: f32) {
    let mut max = f32::NEG_INFINITY;
    for (i, x) in row.iter_mut().enumerate() {
        *x = if i < seen {
            *x * scale
        } else {
            f32::NEG_INFINITY
        };
        max = max.max(*x);
    }
    let mut sum = 0f64;
    for block in row.chunks_exact_mut(8) {
        let mut v = [0f32; 8];
        for (x, e) in block.iter_mut().zip(&mut v) {
            *e = expf(*x - max);
            *x = *e;
        }
        sum += f64::from(hsum_tile(v));
    }
    let inv = (1.0 / sum) as f32;
    for x in row.iter_mut() {
        *x *= inv;
    }
}

/// The elements of a dense CPU tensor (the callers make it dense).
fn host<S: Shape>(x: &Tensor<S>) -> &[f32] {
    x.as_cpu_slice()
        .expect("the llama.cpp arithmetic runs on dense CPU tensors")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorized exponential is within 2 ulp of `exp` across the range where it is
    /// neither 0 nor infinite, including the two-factor scale near both ends; `-inf` (a
    /// masked score) gives exactly 0.
    #[test]
    fn expf_is_within_two_ulp_of_exp() {
        let mut worst = 0u32;
        let mut x = -103.0f32;
        while x < 88.0 {
            let (got, want) = (expf(x), x.exp());
            if want.is_normal() {
                worst = worst.max(got.to_bits().abs_diff(want.to_bits()));
            }
            x += 0.0137;
        }
        assert!(worst <= 2, "{worst} ulp");
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(0.0), 1.0);
    }

    /// The dot product's order changes only rounding: within 1e-5 of the exact sum, for
    /// lengths with and without a tail past 32.
    #[test]
    fn dot_is_the_dot_product() {
        for n in [32usize, 64, 70] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let y: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let exact: f64 = x
                .iter()
                .zip(&y)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            assert!((f64::from(dot(&x, &y)) - exact).abs() < 1e-5, "n = {n}");
        }
    }

    /// Attention of each query row over the keys up to its position, against a plain f64
    /// loop, for a prefill of 20 rows (two tiles) after 5 cached positions, two key-value
    /// heads of two queries each.
    #[test]
    fn attention_is_causal_attention() {
        let (t, heads, kvh, hd, first, max_len) = (20, 4, 2, 32, 5, 32);
        let val = |i: usize, k: f32| ((i as f32) * k).sin();
        let q: Vec<f32> = (0..t * heads * hd).map(|i| val(i, 0.31)).collect();
        let keys: Vec<f32> = (0..kvh * max_len * hd).map(|i| val(i, 0.17)).collect();
        let values: Vec<f32> = (0..kvh * max_len * hd).map(|i| val(i, 0.23)).collect();
        let cache = CacheSlab {
            keys: &keys,
            values: &values,
            seq: 0,
            max_len,
        };
        let got = attention(&q, (t, heads, kvh, hd), &cache, first, 0.25);
        for i in 0..t {
            for h in 0..heads {
                let kv = h / (heads / kvh);
                let row = |m: &[f32], j: usize| m[(kv * max_len + j) * hd..][..hd].to_vec();
                let qi = &q[(i * heads + h) * hd..][..hd];
                let seen = first + i + 1;
                let s: Vec<f64> = (0..seen)
                    .map(|j| {
                        let k = row(&keys, j);
                        0.25 * qi
                            .iter()
                            .zip(&k)
                            .map(|(a, b)| f64::from(a * b))
                            .sum::<f64>()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                for d in 0..hd {
                    let want: f64 = (0..seen)
                        .map(|j| (s[j] - m).exp() / z * f64::from(row(&values, j)[d]))
                        .sum();
                    let g = f64::from(got[(i * heads + h) * hd + d]);
                    assert!(
                        (g - want).abs() < 1e-5,
                        "row {i} head {h} dim {d}: {g} vs {want}"
                    );
                }
            }
        }
    }
}
