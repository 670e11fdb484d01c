//! The input gradient of softmax and log-softmax along the last axis on the CPU, fused: per
//! row, `Σ g y` (or `Σ g` for log-softmax) and then every output, in one pass over dense
//! rows. The same formula as the GPU's `softmax_backward_rows` kernel
//! (`rtx-kernels/src/kernels/softmax_backward.rs`).
//!
//! Invariant: each row's sum runs in index order in `E::Acc`, every output is rounded to `E`
//! once, and rows are split into fixed tasks, so results never depend on the thread count.

use super::CHUNK;
use rtx_kernels::{Float, FloatMath};

/// `y (g - Σ g y)` (softmax, `log` false) or `g - exp(y) Σ g` (log-softmax) for each
/// `cols`-long row of the dense forward output `y` and its gradient `g` (of equal length).
///
/// ```
/// let dx = rtx_backends::cpu::softmax_back::softmax_backward(&[0.25f32, 0.75], &[1.0, 3.0], 2, false);
/// assert_eq!(dx, vec![-0.375, 0.375]);
/// ```
pub fn softmax_backward<E: Float>(y: &[E], g: &[E], cols: usize, log: bool) -> Vec<E> {
    let mut dx = vec![E::ZERO; y.len()];
    if y.is_empty() || cols == 0 {
        return dx;
    }
    let per_task = (CHUNK / cols).max(1);
    super::for_chunks_mut(&mut dx, per_task * cols, &|task, dx| {
        let start = task * per_task * cols;
        for (i, dx) in dx.chunks_mut(cols).enumerate() {
            let at = start + i * cols;
            let (y, g) = (&y[at..at + cols], &g[at..at + cols]);
            let zero = <E::Acc as FloatMath>::c(0.0);
            if log {
                let s = g.iter().fold(zero, |s, v| s + v.to_acc());
                for ((o, y), g) in dx.iter_mut().zip(y).zip(g) {
                    *o = E::from_acc(g.to_acc() - y.to_acc().exp() * s);
                }
            } else {
                let s = g
                    .iter()
                    .zip(y)
                    .fold(zero, |s, (g, y)| s + g.to_acc() * y.to_acc());
                for ((o, y), g) in dx.iter_mut().zip(y).zip(g) {
                    *o = E::from_acc(y.to_acc() * (g.to_acc() - s));
                }
            }
        }
    });
    dx
}
