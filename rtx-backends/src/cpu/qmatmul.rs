//! Products of f32 activations with ggml-quantized weights (`Q8_0`, `Q4_1`) on the CPU that
//! never dequantize a weight: as llama.cpp does, each row of activations is quantized to 8
//! bits per 32-value block on the fly, and each block pair costs one integer dot product of
//! 32 bytes and one or two multiply-adds in f32.
//!
//! The weight is `[N, K]` in ggml's layout (each of the N rows is K values stored as K/32
//! blocks); the product is `x · Wᵀ` for `x` `[M, K]`, as a Linear computes it. M = 1 is a
//! decoding step (a vector times the matrix), larger M a prefill.
//!
//! Invariant: every output is one dot product summed block by block in order, in f32, so the
//! results do not depend on the thread count or on the instruction set: the integer sums are
//! exact, and the f32 steps are the same operations on the same lanes in the same order in the
//! AVX2 and baseline copies of the loops ([`Isa`]).

use rayon::prelude::*;
use rtx_kernels::f16;

/// Values per quantized block.
pub const BLOCK: usize = 32;

/// The weight types these products read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QWeight {
    /// 34-byte blocks: an f16 scale `d`, then 32 signed bytes `q`; a value is `d * q`.
    Q8_0,
    /// 20-byte blocks: an f16 scale `d`, an f16 minimum `m`, then 16 bytes holding 32 four-bit
    /// `q` (byte j holds value j in its low half and value j + 16 in its high half); a value is
    /// `d * q + m`.
    Q4_1,
}

impl QWeight {
    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            QWeight::Q8_0 => 34,
            QWeight::Q4_1 => 20,
        }
    }
}

/// Which copy of the loops runs: the widest the CPU has by default, the baseline in tests too.
/// AVX-512 machines run the AVX2 copy: a 512-bit form (two blocks a step, VNNI's byte dot
/// product) is still to come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX2's byte dot products (`maddubs`), with F16C for the scales.
    Avx2,
    /// The baseline target.
    Baseline,
}

impl Isa {
    /// The widest copy this CPU runs.
    pub fn best() -> Isa {
        if Isa::Avx2.available() {
            Isa::Avx2
        } else {
            Isa::Baseline
        }
    }

    /// Whether this CPU runs this copy.
    pub fn available(self) -> bool {
        match self {
            Isa::Baseline => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 => false,
        }
    }
}

/// Rows of activations quantized to 8 bits per block: per block a scale `d` (the block's
/// largest magnitude over 127), the sum `s = d * Σ q` that `Q4_1`'s minimum needs, and the 32
/// signed values `q = round(x / d)`.
pub struct QActivations {
    /// Per block, `d`.
    pub d: Vec<f32>,
    /// Per block, `d * Σ q`.
    pub s: Vec<f32>,
    /// The values, 32 per block.
    pub q: Vec<i8>,
}

/// Quantizes `x` (`rows` rows of `k` values, `k` a multiple of 32) block by block.
pub fn quantize_rows(x: &[f32], k: usize) -> QActivations {
    debug_assert!(k.is_multiple_of(BLOCK) && x.len().is_multiple_of(k.max(1)));
    let blocks = x.len() / BLOCK;
    let mut out = QActivations {
        d: vec![0.0; blocks],
        s: vec![0.0; blocks],
        q: vec![0; x.len()],
    };
    for (((xb, qb), d), s) in x
        .chunks_exact(BLOCK)
        .zip(out.q.chunks_exact_mut(BLOCK))
        .zip(&mut out.d)
        .zip(&mut out.s)
    {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let scale = amax / 127.0;
        let inv = if scale == 0.0 { 0.0 } else { 1.0 / scale };
        let mut sum = 0i32;
        for (q, v) in qb.iter_mut().zip(xb) {
            // |v * inv| <= 127 up to rounding, so the cast never saturates a finite block.
            *q = (v * inv).round() as i8;
            sum += i32::from(*q);
        }
        *d = scale;
        *s = scale * sum as f32;
    }
    out
}

