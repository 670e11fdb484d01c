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

/// Activation rows from which [`qmatmul`] multiplies on the tensor cores (a prefill; a
/// decoding step of up to this many sequences keeps `qmatmul_ggml`, whose cost is reading the
/// weight).
const TENSOR_CORE_ROWS: usize = 64;

/// Outputs (`m * n`) from which [`qmatmul`] takes the tensor cores past `QMATVEC_ROWS` rows
/// too: `qmatmul_ggml`'s blocks of 4 weight rows each stage all `m * k` activations, so the
/// staging's traffic grows as `m * n` (the vocabulary's head at 32 rows staged 0.9 GB through
/// the L2 cache and took 560 µs of a 3 ms step on an H100), where the tensor cores' 64-row
/// tiles stage them once per 64.
const TENSOR_CORE_OUTPUTS: usize = 1 << 20;

/// Weight rows from which one row of activations takes `qmatvec_ggml_wide` (four weight rows
/// a warp, sharing the activations' loads): the vocabulary's head. Below it the warp a row of
/// `qmatvec_ggml` keeps more warps in flight, which a short product needs more (a Llama block's
/// products are a few thousand rows).
const WIDE_ROWS: usize = 1 << 14;

/// What the rows of a quantized product's activations are taken as
/// (`kernels::QINPUT_ROWS`, `QINPUT_RMS_NORM`).
#[derive(Clone, Copy)]
pub(crate) enum Rows<'a> {
    /// `[m, k]` as they are.
    Plain,
    /// `[m, k]` RMS-normed first: the norm's weight `[k]` and `eps`.
    RmsNorm(&'a CudaStorage<f32>, &'a crate::Layout, f32),
}

/// `x · Wᵀ` for the quantized weight `W` `[n, k]` in `words` (GGUF type `kind`, `Q8_0` or
/// `Q4_1`) and the f32 activations `x` viewed by `xl` as `[m, k]`, taken as `rows` says, as a
/// dense `[m, n]` storage; with `glu`, SwiGLU of the two halves of that product (`W` is a
/// gated feed-forward's gate rows then up rows), `[m, n / 2]`; plus the `residual` of the
/// output's shape where one is given. `qmatmul_ggml` decodes each weight block in registers,
/// with the norm applied as it stages the rows and SwiGLU as it finishes its sums: one
/// launch; for the few rows of a decoding step (up to `QMATVEC_ROWS`) `qmatvec_ggml` does the
/// same without its staging's barriers (one row times [`WIDE_ROWS`] or more, `qmatvec_ggml_wide`); from [`TENSOR_CORE_ROWS`] rows on a GPU of compute
/// capability 8.0 or later (a prefill), or [`TENSOR_CORE_OUTPUTS`] outputs past the decoding
/// kernel's rows (the vocabulary's head of a batch), the norm and SwiGLU are launches of their
/// own and `qmatmul_ggml_tc` multiplies the blocks' integers on the tensor cores. The caller has
/// checked the kind, the dims (`n` even with `glu`), that `words` holds the weight's blocks,
/// and the norm's and residual's dims.
pub(crate) fn qmatmul(
    words: &CudaStorage<i32>,
    kind: u32,
    (n, k): (usize, usize),
    (x, xl): (&CudaStorage<f32>, &crate::Layout),
    rows: Rows<'_>,
    glu: bool,
    residual: Option<(&CudaStorage<f32>, &crate::Layout)>,
) -> Result<CudaStorage<f32>> {
    let m = xl.dims()[0];
    let wide = m > kernels::QMATVEC_ROWS && m * n >= TENSOR_CORE_OUTPUTS;
    let tensor_cores =
        (m >= TENSOR_CORE_ROWS || wide) && super::gpu::gpu(words.ordinal())?.cc >= (8, 0);
    if tensor_cores && (glu || !matches!(rows, Rows::Plain)) {
        let normed;
        let (x, xl) = match rows {
            Rows::RmsNorm(g, gl, eps) => {
                let weight = Some((g, gl));
                normed =
                    super::ops_norm::norm_rows((x, xl), weight, None, f64::from(eps), false)?.0;
                (&normed, &crate::Layout::contiguous(&[m, k]))
            }
            Rows::Plain => (x, xl),
        };
        if !glu {
            return qmatmul(words, kind, (n, k), (x, xl), Rows::Plain, false, residual);
        }
        if residual.is_some() {
            return Err(crate::BackendError::BadArgument {
                op: "quantized matmul",
                msg: "a product on the tensor cores adds no residual to SwiGLU's output".into(),
            });
        }
        let both = qmatmul(words, kind, (n, k), (x, xl), Rows::Plain, false, None)?;
        return swiglu(&both, &crate::Layout::contiguous(&[m, n]));
    }
    let cols = if glu { n / 2 } else { n };
    let out = CudaStorage::<f32>::uninit(words.ordinal(), m * cols)?;
    if m == 0 || cols == 0 {
        return Ok(out);
    }
    let (xs, at) = super::ops::dense_view(x, xl)?;
    // An absent norm weight or residual is never read: the output stands in for its pointer.
    let (res, res_at) = match residual {
        Some((r, rl)) => super::ops::dense_view(r, rl)?,
        None => (out.clone(), 0),
    };
    // One row times many weight rows (a decoding step's vocabulary head) takes
    // `qmatvec_ggml_wide`, which has no `m` argument.
    let one_wide = m == 1 && !glu && !tensor_cores && cols >= WIDE_ROWS;
    let mut args = vec![
        Arg::Ptr(words.device_ptr()),
        Arg::Ptr(xs.ptr_at(at)),
        Arg::Ptr(res.ptr_at(res_at)),
        Arg::Ptr(out.device_ptr()),
    ];
    if !one_wide {
        args.push(Arg::U64(m as u64));
    }
    args.extend([
        Arg::U64(cols as u64),
        Arg::U64(k as u64),
        Arg::U32(kind),
        Arg::U32(u32::from(residual.is_some())),
    ]);
    let (src, dtype, config) = if tensor_cores {
        // The tensor-core kernel takes its bf16 entry: its activations' split needs bf16's
        // exponent range (activations and output are f32, its `T::Acc`, either way).
        let tile = kernels::QMATMUL_TC_TILE;
        let config = grid((n, tile), (m, tile), kernels::QMATMUL_TC_THREADS)?;
        (&kernels::qmatmul_ggml_tc::KERNEL, DType::BF16, config)
    } else {
        // Both FMA kernels take the rows' input and SwiGLU after the common arguments.
        let ((g, g_at), input, eps) = match rows {
            Rows::Plain => ((out.clone(), 0), kernels::QINPUT_ROWS, 0.0),
            Rows::RmsNorm(g, gl, eps) => (
                super::ops::dense_view(g, gl)?,
                kernels::QINPUT_RMS_NORM,
                f64::from(eps),
            ),
        };
        args.extend([Arg::Ptr(g.ptr_at(g_at)), Arg::U32(input), Arg::Acc(eps)]);
        let warps = (kernels::QMATMUL_THREADS / 32) as usize;
        if one_wide {
            let per = warps * kernels::QMATVEC_WIDE_ROWS;
            let config = grid((cols, per), (1, 1), kernels::QMATMUL_THREADS)?;
            (&kernels::qmatvec_ggml_wide::KERNEL, DType::F32, config)
        } else if m <= kernels::QMATVEC_ROWS {
            args.push(Arg::U32(u32::from(glu)));
            let config = grid((cols, warps), (1, 1), kernels::QMATMUL_THREADS)?;
            (&kernels::qmatvec_ggml::KERNEL, DType::F32, config)
        } else {
            args.push(Arg::U32(u32::from(glu)));
            let per = (m, kernels::QMATMUL_ROWS);
            let config = grid((cols, warps), per, kernels::QMATMUL_THREADS)?;
            (&kernels::qmatmul_ggml::KERNEL, DType::F32, config)
        }
    };
    let entry = kernel_entry(words.ordinal(), src, dtype, dtype, Variant::Simt)?;
    // SAFETY: each kernel reads the `n * k / 32` blocks the caller checked `words` holds (with
    // `glu`, rows `c` and `cols + c` for output `c < cols = n / 2`), `m * k` activations from
    // the dense view, the `[k]` norm weight and `[m, cols]` residual from theirs when given
    // (the caller checked their dims), and writes `m * cols` values into `out`.
    unsafe { launch_entry(words.ordinal(), src, entry, config, &args)? };
    Ok(out)
}

