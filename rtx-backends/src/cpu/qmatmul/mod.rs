//! Products of f32 activations with ggml-quantized weights (`Q8_0`, `Q4_1`) on the CPU that
//! never dequantize a weight: as llama.cpp does, each row of activations is quantized to 8
//! bits per 32-value block on the fly ([`quantize`]), and each block pair costs one integer
//! dot product of 32 bytes and one or two fused multiply-adds in f32.
//!
//! The weight is `[N, K]` in ggml's layout (each of the N rows is K values stored as K/32
//! blocks); the product is `x · Wᵀ` for `x` `[M, K]`, as a Linear computes it. M = 1 is a
//! decoding step (a vector times the matrix), larger M a prefill. Both run as a matrix
//! product of register tiles: on AVX-512 and the baseline up to [`MR`] rows of activations by
//! [`NR`] weight rows, so each weight block loaded (and unpacked) serves up to eight
//! activation rows, and each activation block up to four weight rows; on AVX2 eight weight
//! rows, unpacked once per panel of activation rows into a layout with one f32 lane per
//! weight row (`avx2.rs`; for a single row, into registers only). Parallel chunks own runs of weight rows, and each copy of the loops
//! ([`Isa`]) runs a whole chunk, its loops over tiles compiled with its target features around
//! the inlined tile.
//!
//! Invariant: every output is the sum the `scalar` module defines, llama.cpp's, in the same f32
//! operations in the same order on every copy of the loops ([`Isa`]), so the results depend
//! neither on the instruction set nor on the thread count nor on where a tile falls: the
//! integer sums are exact, and each copy computes the same lanes.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod quantize;
mod scalar;

pub use quantize::{QActivations, quantize_rows};

use super::SharedMut;
use rtx_kernels::f16;

/// Values per quantized block.
pub const BLOCK: usize = 32;

/// Rows of activations per register tile of the AVX-512 copies and the baseline (32
/// registers hold the AVX-512 sums of 8 rows, and each weight block unpacked serves all 8).
pub const MR: usize = 8;

/// Weight rows per register tile of the AVX-512 copies and the baseline.
pub const NR: usize = 4;

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

/// Which copy of the loops runs: the widest the CPU has by default ([`Isa::best`]); tests run
/// every copy the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// 512-bit registers holding two weight rows' lanes, with VNNI's byte dot product.
    Avx512Vnni,
    /// 512-bit registers holding two weight rows' lanes, with AVX-512BW's byte products.
    Avx512,
    /// AVX2's byte products (`maddubs`), FMA, and F16C for the scales.
    Avx2,
    /// The baseline target.
    Baseline,
}

impl Isa {
    /// Every copy, widest first.
    pub const ALL: [Isa; 4] = [Isa::Avx512Vnni, Isa::Avx512, Isa::Avx2, Isa::Baseline];

    /// The widest copy this CPU runs.
    pub fn best() -> Isa {
        Isa::ALL
            .into_iter()
            .find(|i| i.available())
            .unwrap_or(Isa::Baseline)
    }

    /// Whether this CPU runs this copy.
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            let avx512 = avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl");
            match self {
                Isa::Avx512Vnni => avx512 && has!("avx512vnni"),
                Isa::Avx512 => avx512,
                Isa::Avx2 => avx2,
                Isa::Baseline => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Isa::Baseline
        }
    }
}

/// `x · Wᵀ` for `x` `[m, k]` (f32, row-major) and the quantized weight `w` `[n, k]` of type
/// `ty`, as a dense `[m, n]` f32 vector, on the widest copy of the loops this CPU runs.
pub fn qmatmul(w: &[u8], ty: QWeight, n: usize, k: usize, x: &[f32], m: usize) -> Vec<f32> {
    qmatmul_on(Isa::best(), w, ty, n, k, x, m)
}

/// One weight of [`qmatmul_each`]: its raw blocks, type and row count.
#[derive(Clone, Copy, Debug)]
pub struct QPart<'a> {
    /// The `[n, k]` weight's blocks, row by row.
    pub w: &'a [u8],
    /// Its block type.
    pub ty: QWeight,
    /// Its rows.
    pub n: usize,
}

/// [`qmatmul`] of one `x` with each of several weights of the same `k` (a layer's query, key
/// and value projections, say): `x` is quantized once, and the weights' rows are shared out
/// as one pass, so the threads meet once instead of once per weight. Each result is the one
/// [`qmatmul`] gives for its weight, bit for bit.
pub fn qmatmul_each(parts: &[QPart<'_>], k: usize, x: &[f32], m: usize) -> Vec<Vec<f32>> {
    qmatmul_each_on(Isa::best(), parts, k, x, m)
}

/// Rows of activations one tile loop takes at a time: with K = 1536 they are 96 KiB of bytes,
/// which stay in L2 while the chunk's weight rows pass over them.
const PANEL: usize = 64;

/// Most weight rows per chunk (with K = 1536, 60 KiB of `Q4_1`).
const MAX_CHUNK_ROWS: usize = 64;

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
    let mut out = qmatmul_each_on(isa, &[QPart { w, ty, n }], k, x, m);
    out.pop().expect("one part")
}

