//! Cross entropy fused with log-softmax, and dropout, on the CPU: the same formulas as the GPU
//! kernels (`rtx-kernels/src/kernels/loss.rs` and `dropout.rs`), as plain loops.
//!
//! Invariant: a row's logsumexp and loss are computed in `E::Acc` in index order, and the mean
//! sums row losses in row order, so results never depend on the thread count; dropout draws
//! word `i` of the seed's Philox stream for element `i`, so its mask is bitwise the GPU's.

use super::CHUNK;
use rtx_kernels::{Float, FloatMath, Philox};

/// What the forward keeps for the backward: per row `ln Σ exp(x)` (as `f64`, which holds
/// both compute types exactly) and the number of kept rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CeSaved {
    /// Per row, the logsumexp of the logits.
    pub lse: Vec<f64>,
    /// The rows whose target is neither ignored nor out of range.
    pub kept: usize,
}

/// Whether row target `t` counts: not ignored and inside `0..cols`.
fn counts(t: i64, cols: usize, ignore: Option<i64>) -> bool {
    ignore != Some(t) && (0..cols as i64).contains(&t)
}

/// The first row (and its target) whose target is neither ignored nor inside `0..cols`.
pub fn first_bad_target(targets: &[i64], cols: usize, ignore: Option<i64>) -> Option<(usize, i64)> {
    targets
        .iter()
        .enumerate()
        .find(|&(_, &t)| ignore != Some(t) && !(0..cols as i64).contains(&t))
        .map(|(i, &t)| (i, t))
}

/// Runs `f(task, chunk)` over `per`-long chunks of `data`: inline when the whole job is small
/// (waking the pool would cost more than the work), else in parallel. Each chunk's result is
/// the same either way.
fn for_chunks<T: Send>(
    data: &mut [T],
    per: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if work <= 2 * CHUNK {
        data.chunks_mut(per).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        super::for_chunks_mut(data, per, &|i, c| f(i, c));
    }
}

/// The mean over kept rows of `(1 - s) * (lse - x[t]) + s * (lse - mean_c x[c])` for dense
/// `[rows, cols]` logits, rounded once to `E` (NaN when no row is kept), and what the
/// backward needs. Rows with an ignored or out-of-range target add nothing.
pub fn cross_entropy<E: Float>(
    x: &[E],
    targets: &[i64],
    cols: usize,
    ignore: Option<i64>,
    smoothing: f64,
) -> (E, CeSaved) {
    let rows = targets.len();
    // Per row: the logsumexp and the loss (0 when the row is not kept).
    let mut per_row = vec![(0.0, 0.0); rows];
    if let Some(per_task) = CHUNK.checked_div(cols) {
        let c = <E::Acc as FloatMath>::c;
        let s = c(E::from_f64(smoothing).to_f64());
        let per_task = per_task.max(1);
        for_chunks(&mut per_row, per_task, x.len(), |task, out| {
            for (i, out) in out.iter_mut().enumerate() {
                let r = task * per_task + i;
                let row = &x[r * cols..][..cols];
                let m = row
                    .iter()
                    .fold(c(f64::NEG_INFINITY), |m, v| m.max(v.to_acc()));
                let (mut e, mut sx) = (c(0.0), c(0.0));
                for v in row {
                    e = e + (v.to_acc() - m).exp();
                    sx = sx + v.to_acc();
                }
                let l = if m.to_f64().is_infinite() {
                    m
                } else {
                    m + e.ln()
                };
                let t = targets[r];
                let mut loss = c(0.0);
                if counts(t, cols, ignore) {
                    loss = l - row[t as usize].to_acc();
                    if smoothing != 0.0 {
                        loss = (c(1.0) - s) * loss + s * (l - sx / c(cols as f64));
                    }
                }
                *out = (l.to_f64(), loss.to_f64());
            }
        });
    }
    let kept = targets.iter().filter(|&&t| counts(t, cols, ignore)).count();
    let c = <E::Acc as FloatMath>::c;
    let total = per_row.iter().fold(c(0.0), |a, &(_, v)| a + c(v));
    let lse = per_row.into_iter().map(|(l, _)| l).collect();
    (E::from_acc(total / c(kept as f64)), CeSaved { lse, kept })
}

/// The gradient of [`cross_entropy`] with respect to the logits for an output gradient `g`:
/// `g / kept * (exp(x - lse) - (1 - s) * onehot(t) - s / cols)`, 0 on rows not kept.
pub fn cross_entropy_backward<E: Float>(
    g: E,
    x: &[E],
    targets: &[i64],
    cols: usize,
    ignore: Option<i64>,
    smoothing: f64,
    saved: &CeSaved,
) -> Vec<E> {
    let mut dx = vec![E::ZERO; x.len()];
    let Some(per_task) = CHUNK.checked_div(cols) else {
        return dx;
    };
    let per_task = per_task.max(1);
    let c = <E::Acc as FloatMath>::c;
    let s = c(E::from_f64(smoothing).to_f64());
    let scale = g.to_acc() / c(saved.kept as f64);
    let (off, on) = (s / c(cols as f64), c(1.0) - s);
    let work = x.len();
    for_chunks(&mut dx, per_task * cols, work, |task, dx| {
        for (i, dx) in dx.chunks_mut(cols).enumerate() {
            let r = task * per_task + i;
            let t = targets[r];
            if !counts(t, cols, ignore) {
                continue;
            }
            let l = c(saved.lse[r]);
            let row = &x[r * cols..][..cols];
            for (j, (d, v)) in dx.iter_mut().zip(row).enumerate() {
                let mut p = (v.to_acc() - l).exp() - off;
                if j as i64 == t {
                    p = p - on;
                }
                *d = E::from_acc(scale * p);
            }
        }
    });
    dx
}

/// `x[i] * keep_i * scale` with `keep_i` word `i` of the stream of `seed` below `threshold`,
/// rounded once to `E` (`scale` is taken as `E` rounds it).
pub fn dropout<E: Float>(x: &[E], seed: u64, threshold: u64, scale: f64) -> Vec<E> {
    let s = E::from_f64(scale).to_acc();
    let zero = <E::Acc as FloatMath>::c(0.0);
    let mut out = vec![E::ZERO; x.len()];
    // Chunks hold whole Philox blocks of four words, so each starts on a block boundary.
    let n = x.len();
    for_chunks(&mut out, CHUNK, n, |task, out| {
        let g = Philox::new(seed);
        let x = &x[task * CHUNK..][..out.len()];
        let first = (task * CHUNK / 4) as u64;
        for (b, (out, x)) in out.chunks_mut(4).zip(x.chunks(4)).enumerate() {
            let words = g.block(first + b as u64);
            for ((o, v), w) in out.iter_mut().zip(x).zip(words) {
                // `x * 0` keeps the sign (and NaN) of x, as the composition's product does.
                let k = if (w as u64) < threshold {
                    v.to_acc()
                } else {
                    v.to_acc() * zero
                };
                *o = E::from_acc(k * s);
            }
        }
    });
    out
}