/// `x · Wᵀ` for `x` `[m, k]` (f32, row-major) and the quantized weight `w` `[n, k]` of type
/// `ty`, as a dense `[m, n]` f32 vector, on the widest copy of the loops this CPU runs.
pub fn qmatmul(w: &[u8], ty: QWeight, n: usize, k: usize, x: &[f32], m: usize) -> Vec<f32> {
    qmatmul_on(Isa::best(), w, ty, n, k, x, m)
}

/// Output columns per parallel task: whole weight rows that stay in cache while every row of
/// activations passes over them.
const COLS_PER_TASK: usize = 16;

/// Up to this many rows of activations, AVX2 reads `Q4_1` weights as they are stored rather
/// than unpacked once per row (on 2 cores: 6-7 GB/s of weights against 3.5 at one row, but
/// half the speed at 512 rows).
const RAW_Q4_1_ROWS: usize = 4;

/// [`qmatmul`] on a chosen copy of the loops (which must be [`Isa::available`]).
pub fn qmatmul_on(
    isa: Isa,
    w: &[u8],
    ty: QWeight,
    n: usize,
    k: usize,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    assert!(isa.available(), "qmatmul: this CPU does not run {isa:?}");
    assert!(
        k.is_multiple_of(BLOCK),
        "qmatmul: K = {k} is not a multiple of {BLOCK}"
    );
    let row_bytes = k / BLOCK * ty.block_bytes();
    assert_eq!(
        w.len(),
        n * row_bytes,
        "qmatmul: the weight is not [{n}, {k}] of {ty:?}"
    );
    assert_eq!(
        x.len(),
        m * k,
        "qmatmul: the activations are not [{m}, {k}]"
    );
    let xq = quantize_rows(x, k);
    let nb = k / BLOCK;
    // Column-major per task while it runs, then scattered into the row-major output.
    let cols: Vec<Vec<f32>> = (0..n.div_ceil(COLS_PER_TASK))
        .into_par_iter()
        .map(|t| {
            let (first, last) = (t * COLS_PER_TASK, ((t + 1) * COLS_PER_TASK).min(n));
            let mut part = vec![0.0f32; (last - first) * m];
            let mut wr = WeightRow {
                d: vec![0.0; nb],
                min: vec![0.0; nb],
                q: vec![0; k],
            };
            for (c, col) in part
                .chunks_exact_mut(m.max(1))
                .enumerate()
                .take(last - first)
            {
                let raw = &w[(first + c) * row_bytes..][..row_bytes];
                // A Q8_0 row's values are read where they are. A Q4_1 row is unpacked once
                // before it meets every row of activations, except for a few rows on AVX2
                // (decoding), which unpacks it in registers: half the bytes to read.
                let unpack = ty == QWeight::Q4_1 && (isa != Isa::Avx2 || m > RAW_Q4_1_ROWS);
                if unpack {
                    wr.decode_q4_1(raw);
                }
                for (i, o) in col.iter_mut().enumerate() {
                    let xr = Row {
                        d: &xq.d[i * nb..(i + 1) * nb],
                        s: &xq.s[i * nb..(i + 1) * nb],
                        q: &xq.q[i * k..(i + 1) * k],
                    };
                    *o = match ty {
                        QWeight::Q8_0 => row_dot(isa, false, q8_0_blocks(raw), &xr),
                        QWeight::Q4_1 if unpack => row_dot(isa, true, wr.blocks(), &xr),
                        // SAFETY: the CPU runs AVX2 (`unpack` is false only on that copy,
                        // which `qmatmul_on` checked).
                        #[cfg(target_arch = "x86_64")]
                        QWeight::Q4_1 => unsafe { q4_1_dot_avx2(raw, &xr) },
                        #[cfg(not(target_arch = "x86_64"))]
                        QWeight::Q4_1 => unreachable!("AVX2 exists only on x86-64"),
                    };
                }
            }
            part
        })
        .collect();
    let mut out = vec![0.0f32; m * n];
    for (t, part) in cols.iter().enumerate() {
        for (c, col) in part.chunks_exact(m.max(1)).enumerate() {
            for (i, v) in col.iter().enumerate() {
                out[i * n + t * COLS_PER_TASK + c] = *v;
            }
        }
    }
    out
}

/// One row of quantized activations.
struct Row<'a> {
    d: &'a [f32],
    s: &'a [f32],
    q: &'a [i8],
}

