//! Loss functions returning a scalar `Tensor<(), E>` that back-propagates: cross entropy (with
//! ignored targets and label smoothing), negative log-likelihood, mean squared and absolute
//! errors, and binary cross entropy on logits. All reduce by the mean, PyTorch's default.
//!
//! Cross entropy is one tape node over the backend's fused op (`Storage::cross_entropy`: on a
//! GPU two launches forward, one backward; the targets are checked on the device and only the
//! first bad one comes back); the tests hold it to its composition (log_softmax, gather,
//! masked_fill, mean). The other losses are compositions of differentiable ops.

use crate::autograd;
use crate::error::{Result, bail, ok};
use crate::shape::{Dim, Shape, describe};
use crate::tensor::Tensor;
use rtx_kernels::{Float, Num};

/// A flattened `[n]` tensor, as the losses work on internally.
type Flat<E> = Tensor<(usize,), E>;

/// Options of [`cross_entropy_with`] (PyTorch's `ignore_index` and `label_smoothing`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CrossEntropy {
    /// Targets equal to this add nothing and are not counted in the mean.
    pub ignore_index: Option<i64>,
    /// In [0, 1]: the weight moved from the target class to a uniform distribution.
    pub label_smoothing: f64,
}

/// The mean cross entropy of `[B, C]` logits against `[B]` class indices.
///
/// # Panics
/// When a target is outside `0..C` (see [`try_cross_entropy_with`]).
///
/// ```
/// # use rtx::prelude::*;
/// let logits: Tensor<Rank2<1, 2>> = Tensor::from_array([[0.0, 0.0]], Device::Cpu);
/// let targets: Tensor<Rank1<1>, i64> = Tensor::from_array([1], Device::Cpu);
/// let loss = cross_entropy(&logits, &targets);
/// assert!((loss.item() - 2f32.ln()).abs() < 1e-6);
/// ```
#[track_caller]
pub fn cross_entropy<B: Dim, C: Dim, E: Float>(
    logits: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
) -> Tensor<(), E> {
    ok(try_cross_entropy_with(
        logits,
        targets,
        CrossEntropy::default(),
    ))
}

/// [`cross_entropy`] with options: ignored targets and label smoothing, with PyTorch's
/// semantics (`(1 - s) * nll + s * mean_c(-log p_c)` per row, averaged over the rows whose
/// target is not ignored; NaN when every target is ignored).
///
/// # Panics
/// When a target is outside `0..C` or the options are out of range (see
/// [`try_cross_entropy_with`]).
///
/// ```
/// # use rtx::prelude::*;
/// let logits: Tensor<Rank2<2, 2>> = Tensor::from_array([[0.0, 0.0], [5.0, -5.0]], Device::Cpu);
/// let targets: Tensor<Rank1<2>, i64> = Tensor::from_array([1, -100], Device::Cpu);
/// let opts = CrossEntropy { ignore_index: Some(-100), ..Default::default() };
/// let loss = cross_entropy_with(&logits, &targets, opts);
/// assert!((loss.item() - 2f32.ln()).abs() < 1e-6);
/// ```
#[track_caller]
pub fn cross_entropy_with<B: Dim, C: Dim, E: Float>(
    logits: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
    opts: CrossEntropy,
) -> Tensor<(), E> {
    ok(try_cross_entropy_with(logits, targets, opts))
}

/// [`cross_entropy_with`], returning an error naming the bad target or option.
///
/// ```
/// # use rtx::prelude::*;
/// let logits: Tensor<Rank2<1, 2>> = Tensor::zeros((Const, Const), Device::Cpu);
/// let targets: Tensor<Rank1<1>, i64> = Tensor::from_array([0], Device::Cpu);
/// let opts = CrossEntropy { label_smoothing: 2.0, ..Default::default() };
/// let err = try_cross_entropy_with(&logits, &targets, opts).err().unwrap();
/// assert_eq!(err.to_string(), "cross_entropy: label_smoothing must be in [0, 1], got 2");
/// ```
pub fn try_cross_entropy_with<B: Dim, C: Dim, E: Float>(
    logits: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
    opts: CrossEntropy,
) -> Result<Tensor<(), E>> {
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
    let out = Tensor::from_storage(loss, ());
    if !autograd::must_record(&[logits.node()]) {
        return Ok(out);
    }
    let inputs = vec![logits.node().cloned()];
    let (x, t) = (logits.detach(), targets.detach());
    Ok(out.record(inputs, move |g| {
        let dx = crate::rules::loss::cross_entropy_back(
            (g.storage(), g.layout()),
            (x.storage(), x.layout()),
            (t.storage(), t.layout()),
            &saved,
        )?;
        Ok(vec![autograd::erase(Tensor::from_storage(dx, x.shape()))])
    }))
}

