//! Backend entry points for cross entropy fused with log-softmax (forward with the saved
//! logsumexps, backward in one pass) and for dropout drawn from the Philox stream.
//!
//! These are optimizations, not primitives: `rtx` defines cross entropy as log-softmax,
//! gather and a mean over kept rows, and dropout as a Bernoulli mask times a scale; its tests
//! hold these fused forms to those definitions. Both devices compute the same formulas in the
//! compute type and round once; dropout masks are bitwise equal across devices.

use super::erased::{AnyRef, AnyStorage, ForFloat};
use super::{Storage, host_only, same_device, to_host, upload};
use crate::cpu::loss as cpu;
use crate::cuda::ops_loss as gpu;
use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::{Float, Philox};
use std::borrow::Cow;

/// What [`Storage::cross_entropy`] keeps for its backward: per row the logsumexp and the
/// count of kept rows, on the device that computed them, with the options used.
#[derive(Clone, Debug)]
pub struct CrossEntropySaved {
    inner: Inner,
    rows: usize,
    ignore: Option<i64>,
    smoothing: f64,
}

/// Where the saved values live.
#[derive(Clone, Debug)]
enum Inner {
    Cpu(cpu::CeSaved),
    Cuda(gpu::CeSaved),
    /// Computed on host copies for a registered backend device, and kept on the host: its
    /// backward runs on host copies too.
    Host(cpu::CeSaved, Device),
}

impl CrossEntropySaved {
    /// The number of rows whose target was neither ignored nor out of range, copied to the
    /// host.
    pub fn kept(&self) -> Result<usize> {
        match &self.inner {
            Inner::Cpu(s) | Inner::Host(s, _) => Ok(s.kept),
            Inner::Cuda(s) => Ok(s.kept.to_f64()?.first().map_or(0, |&k| k as usize)),
        }
    }
}

/// The viewed elements of CPU storage (the bodies call it on nothing else), borrowed when the
/// view is one contiguous range.
fn host<'a, E: rtx_kernels::Element>(s: &'a Storage<E>, l: &Layout) -> Cow<'a, [E]> {
    match (s, l.contiguous_range()) {
        (Storage::Cpu(v), Some(r)) => Cow::Borrowed(&v[r]),
        (Storage::Cpu(v), None) => Cow::Owned(crate::cpu::elementwise::map(v, l, |x| x)),
        (Storage::Cuda(_) | Storage::Backend(_), _) => Cow::Owned(Vec::new()),
    }
}

/// Checks that `x` is `[rows, cols]` and `targets` `[rows]` on its device.
fn check<E: Float>(
    op: &'static str,
    x: &Storage<E>,
    xl: &Layout,
    t: &Storage<i64>,
    tl: &Layout,
) -> Result<(usize, usize)> {
    same_device(op, x, t)?;
    match (xl.dims(), tl.dims()) {
        (&[rows, cols], &[n]) if n == rows => Ok((rows, cols)),
        (x, t) => Err(BackendError::BadArgument {
            op,
            msg: format!("logits {x:?} and targets {t:?} are not [rows, classes] and [rows]"),
        }),
    }
}

impl<E: Float> Storage<E> {
    /// The mean cross entropy of `[rows, cols]` logits (`self` viewed by `l`) against
    /// `[rows]` class indices, with PyTorch's `ignore_index` and `label_smoothing` `s`: per
    /// kept row `(1 - s) * (lse - x[t]) + s * (lse - mean_c x[c])`, averaged over the rows
    /// whose target is not `ignore` (NaN when there are none), as a one-element storage, and
    /// what [`Storage::cross_entropy_backward`] needs. An error under `op` names the first
    /// target that is neither ignored nor inside `0..cols` (on a GPU, found there and read
    /// back as one 16-byte pair).
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// let x = Storage::from_vec(vec![0.0f64, 0.0], Device::Cpu).unwrap();
    /// let t = Storage::from_vec(vec![1i64], Device::Cpu).unwrap();
    /// let (l, tl) = (Layout::contiguous(&[1, 2]), Layout::contiguous(&[1]));
    /// let (loss, _) = x.cross_entropy("cross_entropy", &l, (&t, &tl), None, 0.0).unwrap();
    /// assert!((loss.to_vec(&Layout::contiguous(&[1]))[0] - 2f64.ln()).abs() < 1e-12);
    /// let bad = Storage::from_vec(vec![2i64], Device::Cpu).unwrap();
    /// let err = x.cross_entropy("cross_entropy", &l, (&bad, &tl), None, 0.0).unwrap_err();
    /// assert_eq!(err.to_string(), "cross_entropy: target 2 at [0] is outside 0..2");
    /// ```
    pub fn cross_entropy(
        &self,
        op: &'static str,
        l: &Layout,
        (t, tl): (&Storage<i64>, &Layout),
        ignore: Option<i64>,
        smoothing: f64,
    ) -> Result<(Self, CrossEntropySaved)> {
        let (x, t) = ((AnyRef::of(self), l), (AnyRef::of(t), tl));
        let (loss, saved) = cross_entropy_any(op, x, t, ignore, smoothing)?;
        Ok((loss.into_typed(), saved))
    }

