//! The products on AVX2, eight weight rows at a time with one f32 lane per weight row.
//!
//! The [`super::scalar`] definition keeps, per output, eight f32 lanes, lane `l` accumulating
//! the sums of elements `4l..4l + 3` of each block. Here register `q` holds lane `q` of eight
//! outputs (the eight weight rows of a tile, one row of activations), so each step is one
//! instruction for eight outputs: per block and quad `q`, the weight rows' four bytes of quad
//! `q` side by side meet the activations' four bytes broadcast (`maddubs` then `madd`, exact
//! integer sums), are widened, and are added with one fused multiply-add into register `q`.
//! The lanes' final sum, `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`, is then eight
//! vector adds, and `Q4_1`'s minimums one more fused multiply-add per block, so every output
//! is the scalar definition's, bit for bit.
//!
//! The weight rows are stored one after another, so their quads are first gathered side by
//! side: for each tile of eight rows, every block is unpacked once (4-bit values to bytes,
//! 4-byte groups transposed, the f16 scales widened) into a small buffer that serves every row
//! of activations of the panel. With one row of activations (a decoding step) the unpacked
//! block stays in registers and is multiplied at once ([`tiles_one_row`]).

use super::{AHEAD_TILES, BLOCK, Chunk, Out, PANEL, QWeight};
use std::arch::x86_64::*;

/// Weight rows per tile: one per f32 lane of a 256-bit register.
const WR: usize = 8;

/// 32-byte slots per block in a tile's unpacked weights: the eight quads, the rows' scales,
/// and (`Q4_1`) their minimums.
const SLOTS: usize = 10;

/// The chunk's outputs on AVX2.
///
/// # Safety
/// The CPU must run AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn chunk(ty: QWeight, c: &Chunk<'_>, out: Out) {
    // SAFETY: the features are enabled here.
    unsafe {
        match ty {
            QWeight::Q4_1 => tiles::<true>(c, out),
            QWeight::Q8_0 => tiles::<false>(c, out),
        }
    }
}

/// Every tile of the chunk: panels of [`PANEL`] activation rows, in each the weight rows
/// [`WR`] at a time (a short tile repeats its last row, whose outputs are dropped), unpacked
/// once and then multiplied by each row of the panel. `Q4` for `Q4_1`, else `Q8_0`.
///
/// # Safety
/// AVX2, FMA and F16C must be enabled in the caller, into which this is inlined.
#[inline(always)]
unsafe fn tiles<const Q4: bool>(c: &Chunk<'_>, out: Out) {
    let nb = c.k / BLOCK;
    let bb = if Q4 { 20 } else { 34 };
    assert_eq!(c.row_bytes, nb * bb);
    assert_eq!(c.w.len(), c.rows * c.row_bytes);
    assert!(c.x.d.len() >= c.m * nb && c.x.s.len() >= c.m * nb && c.x.q.len() >= c.m * c.k);
    if c.m == 1 {
        // SAFETY: as below; one row of activations needs no buffer.
        unsafe { tiles_one_row::<Q4>(c, out) };
        return;
    }
    let mut packed = PACKED.take();
    if packed.len() < nb * SLOTS {
        packed.resize(nb * SLOTS, [0; 4]);
    }
    for i0 in (0..c.m).step_by(PANEL) {
        let i1 = (i0 + PANEL).min(c.m);
        for j0 in (0..c.rows).step_by(WR) {
            let (w, nr) = tile_rows(c, j0);
            // The rows of a tile are consecutive, so the bytes [`AHEAD_TILES`] tiles on are the
            // ones needed soon; they are fetched at the pace this tile's are unpacked.
            let ahead = w[0].wrapping_add(AHEAD_TILES * WR * c.row_bytes);
            // SAFETY: every row holds `nb` blocks of `bb` bytes (asserted above), and
            // `packed` holds `nb * SLOTS` slots.
            unsafe { unpack::<Q4>(w, nb, ahead, packed.as_mut_ptr().cast()) };
            for i in i0..i1 {
                // SAFETY: row `i < m` of the activations holds `nb` blocks (asserted above).
                let o = unsafe { row::<Q4>(packed.as_ptr().cast(), c, i, nb) };
                for (j, &v) in o.iter().enumerate().take(nr) {
                    out.write(i, j0 + j, v);
                }
            }
        }
    }
    PACKED.set(packed);
}

