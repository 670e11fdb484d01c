//! The GPU side of the storage entry points: elementwise maps, axis reductions, row
//! statistics and dense copies, each one launch of a `#[kernel]` entry (a view that a kernel
//! cannot read directly is first made dense by the `copy` kernel; a column reduction over few
//! columns takes two). Softmax is in `ops_softmax`. The helpers the other `ops_*` files share
//! (dense copies, the row kernels' launch shapes, the host check of indices) are here, so the
//! other `ops_*` files may depend on this one and this one depends on none of them.
//!
//! Invariant: every result is fresh, contiguous storage on the inputs' GPU, and the
//! arguments of each launch are built by walking the entry's parameter list, so the order is
//! the descriptor's, never a hand-kept copy of it.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::{DevicePtr, LaunchConfig};
use super::storage::CudaStorage;
use crate::{BackendError, Layout, Result};
use rtx_kernels::DType;
use rtx_kernels::kernel::{
    KernelKind, KernelShape, KernelSource, KernelStrides, ParamType, ScalarType, VECTOR_LAUNCH,
    Variant,
};
use rtx_kernels::{Element, kernels};

/// One input of an elementwise launch: its buffer, element size and (broadcast) layout.
pub(crate) struct In<'a> {
    ptr: DevicePtr,
    elem_bytes: usize,
    layout: &'a Layout,
}

/// An input read from `c` through `l`.
pub(crate) fn input<'a, E: Element>(c: &CudaStorage<E>, l: &'a Layout) -> In<'a> {
    In {
        ptr: c.device_ptr(),
        elem_bytes: std::mem::size_of::<E>(),
        layout: l,
    }
}

fn bad(op: &'static str, msg: impl std::fmt::Display) -> BackendError {
    BackendError::BadArgument {
        op,
        msg: msg.to_string(),
    }
}

/// Threads per block of elementwise launches.
const BLOCK: u32 = 256;

