//! Fused layer norm and RMS norm over the last axis on the CPU: the same formula as the GPU's
//! row kernels (`rtx-kernels/src/kernels/norm.rs`), so the fused path can be run and tested on
//! any device; `rtx` uses it for the norms at inference and in compiled steps.
//!
//! Invariant: each row is computed in `E::Acc`, its sums in sixteen interleaved partial sums
//! added in a fixed order (so the loops vectorize, with the same bits at any SIMD width), and
//! rounded to `E` once; the
//! weight and bias gradients sum rows in order, one column per task, so results never depend
//! on the thread count. Row statistics are kept as `f64` (both compute types widen to it
//! exactly) so they need no type of their own.

use super::{CHUNK, SharedMut};
use rtx_kernels::{Float, FloatMath};

/// The statistics of each row: mean (0 for RMS norm) and `1 / sqrt(var + eps)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowStats {
    /// Per row, the mean subtracted (0 when not centered).
    pub mean: Vec<f64>,
    /// Per row, the reciprocal standard deviation (or root mean square).
    pub rstd: Vec<f64>,
}

/// Normalizes each `cols`-long row of dense `x`: `(x - mean) * rstd * weight + bias` with the
/// biased variance when `centered` (layer norm), else `x * rstd * weight` with
/// `rstd = 1 / sqrt(mean(x²) + eps)` (RMS norm). `weight` and `bias` are dense `[cols]`.
pub fn norm_rows<E: Float>(
    x: &[E],
    weight: Option<&[E]>,
    bias: Option<&[E]>,
    cols: usize,
    eps: f64,
    centered: bool,
) -> (Vec<E>, RowStats) {
    let rows = x.len().checked_div(cols).unwrap_or(0);
    let mut y = vec![E::ZERO; x.len()];
    let mut mean = vec![0.0; rows];
    let mut rstd = vec![0.0; rows];
    if rows == 0 {
        return (y, RowStats { mean, rstd });
    }
    let per_task = (CHUNK / cols).max(1);
    let (mp, rp) = (SharedMut(mean.as_mut_ptr()), SharedMut(rstd.as_mut_ptr()));
    super::for_chunks_mut(&mut y, per_task * cols, &|task, y| {
        let x = &x[task * per_task * cols..][..y.len()];
        let (first, count) = (task * per_task, y.len() / cols);
        // SAFETY: task `task` alone writes rows `first..first + count` of the statistics,
        // which hold one value per row.
        let (mean, rstd) = unsafe { (mp.slice(first, count), rp.slice(first, count)) };
        let rows = Rows {
            x,
            cols,
            weight,
            bias,
            eps,
            centered,
        };
        rows.run(y, mean, rstd);
    });
    (y, RowStats { mean, rstd })
}

/// One task's rows of [`norm_rows`].
struct Rows<'a, E> {
    x: &'a [E],
    cols: usize,
    weight: Option<&'a [E]>,
    bias: Option<&'a [E]>,
    eps: f64,
    centered: bool,
}

impl<E: Float> Rows<'_, E> {
    /// Normalizes the rows into `y`, writing each row's mean and reciprocal deviation; the
    /// loops are compiled for AVX-512 or AVX2 where the CPU has it (the same bits at any width: the
    /// lanes below fix the order of every sum).
    fn run(&self, y: &mut [E], mean: &mut [f64], rstd: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { self.run_avx512(y, mean, rstd) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { self.run_avx2(y, mean, rstd) };
        }
        self.body(y, mean, rstd);
    }

    /// [`Rows::run`] compiled with AVX2 enabled.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn run_avx2(&self, y: &mut [E], mean: &mut [f64], rstd: &mut [f64]) {
        self.body(y, mean, rstd);
    }

    /// [`Rows::run`] compiled with AVX-512F enabled.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn run_avx512(&self, y: &mut [E], mean: &mut [f64], rstd: &mut [f64]) {
        self.body(y, mean, rstd);
    }

    /// The rows, normalized in the lane order that every copy above shares.
    #[inline(always)]
    fn body(&self, y: &mut [E], mean: &mut [f64], rstd: &mut [f64]) {
        let c = <E::Acc as FloatMath>::c;
        let cols = self.cols;
        let n = c(cols as f64);
        for (i, (y, row)) in y.chunks_mut(cols).zip(self.x.chunks(cols)).enumerate() {
            let mu = if self.centered {
                lane_sum(row, |v| v) / n
            } else {
                c(0.0)
            };
            let q = lane_sum(row, |v| (v - mu) * (v - mu));
            let r = c(1.0) / (q / n + c(self.eps)).sqrt();
            let xhat = |v: &E| (v.to_acc() - mu) * r;
            match (self.weight, self.bias) {
                (Some(w), Some(b)) => {
                    for ((out, v), (w, b)) in y.iter_mut().zip(row).zip(w.iter().zip(b)) {
                        *out = E::from_acc(xhat(v) * w.to_acc() + b.to_acc());
                    }
                }
                (Some(w), None) => {
                    for ((out, v), w) in y.iter_mut().zip(row).zip(w) {
                        *out = E::from_acc(xhat(v) * w.to_acc());
                    }
                }
                (None, Some(b)) => {
                    for ((out, v), b) in y.iter_mut().zip(row).zip(b) {
                        *out = E::from_acc(xhat(v) + b.to_acc());
                    }
                }
                (None, None) => {
                    for (out, v) in y.iter_mut().zip(row) {
                        *out = E::from_acc(xhat(v));
                    }
                }
            }
            mean[i] = mu.to_f64();
            rstd[i] = r.to_f64();
        }
    }
}

