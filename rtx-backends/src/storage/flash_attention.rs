//! Backend entry points for fused attention on a GPU (FlashAttention-2's method, the
//! `#[kernel]`s `rtx_kernels::kernels::flash_attn_*`, launched by `cuda/ops_attention.rs`):
//! the forward, and the backward that recomputes the probabilities from the forward's
//! log-sum-exp. Like the CPU's one-pass attention (`attention.rs`), an optimization of the
//! composition `rtx` defines attention as.
//!
//! Operands lie where an [`AttentionLayout`] says, so heads can be read in place from a fused
//! projection's output and the output and gradients written where the next op reads them;
//! dense `[batch heads, t, d]` buffers are [`AttentionLayout::dense`].
//!
//! Invariant: nothing reaches the kernels unchecked: the layout is one the kernels take
//! ([`AttentionLayout::check`]), every element it places an input at lies in that input's
//! buffer, and every output buffer is made here, of exactly the elements its strides fill, so
//! no element of it is left unwritten.

use super::Storage;
use super::erased::{AnyRef, AnyStorage};
use crate::cuda::{CudaStorage, DevicePtr};
use crate::{AttentionDims, AttentionLayout, BackendError, Device, HeadStrides, Result};
use half::{bf16, f16};
use rtx_kernels::{DType, Float};

/// The gradients of fused attention's q, k and v, where their [`AttentionLayout`] puts them.
#[derive(Clone, Debug)]
pub enum AttentionGrads<S> {
    /// One buffer of `3 batch heads t d` elements holding dq, dk and dv at the offsets and
    /// strides of q, k and v (a `packed` layout: a fused projection's gradient).
    Packed(S),
    /// dq, dk and dv, each in a buffer of its own (`batch heads t d` elements) from offset 0,
    /// through its group's strides.
    Separate([S; 3]),
}

impl<S> AttentionGrads<S> {
    /// The same gradients with each buffer mapped by `f`.
    pub fn map<T>(self, mut f: impl FnMut(S) -> T) -> AttentionGrads<T> {
        match self {
            AttentionGrads::Packed(s) => AttentionGrads::Packed(f(s)),
            AttentionGrads::Separate(s) => AttentionGrads::Separate(s.map(f)),
        }
    }
}

impl<E: Float> Storage<E> {
    /// Fused attention on a GPU: for `self` = `q` and `k`, `v`, each a buffer holding its
    /// operand at `layout`'s offset and strides (`[batch, heads, t_q, d]` for q,
    /// `[batch, heads, t_k, d]` for k and v), returns `o = softmax(scale q kᵀ, causal mask when
    /// asked) v`, a new buffer of `batch heads t_q d` elements written through `layout.o`, and
    /// each query row's log-sum-exp `[batch heads, t_q]` in f32, which
    /// [`Storage::flash_attention_backward`] needs. f16 and bf16 on a GPU, head dims a multiple
    /// of 16 up to 128, layouts [`AttentionLayout::check`] accepts; anything else is a
    /// `BadArgument` error, since callers compose instead.
    pub fn flash_attention(
        &self,
        k: &Self,
        v: &Self,
        dims: AttentionDims,
        layout: AttentionLayout,
    ) -> Result<(Self, Storage<f32>)> {
        let qkv = [AnyRef::of(self), AnyRef::of(k), AnyRef::of(v)];
        let (o, lse) = flash_forward_any(qkv, &dims, &layout)?;
        Ok((o.into_typed(), lse))
    }

    /// The gradients of [`Storage::flash_attention`]'s inputs (`self` = `q`, `k`, `v`, at
    /// `layout`'s offsets and strides) for the upstream gradient `dout` of its output `o`
    /// (both through `layout.o` from offset 0), from the `lse` it returned: three launches on a
    /// GPU that recompute the probabilities rather than read them. The gradients come in one
    /// buffer or three, as `layout.packed` says ([`AttentionGrads`]).
    pub fn flash_attention_backward(
        &self,
        (k, v): (&Self, &Self),
        (o, lse): (&Self, &Storage<f32>),
        dout: &Self,
        dims: AttentionDims,
        layout: AttentionLayout,
    ) -> Result<AttentionGrads<Self>> {
        let inputs = [self, k, v, o, dout].map(AnyRef::of);
        let grads = flash_backward_any(inputs, lse, &dims, &layout)?;
        Ok(grads.map(AnyStorage::into_typed))
    }
}

