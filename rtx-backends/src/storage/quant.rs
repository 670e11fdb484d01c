//! The backend entry points for ggml blocks (GGUF tensors) held as little-endian words:
//! dequantizing them (the kernel's native code on the CPU, its f32 entry on a GPU), and
//! products of f32 activations with quantized weights (`cpu/qmatmul.rs` on the CPU, the
//! `qmatmul_ggml` kernel on a GPU).
//!
//! Invariant: the words are checked to hold every block the values need before any kernel
//! runs, so neither device reads out of bounds.

use super::Storage;
use crate::cpu::qmatmul::{self, QWeight};
use crate::{BackendError, Layout, Result};

/// What a quantized product takes in besides its weight and activations
/// ([`Storage::qmatmul_joined`]): the rows' RMS norm before it and a residual added after it,
/// a decoding block's neighbours, joined to the product so that a step launches fewer kernels.
#[derive(Clone, Copy, Default)]
pub struct QJoin<'a> {
    /// RMS-norm each row of the activations first, `x / sqrt(mean(x²) + eps) * weight`: the
    /// weight (`[k]`, its layout) and `eps`.
    pub norm: Option<(&'a Storage<f32>, &'a Layout, f64)>,
    /// A residual (`[m, n]`, its layout) added to the product.
    pub residual: Option<(&'a Storage<f32>, &'a Layout)>,
}