/// Cross entropy as a composition of primitive ops (log_softmax, gather, masked_fill, mean):
/// the definition the fused node is held to in the tests.
#[cfg(test)]
fn composed_cross_entropy<B: Dim, C: Dim, E: Float>(
    logits: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
    opts: CrossEntropy,
) -> Result<Tensor<(), E>> {
    let s = opts.label_smoothing;
    let logp = logits.log_softmax::<1>();
    let (b, c) = (logits.dims()[0], logits.dims()[1]);
    let logp = logp.try_reshape((b, c))?;
    let (targets, ignored) = targets_and_ignored("cross_entropy", targets, c, opts.ignore_index)?;
    let picked = logp.try_gather::<1, _>(&targets.try_reshape((b, 1))?)?;
    let mut loss = picked.try_reshape((b,))?.neg();
    if s > 0.0 {
        let smooth = logp.mean::<1>().neg();
        loss = loss * E::from_f64(1.0 - s) + smooth * E::from_f64(s);
    }
    Ok(mean_over_kept(&loss, &ignored))
}

/// The mean negative log-likelihood of `[B, C]` log-probabilities against `[B]` class indices
/// (PyTorch's `nll_loss`): `-mean_i log_probs[i, targets[i]]`.
///
/// # Panics
/// When a target is outside `0..C` (see [`try_nll_loss`]).
///
/// ```
/// # use rtx::prelude::*;
/// let logp: Tensor<Rank2<2, 2>> = Tensor::from_array([[-1.0, -2.0], [-3.0, -4.0]], Device::Cpu);
/// let targets: Tensor<Rank1<2>, i64> = Tensor::from_array([1, 0], Device::Cpu);
/// assert_eq!(nll_loss(&logp, &targets).item(), 2.5);
/// ```
#[track_caller]
pub fn nll_loss<B: Dim, C: Dim, E: Float>(
    log_probs: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
) -> Tensor<(), E> {
    ok(try_nll_loss(log_probs, targets))
}

/// [`nll_loss`], returning an error naming the bad target.
///
/// ```
/// # use rtx::prelude::*;
/// let logp: Tensor<Rank2<1, 2>> = Tensor::zeros((Const, Const), Device::Cpu);
/// let targets: Tensor<Rank1<1>, i64> = Tensor::from_array([2], Device::Cpu);
/// let err = try_nll_loss(&logp, &targets).err().unwrap();
/// assert_eq!(err.to_string(), "nll_loss: target 2 at [0] is outside 0..2");
/// ```
pub fn try_nll_loss<B: Dim, C: Dim, E: Float>(
    log_probs: &Tensor<(B, C), E>,
    targets: &Tensor<(B,), i64>,
) -> Result<Tensor<(), E>> {
    let (b, c) = (log_probs.dims()[0], log_probs.dims()[1]);
    let (targets, ignored) = targets_and_ignored("nll_loss", targets, c, None)?;
    let lp = log_probs.try_reshape((b, c))?;
    let picked = lp.try_gather::<1, _>(&targets.try_reshape((b, 1))?)?;
    Ok(mean_over_kept(&picked.try_reshape((b,))?.neg(), &ignored))
}

/// Targets as `[B]` run-time sized indices (ignored ones replaced by 0), and the mask of
/// ignored targets; an error names the first target outside `0..classes`.
fn targets_and_ignored<B: Dim>(
    op: &'static str,
    targets: &Tensor<(B,), i64>,
    classes: usize,
    ignore: Option<i64>,
) -> Result<(Flat<i64>, Flat<bool>)> {
    let t = targets.try_reshape((targets.numel(),))?;
    let ignored = match ignore {
        Some(i) => t.eq(i),
        None => Tensor::full(t.shape(), false, t.device()),
    };
    let values = t.to_vec();
    for (i, (&v, skip)) in values.iter().zip(ignored.to_vec()).enumerate() {
        if !skip && !(0..classes as i64).contains(&v) {
            bail!(op, "target {v} at [{i}] is outside 0..{classes}");
        }
    }
    Ok((t.masked_fill(&ignored, 0), ignored))
}

/// The mean of `loss` over the entries not marked in `ignored`.
fn mean_over_kept<E: Float>(
    loss: &Tensor<(usize,), E>,
    ignored: &Tensor<(usize,), bool>,
) -> Tensor<(), E> {
    let kept = (loss.numel() - ignored.to_vec().iter().filter(|&&m| m).count()) as f64;
    loss.masked_fill(ignored, <E as Num>::ZERO).sum_all() / E::from_f64(kept)
}