/// Whether the fused kernels take attention of element type `dtype` with head dim `d` (before
/// any buffer is made, so that callers choose between them and the composition).
pub fn flash_attention_supported(dtype: DType, d: usize) -> bool {
    matches!(dtype, DType::F16 | DType::BF16) && d.is_multiple_of(16) && (16..=128).contains(&d)
}

/// A `BadArgument` error of fused attention.
fn bad(msg: String) -> BackendError {
    BackendError::BadArgument {
        op: "flash_attention",
        msg,
    }
}

/// One past the last element an operand of `t` rows through `s` from `offset` reaches (0 when
/// it has none).
fn extent(s: &HeadStrides, offset: usize, dims: &AttentionDims, t: usize) -> usize {
    let axes = s.axes(dims, t);
    if axes.iter().any(|&(size, _)| size == 0) {
        return 0;
    }
    offset + 1 + axes.iter().map(|&(n, st)| (n - 1) * st).sum::<usize>()
}

/// A fused-attention operand's GPU buffer, checked to be of the kernels' types on GPU
/// `ordinal` (the first operand's) and to hold the `t` rows `s` places from `offset`: the
/// address of its first element.
fn flash_operand(
    x: AnyRef,
    what: &str,
    (s, offset, t): (&HeadStrides, usize, usize),
    dims: &AttentionDims,
    ordinal: Option<usize>,
) -> Result<DevicePtr> {
    let (ptr, n, gpu) = match x {
        AnyRef::F16(Storage::Cuda(c)) => (c.ptr_at(offset), c.len(), c.ordinal()),
        AnyRef::BF16(Storage::Cuda(c)) => (c.ptr_at(offset), c.len(), c.ordinal()),
        _ => {
            return Err(bad(format!(
                "{what} is {:?} on {}; the fused kernels take f16 or bf16 on a GPU",
                x.dtype(),
                x.device()
            )));
        }
    };
    let need = extent(s, offset, dims, t);
    if n < need {
        return Err(bad(format!(
            "{what} [{}, {}, {t}, {}] at offset {offset} through strides [{}, {}, {}, 1] reaches \
             element {need}, past the {n} its buffer holds",
            dims.batch, dims.heads, dims.d, s.batch, s.head, s.row
        )));
    }
    if ordinal.is_some_and(|o| o != gpu) {
        return Err(bad(format!(
            "{what} is on cuda:{gpu}, the queries elsewhere"
        )));
    }
    Ok(ptr)
}

/// The GPU of the queries, after checking the sizes and the layout the kernels take.
fn flash_gpu(q: AnyRef, dims: &AttentionDims, layout: &AttentionLayout) -> Result<usize> {
    if !flash_attention_supported(q.dtype(), dims.d) {
        return Err(bad(format!(
            "the fused kernels take f16 or bf16 with a head dim a multiple of 16 up to 128, \
             not {:?} with {}; compose it from products and softmax",
            q.dtype(),
            dims.d
        )));
    }
    layout.check(dims).map_err(bad)?;
    match q.device() {
        Device::Cuda(n) => Ok(n),
        other => Err(bad(format!(
            "the fused kernels run on a GPU, the queries are on {other}"
        ))),
    }
}

/// A dense buffer of `len` elements of `dtype` (f16 or bf16) on GPU `ordinal`: to be written
/// by a kernel, or zeros when no kernel will write it (a gradient when there are no keys).
fn half_buffer(dtype: DType, ordinal: usize, len: usize, zeros: bool) -> Result<AnyStorage> {
    Ok(match (dtype, zeros) {
        (DType::F16, false) => AnyStorage::F16(Storage::Cuda(CudaStorage::uninit(ordinal, len)?)),
        (DType::F16, true) => {
            AnyStorage::F16(Storage::Cuda(CudaStorage::filled(ordinal, len, f16::ZERO)?))
        }
        (_, false) => AnyStorage::BF16(Storage::Cuda(CudaStorage::uninit(ordinal, len)?)),
        (_, true) => AnyStorage::BF16(Storage::Cuda(CudaStorage::filled(
            ordinal,
            len,
            bf16::ZERO,
        )?)),
    })
}

/// The address of element `index` of a buffer [`half_buffer`] made.
fn half_ptr(s: &AnyStorage, index: usize) -> DevicePtr {
    match s {
        AnyStorage::F16(Storage::Cuda(c)) => c.ptr_at(index),
        AnyStorage::BF16(Storage::Cuda(c)) => c.ptr_at(index),
        _ => unreachable!("half_buffer makes f16 or bf16 GPU buffers"),
    }
}

