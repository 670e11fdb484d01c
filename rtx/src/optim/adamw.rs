//! AdamW: Adam with decoupled weight decay (PyTorch's `torch.optim.AdamW`).

use super::{Adam, OptimState, Optimizer};
use crate::autograd::Gradients;
use crate::error::Result;
use crate::nn::Module;

/// AdamW, as PyTorch computes it: `p *= 1 - lr * weight_decay`, then the [`Adam`] update
/// without L2 decay.
///
/// ```
/// # use rtx::prelude::*;
/// let mut w: Tensor<Rank1<1>> = Tensor::from_array([2.0], Device::Cpu).requires_grad();
/// let grads = (&w * 0.0).sum_all().backward(); // zero gradient: only the decay acts
/// AdamW::new(0.1).weight_decay(0.5).step(&mut w, &grads);
/// assert!((w.to_vec()[0] - 2.0 * 0.95).abs() < 1e-6);
/// ```
pub struct AdamW(Adam);

impl AdamW {
    /// AdamW with learning rate `lr` and PyTorch's defaults: betas (0.9, 0.999), eps 1e-8,
    /// weight decay 0.01, no AMSGrad.
    pub fn new(lr: f64) -> Self {
        let mut a = Adam::new(lr).weight_decay(0.01);
        a.decoupled = true;
        AdamW(a)
    }

    /// Sets the decay rates of the first and second moment averages.
    pub fn betas(self, beta1: f64, beta2: f64) -> Self {
        AdamW(self.0.betas(beta1, beta2))
    }

    /// Sets the term added to the denominator.
    pub fn eps(self, eps: f64) -> Self {
        AdamW(self.0.eps(eps))
    }

    /// Sets the decoupled weight decay.
    pub fn weight_decay(self, weight_decay: f64) -> Self {
        AdamW(self.0.weight_decay(weight_decay))
    }

    /// Switches AMSGrad on or off.
    pub fn amsgrad(self, amsgrad: bool) -> Self {
        AdamW(self.0.amsgrad(amsgrad))
    }
}

impl Optimizer for AdamW {
    fn try_step(&mut self, model: &mut impl Module, grads: &Gradients) -> Result<()> {
        self.0.try_step(model, grads)
    }

    fn lr(&self) -> f64 {
        self.0.lr()
    }

    fn set_lr(&mut self, lr: f64) {
        self.0.set_lr(lr);
    }

    fn state_dict(&self) -> OptimState {
        self.0.state_dict()
    }

    fn try_load_state(&mut self, state: OptimState) -> Result<()> {
        self.0.try_load_state(state)
    }
}
