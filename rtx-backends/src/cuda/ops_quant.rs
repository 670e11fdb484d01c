//! The GPU side of dequantizing ggml blocks: one launch of the `dequantize_ggml` kernel's f32
//! entry, one thread per value in a grid-stride loop.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::LaunchConfig;
use super::storage::CudaStorage;
use crate::Result;
use rtx_kernels::DType;
use rtx_kernels::kernel::Variant;
use rtx_kernels::kernels;

/// The first `n` values of the blocks `words` of GGUF type `kind`; the caller has checked that
/// `words` holds the blocks of `n` values.
pub(crate) fn dequantize(
    words: &CudaStorage<i32>,
    kind: u32,
    block: usize,
    type_size: usize,
    n: usize,
) -> Result<CudaStorage<f32>> {
    let src = &kernels::dequantize_ggml::KERNEL;
    let entry = kernel_entry(words.ordinal(), src, DType::F32, DType::F32, Variant::Simt)?;
    let out = CudaStorage::<f32>::uninit(words.ordinal(), n)?;
    if n == 0 {
        return Ok(out);
    }
    let config = LaunchConfig::for_elements(n.min(1 << 24), 256);
    let args = [
        Arg::Ptr(words.device_ptr()),
        Arg::Ptr(out.device_ptr()),
        Arg::U32(kind),
        Arg::U64(block as u64),
        Arg::U64(type_size as u64),
        Arg::U64(n as u64),
    ];
    // SAFETY: the kernel reads the bytes of the blocks of `n` values, which the caller has
    // checked `words` holds, and writes `n` values into `out`.
    unsafe { launch_entry(words.ordinal(), src, entry, config, &args)? };
    Ok(out)
}
