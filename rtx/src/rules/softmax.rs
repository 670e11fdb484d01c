//! The backward of softmax and log-softmax: along the last axis the backend's fused row
//! kernel (`Storage::softmax_backward`: one launch on a GPU, the sum and every output in the
//! compute type, rounded once); along another axis, the composition of primitive ops, which
//! the fused form equals within rounding.

use super::reduce::sum_back;
use super::{Grad, Shared};
use crate::error::Result;
use rtx_backends::Layout;
use rtx_kernels::Float;
use rtx_kernels::op::markers::{Exp, Mul, Sub};
use std::sync::Arc;

/// The input's gradient of softmax (`log = false`) or log-softmax (`log = true`) along
/// `axis`, given the output `y` and its gradient `g` (of one shape): dense at `y`'s dims.
pub(crate) fn softmax_back<F: Float>(
    y: Shared<'_, F>,
    g: Shared<'_, F>,
    axis: usize,
    log: bool,
) -> Result<Grad<F>> {
    let dims = y.1.dims();
    if axis + 1 == dims.len() {
        let dx = y.0.softmax_backward(y.1, (g.0, g.1), log)?;
        return Ok((Arc::new(dx), Layout::contiguous(dims)));
    }
    softmax_back_composed(y, g, axis, log)
}

/// [`softmax_back`] as a composition of primitive ops: `g - exp(y) Σ g` for log-softmax,
/// `y (g - Σ g y)` for softmax, each step rounded to `F`.
pub(crate) fn softmax_back_composed<F: Float>(
    y: Shared<'_, F>,
    g: Shared<'_, F>,
    axis: usize,
    log: bool,
) -> Result<Grad<F>> {
    let dims = y.1.dims();
    let dense = |s| (Arc::new(s), Layout::contiguous(dims));
    if log {
        let (s, l) = sum_back(g, Some(axis))?;
        let e = y.0.unary::<Exp>(y.1)?;
        let scaled = e.binary::<Mul>(&Layout::contiguous(dims), &s, &l)?;
        Ok(dense(g.0.binary::<Sub>(
            g.1,
            &scaled,
            &Layout::contiguous(dims),
        )?))
    } else {
        let gy = g.0.binary::<Mul>(g.1, y.0, y.1)?;
        let (s, l) = sum_back((&Arc::new(gy), &Layout::contiguous(dims)), Some(axis))?;
        let centered = g.0.binary::<Sub>(g.1, &s, &l)?;
        Ok(dense(y.0.binary::<Mul>(
            y.1,
            &centered,
            &Layout::contiguous(dims),
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;
    use crate::tensor::Tensor;

    /// Reproducible values in [lo, hi), rounded to `F`.
    fn values<F: Float>(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<F> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
                F::from_f64(lo + (hi - lo) * r)
            })
            .collect()
    }

    /// The fused last-axis gradient against the composition, on rows held in registers and
    /// on a transposed (strided) gradient, for softmax and log-softmax.
    fn fused_matches_composition<F: Float>(tol: f64) {
        let (r, c) = (6usize, 37usize);
        let x = Tensor::from_vec(values::<F>(r * c, 1, -3.0, 3.0), (r, c), Device::Cpu);
        let g = Tensor::from_vec(values::<F>(r * c, 2, -1.0, 1.0), (r, c), Device::Cpu);
        let gt = Tensor::from_vec(values::<F>(r * c, 3, -1.0, 1.0), (c, r), Device::Cpu);
        for log in [false, true] {
            let y = if log {
                x.log_softmax::<1>()
            } else {
                x.softmax::<1>()
            };
            for g in [g.clone(), gt.t()] {
                let (y, g) = ((y.storage_arc(), y.layout()), (g.storage_arc(), g.layout()));
                let fused = softmax_back(y, g, 1, log).unwrap();
                let composed = softmax_back_composed(y, g, 1, log).unwrap();
                let fused = fused.0.to_vec(&fused.1);
                let composed = composed.0.to_vec(&composed.1);
                for (i, (a, b)) in fused.iter().zip(&composed).enumerate() {
                    let (a, b) = (a.to_f64(), b.to_f64());
                    assert!(
                        (a - b).abs() <= tol * (1.0 + b.abs()),
                        "{:?} log {log} element {i}: fused {a}, composed {b}",
                        F::DTYPE
                    );
                }
            }
        }
    }

    #[test]
    fn fused_softmax_backward_matches_the_composition() {
        fused_matches_composition::<f64>(1e-14);
        fused_matches_composition::<f32>(1e-6);
        // The composition rounds each of its four steps to 16 bits, the fused form once: a
        // few half-ulps apart (2^-11 for f16, 2^-8 for bf16).
        fused_matches_composition::<rtx_kernels::f16>(2e-3);
        fused_matches_composition::<rtx_kernels::bf16>(1e-2);
    }
}