/// The tile of weight rows from `j0`: their starts (a short tile repeats its last row, whose
/// outputs are dropped) and how many are real.
#[inline(always)]
fn tile_rows(c: &Chunk<'_>, j0: usize) -> ([*const u8; WR], usize) {
    let nr = WR.min(c.rows - j0);
    let w = std::array::from_fn(|j| c.w[(j0 + j.min(nr - 1)) * c.row_bytes..].as_ptr());
    (w, nr)
}

thread_local! {
    /// Each thread's buffer for a tile's unpacked weights (32-byte slots as words), kept
    /// between chunks: a decoding step runs hundreds of chunks, and a fresh zeroed buffer for
    /// each cost 2% of the step.
    static PACKED: std::cell::Cell<Vec<[u64; 4]>> = const { std::cell::Cell::new(Vec::new()) };
}

/// One block of a tile's eight weight rows, unpacked: `q[k]` holds quad `k` (the values of
/// elements `4k..4k + 3`, as bytes) of rows 0 to 7 side by side, `d` the rows' scales and
/// (`Q4_1`) `m` their minimums, as f32.
#[derive(Clone, Copy)]
struct Unpacked {
    q: [__m256i; 8],
    d: __m256,
    m: __m256,
}

/// The block at `blk[r]` of each of the tile's rows, unpacked.
///
/// # Safety
/// AVX2, FMA and F16C are enabled in the caller; each `blk[r]` holds a whole block.
#[inline(always)]
unsafe fn unpack_block<const Q4: bool>(blk: [*const u8; WR]) -> Unpacked {
    // SAFETY: the caller's contract; every read is inside a block of a row.
    unsafe {
        let mut q = [_mm256_setzero_si256(); 8];
        if Q4 {
            let nibble = _mm256_set1_epi8(0x0f);
            // Rows r and r + 4 in the two halves of one register, 4-byte groups (each
            // two quads: the low and high halves of its bytes) transposed so that group
            // k of rows 0 to 3 fills the low half and of rows 4 to 7 the high one.
            let v: [__m256i; 4] = std::array::from_fn(|r| {
                _mm256_set_m128i(
                    _mm_loadu_si128(blk[r + 4].add(4).cast()),
                    _mm_loadu_si128(blk[r].add(4).cast()),
                )
            });
            for (k, g) in transpose4(v).into_iter().enumerate() {
                q[k] = _mm256_and_si256(g, nibble);
                q[k + 4] = _mm256_and_si256(_mm256_srli_epi16(g, 4), nibble);
            }
            // Each row's scale and minimum, (d, m) as two f16 in one 32-bit word.
            let dm = |r: usize| blk[r].cast::<i32>().read_unaligned();
            let lo = _mm256_cvtph_ps(_mm_set_epi32(dm(3), dm(2), dm(1), dm(0)));
            let hi = _mm256_cvtph_ps(_mm_set_epi32(dm(7), dm(6), dm(5), dm(4)));
            // [d0 d1 d4 d5 | d2 d3 d6 d7], then in row order.
            let d = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
            let m = _mm256_shuffle_ps::<0b11_01_11_01>(lo, hi);
            let order =
                |v| _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)));
            Unpacked {
                q,
                d: order(d),
                m: order(m),
            }
        } else {
            // Eight groups of four signed bytes a row: an 8 x 8 transpose of 32-bit words.
            let v: [__m256i; 8] = std::array::from_fn(|r| _mm256_loadu_si256(blk[r].add(2).cast()));
            let low = transpose4([v[0], v[1], v[2], v[3]]);
            let high = transpose4([v[4], v[5], v[6], v[7]]);
            for k in 0..4 {
                // Group k of rows 0-3 and 4-7 in the low halves, group k + 4 in the high.
                let (a, b) = (low[k], high[k]);
                q[k] = _mm256_permute2x128_si256::<0x20>(a, b);
                q[k + 4] = _mm256_permute2x128_si256::<0x31>(a, b);
            }
            let d = |r: usize| blk[r].cast::<i16>().read_unaligned();
            let scales = _mm_set_epi16(d(7), d(6), d(5), d(4), d(3), d(2), d(1), d(0));
            Unpacked {
                q,
                d: _mm256_cvtph_ps(scales),
                m: _mm256_setzero_ps(),
            }
        }
    }
}

