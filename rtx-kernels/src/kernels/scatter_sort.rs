//! Scatter-add with one index vector shared by every line (`index_add`, an embedding's
//! gradient: `out[.., idx[k], ..] += src[.., k, ..]`), fast and deterministic: a stable
//! counting sort of the positions `k` by their target row, then one pass in which each output
//! element adds its own contributions, in increasing `k`, with no atomics on the values.
//!
//! The four launches, for an index vector of `len` entries into an axis of `size` rows,
//! split into `parts` chunks of `chunk` consecutive entries ([`ScatterSortPlan`]):
//! 1. [`scatter_sort_count`](scatter_sort_count()): `counts[r * parts + c]` = how many
//!    entries of chunk `c` target row `r` (integer atomics, so the counts never depend on
//!    timing), and per group of `1 << shift` counters their sum, after the `size * parts`
//!    counters;
//! 2. [`scatter_sort_scan`](scatter_sort_scan()): the counters' exclusive prefix sum, in
//!    place, so `counts[r * parts + c]` is where chunk `c`'s entries for row `r` start in the
//!    sorted order (row-major in `(r, c)`: rows in order, and within a row the chunks in
//!    order);
//! 3. [`scatter_sort_place`](scatter_sort_place()): each chunk writes its `k`s there in
//!    increasing order (a block ranks its tile's equal rows by position), leaving
//!    `counts[r * parts + c]` at the end of its run, so `counts[r * parts + parts - 1]` ends
//!    row `r`'s bucket;
//! 4. [`scatter_add_sorted`](scatter_add_sorted()): for each row and each line, the bucket's
//!    source elements added one by one into the output, in increasing `k`, rounding to `T`
//!    after every addition.
//!
//! Invariant: every output element is the CPU backend's sequential sum (its old value, then
//! each contribution in index order, rounded to `T` at each step), computed by one thread,
//! so results are bitwise the same on every run and equal the CPU's. An index outside
//! `0..size` (possible only inside a captured CUDA graph, whose launcher cannot check on the
//! host) is counted, placed and added nowhere, so nothing is read or written out of bounds.
//!
//! The counting, scanning and placing kernels do not touch `T`: they are generic only because
//! every kernel has an element type; any entry serves.

use crate::Num;
use rtx_macros::kernel;

/// How the counting, scanning and placing kernels split an index vector of `len` entries
/// into an axis of `size` rows: `parts` chunks of `chunk` entries (the last may be shorter),
/// one block of [`ScatterSortPlan::BLOCK`] threads each, and `groups` scan segments of
/// `1 << shift` counters.
///
/// ```
/// use rtx_kernels::kernels::ScatterSortPlan;
/// // An embedding gradient: 8192 tokens into 8192 rows.
/// let plan = ScatterSortPlan::new(8192, 8192).unwrap();
/// assert_eq!((plan.parts, plan.chunk), (32, 256));
/// assert_eq!(plan.counters(), 8192 * 32 + plan.groups);
/// assert!(plan.groups <= 1024 && plan.groups << plan.shift >= 8192 * 32);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScatterSortPlan {
    /// Entries of the index vector.
    pub len: usize,
    /// Rows of the axis scattered into.
    pub size: usize,
    /// Chunks of the index vector (blocks of the counting and placing launches).
    pub parts: usize,
    /// Entries per chunk, a multiple of [`ScatterSortPlan::BLOCK`].
    pub chunk: usize,
    /// Scan segments (blocks of the scan launch).
    pub groups: usize,
    /// Counters per scan segment, as a power of two.
    pub shift: u32,
}

impl ScatterSortPlan {
    /// Threads per block of the counting, scanning and placing launches (the size of their
    /// shared arrays, so no more may be launched).
    pub const BLOCK: usize = 256;

    /// At most about this many counters (`size * parts`) unless one per row needs more.
    const COUNTERS: usize = 1 << 22;

    /// At most this many scan segments.
    const GROUPS: usize = 1024;

