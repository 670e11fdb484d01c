//! The baseline copy of the tile, and the definition every other copy reproduces bit for bit:
//! per output, eight f32 lanes (lane l takes elements 4l to 4l + 3 of each block) each
//! accumulate `fma(d_w d_x, Σ q_w q_x, acc)` block by block, the lanes are added as
//! `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`, and `Q4_1` adds its minimums' sum,
//! `fma(m_w, s_x, sum)` block by block. That is the order of llama.cpp's AVX2 dot products.

use super::{BLOCK, MR, NR, QWeight, Row, Tile, TileKernel, scale};

/// Lanes of a block's partial sums.
const LANES: usize = 8;

/// The baseline tile.
pub(super) struct Scalar;

impl TileKernel for Scalar {
    unsafe fn tile(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
        tile(ty, t, out);
    }
}

/// The tile's products, one output at a time.
pub(super) fn tile(ty: QWeight, t: &Tile<'_>, out: &mut [[f32; NR]; MR]) {
    for (o, x) in out.iter_mut().zip(&t.x).take(t.mr) {
        for (o, w) in o.iter_mut().zip(&t.w) {
            *o = dot(ty, w, x);
        }
    }
}

/// One weight row (raw blocks) times one row of quantized activations.
pub(super) fn dot(ty: QWeight, w: &[u8], x: &Row<'_>) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut mins = 0.0f32;
    let blocks = w
        .chunks_exact(ty.block_bytes())
        .zip(x.q.chunks_exact(BLOCK));
    for (b, (blk, xq)) in blocks.enumerate() {
        let mut wq = [0i8; BLOCK];
        match ty {
            QWeight::Q8_0 => {
                for (v, &p) in wq.iter_mut().zip(&blk[2..34]) {
                    *v = p as i8;
                }
            }
            QWeight::Q4_1 => {
                let (lo, hi) = wq.split_at_mut(16);
                for ((l, h), &p) in lo.iter_mut().zip(hi).zip(&blk[4..20]) {
                    *l = (p & 0x0f) as i8;
                    *h = (p >> 4) as i8;
                }
                mins = scale(blk[2], blk[3]).mul_add(x.s[b], mins);
            }
        }
        let d = scale(blk[0], blk[1]) * x.d[b];
        for (l, a) in acc.iter_mut().enumerate() {
            let sum: i32 = (4 * l..4 * l + 4)
                .map(|e| i32::from(wq[e]) * i32::from(xq[e]))
                .sum();
            *a = d.mul_add(sum as f32, *a);
        }
    }
    lanes_sum(&acc) + mins
}

/// The eight lanes added in the fixed order.
#[inline(always)]
pub(super) fn lanes_sum(a: &[f32; LANES]) -> f32 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}