/// Unpacks the blocks of the tile's rows `w` into `packed`: per block, slot `q < 8` holds
/// quad `q` of [`Unpacked`], slot 8 the rows' scales and slot 9 (`Q4_1`) their minimums.
///
/// # Safety
/// AVX2, FMA and F16C are enabled in the caller; each `w[r]` holds `nb` blocks; `packed`
/// holds `nb * SLOTS` slots.
#[inline(always)]
unsafe fn unpack<const Q4: bool>(
    w: [*const u8; WR],
    nb: usize,
    ahead: *const u8,
    packed: *mut __m256i,
) {
    let bb = if Q4 { 20 } else { 34 };
    // SAFETY: the caller's contract; every read is inside a block of a row.
    unsafe {
        for b in 0..nb {
            prefetch(ahead, WR * bb * b, bb);
            let u = unpack_block::<Q4>(std::array::from_fn(|r| w[r].add(b * bb)));
            let dst = packed.add(b * SLOTS);
            for (k, q) in u.q.iter().enumerate() {
                _mm256_storeu_si256(dst.add(k), *q);
            }
            _mm256_storeu_si256(dst.add(8), _mm256_castps_si256(u.d));
            if Q4 {
                _mm256_storeu_si256(dst.add(9), _mm256_castps_si256(u.m));
            }
        }
    }
}

/// Fetches the lines of one block of the tile [`AHEAD_TILES`] on (`at` bytes into it).
///
/// # Safety
/// None beyond the caller's SSE, which every x86-64 CPU has: a prefetch reads nothing.
#[inline(always)]
unsafe fn prefetch(ahead: *const u8, at: usize, bb: usize) {
    for line in (0..WR * bb).step_by(64) {
        // SAFETY: a prefetch of any address is harmless; it is only computed.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(at + line).cast()) };
    }
}

/// The chunk's outputs for one row of activations (a decoding step): each block of a tile's
/// rows is unpacked into registers and multiplied at once, where [`tiles`] keeps it in a
/// buffer for the panel's other rows. The same operations on the same values, so the same
/// bits; about a fifth fewer instructions (no stores and loads of the unpacked block), which
/// is what a decoding step's products are bound by.
///
/// # Safety
/// AVX2, FMA and F16C must be enabled in the caller, into which this is inlined; `c` is as
/// [`tiles`] asserted.
#[inline(always)]
unsafe fn tiles_one_row<const Q4: bool>(c: &Chunk<'_>, out: Out) {
    let nb = c.k / BLOCK;
    let bb = if Q4 { 20 } else { 34 };
    for j0 in (0..c.rows).step_by(WR) {
        let (w, nr) = tile_rows(c, j0);
        let ahead = w[0].wrapping_add(AHEAD_TILES * WR * c.row_bytes);
        // SAFETY: the features are enabled in the caller.
        let mut sums = unsafe { Sums::new() };
        for b in 0..nb {
            // SAFETY: every row holds `nb` blocks of `bb` bytes, and row 0 of the
            // activations holds `nb` blocks (both asserted by `tiles`).
            unsafe {
                prefetch(ahead, WR * bb * b, bb);
                let u = unpack_block::<Q4>(std::array::from_fn(|r| w[r].add(b * bb)));
                sums.add::<Q4>(&u, c, 0, b);
            }
        }
        // SAFETY: the features are enabled in the caller.
        let o = unsafe { sums.finish() };
        for (j, &v) in o.iter().enumerate().take(nr) {
            out.write(0, j0 + j, v);
        }
    }
}

/// A transpose of 32-bit words within each 128-bit half: word k of `v[r]`'s half becomes
/// word r of the result k's half.
#[inline(always)]
unsafe fn transpose4(v: [__m256i; 4]) -> [__m256i; 4] {
    // SAFETY: the caller enables AVX2.
    unsafe {
        let t0 = _mm256_unpacklo_epi32(v[0], v[1]);
        let t1 = _mm256_unpackhi_epi32(v[0], v[1]);
        let t2 = _mm256_unpacklo_epi32(v[2], v[3]);
        let t3 = _mm256_unpackhi_epi32(v[2], v[3]);
        [
            _mm256_unpacklo_epi64(t0, t2),
            _mm256_unpackhi_epi64(t0, t2),
            _mm256_unpacklo_epi64(t1, t3),
            _mm256_unpackhi_epi64(t1, t3),
        ]
    }
}

