//! Attention on the CPU in one pass per batch element: for each head, the scores `q kᵀ` of
//! one `[T, S]` tile, their softmax in place and the product with `v`, all while the tile is
//! in cache, instead of three passes over a `[B, H, T, S]` tensor in memory. The output is
//! written `[B, T, H, Dh]` (heads side by side), which is the order the output projection
//! reads, so putting the heads back together copies nothing.
//!
//! Deterministic: each batch element is one task, and every row is computed in a fixed order.

use super::matmul::{MatRef, gemm_into};
use crate::Layout;
use rayon::prelude::*;
use rtx_kernels::{Float, FloatMath};

/// `softmax(q kᵀ · scale, keys where `padding` holds left out) · v` for `q` `[B, H, T, Dh]`
/// and `k`, `v` `[B, H, S, Dh]` (any strides), `padding` `[B, S]` (true for a padded key), as
/// a dense `[B, T, H, Dh]` vector. A row whose keys are all padding gives NaN, as the
/// composition does.
pub fn attention<E: Float>(
    (q, ql): (&[E], &Layout),
    (k, kl): (&[E], &Layout),
    (v, vl): (&[E], &Layout),
    padding: Option<(&[bool], &Layout)>,
    scale: f64,
) -> Vec<E> {
    let [b, h, t, dh] = [0, 1, 2, 3].map(|i| ql.dims()[i]);
    let s = kl.dims()[2];
    let (qs, ks, vs) = (ql.strides(), kl.strides(), vl.strides());
    let mut out = vec![E::ZERO; b * t * h * dh];
    if out.is_empty() {
        return out;
    }
    let scale = E::Acc::c(scale);
    out.par_chunks_mut(t * h * dh)
        .enumerate()
        .for_each(|(bi, ob)| {
            let mut scores = vec![E::ZERO; t * s];
            let mut head = vec![E::ZERO; t * dh];
            let skip: Vec<bool> = match padding {
                Some((p, pl)) => {
                    let (rs, cs) = (pl.strides()[0], pl.strides()[1]);
                    (0..s).map(|j| p[pl.offset() + bi * rs + j * cs]).collect()
                }
                None => Vec::new(),
            };
            for hi in 0..h {
                let at = |l: &Layout, st: &[usize]| l.offset() + bi * st[0] + hi * st[1];
                let qm = MatRef {
                    data: q,
                    offset: at(ql, qs),
                    rs: qs[2],
                    cs: qs[3],
                };
                // kᵀ: rows over the head's features, columns over the keys.
                let kt = MatRef {
                    data: k,
                    offset: at(kl, ks),
                    rs: ks[3],
                    cs: ks[2],
                };
                gemm_into((t, s, dh), &mut scores, qm, kt, false, false);
                for row in scores.chunks_mut(s) {
                    softmax_row(row, scale, &skip);
                }
                let sm = MatRef::row_major(&scores, s);
                let vm = MatRef {
                    data: v,
                    offset: at(vl, vs),
                    rs: vs[2],
                    cs: vs[3],
                };
                gemm_into((t, dh, s), &mut head, sm, vm, false, false);
                for (ti, src) in head.chunks(dh).enumerate() {
                    ob[(ti * h + hi) * dh..][..dh].copy_from_slice(src);
                }
            }
        });
    out
}

/// One row of scores scaled, masked and turned into probabilities in place. Each step is a
/// plain map over the row, which the compiler vectorizes (the exponential included).
fn softmax_row<E: Float>(row: &mut [E], scale: E::Acc, skip: &[bool]) {
    let neg_inf = E::Acc::c(f64::NEG_INFINITY);
    for x in row.iter_mut() {
        *x = E::from_acc(x.to_acc() * scale);
    }
    for (x, _) in row.iter_mut().zip(skip).filter(|(_, s)| **s) {
        *x = E::from_acc(neg_inf);
    }
    let m = row.iter().fold(neg_inf, |m, x| m.max(x.to_acc()));
    for x in row.iter_mut() {
        *x = E::from_acc((x.to_acc() - m).exp());
    }
    let sum = row.iter().fold(E::Acc::c(0.0), |s, x| s + x.to_acc());
    let inv = E::Acc::c(1.0) / sum;
    for x in row.iter_mut() {
        *x = E::from_acc(x.to_acc() * inv);
    }
}
