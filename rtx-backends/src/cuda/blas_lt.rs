//! Matrix products through cuBLASLt, the library behind cuBLAS's GEMMs that also takes fused
//! epilogues. A product's descriptors and the algorithm cuBLASLt's heuristic picks are planned
//! once per shape and kept, so a repeated product (every training step) costs one library call.
//!
//! Two epilogues are used ([`Epilogue`]): a bias added to every row of the product (a
//! Linear's forward, instead of a pass over its output), and the sums of rtx's A over K
//! written beside the product (cuBLASLt's bias-gradient epilogue on its B operand), which
//! gives a Linear its bias gradient inside the weight-gradient GEMM instead of a separate
//! reduction over the output gradient.
//!
//! The operand mapping is [`super::blas`]'s: row-major `C = A B` as column-major
//! `Cᵀ = Bᵀ Aᵀ`, transposed views through the operation flags.

use super::alloc::{Allocator, DeviceBuffer, alloc};
use super::blas::{Gemm, Operand};
use super::context::Context;
use super::probe::{Lib, guard, require};
use crate::{BackendError, Result};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys::{
    self, cublasComputeType_t as Compute, cublasLtHandle_t, cublasLtMatmulAlgo_t,
    cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t as DescAttr,
    cublasLtMatmulPreferenceAttributes_t as PrefAttr, cublasLtMatrixLayout_t,
    cublasLtMatrixLayoutAttribute_t as LayoutAttr, cudaDataType as DataType,
};
use rtx_kernels::DType;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// Workspace for cuBLASLt's algorithms (the size PyTorch gives it on Hopper).
const WORKSPACE: usize = 32 << 20;

/// A GPU's cuBLASLt handle, workspace and planned products.
pub(crate) struct BlasLt {
    handle: cublasLtHandle_t,
    workspace: DeviceBuffer,
    plans: HashMap<PlanKey, Plan>,
    /// Products whose epilogue this cuBLASLt has no algorithm for, so they are not asked again.
    unsupported: HashSet<PlanKey>,
}

// SAFETY: used only under the GPU's `blas_lt` mutex, one thread at a time.
unsafe impl Send for BlasLt {}

impl Drop for BlasLt {
    fn drop(&mut self) {
        self.plans.clear();
        // SAFETY: created by cublasLtCreate and destroyed once, here, after its plans.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

/// Everything that decides a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PlanKey {
    dtype: DType,
    tf32: bool,
    m: i64,
    n: i64,
    k: i64,
    batch: i32,
    a: (bool, i64, i64),
    b: (bool, i64, i64),
    /// Alignment of the A, B and C pointers in bytes (capped at 256): the heuristic may pick
    /// vectorized algorithms only for aligned operands, and a view's offset can misalign one.
    align: [u32; 3],
    /// The epilogue's kind: 0 none, 1 row sums, 2 bias (see [`Epilogue`]).
    epilogue: u8,
}

/// What cuBLASLt does after a product, with the device address it writes or reads.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Epilogue {
    /// The product alone.
    Nothing,
    /// Also write the sums of rtx's A over K (`m` elements of the product's type) here.
    RowSums(u64),
    /// Add the `n` elements here to every row of the product.
    Bias(u64),
}

impl Epilogue {
    fn kind(self) -> u8 {
        match self {
            Epilogue::Nothing => 0,
            Epilogue::RowSums(_) => 1,
            Epilogue::Bias(_) => 2,
        }
    }

    fn pointer(self) -> Option<u64> {
        match self {
            Epilogue::Nothing => None,
            Epilogue::RowSums(p) | Epilogue::Bias(p) => Some(p),
        }
    }
}

/// The largest power of two dividing `ptr`, at most 256.
fn alignment(ptr: u64) -> u32 {
    if ptr == 0 {
        256
    } else {
        (1u64 << ptr.trailing_zeros().min(8)) as u32
    }
}

/// The descriptors and chosen algorithm of one product shape.
struct Plan {
    desc: cublasLtMatmulDesc_t,
    layouts: [cublasLtMatrixLayout_t; 3],
    algo: cublasLtMatmulAlgo_t,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created for this plan and is destroyed once, here.
        unsafe {
            let _ = lt::destroy_matmul_desc(self.desc);
            for l in self.layouts {
                let _ = lt::destroy_matrix_layout(l);
            }
        }
    }
}

fn lt_err(
    cx: &Context,
    call: &'static str,
    e: cudarc::cublaslt::result::CublasError,
) -> BackendError {
    BackendError::Cuda {
        device: cx.device(),
        call,
        msg: format!("{:?}", e.0),
    }
}

