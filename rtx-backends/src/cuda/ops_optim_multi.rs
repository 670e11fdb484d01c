//! The GPU side of the multi-tensor optimizer updates and of gradient clipping: one launch
//! updates every tensor of one element type (`rtx_kernels::kernels::adam_multi`,
//! `sgd_multi`), and clipping is three launches (`sum_squares_multi`, `clip_coef`,
//! `scale_multi`) whatever the number of gradients.
//!
//! A launch reads its tensors through a table uploaded to the device: the buffers' addresses,
//! their lengths and the chunk map (which tensor and where each block-sized chunk starts),
//! packed as 64-bit words in one buffer. [`TableCache`] keeps the last table on the device and
//! uploads again only when it changes; with in-place updates the parameter and state addresses
//! are stable between steps, and the caching allocator usually hands the gradients the same
//! blocks, so a training step typically uploads nothing.
//!
//! Invariant: updates write the caller's parameter and state buffers in place (the caller owns
//! them alone); every element follows the per-tensor kernels' roundings, so results equal
//! `ops_optim`'s; the clipping norm is deterministic (fixed chunks, fixed reduction trees).

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::{DevicePtr, LaunchConfig};
use super::ops::dense_view;
use super::storage::CudaStorage;
use crate::{AdamScalars, SgdScalars};
use crate::{BackendError, Layout, Result};
use rtx_kernels::kernel::{KernelSource, Variant};
use rtx_kernels::{Element, kernels};

/// Threads per block of the multi-tensor kernels (a power of two, at most 256, as the
/// reductions need).
const BLOCK: u32 = 256;

/// Elements per chunk: 8 per thread, so that an MLP's 5.8 M parameters make enough blocks for
/// every SM of an H200 (at 32 a thread they made 710, two thirds of its slots). ncu measured
/// the same Adam time either way (58.7 us, 2.7 TB/s): what holds Adam back is the reload of
/// each row's address from the table after every store (see `rtx-macros/src/kernel/table.rs`).
pub(crate) const CHUNK: usize = 2048;

/// The most blocks of a launch; the kernels' grid-stride loop over chunks takes the rest.
const MAX_GRID: usize = 1 << 16;

/// The device copy of a multi-tensor launch's table, kept between launches: uploaded again
/// only when the table changes. Hold one per group of tensors launched together (an optimizer
/// holds one per element type and state).
///
/// ```
/// let cache = rtx_backends::storage::TableCache::default();
/// assert_eq!(cache.uploads(), 0);
/// ```
#[derive(Debug, Default)]
pub struct TableCache {
    host: Vec<i64>,
    dev: Option<CudaStorage<i64>>,
    uploads: u64,
}

impl TableCache {
    /// How many times a table was uploaded (a changed table; the rest reused the cached one).
    pub fn uploads(&self) -> u64 {
        self.uploads
    }

    /// The device address of `table` on GPU `ordinal`: the cached copy when it holds the same
    /// words, else a fresh upload. The old copy is freed to the caching allocator, whose
    /// stream-ordered reuse keeps it intact for launches already queued.
    fn device(&mut self, ordinal: usize, table: Vec<i64>) -> Result<DevicePtr> {
        match &self.dev {
            Some(d) if d.ordinal() == ordinal && self.host == table => Ok(d.device_ptr()),
            _ => {
                let d = CudaStorage::from_slice(ordinal, &table)?;
                let ptr = d.device_ptr();
                self.dev = Some(d);
                self.host = table;
                self.uploads += 1;
                Ok(ptr)
            }
        }
    }
}

/// A table under construction: sections of 64-bit words, each a kernel argument (also the
/// multi-tensor casts', `ops_cast_multi.rs`).
pub(crate) struct Table {
    words: Vec<i64>,
    sections: Vec<usize>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Table {
            words: Vec::new(),
            sections: Vec::new(),
        }
    }

    /// Appends a section; returns its index.
    pub(crate) fn push(&mut self, words: impl IntoIterator<Item = u64>) -> usize {
        self.sections.push(self.words.len());
        // The words are addresses and counts, stored as their bit patterns.
        self.words.extend(words.into_iter().map(|w| w as i64));
        self.sections.len() - 1
    }

    /// Uploads (or reuses) the table; returns each section's device address.
    pub(crate) fn upload(self, ordinal: usize, cache: &mut TableCache) -> Result<Vec<Arg>> {
        let base = cache.device(ordinal, self.words)?;
        Ok(self
            .sections
            .iter()
            .map(|&at| Arg::Ptr(DevicePtr(base.0 + 8 * at as u64)))
            .collect())
    }
}