/// The addresses of q, k and v, checked against `layout`.
fn flash_inputs(
    [q, k, v]: [AnyRef; 3],
    dims: &AttentionDims,
    layout: &AttentionLayout,
    gpu: usize,
) -> Result<[DevicePtr; 3]> {
    let [oq, ok, ov] = layout.offsets;
    Ok([
        flash_operand(q, "q", (&layout.q, oq, dims.t_q), dims, Some(gpu))?,
        flash_operand(k, "k", (&layout.k, ok, dims.t_k), dims, Some(gpu))?,
        flash_operand(v, "v", (&layout.k, ov, dims.t_k), dims, Some(gpu))?,
    ])
}

/// [`Storage::flash_attention`] with the element type erased (compiled once, here).
fn flash_forward_any(
    qkv: [AnyRef; 3],
    dims: &AttentionDims,
    layout: &AttentionLayout,
) -> Result<(AnyStorage, Storage<f32>)> {
    let gpu = flash_gpu(qkv[0], dims, layout)?;
    let [qp, kp, vp] = flash_inputs(qkv, dims, layout, gpu)?;
    let nq = dims.rows() * dims.t_q * dims.d;
    // `layout.o` fills exactly these elements (checked above).
    let o = half_buffer(qkv[0].dtype(), gpu, nq, false)?;
    let lse = CudaStorage::<f32>::uninit(gpu, dims.rows() * dims.t_q)?;
    if nq > 0 {
        let ptrs = [qp, kp, vp, half_ptr(&o, 0), lse.device_ptr()];
        // SAFETY: every input was checked to hold the elements the layout places it at, and
        // the output and lse were made to hold theirs, on one GPU; offsets are multiples of 8
        // elements and rtx's allocations 256-byte aligned.
        unsafe { crate::cuda::ops_attention::forward(gpu, qkv[0].dtype(), ptrs, dims, layout)? };
    }
    Ok((o, Storage::Cuda(lse)))
}

/// [`Storage::flash_attention_backward`] with the element type erased (compiled once, here).
fn flash_backward_any(
    [q, k, v, o, dout]: [AnyRef; 5],
    lse: &Storage<f32>,
    dims: &AttentionDims,
    layout: &AttentionLayout,
) -> Result<AttentionGrads<AnyStorage>> {
    let gpu = flash_gpu(q, dims, layout)?;
    let [qp, kp, vp] = flash_inputs([q, k, v], dims, layout, gpu)?;
    let o_at = (&layout.o, 0, dims.t_q);
    let op = flash_operand(o, "o", o_at, dims, Some(gpu))?;
    let dp = flash_operand(dout, "the output's gradient", o_at, dims, Some(gpu))?;
    let rows = dims.rows() * dims.t_q;
    let lp = match lse {
        Storage::Cuda(l) if l.ordinal() == gpu && l.len() == rows => l.device_ptr(),
        _ => {
            return Err(bad(format!(
                "the log-sum-exp must be {rows} f32s on cuda:{gpu}, as the forward returned"
            )));
        }
    };
    let dtype = q.dtype();
    let (nq, nk) = (rows * dims.d, dims.rows() * dims.t_k * dims.d);
    // Each gradient's buffer holds exactly what its strides fill (checked above). Without
    // queries or keys no kernel runs: the gradients (of the other side) are zeros.
    let run = nq > 0 && nk > 0;
    let grads = if layout.packed {
        AttentionGrads::Packed(half_buffer(dtype, gpu, 3 * nq, !run)?)
    } else {
        let [dq, dk, dv] = [nq, nk, nk].map(|n| half_buffer(dtype, gpu, n, !run));
        AttentionGrads::Separate([dq?, dk?, dv?])
    };
    let [dqp, dkp, dvp] = match &grads {
        AttentionGrads::Packed(g) => layout.offsets.map(|at| half_ptr(g, at)),
        AttentionGrads::Separate(gs) => gs.each_ref().map(|g| half_ptr(g, 0)),
    };
    let delta = CudaStorage::<f32>::uninit(gpu, rows)?;
    if run {
        let inputs = [qp, kp, vp, op, lp, dp];
        let outputs = [dqp, dkp, dvp, delta.device_ptr()];
        // SAFETY: every input was checked to hold the elements the layout places it at, and
        // the gradients' buffers were made to hold exactly the elements their strides fill
        // (packed: together, without overlap), on one GPU; offsets are multiples of 8 elements
        // and rtx's allocations 256-byte aligned.
        unsafe { crate::cuda::ops_attention::backward(gpu, dtype, inputs, outputs, dims, layout)? };
    }
    Ok(grads)
}
