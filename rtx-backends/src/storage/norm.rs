//! Backend entry points for fused layer norm and RMS norm over the last axis: the forward
//! returns the output and the row statistics ([`NormStats`]) its backward needs.
//!
//! These are an optimization, not primitives: `rtx` defines the norms as compositions of
//! primitive ops and uses these fused forms where they pay (on a GPU, one launch instead of a
//! dozen). Both devices compute the same formula in the compute type, rounding to `E` once.

use super::erased::{AnyRef, AnyStorage, ForFloat};
use super::{Storage, same_device, to_host, upload};
use crate::cpu::norm::{self as cpu, RowStats};
use crate::cuda::ops_norm::{self as gpu, Stats};
use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::{Element, Float};
use std::borrow::Cow;

/// Per row, the mean subtracted (0 for RMS norm) and the reciprocal standard deviation, kept
/// in the compute type on the device of the forward that computed them.
#[derive(Clone, Debug)]
pub struct NormStats {
    inner: Inner,
    centered: bool,
    rows: usize,
}

/// Where the statistics live.
#[derive(Clone, Debug)]
enum Inner {
    Cpu(RowStats),
    Cuda(Stats),
    /// Computed on host copies for a registered backend device, and kept on the host: its
    /// backward runs on host copies too.
    Host(RowStats, Device),
}

impl NormStats {
    /// Whether the rows were centered (layer norm) rather than not (RMS norm).
    pub fn centered(&self) -> bool {
        self.centered
    }

    /// The per-row means (zeros for RMS norm), copied to the host.
    pub fn mean(&self) -> Result<Vec<f64>> {
        match &self.inner {
            Inner::Cpu(s) | Inner::Host(s, _) => Ok(s.mean.clone()),
            Inner::Cuda(s) => s.mean.to_f64(),
        }
    }

    /// The per-row reciprocal standard deviations, copied to the host.
    pub fn rstd(&self) -> Result<Vec<f64>> {
        match &self.inner {
            Inner::Cpu(s) | Inner::Host(s, _) => Ok(s.rstd.clone()),
            Inner::Cuda(s) => s.rstd.to_f64(),
        }
    }
}

/// Checks that an optional `[cols]` operand has `cols` elements and lives with `x`.
fn check_param<E: Float>(
    op: &'static str,
    what: &str,
    x: &Storage<E>,
    p: Option<(&Storage<E>, &Layout)>,
    cols: usize,
) -> Result<()> {
    let Some((s, l)) = p else { return Ok(()) };
    same_device(op, x, s)?;
    if l.dims() != [cols] {
        return Err(BackendError::BadArgument {
            op,
            msg: format!(
                "{what} {:?} does not match rows of {cols} elements",
                l.dims()
            ),
        });
    }
    Ok(())
}

/// The operand's elements as a dense host slice (CPU storage only, which the bodies check
/// before they call it): borrowed in place when the view is contiguous, copied otherwise.
fn host<'a, E: Float>(s: &'a Storage<E>, l: &Layout) -> Cow<'a, [E]> {
    match s {
        Storage::Cpu(v) => match l.contiguous_range() {
            Some(r) => Cow::Borrowed(&v[r]),
            None => Cow::Owned(crate::cpu::elementwise::map(v, l, |x| x)),
        },
        Storage::Cuda(_) | Storage::Backend(_) => Cow::Owned(Vec::new()),
    }
}

/// The GPU buffer of an optional operand (checked to be on the GPU by `check_param`).
fn cuda<'a, E: Float>(
    p: Option<(&'a Storage<E>, &'a Layout)>,
) -> Option<(&'a crate::cuda::CudaStorage<E>, &'a Layout)> {
    p.and_then(|(s, l)| match s {
        Storage::Cuda(c) => Some((c, l)),
        Storage::Cpu(_) | Storage::Backend(_) => None,
    })
}

fn name(centered: bool) -> &'static str {
    if centered { "layer_norm" } else { "rms_norm" }
}

impl<E: Float> Storage<E> {
    /// The body of [`Storage::norm_rows`] for one element type and a built-in device.
    fn norm_rows_body(
        &self,
        l: &Layout,
        weight: Option<(&Self, &Layout)>,
        bias: Option<(&Self, &Layout)>,
        eps: f64,
        centered: bool,
    ) -> Result<(Self, NormStats)> {
        let op = name(centered);
        let cols = l.dims().last().copied().unwrap_or(1);
        check_param(op, "weight", self, weight, cols)?;
        check_param(op, "bias", self, bias, cols)?;
        crate::dispatch::on_cpu(self.device());
        let (y, inner) = match self {
            Storage::Cpu(_) => {
                let x = host(self, l);
                let w = weight.map(|(s, l)| host(s, l));
                let b = bias.map(|(s, l)| host(s, l));
                let (y, stats) =
                    cpu::norm_rows(&x, w.as_deref(), b.as_deref(), cols, eps, centered);
                (Storage::Cpu(y), Inner::Cpu(stats))
            }
            Storage::Cuda(c) => {
                let (y, stats) = gpu::norm_rows((c, l), cuda(weight), cuda(bias), eps, centered)?;
                (Storage::Cuda(y), Inner::Cuda(stats))
            }
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        };
        let rows = l.numel().checked_div(cols).unwrap_or(0);
        Ok((
            y,
            NormStats {
                inner,
                centered,
                rows,
            },
        ))
    }

