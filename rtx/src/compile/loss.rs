//! Static losses: the loss functions of [`crate::nn`], by the same names, each returning the
//! loss with its backward as a closure instead of recording on the tape.
//!
//! Each runs `nn`'s loss once on its inputs made fresh leaves ([`super::grad`]'s
//! `try_vjp1`/`try_vjp2`), and its backward runs the rules that loss recorded: the fused cross
//! entropy's one node (`rules::loss::cross_entropy_back`), the compositions' nodes (`mse_loss`,
//! `l1_loss`, `binary_cross_entropy_with_logits`, `nll_loss`) in the tape's order. So a
//! static loss's gradient is the tape's by construction.
//!
//! Backwards of losses against class indices (`cross_entropy`, `nll_loss`) take the loss's
//! gradient and return the input's; backwards of losses against float targets (`mse_loss`,
//! `l1_loss`, `binary_cross_entropy_with_logits`) take `need` flags for the input and the
//! target, as [`vjp2`](super::grad::vjp2)'s do.

use super::grad::{try_vjp1, try_vjp2};
use crate::error::{Result, ok};
use crate::nn::CrossEntropy;
use crate::nn::loss as eager;
use crate::shape::{Dim, Shape};
use crate::tensor::Tensor;
use rtx_kernels::Float;

/// [`crate::nn::cross_entropy`] with its backward (the fused kernels' backward).
///
/// ```
/// use rtx::prelude::*;
/// let logits: Tensor<Rank2<1, 2>> = Tensor::from_array([[0.0, 0.0]], Device::Cpu);
/// let targets: Tensor<Rank1<1>, i64> = Tensor::from_array([1], Device::Cpu);
/// let (loss, backward) = rtx::compile::loss::cross_entropy(&logits, &targets);
/// assert!((loss.item() - 2f32.ln()).abs() < 1e-6);
/// assert_eq!(backward(&loss.ones_like()).to_vec(), vec![0.5, -0.5]);
/// ```
///
/// # Panics
/// When a target is outside `0..C` (see [`try_cross_entropy_with`]).
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn cross_entropy<B: Dim, C: Dim, E: Float>(
    logits: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
) -> (
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>) -> Tensor<(B, C), E> + use<B, C, E>,
) {
    ok(try_cross_entropy_with(
        logits,
        targets,
        CrossEntropy::default(),
    ))
}

/// [`crate::nn::cross_entropy_with`] (ignored targets, label smoothing) with its backward.
///
/// ```
/// use rtx::prelude::*;
/// let logits: Tensor<Rank2<2, 2>> = Tensor::from_array([[0.0, 0.0], [5.0, -5.0]], Device::Cpu);
/// let targets: Tensor<Rank1<2>, i64> = Tensor::from_array([1, -100], Device::Cpu);
/// let opts = CrossEntropy { ignore_index: Some(-100), ..Default::default() };
/// let (loss, backward) = rtx::compile::loss::cross_entropy_with(&logits, &targets, opts);
/// assert!((loss.item() - 2f32.ln()).abs() < 1e-6);
/// assert_eq!(backward(&loss.ones_like()).to_vec(), vec![0.5, -0.5, 0.0, 0.0]);
/// ```
///
/// # Panics
/// When a target is outside `0..C` or the options are out of range (see
/// [`try_cross_entropy_with`]).
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn cross_entropy_with<B: Dim, C: Dim, E: Float>(
    logits: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
    opts: CrossEntropy,
) -> (
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>) -> Tensor<(B, C), E> + use<B, C, E>,
) {
    ok(try_cross_entropy_with(logits, targets, opts))
}

/// [`cross_entropy_with`], returning an error naming the bad target or option (the errors of
/// [`crate::nn::try_cross_entropy_with`]).
///
/// ```
/// use rtx::prelude::*;
/// let logits: Tensor<Rank2<1, 2>> = Tensor::zeros((Const, Const), Device::Cpu);
/// let targets: Tensor<Rank1<1>, i64> = Tensor::from_array([2], Device::Cpu);
/// let err = rtx::compile::loss::try_cross_entropy_with(&logits, &targets, Default::default());
/// assert_eq!(err.err().unwrap().to_string(), "cross_entropy: target 2 at [0] is outside 0..2");
/// ```
#[allow(clippy::type_complexity)]
pub fn try_cross_entropy_with<B: Dim, C: Dim, E: Float>(
    logits: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
    opts: CrossEntropy,
) -> Result<(
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>) -> Tensor<(B, C), E> + use<B, C, E>,
)> {
    let (loss, backward) = try_vjp1(logits, &|x| eager::try_cross_entropy_with(x, targets, opts))?;
    // The logits are floats, so their gradient is always computed.
    let backward = move |dy: &Tensor<(), E>| {
        backward(dy, [true]).unwrap_or_else(|| unreachable!("a float input's gradient"))
    };
    Ok((loss, backward))
}