/// [`qmatmul_each`] on a chosen copy of the loops (which must be [`Isa::available`]).
pub fn qmatmul_each_on(
    isa: Isa,
    parts: &[QPart<'_>],
    k: usize,
    x: &[f32],
    m: usize,
) -> Vec<Vec<f32>> {
    assert!(isa.available(), "qmatmul: this CPU does not run {isa:?}");
    assert!(
        k.is_multiple_of(BLOCK),
        "qmatmul: K = {k} is not a multiple of {BLOCK}"
    );
    for p in parts {
        assert_eq!(
            p.w.len(),
            p.n * (k / BLOCK * p.ty.block_bytes()),
            "qmatmul: the weight is not [{}, {k}] of {:?}",
            p.n,
            p.ty
        );
    }
    assert_eq!(
        x.len(),
        m * k,
        "qmatmul: the activations are not [{m}, {k}]"
    );
    let mut outs: Vec<Vec<f32>> = parts.iter().map(|p| vec![0.0f32; m * p.n]).collect();
    let total: usize = parts.iter().map(|p| p.n).sum();
    if m == 0 || total == 0 {
        return outs;
    }
    let xq = quantize_rows(x, k);
    // About eight chunks a thread, handed out as threads free up, so that a thread that
    // starts late (or shares its core) evens out; at least a tile's worth of rows each. A
    // chunk lies in one weight: (weight, first row, rows). A multiple of 8 rows, the AVX2
    // copy's tile (twice the others').
    let per_chunk = total
        .div_ceil(8 * rayon::current_num_threads())
        .next_multiple_of(2 * NR)
        .clamp(2 * NR, MAX_CHUNK_ROWS);
    let chunks: Vec<(usize, usize, usize)> = parts
        .iter()
        .enumerate()
        .flat_map(|(p, part)| {
            (0..part.n)
                .step_by(per_chunk)
                .map(move |first| (p, first, per_chunk.min(part.n - first)))
        })
        .collect();
    let dst: Vec<SharedMut<f32>> = outs.iter_mut().map(|o| SharedMut(o.as_mut_ptr())).collect();
    super::parallel_for_dynamic(chunks.len(), &|c| {
        let (p, first, rows) = chunks[c];
        let part = &parts[p];
        let row_bytes = k / BLOCK * part.ty.block_bytes();
        let chunk = Chunk {
            w: &part.w[first * row_bytes..(first + rows) * row_bytes],
            rows,
            row_bytes,
            x: &xq,
            m,
            k,
        };
        // SAFETY: the chunk writes columns `first..first + rows` of weight `p`'s `[m, n]`
        // output alone, and the outputs outlive the call.
        let out = unsafe { Out::new(dst[p].ptr().add(first), part.n) };
        run_chunk(isa, part.ty, &chunk, out);
    });
    outs
}

/// The weight rows of one parallel chunk, whole, and every row of the activations.
pub(crate) struct Chunk<'a> {
    w: &'a [u8],
    rows: usize,
    row_bytes: usize,
    x: &'a QActivations,
    m: usize,
    k: usize,
}

/// Where a chunk's outputs go: row `i`, column `j` (counted from the chunk's first weight row)
/// at `ptr + i * ld + j`.
#[derive(Clone, Copy)]
pub(crate) struct Out {
    ptr: *mut f32,
    ld: usize,
}

impl Out {
    /// The outputs at `ptr` with row stride `ld`.
    ///
    /// # Safety
    /// For every activation row `i` and weight row `j` of the chunk it is used for, `ptr + i *
    /// ld + j` is valid for writes, and written by nothing else during the call.
    unsafe fn new(ptr: *mut f32, ld: usize) -> Out {
        Out { ptr, ld }
    }

    /// Writes output `[i, j]`.
    #[inline(always)]
    fn write(self, i: usize, j: usize, v: f32) {
        // SAFETY: the contract of `Out::new`, for the chunk whose tiles call this.
        unsafe { self.ptr.add(i * self.ld + j).write(v) }
    }
}

/// One row of quantized activations: per block its scale and sum, and the values.
#[derive(Clone, Copy)]
pub(crate) struct Row<'a> {
    d: &'a [f32],
    s: &'a [f32],
    q: &'a [i8],
}