impl Storage<i32> {
    /// The first `n` values of the ggml blocks in `self` (little-endian words, zero-padded)
    /// of GGUF type id `kind`, with `block` values in `type_size` bytes per block, as f32:
    /// `gguf.quants.dequantize`, bit for bit (`rtx_kernels::kernels::dequantize_ggml`).
    pub fn dequantize_ggml(
        &self,
        kind: u32,
        block: usize,
        type_size: usize,
        n: usize,
    ) -> Result<Storage<f32>> {
        let bytes = (n / block.max(1)).checked_mul(type_size);
        if block == 0
            || !n.is_multiple_of(block)
            || bytes.is_none_or(|b| b.div_ceil(4) > self.len())
        {
            return Err(BackendError::BadArgument {
                op: "dequantize_ggml",
                msg: format!(
                    "{n} values in blocks of {block} of {type_size} bytes do not fit in {} \
                     words",
                    self.len()
                ),
            });
        }
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => Ok(Storage::Cpu(crate::cpu::quant::dequantize(
                v, kind, block, type_size, n,
            )?)),
            Storage::Cuda(c) => Ok(Storage::Cuda(crate::cuda::ops_quant::dequantize(
                c, kind, block, type_size, n,
            )?)),
            Storage::Backend(_) => Err(super::no_kernel("dequantize", self.device())),
        }
    }

    /// `x · Wᵀ` for the quantized weight `W` `[n, k]` in `self` (GGUF type id `kind`: 8 for
    /// `Q8_0` or 3 for `Q4_1`) and f32 activations `x` viewed by `xl` as `[m, k]`, as a
    /// dense `[m, n]` f32 storage, without dequantizing the weight: on the CPU each row of
    /// `x` is quantized to 8 bits per 32 values on the fly, as llama.cpp does; on a GPU each
    /// weight block is decoded in registers and meets the f32 activations.
    pub fn qmatmul(
        &self,
        kind: u32,
        (n, k): (usize, usize),
        x: &Storage<f32>,
        xl: &Layout,
    ) -> Result<Storage<f32>> {
        let mut out = Storage::qmatmul_each(&[(self, kind, n)], k, x, xl)?;
        Ok(out.pop().expect("one product"))
    }

    /// [`Storage::qmatmul`] with its neighbours in `join`: the rows of `x` RMS-normed first,
    /// and a residual added after. On a GPU a product of at most
    /// `rtx_kernels::kernels::QMATVEC_ROWS` rows (a decoding step) is one launch with both
    /// joined, and a longer one adds the residual in its own launch (the norm before it is
    /// one more); on the CPU they are the norm, the product and the sum in turn.
    pub fn qmatmul_joined(
        &self,
        kind: u32,
        (n, k): (usize, usize),
        x: &Storage<f32>,
        xl: &Layout,
        join: QJoin<'_>,
    ) -> Result<Storage<f32>> {
        let m = xl.dims().first().copied().unwrap_or(0);
        let bad = |msg: String| BackendError::BadArgument {
            op: "quantized matmul",
            msg,
        };
        if let Some((g, gl, _)) = join.norm
            && (gl.dims() != [k] || g.device() != x.device())
        {
            return Err(bad(format!(
                "the norm's weight {:?} on {} is not [{k}] on the activations' device {}",
                gl.dims(),
                g.device(),
                x.device()
            )));
        }
        if let Some((r, rl)) = join.residual
            && (rl.dims() != [m, n] || r.device() != x.device())
        {
            return Err(bad(format!(
                "the residual {:?} on {} is not [{m}, {n}] on the activations' device {}",
                rl.dims(),
                r.device(),
                x.device()
            )));
        }
        if join.norm.is_none() && join.residual.is_none() {
            return self.qmatmul(kind, (n, k), x, xl);
        }
        Storage::qmatmul_check(&[(self, kind, n)], k, x, xl)?;
        let cuda = |s: &Storage<f32>| match s {
            Storage::Cuda(c) => Some(c.clone()),
            _ => None,
        };
        let residual = join.residual.and_then(|(r, rl)| Some((cuda(r)?, rl)));
        let on_gpu =
            |w: &Storage<i32>,
             x: &Storage<f32>,
             xl: &Layout,
             norm: Option<(&crate::cuda::CudaStorage<f32>, &Layout, f32)>| match (w, x)
            {
                (Storage::Cuda(w), Storage::Cuda(xc)) => Some(crate::cuda::ops_quant::qmatmul(
                    w,
                    kind,
                    (n, k),
                    (xc, xl),
                    norm,
                    residual.as_ref().map(|(r, rl)| (r, *rl)),
                )),
                _ => None,
            };
        // A decoding step's few rows on a GPU: one launch with both joined.
        if m <= rtx_kernels::kernels::QMATVEC_ROWS {
            let norm = join
                .norm
                .and_then(|(g, gl, eps)| Some((cuda(g)?, gl, eps as f32)));
            let norm = norm.as_ref().map(|(g, gl, eps)| (g, *gl, *eps));
            if let Some(out) = on_gpu(self, x, xl, norm) {
                return Ok(Storage::Cuda(out?));
            }
        }
        // Otherwise the norm first, then the product, with the residual added in it on a GPU.
        let normed = match join.norm {
            Some((g, gl, eps)) => Some(x.norm_rows(xl, Some((g, gl)), None, eps, false)?.0),
            None => None,
        };
        let dense = Layout::contiguous(xl.dims());
        let (x, xl) = normed.as_ref().map_or((x, xl), |y| (y, &dense));
        if let Some(out) = on_gpu(self, x, xl, None) {
            return Ok(Storage::Cuda(out?));
        }
        let out = self.qmatmul(kind, (n, k), x, xl)?;
        match (out, join.residual) {
            (Storage::Cpu(mut out), Some((Storage::Cpu(r), rl))) => {
                let r = crate::cpu::elementwise::map(r, rl, |v| v);
                for (o, r) in out.iter_mut().zip(r) {
                    *o += r;
                }
                Ok(Storage::Cpu(out))
            }
            (out, None) => Ok(out),
            (out, Some((r, _))) => Err(bad(format!(
                "the residual on {} is not on the product's device {}",
                r.device(),
                out.device()
            ))),
        }
    }

    /// [`Storage::qmatmul`] of one `x` (`[m, k]`) with each weight `(words, kind, n)` of
    /// `weights`: on the CPU as one pass (the activations quantized once, every weight's rows
    /// shared out among the threads together), each result bit for bit the one
    /// [`Storage::qmatmul`] gives; on a GPU one product after another.
    fn qmatmul_each(
        weights: &[(&Storage<i32>, u32, usize)],
        k: usize,
        x: &Storage<f32>,
        xl: &Layout,
    ) -> Result<Vec<Storage<f32>>> {
        let bad = |msg: String| BackendError::BadArgument {
            op: "quantized matmul",
            msg,
        };
        let m = xl.dims().first().copied().unwrap_or(0);
        let tys = Storage::qmatmul_check(weights, k, x, xl)?;
        match x {
            Storage::Cpu(xv) => {
                crate::dispatch::cpu();
                let mut parts = Vec::with_capacity(weights.len());
                for (&(w, _, n), &(ty, bytes)) in weights.iter().zip(&tys) {
                    let Storage::Cpu(w) = w else {
                        unreachable!("checked to be on the activations' device")
                    };
                    // SAFETY: any initialized i32 is four initialized bytes.
                    let w: &[u8] =
                        unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), w.len() * 4) };
                    parts.push(qmatmul::QPart {
                        w: &w[..bytes],
                        ty,
                        n,
                    });
                }
                let dense;
                let xs = match xl.contiguous_range() {
                    Some(r) => &xv[r],
                    None => {
                        dense = crate::cpu::elementwise::map(xv, xl, |v| v);
                        &dense[..]
                    }
                };
                Ok(qmatmul::qmatmul_each(&parts, k, xs, m)
                    .into_iter()
                    .map(Storage::Cpu)
                    .collect())
            }
            Storage::Cuda(xv) => weights
                .iter()
                .map(|&(w, kind, n)| match w {
                    Storage::Cuda(w) if w.ordinal() == xv.ordinal() => Ok(Storage::Cuda(
                        crate::cuda::ops_quant::qmatmul(w, kind, (n, k), (xv, xl), None, None)?,
                    )),
                    _ => Err(bad(format!(
                        "the weight and the activations must be on one GPU (weight on {}, \
                         activations on {})",
                        w.device(),
                        x.device()
                    ))),
                })
                .collect(),
            Storage::Backend(_) => Err(bad(format!(
                "the weight and the activations must be on the CPU or a GPU (activations on \
                 {})",
                x.device()
            ))),
        }
    }

    /// Checks each weight `(words, kind, n)` of a product with `x` (`[m, k]`): a type with a
    /// quantized product, whole blocks, words enough, one device; gives each weight's type and
    /// bytes.
    fn qmatmul_check(
        weights: &[(&Storage<i32>, u32, usize)],
        k: usize,
        x: &Storage<f32>,
        xl: &Layout,
    ) -> Result<Vec<(QWeight, usize)>> {
        let bad = |msg: String| BackendError::BadArgument {
            op: "quantized matmul",
            msg,
        };
        let m = xl.dims().first().copied().unwrap_or(0);
        let mut tys = Vec::with_capacity(weights.len());
        for &(w, kind, n) in weights {
            let ty = match kind {
                8 => QWeight::Q8_0,
                3 => QWeight::Q4_1,
                _ => {
                    return Err(bad(format!(
                        "GGUF type {kind} has no quantized product (Q8_0 and Q4_1 do); \
                         dequantize it"
                    )));
                }
            };
            if xl.dims() != [m, k] || !k.is_multiple_of(qmatmul::BLOCK) {
                return Err(bad(format!(
                    "activations {:?} are not [M, {k}] for a [{n}, {k}] weight of whole blocks",
                    xl.dims()
                )));
            }
            let bytes = n * (k / qmatmul::BLOCK) * ty.block_bytes();
            if bytes.div_ceil(4) > w.len() {
                return Err(bad(format!(
                    "{} words hold too few blocks for a [{n}, {k}] weight",
                    w.len()
                )));
            }
            if w.device() != x.device() {
                return Err(bad(format!(
                    "the weight and the activations must be on one device, the CPU or a GPU \
                     (weight on {}, activations on {})",
                    w.device(),
                    x.device()
                )));
            }
            tys.push((ty, bytes));
        }
        Ok(tys)
    }
}