/// [`crate::nn::nll_loss`] with its backward: `-dy / B` at each row's target, zero elsewhere.
///
/// ```
/// use rtx::prelude::*;
/// let logp: Tensor<Rank2<2, 2>> = Tensor::from_array([[-1.0, -2.0], [-3.0, -4.0]], Device::Cpu);
/// let targets: Tensor<Rank1<2>, i64> = Tensor::from_array([1, 0], Device::Cpu);
/// let (loss, backward) = rtx::compile::loss::nll_loss(&logp, &targets);
/// assert_eq!(loss.item(), 2.5);
/// assert_eq!(backward(&loss.ones_like()).to_vec(), vec![0.0, -0.5, -0.5, 0.0]);
/// ```
///
/// # Panics
/// When a target is outside `0..C` (see [`try_nll_loss`]).
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn nll_loss<B: Dim, C: Dim, E: Float>(
    log_probs: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
) -> (
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>) -> Tensor<(B, C), E> + use<B, C, E>,
) {
    ok(try_nll_loss(log_probs, targets))
}

/// [`nll_loss`], returning an error naming the bad target (as [`crate::nn::try_nll_loss`]).
#[allow(clippy::type_complexity)]
pub fn try_nll_loss<B: Dim, C: Dim, E: Float>(
    log_probs: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
) -> Result<(
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>) -> Tensor<(B, C), E> + use<B, C, E>,
)> {
    let (loss, backward) = try_vjp1(log_probs, &|x| eager::try_nll_loss(x, targets))?;
    // The log-probabilities are floats, so their gradient is always computed.
    let backward = move |dy: &Tensor<(), E>| {
        backward(dy, [true]).unwrap_or_else(|| unreachable!("a float input's gradient"))
    };
    Ok((loss, backward))
}

/// The gradients of a prediction and a target, those asked for.
type GradPair<S, E> = (Option<Tensor<S, E>>, Option<Tensor<S, E>>);

/// [`crate::nn::mse_loss`] with its backward, for the prediction and the target.
///
/// ```
/// use rtx::prelude::*;
/// let p: Tensor<Rank1<2>> = Tensor::from_array([1.0, 3.0], Device::Cpu);
/// let t: Tensor<Rank1<2>> = Tensor::from_array([0.0, 0.0], Device::Cpu);
/// let (loss, backward) = rtx::compile::loss::mse_loss(&p, &t);
/// assert_eq!(loss.item(), 5.0);
/// let (dp, dt) = backward(&loss.ones_like(), [true, false]);
/// assert_eq!(dp.unwrap().to_vec(), vec![1.0, 3.0]);
/// assert!(dt.is_none());
/// ```
///
/// # Panics
/// When run-time shapes differ.
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn mse_loss<S: Shape, E: Float>(
    pred: &Tensor<S, E>,
    target: &Tensor<S, E>,
) -> (
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>, [bool; 2]) -> GradPair<S, E> + use<S, E>,
) {
    ok(try_vjp2(pred, target, &|p, t| eager::try_mse_loss(p, t)))
}

/// [`crate::nn::l1_loss`] with its backward, for the prediction and the target.
///
/// ```
/// use rtx::prelude::*;
/// let p: Tensor<Rank1<2>> = Tensor::from_array([1.0, -3.0], Device::Cpu);
/// let t: Tensor<Rank1<2>> = Tensor::from_array([0.0, 0.0], Device::Cpu);
/// let (loss, backward) = rtx::compile::loss::l1_loss(&p, &t);
/// assert_eq!(loss.item(), 2.0);
/// assert_eq!(backward(&loss.ones_like(), [true, true]).0.unwrap().to_vec(), vec![0.5, -0.5]);
/// ```
///
/// # Panics
/// When run-time shapes differ.
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn l1_loss<S: Shape, E: Float>(
    pred: &Tensor<S, E>,
    target: &Tensor<S, E>,
) -> (
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>, [bool; 2]) -> GradPair<S, E> + use<S, E>,
) {
    ok(try_vjp2(pred, target, &|p, t| eager::try_l1_loss(p, t)))
}

/// [`crate::nn::binary_cross_entropy_with_logits`] with its backward, for the logits and the
/// targets.
///
/// ```
/// use rtx::prelude::*;
/// let x: Tensor<Rank1<2>, f64> = Tensor::from_array([2.0, -1.0], Device::Cpu);
/// let y: Tensor<Rank1<2>, f64> = Tensor::from_array([1.0, 0.0], Device::Cpu);
/// let (loss, backward) = rtx::compile::loss::binary_cross_entropy_with_logits(&x, &y);
/// let dx = backward(&loss.ones_like(), [true, false]).0.unwrap().to_vec();
/// let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
/// assert!((dx[0] - (sigmoid(2.0) - 1.0) / 2.0).abs() < 1e-12); // (sigmoid(x) - y) / 2
/// assert!((dx[1] - sigmoid(-1.0) / 2.0).abs() < 1e-12);
/// ```
///
/// # Panics
/// When run-time shapes differ.
#[track_caller]
#[allow(clippy::type_complexity)]
pub fn binary_cross_entropy_with_logits<S: Shape, E: Float>(
    logits: &Tensor<S, E>,
    targets: &Tensor<S, E>,
) -> (
    Tensor<(), E>,
    impl FnOnce(&Tensor<(), E>, [bool; 2]) -> GradPair<S, E> + use<S, E>,
) {
    ok(try_vjp2(logits, targets, &|x, y| {
        eager::try_binary_cross_entropy_with_logits(x, y)
    }))
}
