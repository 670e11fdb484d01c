//! Attention on the CPU in one pass per batch element: for each head, the scores `q kᵀ` of
//! one `[T, S]` tile, their softmax in place and the product with `v`, all while the tile is
//! in cache, instead of three passes over a `[B, H, T, S]` tensor in memory. The output is
//! written `[B, T, H, Dh]` (heads side by side), which is the order the output projection
//! reads, so putting the heads back together copies nothing.
//!
//! Deterministic: each batch element is one task, and every row is computed in a fixed order.

use super::matmul::{MatRef, gemm_into};
use crate::Layout;
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
    let one = |bi: usize, ob: &mut [E]| {
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
            softmax_rows(&mut scores, s, scale, &skip);
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
    };
    // A decoding step's attention (one query row per head over a few hundred keys) is a few
    // microseconds of work, less than handing it to the pool costs; each batch element's
    // result is the same on any thread, so this moves only time.
    if b * h * t * s * dh <= SERIAL_WORK {
        for (bi, ob) in out.chunks_mut(t * h * dh).enumerate() {
            one(bi, ob);
        }
    } else {
        super::for_chunks_mut(&mut out, t * h * dh, &one);
    }
    out
}

/// Multiply-adds of `q kᵀ` (`B H T S Dh`) up to which the batch elements run on the calling
/// thread.
const SERIAL_WORK: usize = 1 << 20;

/// Every `s`-long row of `scores` scaled, masked and turned into probabilities in place,
/// compiled for AVX-512 or AVX2 where the CPU has it (the exponential is plain arithmetic, so the loops
/// vectorize at the full width; only `+ - * /`, comparisons and bit operations are used, so
/// the results are the same bits at every width).
fn softmax_rows<E: Float>(scores: &mut [E], s: usize, scale: E::Acc, skip: &[bool]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F, checked just above.
        return unsafe { softmax_rows_avx512(scores, s, scale, skip) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { softmax_rows_avx2(scores, s, scale, skip) };
    }
    for row in scores.chunks_mut(s) {
        softmax_row(row, scale, skip);
    }
}

/// [`softmax_rows`] compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn softmax_rows_avx2<E: Float>(scores: &mut [E], s: usize, scale: E::Acc, skip: &[bool]) {
    for row in scores.chunks_mut(s) {
        softmax_row(row, scale, skip);
    }
}

/// [`softmax_rows`] compiled with AVX-512F enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn softmax_rows_avx512<E: Float>(scores: &mut [E], s: usize, scale: E::Acc, skip: &[bool]) {
    for row in scores.chunks_mut(s) {
        softmax_row(row, scale, skip);
    }
}

/// Lanes of the row's maximum and sum: independent partial results, so the loops run as SIMD
/// rather than as one chain of dependent operations.
const LANES: usize = 16;

/// One row of scores scaled, masked and turned into probabilities in place.
#[inline(always)]
fn softmax_row<E: Float>(row: &mut [E], scale: E::Acc, skip: &[bool]) {
    let neg_inf = E::Acc::c(f64::NEG_INFINITY);
    for x in row.iter_mut() {
        *x = E::from_acc(x.to_acc() * scale);
    }
    for (x, _) in row.iter_mut().zip(skip).filter(|(_, s)| **s) {
        *x = E::from_acc(neg_inf);
    }
    let mut lanes = [neg_inf; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, x) in lanes.iter_mut().zip(c) {
            *m = m.max(x.to_acc());
        }
    }
    let m = chunks
        .remainder()
        .iter()
        .fold(neg_inf, |m, x| m.max(x.to_acc()));
    let m = lanes.iter().fold(m, |a, &b| a.max(b));
    let mut lanes = [E::Acc::c(0.0); LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (s, x) in lanes.iter_mut().zip(c.iter_mut()) {
            let e = (x.to_acc() - m).exp();
            *x = E::from_acc(e);
            *s = *s + e;
        }
    }
    let mut sum = E::Acc::c(0.0);
    for x in chunks.into_remainder() {
        let e = (x.to_acc() - m).exp();
        *x = E::from_acc(e);
        sum = sum + e;
    }
    let sum = lanes.iter().fold(sum, |a, &b| a + b);
    let inv = E::Acc::c(1.0) / sum;
    for x in row.iter_mut() {
        *x = E::from_acc(x.to_acc() * inv);
    }
}