/// A register tile: [`NR`] raw weight rows and [`MR`] rows of activations, of which the first
/// `mr` are wanted, and the address the copies prefetch from as they go (see [`ahead`]).
pub(crate) struct Tile<'a> {
    w: [&'a [u8]; NR],
    x: [Row<'a>; MR],
    mr: usize,
    ahead: *const u8,
}

impl Tile<'_> {
    /// Panics unless every row has the same whole number of blocks, which the SIMD copies'
    /// unchecked loads rely on; returns that number.
    #[inline(always)]
    fn blocks(&self, ty: QWeight) -> usize {
        let nb = self.x[0].d.len();
        for x in &self.x {
            assert!(x.d.len() == nb && x.s.len() == nb && x.q.len() == nb * BLOCK);
        }
        for w in &self.w {
            assert_eq!(w.len(), nb * ty.block_bytes());
        }
        assert!((1..=MR).contains(&self.mr));
        nb
    }
}

/// Where the copies prefetch from while they read the tile at `first_row`: [`AHEAD_TILES`]
/// tiles further on. A decoding step reads each weight once, from memory, and a tile's rows
/// are short (a few hundred bytes each), too short for the hardware prefetcher to get going
/// on each of the four streams; the tiles of a chunk are consecutive rows, so the bytes a few
/// tiles on are the ones needed soon. The address may lie past the weight (a prefetch of
/// any address is harmless; it is only computed, with `wrapping_add`, never read).
#[inline(always)]
fn ahead(first_row: *const u8, row_bytes: usize) -> *const u8 {
    first_row.wrapping_add(AHEAD_TILES * NR * row_bytes)
}

/// Tiles between the one read and the one prefetched: measured on SmolLM2's products at one
/// activation row, 2 left a third of the single-thread time on the table against 4 to 8.
const AHEAD_TILES: usize = 4;

/// A copy of the register tile, the body of [`for_tiles`].
pub(crate) trait TileKernel {
    /// The tile's `[mr, NR]` outputs into `out`.
    ///
    /// # Safety
    /// The CPU runs the copy's instructions (which the caller's target features enable).
    unsafe fn tile(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]);
}

/// Every tile of a chunk through `K`: panels of [`PANEL`] activation rows, in each the weight
/// rows [`NR`] at a time, each against the panel's rows [`MR`] at a time (a short tile repeats
/// its last row; the repeats' outputs are dropped). Inlined into each copy's chunk function,
/// so the loops are compiled with its target features and the tile body inlined in them.
///
/// # Safety
/// As [`TileKernel::tile`] for `K`.
#[inline(always)]
pub(crate) unsafe fn for_tiles<K: TileKernel>(ty: QWeight, c: &Chunk<'_>, out: Out) {
    let nb = c.k / BLOCK;
    let xrow = |i: usize| Row {
        d: &c.x.d[i * nb..(i + 1) * nb],
        s: &c.x.s[i * nb..(i + 1) * nb],
        q: &c.x.q[i * c.k..(i + 1) * c.k],
    };
    let wrow = |j: usize| &c.w[j * c.row_bytes..(j + 1) * c.row_bytes];
    for i0 in (0..c.m).step_by(PANEL) {
        let i1 = (i0 + PANEL).min(c.m);
        // The panel's rows sliced once, not once per tile: `array::from_fn` over the slicing
        // closure was a call per row per tile, 5% of a prefill.
        let panel: Vec<Row<'_>> = (i0..i1).map(xrow).collect();
        for j0 in (0..c.rows).step_by(NR) {
            let nr = NR.min(c.rows - j0);
            let w: [&[u8]; NR] = std::array::from_fn(|j| wrow(j0 + j.min(nr - 1)));
            let ahead = ahead(w[0].as_ptr(), c.row_bytes);
            for i in (i0..i1).step_by(MR) {
                let mr = MR.min(i1 - i);
                let rows = &panel[i - i0..i - i0 + mr];
                let mut x = [rows[mr - 1]; MR];
                for (x, r) in x.iter_mut().zip(rows) {
                    *x = *r;
                }
                let mut o = [[0.0f32; NR]; MR];
                // SAFETY: the caller's contract.
                unsafe { K::tile(ty, &Tile { w, x, mr, ahead }, &mut o) };
                for (r, o) in o.iter().enumerate().take(mr) {
                    for (j, &v) in o.iter().enumerate().take(nr) {
                        out.write(i + r, j0 + j, v);
                    }
                }
            }
        }
    }
}

/// The chunk's outputs on the chosen copy.
fn run_chunk(isa: Isa, ty: QWeight, c: &Chunk<'_>, out: Out) {
    match isa {
        // SAFETY (all three): `qmatmul_on` checked that the CPU runs the copy.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => unsafe { avx512::chunk_vnni(ty, c, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::chunk_bw(ty, c, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::chunk(ty, c, out) },
        // SAFETY: the baseline copy needs nothing.
        _ => unsafe { for_tiles::<scalar::Scalar>(ty, c, out) },
    }
}

/// A block's little-endian f16 scale, widened exactly.
#[inline(always)]
fn scale(lo: u8, hi: u8) -> f32 {
    f16::from_bits(u16::from_le_bytes([lo, hi])).to_f32()
}

#[cfg(test)]
mod tests;