/// The chunk map of tensors of `lens` elements: each chunk's tensor and first element.
fn chunk_map(lens: &[usize]) -> (Vec<u64>, Vec<u64>) {
    let (mut rows, mut starts) = (Vec::new(), Vec::new());
    for (t, &n) in lens.iter().enumerate() {
        for s in (0..n).step_by(CHUNK) {
            rows.push(t as u64);
            starts.push(s as u64);
        }
    }
    (rows, starts)
}

/// The launch shape for `n_chunks` chunks.
pub(crate) fn config(n_chunks: usize) -> LaunchConfig {
    LaunchConfig {
        grid: (n_chunks.clamp(1, MAX_GRID) as u32, 1, 1),
        block: (BLOCK, 1, 1),
        shared_mem: 0,
    }
}

/// Appends the lengths and the chunk map; returns the chunk count and the four arguments
/// (`rows`, `starts`, `lens`, `n_chunks`) with `chunk` after them, once uploaded.
pub(crate) fn chunk_sections(t: &mut Table, lens: &[usize]) -> (usize, [usize; 3]) {
    let (rows, starts) = chunk_map(lens);
    let n = rows.len();
    let r = t.push(rows);
    let s = t.push(starts);
    let l = t.push(lens.iter().map(|&n| n as u64));
    (n, [r, s, l])
}

/// The entry of `src` for `E`.
fn entry<E: Element>(
    ordinal: usize,
    src: &'static KernelSource,
) -> Result<&'static rtx_kernels::kernel::KernelEntry> {
    kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)
}

/// A gradient as a kernel reads it: the buffer, the element to start at, and the step between
/// elements (0 for a gradient broadcast from one value, as the backward of a sum gives; else
/// 1, through a dense copy when the view is not dense).
fn grad_view<E: Element>(g: &CudaStorage<E>, l: &Layout) -> Result<(CudaStorage<E>, usize, u64)> {
    let broadcast = l.numel() > 0
        && l.dims()
            .iter()
            .zip(l.strides())
            .all(|(&d, &s)| s == 0 || d == 1);
    if broadcast {
        return Ok((g.clone(), l.offset(), 0));
    }
    let (d, at) = dense_view(g, l)?;
    Ok((d, at, 1))
}

/// Appends the gradients' addresses and steps; returns the two sections.
fn grad_sections<E: Element>(
    t: &mut Table,
    grads: &[(CudaStorage<E>, usize, u64)],
) -> (usize, usize) {
    let g = t.push(grads.iter().map(|(g, at, _)| g.ptr_at(*at).0));
    let s = t.push(grads.iter().map(|&(_, _, step)| step));
    (g, s)
}

/// One tensor of a multi-tensor Adam step on the GPU: the parameter (dense), its gradient as
/// viewed, and the dense state, all of the parameter's length.
pub(crate) struct AdamBufs<'a, E> {
    pub p: &'a CudaStorage<E>,
    pub g: (&'a CudaStorage<E>, &'a Layout),
    pub m: &'a CudaStorage<E>,
    pub v: &'a CudaStorage<E>,
    pub vmax: Option<&'a CudaStorage<E>>,
}

