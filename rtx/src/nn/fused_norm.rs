//! The fused form of layer norm and RMS norm, which [`LayerNorm`](super::LayerNorm) and
//! [`RMSNorm`](super::RMSNorm) run on GPUs: one backend op forward
//! (`Storage::norm_rows`, one launch) and one tape node whose backward is the fused backward
//! (`Storage::norm_rows_backward`, three launches) instead of a dozen elementwise and
//! reduction nodes.
//!
//! The norms are defined by their compositions of primitive ops (what the layers run on the
//! CPU); this is an optimization held to them: the tests below check that on the CPU the fused
//! path gives the composition's outputs and gradients, and `tests/devices/norm.rs` checks the
//! GPU against the CPU. f16 and bf16 compute in f32 and round once, as PyTorch's fused kernels
//! do, rather than rounding after every op as the composition does.

use crate::autograd;
use crate::error::Result;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Float;

/// `x / sqrt(mean(x²) + eps) * weight` over the last axis of `x`, for a `weight` whose length
/// is known at run time (PyTorch's `F.rms_norm`): one fused launch on every device (f16 and
/// bf16 computed in f32 and rounded once), recorded as one tape node. [`super::RMSNorm`] is
/// the layer with a width checked when the crate compiles.
///
/// # Errors
/// [`crate::Error::ShapeMismatch`] when `weight` is not as long as the last axis of `x`.
///
/// ```
/// use rtx::prelude::*;
/// let x = Tensor::from_vec(vec![3.0f32, 4.0], (1usize, 2usize), Device::Cpu);
/// let w = Tensor::from_vec(vec![1.0f32, 2.0], (2usize,), Device::Cpu);
/// let y = rtx::nn::rms_norm(&x, &w, 0.0).unwrap();
/// // mean(x²) = 12.5, so y = x / sqrt(12.5) * w.
/// let r = 12.5f32.sqrt();
/// assert_eq!(y.to_vec(), vec![3.0 / r, 8.0 / r]);
/// ```
pub fn rms_norm<S: Shape, E: Float>(
    x: &Tensor<S, E>,
    weight: &Tensor<(usize,), E>,
    eps: f64,
) -> Result<Tensor<S, E>> {
    let last = x.dims().last().copied().unwrap_or(1);
    if weight.dims()[0] != last {
        return Err(crate::Error::ShapeMismatch {
            op: "rms_norm",
            lhs: format!("{:?}", x.dims()),
            rhs: format!("{:?}", weight.dims()),
            rule: "the weight is as long as the last axis of x",
        });
    }
    norm(x, Some(weight), None, eps, false)
}

