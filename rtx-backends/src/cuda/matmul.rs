//! Matrix products of storage on a GPU through cuBLAS or cuBLASLt (see [`GemmLibrary`]),
//! with cuBLASLt's epilogues adding a bias or writing row sums during the product when they
//! can. The libraries' handles are the GPU's (the `blas` and `blas_lt` modules); this module
//! maps views to operands, makes dense what cuBLAS cannot read, picks the library and
//! launches through the launch point.

use super::blas::{self, Gemm, GemmLibrary, Operand, allow_tf32, gemm_library, operand};
use super::blas_lt::{self, Epilogue};
use super::context::lock;
use super::launch::submit;
use super::storage::CudaStorage;
use crate::{BackendError, Layout, Result};
use rtx_kernels::{DType, Element};

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
    let Some((dt, compute, wide)) = blas::types(E::DTYPE) else {
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
            Some((Epilogue::RowSums(at), Done::RowSums(sums)))
        }
        Want::Bias(at) => Some((Epilogue::Bias(at), Done::Bias)),
    };
    if let Some((epilogue, done)) = epilogue {
        let ran = {
            let mut lt = lock(&g.blas_lt);
            if lt.is_none() {
                *lt = Some(blas_lt::create(&g, &g.alloc)?);
            }
            let s = lt.as_mut().ok_or_else(|| BackendError::CudaUnavailable {
                msg: "no cuBLASLt handle".into(),
            })?;
            g.bind()?;
            blas_lt::run(&g, s, &call, epilogue)?
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
            let mut handle = lock(&g.blas);
            if handle.is_none() {
                *handle = Some(blas::create(&g, &g.alloc)?);
            }
            let b = handle
                .as_ref()
                .ok_or_else(|| BackendError::CudaUnavailable {
                    msg: "no cuBLAS handle".into(),
                })?;
            submit(&g, |g| b.run(g, &call, (dt, compute, wide)))?;
        }
        GemmLibrary::CublasLt => {
            let mut lt = lock(&g.blas_lt);
            if lt.is_none() {
                *lt = Some(blas_lt::create(&g, &g.alloc)?);
            }
            let s = lt.as_mut().ok_or_else(|| BackendError::CudaUnavailable {
                msg: "no cuBLASLt handle".into(),
            })?;
            let plain = Epilogue::Nothing;
            submit(&g, |g| blas_lt::run(g, s, &call, plain).map(|_| ()))?;
        }
    }
    drop((sa, sb));
    Ok((out, Done::Nothing))
}
