//! Matrix products through cuBLAS (or cuBLASLt, see [`GemmLibrary`]): f32 (TF32 only when [`set_allow_tf32`] asks for it), f64,
//! and f16/bf16 with f32 accumulation, batched through the strided-batched call.
//!
//! cuBLAS is column-major and rtx is row-major. A row-major `C = A B` is the column-major
//! `Cᵀ = Bᵀ Aᵀ`, and a row-major buffer read column-major is already its transpose, so the
//! call swaps the operands and transposes nothing. A transposed view (unit row stride) maps to
//! the operation flag instead of a copy; a view neither row- nor column-major (a stepped slice,
//! a broadcast inside a matrix) is made dense first.

use super::alloc::{DeviceBuffer, alloc};
use super::context::Gpu;
use super::launch::submit;
use super::probe::{Lib, guard, require};
use super::storage::CudaStorage;
use crate::{BackendError, Layout, Result};
use cudarc::cublas::result as cublas;
use cudarc::cublas::sys::{
    cublasComputeType_t as Compute, cublasGemmAlgo_t, cublasHandle_t, cublasMath_t,
    cublasOperation_t as Op, cudaDataType as DataType,
};
use rtx_kernels::{DType, Element};
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Workspace handed to cuBLAS: its Hopper kernels want one, and a fixed buffer from rtx's
/// allocator keeps cuBLAS from allocating behind the allocator's back (PyTorch gives 32 MiB).
const WORKSPACE: usize = 32 << 20;

static ALLOW_TF32: AtomicBool = AtomicBool::new(false);
static USE_LT: AtomicBool = AtomicBool::new(false);

/// The library that runs matrix products on a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmLibrary {
    /// cuBLAS's strided-batched GEMM (the default, as PyTorch's `matmul`).
    Cublas,
    /// cuBLASLt with a plan per shape (the path fused epilogues will take).
    CublasLt,
}

/// Chooses the library for GPU matrix products in this process.
pub fn set_gemm_library(lib: GemmLibrary) {
    USE_LT.store(lib == GemmLibrary::CublasLt, Ordering::Relaxed);
}

/// The library GPU matrix products use (see [`set_gemm_library`]).
pub fn gemm_library() -> GemmLibrary {
    if USE_LT.load(Ordering::Relaxed) {
        GemmLibrary::CublasLt
    } else {
        GemmLibrary::Cublas
    }
}

/// Lets f32 matrix products use TF32 tensor cores (10-bit mantissa inputs, about 3e-4
/// relative error, several times faster), as `torch.backends.cuda.matmul.allow_tf32`. Off by
/// default, so f32 products are exact f32 unless asked.
pub fn set_allow_tf32(allow: bool) {
    ALLOW_TF32.store(allow, Ordering::Relaxed);
}

/// Whether f32 matrix products may use TF32 (see [`set_allow_tf32`]).
pub fn allow_tf32() -> bool {
    ALLOW_TF32.load(Ordering::Relaxed)
}

/// A GPU's cuBLAS handle and its workspace.
pub(crate) struct Blas {
    handle: cublasHandle_t,
    _workspace: DeviceBuffer,
}

// SAFETY: the handle is used only under the GPU's `blas` mutex, one thread at a time, which is
// what cuBLAS asks of a handle.
unsafe impl Send for Blas {}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: created by cublasCreate and destroyed once, here.
        let _ = unsafe { cublas::destroy_handle(self.handle) };
    }
}

fn blas_err(g: &Gpu, call: &'static str, e: cudarc::cublas::result::CublasError) -> BackendError {
    BackendError::Cuda {
        device: g.device(),
        call,
        msg: format!("{:?}", e.0),
    }
}