/// `(x - mean) / sqrt(var + eps) * weight + bias` over the last axis of `x` (`centered`, layer
/// norm) or `x / sqrt(mean(x²) + eps) * weight` (RMS norm), recorded as one node. The last
/// axis of `x` is as long as `weight` and `bias` (`W`, one axis; checked by the caller).
pub(crate) fn norm<S: Shape, W: Shape, E: Float>(
    x: &Tensor<S, E>,
    weight: Option<&Tensor<W, E>>,
    bias: Option<&Tensor<W, E>>,
    eps: f64,
    centered: bool,
) -> Result<Tensor<S, E>> {
    let (y, stats) = x.storage().norm_rows(
        x.layout(),
        weight.map(|w| (w.storage(), w.layout())),
        bias.map(|b| (b.storage(), b.layout())),
        eps,
        centered,
    )?;
    let out = Tensor::from_storage(y, x.shape());
    let (wn, bn) = (weight.and_then(|w| w.node()), bias.and_then(|b| b.node()));
    if !autograd::must_record(&[x.node(), wn, bn]) {
        return Ok(out);
    }
    let inputs = vec![x.node().cloned(), wn.cloned(), bn.cloned()];
    let (need_x, want) = (x.node().is_some(), (wn.is_some(), bn.is_some()));
    let param_shape = weight.or(bias).map(|p| p.shape());
    let (x, weight) = (x.detach(), weight.map(|w| w.detach()));
    Ok(out.record(inputs, move |g| {
        let (dx, dw, db) = crate::rules::norm::norm_back(
            (g.storage(), g.layout()),
            (x.storage(), x.layout()),
            weight.as_ref().map(|w| (w.storage(), w.layout())),
            &stats,
            [need_x, want.0, want.1],
        )?;
        let param = |s| param_shape.map(|shape| Tensor::<W, E>::from_storage(s, shape));
        Ok(vec![
            dx.map(|s| Tensor::from_storage(s, x.shape()))
                .and_then(autograd::erase),
            dw.and_then(param).and_then(autograd::erase),
            db.and_then(param).and_then(autograd::erase),
        ])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ok;
    use crate::nn::{LayerNorm, RMSNorm};
    use crate::shape::Const;
    use rtx_backends::Device;

    /// Reproducible values in [lo, hi).
    fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
                lo + (hi - lo) * r
            })
            .collect()
    }

    fn assert_close<E: Float>(what: &str, got: &[E], want: &[E], tol: f64) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let (g, w) = (g.to_f64(), w.to_f64());
            assert!(
                (g - w).abs() <= tol * w.abs().max(1.0),
                "{what}, element {i}: fused {g}, composition {w}"
            );
        }
    }

    /// The fused path and the composition on the CPU: outputs, and the gradients of x, the
    /// weight and the bias of `Σ y * r` for a fixed `r`, over a strided view of `x`.
    fn fused_matches_the_composition<E: Float>(tol: f64) {
        const D: usize = 24;
        let rows = 7usize;
        let cast = |v: Vec<f64>| v.into_iter().map(E::from_f64).collect::<Vec<E>>();
        // Stored as [D, rows] and viewed transposed: a non-contiguous input.
        let xt: Tensor<(Const<D>, usize), E> = Tensor::from_vec(
            cast(values(rows * D, 1, 1.0, 3.0)),
            (Const, rows),
            Device::Cpu,
        );
        let r: Tensor<(usize, Const<D>), E> = Tensor::from_vec(
            cast(values(rows * D, 2, -1.0, 1.0)),
            (rows, Const),
            Device::Cpu,
        );
        let mut ln = LayerNorm::<D, E>::new(Device::Cpu);
        ln.weight = Tensor::from_vec(cast(values(D, 3, 0.5, 1.5)), (Const,), Device::Cpu);
        ln.bias = Tensor::from_vec(cast(values(D, 4, -0.5, 0.5)), (Const,), Device::Cpu);
        let mut rms = RMSNorm::<D, E>::new(Device::Cpu);
        rms.weight = ln.weight.clone();
        rms.eps = Some(1e-6);
        for centered in [true, false] {
            let (w, b) = (
                ln.weight.clone().requires_grad(),
                ln.bias.clone().requires_grad(),
            );
            let x = xt.t().requires_grad();
            let (composed, fused) = if centered {
                let l = LayerNorm {
                    weight: w.clone(),
                    bias: b.clone(),
                    eps: ln.eps,
                };
                let f = ok(norm(&x, Some(&w), Some(&b), ln.eps, true));
                (l.forward(&x), f)
            } else {
                let l = RMSNorm {
                    weight: w.clone(),
                    eps: rms.eps,
                };
                let f = ok(norm(&x, Some(&w), None, 1e-6, false));
                (l.forward(&x), f)
            };
            assert_close("output", &fused.to_vec(), &composed.to_vec(), tol);
            let gc = (&composed * &r).sum_all().backward();
            let gf = (&fused * &r).sum_all().backward();
            let grad = |g: &autograd::Gradients, what| match what {
                0 => g.get(&x).map(|t| t.to_vec()),
                1 => g.get(&w).map(|t| t.to_vec()),
                _ => g.get(&b).map(|t| t.to_vec()),
            };
            for (what, name) in [(0, "dx"), (1, "dweight"), (2, "dbias")] {
                match (grad(&gf, what), grad(&gc, what)) {
                    (Some(f), Some(c)) => assert_close(name, &f, &c, tol),
                    (None, None) if !centered && what == 2 => {}
                    (f, c) => panic!("{name}: fused {f:?}, composition {c:?}"),
                }
            }
        }
    }

    #[test]
    fn fused_norms_match_their_compositions_with_gradients() {
        fused_matches_the_composition::<f64>(1e-12);
        fused_matches_the_composition::<f32>(2e-5);
    }

    #[test]
    fn an_input_without_history_records_only_the_parameters() {
        let x: Tensor<(usize, Const<3>)> =
            Tensor::from_vec(vec![1.0, 2.0, 4.0], (1, Const), Device::Cpu);
        let w: Tensor<(Const<3>,)> = Tensor::ones((Const,), Device::Cpu).requires_grad();
        let y = ok(norm(&x, Some(&w), None, 0.0, true));
        let g = y.sum_all().backward();
        // d/dw Σ xhat * w = xhat, which sums to 0 over a centered row.
        let dw = g.get(&w).map(|t| t.to_vec()).unwrap_or_default();
        let xhat_sum: f32 = dw.iter().sum();
        assert_eq!(dw.len(), 3);
        assert!(xhat_sum.abs() < 1e-6 && dw[2] > 1.0, "{dw:?}");
        assert!(!ok(norm(&x, None::<&Tensor<(Const<3>,)>>, None, 0.0, true)).tracks_grad());
    }
}