    /// The gradient of [`Storage::cross_entropy`] with respect to its logits: `self` viewed by
    /// `gl` is the one-element output gradient `g`, `x` and `targets` the forward's inputs and
    /// `saved` what it returned. Dense `[rows, cols]`:
    /// `g / kept * (softmax(x) - (1 - s) * onehot(t) - s / cols)`, 0 on rows not kept.
    pub fn cross_entropy_backward(
        &self,
        gl: &Layout,
        (x, xl): (&Self, &Layout),
        (t, tl): (&Storage<i64>, &Layout),
        saved: &CrossEntropySaved,
    ) -> Result<Self> {
        let (g, x, t) = (
            (AnyRef::of(self), gl),
            (AnyRef::of(x), xl),
            (AnyRef::of(t), tl),
        );
        Ok(cross_entropy_backward_any(g, x, t, saved)?.into_typed())
    }

    /// Dropout of the viewed elements, dense: `x * keep * scale` where `keep` is 1 when word
    /// `i` of the Philox stream of `seed` is below `Philox::bernoulli_threshold(keep_p)` (the
    /// draw `Storage::random` makes for a Bernoulli(`keep_p`) tensor) and `scale` is taken as
    /// `E` rounds it. The same call on the output gradient is the backward. One pass; bitwise
    /// equal across devices.
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// let x = Storage::from_vec(vec![1.0f32; 64], Device::Cpu).unwrap();
    /// let y = x.dropout(&Layout::contiguous(&[64]), 0.5, 2.0, 9).unwrap();
    /// assert!(y.to_vec(&Layout::contiguous(&[64])).iter().all(|&v| v == 0.0 || v == 2.0));
    /// ```
    pub fn dropout(&self, l: &Layout, keep_p: f64, scale: f64, seed: u64) -> Result<Self> {
        Ok(dropout_any(AnyRef::of(self), l, keep_p, scale, seed)?.into_typed())
    }
}

// The entry points with the element type erased: not generic, so compiled once, here (see
// `erased.rs`).

/// A storage operand and its layout.
type Operand<'a> = (AnyRef<'a>, &'a Layout);

/// [`Storage::cross_entropy`] of any float type, erased: compiled once, here. A registered
/// backend runs it on host copies and keeps the logsumexps on the host, marked with its
/// device.
fn cross_entropy_any(
    op: &'static str,
    x: Operand,
    t: Operand,
    ignore: Option<i64>,
    smoothing: f64,
) -> Result<(AnyStorage, CrossEntropySaved)> {
    if let Some(copies) = to_host(op, &[x.0, t.0]) {
        let (device, h) = copies?;
        let (hx, ht) = ((h[0].as_ref(), x.1), (h[1].as_ref(), t.1));
        let (loss, mut saved) = cross_entropy_any(op, hx, ht, ignore, smoothing)?;
        saved.inner = match saved.inner {
            Inner::Cpu(s) => Inner::Host(s, device),
            other => other,
        };
        return Ok((upload(loss, device)?, saved));
    }
    /// The body, run on the concrete element type.
    struct Body<'a>(&'static str, &'a Layout, Operand<'a>, Option<i64>, f64);
    impl ForFloat for Body<'_> {
        type Out = Result<(AnyStorage, CrossEntropySaved)>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            let (op, (t, tl)) = (self.0, self.2);
            let (loss, saved) =
                s.cross_entropy_body(op, self.1, (t.typed(op)?, tl), self.3, self.4)?;
            Ok((AnyStorage::from_typed(loss), saved))
        }
    }
    x.0.floats(op, Body(op, x.1, t, ignore, smoothing))
}

/// [`Storage::cross_entropy_backward`] of any float type, erased: compiled once, here. A
/// registered backend runs it on host copies, with the logsumexps its forward kept on the
/// host.
fn cross_entropy_backward_any(
    g: Operand,
    x: Operand,
    t: Operand,
    saved: &CrossEntropySaved,
) -> Result<AnyStorage> {
    let op = "cross_entropy";
    if let Some(copies) = to_host(op, &[g.0, x.0, t.0]) {
        let (device, h) = copies?;
        let on_host = match &saved.inner {
            Inner::Host(s, d) if *d == device => CrossEntropySaved {
                inner: Inner::Cpu(s.clone()),
                ..*saved
            },
            _ => return Err(elsewhere(op, device)),
        };
        let h: Vec<AnyRef> = h.iter().map(AnyStorage::as_ref).collect();
        let dx = cross_entropy_backward_any((h[0], g.1), (h[1], x.1), (h[2], t.1), &on_host)?;
        return upload(dx, device);
    }
    /// The body, run on the concrete element type.
    struct Body<'a>(&'a Layout, Operand<'a>, Operand<'a>, &'a CrossEntropySaved);
    impl ForFloat for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            let (op, (x, xl), (t, tl)) = ("cross_entropy", self.1, self.2);
            s.cross_entropy_backward_body(self.0, (x.typed(op)?, xl), (t.typed(op)?, tl), self.3)
                .map(AnyStorage::from_typed)
        }
    }
    g.0.floats(op, Body(g.1, x, t, saved))
}