/// `(prediction, target)` flattened to `[numel]`, or an error naming both shapes.
fn flat_pair<S: Shape, E: Float>(
    op: &'static str,
    pred: &Tensor<S, E>,
    target: &Tensor<S, E>,
) -> Result<(Flat<E>, Flat<E>)> {
    if pred.dims() != target.dims() {
        bail!(
            op,
            "prediction {} and target {} differ in shape",
            describe(&pred.shape()),
            describe(&target.shape())
        );
    }
    let n = pred.numel();
    Ok((pred.try_reshape((n,))?, target.try_reshape((n,))?))
}

/// The mean squared error (PyTorch's `mse_loss`).
///
/// # Panics
/// When run-time shapes differ.
///
/// ```
/// # use rtx::prelude::*;
/// let p: Tensor<Rank1<2>> = Tensor::from_array([1.0, 3.0], Device::Cpu);
/// let t: Tensor<Rank1<2>> = Tensor::from_array([0.0, 0.0], Device::Cpu);
/// assert_eq!(mse_loss(&p, &t).item(), 5.0);
/// ```
#[track_caller]
pub fn mse_loss<S: Shape, E: Float>(pred: &Tensor<S, E>, target: &Tensor<S, E>) -> Tensor<(), E> {
    ok(try_mse_loss(pred, target))
}

/// [`mse_loss`], returning the shape error; the static loss (`compile::loss`) records it.
pub(crate) fn try_mse_loss<S: Shape, E: Float>(
    pred: &Tensor<S, E>,
    target: &Tensor<S, E>,
) -> Result<Tensor<(), E>> {
    let (p, t) = flat_pair("mse_loss", pred, target)?;
    let d = p - t;
    Ok((&d * &d).mean_all())
}

/// The mean absolute error (PyTorch's `l1_loss`).
///
/// # Panics
/// When run-time shapes differ.
///
/// ```
/// # use rtx::prelude::*;
/// let p: Tensor<Rank1<2>> = Tensor::from_array([1.0, -3.0], Device::Cpu);
/// let t: Tensor<Rank1<2>> = Tensor::from_array([0.0, 0.0], Device::Cpu);
/// assert_eq!(l1_loss(&p, &t).item(), 2.0);
/// ```
#[track_caller]
pub fn l1_loss<S: Shape, E: Float>(pred: &Tensor<S, E>, target: &Tensor<S, E>) -> Tensor<(), E> {
    ok(try_l1_loss(pred, target))
}

/// [`l1_loss`], returning the shape error; the static loss (`compile::loss`) records it.
pub(crate) fn try_l1_loss<S: Shape, E: Float>(
    pred: &Tensor<S, E>,
    target: &Tensor<S, E>,
) -> Result<Tensor<(), E>> {
    let (p, t) = flat_pair("l1_loss", pred, target)?;
    Ok((p - t).abs().mean_all())
}

/// Binary cross entropy of logits against targets in [0, 1] (PyTorch's
/// `binary_cross_entropy_with_logits`), in the stable form
/// `max(x, 0) - x * y + log(1 + e^-|x|)`.
///
/// # Panics
/// When run-time shapes differ.
///
/// ```
/// # use rtx::prelude::*;
/// let x: Tensor<Rank1<2>> = Tensor::from_array([0.0, 1000.0], Device::Cpu);
/// let y: Tensor<Rank1<2>> = Tensor::from_array([1.0, 1.0], Device::Cpu);
/// assert!((binary_cross_entropy_with_logits(&x, &y).item() - 2f32.ln() / 2.0).abs() < 1e-6);
/// ```
#[track_caller]
pub fn binary_cross_entropy_with_logits<S: Shape, E: Float>(
    logits: &Tensor<S, E>,
    targets: &Tensor<S, E>,
) -> Tensor<(), E> {
    ok(try_binary_cross_entropy_with_logits(logits, targets))
}

