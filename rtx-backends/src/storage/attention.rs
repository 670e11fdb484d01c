//! Backend entry point for attention in one pass on the CPU (`cpu/attention.rs`). It is an
//! optimization, not a primitive: `rtx` defines attention as its composition (two products
//! and a softmax) and runs that wherever this entry does not apply (GPUs, half precision,
//! a tape to record).

use super::Storage;
use super::erased::{AnyRef, AnyStorage};
use crate::cpu::attention::attention;
use crate::cuda::{CudaStorage, DevicePtr};
use crate::{AttentionDims, BackendError, Device, Layout, Result};
use rtx_kernels::{DType, Float};

impl<E: Float> Storage<E> {
    /// `softmax(q kᵀ · scale, padded keys left out) · v` for `self` = `q` `[B, H, T, Dh]` and
    /// `k`, `v` `[B, H, S, Dh]`, with an optional `[B, S]` key-padding mask (true = padding),
    /// as a dense `[B, T, H, Dh]` storage. CPU storage in f32 or f64 only (shapes are checked by
    /// the caller); anything else is a `BadArgument` error, since callers compose instead.
    pub fn attention_cpu(
        &self,
        ql: &Layout,
        (k, kl): (&Self, &Layout),
        (v, vl): (&Self, &Layout),
        padding: Option<(&Storage<bool>, &Layout)>,
        scale: f64,
    ) -> Result<Self> {
        let (q, k, v) = (AnyRef::of(self), AnyRef::of(k), AnyRef::of(v));
        Ok(attention_any((q, ql), (k, kl), (v, vl), padding, scale)?.into_typed())
    }
}

/// [`Storage::attention_cpu`] with the element type erased: not generic, so the CPU loops are
/// compiled once, here, at this crate's optimization level (see `erased.rs`).
fn attention_any(
    (q, ql): (AnyRef, &Layout),
    (k, kl): (AnyRef, &Layout),
    (v, vl): (AnyRef, &Layout),
    padding: Option<(&Storage<bool>, &Layout)>,
    scale: f64,
) -> Result<AnyStorage> {
    let unsupported = |why: &str| BackendError::BadArgument {
        op: "attention",
        msg: format!("the one-pass CPU attention {why}; compose it from products and softmax"),
    };
    let mask = match padding {
        Some((Storage::Cpu(m), ml)) => Some((m.as_slice(), ml)),
        None => None,
        Some(_) => return Err(unsupported("takes a mask on the CPU")),
    };
    let on_cpu = |s: AnyRef| s.device() == Device::Cpu;
    if !(on_cpu(q) && on_cpu(k) && on_cpu(v)) {
        return Err(unsupported("runs on the CPU only"));
    }
    crate::dispatch::on_cpu(Device::Cpu);
    let op = "attention";
    Ok(match q {
        AnyRef::F32(Storage::Cpu(q)) => {
            let (Storage::Cpu(k), Storage::Cpu(v)) = (k.typed(op)?, v.typed(op)?) else {
                return Err(unsupported("runs on the CPU only"));
            };
            let out = attention((q, ql), (k, kl), (v, vl), mask, scale);
            AnyStorage::F32(Storage::Cpu(out))
        }
        AnyRef::F64(Storage::Cpu(q)) => {
            let (Storage::Cpu(k), Storage::Cpu(v)) = (k.typed(op)?, v.typed(op)?) else {
                return Err(unsupported("runs on the CPU only"));
            };
            let out = attention((q, ql), (k, kl), (v, vl), mask, scale);
            AnyStorage::F64(Storage::Cpu(out))
        }
        _ => return Err(unsupported("computes in f32 and f64 only")),
    })
}

