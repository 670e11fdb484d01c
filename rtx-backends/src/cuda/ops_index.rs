//! The GPU side of the indexing, joining and argmax entry points: gather, scatter and
//! scatter_add, concat, the triangular masks of tril/triu, and argmax/argmin along an axis.
//! Each is one launch of a `#[kernel]` entry that reads its operands through their own
//! offsets and strides (concat: one launch per non-empty part; scatter: a dense copy of the
//! destination first, a device copy when it is contiguous), except a scatter_add whose lines
//! all read one index vector (`index_add`, an embedding's gradient): a counting sort of the
//! index on the device, then one sum per output element (a memset of scratch counters and
//! four launches: `scatter_sort_count`, `_scan`, `_place`, then `scatter_add_sorted`).
//!
//! Invariant: indices are checked on the host before anything is written or launched (their
//! span is copied back; the first bad index in logical order is reported exactly as the CPU
//! backend reports it), so the kernels never read or write out of bounds, and a bad index
//! leaves no partial result behind. While a CUDA graph is captured, scatter_add cannot check
//! and its kernels skip an index out of range instead. Every launch configuration depends on
//! the sizes alone, never on index values, so a captured step replays as recorded.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::{DevicePtr, LaunchConfig};
use super::ops::{check_indices, dense, dense_view};
use super::storage::CudaStorage;
use crate::cpu::index as cpu;
use crate::{BackendError, Layout, Result};
use rtx_kernels::kernel::{KernelShape, KernelSource, KernelStrides, Variant};
use rtx_kernels::kernels::ScatterSortPlan;
use rtx_kernels::{Element, kernels};

/// Threads per block of the data-movement launches.
const BLOCK: u32 = 256;

/// At most this many threads per launch; grid-stride loops cover the rest.
const MAX_THREADS: usize = 1 << 24;

/// About this many threads share a scatter-add (lines times row parts).
const SCATTER_THREADS: usize = 1 << 16;

/// At most this many blocks per launch of the sorting scatter-add's counting sort; blocks
/// stride over the rest.
const MAX_BLOCKS: usize = 1 << 20;

fn bad(op: &'static str, msg: impl std::fmt::Display) -> BackendError {
    BackendError::BadArgument {
        op,
        msg: msg.to_string(),
    }
}

fn shape_of(op: &'static str, dims: &[usize]) -> Result<KernelShape> {
    KernelShape::new(dims).map_err(|e| bad(op, e))
}

/// A layout's offset and strides as a kernel argument.
fn strides_of(op: &'static str, l: &Layout) -> Result<KernelStrides> {
    let s: Vec<isize> = l.strides().iter().map(|&s| s as isize).collect();
    KernelStrides::new(l.offset(), &s).map_err(|e| bad(op, e))
}

/// A grid-stride launch of `n` threads.
fn threads(n: usize) -> LaunchConfig {
    LaunchConfig::for_elements(n.min(MAX_THREADS), BLOCK)
}

