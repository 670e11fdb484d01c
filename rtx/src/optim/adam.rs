//! Adam (PyTorch's `torch.optim.Adam`), with L2 weight decay and optional AMSGrad; AdamW
//! reuses its update with decoupled weight decay.

use super::multi::{GpuSteps, Queued, Update};
use super::state::{Store, key, zeros_like};
use super::{OptimState, Optimizer, ParamUpdate, apply, owned_storage};
use crate::autograd::Gradients;
use crate::error::{Result, bail};
use crate::nn::Module;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::AdamScalars;
use rtx_backends::{Device, Layout};
use rtx_kernels::Float;

/// Adam, as PyTorch computes it (non-fused): `g += weight_decay * p`;
/// `m = lerp(m, g, 1 - beta1)`; `v = beta2 * v + (1 - beta2) * g²`;
/// `p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)` (with the running
/// maximum of `v` under AMSGrad).
///
/// ```
/// # use rtx::prelude::*;
/// let mut w: Tensor<Rank1<2>> = Tensor::from_array([1.0, -1.0], Device::Cpu).requires_grad();
/// let grads = (&w * &w).sum_all().backward();
/// Adam::new(0.1).step(&mut w, &grads);
/// // The first step moves each weight by about lr against its gradient's sign.
/// assert!((w.to_vec()[0] - 0.9).abs() < 1e-6);
/// ```
pub struct Adam {
    pub(super) lr: f64,
    pub(super) betas: (f64, f64),
    pub(super) eps: f64,
    pub(super) weight_decay: f64,
    pub(super) amsgrad: bool,
    /// AdamW: decay multiplies the parameter instead of adding to the gradient.
    pub(super) decoupled: bool,
    pub(super) store: Store,
    /// GPU updates queued during a step, launched together at its end.
    pub(super) gpu: GpuSteps,
}

impl Adam {
    /// Adam with learning rate `lr` and PyTorch's defaults: betas (0.9, 0.999), eps 1e-8, no
    /// weight decay, no AMSGrad.
    pub fn new(lr: f64) -> Self {
        Adam {
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            decoupled: false,
            store: Store::default(),
            gpu: GpuSteps::default(),
        }
    }

    /// Sets the decay rates of the first and second moment averages.
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
        self.betas = (beta1, beta2);
        self
    }

    /// Sets the term added to the denominator.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// Sets the L2 weight decay added to the gradient.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// Switches AMSGrad (normalizing by the running maximum of `v`) on or off.
    pub fn amsgrad(mut self, amsgrad: bool) -> Self {
        self.amsgrad = amsgrad;
        self
    }

    /// The op name for errors.
    fn op(&self) -> &'static str {
        if self.decoupled { "adamw" } else { "adam" }
    }
}

struct AdamStep<'a>(&'a mut Adam);

impl ParamUpdate for AdamStep<'_> {
    fn update<S: Shape, E: Float>(
        &mut self,
        name: &str,
        p: &mut Tensor<S, E>,
        g: &Tensor<S, E>,
    ) -> Result<()> {
        let o = &mut *self.0;
        let op = o.op();
        let (m_key, v_key, x_key, step_key) = (
            key(name, "exp_avg"),
            key(name, "exp_avg_sq"),
            key(name, "max_exp_avg_sq"),
            key(name, "step"),
        );
        let m = o.store.tensor(op, &m_key, p)?;
        let v = o.store.tensor(op, &v_key, p)?;
        let x = match o.amsgrad {
            true => Some(o.store.tensor(op, &x_key, p)?),
            false => None,
        };
        let (mut m, mut v) = match (m, v) {
            (Some(m), Some(v)) => (m, v),
            (None, None) => (zeros_like(p)?, zeros_like(p)?),
            _ => bail!(
                op,
                "state of `{name}` has only one of exp_avg and exp_avg_sq"
            ),
        };
        let mut x = match x {
            Some(Some(x)) => Some(x),
            Some(None) => Some(zeros_like(p)?),
            None => None,
        };
        // Step scalars in f64, in PyTorch's order of operations.
        let step = o.store.scalar(&step_key).unwrap_or(0.0) + 1.0;
        let (beta1, beta2) = o.betas;
        let bias_correction1 = 1.0 - beta1.powf(step);
        let bias_correction2 = 1.0 - beta2.powf(step);
        let (decay, l2) = match o.decoupled {
            true if o.weight_decay != 0.0 => (1.0 - o.lr * o.weight_decay, 0.0),
            true => (1.0, 0.0),
            false => (1.0, o.weight_decay),
        };
        let s = AdamScalars {
            decay,
            l2,
            beta1,
            beta2,
            bias_correction2_sqrt: bias_correction2.powf(0.5),
            neg_step_size: -(o.lr / bias_correction1),
            eps: o.eps,
        };
        // The store lets go of the state while it is updated in place, and takes it back
        // whether or not the update succeeds (a failed update changes nothing).
        o.store.release(&m_key);
        o.store.release(&v_key);
        o.store.release(&x_key);
        if let Device::Cuda(_) = p.device() {
            // Queued for the step's multi-tensor launch: handles on storage the optimizer
            // owns alone, written in place at the end of the step.
            let queued = (|| -> Result<Queued<E>> {
                let mut state = vec![
                    owned_storage(&mut m)?.clone(),
                    owned_storage(&mut v)?.clone(),
                ];
                if let Some(x) = &mut x {
                    state.push(owned_storage(x)?.clone());
                }
                Ok(Queued {
                    param: owned_storage(p)?.clone(),
                    grad: (g.storage().clone(), *g.layout()),
                    state,
                })
            })();
            o.store.set_tensor(m_key, m);
            o.store.set_tensor(v_key, v);
            if let Some(x) = x {
                o.store.set_tensor(x_key, x);
            }
            let device = p.device();
            o.gpu.queue(device, Update::Adam(s, o.amsgrad), queued?);
            o.store.set_scalar(step_key, step);
            return Ok(());
        }
        let pl = Layout::contiguous(p.dims());
        let updated = (|| -> Result<()> {
            let x = match &mut x {
                Some(x) => Some(owned_storage(x)?),
                None => None,
            };
            let (ms, vs) = (owned_storage(&mut m)?, owned_storage(&mut v)?);
            owned_storage(p)?.adam_update_in_place(
                &pl,
                (g.storage(), g.layout()),
                ms,
                vs,
                x,
                &s,
            )?;
            Ok(())
        })();
        o.store.set_tensor(m_key, m);
        o.store.set_tensor(v_key, v);
        if let Some(x) = x {
            o.store.set_tensor(x_key, x);
        }
        updated?;
        o.store.set_scalar(step_key, step);
        Ok(())
    }
}

impl Optimizer for Adam {
    fn try_step(&mut self, model: &mut impl Module, grads: &Gradients) -> Result<()> {
        let (b1, b2) = self.betas;
        if !((0.0..1.0).contains(&b1) && (0.0..1.0).contains(&b2)) {
            bail!(self.op(), "betas must lie in [0, 1), got ({b1}, {b2})");
        }
        let on_gpu = super::on_gpu(model, grads);
        let mark = self.store.mark();
        let visited = apply(model, grads, &mut AdamStep(self), !on_gpu);
        super::finish_step(
            (model, grads),
            on_gpu,
            visited,
            (mark, &mut self.store),
            &mut self.gpu,
        )
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    fn state_dict(&self) -> OptimState {
        self.store.export(self.lr)
    }

    fn try_load_state(&mut self, state: OptimState) -> Result<()> {
        if let Some(lr) = self.store.import(self.op(), state)? {
            self.lr = lr;
        }
        Ok(())
    }
}