fn create(g: &Arc<Gpu>) -> Result<Blas> {
    require(Lib::Cublas)?;
    g.bind()?;
    let handle = guard("cublasCreate", cublas::create_handle)?
        .map_err(|e| blas_err(g, "cublasCreate", e))?;
    let workspace = alloc(g, WORKSPACE)?;
    let blas = Blas {
        handle,
        _workspace: workspace,
    };
    // SAFETY: a live handle, the GPU's own stream, and a workspace block owned by `blas`.
    unsafe {
        cublas::set_stream(handle, g.stream.cu_stream() as _)
            .map_err(|e| blas_err(g, "cublasSetStream", e))?;
        cudarc::cublas::sys::cublasSetWorkspace_v2(
            handle,
            blas._workspace.ptr as *mut c_void,
            WORKSPACE,
        )
        .result()
        .map_err(|e| blas_err(g, "cublasSetWorkspace", e))?;
        cudarc::cublas::sys::cublasSetMathMode(handle, cublasMath_t::CUBLAS_DEFAULT_MATH)
            .result()
            .map_err(|e| blas_err(g, "cublasSetMathMode", e))?;
    }
    Ok(blas)
}

/// How cuBLAS reads one operand: its operation flag, leading dimension and batch stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Operand {
    /// `N` when the view is row-major (so the buffer read column-major is its transpose).
    pub op: Op,
    /// The leading dimension, in elements.
    pub ld: i64,
    /// Elements between consecutive matrices of the batch (0 for a broadcast batch).
    pub batch_stride: i64,
}

/// How cuBLAS can read a `[batch.., rows, cols]` view as the transpose of each matrix, or
/// `None` when the view must be made dense first.
pub(crate) fn operand(dims: &[usize], strides: &[usize]) -> Option<Operand> {
    let r = dims.len();
    let (rows, cols) = (dims[r - 2], dims[r - 1]);
    let (sr, sc) = (strides[r - 2], strides[r - 1]);
    let (op, ld) = if (sc == 1 || cols <= 1) && (rows <= 1 || sr >= cols.max(1)) {
        (Op::CUBLAS_OP_N, if rows <= 1 { cols.max(1) } else { sr })
    } else if (sr == 1 || rows <= 1) && (cols <= 1 || sc >= rows.max(1)) {
        (Op::CUBLAS_OP_T, if cols <= 1 { rows.max(1) } else { sc })
    } else {
        return None;
    };
    // The batch dims must flatten to one stride: batch index b sits at b * stride.
    let mut stride: Option<usize> = None;
    let mut inner = 1usize;
    for (&d, &s) in dims[..r - 2].iter().zip(&strides[..r - 2]).rev() {
        if d == 1 {
            continue;
        }
        match stride {
            None => stride = Some(s),
            Some(st) if s == st * inner => {}
            Some(_) => return None,
        }
        inner *= d;
    }
    Some(Operand {
        op,
        ld: ld as i64,
        batch_stride: stride.unwrap_or(0) as i64,
    })
}

/// The cuBLAS types of an element type: data type, compute type, and whether alpha and beta
/// are f64 (else f32).
fn types(dtype: DType) -> Option<(DataType, Compute, bool)> {
    Some(match dtype {
        DType::F32 if allow_tf32() => (
            DataType::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F_FAST_TF32,
            false,
        ),
        DType::F32 => (DataType::CUDA_R_32F, Compute::CUBLAS_COMPUTE_32F, false),
        DType::F64 => (DataType::CUDA_R_64F, Compute::CUBLAS_COMPUTE_64F, true),
        DType::F16 => (DataType::CUDA_R_16F, Compute::CUBLAS_COMPUTE_32F, false),
        DType::BF16 => (DataType::CUDA_R_16BF, Compute::CUBLAS_COMPUTE_32F, false),
        _ => return None,
    })
}

fn fits_i32(op: &'static str, what: &str, v: i64) -> Result<i32> {
    i32::try_from(v).map_err(|_| BackendError::BadArgument {
        op,
        msg: format!("{what} {v} is over cuBLAS's 32-bit limit"),
    })
}

/// The batched product of `a` viewed by `la` (`[batch.., M, K]`) and `b` viewed by `lb`
/// (`[batch.., K, N]`), as dense `[batch.., M, N]` storage. Shapes are already checked, and
/// both operands are on `a`'s GPU. `dense` makes a view dense when cuBLAS cannot read it.
pub(crate) fn matmul<E: Element>(
    a: (&CudaStorage<E>, &Layout),
    b: (&CudaStorage<E>, &Layout),
    dense: impl Fn(&CudaStorage<E>, &Layout) -> Result<CudaStorage<E>>,
) -> Result<CudaStorage<E>> {
    product(a, b, dense, Want::Nothing).map(|(out, _)| out)
}