/// `src[.., index[p], ..]` along `axis` for every position `p` of the index, into fresh
/// storage of the index's sizes.
pub(crate) fn gather<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    idx: &CudaStorage<i64>,
    il: &Layout,
    axis: usize,
) -> Result<CudaStorage<E>> {
    const OP: &str = "gather";
    let src = &kernels::gather_strided::KERNEL;
    let entry = kernel_entry(c.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    cpu::check_fits(OP, "index", il.dims(), l.dims(), Some(axis))?;
    check_indices(OP, idx, il, axis, l.dims()[axis])?;
    let n = il.numel();
    let out = CudaStorage::<E>::uninit(c.ordinal(), n)?;
    if n == 0 {
        return Ok(out);
    }
    let args = gather_args(
        (c.device_ptr(), l),
        (idx.device_ptr(), il),
        out.device_ptr(),
        axis,
    )?;
    // SAFETY: every index is in 0..size (checked above) and the index fits in the input off
    // `axis` (check_fits), so each read lies in the view of `l`, inside `c` (Layout's
    // invariant); `out` holds the `n` elements written.
    unsafe { launch_entry(c.ordinal(), src, entry, threads(n), &args)? };
    Ok(out)
}

/// The arguments of `gather_strided`: the input and the index at their layouts, the output.
fn gather_args(
    (x, l): (DevicePtr, &Layout),
    (idx, il): (DevicePtr, &Layout),
    out: DevicePtr,
    axis: usize,
) -> Result<Vec<Arg>> {
    const OP: &str = "gather";
    Ok(vec![
        Arg::Ptr(x),
        Arg::Strides(strides_of(OP, l)?),
        Arg::Ptr(idx),
        Arg::Strides(strides_of(OP, il)?),
        Arg::Ptr(out),
        Arg::Shape(shape_of(OP, il.dims())?),
        Arg::U64(axis as u64),
        Arg::U64(il.numel() as u64),
    ])
}

/// A dense copy of `dst` with `src[p]` written (or added, when `add`) at
/// `[.., index[p], ..]` along `axis`: one thread per line of the index, each walking its line
/// in order, so repeated indices keep the last write and sums add in logical order. A sum
/// whose lines share one index vector takes [`scatter_add_sorted`] instead.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter<E: Element>(
    op: &'static str,
    (dst, l): (&CudaStorage<E>, &Layout),
    (idx, il): (&CudaStorage<i64>, &Layout),
    (src, sl): (&CudaStorage<E>, &Layout),
    axis: usize,
    add: bool,
) -> Result<CudaStorage<E>> {
    let kernel = if add {
        &kernels::scatter_add_lines::KERNEL
    } else {
        &kernels::scatter_lines::KERNEL
    };
    let entry = kernel_entry(dst.ordinal(), kernel, E::DTYPE, E::DTYPE, Variant::Simt)?;
    cpu::check_fits(op, "index", il.dims(), l.dims(), Some(axis))?;
    cpu::check_fits(op, "index", il.dims(), sl.dims(), None)?;
    let size = l.dims()[axis];
    // While a graph is captured nothing can be read back; the adding kernel skips an
    // out-of-range index, so it never writes outside `out` (writing kernels need the check).
    if !(add && super::graph::is_capturing(dst.ordinal())?) {
        check_indices(op, idx, il, axis, size)?;
    }
    let out = dense(dst, l)?;
    if il.numel() == 0 {
        return Ok(out);
    }
    if add && let Some(plan) = shared_index_plan(il, axis, size) {
        scatter_add_sorted(&out, l.dims(), (idx, il), (src, sl), axis, plan)?;
        return Ok(out);
    }
    let lines = il.numel() / il.dims()[axis];
    let mut args = scatter_args(
        op,
        (out.device_ptr(), l.dims()),
        (idx.device_ptr(), il),
        (src.device_ptr(), sl),
        axis,
    )?;
    // A sum splits each line's output rows into `parts` by `row % parts`, one thread each,
    // so a few long lines (an embedding's gradient: [vocab, width] from many tokens) still
    // fill the GPU; each element is still summed by one thread in index order.
    let parts = if add {
        (SCATTER_THREADS / lines).clamp(1, size.max(1))
    } else {
        1
    };
    if add {
        args.push(Arg::U64(size as u64));
        args.push(Arg::U64(parts as u64));
    }
    // SAFETY: `out` is a fresh dense copy of `l`'s sizes; indices are in 0..size along `axis`
    // and the index fits inside `out` off `axis` and inside `src` everywhere (checked above),
    // so every access lies in its buffer. Lines differ off `axis`, so no two threads write the
    // same element.
    unsafe { launch_entry(dst.ordinal(), kernel, entry, threads(lines * parts), &args)? };
    Ok(out)
}