/// Applies the elementwise kernel `src` (entry for `dtype`) over `dims`: one launch, into fresh
/// storage of `O` (the element type, or `bool` for a predicate). `uniforms` are the
/// `#[uniform]` scalars in declaration order (a `T` uniform is passed in the compute type, an
/// integer one converted to its type). Contiguous inputs take the vectorized entry; any view
/// or broadcast takes the strided one.
pub(crate) fn map<O: Element>(
    ordinal: usize,
    src: &'static KernelSource,
    dtype: DType,
    dims: &[usize],
    inputs: &[In<'_>],
    uniforms: &[f64],
) -> Result<CudaStorage<O>> {
    let uniforms: Vec<Arg> = uniforms.iter().map(|&u| Arg::Acc(u)).collect();
    map_with(ordinal, src, dtype, dims, inputs, &uniforms)
}

/// [`map`] with the `#[uniform]` scalars as launch arguments (`Arg::I64` keeps an integer
/// exact where an `f64` would round it).
pub(crate) fn map_with<O: Element>(
    ordinal: usize,
    src: &'static KernelSource,
    dtype: DType,
    dims: &[usize],
    inputs: &[In<'_>],
    uniforms: &[Arg],
) -> Result<CudaStorage<O>> {
    let n: usize = dims.iter().product();
    let contiguous = inputs
        .iter()
        .all(|i| i.layout.dims() == dims && i.layout.is_contiguous());
    let variant = if contiguous {
        Variant::Contiguous
    } else {
        Variant::Strided
    };
    let entry = kernel_entry(ordinal, src, dtype, O::DTYPE, variant)?;
    let out = CudaStorage::<O>::uninit(ordinal, n)?;
    if n == 0 {
        return Ok(out);
    }
    // The strided entry walks the fewest dims that describe every input's steps, in 16-byte
    // vectors where the layouts allow.
    let (dims, mut strides) = coalesce(dims, inputs);
    let lanes = match src.kind {
        KernelKind::Elementwise { vectors: true, .. } if variant == Variant::Strided => {
            vector_lanes(dtype, &dims, inputs, &strides, out.device_ptr(), O::DTYPE)
        }
        _ => None,
    };
    let mut shape = KernelShape::new(&dims).map_err(|e| bad(src.name, e))?;
    if let Some(w) = lanes {
        let inner = dims.len() - 1;
        shape.dims[inner] /= w as u64;
        shape.vectors = VECTOR_LAUNCH;
        for (i, s) in strides.iter_mut().enumerate() {
            if s[inner] == 1 {
                s[inner] = w as isize;
                shape.vectors |= 1 << i;
            }
        }
    }
    let mut args = Vec::with_capacity(entry.params.len());
    let (mut next_in, mut next_uniform) = (0, 0);
    let last = entry.params.len().saturating_sub(1);
    for (at, p) in entry.params.iter().enumerate() {
        let arg = match p.ty {
            ParamType::Ptr { mutable: true, .. } => Arg::Ptr(out.device_ptr()),
            ParamType::Ptr { mutable: false, .. } => {
                let i = inputs.get(next_in).ok_or_else(|| {
                    bad(
                        src.name,
                        format!("{} inputs given, more needed", inputs.len()),
                    )
                })?;
                next_in += (variant == Variant::Contiguous) as usize;
                let start = if variant == Variant::Contiguous {
                    i.layout.offset()
                } else {
                    0
                };
                Arg::Ptr(DevicePtr(i.ptr.0 + (start * i.elem_bytes) as u64))
            }
            ParamType::Strides => {
                let i = &inputs[next_in];
                let strides = &strides[next_in];
                next_in += 1;
                Arg::Strides(
                    KernelStrides::new(i.layout.offset(), strides).map_err(|e| bad(src.name, e))?,
                )
            }
            ParamType::Shape => Arg::Shape(shape),
            // Elementwise entries never take tables of buffers or tensor maps (SIMT kernels
            // only).
            ParamType::Table { .. } | ParamType::TensorMap => {
                return Err(bad(
                    src.name,
                    "an elementwise entry takes no table or tensor map",
                ));
            }
            // The element count closes every elementwise entry's list.
            ParamType::Value(_) if at == last => Arg::U64(n as u64),
            ParamType::Value(_) => {
                let u = uniforms.get(next_uniform).copied().ok_or_else(|| {
                    bad(
                        src.name,
                        format!("{} uniforms given, more needed", uniforms.len()),
                    )
                })?;
                next_uniform += 1;
                // A float from the caller becomes the integer a uniform of integer type takes.
                match (u, p.ty) {
                    (Arg::Acc(x), ParamType::Value(ScalarType::U64)) => Arg::U64(x as u64),
                    (Arg::Acc(x), ParamType::Value(ScalarType::I64)) => Arg::I64(x as i64),
                    (Arg::Acc(x), ParamType::Value(ScalarType::U32)) => Arg::U32(x as u32),
                    (Arg::Acc(x), ParamType::Value(ScalarType::I32)) => Arg::I32(x as i32),
                    (u, _) => u,
                }
            }
        };
        args.push(arg);
    }
    if next_in != inputs.len() || next_uniform != uniforms.len() {
        return Err(bad(
            src.name,
            format!(
                "{} inputs and {} uniforms given, the kernel takes {next_in} and {next_uniform}",
                inputs.len(),
                uniforms.len()
            ),
        ));
    }
    // Contiguous entries and vector launches move 16 bytes per thread and step; other
    // strided ones one element.
    let per_thread = if variant == Variant::Contiguous {
        (16 / dtype.size_in_bytes()).max(1)
    } else {
        lanes.unwrap_or(1)
    };
    let config = LaunchConfig::for_elements(n.div_ceil(per_thread), BLOCK);
    // SAFETY: `out` holds `n` elements; every input layout was broadcast to `dims` by the
    // caller over storage it reaches (Layout's invariant), and the contiguous entry is used
    // only where each input holds `n` dense elements from its offset.
    unsafe { launch_entry(ordinal, src, entry, config, &args)? };
    Ok(out)
}

/// `dims` and each input's strides with size-1 dims dropped and neighbouring dims merged
/// where every input steps across them as across one dim (the outer stride is the inner one
/// times the inner size): a [B, T, F] activation plus an [F] bias becomes [B*T, F]. Fewer dims
/// mean fewer divisions per element, and a longer innermost dim lets the strided entry move
/// 16-byte vectors. The element order (row-major over `dims`) is unchanged.
fn coalesce(dims: &[usize], inputs: &[In<'_>]) -> (Vec<usize>, Vec<Vec<isize>>) {
    let strides: Vec<Vec<isize>> = inputs
        .iter()
        .map(|i| i.layout.strides().iter().map(|&s| s as isize).collect())
        .collect();
    if strides.iter().any(|s| s.len() != dims.len()) {
        return (dims.to_vec(), strides);
    }
    let mut out_dims: Vec<usize> = Vec::with_capacity(dims.len());
    let mut out_strides: Vec<Vec<isize>> = vec![Vec::with_capacity(dims.len()); inputs.len()];
    for (d, &size) in dims.iter().enumerate().filter(|&(_, &size)| size != 1) {
        let merges = !out_dims.is_empty()
            && strides
                .iter()
                .zip(&out_strides)
                .all(|(s, o)| o.last() == Some(&(s[d] * size as isize)));
        if merges {
            let last = out_dims.len() - 1;
            out_dims[last] *= size;
            for (s, o) in strides.iter().zip(&mut out_strides) {
                o[last] = s[d];
            }
        } else {
            out_dims.push(size);
            for (s, o) in strides.iter().zip(&mut out_strides) {
                o.push(s[d]);
            }
        }
    }
    if out_dims.is_empty() {
        // Every dim was 1: one element, seen as rank 1.
        out_dims.push(1);
        out_strides.iter_mut().for_each(|o| o.push(0));
    }
    (out_dims, out_strides)
}

/// The elements per 16-byte vector of `dtype` when a strided launch over the coalesced
/// `dims` can move whole vectors: the innermost dim is a multiple of it, every input steps by
/// 1 along that dim (read as vectors, each starting on a vector boundary: offset and outer
/// strides multiples of it, address aligned to the vector's bytes) or by 0 (one value,
/// repeated), and the output is aligned likewise. `None` otherwise.
fn vector_lanes(
    dtype: DType,
    dims: &[usize],
    inputs: &[In<'_>],
    strides: &[Vec<isize>],
    out: DevicePtr,
    out_dtype: DType,
) -> Option<usize> {
    let w = 16 / dtype.size_in_bytes().max(1);
    let inner = dims.len().checked_sub(1)?;
    if w < 2 || !dims[inner].is_multiple_of(w) || inputs.len() >= 31 {
        return None;
    }
    let aligned = |ptr: u64, elem_bytes: usize| ptr.is_multiple_of((elem_bytes * w) as u64);
    if !aligned(out.0, out_dtype.size_in_bytes()) {
        return None;
    }
    let fits = inputs.iter().zip(strides).all(|(i, s)| match s[inner] {
        0 => true,
        1 => {
            let offset = i.layout.offset();
            offset.is_multiple_of(w)
                && s[..inner].iter().all(|&o| o % w as isize == 0)
                && aligned(i.ptr.0 + (offset * i.elem_bytes) as u64, i.elem_bytes)
        }
        _ => false,
    });
    fits.then_some(w)
}

/// A dense copy of a view, through the strided `copy` kernel (a device copy when the view is
/// already one contiguous range). Element types without a kernel go through the host.
pub(crate) fn dense<E: Element>(c: &CudaStorage<E>, l: &Layout) -> Result<CudaStorage<E>> {
    match l.contiguous_range() {
        Some(r) => c.copy_range_to(r, c.ordinal()),
        None if kernels::copy::KERNEL
            .entry_to(E::DTYPE, E::DTYPE, Variant::Strided)
            .is_some() =>
        {
            map(
                c.ordinal(),
                &kernels::copy::KERNEL,
                E::DTYPE,
                l.dims(),
                &[input(c, l)],
                &[],
            )
        }
        None => {
            let host = crate::Storage::Cuda(c.clone()).try_to_vec(l)?;
            CudaStorage::from_slice(c.ordinal(), &host)
        }
    }
}

/// The contiguous elements of a view: the storage itself when the view is dense, else a
/// dense copy; with the element offset to start at.
pub(crate) fn dense_view<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
) -> Result<(CudaStorage<E>, usize)> {
    match l.contiguous_range() {
        Some(r) => Ok((c.clone(), r.start)),
        None => Ok((dense(c, l)?, 0)),
    }
}

/// Rows at least this long, when there are few of them, are reduced in two stages.
const TWO_STAGE_MIN: usize = 1 << 15;

/// Rows at most this long (`inner` 1), when there are at least [`WARP_ROWS_MIN_ROWS`] of
/// them, are reduced a warp per row.
const WARP_ROWS_MAX_LEN: usize = 1024;

/// Enough rows to keep every SM busy with a warp per row.
const WARP_ROWS_MIN_ROWS: usize = 1024;

/// Reduces `axis` of a view with the reduce kernel `src` (plus a copy for a non-contiguous
/// view); the result has the axis removed. The view is seen as `[outer, axis, inner]`: with
/// an `inner` of 32 or more, the threads of a warp read neighbouring elements of it
/// (coalesced), and when that gives few blocks for a long axis the axis is split into chunks
/// over more blocks and the chunks' results combined by a second launch ([`SplitColumns`]);
/// a few long rows (`inner` 1) are reduced in two stages, so that many blocks share each row;
/// many short rows take a warp each; otherwise one block reduces each output. Each path
/// combines in a fixed order for given sizes, so results are the same run to run.
pub(crate) fn reduce<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    axis: usize,
    src: &'static KernelSource,
) -> Result<CudaStorage<E>> {
    let dims = l.dims();
    let outer: usize = dims[..axis].iter().product();
    let len = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let rows = outer * inner;
    // Checked before any copy or allocation, so the error is the only effect.
    let entry = kernel_entry(c.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Reduce)?;
    let out = CudaStorage::<E>::uninit(c.ordinal(), rows)?;
    if rows == 0 {
        return Ok(out);
    }
    let (x, start) = dense_view(c, l)?;
    let dtype = E::DTYPE;
    if inner == 1
        && len >= TWO_STAGE_MIN
        && rows < 256
        && let (Some(p), Some(f)) = (
            src.entry(dtype, Variant::ReducePartial),
            src.entry(dtype, Variant::ReduceFinal),
        )
    {
        let stages = TwoStage {
            src,
            partial: p,
            last: f,
            x: x.ptr_at(start),
            rows,
            len,
        };
        if dtype == DType::F64 {
            stages.run::<f64, E>(&out)?;
        } else {
            stages.run::<f32, E>(&out)?;
        }
        return Ok(out);
    }
    if inner >= 32
        && inner.div_ceil(32) <= i32::MAX as usize
        && let Some(cols) = src.entry(dtype, Variant::ReduceColumns)
    {
        if let Some(split) = SplitColumns::plan(src, dtype, outer, len, inner) {
            let x = x.ptr_at(start);
            if dtype == DType::F64 {
                split.run::<f64, E>(x, &out)?;
            } else {
                split.run::<f32, E>(x, &out)?;
            }
            return Ok(out);
        }
        let config = LaunchConfig {
            grid: (inner.div_ceil(32) as u32, outer.min(65535) as u32, 1),
            block: (32, len.clamp(1, 32) as u32, 1),
            shared_mem: 0,
        };
        let args = [
            Arg::Ptr(x.ptr_at(start)),
            Arg::Ptr(out.device_ptr()),
            Arg::U64(outer as u64),
            Arg::U64(len as u64),
            Arg::U64(inner as u64),
        ];
        // SAFETY: as below; the columns entry reads and writes the same elements.
        unsafe { launch_entry(c.ordinal(), src, cols, config, &args)? };
        return Ok(out);
    }
    if inner == 1
        && len <= WARP_ROWS_MAX_LEN
        && rows >= WARP_ROWS_MIN_ROWS
        && let Some(by_rows) = src.entry(dtype, Variant::ReduceRows)
    {
        // Eight rows a block; the kernel steps over the rest of the rows in a grid-stride
        // loop, so the grid only has to be within its limit.
        let config = LaunchConfig {
            grid: (rows.div_ceil(8).min(1 << 20) as u32, 1, 1),
            block: (256, 1, 1),
            shared_mem: 0,
        };
        let args = [
            Arg::Ptr(x.ptr_at(start)),
            Arg::Ptr(out.device_ptr()),
            Arg::U64(outer as u64),
            Arg::U64(len as u64),
            Arg::U64(inner as u64),
        ];
        // SAFETY: as below; the warp-per-row entry reads and writes the same elements.
        unsafe { launch_entry(c.ordinal(), src, by_rows, config, &args)? };
        return Ok(out);
    }
    // A block walks one output's axis; a short axis needs fewer threads.
    let block = (len.div_ceil(32) * 32).clamp(32, 256) as u32;
    let config = LaunchConfig {
        grid: (rows.min(1 << 20) as u32, 1, 1),
        block: (block, 1, 1),
        shared_mem: 0,
    };
    let args = [
        Arg::Ptr(x.ptr_at(start)),
        Arg::Ptr(out.device_ptr()),
        Arg::U64(outer as u64),
        Arg::U64(len as u64),
        Arg::U64(inner as u64),
    ];
    // SAFETY: `x` holds outer * len * inner dense elements from `start`, `out` holds
    // outer * inner.
    unsafe { launch_entry(c.ordinal(), src, entry, config, &args)? };
    Ok(out)
}

/// A reduction of `rows` dense rows of `len` elements in two launches: partial results of
/// fixed chunks of each row, in the compute type `A`, then one block per row combining them.
struct TwoStage {
    src: &'static KernelSource,
    partial: &'static rtx_kernels::kernel::KernelEntry,
    last: &'static rtx_kernels::kernel::KernelEntry,
    x: DevicePtr,
    rows: usize,
    len: usize,
}

impl TwoStage {
    /// Threads per block of both stages.
    const BLOCK: u32 = 256;
    /// About this many blocks share the first stage (a wave on a large GPU).
    const BLOCKS: usize = 1024;

    /// Runs both stages into `out` (`rows` elements of `E`).
    fn run<A: Element, E: Element>(&self, out: &CudaStorage<E>) -> Result<()> {
        let ordinal = out.ordinal();
        // The chunk depends on the sizes alone, so the combining order does too; a multiple
        // of 1024 elements keeps every chunk 16-byte aligned when the row is.
        let wanted = (Self::BLOCKS / self.rows).max(1);
        let chunk = self.len.div_ceil(wanted).next_multiple_of(1024);
        let parts = self.len.div_ceil(chunk);
        let partial = CudaStorage::<A>::uninit(ordinal, self.rows * parts)?;
        let first = LaunchConfig {
            grid: (parts as u32, self.rows as u32, 1),
            block: (Self::BLOCK, 1, 1),
            shared_mem: 0,
        };
        let args = [
            Arg::Ptr(self.x),
            Arg::Ptr(partial.device_ptr()),
            Arg::U64(self.len as u64),
            Arg::U64(chunk as u64),
        ];
        // SAFETY: `x` holds rows * len dense elements; `partial` holds rows * parts values of
        // the compute type, one per block of the grid.
        unsafe { launch_entry(ordinal, self.src, self.partial, first, &args)? };
        let second = LaunchConfig {
            grid: (self.rows as u32, 1, 1),
            block: (Self::BLOCK, 1, 1),
            shared_mem: 0,
        };
        let args = [
            Arg::Ptr(partial.device_ptr()),
            Arg::Ptr(out.device_ptr()),
            Arg::U64(parts as u64),
            Arg::U64(self.len as u64),
        ];
        // SAFETY: `partial` holds rows * parts values, `out` one element per row; the stream
        // orders this launch after the first, and `partial` goes back to the allocator only
        // for work queued after both.
        unsafe { launch_entry(ordinal, self.src, self.last, second, &args)? };
        Ok(())
    }
}

/// A column reduction split along the axis: with few blocks of 32 columns (fewer than about
/// two per SM of a large GPU) and a long axis, each block would walk thousands of elements
/// while most SMs idle. Instead `gridDim.z` blocks share each column block, each combining a
/// fixed chunk of the axis into partial results in the compute type `A`, and a second launch
/// combines each output's chunks in order. The chunk count depends on the sizes alone.
struct SplitColumns {
    src: &'static KernelSource,
    partial: &'static rtx_kernels::kernel::KernelEntry,
    last: &'static rtx_kernels::kernel::KernelEntry,
    outer: usize,
    len: usize,
    inner: usize,
    /// Elements of the axis per chunk, a multiple of 32 (the block's rows of threads).
    chunk: usize,
    /// Chunks: `len.div_ceil(chunk)`.
    parts: usize,
}

impl SplitColumns {
    /// Fewer column blocks than this (two 1024-thread blocks on each of 132 SMs) leave the
    /// GPU partly idle.
    const FEW_BLOCKS: usize = 264;
    /// Blocks the split aims at: two waves of [`Self::FEW_BLOCKS`], so that a block finishing
    /// late costs little.
    const TARGET_BLOCKS: usize = 2 * Self::FEW_BLOCKS;
    /// The shortest chunk: eight elements for each of a block's 32 rows of threads, all
    /// loads in flight together.
    const MIN_CHUNK: usize = 256;

    /// The split for these sizes, or `None` when one launch does as well (enough blocks, a
    /// short axis, or no float partial entries for the dtype).
    fn plan(
        src: &'static KernelSource,
        dtype: DType,
        outer: usize,
        len: usize,
        inner: usize,
    ) -> Option<SplitColumns> {
        let blocks = inner.div_ceil(32) * outer;
        if blocks >= Self::FEW_BLOCKS || len < 2 * Self::MIN_CHUNK {
            return None;
        }
        let partial = src.entry(dtype, Variant::ReduceColumnsPartial)?;
        let last = src.entry(dtype, Variant::ReduceColumnsFinal)?;
        let wanted = Self::TARGET_BLOCKS
            .div_ceil(blocks)
            .min(len / Self::MIN_CHUNK)
            .max(1);
        let chunk = len.div_ceil(wanted).next_multiple_of(32);
        Some(SplitColumns {
            src,
            partial,
            last,
            outer,
            len,
            inner,
            chunk,
            parts: len.div_ceil(chunk),
        })
    }

    /// Runs both stages over the dense `[outer, len, inner]` elements at `x` into `out`
    /// (`outer * inner` elements of `E`).
    fn run<A: Element, E: Element>(&self, x: DevicePtr, out: &CudaStorage<E>) -> Result<()> {
        let ordinal = out.ordinal();
        let partial = CudaStorage::<A>::uninit(ordinal, self.outer * self.parts * self.inner)?;
        // `outer` is below FEW_BLOCKS and `parts` at most TARGET_BLOCKS here, well inside the
        // grid's y and z limits.
        let first = LaunchConfig {
            grid: (
                self.inner.div_ceil(32) as u32,
                self.outer as u32,
                self.parts as u32,
            ),
            block: (32, 32, 1),
            shared_mem: 0,
        };
        let args = [
            Arg::Ptr(x),
            Arg::Ptr(partial.device_ptr()),
            Arg::U64(self.outer as u64),
            Arg::U64(self.len as u64),
            Arg::U64(self.inner as u64),
            Arg::U64(self.chunk as u64),
        ];
        // SAFETY: `x` holds outer * len * inner dense elements; block (bx, o, z) reads rows
        // z * chunk .. min(len, (z + 1) * chunk) of its columns and writes their partial
        // results, inside the outer * parts * inner values of `partial`.
        unsafe { launch_entry(ordinal, self.src, self.partial, first, &args)? };
        let n = self.outer * self.inner;
        let second = LaunchConfig::for_elements(n, 256);
        let args = [
            Arg::Ptr(partial.device_ptr()),
            Arg::Ptr(out.device_ptr()),
            Arg::U64(self.outer as u64),
            Arg::U64(self.parts as u64),
            Arg::U64(self.inner as u64),
            Arg::U64(self.len as u64),
        ];
        // SAFETY: `partial` holds outer * parts * inner values, `out` outer * inner elements;
        // the stream orders this launch after the first, and `partial` goes back to the
        // allocator only for work queued after both.
        unsafe { launch_entry(ordinal, self.src, self.last, second, &args)? };
        Ok(())
    }
}

/// Values of a row each thread of the row kernels `softmax_rows`, `log_softmax_rows`,
/// `logsumexp_rows`, `norm_rows` and `norm_backward_rows` keeps in registers at a time.
const HELD_PER_THREAD: usize = 32;

/// The block of those row kernels for rows of `cols`: enough threads to hold the row (so
/// softmax and the norms read it from memory once), a multiple of 32, at most 256. A thread
/// takes at most 255 registers, so 256 threads always fit an SM's 64K registers, and several
/// rows are in flight on each SM; rows longer than 256 * 32 are read in chunks.
pub(crate) fn held_row_block(cols: usize) -> u32 {
    (cols.div_ceil(HELD_PER_THREAD).div_ceil(32) * 32).clamp(32, 256) as u32
}

/// Rows at most this long take a warp each in the forward kernels: 32 values a lane, held
/// in registers from the one read to the write.
pub(crate) const WARP_ROW_MAX: usize = 1024;

/// Rows (warps) per block of the warp-per-row launches: small blocks, so that an SM whose
/// registers allow a few more warps can take another block.
const WARPS_PER_BLOCK: usize = 4;

/// An error naming `op` when `rows` rows, a block or warp each, are more than a grid holds.
pub(crate) fn too_many_rows(op: &'static str, rows: usize) -> Result<()> {
    if rows > i32::MAX as usize {
        return Err(BackendError::BadArgument {
            op,
            msg: format!("{rows} rows are more than one launch's grid holds"),
        });
    }
    Ok(())
}

/// The launch of a warp-per-row kernel over `rows` rows.
pub(crate) fn warp_rows_config(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid: (rows.div_ceil(WARPS_PER_BLOCK).max(1) as u32, 1, 1),
        block: ((32 * WARPS_PER_BLOCK) as u32, 1, 1),
        shared_mem: 0,
    }
}

/// One statistic per row along `axis` (logsumexp, variance) with a row kernel: the axis is
/// moved last by a dense copy unless it already is the last axis of a dense view. `extra`
/// are the kernel's arguments after `cols`. The result has the axis removed. Logsumexp of
/// short rows takes a warp per row (`softmax_warp_rows`).
pub(crate) fn row_stat<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    axis: usize,
    src: &'static KernelSource,
    extra: &[Arg],
) -> Result<CudaStorage<E>> {
    let entry = kernel_entry(c.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let rank = l.rank();
    let cols = l.dims()[axis];
    let rows: usize = l
        .dims()
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != axis)
        .map(|(_, &n)| n)
        .product();
    let out = CudaStorage::<E>::uninit(c.ordinal(), rows)?;
    if rows == 0 {
        return Ok(out);
    }
    too_many_rows(src.name, rows)?;
    // The kept dims stay in order, so row r of the moved view is output element r.
    let mut perm: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
    perm.push(axis);
    let (x, start) = dense_view(c, &l.permute(&perm))?;
    let logsumexp = std::ptr::eq(src, &kernels::logsumexp_rows::KERNEL);
    if logsumexp && cols <= WARP_ROW_MAX {
        logsumexp_warp_rows(&x, start, &out, rows, cols)?;
        return Ok(out);
    }
    // The logsumexp kernel keeps 32 values a thread in registers, so it takes the smaller
    // blocks of `held_row_block`; the others stream their rows with up to 1024 threads.
    let block = if logsumexp {
        held_row_block(cols)
    } else {
        (cols.div_ceil(32) * 32).clamp(32, 1024) as u32
    };
    let config = LaunchConfig {
        grid: (rows as u32, 1, 1),
        block: (block, 1, 1),
        shared_mem: 0,
    };
    let mut args = vec![
        Arg::Ptr(x.ptr_at(start)),
        Arg::Ptr(out.device_ptr()),
        Arg::U64(cols as u64),
    ];
    args.extend_from_slice(extra);
    // SAFETY: `x` holds rows * cols dense elements from `start`, `out` holds `rows`; one
    // block per row, a block size that is a multiple of 32 and at most 1024 (256 for
    // logsumexp).
    unsafe { launch_entry(c.ordinal(), src, entry, config, &args)? };
    Ok(out)
}