/// One Adam/AdamW step over every tensor of `ts` in one launch, in place. `amsgrad` says
/// whether every tensor has a `vmax` (checked by the caller).
pub(crate) fn adam<E: Element>(
    ordinal: usize,
    ts: &[AdamBufs<'_, E>],
    amsgrad: bool,
    s: &AdamScalars,
    cache: &mut TableCache,
) -> Result<()> {
    let src = &kernels::adam_multi::KERNEL;
    let e = entry::<E>(ordinal, src)?;
    let grads = ts
        .iter()
        .map(|b| grad_view(b.g.0, b.g.1))
        .collect::<Result<Vec<_>>>()?;
    let lens: Vec<usize> = ts.iter().map(|b| b.p.len()).collect();
    let mut t = Table::new();
    let p = t.push(ts.iter().map(|b| b.p.device_ptr().0));
    let (g, gs) = grad_sections(&mut t, &grads);
    let m = t.push(ts.iter().map(|b| b.m.device_ptr().0));
    let v = t.push(ts.iter().map(|b| b.v.device_ptr().0));
    // Without AMSGrad the kernel never reads the `vmax` table; `v`'s stands in for it.
    let x = match amsgrad {
        true => t.push(ts.iter().map(|b| b.vmax.map_or(0, |x| x.device_ptr().0))),
        false => v,
    };
    let (n_chunks, [r, st, l]) = chunk_sections(&mut t, &lens);
    if n_chunks == 0 {
        return Ok(());
    }
    let a = t.upload(ordinal, cache)?;
    let w1 = 1.0 - s.beta1;
    let args = [
        a[p],
        a[g],
        a[gs],
        a[m],
        a[v],
        a[x],
        a[r],
        a[st],
        a[l],
        Arg::U64(n_chunks as u64),
        Arg::U64(CHUNK as u64),
        Arg::Acc(s.decay),
        Arg::Acc(s.l2),
        Arg::Acc(w1),
        Arg::Acc(s.beta2),
        Arg::Acc(1.0 - s.beta2),
        Arg::Acc(s.bias_correction2_sqrt),
        Arg::Acc(s.neg_step_size),
        Arg::Acc(s.eps),
        Arg::U32((s.decay != 1.0) as u32),
        Arg::U32((s.l2 != 0.0) as u32),
        Arg::U32((w1.abs() < 0.5) as u32),
        Arg::U32(amsgrad as u32),
    ];
    // SAFETY: every parameter and state row points at a buffer of `lens[t]` elements (the
    // state's lengths are checked by the caller), every gradient row at `lens[t]` dense
    // elements (step 1, the caller checked its size) or at one broadcast value (step 0), and
    // the chunk map stays inside `lens`.
    unsafe { launch_entry(ordinal, src, e, config(n_chunks), &args)? };
    drop(grads);
    Ok(())
}

/// One tensor of a multi-tensor SGD step on the GPU.
pub(crate) struct SgdBufs<'a, E> {
    pub p: &'a CudaStorage<E>,
    pub g: (&'a CudaStorage<E>, &'a Layout),
    pub buf: Option<&'a CudaStorage<E>>,
}