/// The sorting scatter-add's plan when every line of the index reads the same index vector
/// (along every axis but `axis` its stride is 0 or its size 1: `index_add`'s broadcast
/// vector), or `None` (the line-by-line kernel: a general index, or sizes past the sort's
/// 32-bit counters).
fn shared_index_plan(il: &Layout, axis: usize, size: usize) -> Option<ScatterSortPlan> {
    let shared = il
        .dims()
        .iter()
        .zip(il.strides())
        .enumerate()
        .all(|(d, (&n, &s))| d == axis || n == 1 || s == 0);
    if shared {
        ScatterSortPlan::new(il.dims()[axis], size)
    } else {
        None
    }
}

/// Adds `src` into the dense `out` (sizes `dims`) along `axis` at the index vector every line
/// shares, as the line-by-line kernel would, bit for bit: a stable counting sort of the
/// vector's positions by target row (count, scan, place), then one thread per output element
/// summing its row's sources in index order. A memset and four launches, whatever the index
/// values; the scratch counters and positions come from the caching allocator.
fn scatter_add_sorted<E: Element>(
    out: &CudaStorage<E>,
    dims: &[usize],
    (idx, il): (&CudaStorage<i64>, &Layout),
    (src, sl): (&CudaStorage<E>, &Layout),
    axis: usize,
    plan: ScatterSortPlan,
) -> Result<()> {
    let ord = out.ordinal();
    let entry = |k: &'static KernelSource| kernel_entry(ord, k, E::DTYPE, E::DTYPE, Variant::Simt);
    let (count, scan) = (
        &kernels::scatter_sort_count::KERNEL,
        &kernels::scatter_sort_scan::KERNEL,
    );
    let (place, sum) = (
        &kernels::scatter_sort_place::KERNEL,
        &kernels::scatter_add_sorted::KERNEL,
    );
    let entries = [entry(count)?, entry(scan)?, entry(place)?, entry(sum)?];
    // The kernels' counters and positions are u32s; i32 storage has their size and alignment,
    // and the kernels see only the pointers.
    let counts = CudaStorage::<i32>::filled(ord, plan.counters(), 0)?;
    let order = CudaStorage::<i32>::uninit(ord, plan.len)?;
    let args = sort_args(
        (idx.device_ptr(), il),
        axis,
        &plan,
        (counts.device_ptr(), order.device_ptr()),
    );
    let (sum_config, rows) = sorted_sum_launch(il.numel() / plan.len, plan.size);
    let sum_args = sorted_sum_args(
        (out.device_ptr(), dims),
        (src.device_ptr(), sl),
        il,
        axis,
        &plan,
        (counts.device_ptr(), order.device_ptr()),
        rows,
    )?;
    let blocks = |n: usize| LaunchConfig {
        grid: (n.min(MAX_BLOCKS) as u32, 1, 1),
        block: (ScatterSortPlan::BLOCK as u32, 1, 1),
        shared_mem: 0,
    };
    let configs = [
        blocks(plan.parts),
        blocks(plan.groups),
        blocks(plan.parts),
        sum_config,
    ];
    let all_args = [&args[0], &args[1], &args[2], &sum_args];
    for (((k, e), config), a) in [count, scan, place, sum]
        .into_iter()
        .zip(entries)
        .zip(configs)
        .zip(all_args)
    {
        // SAFETY: `counts` holds `plan.counters()` u32s (zeroed) and `order` `plan.len`; the
        // index vector's `len` entries lie in `idx`'s view `il`. The counting launch touches
        // only counters of in-range rows (`r * parts + c < size * parts`) and their segment
        // sums; the scan stays below `size * parts` and reads the sums after it; the placing
        // launch writes each in-range entry's position once, below the number of in-range
        // entries (<= len), as the scan's offsets count exactly those; the sum reads rows
        // `0..size` of the counters, positions below `len` (inside `src`'s view, which holds
        // the index's sizes: check_fits) and writes `out` at in-range rows of lines inside its
        // sizes (check_fits). Blocks have the 256 threads the shared arrays hold.
        unsafe { launch_entry(ord, k, e, config, a)? };
    }
    Ok(())
}

