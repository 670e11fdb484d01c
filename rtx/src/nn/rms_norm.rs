//! `RMSNorm`: root-mean-square normalization over the last axis with a learned scale, as
//! PyTorch's `nn.RMSNorm(D)`. Defined by its composition of primitive ops (what runs on the
//! CPU); on a GPU the fused kernels of `fused_norm.rs` run instead.

use super::init::Init;
use super::layer_norm::rows_of;
use super::module::{Module, Visitor, VisitorMut, join};
use crate::error::{Result, ok};
use crate::shape::{Const, Shape, checks};
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::{DType, Float};

/// RMS normalization over the last axis of size `D`: `x / sqrt(mean(x²) + eps) * weight`.
/// `weight` starts at ones; `eps` `None` means the machine epsilon of `E`, as PyTorch's
/// default `eps=None` does.
///
/// ```
/// # use rtx::prelude::*;
/// let norm = RMSNorm::<2>::new(Device::Cpu);
/// let x: Tensor<Rank1<2>> = Tensor::from_array([3.0, 4.0], Device::Cpu);
/// let y = norm.forward(&x).to_vec(); // rms = sqrt(12.5)
/// assert!((y[0] - 3.0 / 12.5f32.sqrt()).abs() < 1e-6);
/// ```
#[derive(Clone, Debug)]
pub struct RMSNorm<const D: usize, E: Float = f32> {
    /// The scale, `[D]`.
    pub weight: Tensor<(Const<D>,), E>,
    /// Added to the mean square; `None` for the machine epsilon of `E`.
    pub eps: Option<f64>,
}

impl<const D: usize, E: Float> RMSNorm<D, E> {
    /// A layer with PyTorch's initial values (no randomness, so no seed).
    pub fn new(device: Device) -> Self {
        RMSNorm {
            weight: Tensor::ones((Const,), device),
            eps: None,
        }
    }

    /// Normalizes every `[.., D]` row of `x`.
    ///
    /// # Panics
    /// When the last axis is not `D` long (see [`RMSNorm::try_forward`]).
    #[track_caller]
    pub fn forward<S: Shape>(&self, x: &Tensor<S, E>) -> Tensor<S, E> {
        const { checks::last_dim::<S, D>("rms_norm") };
        ok(self.forward_run(x))
    }

    /// [`RMSNorm::forward`], returning an error naming the shape when it does not fit. On a
    /// GPU this is one fused launch (and one tape node); on the CPU, the composition below while
    /// gradients are recorded, and the fused rows otherwise.
    pub fn try_forward<S: Shape>(&self, x: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        const { checks::last_dim::<S, D>("rms_norm") };
        self.forward_run(x)
    }

    /// The body of `forward` and `try_forward` after their const check (see
    /// `crate::shape::checks` for why the check sits in each of them).
    pub(crate) fn forward_run<S: Shape>(&self, x: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        let rows = rows_of::<S, E, D>("rms_norm", x)?;
        let eps = self.resolved_eps();
        // As for LayerNorm: fused on a GPU, and on the CPU when nothing is recorded.
        let recording = crate::autograd::must_record(&[x.node(), self.weight.node()]);
        if x.device().is_cuda() || !recording {
            return super::fused_norm::norm(x, Some(&self.weight), None, eps, false);
        }
        let x2 = x.try_reshape((rows, Const::<D>))?;
        let inv_rms = ((&x2 * &x2).mean_keepdim::<1>() + E::from_f64(eps)).rsqrt();
        let y = &x2 * inv_rms.broadcast_to(x2.shape()) * &self.weight;
        y.try_reshape(x.shape())
    }
}

impl<const D: usize, E: Float> RMSNorm<D, E> {
    /// The eps `forward` adds: `eps`, or the machine epsilon of `E` when it is `None`.
    pub(crate) fn resolved_eps(&self) -> f64 {
        self.eps.unwrap_or(match E::DTYPE {
            DType::F64 => f64::EPSILON,
            DType::F16 => 2f64.powi(-10),
            DType::BF16 => 2f64.powi(-7),
            _ => f64::from(f32::EPSILON),
        })
    }
}

/// Weight ones (the seed is unused).
impl<const D: usize, E: Float> Init for RMSNorm<D, E> {
    fn init_named(device: &Device, _seed: u64, _prefix: &str) -> Self {
        Self::new(*device)
    }
}

impl<const D: usize, E: Float> Module for RMSNorm<D, E> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        self.weight.visit(&join(prefix, "weight."), v);
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.weight.visit_mut(&join(prefix, "weight."), v);
    }
}
