//! Attention on the CPU in one pass: for each head and each tile of query rows, the scores
//! `q kᵀ` of one tile, their softmax in place and the product with `v`, all while the tile is
//! in cache, instead of three passes over a `[B, H, T, S]` tensor in memory. The output is
//! written `[B, T, H, Dh]` (heads side by side), which is the order the output projection
//! reads, so putting the heads back together copies nothing. Under the causal mask a tile
//! scores only the keys its last row sees, so the masked half is mostly never computed.
//!
//! Deterministic: each tile of query rows is one task, and every row is computed in a fixed
//! order whatever thread runs it.

use super::matmul::{MatRef, gemm_into};
use super::{SharedMut, parallel_for_dynamic};
use crate::Layout;
use rtx_kernels::{Float, FloatMath};

/// `softmax(q kᵀ · scale, keys where `padding` holds left out) · v` for `q` `[B, H, T, Dh]`
/// and `k`, `v` `[B, H, S, Dh]` (any strides), `padding` `[B, S]` (true for a padded key), as
/// a dense `[B, T, H, Dh]` vector. With `causal`, query `i` sees only the keys `j <= i + S -
/// T` (the diagonal aligned to the bottom right). A row left with no key (all padding, or
/// `i + S < T` under the causal mask) gives NaN, as the composition does.
pub fn attention<E: Float>(
    (q, ql): (&[E], &Layout),
    (k, kl): (&[E], &Layout),
    (v, vl): (&[E], &Layout),
    padding: Option<(&[bool], &Layout)>,
    causal: bool,
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
    // The keys query row `i` sees: `0..seen(i)`.
    let seen = |i: usize| {
        if causal {
            (i + 1 + s).saturating_sub(t).min(s)
        } else {
            s
        }
    };
    // Without the causal mask every row sees every key, so one tile takes all of them.
    let tile = if causal { CAUSAL_TILE.min(t) } else { t };
    let tiles = t.div_ceil(tile);
    let base = SharedMut(out.as_mut_ptr());
    let one = |task: usize| {
        let (bi, r0) = (task / tiles, task % tiles * tile);
        let rows = tile.min(t - r0);
        // SAFETY: task `(bi, r0)` writes rows `r0..r0 + rows` of batch element `bi`, which no
        // other task touches; `out` outlives the loop below.
        let ob = unsafe { base.slice((bi * t + r0) * h * dh, rows * h * dh) };
        let w = seen(r0 + rows - 1);
        if w == 0 {
            ob.fill(E::from_f64(f64::NAN));
            return;
        }
        let mut scores = vec![E::ZERO; rows * w];
        let mut head = vec![E::ZERO; rows * dh];
        let skip: Vec<bool> = match padding {
            Some((p, pl)) => {
                let (rs, cs) = (pl.strides()[0], pl.strides()[1]);
                (0..w).map(|j| p[pl.offset() + bi * rs + j * cs]).collect()
            }
            None => Vec::new(),
        };
        for hi in 0..h {
            let at = |l: &Layout, st: &[usize]| l.offset() + bi * st[0] + hi * st[1];
            let qm = MatRef {
                data: q,
                offset: at(ql, qs) + r0 * qs[2],
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
            gemm_into((rows, w, dh), &mut scores, qm, kt, false, false);
            softmax_rows(&mut scores, w, scale, &skip, &|ri| seen(r0 + ri));
            let sm = MatRef::row_major(&scores, w);
            let vm = MatRef {
                data: v,
                offset: at(vl, vs),
                rs: vs[2],
                cs: vs[3],
            };
            gemm_into((rows, dh, w), &mut head, sm, vm, false, false);
            for (ti, src) in head.chunks(dh).enumerate() {
                ob[(ti * h + hi) * dh..][..dh].copy_from_slice(src);
            }
        }
    };
    // A decoding step's attention (one query row per head over a few hundred keys) is a few
    // microseconds of work, less than handing it to the pool costs; each tile's result is the
    // same on any thread, so this moves only time.
    let work: usize = (0..t).map(seen).sum::<usize>() * b * h * dh;
    if work <= SERIAL_WORK {
        (0..b * tiles).for_each(one);
    } else {
        parallel_for_dynamic(b * tiles, &one);
    }
    out
}

/// Multiply-adds of `q kᵀ` (`B H Dh` times the keys each query row sees) up to which the
/// tiles run on the calling thread.
const SERIAL_WORK: usize = 1 << 20;

/// Query rows per tile under the causal mask: a tile scores up to this many masked keys per
/// row past its first row's diagonal, and a `[rows, S]` tile of scores stays in cache.
const CAUSAL_TILE: usize = 32;

/// Every `s`-long row `r` of `scores` scaled, masked and turned into probabilities in place
/// over its first `live(r)` entries (the keys it sees), its other entries set to zero,
/// compiled for AVX-512 or AVX2 where the CPU has it (the exponential is plain arithmetic, so the loops
/// vectorize at the full width; only `+ - * /`, comparisons and bit operations are used, so
/// the results are the same bits at every width).
fn softmax_rows<E: Float>(scores: &mut [E], s: usize, scale: E::Acc, skip: &[bool], live: Live) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F, checked just above.
        return unsafe { softmax_rows_avx512(scores, s, scale, skip, live) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { softmax_rows_avx2(scores, s, scale, skip, live) };
    }
    softmax_live_rows(scores, s, scale, skip, live);
}

/// How many leading entries of row `r` of a tile are live (the keys that row sees).
type Live<'a> = &'a dyn Fn(usize) -> usize;

/// The loop of [`softmax_rows`], inlined into each of its compiled copies.
#[inline(always)]
fn softmax_live_rows<E: Float>(
    scores: &mut [E],
    s: usize,
    scale: E::Acc,
    skip: &[bool],
    live: Live,
) {
    for (r, row) in scores.chunks_mut(s).enumerate() {
        let (seen, masked) = row.split_at_mut(live(r));
        if seen.is_empty() {
            // No key to weigh, as a softmax over nothing but -inf: NaN, like the composition.
            masked.fill(E::from_f64(f64::NAN));
            continue;
        }
        softmax_row(seen, scale, &skip[..skip.len().min(seen.len())]);
        masked.fill(E::ZERO);
    }
}

/// [`softmax_rows`] compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn softmax_rows_avx2<E: Float>(
    scores: &mut [E],
    s: usize,
    scale: E::Acc,
    skip: &[bool],
    live: Live,
) {
    softmax_live_rows(scores, s, scale, skip, live);
}

/// [`softmax_rows`] compiled with AVX-512F enabled.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn softmax_rows_avx512<E: Float>(
    scores: &mut [E],
    s: usize,
    scale: E::Acc,
    skip: &[bool],
    live: Live,
) {
    softmax_live_rows(scores, s, scale, skip, live);
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