/// The arguments of the counting, scanning and placing launches, in that order.
fn sort_args(
    (idx, il): (DevicePtr, &Layout),
    axis: usize,
    plan: &ScatterSortPlan,
    (counts, order): (DevicePtr, DevicePtr),
) -> [Vec<Arg>; 3] {
    let u = |v: usize| Arg::U64(v as u64);
    let index = [
        Arg::Ptr(idx),
        u(il.offset()),
        u(il.strides()[axis]),
        u(plan.len),
        u(plan.size),
        u(plan.chunk),
        u(plan.parts),
    ];
    let mut count = index.to_vec();
    count.extend([Arg::U32(plan.shift), Arg::Ptr(counts)]);
    let scan = vec![
        Arg::Ptr(counts),
        u(plan.size * plan.parts),
        Arg::U32(plan.shift),
    ];
    let mut place = index.to_vec();
    place.extend([Arg::Ptr(counts), Arg::Ptr(order)]);
    [count, scan, place]
}

/// The summing launch's configuration and output rows per block: threads along the lines,
/// up to 256 of them (a warp at least), and about 4096 blocks in all, each taking `rows`
/// consecutive output rows (grid `x` times `rows` covers `size`).
fn sorted_sum_launch(lines: usize, size: usize) -> (LaunchConfig, usize) {
    let block = (lines.div_ceil(32) * 32).min(256);
    let gy = lines.div_ceil(block).min(65_535);
    let rows = (size * gy).div_ceil(4096).max(1);
    let config = LaunchConfig {
        grid: (size.div_ceil(rows).min(1 << 30) as u32, gy as u32, 1),
        block: (block as u32, 1, 1),
        shared_mem: 0,
    };
    (config, rows)
}

/// The arguments of `scatter_add_sorted`: the dense output of `dims`, the source at its
/// layout, the index's sizes, the sort's counters and positions, and rows per block.
fn sorted_sum_args(
    (out, dims): (DevicePtr, &[usize]),
    (src, sl): (DevicePtr, &Layout),
    il: &Layout,
    axis: usize,
    plan: &ScatterSortPlan,
    (counts, order): (DevicePtr, DevicePtr),
    rows: usize,
) -> Result<Vec<Arg>> {
    const OP: &str = "scatter_add";
    let lines = il.numel() / plan.len;
    Ok(vec![
        Arg::Ptr(out),
        Arg::Strides(strides_of(OP, &Layout::contiguous(dims))?),
        Arg::Ptr(src),
        Arg::Strides(strides_of(OP, sl)?),
        Arg::Shape(shape_of(OP, il.dims())?),
        Arg::U64(axis as u64),
        Arg::U64(lines as u64),
        Arg::U64(plan.size as u64),
        Arg::U64(plan.parts as u64),
        Arg::Ptr(counts),
        Arg::Ptr(order),
        Arg::U64(rows as u64),
    ])
}

/// The arguments of `scatter_lines` / `scatter_add_lines`: the dense output of `dims`, the
/// index and the source at their layouts; one thread per line of the (non-empty) index.
fn scatter_args(
    op: &'static str,
    (out, dims): (DevicePtr, &[usize]),
    (idx, il): (DevicePtr, &Layout),
    (src, sl): (DevicePtr, &Layout),
    axis: usize,
) -> Result<Vec<Arg>> {
    Ok(vec![
        Arg::Ptr(out),
        Arg::Strides(strides_of(op, &Layout::contiguous(dims))?),
        Arg::Ptr(idx),
        Arg::Strides(strides_of(op, il)?),
        Arg::Ptr(src),
        Arg::Strides(strides_of(op, sl)?),
        Arg::Shape(shape_of(op, il.dims())?),
        Arg::U64(axis as u64),
        Arg::U64((il.numel() / il.dims()[axis].max(1)) as u64),
    ])
}

