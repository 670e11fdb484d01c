//! `Dropout`: in training, zeroes each element with probability `p` and scales the rest by
//! `1 / (1 - p)`; in evaluation, the identity.
//!
//! Masks are reproducible: call `k` of `forward` (counted from construction) draws its mask
//! from the Philox stream of seed `param_seed(seed + k, "dropout")`, so a run replays exactly.
//! The counter is atomic so `forward` takes `&self` like every other layer.

use super::init::Init;
use super::init::param_seed;
use super::module::{Module, Visitor, VisitorMut};
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
        if !self.training || self.p == 0.0 {
            return x.clone();
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        let flat = x.reshape((x.numel(),));
        let y = if self.p == 1.0 {
            flat * E::from_f64(0.0)
        } else {
            let seed = param_seed(self.seed.wrapping_add(call), "dropout");
            let keep =
                Tensor::<(usize,), E>::bernoulli(flat.shape(), 1.0 - self.p, seed, x.device());
            flat * keep * E::from_f64(1.0 / (1.0 - self.p))
        };
        y.reshape(x.shape())
    }
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