    /// The plan for `len` entries into `size` rows, or `None` when one is empty or the
    /// counts and positions do not fit the kernels' 32-bit counters (more than `u32::MAX`
    /// entries, or more than 2^31 counters).
    ///
    /// ```
    /// use rtx_kernels::kernels::ScatterSortPlan;
    /// assert!(ScatterSortPlan::new(0, 10).is_none());
    /// // Few rows: one chunk per block-sized tile of the index.
    /// assert_eq!(ScatterSortPlan::new(8192, 256).unwrap().parts, 32);
    /// // Many rows: fewer, longer chunks, so the counters stay few.
    /// let big = ScatterSortPlan::new(1 << 20, 1 << 20).unwrap();
    /// assert_eq!((big.parts, big.chunk), (4, 1 << 18));
    /// ```
    pub fn new(len: usize, size: usize) -> Option<ScatterSortPlan> {
        if len == 0 || size == 0 || len > u32::MAX as usize {
            return None;
        }
        let block = Self::BLOCK;
        let by_budget = (Self::COUNTERS / size).max(1);
        let parts = len.div_ceil(block).min(by_budget);
        let chunk = len.div_ceil(parts).div_ceil(block) * block;
        let parts = len.div_ceil(chunk);
        let totals = size.checked_mul(parts)?;
        let shift = totals
            .div_ceil(Self::GROUPS)
            .next_power_of_two()
            .trailing_zeros()
            .max(10);
        let groups = totals.div_ceil(1 << shift);
        if totals + groups > 1 << 31 {
            return None;
        }
        Some(ScatterSortPlan {
            len,
            size,
            parts,
            chunk,
            groups,
            shift,
        })
    }

    /// The `u32` counters the launches share: `size * parts` row counts, then one sum per
    /// scan segment. They start at zero.
    pub fn counters(&self) -> usize {
        self.size * self.parts + self.groups
    }
}

/// Counts, for each chunk `c` of `chunk` entries of the index vector
/// `idx[istart + k * istep]` (`k` in `0..len`), how many target each row `r` in `0..size`:
/// `counts[r * parts + c]`, and adds each count to `counts[size * parts + m >> shift]` too,
/// `m = r * parts + c`, the sum of its scan segment. `counts` starts zeroed; entries outside
/// `0..size` are skipped. One block per chunk (any block size; blocks stride over chunks).
///
/// ```
/// use rtx_kernels::{kernel::LaunchConfig, kernels::scatter_sort_count};
/// // Entries [2, 0, 2, 9] in 2 chunks of 2 into 3 rows; 9 is out of range.
/// let mut counts = vec![0u32; 3 * 2 + 1];
/// let idx = [2, 0, 2, 9];
/// scatter_sort_count::<f32>(LaunchConfig::new(2, 32), &idx, 0, 1, 4, 3, 2, 2, 10, &mut counts)
///     .unwrap();
/// assert_eq!(counts, vec![1, 0, 0, 0, 1, 1, 3]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn scatter_sort_count<T: Num>(
    idx: &[i64],
    istart: usize,
    istep: usize,
    len: usize,
    size: usize,
    chunk: usize,
    parts: usize,
    shift: u32,
    counts: &mut [u32],
) {
    let bd = block_dim_x();
    let totals = size * parts;
    let mut c = block_idx_x();
    while c < parts {
        let lo = c * chunk;
        let hi = (lo + chunk).min(len);
        let mut k = lo + thread_idx_x();
        while k < hi {
            let r = idx[istart + k * istep];
            if r >= 0 && (r as usize) < size {
                let m = (r as usize) * parts + c;
                atomic_add(&mut counts[m], 1u32);
                atomic_add(&mut counts[totals + (m >> shift)], 1u32);
            }
            k += bd;
        }
        c += grid_dim_x();
    }
}

