//! Backend entry points for fused layer norm and RMS norm over the last axis: the forward
//! returns the output and the row statistics ([`NormStats`]) its backward needs.
//!
//! These are an optimization, not primitives: `rtx` defines the norms as compositions of
//! primitive ops and uses these fused forms where they pay (on a GPU, one launch instead of a
//! dozen). Both devices compute the same formula in the compute type, rounding to `E` once.

use super::{Storage, same_device};
use crate::cpu::norm::{self as cpu, RowStats};
use crate::cuda::ops_norm::{self as gpu, Stats};
use crate::{BackendError, Layout, Result};
use rtx_kernels::Float;
use std::borrow::Cow;

/// Per row, the mean subtracted (0 for RMS norm) and the reciprocal standard deviation, kept
/// in the compute type on the device of the forward that computed them.
#[derive(Clone, Debug)]
pub struct NormStats {
    inner: Inner,
    centered: bool,
    rows: usize,
}

#[derive(Clone, Debug)]
enum Inner {
    Cpu(RowStats),
    Cuda(Stats),
}

impl NormStats {
    /// Whether the rows were centered (layer norm) rather than not (RMS norm).
    pub fn centered(&self) -> bool {
        self.centered
    }

    /// The per-row means (zeros for RMS norm), copied to the host.
    pub fn mean(&self) -> Result<Vec<f64>> {
        match &self.inner {
            Inner::Cpu(s) => Ok(s.mean.clone()),
            Inner::Cuda(s) => s.mean.to_f64(),
        }
    }

    /// The per-row reciprocal standard deviations, copied to the host.
    pub fn rstd(&self) -> Result<Vec<f64>> {
        match &self.inner {
            Inner::Cpu(s) => Ok(s.rstd.clone()),
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

/// The operand's elements as a dense host slice (CPU storage only): borrowed in place when
/// the view is contiguous, copied otherwise.
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
            Storage::Backend(_) => return Err(super::no_kernel(op, self.device())),
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

    /// The gradients of [`Storage::norm_rows`]: `self` viewed by `gl` is the output gradient,
    /// `x` the forward's input, `weight` its weight and `stats` what it returned. Returns the
    /// dense input gradient and, when `want` = `(weight, bias)` asks for them, the `[cols]`
    /// weight and bias gradients (summed over rows in order: deterministic).
    #[allow(clippy::type_complexity)]
    pub fn norm_rows_backward(
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
            _ => Err(BackendError::BadArgument {
                op,
                msg: format!(
                    "the row statistics were computed on another device than {}",
                    self.device()
                ),
            }),
        }
    }
}