/// Creates the handle of the GPU of `cx`, with a workspace from its allocator `mem`.
pub(crate) fn create(cx: &Context, mem: &Arc<Mutex<Allocator>>) -> Result<BlasLt> {
    require(Lib::CublasLt)?;
    cx.bind()?;
    let handle =
        guard("cublasLtCreate", lt::create_handle)?.map_err(|e| lt_err(cx, "cublasLtCreate", e))?;
    Ok(BlasLt {
        handle,
        workspace: alloc(cx, mem, WORKSPACE)?,
        plans: HashMap::new(),
        unsupported: HashSet::new(),
    })
}

fn types(dtype: DType, tf32: bool) -> Option<(DataType, Compute, DataType)> {
    Some(match dtype {
        DType::F32 if tf32 => (
            DataType::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F_FAST_TF32,
            DataType::CUDA_R_32F,
        ),
        DType::F32 => (
            DataType::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F,
            DataType::CUDA_R_32F,
        ),
        DType::F64 => (
            DataType::CUDA_R_64F,
            Compute::CUBLAS_COMPUTE_64F,
            DataType::CUDA_R_64F,
        ),
        DType::F16 => (
            DataType::CUDA_R_16F,
            Compute::CUBLAS_COMPUTE_32F,
            DataType::CUDA_R_32F,
        ),
        DType::BF16 => (
            DataType::CUDA_R_16BF,
            Compute::CUBLAS_COMPUTE_32F,
            DataType::CUDA_R_32F,
        ),
        _ => return None,
    })
}

/// A column-major layout of `rows`×`cols` with leading dimension `ld`, batched.
fn layout(
    dt: DataType,
    (rows, cols, ld): (i64, i64, i64),
    batch: i32,
    stride: i64,
) -> std::result::Result<cublasLtMatrixLayout_t, cudarc::cublaslt::result::CublasError> {
    let l = lt::create_matrix_layout(dt, rows as u64, cols as u64, ld)?;
    // SAFETY: a live layout and attribute values of the documented types (i32, i64).
    unsafe {
        lt::set_matrix_layout_attribute(
            l,
            LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
            (&batch as *const i32).cast(),
            4,
        )?;
        lt::set_matrix_layout_attribute(
            l,
            LayoutAttr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
            (&stride as *const i64).cast(),
            8,
        )?;
    }
    Ok(l)
}

/// The stored (rows, cols, ld) of an operand whose `op` result is `rows_op`×`cols_op`.
fn stored(o: &Operand, rows_op: i64, cols_op: i64) -> (i64, i64, i64) {
    if o.op == cublasOperation_t::CUBLAS_OP_N {
        (rows_op, cols_op, o.ld)
    } else {
        (cols_op, rows_op, o.ld)
    }
}

fn plan(
    s: &BlasLt,
    key: &PlanKey,
    call: &Gemm,
) -> std::result::Result<Plan, cudarc::cublaslt::result::CublasError> {
    let unsupported =
        cudarc::cublaslt::result::CublasError(sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED);
    let (dt, compute, scale) = types(key.dtype, key.tf32).ok_or(unsupported)?;
    let desc = lt::create_matmul_desc(compute, scale)?;
    // The plan owns every descriptor from here, so an error below frees what was made.
    let mut p = Plan {
        desc,
        layouts: [std::ptr::null_mut(); 3],
        algo: cublasLtMatmulAlgo_t { data: [0; 8] },
    };
    // cuBLAS's A is rtx's B (N×K after its op) and cuBLAS's B is rtx's A (K×M after its op).
    let (ob, oa) = (&call.b, &call.a);
    let ta = ob.op as i32;
    let tb = oa.op as i32;
    // SAFETY: live descriptors and attribute values of the documented type (i32).
    unsafe {
        lt::set_matmul_desc_attribute(
            desc,
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
            (&ta as *const i32).cast(),
            4,
        )?;
        lt::set_matmul_desc_attribute(
            desc,
            DescAttr::CUBLASLT_MATMUL_DESC_TRANSB,
            (&tb as *const i32).cast(),
            4,
        )?;
        let epilogue = match key.epilogue {
            // cuBLAS's B is rtx's A, and its "bias gradient" is the sum over K.
            1 => Some(sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BGRADB),
            // cuBLAS's D is rtx's C transposed: its rows are rtx's columns, one bias each.
            2 => Some(sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS),
            _ => None,
        };
        if let Some(epilogue) = epilogue {
            let epilogue = epilogue as u32;
            lt::set_matmul_desc_attribute(
                desc,
                DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE,
                (&epilogue as *const u32).cast(),
                4,
            )?;
        }
    }
    p.layouts[0] = layout(dt, stored(ob, key.n, key.k), key.batch, ob.batch_stride)?;
    p.layouts[1] = layout(dt, stored(oa, key.k, key.m), key.batch, oa.batch_stride)?;
    p.layouts[2] = layout(dt, (key.n, key.m, key.n), key.batch, key.m * key.n)?;
    let pref = lt::create_matmul_pref()?;
    let ws = WORKSPACE as u64;
    // SAFETY: a live preference, destroyed right after the query.
    let heuristic = unsafe {
        let r = lt::set_matmul_pref_attribute(
            pref,
            PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            (&ws as *const u64).cast(),
            8,
        )
        .and_then(|()| {
            // cuBLAS's A is rtx's B and cuBLAS's B is rtx's A.
            let aligns = [
                (
                    PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    key.align[1],
                ),
                (
                    PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    key.align[0],
                ),
                (
                    PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    key.align[2],
                ),
                (
                    PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                    key.align[2],
                ),
            ];
            for (attr, bytes) in aligns {
                lt::set_matmul_pref_attribute(pref, attr, (&bytes as *const u32).cast(), 4)?;
            }
            lt::get_matmul_algo_heuristic(
                s.handle,
                desc,
                p.layouts[0],
                p.layouts[1],
                p.layouts[2],
                p.layouts[2],
                pref,
            )
        });
        let _ = lt::destroy_matmul_pref(pref);
        r?
    };
    p.algo = heuristic.algo;
    Ok(p)
}

