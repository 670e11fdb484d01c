//! `BatchNorm` (PyTorch's `BatchNorm1d` and `BatchNorm2d`): per-channel normalization of a
//! `[N, C, ..]` input by batch statistics in training and by running statistics in evaluation.
//!
//! The running statistics are updated by `forward` (as in PyTorch), which takes `&self` like
//! every other layer, so they sit behind a mutex; `visit` and `visit_mut` reach them as buffers.
//! The channel axis is moved first and the rest flattened, so one `[C, M]` computation serves
//! every rank.

use super::init::Init;
use super::module::{Module, TensorKind, Visitor, VisitorMut, join};
use crate::error::{Result, bail, ok};
use crate::shape::{Axes3, Const, Shape, checks, describe};
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;
use std::sync::{Mutex, PoisonError};

/// The buffers `forward` updates in training.
#[derive(Clone, Debug)]
struct Running<const C: usize, E: Float> {
    mean: Tensor<(Const<C>,), E>,
    var: Tensor<(Const<C>,), E>,
    batches: Tensor<(), E>,
}

/// Batch normalization over `C` channels of a `[N, C]`, `[N, C, L]` or `[N, C, H, W]` input.
/// Parameters `weight` (ones) and `bias` (zeros); buffers `running_mean` (zeros),
/// `running_var` (ones) and `num_batches_tracked` (PyTorch's names; the count is a float
/// scalar here, since modules visit float tensors only). Momentum 0.1, eps 1e-5.
///
/// ```
/// # use rtx::prelude::*;
/// let bn = BatchNorm2d::<2>::new(Device::Cpu);
/// let x: Tensor<Rank4<2, 2, 1, 1>> = Tensor::from_array([[[[1.0]], [[5.0]]], [[[3.0]], [[5.0]]]], Device::Cpu);
/// let y = bn.forward(&x); // training: batch statistics
/// assert_eq!(y.dims(), &[2, 2, 1, 1]);
/// assert!((y.to_vec()[0] + 1.0).abs() < 1e-4); // (1 - 2) / sqrt(1 + 1e-5)
/// assert_eq!(bn.running_mean().to_vec(), vec![0.2, 0.5]);
/// ```
#[derive(Debug)]
pub struct BatchNorm<const C: usize, E: Float = f32> {
    /// The per-channel scale, `[C]`.
    pub weight: Tensor<(Const<C>,), E>,
    /// The per-channel shift, `[C]`.
    pub bias: Tensor<(Const<C>,), E>,
    /// The weight of the newest batch in the running statistics.
    pub momentum: f64,
    /// Added to the variance before its square root.
    pub eps: f64,
    running: Mutex<Running<C, E>>,
    training: bool,
}

/// PyTorch's `BatchNorm1d`: [`BatchNorm`] over `[N, C]` or `[N, C, L]`.
pub type BatchNorm1d<const C: usize, E = f32> = BatchNorm<C, E>;
/// PyTorch's `BatchNorm2d`: [`BatchNorm`] over `[N, C, H, W]`.
pub type BatchNorm2d<const C: usize, E = f32> = BatchNorm<C, E>;

impl<const C: usize, E: Float> Clone for BatchNorm<C, E> {
    fn clone(&self) -> Self {
        BatchNorm {
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            momentum: self.momentum,
            eps: self.eps,
            running: Mutex::new(self.running().clone()),
            training: self.training,
        }
    }
}