/// Replaces the first `totals` counters by their exclusive prefix sum, reading the sums of
/// the segments of `1 << shift` counters from `counts[totals..]`
/// ([`scatter_sort_count`](scatter_sort_count()) wrote them). One block per segment (blocks
/// stride over segments), at most 256 threads: the block adds the sums of the segments
/// before its own, then scans its segment in tiles of one value per thread.
///
/// ```
/// use rtx_kernels::{kernel::LaunchConfig, kernels::scatter_sort_scan};
/// let mut counts = vec![0u32; 2049];
/// counts[3] = 2;
/// counts[1500] = 4;
/// counts[2047] = 1;
/// counts[2048] = 7; // the one segment's sum
/// scatter_sort_scan::<f32>(LaunchConfig::new(1, 64), &mut counts, 2048, 11).unwrap();
/// assert_eq!((counts[3], counts[4], counts[1500], counts[1501], counts[2047]), (0, 2, 2, 6, 6));
/// ```
#[kernel(crate = crate)]
pub fn scatter_sort_scan<T: Num>(counts: &mut [u32], totals: usize, shift: u32) {
    #[shared]
    let sh: [u32; 256];
    #[shared]
    let carry_in: [u32; 1];
    let tid = thread_idx_x();
    let bd = block_dim_x();
    let seg = 1usize << shift;
    let groups = (totals + seg - 1) >> shift;
    let mut g = block_idx_x();
    while g < groups {
        if tid == 0 {
            carry_in[0] = 0u32;
        }
        sync_threads();
        let mut before = 0u32;
        let mut j = tid;
        while j < g {
            before += counts[totals + j];
            j += bd;
        }
        // Integer additions commute: the total does not depend on the order they land in.
        atomic_add(&mut carry_in[0], before);
        sync_threads();
        let mut carry = carry_in[0];
        let lo = g << shift;
        let hi = (lo + seg).min(totals);
        let mut base = lo;
        while base < hi {
            let i = base + tid;
            let v = if i < hi { counts[i] } else { 0u32 };
            sh[tid] = v;
            sync_threads();
            // Inclusive scan of the tile (Hillis and Steele): `off` is the same in every
            // thread, so each barrier is reached by the whole block.
            let mut off = 1;
            while off < bd {
                let add = if tid >= off { sh[tid - off] } else { 0u32 };
                sync_threads();
                sh[tid] += add;
                sync_threads();
                off *= 2;
            }
            if i < hi {
                counts[i] = carry + sh[tid] - v;
            }
            carry += sh[bd - 1];
            sync_threads();
            base += bd;
        }
        g += grid_dim_x();
    }
}

/// Writes each in-range entry's position `k` to `order[counts[r * parts + c] + rank]`, its
/// row `r`'s start for chunk `c` ([`scatter_sort_scan`](scatter_sort_scan())) plus the
/// number of entries of the chunk before it with the same row, and leaves
/// `counts[r * parts + c]` at the end of that run. So each row's positions end up in
/// increasing order, rows in order. One block per chunk (blocks stride over chunks), at most
/// 256 threads; the block walks its chunk in tiles of one entry per thread, in order.
///
/// ```
/// use rtx_kernels::{kernel::LaunchConfig, kernels::scatter_sort_place};
/// // Entries [2, 0, 2, 9] in one chunk into 3 rows, counts already scanned: row 0 starts
/// // at 0, row 2 at 1.
/// let mut counts = vec![0u32, 1, 1];
/// let mut order = vec![u32::MAX; 3];
/// let (idx, config) = ([2, 0, 2, 9], LaunchConfig::new(1, 32));
/// scatter_sort_place::<f32>(config, &idx, 0, 1, 4, 3, 4, 1, &mut counts, &mut order).unwrap();
/// assert_eq!(order, vec![1, 0, 2]);
/// assert_eq!(counts, vec![1, 1, 3]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn scatter_sort_place<T: Num>(
    idx: &[i64],
    istart: usize,
    istep: usize,
    len: usize,
    size: usize,
    chunk: usize,
    parts: usize,
    counts: &mut [u32],
    order: &mut [u32],
) {
    #[shared]
    let tile: [u32; 256];
    let tid = thread_idx_x();
    let bd = block_dim_x();
    // No row: `size` fits in a u32 (the plan keeps `size * parts` below 2^31).
    let none = size as u32;
    let mut c = block_idx_x();
    while c < parts {
        let lo = c * chunk;
        let hi = (lo + chunk).min(len);
        let mut base = lo;
        while base < hi {
            let k = base + tid;
            let mut r = none;
            if k < hi {
                let x = idx[istart + k * istep];
                if x >= 0 && (x as usize) < size {
                    r = x as u32;
                }
            }
            tile[tid] = r;
            sync_threads();
            let m = (r as usize) * parts + c;
            let mut pos = 0u32;
            let mut last = true;
            if r != none {
                let mut before = 0u32;
                for j in 0..bd {
                    if tile[j] == r {
                        if j < tid {
                            before += 1u32;
                        } else if j > tid {
                            last = false;
                        }
                    }
                }
                pos = counts[m] + before;
            }
            // Every thread has read its run's start before the run's last entry moves it.
            sync_threads();
            if r != none {
                order[pos as usize] = k as u32;
                if last {
                    counts[m] = pos + 1u32;
                }
            }
            sync_threads();
            base += bd;
        }
        c += grid_dim_x();
    }
}