/// The shortest A (rows) whose sums 16-bit products take from the epilogue. Measured on an
/// H200 (cuBLASLt 13.1): at 2048 or more rows the epilogue adds 2-9 us to a bf16 GEMM, less
/// than a separate column sum costs, but at 10 rows it took a 512x2048x10 GEMM from 6 to
/// 24 us. f32 products gain at every size measured (the epilogue adds about 2 us).
const ROW_SUMS_MIN_ROWS_16BIT: usize = 128;

/// [`matmul`] of an unbatched product `[M, K] x [K, N]` that also returns the sums of A's rows
/// (`[M]`, over K) when cuBLASLt's epilogue can write them during the product (a Linear's
/// bias gradient beside its weight gradient); `None` when it cannot, and the caller sums.
pub(crate) fn matmul_row_sums<E: Element>(
    a: (&CudaStorage<E>, &Layout),
    b: (&CudaStorage<E>, &Layout),
    dense: impl Fn(&CudaStorage<E>, &Layout) -> Result<CudaStorage<E>>,
) -> Result<(CudaStorage<E>, Option<CudaStorage<E>>)> {
    let rows = a.1.dims()[0];
    let fits = a.1.rank() == 2
        && match E::DTYPE {
            DType::F32 => true,
            DType::F16 | DType::BF16 => rows >= ROW_SUMS_MIN_ROWS_16BIT,
            _ => false,
        };
    let want = if fits { Want::RowSums } else { Want::Nothing };
    let (out, done) = product(a, b, dense, want)?;
    Ok(match done {
        Done::RowSums(sums) => (out, Some(sums)),
        _ => (out, None),
    })
}

/// [`matmul`] of an unbatched product `[M, K] x [K, N]` with `bias` (`N` dense elements from
/// the given offset) added to every row by cuBLASLt's epilogue; `false` when the epilogue
/// could not take it, and the caller adds it.
pub(crate) fn matmul_bias<E: Element>(
    a: (&CudaStorage<E>, &Layout),
    b: (&CudaStorage<E>, &Layout),
    bias: (&CudaStorage<E>, usize),
    dense: impl Fn(&CudaStorage<E>, &Layout) -> Result<CudaStorage<E>>,
) -> Result<(CudaStorage<E>, bool)> {
    let at = bias.0.ptr_at(bias.1).0;
    // A vector at an odd offset into its block would be read by the epilogue's vector loads.
    let fits =
        a.1.rank() == 2 && bias.0.gpu().device() == a.0.gpu().device() && at.is_multiple_of(16);
    let want = if fits { Want::Bias(at) } else { Want::Nothing };
    let (out, done) = product(a, b, dense, want)?;
    Ok((out, matches!(done, Done::Bias)))
}

/// What a product's epilogue is asked to do besides the product.
#[derive(Clone, Copy)]
enum Want {
    Nothing,
    /// Write the sums of rtx's A over K.
    RowSums,
    /// Add the bias at this address to every row.
    Bias(u64),
}

/// What a product's epilogue did.
enum Done<E: Element> {
    Nothing,
    RowSums(CudaStorage<E>),
    Bias,
}

