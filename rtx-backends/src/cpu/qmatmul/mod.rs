//! Products of f32 activations with ggml-quantized weights (`Q8_0`, `Q4_1`) on the CPU that
//! never dequantize a weight: as llama.cpp does, each row of activations is quantized to 8
//! bits per 32-value block on the fly ([`quantize`]), and each block pair costs one integer
//! dot product of 32 bytes and one or two fused multiply-adds in f32.
//!
//! The weight is `[N, K]` in ggml's layout (each of the N rows is K values stored as K/32
//! blocks); the product is `x · Wᵀ` for `x` `[M, K]`, as a Linear computes it. M = 1 is a
//! decoding step (a vector times the matrix), larger M a prefill. Both run as a matrix
//! product of register tiles: up to [`MR`] rows of activations by [`NR`] weight rows, so each
//! weight block loaded (and unpacked) serves up to four activation rows, and each activation
//! block up to four weight rows. Parallel tasks own runs of weight rows.
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

use rayon::prelude::*;
use rtx_kernels::f16;

/// Values per quantized block.
pub const BLOCK: usize = 32;

/// Rows of activations per register tile.
pub const MR: usize = 4;

/// Weight rows per register tile.
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

/// Rows of activations one task takes at a time: with K = 1536 they are 96 KiB of bytes,
/// which stay in L2 while the task's weight rows pass over them.
const PANEL: usize = 64;

/// Most weight rows per parallel task (with K = 1536, 60 KiB of `Q4_1`).
const MAX_TASK_ROWS: usize = 64;

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
    if m == 0 || n == 0 {
        return vec![0.0; m * n];
    }
    let xq = quantize_rows(x, k);
    let nb = k / BLOCK;
    let xrow = |i: usize| Row {
        d: &xq.d[i * nb..(i + 1) * nb],
        s: &xq.s[i * nb..(i + 1) * nb],
        q: &xq.q[i * k..(i + 1) * k],
    };
    let wrow = |j: usize| &w[j * row_bytes..(j + 1) * row_bytes];
    // About four tasks a thread, so that uneven progress evens out.
    let per_task = n
        .div_ceil(4 * rayon::current_num_threads())
        .next_multiple_of(NR)
        .clamp(NR, MAX_TASK_ROWS);
    // Each task's outputs, row-major over its own columns, then copied into place.
    let parts: Vec<Vec<f32>> = (0..n.div_ceil(per_task))
        .into_par_iter()
        .map(|t| {
            let first = t * per_task;
            let cols = per_task.min(n - first);
            let mut part = vec![0.0f32; m * cols];
            for i0 in (0..m).step_by(PANEL) {
                let i1 = (i0 + PANEL).min(m);
                for j0 in (0..cols).step_by(NR) {
                    let nr = NR.min(cols - j0);
                    // A short tile repeats its last row; the repeats' outputs are dropped.
                    let w = std::array::from_fn(|j| wrow(first + j0 + j.min(nr - 1)));
                    for i in (i0..i1).step_by(MR) {
                        let mr = MR.min(i1 - i);
                        let x = std::array::from_fn(|r| xrow(i + r.min(mr - 1)));
                        let mut o = [[0.0f32; NR]; MR];
                        run_tile(isa, ty, &Tile { w, x, mr }, &mut o);
                        for (r, o) in o.iter().enumerate().take(mr) {
                            part[(i + r) * cols + j0..][..nr].copy_from_slice(&o[..nr]);
                        }
                    }
                }
            }
            part
        })
        .collect();
    let mut out = vec![0.0f32; m * n];
    for (t, part) in parts.iter().enumerate() {
        let cols = part.len() / m;
        for (i, r) in part.chunks_exact(cols).enumerate() {
            out[i * n + t * per_task..][..cols].copy_from_slice(r);
        }
    }
    out
}

/// One row of quantized activations: per block its scale and sum, and the values.
#[derive(Clone, Copy)]
pub(crate) struct Row<'a> {
    d: &'a [f32],
    s: &'a [f32],
    q: &'a [i8],
}

/// A register tile: [`NR`] raw weight rows and [`MR`] rows of activations, of which the first
/// `mr` are wanted.
pub(crate) struct Tile<'a> {
    w: [&'a [u8]; NR],
    x: [Row<'a>; MR],
    mr: usize,
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

/// The tile's `[mr, NR]` outputs into `out` on the chosen copy.
fn run_tile(isa: Isa, ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
    match isa {
        // SAFETY (all three): `qmatmul_on` checked that the CPU runs the copy.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => unsafe { avx512::tile_vnni(ty, t, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::tile_bw(ty, t, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::tile(ty, t, out) },
        _ => scalar::tile(ty, t, out),
    }
}

/// A block's little-endian f16 scale, widened exactly.
#[inline(always)]
fn scale(lo: u8, hi: u8) -> f32 {
    f16::from_bits(u16::from_le_bytes([lo, hi])).to_f32()
}

#[cfg(test)]
mod tests;