/// Logsumexp of `rows` dense rows of `cols` (at most [`WARP_ROW_MAX`]) at `x`, a warp per
/// row, into `out` (one element per row).
fn logsumexp_warp_rows<E: Element>(
    x: &CudaStorage<E>,
    start: usize,
    out: &CudaStorage<E>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let src = &kernels::softmax_warp_rows::KERNEL;
    let entry = kernel_entry(x.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    too_many_rows(src.name, rows)?;
    let args = [
        Arg::Ptr(x.ptr_at(start)),
        Arg::Ptr(out.device_ptr()),
        Arg::U64(cols as u64),
        Arg::U64(rows as u64),
        Arg::U32(2),
    ];
    // SAFETY: `x` holds rows * cols dense elements from `start`, `out` holds `rows`; a warp
    // per row, warps past the last row return.
    unsafe { launch_entry(x.ordinal(), src, entry, warp_rows_config(rows), &args)? };
    Ok(())
}

/// Checks every index the layout `il` views against `0..size`, with the CPU backend's error.
/// Only the span the view touches comes back to the host (a broadcast index is its vector).
pub(crate) fn check_indices(
    op: &'static str,
    idx: &CudaStorage<i64>,
    il: &Layout,
    axis: usize,
    size: usize,
) -> Result<()> {
    if il.numel() == 0 {
        return Ok(());
    }
    let span = idx.range_to_host(il.offset()..il.required_len())?;
    // The span may hold elements the view skips; only the viewed ones decide.
    if span.iter().all(|&k| k >= 0 && (k as u64) < size as u64) {
        return Ok(());
    }
    crate::cpu::index::check_indices(op, &span, &il.with_offset(0), axis, size)
}

/// The slices `indices` of `axis` (PyTorch's `index_select`): the indices are read back and
/// checked on the host (an embedding's index list is small), then one launch gathers them.
pub(crate) fn index_select<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    indices: &CudaStorage<i64>,
    il: &Layout,
    axis: usize,
) -> Result<CudaStorage<E>> {
    let src = &kernels::index_select_axis::KERNEL;
    let entry = kernel_entry(c.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let size = l.dims()[axis];
    // Checked on the host (one read-back) except while a graph is captured, where nothing
    // can be read back: the kernel clamps an out-of-range index into 0..size, so it never
    // reads outside `x`.
    if !super::graph::is_capturing(c.ordinal())? {
        check_indices("index_select", indices, il, axis, size)?;
    }
    let outer: usize = l.dims()[..axis].iter().product();
    let inner: usize = l.dims()[axis + 1..].iter().product();
    let d = il.numel();
    let n = outer * d * inner;
    let out = CudaStorage::<E>::uninit(c.ordinal(), n)?;
    if n == 0 {
        return Ok(out);
    }
    let (idx, istart) = dense_view(indices, il)?;
    let (x, start) = dense_view(c, l)?;
    let config = LaunchConfig::for_elements(n.min(1 << 24), BLOCK);
    let args = [
        Arg::Ptr(x.ptr_at(start)),
        Arg::Ptr(idx.ptr_at(istart)),
        Arg::Ptr(out.device_ptr()),
        Arg::U64(outer as u64),
        Arg::U64(size as u64),
        Arg::U64(d as u64),
        Arg::U64(inner as u64),
    ];
    // SAFETY: `x` holds outer * size * inner dense elements from `start`, `idx` holds `d`
    // indices (clamped into 0..size by the kernel), `out` holds outer * d * inner.
    unsafe { launch_entry(c.ordinal(), src, entry, config, &args)? };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(layouts: &[Layout], at: u64, elem_bytes: usize) -> Vec<In<'_>> {
        layouts
            .iter()
            .map(|l| In {
                ptr: DevicePtr(at),
                elem_bytes,
                layout: l,
            })
            .collect()
    }

    #[test]
    fn vector_launches_need_unit_or_zero_inner_steps_on_vector_boundaries() {
        let lanes = |dims: &[usize], ls: &[Layout], at: u64| {
            let inputs = ins(ls, at, 2);
            let (dims, strides) = coalesce(dims, &inputs);
            vector_lanes(
                DType::BF16,
                &dims,
                &inputs,
                &strides,
                DevicePtr(256),
                DType::BF16,
            )
        };
        let x = Layout::contiguous(&[4, 3, 16]);
        let bias = Layout::contiguous(&[16]).broadcast_to(&[4, 3, 16]).unwrap();
        assert_eq!(lanes(&[4, 3, 16], &[x, bias], 256), Some(8));
        // A row sum broadcast along rows (stride 0 innermost) is repeated, not loaded.
        let sums = Layout::contiguous(&[12, 1])
            .broadcast_to(&[12, 16])
            .unwrap();
        assert_eq!(
            lanes(&[12, 16], &[Layout::contiguous(&[12, 16]), sums], 256),
            Some(8)
        );
        // Misaligned address, offset off the grid, odd inner size, transposed input: no.
        assert_eq!(lanes(&[4, 3, 16], &[x], 258), None);
        assert_eq!(lanes(&[4, 3, 8], &[x.narrow(2, 1, 8)], 256), None);
        assert_eq!(lanes(&[4, 3, 6], &[x.narrow(2, 0, 6)], 256), None);
        let t = Layout::contiguous(&[16, 16]).transpose(0, 1);
        assert_eq!(lanes(&[16, 16], &[t], 256), None);
    }

    fn coalesced(dims: &[usize], layouts: &[Layout]) -> (Vec<usize>, Vec<Vec<isize>>) {
        let ins: Vec<In<'_>> = layouts
            .iter()
            .map(|l| In {
                ptr: DevicePtr(0),
                elem_bytes: 2,
                layout: l,
            })
            .collect();
        coalesce(dims, &ins)
    }

    #[test]
    fn coalesce_merges_dims_every_input_steps_across_alike() {
        // An activation plus a broadcast bias: [B, T, F] becomes [B*T, F].
        let x = Layout::contiguous(&[4, 3, 8]);
        let bias = Layout::contiguous(&[8]).broadcast_to(&[4, 3, 8]).unwrap();
        assert_eq!(
            coalesced(&[4, 3, 8], &[x, bias]),
            (vec![12, 8], vec![vec![8, 1], vec![0, 1]])
        );
        // A causal mask broadcast over batch and heads: [B, H, T, T] becomes [B*H, T*T].
        let mask = Layout::contiguous(&[5, 5])
            .broadcast_to(&[2, 3, 5, 5])
            .unwrap();
        let s = Layout::contiguous(&[2, 3, 5, 5]);
        assert_eq!(
            coalesced(&[2, 3, 5, 5], &[s, mask]),
            (vec![6, 25], vec![vec![25, 1], vec![0, 1]])
        );
        // A head permute keeps its dims apart; size-1 dims go.
        let p = Layout::contiguous(&[2, 4, 1, 3, 5]).permute(&[0, 3, 2, 1, 4]);
        assert_eq!(
            coalesced(&[2, 3, 1, 4, 5], &[p]),
            (vec![2, 3, 4, 5], vec![vec![60, 5, 15, 1]])
        );
        // A transpose cannot merge; a scalar becomes one element of rank 1.
        let t = Layout::contiguous(&[3, 4]).transpose(0, 1);
        assert_eq!(coalesced(&[4, 3], &[t]), (vec![4, 3], vec![vec![1, 4]]));
        assert_eq!(
            coalesced(
                &[1, 1, 1],
                &[x.narrow(0, 0, 1).narrow(1, 0, 1).narrow(2, 0, 1)]
            ),
            (vec![1], vec![vec![0]])
        );
    }
}