impl<E: Float> Storage<E> {
    /// Fused attention on a GPU (FlashAttention-2's method, `rtx_kernels::kernels::flash_attn_fwd`):
    /// for `self` = `q` `[bh, t_q, d]` and `k`, `v` `[bh, t_k, d]`, dense from their first
    /// element, returns `o = softmax(scale q kᵀ, causal mask when asked) v` `[bh, t_q, d]` and
    /// each query row's log-sum-exp `[bh, t_q]` in f32, which
    /// [`Storage::flash_attention_backward`] needs. f16 and bf16 on a GPU, head dims a multiple
    /// of 16 up to 128; anything else is a `BadArgument` error, since callers compose instead.
    pub fn flash_attention(
        &self,
        k: &Self,
        v: &Self,
        dims: AttentionDims,
    ) -> Result<(Self, Storage<f32>)> {
        let (o, lse) = flash_forward_any([AnyRef::of(self), AnyRef::of(k), AnyRef::of(v)], dims)?;
        Ok((o.into_typed(), lse))
    }

    /// The gradients `[dq, dk, dv]` of [`Storage::flash_attention`]'s inputs (`self` = `q`,
    /// `k`, `v`) for the upstream gradient `dout` of its output `o`, from the `lse` it
    /// returned; every buffer dense, as the forward's. Three launches on a GPU that recompute
    /// the probabilities rather than read them.
    pub fn flash_attention_backward(
        &self,
        (k, v): (&Self, &Self),
        (o, lse): (&Self, &Storage<f32>),
        dout: &Self,
        dims: AttentionDims,
    ) -> Result<[Self; 3]> {
        let inputs = [self, k, v, o, dout].map(AnyRef::of);
        let grads = flash_backward_any(inputs, lse, dims)?;
        Ok(grads.map(AnyStorage::into_typed))
    }
}

/// Whether the fused kernels take attention of element type `dtype` with head dim `d` (before
/// any buffer is made, so that callers choose between them and the composition).
pub fn flash_attention_supported(dtype: DType, d: usize) -> bool {
    matches!(dtype, DType::F16 | DType::BF16) && d.is_multiple_of(16) && (16..=128).contains(&d)
}

/// A fused-attention operand's GPU buffer, checked to hold `len` elements of the kernels'
/// types on GPU `ordinal` (the first operand's).
fn flash_operand(s: AnyRef, what: &str, len: usize, ordinal: Option<usize>) -> Result<DevicePtr> {
    let bad = |msg: String| BackendError::BadArgument {
        op: "flash_attention",
        msg,
    };
    let (ptr, n, gpu) = match s {
        AnyRef::F16(Storage::Cuda(c)) => (c.device_ptr(), c.len(), c.ordinal()),
        AnyRef::BF16(Storage::Cuda(c)) => (c.device_ptr(), c.len(), c.ordinal()),
        _ => {
            return Err(bad(format!(
                "{what} is {:?} on {}; the fused kernels take f16 or bf16 on a GPU",
                s.dtype(),
                s.device()
            )));
        }
    };
    if n != len {
        return Err(bad(format!(
            "{what} holds {n} elements, not the {len} its sizes need"
        )));
    }
    if ordinal.is_some_and(|o| o != gpu) {
        return Err(bad(format!(
            "{what} is on cuda:{gpu}, the queries elsewhere"
        )));
    }
    Ok(ptr)
}

/// The GPU of the queries, after checking the sizes the kernels take.
fn flash_gpu(q: AnyRef, dims: &AttentionDims) -> Result<usize> {
    if !flash_attention_supported(q.dtype(), dims.d) {
        return Err(BackendError::BadArgument {
            op: "flash_attention",
            msg: format!(
                "the fused kernels take f16 or bf16 with a head dim a multiple of 16 up to \
                 128, not {:?} with {}; compose it from products and softmax",
                q.dtype(),
                dims.d
            ),
        });
    }
    match q.device() {
        Device::Cuda(n) => Ok(n),
        other => Err(BackendError::BadArgument {
            op: "flash_attention",
            msg: format!("the fused kernels run on a GPU, the queries are on {other}"),
        }),
    }
}

/// A dense buffer of `len` elements of `dtype` (f16 or bf16) on GPU `ordinal`, to be written.
fn half_uninit(dtype: DType, ordinal: usize, len: usize) -> Result<AnyStorage> {
    Ok(match dtype {
        DType::F16 => AnyStorage::F16(Storage::Cuda(CudaStorage::uninit(ordinal, len)?)),
        _ => AnyStorage::BF16(Storage::Cuda(CudaStorage::uninit(ordinal, len)?)),
    })
}