/// One weight row unpacked: per block its scale and minimum (0 for `Q8_0`), and the values
/// as signed bytes (`Q4_1`'s four-bit values are 0 to 15, so they fit).
struct WeightRow {
    d: Vec<f32>,
    min: Vec<f32>,
    q: Vec<i8>,
}

impl WeightRow {
    /// Unpacks a row of `Q4_1` blocks.
    fn decode_q4_1(&mut self, w: &[u8]) {
        let blocks = w.chunks_exact(20).zip(self.q.chunks_exact_mut(BLOCK));
        for (b, (blk, q)) in blocks.enumerate() {
            self.d[b] = scale(blk[0], blk[1]);
            self.min[b] = scale(blk[2], blk[3]);
            let (lo, hi) = q.split_at_mut(16);
            for ((l, h), p) in lo.iter_mut().zip(hi).zip(&blk[4..20]) {
                *l = (p & 0x0f) as i8;
                *h = (p >> 4) as i8;
            }
        }
    }

    /// Per block: scale, minimum and values.
    fn blocks(&self) -> impl Iterator<Item = (f32, f32, &[i8])> {
        self.q
            .chunks_exact(BLOCK)
            .zip(self.d.iter().zip(&self.min))
            .map(|(q, (d, m))| (*d, *m, q))
    }
}

/// Per block of a raw `Q8_0` row: scale, minimum (0) and values, read in place.
fn q8_0_blocks(w: &[u8]) -> impl Iterator<Item = (f32, f32, &[i8])> {
    w.chunks_exact(34).map(|blk| {
        let q = &blk[2..34];
        // SAFETY: i8 and u8 have the same size and alignment, and every byte is a valid i8.
        let q = unsafe { &*(q as *const [u8] as *const [i8]) };
        (scale(blk[0], blk[1]), 0.0, q)
    })
}

/// The dot product of one weight row (its blocks) with one row of activations on the chosen
/// copy.
fn row_dot<'w>(
    isa: Isa,
    with_min: bool,
    w: impl Iterator<Item = (f32, f32, &'w [i8])>,
    x: &Row<'_>,
) -> f32 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `qmatmul_on` checked that the CPU runs this copy.
        Isa::Avx2 => unsafe { row_dot_avx2(with_min, w, x) },
        _ => row_dot_body(with_min, w, x),
    }
}

/// [`row_dot_body`] with AVX2's byte dot products: `maddubs` multiplies bytes and adds
/// neighbours, `madd` adds neighbouring pairs again, so lane l of a block holds elements 4l to
/// 4l + 3, as in the portable body; the f32 steps are the same multiply and add.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn row_dot_avx2<'w>(
    with_min: bool,
    w: impl Iterator<Item = (f32, f32, &'w [i8])>,
    x: &Row<'_>,
) -> f32 {
    use std::arch::x86_64::*;
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    for (b, ((d, min, wq), xq)) in w.zip(x.q.chunks_exact(BLOCK)).enumerate() {
        assert!(wq.len() == BLOCK && xq.len() == BLOCK);
        // SAFETY: both blocks are 32 bytes long (asserted), and unaligned loads are allowed.
        let (wv, xv) = unsafe {
            (
                _mm256_loadu_si256(wq.as_ptr().cast()),
                _mm256_loadu_si256(xq.as_ptr().cast()),
            )
        };
        // |w| times x with w's sign: the products of signed bytes through the unsigned-by-
        // signed instruction (a pair sums to at most 2 * 128 * 127, inside i16).
        let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
        let sums = _mm256_madd_epi16(pairs, ones);
        let scale = _mm256_set1_ps(d * x.d[b]);
        acc = _mm256_add_ps(acc, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(sums)));
        if with_min {
            mins += min * x.s[b];
        }
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds 8 f32, and unaligned stores are allowed.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    lanes.iter().fold(mins, |a, &v| a + v)
}

