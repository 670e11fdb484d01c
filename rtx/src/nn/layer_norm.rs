//! `LayerNorm`: normalization over the last axis (`D` features) with a learned scale and
//! shift, as PyTorch's `nn.LayerNorm(D)`. Defined by its composition of primitive ops (what
//! runs on the CPU); on a GPU the fused kernels of `fused_norm.rs` run instead.

use super::init::Init;
use super::module::{Module, Visitor, VisitorMut, join};
use crate::error::{Result, bail, ok};
use crate::shape::{Const, Shape, checks, describe};
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;

/// Layer normalization over the last axis of size `D`: `(x - mean) / sqrt(var + eps) * weight
/// + bias`, with the biased variance. `weight` starts at ones, `bias` at zeros, eps 1e-5.
///
/// ```
/// # use rtx::prelude::*;
/// let ln = LayerNorm::<2>::new(Device::Cpu);
/// let x: Tensor<Rank2<1, 2>> = Tensor::from_array([[1.0, 3.0]], Device::Cpu);
/// let y = ln.forward(&x).to_vec();
/// assert!((y[0] + 1.0).abs() < 1e-4 && (y[1] - 1.0).abs() < 1e-4);
/// ```
#[derive(Clone, Debug)]
pub struct LayerNorm<const D: usize, E: Float = f32> {
    /// The scale, `[D]`.
    pub weight: Tensor<(Const<D>,), E>,
    /// The shift, `[D]`.
    pub bias: Tensor<(Const<D>,), E>,
    /// Added to the variance before its square root.
    pub eps: f64,
}

impl<const D: usize, E: Float> LayerNorm<D, E> {
    /// A layer with PyTorch's initial values (no randomness, so no seed).
    pub fn new(device: Device) -> Self {
        LayerNorm {
            weight: Tensor::ones((Const,), device),
            bias: Tensor::zeros((Const,), device),
            eps: 1e-5,
        }
    }

    /// Normalizes every `[.., D]` row of `x`.
    ///
    /// # Panics
    /// When the last axis is not `D` long (see [`LayerNorm::try_forward`]).
    #[track_caller]
    pub fn forward<S: Shape>(&self, x: &Tensor<S, E>) -> Tensor<S, E> {
        const { checks::last_dim::<S, D>("layer_norm") };
        ok(self.forward_run(x))
    }

    /// [`LayerNorm::forward`], returning an error naming the shape when it does not fit. On a
    /// GPU this is one fused launch (and one tape node whose backward is three launches); on
    /// the CPU it is the composition below while gradients are recorded, and the fused rows
    /// (held to the composition, see `fused_norm.rs`) otherwise.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let ln = LayerNorm::<4>::new(Device::Cpu);
    /// let x: Tensor<(usize, usize)> = Tensor::zeros((4, 2), Device::Cpu);
    /// let err = ln.try_forward(&x).err().unwrap();
    /// assert_eq!(err.to_string(), "layer_norm: the last axis of input [4, 2] is not 4 long");
    /// ```
    pub fn try_forward<S: Shape>(&self, x: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        const { checks::last_dim::<S, D>("layer_norm") };
        self.forward_run(x)
    }

    /// The body of `forward` and `try_forward` after their const check (see
    /// `crate::shape::checks` for why the check sits in each of them).
    pub(crate) fn forward_run<S: Shape>(&self, x: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        let rows = rows_of::<S, E, D>("layer_norm", x)?;
        // Inference on the CPU takes the fused rows too (one pass instead of eight); with a
        // tape to record, the CPU runs the composition that defines the norm.
        let recording =
            crate::autograd::must_record(&[x.node(), self.weight.node(), self.bias.node()]);
        if x.device().is_cuda() || !recording {
            return super::fused_norm::norm(
                x,
                Some(&self.weight),
                Some(&self.bias),
                self.eps,
                true,
            );
        }
        let x2 = x.try_reshape((rows, Const::<D>))?;
        let full = x2.shape();
        let mean = x2.mean_keepdim::<1>().broadcast_to(full);
        let inv_std = (x2.var_keepdim::<1>(0) + E::from_f64(self.eps)).rsqrt();
        let y = (&x2 - mean) * inv_std.broadcast_to(full) * &self.weight + &self.bias;
        y.try_reshape(x.shape())
    }
}

/// The number of `[D]` rows in `x`, or an error when its last axis is not `D` long.
pub(crate) fn rows_of<S: Shape, E: Float, const D: usize>(
    op: &'static str,
    x: &Tensor<S, E>,
) -> Result<usize> {
    match x.dims().last() {
        Some(&last) if last == D => Ok(x.numel() / D.max(1)),
        _ => bail!(
            op,
            "the last axis of input {} is not {D} long",
            describe(&x.shape())
        ),
    }
}

/// Weight ones and bias zeros (the seed is unused).
impl<const D: usize, E: Float> Init for LayerNorm<D, E> {
    fn init_named(device: &Device, _seed: u64, _prefix: &str) -> Self {
        Self::new(*device)
    }
}

impl<const D: usize, E: Float> Module for LayerNorm<D, E> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        self.weight.visit(&join(prefix, "weight."), v);
        self.bias.visit(&join(prefix, "bias."), v);
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.weight.visit_mut(&join(prefix, "weight."), v);
        self.bias.visit_mut(&join(prefix, "bias."), v);
    }
}