    /// The body of [`Storage::norm_rows_backward`] for one element type and a built-in
    /// device.
    #[allow(clippy::type_complexity)]
    fn norm_rows_backward_body(
        &self,
        gl: &Layout,
        (x, xl): (&Self, &Layout),
        weight: Option<(&Self, &Layout)>,
        stats: &NormStats,
        want: (bool, bool),
    ) -> Result<(Self, Option<Self>, Option<Self>)> {
        let op = name(stats.centered);
        same_device(op, self, x)?;
        let cols = xl.dims().last().copied().unwrap_or(1);
        check_param(op, "weight", self, weight, cols)?;
        let rows = xl.numel().checked_div(cols).unwrap_or(0);
        if gl.dims() != xl.dims() || rows != stats.rows {
            return Err(BackendError::BadArgument {
                op,
                msg: format!(
                    "gradient {:?} and input {:?} do not match the {} rows of the statistics",
                    gl.dims(),
                    xl.dims(),
                    stats.rows
                ),
            });
        }
        crate::dispatch::on_cpu(self.device());
        match (self, x, &stats.inner) {
            (Storage::Cpu(_), Storage::Cpu(_), Inner::Cpu(s)) => {
                let (g, xv) = (host(self, gl), host(x, xl));
                let w = weight.map(|(s, l)| host(s, l));
                let (dx, dw, db) =
                    cpu::norm_rows_backward(&g, &xv, w.as_deref(), s, cols, stats.centered, want);
                Ok((Storage::Cpu(dx), dw.map(Storage::Cpu), db.map(Storage::Cpu)))
            }
            (Storage::Cuda(g), Storage::Cuda(xc), Inner::Cuda(s)) => {
                let (dx, dw, db) = gpu::norm_rows_backward(
                    (g, gl),
                    (xc, xl),
                    cuda(weight),
                    s,
                    stats.centered,
                    want,
                )?;
                Ok((
                    Storage::Cuda(dx),
                    dw.map(Storage::Cuda),
                    db.map(Storage::Cuda),
                ))
            }
            _ => Err(elsewhere(op, self.device())),
        }
    }
}

impl<E: Float> Storage<E> {
    /// Layer norm (`centered`: `(x - mean) / sqrt(var + eps) * weight + bias`, biased
    /// variance) or RMS norm (`x / sqrt(mean(x²) + eps) * weight`) of every last-axis row of
    /// `self` viewed by `l`, computed in `E::Acc` and rounded once: the dense output and the
    /// row statistics for [`Storage::norm_rows_backward`]. `weight` and `bias` are `[cols]`.
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage};
    /// let x = Storage::from_vec(vec![1.0f32, 3.0], Device::Cpu).unwrap();
    /// let (y, stats) = x.norm_rows(&Layout::contiguous(&[1, 2]), None, None, 0.0, true).unwrap();
    /// assert_eq!(y.to_vec(&Layout::contiguous(&[2])), vec![-1.0, 1.0]);
    /// assert_eq!(stats.mean().unwrap(), vec![2.0]);
    /// ```
    pub fn norm_rows(
        &self,
        l: &Layout,
        weight: Option<(&Self, &Layout)>,
        bias: Option<(&Self, &Layout)>,
        eps: f64,
        centered: bool,
    ) -> Result<(Self, NormStats)> {
        let (weight, bias) = (weight.map(erase), bias.map(erase));
        let (y, stats) = norm_rows_any((AnyRef::of(self), l), weight, bias, eps, centered)?;
        Ok((y.into_typed(), stats))
    }

    /// The gradients of [`Storage::norm_rows`]: `self` viewed by `gl` is the output gradient,
    /// `x` the forward's input, `weight` its weight and `stats` what it returned. Returns the
    /// dense input gradient and, when `want` = `(weight, bias)` asks for them, the `[cols]`
    /// weight and bias gradients (summed over rows in order: deterministic).
    #[allow(clippy::type_complexity)]
    pub fn norm_rows_backward(
        &self,
        gl: &Layout,
        x: (&Self, &Layout),
        weight: Option<(&Self, &Layout)>,
        stats: &NormStats,
        want: (bool, bool),
    ) -> Result<(Self, Option<Self>, Option<Self>)> {
        let (g, x, weight) = ((AnyRef::of(self), gl), erase(x), weight.map(erase));
        let (dx, dw, db) = norm_rows_backward_any(g, x, weight, stats, want)?;
        Ok((
            dx.into_typed(),
            dw.map(AnyStorage::into_typed),
            db.map(AnyStorage::into_typed),
        ))
    }
}

