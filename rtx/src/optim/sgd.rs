//! Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay
//! (PyTorch's `torch.optim.SGD`).

use super::multi::{GpuSteps, Queued, Update};
use super::state::{Store, key, zeros};
use super::{AnyParam, OptimState, Optimizer, Param, ParamUpdate, apply, owned_storage};
use crate::autograd::Gradients;
use crate::error::{Result, bail};
use crate::nn::Module;
use crate::shape::{Dims, Shape};
use crate::tensor::Tensor;
use rtx_backends::SgdScalars;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Float, bf16, f16};

/// SGD, as PyTorch computes it: `g += weight_decay * p`; with momentum, the buffer starts as
/// `g` and then becomes `momentum * buf + (1 - dampening) * g`, and the step uses `buf` (or
/// `g + momentum * buf` with Nesterov); finally `p -= lr * g`.
///
/// ```
/// # use rtx::prelude::*;
/// let mut w: Tensor<Rank1<1>> = Tensor::from_array([1.0], Device::Cpu).requires_grad();
/// let mut opt = Sgd::new(0.1).momentum(0.9);
/// for _ in 0..2 {
///     let grads = w.sum_all().backward(); // gradient 1
///     opt.step(&mut w, &grads);
/// }
/// // Buffers 1, then 0.9 + 1: w = 1 - 0.1 - 0.19.
/// assert!((w.to_vec()[0] - 0.71).abs() < 1e-6);
/// ```
pub struct Sgd {
    lr: f64,
    momentum: f64,
    dampening: f64,
    weight_decay: f64,
    nesterov: bool,
    store: Store,
    /// GPU updates queued during a step, launched together at its end.
    gpu: GpuSteps,
}

impl Sgd {
    /// Plain SGD with learning rate `lr` (no momentum, no weight decay).
    pub fn new(lr: f64) -> Self {
        Sgd {
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            store: Store::default(),
            gpu: GpuSteps::default(),
        }
    }

    /// Sets the momentum factor (0 turns momentum off).
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }

    /// Sets the dampening of the gradient added to the momentum buffer.
    pub fn dampening(mut self, dampening: f64) -> Self {
        self.dampening = dampening;
        self
    }

    /// Switches Nesterov momentum on or off (needs momentum > 0 and no dampening).
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        self.nesterov = nesterov;
        self
    }

    /// Sets the L2 weight decay added to the gradient.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }
}

struct SgdStep<'a>(&'a mut Sgd);

impl ParamUpdate for SgdStep<'_> {
    fn update<S: Shape, E: Float>(
        &mut self,
        name: &str,
        p: &mut Tensor<S, E>,
        g: &Tensor<S, E>,
    ) -> Result<()> {
        // A shell, as Adam's: the body is compiled once, in rtx.
        sgd_any(self.0, name, AnyParam::of(p, g))
    }
}

/// [`sgd_update`] for the parameter's concrete float type.
fn sgd_any(o: &mut Sgd, name: &str, p: AnyParam<'_>) -> Result<()> {
    match p.dtype() {
        DType::F32 => {
            let (p, g) = p.typed::<f32>();
            sgd_update(o, name, p, g)
        }
        DType::F64 => {
            let (p, g) = p.typed::<f64>();
            sgd_update(o, name, p, g)
        }
        DType::F16 => {
            let (p, g) = p.typed::<f16>();
            sgd_update(o, name, p, g)
        }
        DType::BF16 => {
            let (p, g) = p.typed::<bf16>();
            sgd_update(o, name, p, g)
        }
        d => unreachable!("a {d} parameter: parameters are floats"),
    }
}

/// One SGD update of the parameter `p` (called `name`) with the gradient `g`.
fn sgd_update<E: Float>(
    o: &mut Sgd,
    name: &str,
    p: Param<'_, E>,
    g: (&Storage<E>, &Layout),
) -> Result<()> {
    let dims = Dims::new(p.layout.dims());
    let device = p.storage.device();
    let buf_key = key(name, "momentum_buffer");
    let buf = if o.momentum != 0.0 {
        o.store.tensor("sgd", &buf_key, &dims, device)?
    } else {
        None
    };
    let s = SgdScalars {
        lr: o.lr,
        momentum: o.momentum,
        dampening: o.dampening,
        weight_decay: o.weight_decay,
        nesterov: o.nesterov,
        first: buf.is_none(),
    };
    let mut buf = match buf {
        Some(b) => Some(b),
        // The kernel overwrites it with the gradient on the first step.
        None if o.momentum != 0.0 => Some(zeros(&dims, device)?),
        None => None,
    };
    // As in Adam: released while updated in place, taken back whatever happens.
    o.store.release(&buf_key);
    // State is dense: this layout views all of it.
    let mut sl = Layout::contiguous(&dims);
    if let Device::Cuda(_) = device {
        // Queued for the step's multi-tensor launch, as in Adam.
        let queued = (|| -> Result<Queued<E>> {
            let state = match &mut buf {
                Some(b) => vec![owned_storage(b, &mut sl)?.clone()],
                None => Vec::new(),
            };
            Ok(Queued {
                param: owned_storage(p.storage, p.layout)?.clone(),
                grad: (g.0.clone(), *g.1),
                state,
            })
        })();
        if let Some(b) = buf {
            o.store.set_tensor(buf_key, b, &dims);
        }
        o.gpu.queue(device, Update::Sgd(s), queued?);
        return Ok(());
    }
    let updated = (|| -> Result<()> {
        let b = match &mut buf {
            Some(b) => Some(owned_storage(b, &mut sl)?),
            None => None,
        };
        let ps = owned_storage(p.storage, p.layout)?;
        ps.sgd_update_in_place(p.layout, g, b, &s)?;
        Ok(())
    })();
    if let Some(b) = buf {
        o.store.set_tensor(buf_key, b, &dims);
    }
    updated
}

impl Optimizer for Sgd {
    fn try_step(&mut self, model: &mut impl Module, grads: &Gradients) -> Result<()> {
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            bail!(
                "sgd",
                "Nesterov momentum needs momentum > 0 and zero dampening (momentum {}, dampening {})",
                self.momentum,
                self.dampening
            );
        }
        let on_gpu = super::on_gpu(model, grads);
        let mark = self.store.mark();
        let visited = apply(model, grads, &mut SgdStep(self), !on_gpu);
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
        if let Some(lr) = self.store.import("sgd", state)? {
            self.lr = lr;
        }
        Ok(())
    }
}
