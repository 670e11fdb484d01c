//! Backend entry point for attention in one pass on the CPU (`cpu/attention.rs`). It is an
//! optimization, not a primitive: `rtx` defines attention as its composition (two products
//! and a softmax) and runs that wherever this entry does not apply (GPUs, half precision,
//! a tape to record).

use super::Storage;
use crate::{BackendError, Layout, Result};
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
        let unsupported = |why: &str| BackendError::BadArgument {
            op: "attention",
            msg: format!("the one-pass CPU attention {why}; compose it from products and softmax"),
        };
        if !matches!(E::DTYPE, DType::F32 | DType::F64) {
            return Err(unsupported("computes in f32 and f64 only"));
        }
        let mask = match padding {
            Some((Storage::Cpu(m), ml)) => Some((m.as_slice(), ml)),
            None => None,
            Some(_) => return Err(unsupported("takes a mask on the CPU")),
        };
        match (self, k, v) {
            (Storage::Cpu(q), Storage::Cpu(k), Storage::Cpu(v)) => {
                crate::dispatch::on_cpu(crate::Device::Cpu);
                Ok(Storage::Cpu(crate::cpu::attention::attention(
                    (q, ql),
                    (k, kl),
                    (v, vl),
                    mask,
                    scale,
                )))
            }
            _ => Err(unsupported("runs on the CPU only")),
        }
    }
}