/// [`binary_cross_entropy_with_logits`], returning the shape error; the static loss
/// (`compile::loss`) records it.
pub(crate) fn try_binary_cross_entropy_with_logits<S: Shape, E: Float>(
    logits: &Tensor<S, E>,
    targets: &Tensor<S, E>,
) -> Result<Tensor<(), E>> {
    let (x, y) = flat_pair("binary_cross_entropy_with_logits", logits, targets)?;
    let loss = x.relu() - &x * &y + x.abs().neg().exp().log1p();
    Ok(loss.mean_all())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd::Gradients;
    use rtx_backends::Device;

    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 * 8.0
                    - 4.0
            })
            .collect()
    }

    /// The fused node against the composition: the loss and the gradient of `3 * loss` over a
    /// transposed (non-contiguous) view of the logits, 37 classes, some targets ignored.
    fn fused_matches_the_composition<E: Float>(tol: f64) {
        let (rows, classes) = (6usize, 37usize);
        let stored: Tensor<(usize, usize), E> = Tensor::from_vec(
            values(rows * classes, 7)
                .into_iter()
                .map(E::from_f64)
                .collect(),
            (classes, rows),
            Device::Cpu,
        );
        let targets: Tensor<(usize,), i64> =
            Tensor::from_vec(vec![36, -100, 0, 5, -100, 17], (rows,), Device::Cpu);
        for (ignore, smoothing) in [(None, 0.0), (Some(-100), 0.0), (Some(-100), 0.3)] {
            let t = if ignore.is_some() {
                targets.clone()
            } else {
                Tensor::from_vec(vec![36, 1, 0, 5, 2, 17], (rows,), Device::Cpu)
            };
            let opts = CrossEntropy {
                ignore_index: ignore,
                label_smoothing: smoothing,
            };
            let x = stored.t().requires_grad();
            let fused = ok(try_cross_entropy_with(&x, &t, opts));
            let composed = ok(composed_cross_entropy(&x, &t, opts));
            let (f, c) = (fused.item().to_f64(), composed.item().to_f64());
            assert!(
                (f - c).abs() <= tol * c.abs().max(1.0),
                "{opts:?}: {f} vs {c}"
            );
            let grad = |g: Gradients| g.get(&x).map(|t| t.to_vec()).unwrap_or_default();
            let gf = grad((fused * E::from_f64(3.0)).backward());
            let gc = grad((composed * E::from_f64(3.0)).backward());
            assert_eq!(gf.len(), rows * classes);
            for (i, (a, b)) in gf.iter().zip(&gc).enumerate() {
                let (a, b) = (a.to_f64(), b.to_f64());
                assert!(
                    (a - b).abs() <= tol * b.abs().max(1.0),
                    "{opts:?}, {i}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn fused_cross_entropy_matches_its_composition_with_gradients() {
        fused_matches_the_composition::<f64>(1e-12);
        fused_matches_the_composition::<f32>(1e-5);
    }

    #[test]
    fn bad_targets_are_named_by_value_and_row() {
        let logits: Tensor<(usize, usize)> = Tensor::zeros((3, 2), Device::Cpu);
        let targets: Tensor<(usize,), i64> = Tensor::from_vec(vec![1, -100, -1], (3,), Device::Cpu);
        let msg = |opts| {
            try_cross_entropy_with(&logits, &targets, opts)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            msg(CrossEntropy::default()),
            Some("cross_entropy: target -100 at [1] is outside 0..2".into())
        );
        let ignore = CrossEntropy {
            ignore_index: Some(-100),
            ..Default::default()
        };
        assert_eq!(
            msg(ignore),
            Some("cross_entropy: target -1 at [2] is outside 0..2".into())
        );
    }

    #[test]
    fn every_target_ignored_gives_nan_and_zero_gradients() {
        let logits: Tensor<(usize, usize)> =
            Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], (2, 2), Device::Cpu).requires_grad();
        let targets: Tensor<(usize,), i64> = Tensor::from_vec(vec![-1, -1], (2,), Device::Cpu);
        let opts = CrossEntropy {
            ignore_index: Some(-1),
            label_smoothing: 0.1,
        };
        let loss = cross_entropy_with(&logits, &targets, opts);
        assert!(loss.item().is_nan());
        let g = loss.backward().get(&logits).map(|t| t.to_vec());
        assert_eq!(g, Some(vec![0.0; 4]));
    }

    /// Times the fused node against the composition on the CPU at the MNIST shape
    /// (`cargo test --release -p rtx --lib cross_entropy_cpu_time -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn cross_entropy_cpu_time() {
        let (rows, classes) = (128usize, 10usize);
        let x: Tensor<(usize, usize)> = Tensor::from_vec(
            values(rows * classes, 3)
                .iter()
                .map(|&v| v as f32)
                .collect(),
            (rows, classes),
            Device::Cpu,
        );
        let t: Tensor<(usize,), i64> = Tensor::from_vec(
            (0..rows as i64).map(|i| i % 10).collect(),
            (rows,),
            Device::Cpu,
        );
        let opts = CrossEntropy::default();
        let time = |f: &dyn Fn() -> Result<Tensor<(), f32>>| {
            let start = std::time::Instant::now();
            for _ in 0..2000 {
                let _ = ok(f()).backward();
            }
            start.elapsed().as_secs_f64() / 2000.0 * 1e6
        };
        let fused = time(&|| try_cross_entropy_with(&x.clone().requires_grad(), &t, opts));
        let composed = time(&|| composed_cross_entropy(&x.clone().requires_grad(), &t, opts));
        println!(
            "cross entropy forward + backward, [128, 10] f32: fused {fused:.1} µs, composition {composed:.1} µs"
        );
    }
}