/// The parts joined along `axis` into fresh dense storage: one launch per non-empty part,
/// each writing its own slot (`concat_rows_into`, 32-bit index arithmetic, below 2^31
/// elements; `concat_into` past that).
pub(crate) fn concat<E: Element>(
    parts: &[(&CudaStorage<E>, &Layout)],
    axis: usize,
) -> Result<CudaStorage<E>> {
    const OP: &str = "concat";
    let general = &kernels::concat_into::KERNEL;
    let fast = &kernels::concat_rows_into::KERNEL;
    let Some(&(first, fl)) = parts.first() else {
        return Err(bad(OP, "no parts to join"));
    };
    let entry = |k| kernel_entry(first.ordinal(), k, E::DTYPE, E::DTYPE, Variant::Simt);
    let (general_entry, fast_entry) = (entry(general)?, entry(fast)?);
    let total: usize = parts.iter().map(|(_, pl)| pl.dims()[axis]).sum();
    let mut dims = fl.dims().to_vec();
    dims[axis] = total;
    let out = CudaStorage::<E>::uninit(first.ordinal(), dims.iter().product())?;
    let mut start = 0;
    for &(part, pl) in parts {
        let n = pl.numel();
        if n > 0 {
            let args = concat_args(
                (part.device_ptr(), pl),
                out.device_ptr(),
                axis,
                start,
                total,
            )?;
            // 32-bit index arithmetic needs fewer than 2^31 elements (the kernel's counters
            // stay below 2^32 with the grid's stride added).
            let (src, entry, config) = match concat_rows_threads(pl.dims(), n) {
                Some(t) => (fast, fast_entry, threads(t)),
                None => (general, general_entry, threads(n)),
            };
            // SAFETY: the part is read through its own layout (inside its storage); its
            // sizes equal the output's off `axis` (the caller's contract) and its slot
            // start..start + size along `axis` lies inside `total`, so writes stay in `out`.
            // Blocks are 256 threads, a multiple of 32 as `concat_rows_into` needs.
            unsafe { launch_entry(first.ordinal(), src, entry, config, &args)? };
        }
        start += pl.dims()[axis];
    }
    Ok(out)
}

/// The threads `concat_rows_into` wants for a part of sizes `dims` and `n` elements (a warp
/// per segment of up to 256 elements of the innermost axis when it has 32 or more, else one
/// per element), or `None` when the part is too large for its 32-bit arithmetic.
fn concat_rows_threads(dims: &[usize], n: usize) -> Option<usize> {
    if n >= 1 << 31 {
        return None;
    }
    let inner = *dims.last()?;
    if inner < 32 {
        return Some(n);
    }
    let seg = 32 * inner.div_ceil(32).min(8);
    Some(n / inner * inner.div_ceil(seg) * 32)
}

/// The arguments of `concat_into`: one part at its layout, the output, and the part's slot.
fn concat_args(
    (part, pl): (DevicePtr, &Layout),
    out: DevicePtr,
    axis: usize,
    start: usize,
    total: usize,
) -> Result<Vec<Arg>> {
    const OP: &str = "concat";
    Ok(vec![
        Arg::Ptr(part),
        Arg::Strides(strides_of(OP, pl)?),
        Arg::Ptr(out),
        Arg::Shape(shape_of(OP, pl.dims())?),
        Arg::U64(axis as u64),
        Arg::U64(start as u64),
        Arg::U64(total as u64),
        Arg::U64(pl.numel() as u64),
    ])
}