// The entry points with the element type erased: not generic, so compiled once, here (see
// `erased.rs`).

/// A storage operand and its layout.
type Operand<'a> = (AnyRef<'a>, &'a Layout);

/// A typed operand, erased.
fn erase<'a, E: Element>((s, l): (&'a Storage<E>, &'a Layout)) -> Operand<'a> {
    (AnyRef::of(s), l)
}

/// The operand `o` as storage of `F`, named by `op` if it holds another type.
fn typed<'a, F: Float>(op: &'static str, o: Operand<'a>) -> Result<(&'a Storage<F>, &'a Layout)> {
    Ok((o.0.typed(op)?, o.1))
}

/// [`Storage::norm_rows`] of any float type, erased: compiled once, here. A registered
/// backend runs it on host copies and keeps the statistics on the host, marked with its
/// device.
fn norm_rows_any(
    x: Operand,
    weight: Option<Operand>,
    bias: Option<Operand>,
    eps: f64,
    centered: bool,
) -> Result<(AnyStorage, NormStats)> {
    let op = name(centered);
    let mut args = vec![x.0];
    args.extend(weight.map(|w| w.0));
    args.extend(bias.map(|b| b.0));
    if let Some(copies) = to_host(op, &args) {
        let (device, h) = copies?;
        let h: Vec<AnyRef> = h.iter().map(AnyStorage::as_ref).collect();
        let hw = weight.map(|w| (h[1], w.1));
        let hb = bias.map(|b| (h[args.len() - 1], b.1));
        let (y, mut stats) = norm_rows_any((h[0], x.1), hw, hb, eps, centered)?;
        stats.inner = match stats.inner {
            Inner::Cpu(s) => Inner::Host(s, device),
            other => other,
        };
        return Ok((upload(y, device)?, stats));
    }
    /// The body, run on the concrete element type.
    struct Body<'a>(&'a Layout, [Option<Operand<'a>>; 2], f64, bool);
    impl ForFloat for Body<'_> {
        type Out = Result<(AnyStorage, NormStats)>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            let op = name(self.3);
            let [w, b] = self.1.map(|p| p.map(|p| typed::<F>(op, p)).transpose());
            let (y, stats) = s.norm_rows_body(self.0, w?, b?, self.2, self.3)?;
            Ok((AnyStorage::from_typed(y), stats))
        }
    }
    x.0.floats(op, Body(x.1, [weight, bias], eps, centered))
}

/// The input, weight and bias gradients of a norm, as [`Storage::norm_rows_backward`] gives
/// them.
type NormGrads = (AnyStorage, Option<AnyStorage>, Option<AnyStorage>);

/// [`Storage::norm_rows_backward`] of any float type, erased: compiled once, here. A
/// registered backend runs it on host copies, with the statistics its forward kept on the
/// host.
fn norm_rows_backward_any(
    g: Operand,
    x: Operand,
    weight: Option<Operand>,
    stats: &NormStats,
    want: (bool, bool),
) -> Result<NormGrads> {
    let op = name(stats.centered);
    let mut args = vec![g.0, x.0];
    args.extend(weight.map(|w| w.0));
    if let Some(copies) = to_host(op, &args) {
        let (device, h) = copies?;
        let on_host = match &stats.inner {
            Inner::Host(s, d) if *d == device => NormStats {
                inner: Inner::Cpu(s.clone()),
                ..*stats
            },
            _ => return Err(elsewhere(op, device)),
        };
        let h: Vec<AnyRef> = h.iter().map(AnyStorage::as_ref).collect();
        let hw = weight.map(|w| (h[2], w.1));
        let (dx, dw, db) = norm_rows_backward_any((h[0], g.1), (h[1], x.1), hw, &on_host, want)?;
        return Ok((
            upload(dx, device)?,
            dw.map(|d| upload(d, device)).transpose()?,
            db.map(|d| upload(d, device)).transpose()?,
        ));
    }
    /// The body, run on the concrete element type.
    struct Body<'a>(
        Operand<'a>,
        Operand<'a>,
        Option<Operand<'a>>,
        &'a NormStats,
        (bool, bool),
    );
    impl ForFloat for Body<'_> {
        type Out = Result<NormGrads>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            let op = name(self.3.centered);
            let x = typed::<F>(op, self.1)?;
            let w = self.2.map(|w| typed::<F>(op, w)).transpose()?;
            let (dx, dw, db) = s.norm_rows_backward_body(self.0.1, x, w, self.3, self.4)?;
            Ok((
                AnyStorage::from_typed(dx),
                dw.map(AnyStorage::from_typed),
                db.map(AnyStorage::from_typed),
            ))
        }
    }
    g.0.floats(op, Body(g, x, weight, stats, want))
}

/// The error of a backward whose statistics were computed on another device than `device`.
fn elsewhere(op: &'static str, device: Device) -> BackendError {
    BackendError::BadArgument {
        op,
        msg: format!("the row statistics were computed on another device than {device}"),
    }
}
