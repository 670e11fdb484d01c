//! `Embedding`: a lookup table of `V` vectors of `D` features, indexed by `i64` token ids
//! (PyTorch's `nn.Embedding(V, D)`, weight `[V, D]` drawn from N(0, 1)).

use super::init::Init;
use super::init::param_seed;
use super::module::{Module, Visitor, VisitorMut, join};
use crate::shape::{Const, Dim};
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;

/// A table of `V` embeddings of `D` features; gradients flow into the selected rows.
///
/// ```
/// # use rtx::prelude::*;
/// let emb = Embedding::<10, 4>::new(Device::Cpu, 0);
/// let ids: Tensor<Rank1<3>, i64> = Tensor::from_array([1, 7, 1], Device::Cpu);
/// let v = emb.forward(&ids);
/// assert_eq!(v.dims(), &[3, 4]);
/// assert_eq!(v.to_vec()[..4], v.to_vec()[8..]);
/// ```
#[derive(Clone, Debug)]
pub struct Embedding<const V: usize, const D: usize, E: Float = f32> {
    /// The table, `[V, D]`.
    pub weight: Tensor<(Const<V>, Const<D>), E>,
}

impl<const V: usize, const D: usize, E: Float> Embedding<V, D, E> {
    /// A table drawn from N(0, 1), as PyTorch initializes it, seeded for the name `weight`.
    pub fn new(device: Device, seed: u64) -> Self {
        Self::init_named(&device, seed, "")
    }

    /// The rows at `ids`: `[B] -> [B, D]`.
    ///
    /// # Panics
    /// When an id is negative or not below `V`.
    #[track_caller]
    pub fn forward<B: Dim>(&self, ids: &Tensor<(B,), i64>) -> Tensor<(B, Const<D>), E> {
        self.weight.index_select::<0, B>(ids)
    }

    /// The rows at a batch of sequences of ids: `[B, T] -> [B, T, D]`.
    ///
    /// # Panics
    /// When an id is negative or not below `V`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let emb = Embedding::<5, 3>::new(Device::Cpu, 0);
    /// let ids: Tensor<(Dyn<'B'>, Dyn<'T'>), i64> = Tensor::zeros((Dyn(2), Dyn(4)), Device::Cpu);
    /// assert_eq!(emb.forward_seq(&ids).dims(), &[2, 4, 3]);
    /// ```
    #[track_caller]
    pub fn forward_seq<B: Dim, T: Dim>(
        &self,
        ids: &Tensor<(B, T), i64>,
    ) -> Tensor<(B, T, Const<D>), E> {
        let (b, t) = (ids.dim::<0>(), ids.dim::<1>());
        let flat = ids.reshape((ids.numel(),));
        self.weight
            .index_select::<0, usize>(&flat)
            .reshape((b, t, Const))
    }
}

impl<const V: usize, const D: usize, E: Float> Init for Embedding<V, D, E> {
    fn init_named(device: &Device, seed: u64, prefix: &str) -> Self {
        let device = *device;
        let seed = param_seed(seed, &format!("{prefix}weight"));
        Embedding {
            weight: Tensor::randn((Const, Const), seed, device),
        }
    }
}

impl<const V: usize, const D: usize, E: Float> Module for Embedding<V, D, E> {
    fn visit<V2: Visitor>(&self, prefix: &str, v: &mut V2) {
        v.enter(prefix, std::any::type_name::<Self>());
        self.weight.visit(&join(prefix, "weight."), v);
        v.leave(prefix);
    }
    fn visit_mut<V2: VisitorMut>(&mut self, prefix: &str, v: &mut V2) {
        self.weight.visit_mut(&join(prefix, "weight."), v);
    }
}