/// The product, with what the epilogue could do of `want`.
fn product<E: Element>(
    (a, la): (&CudaStorage<E>, &Layout),
    (b, lb): (&CudaStorage<E>, &Layout),
    dense: impl Fn(&CudaStorage<E>, &Layout) -> Result<CudaStorage<E>>,
    want: Want,
) -> Result<(CudaStorage<E>, Done<E>)> {
    let op = "matmul";
    let g = a.gpu().clone();
    let Some((dt, compute, wide)) = types(E::DTYPE) else {
        return Err(BackendError::NoKernel {
            op: "matmul (integer)",
            device: g.device(),
        });
    };
    let (da, db) = (la.dims(), lb.dims());
    let r = da.len();
    let (m, k, n) = (da[r - 2], da[r - 1], db[r - 1]);
    let batch: usize = da[..r - 2].iter().product();
    let out = CudaStorage::<E>::alloc_on(&g, batch * m * n)?;
    if out.is_empty() {
        return Ok((out, Done::Nothing));
    }
    if k == 0 {
        g.bind()?;
        let bytes = out.len() * std::mem::size_of::<E>();
        // SAFETY: the block holds `bytes` bytes; zero bits are 0 in every float type.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                out.device_ptr().0,
                0,
                bytes,
                g.stream.cu_stream(),
            )
        }
        .map_err(|e| g.err("cuMemsetD8Async", e))?;
        return Ok((out, Done::Nothing));
    }
    // Operands cuBLAS cannot read in place are made dense (and kept alive for the call).
    let view = |s: &CudaStorage<E>, l: &Layout| -> Result<(CudaStorage<E>, usize, Operand)> {
        if let Some(o) = operand(l.dims(), l.strides()) {
            return Ok((s.clone(), l.offset(), o));
        }
        let d = dense(s, l)?;
        let o = operand(l.dims(), Layout::contiguous(l.dims()).strides()).ok_or_else(|| {
            BackendError::BadArgument {
                op,
                msg: format!("cannot describe dense sizes {:?} to cuBLAS", l.dims()),
            }
        })?;
        Ok((d, 0, o))
    };
    let (sa, offa, oa) = view(a, la)?;
    let (sb, offb, ob) = view(b, lb)?;
    fits_i32(op, "M", m as i64)?;
    fits_i32(op, "N", n as i64)?;
    fits_i32(op, "K", k as i64)?;
    fits_i32(op, "lda", oa.ld)?;
    fits_i32(op, "ldb", ob.ld)?;
    let call = Gemm {
        dtype: E::DTYPE,
        tf32: allow_tf32(),
        m,
        n,
        k,
        batch: fits_i32(op, "batch", batch as i64)?,
        a: oa,
        b: ob,
        a_ptr: sa.ptr_at(offa).0,
        b_ptr: sb.ptr_at(offb).0,
        c_ptr: out.device_ptr().0,
    };
    // `sa`, `sb` and `out` hold the blocks alive until the call is queued; the stream orders
    // any later reuse of the blocks after it.
    let epilogue = match want {
        Want::Nothing => None,
        Want::RowSums => {
            let sums = CudaStorage::<E>::alloc_on(&g, m)?;
            let at = sums.device_ptr().0;
            Some((super::blas_lt::Epilogue::RowSums(at), Done::RowSums(sums)))
        }
        Want::Bias(at) => Some((super::blas_lt::Epilogue::Bias(at), Done::Bias)),
    };
    if let Some((epilogue, done)) = epilogue {
        let ran = {
            let mut lt = super::context::lock(&g.blas_lt);
            if lt.is_none() {
                *lt = Some(super::blas_lt::create(&g)?);
            }
            let s = lt.as_mut().ok_or_else(|| BackendError::CudaUnavailable {
                msg: "no cuBLASLt handle".into(),
            })?;
            g.bind()?;
            super::blas_lt::run(&g, s, &call, epilogue)?
        };
        if ran {
            // Counted only when it ran: an epilogue cuBLASLt has no algorithm for falls
            // through to one plain product below, which counts itself.
            crate::dispatch::count(g.device());
            drop((sa, sb));
            return Ok((out, done));
        }
    }
    match gemm_library() {
        GemmLibrary::Cublas => {
            let mut blas = super::context::lock(&g.blas);
            if blas.is_none() {
                *blas = Some(create(&g)?);
            }
            let h = blas.as_ref().map(|b| b.handle);
            let h = h.ok_or_else(|| BackendError::CudaUnavailable {
                msg: "no cuBLAS handle".into(),
            })?;
            submit(&g, |g| run(g, h, &call, (dt, compute, wide)))?;
        }
        GemmLibrary::CublasLt => {
            let mut lt = super::context::lock(&g.blas_lt);
            if lt.is_none() {
                *lt = Some(super::blas_lt::create(&g)?);
            }
            let s = lt.as_mut().ok_or_else(|| BackendError::CudaUnavailable {
                msg: "no cuBLASLt handle".into(),
            })?;
            let plain = super::blas_lt::Epilogue::Nothing;
            submit(&g, |g| super::blas_lt::run(g, s, &call, plain).map(|_| ()))?;
        }
    }
    drop((sa, sb));
    Ok((out, Done::Nothing))
}

