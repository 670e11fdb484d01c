//! Static losses: the loss functions of [`crate::nn`], by the same names, each returning the
//! loss with its backward as a closure instead of recording on the tape.
//!
//! Cross entropy runs the backend's fused op and its fused backward (`Storage::cross_entropy`
//! and the rule `rules::loss::cross_entropy_back`, which the tape's node calls too); the
//! other losses run the compositions `nn` defines them by, and their backwards apply the
//! tape's own rules (`reduce_back`, `rules::binary`, `rules::unary`) to the saved
//! intermediates, in the tape's order.
//!
//! Backwards of losses against class indices (`cross_entropy`, `nll_loss`) take the loss's
//! gradient and return the input's; backwards of losses against float targets (`mse_loss`,
//! `l1_loss`, `binary_cross_entropy_with_logits`) take `need` flags for the input and the
//! target, as [`StaticOps`](super::grad::StaticOps)'s do.

use crate::autograd::reduce::{ReduceGrad, reduce_back};
use crate::autograd::rules;
use crate::error::{Result, bail, ok};
use crate::nn::CrossEntropy;
use crate::shape::{Const, Dim, Shape, describe};
use crate::tensor::Tensor;
use rtx_kernels::Float;
use rtx_kernels::op::{BinaryOp, UnaryOp};

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
    let s = opts.label_smoothing;
    if !(0.0..=1.0).contains(&s) {
        bail!(
            "cross_entropy",
            "label_smoothing must be in [0, 1], got {s}"
        );
    }
    let (loss, saved) = logits.storage().cross_entropy(
        "cross_entropy",
        logits.layout(),
        (targets.storage(), targets.layout()),
        opts.ignore_index,
        s,
    )?;
    let (x, t) = (logits.detach(), targets.detach());
    let backward = move |dy: &Tensor<(), E>| {
        let dx = crate::rules::loss::cross_entropy_back(
            (dy.storage(), dy.layout()),
            (x.storage(), x.layout()),
            (t.storage(), t.layout()),
            &saved,
        );
        Tensor::from_storage(ok(dx), x.shape())
    };
    Ok((Tensor::from_storage(loss, ()), backward))
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
    // The eager loss checks the targets and gives the value bit for bit.
    let loss = crate::nn::try_nll_loss(&log_probs.detach(), targets)?;
    let (shape, device) = (log_probs.shape(), log_probs.device());
    let rows = log_probs.dims()[0];
    let index = targets.try_reshape((rows, Const::<1>))?;
    let backward = move |dy: &Tensor<(), E>| {
        // The tape's chain: the division by the row count, the mean's spread, the negation,
        // then gather's backward (a scatter-add into zeros).
        let g = (dy / E::from_f64(rows as f64)).neg();
        let src = g.broadcast_to((rows, Const::<1>));
        Tensor::zeros(shape, device).scatter_add::<1>(&index, &src)
    };
    Ok((loss, backward))
}

/// A prediction and a target (or their gradients), flattened.
type FlatPair<E> = (Tensor<(usize,), E>, Tensor<(usize,), E>);

/// The gradients of a prediction and a target, those asked for.
type GradPair<S, E> = (Option<Tensor<S, E>>, Option<Tensor<S, E>>);

/// The flattened `(prediction, target)` pair, with the shape check of `nn`'s losses.
fn flat_pair<S: Shape, E: Float>(
    op: &'static str,
    pred: &Tensor<S, E>,
    target: &Tensor<S, E>,
) -> Result<FlatPair<E>> {
    if pred.dims() != target.dims() {
        bail!(
            op,
            "prediction {} and target {} differ in shape",
            describe(&pred.shape()),
            describe(&target.shape())
        );
    }
    let n = pred.numel();
    Ok((
        pred.detach().try_reshape((n,))?,
        target.detach().try_reshape((n,))?,
    ))
}