/// A grid of `ceil(n / per_x) x ceil(m / per_y)` blocks of `threads` threads for an `[m, n]`
/// product, or an error where it exceeds a launch's limits.
fn grid(
    (n, per_x): (usize, usize),
    (m, per_y): (usize, usize),
    threads: u32,
) -> Result<LaunchConfig> {
    Ok(LaunchConfig {
        grid: (
            u32::try_from(n.div_ceil(per_x)).map_err(|_| too_big(n, m))?,
            u32::try_from(m.div_ceil(per_y))
                .ok()
                .filter(|&y| y <= 65535)
                .ok_or_else(|| too_big(n, m))?,
            1,
        ),
        block: (threads, 1, 1),
        shared_mem: 0,
    })
}

/// The error for a product too large for one launch's grid.
fn too_big(n: usize, m: usize) -> crate::BackendError {
    crate::BackendError::BadArgument {
        op: "quantized matmul",
        msg: format!("[{m}, K] by [{n}, K] is too large for one launch"),
    }
}

/// `silu(x[.., ..k]) * x[.., k..]` of the `[m, 2 k]` activations viewed by `xl`, as a dense
/// `[m, k]` storage: one launch of `swiglu_rows`.
pub(crate) fn swiglu(x: &CudaStorage<f32>, xl: &crate::Layout) -> Result<CudaStorage<f32>> {
    let (m, k) = (xl.dims()[0], xl.dims()[1] / 2);
    let out = CudaStorage::<f32>::uninit(x.ordinal(), m * k)?;
    if m * k == 0 {
        return Ok(out);
    }
    let (xs, at) = super::ops::dense_view(x, xl)?;
    let src = &kernels::swiglu_rows::KERNEL;
    let entry = kernel_entry(x.ordinal(), src, DType::F32, DType::F32, Variant::Simt)?;
    let config = LaunchConfig::for_elements((m * k).min(1 << 24), 256);
    let args = [
        Arg::Ptr(xs.ptr_at(at)),
        Arg::Ptr(out.device_ptr()),
        Arg::U64(m as u64),
        Arg::U64(k as u64),
    ];
    // SAFETY: the kernel reads the `m * 2 k` values of the dense view and writes `m * k` into
    // `out`.
    unsafe { launch_entry(x.ordinal(), src, entry, config, &args)? };
    Ok(out)
}
