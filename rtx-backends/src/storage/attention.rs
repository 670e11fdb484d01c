//! Backend entry point for attention in one pass on the CPU (`cpu/attention.rs`); the GPU's
//! fused kernels are `flash_attention.rs`. It is an optimization, not a primitive: `rtx`
//! defines attention as its composition (two products and a softmax) and runs that wherever
//! this entry does not apply (GPUs, half precision, a tape to record).

use super::Storage;
use super::erased::{AnyRef, AnyStorage};
use crate::cpu::attention::attention;
use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::Float;

impl<E: Float> Storage<E> {
    /// `softmax(q kᵀ · scale, padded keys left out) · v` for `self` = `q` `[B, H, T, Dh]` and
    /// `k`, `v` `[B, H, S, Dh]`, with an optional `[B, S]` key-padding mask (true = padding)
    /// and, with `causal`, query `i` seeing only the keys `j <= i + S - T`, as a dense `[B, T, H, Dh]` storage. CPU storage in f32 or f64 only (shapes are checked by
    /// the caller); anything else is a `BadArgument` error, since callers compose instead.
    pub fn attention_cpu(
        &self,
        ql: &Layout,
        (k, kl): (&Self, &Layout),
        (v, vl): (&Self, &Layout),
        padding: Option<(&Storage<bool>, &Layout)>,
        causal: bool,
        scale: f64,
    ) -> Result<Self> {
        let (q, k, v) = (AnyRef::of(self), AnyRef::of(k), AnyRef::of(v));
        Ok(attention_any((q, ql), (k, kl), (v, vl), padding, causal, scale)?.into_typed())
    }
}

/// [`Storage::attention_cpu`] with the element type erased: not generic, so the CPU loops are
/// compiled once, here, at this crate's optimization level (see `erased.rs`).
fn attention_any(
    (q, ql): (AnyRef, &Layout),
    (k, kl): (AnyRef, &Layout),
    (v, vl): (AnyRef, &Layout),
    padding: Option<(&Storage<bool>, &Layout)>,
    causal: bool,
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
            let out = attention((q, ql), (k, kl), (v, vl), mask, causal, scale);
            AnyStorage::F32(Storage::Cpu(out))
        }
        AnyRef::F64(Storage::Cpu(q)) => {
            let (Storage::Cpu(k), Storage::Cpu(v)) = (k.typed(op)?, v.typed(op)?) else {
                return Err(unsupported("runs on the CPU only"));
            };
            let out = attention((q, ql), (k, kl), (v, vl), mask, causal, scale);
            AnyStorage::F64(Storage::Cpu(out))
        }
        _ => return Err(unsupported("computes in f32 and f64 only")),
    })
}