/// The backward of a two-input loss: from `[n]` gradients of the flattened prediction and
/// target to their own shapes, for those asked for.
fn unflatten<S: Shape, E: Float>(
    (dp, dt): FlatPair<E>,
    shape: S,
    [need_p, need_t]: [bool; 2],
) -> GradPair<S, E> {
    (
        need_p.then(|| ok(dp.reshape_unchecked(shape))),
        need_t.then(|| ok(dt.reshape_unchecked(shape))),
    )
}

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
    impl FnOnce(&Tensor<(), E>, [bool; 2]) -> (Option<Tensor<S, E>>, Option<Tensor<S, E>>) + use<S, E>,
) {
    let (p, t) = ok(flat_pair("mse_loss", pred, target));
    let d = &p - &t;
    let sq = &d * &d;
    let loss = sq.mean_all();
    let (saved, shape) = (loss.clone(), pred.shape());
    let backward = move |dy: &Tensor<(), E>, need: [bool; 2]| {
        // The rules are fallible (a device can fail); a failure panics with its message.
        ok((|| -> Result<GradPair<S, E>> {
            let g = reduce_back(ReduceGrad::Mean, &sq, &saved, dy, None)?;
            // `d` is both factors of the square: the tape adds its two equal gradients.
            let (ga, gb) = rules::binary(BinaryOp::Mul, &d, &d, &sq, &g)?;
            let gd = ga.same::<rtx_kernels::op::markers::Add>(&gb);
            Ok(unflatten(
                rules::binary(BinaryOp::Sub, &p, &t, &d, &gd)?,
                shape,
                need,
            ))
        })())
    };
    (loss, backward)
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
    impl FnOnce(&Tensor<(), E>, [bool; 2]) -> (Option<Tensor<S, E>>, Option<Tensor<S, E>>) + use<S, E>,
) {
    let (p, t) = ok(flat_pair("l1_loss", pred, target));
    let d = &p - &t;
    let a = d.abs();
    let loss = a.mean_all();
    let (saved, shape) = (loss.clone(), pred.shape());
    let backward = move |dy: &Tensor<(), E>, need: [bool; 2]| {
        // The rules are fallible (a device can fail); a failure panics with its message.
        ok((|| -> Result<GradPair<S, E>> {
            let g = reduce_back(ReduceGrad::Mean, &a, &saved, dy, None)?;
            let gd = rules::unary(UnaryOp::Abs, &d, &a, &g)?;
            Ok(unflatten(
                rules::binary(BinaryOp::Sub, &p, &t, &d, &gd)?,
                shape,
                need,
            ))
        })())
    };
    (loss, backward)
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
    impl FnOnce(&Tensor<(), E>, [bool; 2]) -> (Option<Tensor<S, E>>, Option<Tensor<S, E>>) + use<S, E>,
) {
    let (x, y) = ok(flat_pair(
        "binary_cross_entropy_with_logits",
        logits,
        targets,
    ));
    // The stable form `max(x, 0) - x y + log(1 + e^-|x|)`, step by step as `nn` computes it.
    let relu = x.relu();
    let xy = &x * &y;
    let hinge = &relu - &xy;
    let abs = x.abs();
    let neg = abs.neg();
    let exp = neg.exp();
    let soft = exp.log1p();
    let per = &hinge + &soft;
    let loss = per.mean_all();
    let (saved, shape) = (loss.clone(), logits.shape());
    let backward = move |dy: &Tensor<(), E>, need: [bool; 2]| {
        // The rules are fallible (a device can fail); a failure panics with its message.
        ok((|| -> Result<GradPair<S, E>> {
            let g = reduce_back(ReduceGrad::Mean, &per, &saved, dy, None)?;
            let (g_hinge, g_soft) = rules::binary(BinaryOp::Add, &hinge, &soft, &per, &g)?;
            let (g_relu, g_xy) = rules::binary(BinaryOp::Sub, &relu, &xy, &hinge, &g_hinge)?;
            let (dx_xy, dy_xy) = rules::binary(BinaryOp::Mul, &x, &y, &xy, &g_xy)?;
            let g_exp = rules::unary(UnaryOp::Log1p, &exp, &soft, &g_soft)?;
            let g_neg = rules::unary(UnaryOp::Exp, &neg, &exp, &g_exp)?;
            let g_abs = g_neg.neg();
            let dx_abs = rules::unary(UnaryOp::Abs, &x, &abs, &g_abs)?;
            let dx_relu = rules::unary(UnaryOp::Relu, &x, &relu, &g_relu)?;
            // The three uses of `x` add up in the order the tape meets them.
            use rtx_kernels::op::markers::Add;
            let dx = dx_relu.same::<Add>(&dx_xy).same::<Add>(&dx_abs);
            Ok(unflatten((dx, dy_xy), shape, need))
        })())
    };
    (loss, backward)
}