/// `Σ f(x)` over a row in sixteen interleaved partial sums, added up in a fixed order at the
/// end: a SIMD-friendly order that does not depend on the vector width.
#[inline(always)]
fn lane_sum<E: Float>(row: &[E], f: impl Fn(E::Acc) -> E::Acc) -> E::Acc {
    const LANES: usize = 16;
    let zero = <E::Acc as FloatMath>::c(0.0);
    let mut lanes = [zero; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (s, v) in lanes.iter_mut().zip(c) {
            *s = *s + f(v.to_acc());
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(zero, |s, v| s + f(v.to_acc()));
    lanes.iter().fold(tail, |a, &b| a + b)
}

/// The gradients of [`norm_rows`] from the output gradient `dy` (dense, like `x`): the input
/// gradient, and the weight and bias gradients (`[cols]`) when asked for.
#[allow(clippy::type_complexity)]
pub fn norm_rows_backward<E: Float>(
    dy: &[E],
    x: &[E],
    weight: Option<&[E]>,
    stats: &RowStats,
    cols: usize,
    centered: bool,
    (want_weight, want_bias): (bool, bool),
) -> (Vec<E>, Option<Vec<E>>, Option<Vec<E>>) {
    let c = <E::Acc as FloatMath>::c;
    let mut dx = vec![E::ZERO; x.len()];
    let rows = stats.rstd.len();
    if rows > 0 && cols > 0 {
        let per_task = (CHUNK / cols).max(1);
        super::for_chunks_mut(&mut dx, per_task * cols, &|task, dx| {
            let c = <E::Acc as FloatMath>::c;
            let n = c(cols as f64);
            for (i, dx) in dx.chunks_mut(cols).enumerate() {
                let r0 = task * per_task + i;
                let (mu, r) = (c(stats.mean[r0]), c(stats.rstd[r0]));
                let (xs, gs) = (&x[r0 * cols..][..cols], &dy[r0 * cols..][..cols]);
                let g = |j: usize| match weight {
                    Some(w) => gs[j].to_acc() * w[j].to_acc(),
                    None => gs[j].to_acc(),
                };
                let (mut sg, mut sgx) = (c(0.0), c(0.0));
                for (j, xj) in xs.iter().enumerate() {
                    let xhat = (xj.to_acc() - mu) * r;
                    sg = sg + g(j);
                    sgx = sgx + g(j) * xhat;
                }
                let mean_g = if centered { sg / n } else { c(0.0) };
                let mean_gx = sgx / n;
                for (j, out) in dx.iter_mut().enumerate() {
                    let xhat = (xs[j].to_acc() - mu) * r;
                    *out = E::from_acc(r * (g(j) - mean_g - xhat * mean_gx));
                }
            }
        });
    }
    let column = |j: usize| {
        let (mut sw, mut sb) = (c(0.0), c(0.0));
        for r in 0..rows {
            let g = dy[r * cols + j].to_acc();
            let xhat = (x[r * cols + j].to_acc() - c(stats.mean[r])) * c(stats.rstd[r]);
            sw = sw + g * xhat;
            sb = sb + g;
        }
        (E::from_acc(sw), E::from_acc(sb))
    };
    let sums: Vec<(E, E)> = if want_weight || want_bias {
        super::parallel_map(cols, &column)
    } else {
        Vec::new()
    };
    let dw = want_weight.then(|| sums.iter().map(|s| s.0).collect());
    let db = want_bias.then(|| sums.iter().map(|s| s.1).collect());
    (dx, dw, db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_norm_of_a_row_and_its_gradient() {
        let x = [1.0f64, 3.0, 2.0, 2.0];
        let (y, stats) = norm_rows(&x, None, Some(&[0.5, 0.5]), 2, 0.0, true);
        // Row [2, 2] has no spread: rstd is infinite and 0 * inf is NaN, as in PyTorch.
        assert_eq!(&y[..2], &[-0.5, 1.5]);
        assert_eq!((stats.mean[0], stats.rstd[0]), (2.0, 1.0));
        let stats = RowStats {
            mean: vec![2.0],
            rstd: vec![1.0],
        };
        let (dx, dw, db) =
            norm_rows_backward(&[1.0, 1.0], &x[..2], None, &stats, 2, true, (true, true));
        assert_eq!(dx, vec![0.0, 0.0]);
        assert_eq!(
            (dw.unwrap(), db.unwrap()),
            (vec![-1.0, 1.0], vec![1.0, 1.0])
        );
    }
}