/// One product, described for either library.
pub(crate) struct Gemm {
    /// The element type.
    pub dtype: DType,
    /// Whether f32 may use TF32.
    pub tf32: bool,
    /// Rows of rtx's A and C.
    pub m: usize,
    /// Columns of rtx's B and C.
    pub n: usize,
    /// The inner size.
    pub k: usize,
    /// Matrices in the batch.
    pub batch: i32,
    /// How cuBLAS reads rtx's A.
    pub a: Operand,
    /// How cuBLAS reads rtx's B.
    pub b: Operand,
    /// The address of A's first element.
    pub a_ptr: u64,
    /// The address of B's first element.
    pub b_ptr: u64,
    /// The address of the dense output.
    pub c_ptr: u64,
}

/// One strided-batched cuBLAS call.
fn run(
    g: &Gpu,
    handle: cublasHandle_t,
    c: &Gemm,
    (dt, compute, wide): (DataType, Compute, bool),
) -> Result<()> {
    let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
    let (alpha, beta): (*const c_void, *const c_void) = if wide {
        (
            (&one64 as *const f64).cast(),
            (&zero64 as *const f64).cast(),
        )
    } else {
        (
            (&one32 as *const f32).cast(),
            (&zero32 as *const f32).cast(),
        )
    };
    // SAFETY: the pointers are inside live blocks for the call; the leading dimensions and
    // batch strides describe those views (checked by `operand`, sizes checked to fit i32);
    // alpha and beta point to host scalars of the compute scale type.
    unsafe {
        cublas::gemm_strided_batched_ex(
            handle,
            c.b.op,
            c.a.op,
            c.n as i32,
            c.m as i32,
            c.k as i32,
            alpha,
            c.b_ptr as *const c_void,
            dt,
            c.b.ld as i32,
            c.b.batch_stride,
            c.a_ptr as *const c_void,
            dt,
            c.a.ld as i32,
            c.a.batch_stride,
            beta,
            c.c_ptr as *mut c_void,
            dt,
            c.n as i32,
            (c.m * c.n) as i64,
            c.batch,
            compute,
            cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
        )
    }
    .map_err(|e| blas_err(g, "cublasGemmStridedBatchedEx", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_major_reads_as_n_and_transposed_views_as_t() {
        let o = operand(&[3, 4], &[4, 1]).unwrap_or_else(|| panic!("row-major"));
        assert_eq!((o.op, o.ld, o.batch_stride), (Op::CUBLAS_OP_N, 4, 0));
        let o = operand(&[4, 3], &[1, 4]).unwrap_or_else(|| panic!("transposed"));
        assert_eq!((o.op, o.ld), (Op::CUBLAS_OP_T, 4));
        // A padded row (a slice of a wider matrix) keeps its real leading dimension.
        let o = operand(&[3, 4], &[10, 1]).unwrap_or_else(|| panic!("padded"));
        assert_eq!(o.ld, 10);
    }

    #[test]
    fn batches_flatten_or_are_refused() {
        let o = operand(&[2, 5, 3, 4], &[60, 12, 4, 1]).unwrap_or_else(|| panic!("dense"));
        assert_eq!(o.batch_stride, 12);
        let o = operand(&[2, 5, 3, 4], &[0, 0, 4, 1]).unwrap_or_else(|| panic!("broadcast"));
        assert_eq!(o.batch_stride, 0);
        // Batch dims that do not flatten to one stride.
        assert_eq!(operand(&[2, 5, 3, 4], &[100, 12, 4, 1]), None);
        // A stepped slice: neither unit row nor unit column stride.
        assert_eq!(operand(&[3, 4], &[8, 2]), None);
        // A broadcast row inside a matrix.
        assert_eq!(operand(&[3, 4], &[0, 1]), None);
    }
}