/// [`row_dot_avx2`] for a raw `Q4_1` row, its four-bit values unpacked in registers: the low
/// halves of the 16 bytes are elements 0 to 15 and the high halves 16 to 31, the order
/// [`WeightRow::decode_q4_1`] writes, so the lanes and the bits are the portable loop's. The
/// values are 0 to 15, so they enter `maddubs` as its unsigned operand directly.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
fn q4_1_dot_avx2(w: &[u8], x: &Row<'_>) -> f32 {
    use std::arch::x86_64::*;
    let ones = _mm256_set1_epi16(1);
    let nibble = _mm_set1_epi8(0x0f);
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    for (b, (blk, xq)) in w.chunks_exact(20).zip(x.q.chunks_exact(BLOCK)).enumerate() {
        assert!(blk.len() == 20 && xq.len() == BLOCK);
        // SAFETY: the block holds 16 value bytes after its 4 scale bytes and the activations
        // 32 bytes (asserted); unaligned loads are allowed.
        let (packed, xv) = unsafe {
            (
                _mm_loadu_si128(blk[4..].as_ptr().cast()),
                _mm256_loadu_si256(xq.as_ptr().cast()),
            )
        };
        let lo = _mm_and_si128(packed, nibble);
        let hi = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
        let wv = _mm256_set_m128i(hi, lo);
        let sums = _mm256_madd_epi16(_mm256_maddubs_epi16(wv, xv), ones);
        // Both f16 scales widened at once by F16C (exact, as every f16 -> f32 is).
        let scales = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from_le_bytes([
            blk[0], blk[1], blk[2], blk[3],
        ])));
        let (wd, wmin) = (
            _mm_cvtss_f32(scales),
            _mm_cvtss_f32(_mm_shuffle_ps(scales, scales, 1)),
        );
        let d = _mm256_set1_ps(wd * x.d[b]);
        acc = _mm256_add_ps(acc, _mm256_mul_ps(d, _mm256_cvtepi32_ps(sums)));
        mins += wmin * x.s[b];
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds 8 f32, and unaligned stores are allowed.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    lanes.iter().fold(mins, |a, &v| a + v)
}

/// Σ over blocks of `d_w d_x Σ q_w q_x`, plus `m_w s_x` when the weight has minimums. The
/// integer sums and the f32 products are kept in eight lanes (elements 4l to 4l + 3 of a block
/// go to lane l) and the lanes are added in order at the end, so there is no horizontal sum
/// per block, and every copy computes the same lanes in the same order.
#[inline(always)]
fn row_dot_body<'w>(
    with_min: bool,
    w: impl Iterator<Item = (f32, f32, &'w [i8])>,
    x: &Row<'_>,
) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0.0f32; LANES];
    let mut mins = 0.0f32;
    for (b, ((d, min, wq), xq)) in w.zip(x.q.chunks_exact(BLOCK)).enumerate() {
        let mut sum = [0i32; LANES];
        for ((s, wc), xc) in sum
            .iter_mut()
            .zip(wq.chunks_exact(4))
            .zip(xq.chunks_exact(4))
        {
            *s = wc
                .iter()
                .zip(xc)
                .map(|(a, v)| i32::from(*a) * i32::from(*v))
                .sum();
        }
        let scale = d * x.d[b];
        for l in 0..LANES {
            acc[l] += scale * sum[l] as f32;
        }
        if with_min {
            mins += min * x.s[b];
        }
    }
    acc.iter().fold(mins, |a, &v| a + v)
}