/// Activation row `i` times the tile unpacked in `packed`: the eight weight rows' outputs.
///
/// # Safety
/// AVX2, FMA and F16C are enabled in the caller; `packed` holds `nb` unpacked blocks; row
/// `i` of `c.x` holds `nb` blocks.
#[inline(always)]
unsafe fn row<const Q4: bool>(
    packed: *const __m256i,
    c: &Chunk<'_>,
    i: usize,
    nb: usize,
) -> [f32; WR] {
    // SAFETY: the caller's contract.
    unsafe {
        let mut sums = Sums::new();
        for b in 0..nb {
            let src = packed.add(b * SLOTS);
            let u = Unpacked {
                q: std::array::from_fn(|k| _mm256_loadu_si256(src.add(k))),
                d: _mm256_castsi256_ps(_mm256_loadu_si256(src.add(8))),
                m: if Q4 {
                    _mm256_castsi256_ps(_mm256_loadu_si256(src.add(9)))
                } else {
                    _mm256_setzero_ps()
                },
            };
            sums.add::<Q4>(&u, c, i, b);
        }
        sums.finish()
    }
}

/// The running sums of one activation row against a tile's eight weight rows: lane `q`'s
/// sums (of elements `4q..4q + 3` of each block) for the eight rows in `acc[q]`, and `Q4_1`'s
/// minimum terms in `mins`.
struct Sums {
    acc: [__m256; 8],
    mins: __m256,
}

impl Sums {
    /// All zero.
    #[inline(always)]
    unsafe fn new() -> Self {
        // SAFETY: the caller enables AVX.
        unsafe {
            Sums {
                acc: [_mm256_setzero_ps(); 8],
                mins: _mm256_setzero_ps(),
            }
        }
    }

    /// Adds block `b` of activation row `i` times the unpacked block `u`.
    ///
    /// # Safety
    /// AVX2, FMA and F16C are enabled in the caller; row `i` of `c.x` holds block `b`.
    #[inline(always)]
    unsafe fn add<const Q4: bool>(&mut self, u: &Unpacked, c: &Chunk<'_>, i: usize, b: usize) {
        let nb = c.k / BLOCK;
        // SAFETY: the caller's contract.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            // The scalar definition's `d_w · d_x`, per weight row.
            let d = _mm256_mul_ps(u.d, _mm256_broadcast_ss(&*c.x.d.as_ptr().add(i * nb + b)));
            let quads = c.x.q.as_ptr().add(i * c.k + b * BLOCK).cast::<i32>();
            for (q, acc) in self.acc.iter_mut().enumerate() {
                let x = _mm256_set1_epi32(quads.add(q).read_unaligned());
                let w = u.q[q];
                // Unsigned bytes times signed ones: Q4_1's values are 0..15 as they are;
                // Q8_0's signs move onto the activations. A pair is at most 2 · 128 · 127.
                let (wu, xs) = if Q4 {
                    (w, x)
                } else {
                    (_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w))
                };
                let sums = _mm256_madd_epi16(_mm256_maddubs_epi16(wu, xs), ones);
                *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *acc);
            }
            if Q4 {
                let xs = _mm256_broadcast_ss(&*c.x.s.as_ptr().add(i * nb + b));
                self.mins = _mm256_fmadd_ps(u.m, xs, self.mins);
            }
        }
    }

    /// The eight outputs: the lanes' sum `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 +
    /// l7))`, plus the minimum terms.
    #[inline(always)]
    unsafe fn finish(&self) -> [f32; WR] {
        let a = &self.acc;
        // SAFETY: the caller enables AVX.
        unsafe {
            let sum = _mm256_add_ps(
                _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6])),
                _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7])),
            );
            let mut o = [0.0f32; WR];
            _mm256_storeu_ps(o.as_mut_ptr(), _mm256_add_ps(sum, self.mins));
            o
        }
    }
}