/// [`Storage::dropout`] of any float type, erased: compiled once, here. A registered backend
/// runs it on host copies, which draw the CPU's mask.
fn dropout_any(x: AnyRef, l: &Layout, keep_p: f64, scale: f64, seed: u64) -> Result<AnyStorage> {
    let on_copies = |h: &[AnyRef]| dropout_any(h[0], l, keep_p, scale, seed);
    if let Some(out) = host_only("dropout", &[x], &on_copies) {
        return out;
    }
    /// The body, run on the concrete element type.
    struct Body<'a>(&'a Layout, f64, f64, u64);
    impl ForFloat for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            s.dropout_body(self.0, self.1, self.2, self.3)
                .map(AnyStorage::from_typed)
        }
    }
    x.floats("dropout", Body(l, keep_p, scale, seed))
}

/// The error of a backward whose logsumexps were computed on another device than `device`.
fn elsewhere(op: &'static str, device: Device) -> BackendError {
    BackendError::BadArgument {
        op,
        msg: format!("the saved logsumexps were computed on another device than {device}"),
    }
}

impl<E: Float> Storage<E> {
    /// The body of [`Storage::cross_entropy`] for one element type and a built-in device.
    fn cross_entropy_body(
        &self,
        op: &'static str,
        l: &Layout,
        (t, tl): (&Storage<i64>, &Layout),
        ignore: Option<i64>,
        smoothing: f64,
    ) -> Result<(Self, CrossEntropySaved)> {
        let (rows, cols) = check(op, self, l, t, tl)?;
        crate::dispatch::on_cpu(self.device());
        let (loss, inner) = match (self, t) {
            (Storage::Backend(_), _) | (_, Storage::Backend(_)) => {
                unreachable!("{}", super::ROUTED)
            }
            (Storage::Cuda(x), Storage::Cuda(tc)) => {
                let (loss, saved) = gpu::cross_entropy(op, (x, l), (tc, tl), ignore, smoothing)?;
                (Storage::Cuda(loss), Inner::Cuda(saved))
            }
            _ => {
                let targets = host(t, tl);
                if let Some((row, target)) = cpu::first_bad_target(&targets, cols, ignore) {
                    return Err(BackendError::BadArgument {
                        op,
                        msg: format!("target {target} at [{row}] is outside 0..{cols}"),
                    });
                }
                let x = host(self, l);
                let (loss, saved) = cpu::cross_entropy(&x, &targets, cols, ignore, smoothing);
                (Storage::Cpu(vec![loss]), Inner::Cpu(saved))
            }
        };
        let saved = CrossEntropySaved {
            inner,
            rows,
            ignore,
            smoothing,
        };
        Ok((loss, saved))
    }

    /// The body of [`Storage::cross_entropy_backward`] for one element type and a built-in
    /// device.
    fn cross_entropy_backward_body(
        &self,
        gl: &Layout,
        (x, xl): (&Self, &Layout),
        (t, tl): (&Storage<i64>, &Layout),
        saved: &CrossEntropySaved,
    ) -> Result<Self> {
        let op = "cross_entropy";
        same_device(op, self, x)?;
        let (rows, cols) = check(op, x, xl, t, tl)?;
        if gl.numel() != 1 || rows != saved.rows {
            return Err(BackendError::BadArgument {
                op,
                msg: format!(
                    "gradient {:?} and logits {:?} do not match a loss over {} rows",
                    gl.dims(),
                    xl.dims(),
                    saved.rows
                ),
            });
        }
        crate::dispatch::on_cpu(self.device());
        let (ignore, smoothing) = (saved.ignore, saved.smoothing);
        match (self, x, t, &saved.inner) {
            (Storage::Cpu(_), Storage::Cpu(_), Storage::Cpu(_), Inner::Cpu(s)) => {
                let g = host(self, gl)[0];
                let (xv, tv) = (host(x, xl), host(t, tl));
                Ok(Storage::Cpu(cpu::cross_entropy_backward(
                    g, &xv, &tv, cols, ignore, smoothing, s,
                )))
            }
            (Storage::Cuda(g), Storage::Cuda(xc), Storage::Cuda(tc), Inner::Cuda(s)) => {
                Ok(Storage::Cuda(gpu::cross_entropy_backward(
                    (g, gl),
                    (xc, xl),
                    (tc, tl),
                    s,
                    ignore,
                    smoothing,
                )?))
            }
            _ => Err(elsewhere(op, self.device())),
        }
    }

    /// The body of [`Storage::dropout`] for one element type and a built-in device.
    fn dropout_body(&self, l: &Layout, keep_p: f64, scale: f64, seed: u64) -> Result<Self> {
        let threshold = Philox::bernoulli_threshold(keep_p);
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(_) => Ok(Storage::Cpu(cpu::dropout(
                &host(self, l),
                seed,
                threshold,
                scale,
            ))),
            Storage::Cuda(x) => Ok(Storage::Cuda(gpu::dropout((x, l), seed, threshold, scale)?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }
}
