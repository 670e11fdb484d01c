//! `CausalSelfAttention`: multi-head self-attention in which position `t` attends only to
//! positions `<= t` (GPT's attention block).
//!
//! Parameter names follow PyTorch conventions: `qkv.weight` `[3D, D]` and `qkv.bias` `[3D]`
//! are the fused query/key/value projection (an `nn.Linear(D, 3D)`; nanoGPT calls it
//! `c_attn`), rows `0..D` for queries, `D..2D` for keys and `2D..3D` for values;
//! `proj.weight` `[D, D]` and `proj.bias` `[D]` are the output projection (nanoGPT's
//! `c_proj`). The fused projection is stored with a run-time row count because `3 * D`
//! cannot be written as a type on stable Rust.

use super::init;
use super::init::Init;
use super::linear::Linear;
use super::module::{Module, Visitor, VisitorMut, join};
use crate::shape::{Axes4, Const, Dim};
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;

/// `H` heads must divide the `D` features (checked when compiling, in each constructor: see
/// `crate::shape::checks` for why the `const` block sits in the method the user calls).
#[track_caller]
const fn heads_divide<const D: usize, const H: usize>() {
    if H == 0 || !D.is_multiple_of(H) {
        const_panic::concat_panic!(
            "attention: ",
            H,
            " heads do not divide the width ",
            D,
            " (the head count must divide d_model)"
        );
    }
}

/// Causal self-attention over `D` features split into `H` heads of `D / H`.
///
/// ```
/// # use rtx::prelude::*;
/// let attn = CausalSelfAttention::<8, 2>::new(Device::Cpu, 0);
/// let x: Tensor<(Dyn<'B'>, Dyn<'T'>, Const<8>)> = Tensor::rand((Dyn(2), Dyn(5), Const), 1, Device::Cpu);
/// assert_eq!(attn.forward(&x).dims(), &[2, 5, 8]);
/// ```
#[derive(Clone, Debug)]
pub struct CausalSelfAttention<const D: usize, const H: usize, E: Float = f32> {
    /// The fused query/key/value weight, `[3D, D]` (named `qkv.weight`).
    pub qkv_weight: Tensor<(usize, Const<D>), E>,
    /// The fused query/key/value bias, `[3D]` (named `qkv.bias`).
    pub qkv_bias: Tensor<(usize,), E>,
    /// The output projection (named `proj`).
    pub proj: Linear<D, D, E>,
}

impl<const D: usize, const H: usize, E: Float> CausalSelfAttention<D, H, E> {
    /// A block initialized as PyTorch initializes its two `nn.Linear`s, seeded for the names
    /// `qkv.weight`, `qkv.bias`, `proj.weight` and `proj.bias`. `H` must divide `D` (checked
    /// when compiling).
    pub fn new(device: Device, seed: u64) -> Self {
        const { heads_divide::<D, H>() };
        Self::build(&device, seed, "")
    }

    /// Attends over a `[B, T, D]` input: per head, `softmax((q / sqrt(D/H)) kᵀ)` with the
    /// future (above the diagonal, the complement of `tril`) filled with -inf, times `v`;
    /// heads concatenated and projected.
    ///
    /// # Panics
    /// When the fused projection does not have `3D` rows (it was replaced by a wrong one).
    #[track_caller]
    pub fn forward<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<D>), E>,
    ) -> Tensor<(B, T, Const<D>), E> {
        let (b, t) = (x.dims()[0], x.dims()[1]);
        let hd = D / H;
        let qkv = x.reshape((b, t, Const::<D>)).matmul(&self.qkv_weight.t()) + &self.qkv_bias;
        // [B, T, 3D] -> three [B, H, T, D/H], with run-time dims so broadcasting rules
        // hold without bounds on B and T. Views, not copies: the reshape comes first, while the
        // projection is still contiguous (a reshape of a narrowed view would copy it).
        let heads = qkv
            .reshape((b, t, 3 * H, hd))
            .permute::<Axes4<0, 2, 1, 3>>();
        let head = |i: usize| heads.narrow::<1, usize>(i * H, H);
        let (q, k, v) = (head(0), head(1), head(2));
        // Fused on a GPU in f16 and bf16 (see `Tensor::causal_attention`): the kernels read
        // the heads in place from `qkv`, write the output with the heads side by side (so the
        // merge below is a view) and the heads' gradients as one `[B, T, 3D]` buffer.
        let att = q.causal_attention(&k, &v, 1.0 / (hd as f64).sqrt());
        let y =
            att.permute::<Axes4<0, 2, 1, 3>>()
                .reshape((x.dim::<0>(), x.dim::<1>(), Const::<D>));
        self.proj.forward(&y)
    }
}

impl<const D: usize, const H: usize, E: Float> Init for CausalSelfAttention<D, H, E> {
    fn init_named(device: &Device, seed: u64, prefix: &str) -> Self {
        const { heads_divide::<D, H>() };
        Self::build(device, seed, prefix)
    }
}

impl<const D: usize, const H: usize, E: Float> CausalSelfAttention<D, H, E> {
    /// The body of `new` and `init_named` after their const check.
    fn build(device: &Device, seed: u64, prefix: &str) -> Self {
        let device = *device;
        let (qkv_weight, qkv_bias) = init::default_weight_bias(
            (3 * D, Const),
            (3 * D,),
            seed,
            &format!("{prefix}qkv."),
            device,
        );
        CausalSelfAttention {
            qkv_weight,
            qkv_bias,
            proj: Linear::init_named(&device, seed, &format!("{prefix}proj.")),
        }
    }
}

impl<const D: usize, const H: usize, E: Float> Module for CausalSelfAttention<D, H, E> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        self.qkv_weight.visit(&join(prefix, "qkv.weight."), v);
        self.qkv_bias.visit(&join(prefix, "qkv.bias."), v);
        self.proj.visit(&join(prefix, "proj."), v);
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.qkv_weight.visit_mut(&join(prefix, "qkv.weight."), v);
        self.qkv_bias.visit_mut(&join(prefix, "qkv.bias."), v);
        self.proj.visit_mut(&join(prefix, "proj."), v);
    }
}
