//! `Dropout`: in training, zeroes each element with probability `p` and scales the rest by
//! `1 / (1 - p)`; in evaluation, the identity.
//!
//! Masks are reproducible: call `k` of `forward` (counted from construction) draws its mask
//! from the Philox stream of seed `param_seed(seed + k, "dropout")`, so a run replays exactly.
//! The counter is atomic so `forward` takes `&self` like every other layer. The mask and the
//! scale are applied in one backend op (one launch on a GPU) whose backward regenerates the
//! mask from the same seed; masks are bitwise equal across devices.

use super::init::Init;
use super::init::param_seed;
use super::module::{Module, Visitor, VisitorMut};
use crate::autograd;
use crate::error::{Result, bail, ok};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;
use std::sync::atomic::{AtomicU64, Ordering};

/// Dropout with drop probability `p` (PyTorch's `nn.Dropout(p)`), in training mode when built.
///
/// ```
/// # use rtx::prelude::*;
/// let mut drop = Dropout::new(0.5, 7);
/// let x: Tensor<Rank1<1000>> = Tensor::ones((Const,), Device::Cpu);
/// let y = drop.forward(&x).to_vec();
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
/// drop.set_training(false);
/// assert_eq!(drop.forward(&x).to_vec(), x.to_vec());
/// ```
#[derive(Debug)]
pub struct Dropout {
    p: f64,
    seed: u64,
    calls: AtomicU64,
    training: bool,
}

impl Clone for Dropout {
    fn clone(&self) -> Self {
        Dropout {
            p: self.p,
            seed: self.seed,
            calls: AtomicU64::new(self.calls.load(Ordering::Relaxed)),
            training: self.training,
        }
    }
}

impl Dropout {
    /// Dropout of probability `p`, its masks seeded by `seed`.
    ///
    /// # Panics
    /// When `p` is outside [0, 1] (see [`Dropout::try_new`]).
    #[track_caller]
    pub fn new(p: f64, seed: u64) -> Self {
        ok(Self::try_new(p, seed))
    }

    /// [`Dropout::new`], returning an error naming `p` when it is outside [0, 1].
    ///
    /// ```
    /// let err = rtx::nn::Dropout::try_new(1.5, 0).err().unwrap();
    /// assert_eq!(err.to_string(), "dropout: p must be in [0, 1], got 1.5");
    /// ```
    pub fn try_new(p: f64, seed: u64) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            bail!("dropout", "p must be in [0, 1], got {p}");
        }
        Ok(Dropout {
            p,
            seed,
            calls: AtomicU64::new(0),
            training: true,
        })
    }

    /// The drop probability.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// `x` with a fresh random mask applied and survivors scaled by `1 / (1 - p)` in training
    /// (all zeros when `p` is 1); `x` itself in evaluation.
    pub fn forward<S: Shape, E: Float>(&self, x: &Tensor<S, E>) -> Tensor<S, E> {
        let Some((keep_p, seed)) = self.next_mask() else {
            return x.clone();
        };
        if keep_p == 0.0 {
            let flat = x.reshape((x.numel(),));
            return (flat * E::from_f64(0.0)).reshape(x.shape());
        }
        ok(dropout(x, keep_p, seed))
    }

    /// Whether `forward` drops (training) rather than passing `x` through.
    pub(crate) fn is_training(&self) -> bool {
        self.training
    }

    /// The mask of the next `forward` call, counting the call: `None` for the identity
    /// (evaluation, or `p` 0), else the keep probability (0 when everything is dropped) and
    /// the mask's seed. `forward` and the static forward of `rtx::compile` both draw through
    /// it, so they apply the same masks.
    pub(crate) fn next_mask(&self) -> Option<(f64, u64)> {
        if !self.training || self.p == 0.0 {
            return None;
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        Some((
            1.0 - self.p,
            param_seed(self.seed.wrapping_add(call), "dropout"),
        ))
    }
}

/// `x * keep / keep_p` with `keep` the Bernoulli(`keep_p`) mask of `seed` (the draws of
/// `Tensor::bernoulli`), as one backend op and one tape node whose backward applies the same
/// mask, regenerated from the seed, to the gradient.
fn dropout<S: Shape, E: Float>(x: &Tensor<S, E>, keep_p: f64, seed: u64) -> Result<Tensor<S, E>> {
    let scale = 1.0 / keep_p;
    let y = x.storage().dropout(x.layout(), keep_p, scale, seed)?;
    let out = Tensor::from_storage(y, x.shape());
    if !autograd::must_record(&[x.node()]) {
        return Ok(out);
    }
    let shape = x.shape();
    Ok(out.record(vec![x.node().cloned()], move |g| {
        let dx = g.storage().dropout(g.layout(), keep_p, scale, seed)?;
        Ok(vec![autograd::erase(Tensor::from_storage(dx, shape))])
    }))
}

/// PyTorch's default `p = 0.5`, masks seeded from the model seed and the layer's name; give
/// the field `#[init(Dropout::new(p, seed))]` for another `p`.
impl Init for Dropout {
    fn init_named(_device: &Device, seed: u64, prefix: &str) -> Self {
        Self::new(0.5, param_seed(seed, prefix))
    }
}

impl Module for Dropout {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, _: &str, _: &mut V) {}
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Const;

    /// The fused op gives bitwise the composition's `x * bernoulli(1 - p) * (1 / (1 - p))`,
    /// and its gradient is the mask times the scale.
    fn fused_is_the_composition<E: Float>() {
        let n = 1003;
        let v: Vec<E> = (0..n)
            .map(|i| E::from_f64(i as f64 * 0.37 - 150.0))
            .collect();
        let x: Tensor<(usize,), E> = Tensor::from_vec(v, (n,), Device::Cpu);
        for (p, seed) in [(0.1, 3u64), (0.5, 4), (0.75, 5)] {
            let keep = Tensor::<(usize,), E>::bernoulli((n,), 1.0 - p, seed, Device::Cpu);
            let want = (&x * &keep * E::from_f64(1.0 / (1.0 - p))).to_vec();
            let xg = x.clone().requires_grad();
            let y = ok(dropout(&xg, 1.0 - p, seed));
            let bits = |v: Vec<E>| v.iter().map(|e| e.to_f64().to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(y.to_vec()), bits(want), "p = {p}");
            let g = y.sum_all().backward();
            let dx = g.get(&xg).map(|t| t.to_vec()).unwrap_or_default();
            let mask = (keep * E::from_f64(1.0 / (1.0 - p))).to_vec();
            assert_eq!(bits(dx), bits(mask), "gradient, p = {p}");
        }
    }

    #[test]
    fn fused_dropout_is_bitwise_the_composition() {
        fused_is_the_composition::<f32>();
        fused_is_the_composition::<f64>();
        fused_is_the_composition::<half::f16>();
        fused_is_the_composition::<half::bf16>();
    }

    #[test]
    fn a_layer_replays_its_masks_and_counts_calls() {
        let x: Tensor<(Const<64>,)> = Tensor::ones((Const,), Device::Cpu);
        let (a, b) = (Dropout::new(0.5, 1), Dropout::new(0.5, 1));
        let (a1, a2) = (a.forward(&x).to_vec(), a.forward(&x).to_vec());
        assert_eq!(a1, b.forward(&x).to_vec());
        assert_ne!(a1, a2, "a second call draws a new mask");
    }
}