/// Runs one planned product (planning it on first sight of its shape) with its `epilogue`
/// (which needs an unbatched product); `Ok(false)` means this cuBLASLt has no algorithm with
/// that epilogue for the product, and nothing ran. The product is queued on the stream of
/// `cx`, the GPU `s` was created for.
pub(crate) fn run(cx: &Context, s: &mut BlasLt, call: &Gemm, epilogue: Epilogue) -> Result<bool> {
    let key = PlanKey {
        dtype: call.dtype,
        tf32: call.tf32,
        m: call.m as i64,
        n: call.n as i64,
        k: call.k as i64,
        batch: call.batch,
        a: (
            call.a.op == cublasOperation_t::CUBLAS_OP_T,
            call.a.ld,
            call.a.batch_stride,
        ),
        b: (
            call.b.op == cublasOperation_t::CUBLAS_OP_T,
            call.b.ld,
            call.b.batch_stride,
        ),
        align: [
            alignment(call.a_ptr),
            alignment(call.b_ptr),
            alignment(call.c_ptr),
        ],
        epilogue: epilogue.kind(),
    };
    if s.unsupported.contains(&key) {
        return Ok(false);
    }
    if !s.plans.contains_key(&key) {
        let p = match plan(s, &key, call) {
            Ok(p) => p,
            Err(e)
                if key.epilogue != 0 && e.0 == sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED =>
            {
                s.unsupported.insert(key);
                return Ok(false);
            }
            Err(e) => return Err(lt_err(cx, "cublasLtMatmulAlgoGetHeuristic", e)),
        };
        s.plans.insert(key, p);
    }
    let p = s
        .plans
        .get(&key)
        .ok_or_else(|| BackendError::CudaUnavailable {
            msg: "cuBLASLt plan vanished".into(),
        })?;
    let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
    let (alpha, beta): (*const c_void, *const c_void) = if call.dtype == DType::F64 {
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
    if let Some(at) = epilogue.pointer() {
        // SAFETY: a live descriptor, used under the handle's mutex; the pointer is read when
        // the product is queued (or captured), and the caller keeps the vector there.
        unsafe {
            lt::set_matmul_desc_attribute(
                p.desc,
                DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                (&at as *const u64).cast(),
                8,
            )
        }
        .map_err(|e| lt_err(cx, "cublasLtMatmulDescSetAttribute", e))?;
    }
    // SAFETY: the plan's layouts describe the views behind these pointers (see `plan`); the
    // workspace is this handle's, on the GPU's one stream.
    unsafe {
        lt::matmul(
            s.handle,
            p.desc,
            alpha,
            beta,
            call.b_ptr as *const c_void,
            p.layouts[0],
            call.a_ptr as *const c_void,
            p.layouts[1],
            call.c_ptr as *const c_void,
            p.layouts[2],
            call.c_ptr as *mut c_void,
            p.layouts[2],
            &p.algo,
            s.workspace.ptr as *mut c_void,
            WORKSPACE,
            cx.stream.cu_stream() as _,
        )
    }
    .map_err(|e| lt_err(cx, "cublasLtMatmul", e))?;
    Ok(true)
}
