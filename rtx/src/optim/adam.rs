//! Adam (PyTorch's `torch.optim.Adam`), with L2 weight decay and optional AMSGrad; AdamW
//! reuses its update with decoupled weight decay.

use super::multi::{GpuSteps, Queued, Update};
use super::state::{Store, key, zeros};
use super::{AnyParam, OptimState, Optimizer, Param, ParamUpdate, apply, owned_storage};
use crate::autograd::Gradients;
use crate::error::{Result, bail};
use crate::nn::Module;
use crate::shape::{Dims, Shape};
use crate::tensor::Tensor;
use rtx_backends::AdamScalars;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Float, bf16, f16};

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
        // A shell: the update needs only the parts, so its body is compiled once, in rtx,
        // instead of once per parameter shape in every crate that trains a model.
        adam_any(self.0, name, AnyParam::of(p, g))
    }
}

/// [`adam_update`] for the parameter's concrete float type.
fn adam_any(o: &mut Adam, name: &str, p: AnyParam<'_>) -> Result<()> {
    match p.dtype() {
        DType::F32 => {
            let (p, g) = p.typed::<f32>();
            adam_update(o, name, p, g)
        }
        DType::F64 => {
            let (p, g) = p.typed::<f64>();
            adam_update(o, name, p, g)
        }
        DType::F16 => {
            let (p, g) = p.typed::<f16>();
            adam_update(o, name, p, g)
        }
        DType::BF16 => {
            let (p, g) = p.typed::<bf16>();
            adam_update(o, name, p, g)
        }
        d => unreachable!("a {d} parameter: parameters are floats"),
    }
}

/// One Adam/AdamW update of the parameter `p` (called `name`) with the gradient `g`.
fn adam_update<E: Float>(
    o: &mut Adam,
    name: &str,
    p: Param<'_, E>,
    g: (&Storage<E>, &Layout),
) -> Result<()> {
    let op = o.op();
    let dims = Dims::new(p.layout.dims());
    let device = p.storage.device();
    let (m_key, v_key, x_key, step_key) = (
        key(name, "exp_avg"),
        key(name, "exp_avg_sq"),
        key(name, "max_exp_avg_sq"),
        key(name, "step"),
    );
    let m = o.store.tensor(op, &m_key, &dims, device)?;
    let v = o.store.tensor(op, &v_key, &dims, device)?;
    let x = match o.amsgrad {
        true => Some(o.store.tensor(op, &x_key, &dims, device)?),
        false => None,
    };
    let (mut m, mut v) = match (m, v) {
        (Some(m), Some(v)) => (m, v),
        (None, None) => (zeros(&dims, device)?, zeros(&dims, device)?),
        _ => bail!(
            op,
            "state of `{name}` has only one of exp_avg and exp_avg_sq"
        ),
    };
    let mut x = match x {
        Some(Some(x)) => Some(x),
        Some(None) => Some(zeros(&dims, device)?),
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
    // State is dense: this layout views all of it.
    let mut sl = Layout::contiguous(&dims);
    if let Device::Cuda(_) = device {
        // Queued for the step's multi-tensor launch: handles on storage the optimizer
        // owns alone, written in place at the end of the step.
        let queued = (|| -> Result<Queued<E>> {
            let mut state = vec![
                owned_storage(&mut m, &mut sl)?.clone(),
                owned_storage(&mut v, &mut sl)?.clone(),
            ];
            if let Some(x) = &mut x {
                state.push(owned_storage(x, &mut sl)?.clone());
            }
            Ok(Queued {
                param: owned_storage(p.storage, p.layout)?.clone(),
                grad: (g.0.clone(), *g.1),
                state,
            })
        })();
        o.store.set_tensor(m_key, m, &dims);
        o.store.set_tensor(v_key, v, &dims);
        if let Some(x) = x {
            o.store.set_tensor(x_key, x, &dims);
        }
        o.gpu.queue(device, Update::Adam(s, o.amsgrad), queued?);
        o.store.set_scalar(step_key, step);
        return Ok(());
    }
    let updated = (|| -> Result<()> {
        let x = match &mut x {
            Some(x) => Some(owned_storage(x, &mut sl)?),
            None => None,
        };
        let ms = owned_storage(&mut m, &mut sl)?;
        let vs = owned_storage(&mut v, &mut sl)?;
        let ps = owned_storage(p.storage, p.layout)?;
        ps.adam_update_in_place(p.layout, g, ms, vs, x, &s)?;
        Ok(())
    })();
    o.store.set_tensor(m_key, m, &dims);
    o.store.set_tensor(v_key, v, &dims);
    if let Some(x) = x {
        o.store.set_tensor(x_key, x, &dims);
    }
    updated?;
    o.store.set_scalar(step_key, step);
    Ok(())
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