/// One SGD step over every tensor of `ts` in one launch, in place; every tensor has a
/// momentum buffer exactly when `s.momentum != 0` (checked by the caller).
pub(crate) fn sgd<E: Element>(
    ordinal: usize,
    ts: &[SgdBufs<'_, E>],
    has_buf: bool,
    s: &SgdScalars,
    cache: &mut TableCache,
) -> Result<()> {
    let src = &kernels::sgd_multi::KERNEL;
    let e = entry::<E>(ordinal, src)?;
    let grads = ts
        .iter()
        .map(|b| grad_view(b.g.0, b.g.1))
        .collect::<Result<Vec<_>>>()?;
    let lens: Vec<usize> = ts.iter().map(|b| b.p.len()).collect();
    let mut t = Table::new();
    let p = t.push(ts.iter().map(|b| b.p.device_ptr().0));
    let (g, gs) = grad_sections(&mut t, &grads);
    // Without momentum the kernel never reads the buffer table; the parameters' stands in.
    let bt = match has_buf {
        true => t.push(ts.iter().map(|b| b.buf.map_or(0, |x| x.device_ptr().0))),
        false => p,
    };
    let (n_chunks, [r, st, l]) = chunk_sections(&mut t, &lens);
    if n_chunks == 0 {
        return Ok(());
    }
    let a = t.upload(ordinal, cache)?;
    let args = [
        a[p],
        a[g],
        a[gs],
        a[bt],
        a[r],
        a[st],
        a[l],
        Arg::U64(n_chunks as u64),
        Arg::U64(CHUNK as u64),
        Arg::Acc(-s.lr),
        Arg::Acc(s.momentum),
        Arg::Acc(1.0 - s.dampening),
        Arg::Acc(s.weight_decay),
        Arg::U32((s.weight_decay != 0.0) as u32),
        Arg::U32(has_buf as u32),
        Arg::U32(s.first as u32),
        Arg::U32(s.nesterov as u32),
    ];
    // SAFETY: as in `adam`.
    unsafe { launch_entry(ordinal, src, e, config(n_chunks), &args)? };
    drop(grads);
    Ok(())
}

/// Gradient clipping's first launch for one element type: the sums of squares of every chunk
/// of `gs` into `partial` from element `at` on. Returns the number of chunks written.
pub(crate) fn sum_squares<E: Element>(
    ordinal: usize,
    gs: &[(&CudaStorage<E>, &Layout)],
    partial: &CudaStorage<f64>,
    at: usize,
    cache: &mut TableCache,
) -> Result<usize> {
    let src = &kernels::sum_squares_multi::KERNEL;
    let e = entry::<E>(ordinal, src)?;
    let grads = gs
        .iter()
        .map(|(g, l)| grad_view(g, l))
        .collect::<Result<Vec<_>>>()?;
    let lens: Vec<usize> = gs.iter().map(|(_, l)| l.numel()).collect();
    let mut t = Table::new();
    let (g, gs) = grad_sections(&mut t, &grads);
    let (n_chunks, [r, st, l]) = chunk_sections(&mut t, &lens);
    if n_chunks == 0 {
        return Ok(0);
    }
    if at + n_chunks > partial.len() {
        return Err(BackendError::BadArgument {
            op: "clip_grad_norm",
            msg: format!(
                "{n_chunks} chunks from {at} overflow {} partial sums",
                partial.len()
            ),
        });
    }
    let a = t.upload(ordinal, cache)?;
    let args = [
        a[g],
        a[gs],
        a[r],
        a[st],
        a[l],
        Arg::U64(n_chunks as u64),
        Arg::U64(CHUNK as u64),
        Arg::Ptr(partial.ptr_at(at)),
    ];
    // SAFETY: each gradient row holds `lens[t]` dense elements from its start (or one value,
    // read with step 0); `partial` has room for the chunks from `at` (checked).
    unsafe { launch_entry(ordinal, src, e, config(n_chunks), &args)? };
    drop(grads);
    Ok(n_chunks)
}

/// The number of chunks `lens` split into (the partial sums clipping needs).
pub(crate) fn chunk_count(lens: &[usize]) -> usize {
    lens.iter().map(|n| n.div_ceil(CHUNK)).sum()
}

/// Gradient clipping's second launch: `[norm, coef]` from the first `n` partial sums, on
/// the device.
pub(crate) fn clip_coef(
    partial: &CudaStorage<f64>,
    n: usize,
    max_norm: f64,
) -> Result<CudaStorage<f64>> {
    let ordinal = partial.ordinal();
    let src = &kernels::clip_coef::KERNEL;
    let e = entry::<f64>(ordinal, src)?;
    let out = CudaStorage::<f64>::uninit(ordinal, 2)?;
    let args = [
        Arg::Ptr(partial.device_ptr()),
        Arg::U64(n as u64),
        Arg::F64(max_norm),
        Arg::Ptr(out.device_ptr()),
    ];
    let one = LaunchConfig {
        grid: (1, 1, 1),
        block: (BLOCK, 1, 1),
        shared_mem: 0,
    };
    // SAFETY: `partial` holds at least `n` sums (the caller's count) and `out` two.
    unsafe { launch_entry(ordinal, src, e, one, &args)? };
    Ok(out)
}

/// Gradient clipping's last launch for one element type: fresh dense copies of `gs`, scaled
/// by the coefficient in `coef[1]` when it is below 1.
pub(crate) fn scale<E: Element>(
    ordinal: usize,
    gs: &[(&CudaStorage<E>, &Layout)],
    coef: &CudaStorage<f64>,
    cache: &mut TableCache,
) -> Result<Vec<CudaStorage<E>>> {
    let src = &kernels::scale_multi::KERNEL;
    let e = entry::<E>(ordinal, src)?;
    let grads = gs
        .iter()
        .map(|(g, l)| grad_view(g, l))
        .collect::<Result<Vec<_>>>()?;
    let lens: Vec<usize> = gs.iter().map(|(_, l)| l.numel()).collect();
    let outs = lens
        .iter()
        .map(|&n| CudaStorage::<E>::uninit(ordinal, n))
        .collect::<Result<Vec<_>>>()?;
    let mut t = Table::new();
    let (g, gs) = grad_sections(&mut t, &grads);
    let o = t.push(outs.iter().map(|o| o.device_ptr().0));
    let (n_chunks, [r, st, l]) = chunk_sections(&mut t, &lens);
    if n_chunks == 0 {
        return Ok(outs);
    }
    let a = t.upload(ordinal, cache)?;
    let args = [
        a[g],
        a[gs],
        a[o],
        a[r],
        a[st],
        a[l],
        Arg::U64(n_chunks as u64),
        Arg::U64(CHUNK as u64),
        Arg::Ptr(coef.device_ptr()),
    ];
    // SAFETY: each output row holds `lens[t]` elements, each gradient row as many (or one
    // value, read with step 0); `coef` holds two.
    unsafe { launch_entry(ordinal, src, e, config(n_chunks), &args)? };
    drop(grads);
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_element_once() {
        let lens = [1, 0, CHUNK, CHUNK + 1, 3 * CHUNK - 7];
        let (rows, starts) = chunk_map(&lens);
        assert_eq!(rows.len(), chunk_count(&lens));
        let mut seen: Vec<usize> = lens.iter().map(|_| 0).collect();
        for (&t, &s) in rows.iter().zip(&starts) {
            let (t, s) = (t as usize, s as usize);
            assert_eq!(s, seen[t], "chunks of tensor {t} in order, without gaps");
            seen[t] = (s + CHUNK).min(lens[t]);
        }
        assert_eq!(seen, lens);
    }
}
