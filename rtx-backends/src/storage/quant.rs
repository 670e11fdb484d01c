//! The backend entry points for ggml blocks (GGUF tensors) held as little-endian words:
//! dequantizing them (the kernel's native code on the CPU, its f32 entry on a GPU), and
//! products of f32 activations with quantized weights (`cpu/qmatmul.rs` on the CPU, the
//! `qmatmul_ggml` kernel on a GPU).
//!
//! Invariant: the words are checked to hold every block the values need before any kernel
//! runs, so neither device reads out of bounds.

use super::Storage;
use crate::cpu::qmatmul::{self, QWeight};
use crate::cuda::ops_quant;
use crate::{BackendError, Layout, Result};

/// What the rows of a quantized product's activations are taken as ([`QJoin::input`]).
#[derive(Clone, Copy, Default)]
pub enum QInput<'a> {
    /// `[m, k]` as they are.
    #[default]
    Rows,
    /// `[m, k]` RMS-normed first, `x / sqrt(mean(x²) + eps) * weight`: the weight (`[k]`, its
    /// layout) and `eps`.
    RmsNorm(&'a Storage<f32>, &'a Layout, f64),
}

/// What a quantized product takes in besides its weight and activations
/// ([`Storage::qmatmul_joined`]): how its rows are taken (normed or not), whether its output
/// is SwiGLU of its halves, and a residual added after it: a decoding block's neighbours,
/// joined to the product so that a step launches fewer kernels.
#[derive(Clone, Copy, Default)]
pub struct QJoin<'a> {
    /// What the rows of the activations are taken as.
    pub input: QInput<'a>,
    /// The weight `[n, k]` is a gated feed-forward's gate rows then its up rows, and the
    /// output is `silu(gate) * up` of the product's halves, `[m, n / 2]`.
    pub swiglu: bool,
    /// A residual (the output's shape, its layout) added to the output.
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

    /// [`Storage::qmatmul`] with its neighbours in `join`: the rows of `x` taken as
    /// [`QJoin::input`] says (RMS-normed or not), the output SwiGLU of the product's halves
    /// with [`QJoin::swiglu`], and a residual added after. On a GPU that is one launch with
    /// all of them joined, but for a prefill's product on the tensor cores, which the norm
    /// precedes and SwiGLU follows as launches of their own; on the CPU they are the norm, the
    /// product, SwiGLU and the sum in turn.
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
        if join.swiglu && n % 2 != 0 {
            return Err(bad(format!(
                "SwiGLU's weight [{n}, {k}] is not gate and up halves: {n} rows"
            )));
        }
        let cols = if join.swiglu { n / 2 } else { n };
        if let QInput::RmsNorm(g, gl, _) = join.input
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
            && (rl.dims() != [m, cols] || r.device() != x.device())
        {
            return Err(bad(format!(
                "the residual {:?} on {} is not [{m}, {cols}] on the activations' device {}",
                rl.dims(),
                r.device(),
                x.device()
            )));
        }
        Storage::qmatmul_check(&[(self, kind, n)], k, x, xl)?;
        if let (Storage::Cuda(w), Storage::Cuda(xc)) = (self, x) {
            let cuda = |s: &Storage<f32>| match s {
                Storage::Cuda(c) => Ok(c.clone()),
                other => Err(bad(format!("an operand on {} beside CUDA", other.device()))),
            };
            let g = match join.input {
                QInput::RmsNorm(g, gl, eps) => Some((cuda(g)?, gl, eps as f32)),
                QInput::Rows => None,
            };
            let rows = match &g {
                Some((g, gl, eps)) => ops_quant::Rows::RmsNorm(g, gl, *eps),
                None => ops_quant::Rows::Plain,
            };
            let residual = match join.residual {
                Some((r, rl)) => Some((cuda(r)?, rl)),
                None => None,
            };
            let residual = residual.as_ref().map(|(r, rl)| (r, *rl));
            let out = ops_quant::qmatmul(w, kind, (n, k), (xc, xl), rows, join.swiglu, residual)?;
            return Ok(Storage::Cuda(out));
        }
        // Elsewhere the norm, the product, SwiGLU and the residual in turn.
        let normed = match join.input {
            QInput::Rows => None,
            QInput::RmsNorm(g, gl, eps) => {
                Some(x.norm_rows(xl, Some((g, gl)), None, eps, false)?.0)
            }
        };
        let dense = Layout::contiguous(&[m, k]);
        let (x, xl) = normed.as_ref().map_or((x, xl), |y| (y, &dense));
        let mut out = self.qmatmul(kind, (n, k), x, xl)?;
        if join.swiglu {
            out = swiglu_halves(&out, &Layout::contiguous(&[m, n]))?;
        }
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
                    Storage::Cuda(w) if w.ordinal() == xv.ordinal() => {
                        Ok(Storage::Cuda(ops_quant::qmatmul(
                            w,
                            kind,
                            (n, k),
                            (xv, xl),
                            ops_quant::Rows::Plain,
                            false,
                            None,
                        )?))
                    }
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

/// `silu(x[.., ..k]) * x[.., k..]` of the `[m, 2 k]` activations `x` viewed by `xl`, a dense
/// `[m, k]` storage: `swiglu_rows` on a GPU, its formula on the CPU.
fn swiglu_halves(x: &Storage<f32>, xl: &Layout) -> Result<Storage<f32>> {
    match x {
        Storage::Cuda(c) => Ok(Storage::Cuda(ops_quant::swiglu(c, xl)?)),
        Storage::Cpu(v) => {
            let k = xl.dims()[1] / 2;
            let v = crate::cpu::elementwise::map(v, xl, |v| v);
            Ok(Storage::Cpu(
                v.chunks_exact(2 * k)
                    .flat_map(|row| {
                        let (gate, up) = row.split_at(k);
                        gate.iter()
                            .zip(up)
                            .map(|(&g, &u)| rtx_kernels::kernels::silu(g) * u)
                    })
                    .collect(),
            ))
        }
        Storage::Backend(_) => Err(super::no_kernel("SwiGLU", x.device())),
    }
}
