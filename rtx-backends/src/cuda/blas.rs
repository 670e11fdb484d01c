//! cuBLAS: a GPU's handle with its workspace, and the one strided-batched call: f32 (TF32
//! only when [`set_allow_tf32`] asks for it), f64, and f16/bf16 with f32 accumulation. Also
//! here, below both libraries: the settings they read ([`GemmLibrary`], TF32) and the
//! description of a product they share ([`Gemm`], [`Operand`]). Products of storage, which
//! pick the library, are the `matmul` module's.
//!
//! cuBLAS is column-major and rtx is row-major. A row-major `C = A B` is the column-major
//! `Cᵀ = Bᵀ Aᵀ`, and a row-major buffer read column-major is already its transpose, so the
//! call swaps the operands and transposes nothing. A transposed view (unit row stride) maps to
//! the operation flag instead of a copy; [`operand`] says when a view is neither row- nor
//! column-major (a stepped slice, a broadcast inside a matrix) and must be made dense first.

use super::alloc::{Allocator, DeviceBuffer, alloc};
use super::context::Context;
use super::probe::{Lib, guard, require};
use crate::{BackendError, Result};
use cudarc::cublas::result as cublas;
use cudarc::cublas::sys::{
    cublasComputeType_t as Compute, cublasGemmAlgo_t, cublasHandle_t, cublasMath_t,
    cublasOperation_t as Op, cudaDataType as DataType,
};
use rtx_kernels::DType;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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

fn blas_err(
    cx: &Context,
    call: &'static str,
    e: cudarc::cublas::result::CublasError,
) -> BackendError {
    BackendError::Cuda {
        device: cx.device(),
        call,
        msg: format!("{:?}", e.0),
    }
}

/// Creates the handle of the GPU of `cx` on its stream, with a workspace from its allocator
/// `mem`.
pub(crate) fn create(cx: &Context, mem: &Arc<Mutex<Allocator>>) -> Result<Blas> {
    require(Lib::Cublas)?;
    cx.bind()?;
    let handle = guard("cublasCreate", cublas::create_handle)?
        .map_err(|e| blas_err(cx, "cublasCreate", e))?;
    let workspace = alloc(cx, mem, WORKSPACE)?;
    let blas = Blas {
        handle,
        _workspace: workspace,
    };
    // SAFETY: a live handle, the GPU's own stream, and a workspace block owned by `blas`.
    unsafe {
        cublas::set_stream(handle, cx.stream.cu_stream() as _)
            .map_err(|e| blas_err(cx, "cublasSetStream", e))?;
        cudarc::cublas::sys::cublasSetWorkspace_v2(
            handle,
            blas._workspace.ptr as *mut c_void,
            WORKSPACE,
        )
        .result()
        .map_err(|e| blas_err(cx, "cublasSetWorkspace", e))?;
        cudarc::cublas::sys::cublasSetMathMode(handle, cublasMath_t::CUBLAS_DEFAULT_MATH)
            .result()
            .map_err(|e| blas_err(cx, "cublasSetMathMode", e))?;
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
pub(crate) fn types(dtype: DType) -> Option<(DataType, Compute, bool)> {
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

impl Blas {
    /// Queues one strided-batched call on the stream of `cx` (the GPU this handle was
    /// created for), with the [`types`] of its element type.
    pub(crate) fn run(
        &self,
        cx: &Context,
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
                self.handle,
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
        .map_err(|e| blas_err(cx, "cublasGemmStridedBatchedEx", e))
    }
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