/// The elements on and below diagonal `k` of the last two axes (on and above, when
/// `upper`), zero elsewhere, into fresh dense storage; the caller checks rank >= 2.
pub(crate) fn triangle<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    k: i64,
    upper: bool,
) -> Result<CudaStorage<E>> {
    let src = &kernels::triangle::KERNEL;
    let entry = kernel_entry(c.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let n = l.numel();
    let out = CudaStorage::<E>::uninit(c.ordinal(), n)?;
    if n == 0 {
        return Ok(out);
    }
    let args = triangle_args((c.device_ptr(), l), out.device_ptr(), k, upper)?;
    // SAFETY: reads follow `l` (inside `c`), writes cover `out`'s `n` elements; rank >= 2.
    unsafe { launch_entry(c.ordinal(), src, entry, threads(n), &args)? };
    Ok(out)
}

/// The arguments of `triangle`.
fn triangle_args(
    (x, l): (DevicePtr, &Layout),
    out: DevicePtr,
    k: i64,
    upper: bool,
) -> Result<Vec<Arg>> {
    let op = if upper { "triu" } else { "tril" };
    Ok(vec![
        Arg::Ptr(x),
        Arg::Strides(strides_of(op, l)?),
        Arg::Ptr(out),
        Arg::Shape(shape_of(op, l.dims())?),
        Arg::I64(k),
        Arg::U32(upper as u32),
        Arg::U64(l.numel() as u64),
    ])
}

/// The index of the first maximum (`max`) or minimum along `axis`, NaN counting as both:
/// one launch (plus a copy for a view that is not one dense range); the axis is removed.
/// The caller rejects an empty axis.
pub(crate) fn arg_reduce<E: Element>(
    c: &CudaStorage<E>,
    l: &Layout,
    axis: usize,
    max: bool,
) -> Result<CudaStorage<i64>> {
    let src = &kernels::arg_reduce_axis::KERNEL;
    let entry = kernel_entry(c.ordinal(), src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let dims = l.dims();
    let outer: usize = dims[..axis].iter().product();
    let len = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let rows = outer * inner;
    let out = CudaStorage::<i64>::uninit(c.ordinal(), rows)?;
    if rows == 0 {
        return Ok(out);
    }
    let (x, start) = dense_view(c, l)?;
    // One block per output; a short axis needs fewer threads, and a few long rows (a
    // decoding step's logits) take whole 1024-thread blocks, as they alone fill the GPU.
    let most = if rows >= 512 { 256 } else { 1024 };
    let block = (len.div_ceil(32) * 32).clamp(32, most) as u32;
    let config = LaunchConfig {
        grid: (rows.min(1 << 20) as u32, 1, 1),
        block: (block, 1, 1),
        shared_mem: 0,
    };
    let args = arg_reduce_args(x.ptr_at(start), out.device_ptr(), (outer, len, inner), max);
    // SAFETY: `x` holds outer * len * inner dense elements from `start` and `out` holds
    // outer * inner; the block size is a multiple of 32, at most 1024.
    unsafe { launch_entry(c.ordinal(), src, entry, config, &args)? };
    Ok(out)
}

/// The arguments of `arg_reduce_axis` over a dense `[outer, len, inner]` view.
fn arg_reduce_args(
    x: DevicePtr,
    out: DevicePtr,
    (outer, len, inner): (usize, usize, usize),
    max: bool,
) -> Vec<Arg> {
    vec![
        Arg::Ptr(x),
        Arg::Ptr(out),
        Arg::U64(outer as u64),
        Arg::U64(len as u64),
        Arg::U64(inner as u64),
        Arg::U32(max as u32),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::kernels::marshal;
    use super::*;
    use rtx_kernels::DType;
    use rtx_kernels::kernel::KernelSource;

    /// Every entry of `src` accepts `args` (checked as a launch would check them), for every
    /// element type the kernel has.
    fn accepts(src: &'static KernelSource, args: &[Arg]) {
        assert!(!src.entries.is_empty());
        for e in src.entries {
            if let Err(err) = marshal(e, e.dtype, args) {
                panic!("{}: {err}", e.symbol);
            }
        }
    }

    #[test]
    fn launch_arguments_fit_the_kernel_descriptors() {
        let p = DevicePtr(256);
        let l = Layout::contiguous(&[3, 4, 5]).transpose(0, 2);
        let il = Layout::contiguous(&[2, 4, 3]);
        accepts(
            &kernels::gather_strided::KERNEL,
            &ok(gather_args((p, &l), (p, &il), p, 1)),
        );
        let scatter = ok(scatter_args(
            "scatter",
            (p, &[5, 4, 3]),
            (p, &il),
            (p, &l),
            1,
        ));
        accepts(&kernels::scatter_lines::KERNEL, &scatter);
        let mut scatter_add = scatter.clone();
        scatter_add.extend([Arg::U64(4), Arg::U64(2)]);
        accepts(&kernels::scatter_add_lines::KERNEL, &scatter_add);
        accepts(
            &kernels::concat_into::KERNEL,
            &ok(concat_args((p, &l), p, 1, 2, 9)),
        );
        accepts(
            &kernels::concat_rows_into::KERNEL,
            &ok(concat_args((p, &l), p, 1, 2, 9)),
        );
        let shared = Layout::new(&[2, 4, 3], &[0, 1, 0], 5);
        let plan = ScatterSortPlan::new(4, 6).unwrap_or_else(|| panic!("a plan"));
        let [count, scan, place] = sort_args((p, &shared), 1, &plan, (p, p));
        accepts(&kernels::scatter_sort_count::KERNEL, &count);
        accepts(&kernels::scatter_sort_scan::KERNEL, &scan);
        accepts(&kernels::scatter_sort_place::KERNEL, &place);
        accepts(
            &kernels::scatter_add_sorted::KERNEL,
            &ok(sorted_sum_args(
                (p, &[5, 6, 3]),
                (p, &l),
                &shared,
                1,
                &plan,
                (p, p),
                2,
            )),
        );
        accepts(
            &kernels::triangle::KERNEL,
            &ok(triangle_args((p, &l), p, -1, true)),
        );
        accepts(
            &kernels::arg_reduce_axis::KERNEL,
            &arg_reduce_args(p, p, (2, 3, 4), false),
        );
        // Integer and bool element types have entries (`Element` kernels), argmax has no bool.
        assert!(
            kernels::gather_strided::KERNEL
                .entry(DType::Bool, Variant::Simt)
                .is_some()
        );
        assert!(
            kernels::arg_reduce_axis::KERNEL
                .entry(DType::U8, Variant::Simt)
                .is_some()
        );
        assert!(
            kernels::arg_reduce_axis::KERNEL
                .entry(DType::Bool, Variant::Simt)
                .is_none()
        );
    }

    #[test]
    fn only_a_shared_index_vector_takes_the_sort() {
        // index_add's vector broadcast over [3, len, 2], and a size-1 axis with any stride.
        let shared = Layout::new(&[3, 40, 2], &[0, 2, 0], 1);
        let plan = shared_index_plan(&shared, 1, 9).unwrap_or_else(|| panic!("a plan"));
        assert_eq!((plan.len, plan.size), (40, 9));
        assert!(shared_index_plan(&Layout::new(&[1, 40], &[7, 1], 0), 1, 9).is_some());
        // A general index (one vector per line) keeps the line-by-line kernel.
        assert!(shared_index_plan(&Layout::contiguous(&[3, 40]), 1, 9).is_none());
        // The summing launch covers every row and takes lines across threads and grid `y`.
        for (lines, size) in [(512, 8192), (512, 256), (1, 7), (100_000, 3)] {
            let (c, rows) = sorted_sum_launch(lines, size);
            assert!(c.grid.0 as usize * rows >= size, "{lines} {size}");
            assert!(c.block.0 % 32 == 0 && c.block.0 <= 256);
            assert!(c.grid.1 as usize * c.block.0 as usize >= lines.min(65_535 * 256));
        }
    }

    #[test]
    fn concat_takes_the_32_bit_kernel_below_2_pow_31_elements() {
        assert_eq!(
            concat_rows_threads(&[32, 256, 512], 1 << 22),
            Some((1 << 22) / 8)
        );
        assert_eq!(concat_rows_threads(&[8, 64], 512), Some(8 * 32));
        assert_eq!(concat_rows_threads(&[8, 5], 40), Some(40));
        assert_eq!(concat_rows_threads(&[1 << 20, 1 << 11], 1 << 31), None);
    }

    fn ok<T>(r: Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }
}
