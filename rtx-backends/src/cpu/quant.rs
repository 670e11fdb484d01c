//! The CPU side of dequantizing ggml blocks: the native code of the `dequantize_ggml` kernel
//! (one emulated thread) over fixed chunks of whole blocks, in parallel.
//!
//! Invariant: a chunk starts on a block whose byte offset is a multiple of 4, so it begins on
//! a word of the input; each element is computed on its own, so the result does not depend
//! on the chunking or the thread count.

use super::CHUNK;
use crate::{BackendError, Result};
use rayon::prelude::*;
use rtx_kernels::kernel::LaunchConfig;
use rtx_kernels::kernels::dequantize_ggml;

/// The first `n` values of the blocks `words` of GGUF type `kind` (`block` elements in
/// `type_size` bytes each); the caller has checked that `words` holds the blocks of `n`.
pub fn dequantize(
    words: &[i32],
    kind: u32,
    block: usize,
    type_size: usize,
    n: usize,
) -> Result<Vec<f32>> {
    // Whole blocks per chunk, a multiple of 4 so every chunk starts on a word.
    let blocks = (CHUNK / block).max(1).next_multiple_of(4);
    let mut out = vec![0.0f32; n];
    out.par_chunks_mut(blocks * block)
        .enumerate()
        .try_for_each(|(c, dst)| {
            let first = c * blocks * type_size / 4;
            let len = (dst.len() / block * type_size).div_ceil(4);
            let src = words
                .get(first..first + len)
                .ok_or_else(|| BackendError::BadArgument {
                    op: "dequantize_ggml",
                    msg: format!("{} words hold too few blocks for {n} values", words.len()),
                })?;
            let m = dst.len();
            dequantize_ggml(LaunchConfig::new(1, 1), src, dst, kind, block, type_size, m).map_err(
                |e| BackendError::BadArgument {
                    op: "dequantize_ggml",
                    msg: e.message().to_string(),
                },
            )
        })?;
    Ok(out)
}