/// The device address of a buffer [`half_uninit`] made.
fn half_ptr(s: &AnyStorage) -> DevicePtr {
    match s {
        AnyStorage::F16(Storage::Cuda(c)) => c.device_ptr(),
        AnyStorage::BF16(Storage::Cuda(c)) => c.device_ptr(),
        _ => unreachable!("half_uninit makes f16 or bf16 GPU buffers"),
    }
}

/// [`Storage::flash_attention`] with the element type erased (compiled once, here).
fn flash_forward_any(
    [q, k, v]: [AnyRef; 3],
    dims: AttentionDims,
) -> Result<(AnyStorage, Storage<f32>)> {
    let gpu = flash_gpu(q, &dims)?;
    let (nq, nk) = (dims.bh * dims.t_q * dims.d, dims.bh * dims.t_k * dims.d);
    let qp = flash_operand(q, "q", nq, None)?;
    let kp = flash_operand(k, "k", nk, Some(gpu))?;
    let vp = flash_operand(v, "v", nk, Some(gpu))?;
    let o = half_uninit(q.dtype(), gpu, nq)?;
    let lse = CudaStorage::<f32>::uninit(gpu, dims.bh * dims.t_q)?;
    if nq > 0 {
        let ptrs = [qp, kp, vp, half_ptr(&o), lse.device_ptr()];
        // SAFETY: every buffer was checked (or made) to hold the elements its sizes need, on
        // one GPU; rtx's allocations are 256-byte aligned.
        unsafe { crate::cuda::ops_attention::forward(gpu, q.dtype(), ptrs, dims)? };
    }
    Ok((o, Storage::Cuda(lse)))
}

/// [`Storage::flash_attention_backward`] with the element type erased (compiled once, here).
fn flash_backward_any(
    [q, k, v, o, dout]: [AnyRef; 5],
    lse: &Storage<f32>,
    dims: AttentionDims,
) -> Result<[AnyStorage; 3]> {
    let gpu = flash_gpu(q, &dims)?;
    let (nq, nk) = (dims.bh * dims.t_q * dims.d, dims.bh * dims.t_k * dims.d);
    let qp = flash_operand(q, "q", nq, None)?;
    let kp = flash_operand(k, "k", nk, Some(gpu))?;
    let vp = flash_operand(v, "v", nk, Some(gpu))?;
    let op = flash_operand(o, "o", nq, Some(gpu))?;
    let dp = flash_operand(dout, "the output's gradient", nq, Some(gpu))?;
    let lp = match lse {
        Storage::Cuda(l) if l.ordinal() == gpu && l.len() == dims.bh * dims.t_q => l.device_ptr(),
        _ => {
            return Err(BackendError::BadArgument {
                op: "flash_attention",
                msg: format!(
                    "the log-sum-exp must be {} f32s on cuda:{gpu}, as the forward returned",
                    dims.bh * dims.t_q
                ),
            });
        }
    };
    let grads = [nq, nk, nk].map(|n| half_uninit(q.dtype(), gpu, n));
    let [dq, dk, dv] = grads;
    let (dq, dk, dv) = (dq?, dk?, dv?);
    let delta = CudaStorage::<f32>::uninit(gpu, dims.bh * dims.t_q)?;
    if nq > 0 && nk > 0 {
        let inputs = [qp, kp, vp, op, lp, dp];
        let outputs = [
            half_ptr(&dq),
            half_ptr(&dk),
            half_ptr(&dv),
            delta.device_ptr(),
        ];
        // SAFETY: every buffer was checked (or made) to hold the elements its sizes need, on
        // one GPU; rtx's allocations are 256-byte aligned.
        unsafe { crate::cuda::ops_attention::backward(gpu, q.dtype(), inputs, outputs, dims)? };
    }
    Ok([dq, dk, dv])
}