impl<const C: usize, E: Float> BatchNorm<C, E> {
    /// A layer in training mode with PyTorch's initial values (no randomness, so no seed).
    pub fn new(device: Device) -> Self {
        BatchNorm {
            weight: Tensor::ones((Const,), device),
            bias: Tensor::zeros((Const,), device),
            momentum: 0.1,
            eps: 1e-5,
            running: Mutex::new(Running {
                mean: Tensor::zeros((Const,), device),
                var: Tensor::ones((Const,), device),
                batches: Tensor::zeros((), device),
            }),
            training: true,
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Running<C, E>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The running mean, `[C]`.
    pub fn running_mean(&self) -> Tensor<(Const<C>,), E> {
        self.running().mean.clone()
    }

    /// The running (unbiased) variance, `[C]`.
    pub fn running_var(&self) -> Tensor<(Const<C>,), E> {
        self.running().var.clone()
    }

    /// The number of training batches seen.
    pub fn num_batches_tracked(&self) -> Tensor<(), E> {
        self.running().batches.clone()
    }

    /// Whether `forward` uses batch statistics (and updates the running ones).
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// Normalizes each channel of a `[N, C, ..]` input: by the batch's mean and biased
    /// variance in training (updating the running mean and unbiased variance with
    /// `momentum`), by the running statistics in evaluation; then scales and shifts.
    ///
    /// # Panics
    /// When axis 1 is not `C` long or the input has rank below 2 (see
    /// [`BatchNorm::try_forward`]).
    #[track_caller]
    pub fn forward<S: Shape>(&self, x: &Tensor<S, E>) -> Tensor<S, E> {
        const { checks::channels::<S, C>() };
        ok(self.forward_run(x))
    }

    /// [`BatchNorm::forward`], returning an error naming the shape when it does not fit.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let bn = BatchNorm1d::<3>::new(Device::Cpu);
    /// let x: Tensor<(usize, usize)> = Tensor::zeros((4, 2), Device::Cpu);
    /// let err = bn.try_forward(&x).err().unwrap();
    /// assert_eq!(err.to_string(), "batch_norm: input [4, 2] does not have 3 channels on axis 1");
    /// ```
    pub fn try_forward<S: Shape>(&self, x: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        const { checks::channels::<S, C>() };
        self.forward_run(x)
    }

    /// The body of `forward` and `try_forward` after their const check (see
    /// `crate::shape::checks` for why the check sits in each of them).
    pub(crate) fn forward_run<S: Shape>(&self, x: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        let d = x.dims();
        if d.len() < 2 || d[1] != C {
            bail!(
                "batch_norm",
                "input {} does not have {C} channels on axis 1",
                describe(&x.shape())
            );
        }
        let (n, rest) = (d[0], d[2..].iter().product::<usize>());
        if self.training && n * rest < 2 {
            bail!(
                "batch_norm",
                "training needs more than one value per channel, got input {}",
                describe(&x.shape())
            );
        }
        let x2: Tensor<(Const<C>, usize), E> = x
            .try_reshape((n, Const::<C>, rest))?
            .permute::<Axes3<1, 0, 2>>()
            .try_reshape((Const, n * rest))?;
        let full = x2.shape();
        let (mean, var) = if self.training {
            let mean = x2.mean_keepdim::<1>();
            let var = x2.var_keepdim::<1>(0);
            self.update_running(&x2);
            (mean, var)
        } else {
            let r = self.running();
            let col = (Const::<C>, Const::<1>);
            (r.mean.try_reshape(col)?, r.var.try_reshape(col)?)
        };
        let inv_std = (var + E::from_f64(self.eps)).rsqrt();
        let xhat = (&x2 - mean.broadcast_to(full)) * inv_std.broadcast_to(full);
        let col = (Const::<C>, Const::<1>);
        let w = self.weight.try_reshape(col)?.broadcast_to(full);
        let b = self.bias.try_reshape(col)?.broadcast_to(full);
        let y = xhat * w + b;
        y.try_reshape((Const::<C>, n, rest))?
            .permute::<Axes3<1, 0, 2>>()
            .try_reshape(x.shape())
    }

    /// Moves the running statistics toward those of `x2` (`[C, rows]`), as a training
    /// `forward` does; the static forward of `rtx::compile` calls it too.
    pub(crate) fn update_running(&self, x2: &Tensor<(Const<C>, usize), E>) {
        crate::no_grad(|| {
            let x2 = x2.detach();
            let m = self.momentum;
            let mut r = self.running();
            let mean = &r.mean * E::from_f64(1.0 - m) + x2.mean::<1>() * E::from_f64(m);
            let var = &r.var * E::from_f64(1.0 - m) + x2.var::<1>(1) * E::from_f64(m);
            let batches = &r.batches + E::from_f64(1.0);
            *r = Running { mean, var, batches };
        })
    }
}

/// Weight ones, bias zeros, running mean zeros and running variance ones (the seed is unused).
impl<const C: usize, E: Float> Init for BatchNorm<C, E> {
    fn init_named(device: &Device, _seed: u64, _prefix: &str) -> Self {
        Self::new(*device)
    }
}

impl<const C: usize, E: Float> Module for BatchNorm<C, E> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        self.weight.visit(&join(prefix, "weight."), v);
        self.bias.visit(&join(prefix, "bias."), v);
        let r = self.running();
        v.visit(&join(prefix, "running_mean"), &r.mean, TensorKind::Buffer);
        v.visit(&join(prefix, "running_var"), &r.var, TensorKind::Buffer);
        let name = join(prefix, "num_batches_tracked");
        v.visit(&name, &r.batches, TensorKind::Buffer);
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.weight.visit_mut(&join(prefix, "weight."), v);
        self.bias.visit_mut(&join(prefix, "bias."), v);
        let r = self
            .running
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        v.visit_mut(
            &join(prefix, "running_mean"),
            &mut r.mean,
            TensorKind::Buffer,
        );
        v.visit_mut(&join(prefix, "running_var"), &mut r.var, TensorKind::Buffer);
        let name = join(prefix, "num_batches_tracked");
        v.visit_mut(&name, &mut r.batches, TensorKind::Buffer);
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}
