//! The backend entry point for dequantizing ggml blocks (GGUF tensors) held as little-endian
//! words: the kernel's native code on the CPU, its f32 entry on a GPU.
//!
//! Invariant: the words are checked to hold every block the values need before any kernel
//! runs, so neither device reads out of bounds.

use super::Storage;
use crate::{BackendError, Result};

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
        }
    }
}
