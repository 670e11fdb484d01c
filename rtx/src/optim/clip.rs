//! Gradient clipping by global norm (PyTorch's `clip_grad_norm_`).

use crate::autograd::Gradients;
use crate::error::{Result, bail, ok};
use crate::nn::{Module, TensorKind, Visitor};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Float;
use rtx_kernels::op::markers;
use std::collections::HashSet;
use std::sync::Arc;

/// Whether this is the first visit of `t`'s tape node: a parameter shared by two layers is
/// visited twice but has one gradient, counted and scaled once.
pub(super) fn first_visit<S: Shape, E: Float>(seen: &mut HashSet<usize>, t: &Tensor<S, E>) -> bool {
    t.node()
        .is_none_or(|n| seen.insert(Arc::as_ptr(n) as usize))
}

/// Scales every parameter gradient of `model` in `grads` so their global L2 norm is at most
/// `max_norm`, and returns the norm before clipping. The norm is accumulated in `f64` from
/// each gradient's sum of squares; as in PyTorch, gradients are multiplied by
/// `max_norm / (norm + 1e-6)` when that factor is below 1.
///
/// When every gradient is on one GPU, the whole computation stays on the device (a few
/// launches per element type, whatever the number of gradients: sums of squares in fixed
/// chunks, the norm and coefficient reduced on the device in a fixed order, one scaling
/// launch reading the coefficient from device memory); the returned norm is its one read-back,
/// which waits for the launches. Elsewhere each gradient's sum of squares is read back.
///
/// ```
/// # use rtx::prelude::*;
/// let w: Tensor<Rank1<2>> = Tensor::from_array([3.0, 4.0], Device::Cpu).requires_grad();
/// let mut grads = (&w * 0.5).sum_all().backward(); // gradient [0.5, 0.5]
/// let norm = clip_grad_norm(&mut grads, &w, 0.5);
/// assert!((norm - 0.5f64.sqrt()).abs() < 1e-12);
/// let g = grads.get(&w).unwrap().to_vec();
/// assert!((g[0] - 0.5 / 0.5f64.sqrt() as f32 * 0.5).abs() < 1e-6);
/// ```
///
/// # Panics
/// When `max_norm` is negative or NaN.
#[track_caller]
pub fn clip_grad_norm(grads: &mut Gradients, model: &impl Module, max_norm: f64) -> f64 {
    ok(try_clip_grad_norm(grads, model, max_norm))
}

/// [`clip_grad_norm`], returning an error for a negative or NaN `max_norm`.
pub fn try_clip_grad_norm(
    grads: &mut Gradients,
    model: &impl Module,
    max_norm: f64,
) -> Result<f64> {
    if max_norm.is_nan() || max_norm < 0.0 {
        bail!("clip_grad_norm", "max_norm must be >= 0, got {max_norm}");
    }
    if let Some(norm) = super::clip_device::clip_on_gpu(grads, model, max_norm)? {
        return Ok(norm);
    }
    struct SumSquares<'a>(&'a Gradients, f64, HashSet<usize>);
    impl Visitor for SumSquares<'_> {
        fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, kind: TensorKind) {
            if kind != TensorKind::Parameter || !first_visit(&mut self.2, t) {
                return;
            }
            if let Some(g) = self.0.get(t) {
                let g = g.cast::<f64>();
                self.1 += g.same::<markers::Mul>(&g).sum_all().item();
            }
        }
    }
    let mut sum = SumSquares(grads, 0.0, HashSet::new());
    crate::no_grad(|| model.visit("", &mut sum));
    let norm = sum.1.sqrt();
    let coef = max_norm / (norm + 1e-6);
    if coef < 1.0 {
        struct Scale<'a>(&'a mut Gradients, f64, HashSet<usize>);
        impl Visitor for Scale<'_> {
            fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, kind: TensorKind) {
                if kind != TensorKind::Parameter || !first_visit(&mut self.2, t) {
                    return;
                }
                if let Some(g) = self.0.get(t) {
                    let scaled = g.scalar::<markers::Mul>(E::from_f64(self.1));
                    self.0.replace(t, scaled);
                }
            }
        }
        crate::no_grad(|| model.visit("", &mut Scale(grads, coef, HashSet::new())));
    }
    Ok(norm)
}