/// A block's little-endian f16 scale, widened exactly.
#[inline(always)]
fn scale(lo: u8, hi: u8) -> f32 {
    f16::from_bits(u16::from_le_bytes([lo, hi])).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reproducible values in [-1, 1) as f32.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        crate::test_values::values(n, seed)
            .into_iter()
            .map(|v| v as f32)
            .collect()
    }

    /// Random blocks of `ty` for an `[n, k]` weight: scales of either sign and any nibbles.
    fn weight(ty: QWeight, n: usize, k: usize, seed: u64) -> Vec<u8> {
        let v = values(n * k / BLOCK * ty.block_bytes(), seed);
        let mut bytes: Vec<u8> = v.iter().map(|x| ((x + 1.0) * 127.9) as u8).collect();
        for blk in bytes.chunks_exact_mut(ty.block_bytes()) {
            // Scales (and Q4_1's minimum) as real f16 values, not random bit patterns.
            let d = f16::from_f32(blk[0] as f32 / 255.0 * 0.02 - 0.01)
                .to_bits()
                .to_le_bytes();
            blk[..2].copy_from_slice(&d);
            if ty == QWeight::Q4_1 {
                let m = f16::from_f32(blk[3] as f32 / 255.0 * 0.2 - 0.1)
                    .to_bits()
                    .to_le_bytes();
                blk[2..4].copy_from_slice(&m);
            }
        }
        bytes
    }

    /// The weight's values as ggml defines them, in f64.
    fn dequantized(ty: QWeight, w: &[u8]) -> Vec<f64> {
        let mut out = Vec::new();
        for blk in w.chunks_exact(ty.block_bytes()) {
            let d = f64::from(scale(blk[0], blk[1]));
            match ty {
                QWeight::Q8_0 => out.extend(blk[2..].iter().map(|&q| d * f64::from(q as i8))),
                QWeight::Q4_1 => {
                    let m = f64::from(scale(blk[2], blk[3]));
                    let q = &blk[4..];
                    out.extend(q.iter().map(|&p| d * f64::from(p & 15) + m));
                    out.extend(q.iter().map(|&p| d * f64::from(p >> 4) + m));
                }
            }
        }
        out
    }

    /// Every copy of the loops this CPU runs gives the same bits, and each output is the
    /// product of the dequantized weight with the dequantized activations (exact integer
    /// sums, so only f32 rounding separates them); and the activations' quantization moves
    /// a product by little against the unquantized f32 one.
    #[test]
    fn quantized_products_are_the_dequantized_ones() {
        for ty in [QWeight::Q8_0, QWeight::Q4_1] {
            for (m, n, k) in [(1, 37, 64), (5, 16, 32), (3, 50, 256), (1, 1, 32)] {
                let w = weight(ty, n, k, 7 + m as u64);
                let x = values(m * k, 3 + n as u64);
                let isas: Vec<Isa> = [Isa::Baseline, Isa::Avx2]
                    .into_iter()
                    .filter(|i| i.available())
                    .collect();
                let got = qmatmul_on(isas[0], &w, ty, n, k, &x, m);
                for &isa in &isas[1..] {
                    let other = qmatmul_on(isa, &w, ty, n, k, &x, m);
                    assert_eq!(
                        got, other,
                        "{ty:?} {m}x{n}x{k}: {isa:?} against the baseline"
                    );
                }
                let wd = dequantized(ty, &w);
                let xq = quantize_rows(&x, k);
                let xd: Vec<f64> =
                    xq.q.iter()
                        .enumerate()
                        .map(|(i, &q)| f64::from(xq.d[i / BLOCK]) * f64::from(q))
                        .collect();
                for i in 0..m {
                    for j in 0..n {
                        let dot = |a: &[f64]| -> f64 {
                            (0..k).map(|t| a[i * k + t] * wd[j * k + t]).sum::<f64>()
                        };
                        let exact = dot(&xd);
                        let mag: f64 = (0..k).map(|t| (xd[i * k + t] * wd[j * k + t]).abs()).sum();
                        let g = f64::from(got[i * n + j]);
                        assert!(
                            (g - exact).abs() <= 1e-5 * mag.max(1e-30),
                            "{ty:?} {m}x{n}x{k} [{i}, {j}]: {g} against {exact}"
                        );
                        let x32: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                        let plain = dot(&x32);
                        assert!(
                            (g - plain).abs() <= 0.02 * mag.max(1e-30),
                            "{ty:?} {m}x{n}x{k} [{i}, {j}]: {g} against unquantized {plain}"
                        );
                    }
                }
            }
        }
    }

    /// An all-zero block of activations has scale 0 and contributes nothing (no NaN).
    #[test]
    fn zero_blocks_quantize_to_zero() {
        let q = quantize_rows(&[0.0; 64], 64);
        assert_eq!(q.d, vec![0.0, 0.0]);
        assert!(q.q.iter().all(|&v| v == 0));
        let w = weight(QWeight::Q8_0, 2, 64, 1);
        assert_eq!(
            qmatmul(&w, QWeight::Q8_0, 2, 64, &[0.0; 64], 1),
            vec![0.0, 0.0]
        );
    }
}