/// For every row `r` in `0..size` and every line (a position of `shape` with `axis` left
/// out; `lines` of them), adds the source elements of the line at the positions
/// `order[begin..end]` along `axis` into the output at row `r`, one by one in that order,
/// rounding to `T` after each addition: `end = counts[r * parts + parts - 1]` and `begin`
/// the previous row's end (0 for row 0), as [`scatter_sort_place`](scatter_sort_place())
/// leaves them. `out` is read and written at `os`, `src` read at `ss`. Threads take lines
/// (`x` and the grid's `y` dimension), blocks along `x` take `rows` consecutive rows each;
/// both stride over the grid.
///
/// A thread loads the next 16 source elements (and the positions of the 16 after) while it
/// adds the current 16, so a long bucket (a frequent token) waits on memory about once per 16
/// additions. Each addition is stored and read back, which rounds it to `T` (the reload of a
/// value just stored costs no memory access: the compiler forwards it).
///
/// ```
/// use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
/// use rtx_kernels::kernels::scatter_add_sorted;
/// // Rows 0 and 2 of a [3, 1] output get src[1] and src[0] + src[2].
/// let mut out = vec![10.0f32, 20.0, 30.0];
/// let st = KernelStrides::new(0, &[1, 1]).unwrap();
/// let shape = KernelShape::new(&[3, 1]).unwrap();
/// let (counts, order) = ([1u32, 1, 3], [1u32, 0, 2]);
/// let (src, config) = ([1.0, 2.0, 4.0], LaunchConfig::new(2, 32));
/// scatter_add_sorted(config, &mut out, st, &src, st, shape, 0, 1, 3, 1, &counts, &order, 2)
///     .unwrap();
/// assert_eq!(out, vec![12.0, 20.0, 35.0]);
/// ```
#[kernel(crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn scatter_add_sorted<T: Num>(
    out: &mut [T],
    os: KernelStrides,
    src: &[T],
    ss: KernelStrides,
    shape: KernelShape,
    axis: usize,
    lines: usize,
    size: usize,
    parts: usize,
    counts: &[u32],
    order: &[u32],
    rows: usize,
) {
    const B: usize = 16;
    let rank = shape.rank();
    let ostep = os.stride(axis);
    let sstep = ss.stride(axis);
    let mut line = block_idx_y() * block_dim_x() + thread_idx_x();
    while line < lines {
        let mut rem = line;
        let mut oo = os.offset();
        let mut so = ss.offset();
        for j in 0..rank {
            let d = rank - 1 - j;
            if d != axis {
                let c = rem % shape.dim(d);
                rem /= shape.dim(d);
                oo += c * os.stride(d);
                so += c * ss.stride(d);
            }
        }
        let mut first = block_idx_x() * rows;
        while first < size {
            let stop = (first + rows).min(size);
            for r in first..stop {
                let begin = if r == 0 {
                    0
                } else {
                    counts[r * parts - 1] as usize
                };
                let end = counts[r * parts + parts - 1] as usize;
                if begin < end {
                    let at = oo + r * ostep;
                    let mut acc = out[at];
                    // `v` holds the batch being added, `w` the next one, `ks` the positions
                    // of the one after: each batch's loads are issued a batch ahead.
                    let mut v = [acc; B];
                    let mut w = [acc; B];
                    let mut ks = [0u32; B];
                    let full = begin + (end - begin) / B * B;
                    let mut s = begin;
                    if s < full {
                        for j in 0..B {
                            v[j] = src[so + (order[s + j] as usize) * sstep];
                        }
                        if s + B < full {
                            for j in 0..B {
                                ks[j] = order[s + B + j];
                            }
                        }
                    }
                    while s < full {
                        let next = s + B;
                        if next < full {
                            for j in 0..B {
                                w[j] = src[so + (ks[j] as usize) * sstep];
                            }
                            if next + B < full {
                                for j in 0..B {
                                    ks[j] = order[next + B + j];
                                }
                            }
                        }
                        for j in 0..B {
                            out[at] = acc + v[j];
                            acc = out[at];
                        }
                        for j in 0..B {
                            v[j] = w[j];
                        }
                        s = next;
                    }
                    while s < end {
                        out[at] = acc + src[so + (order[s] as usize) * sstep];
                        acc = out[at];
                        s += 1;
                    }
                }
            }
            first += grid_dim_x() * rows;
        }
        line += grid_dim_y() * block_dim_x();
    }
}
