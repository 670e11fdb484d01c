//! Elementwise loops over strided inputs: a contiguous fast path the compiler vectorizes and a
//! general strided path, both parallel over fixed output chunks.
//!
//! The contiguous loops are compiled twice, for the baseline x86-64 target (SSE2) and for AVX2,
//! and a dispatcher picks one at run time. Only the vector width differs: no fused multiply-add is
//! enabled (and Rust never contracts `a * b + c` on its own), so both give bitwise the same
//! results, and the math in `rtx_kernels::fastmath` is written to vectorize.

use super::{CHUNK, for_chunks_mut};
use crate::Layout;
use std::mem::MaybeUninit;

/// Outputs up to this many elements are written on the calling thread: waking a pool thread
/// costs microseconds (more on a busy machine), about what splitting a pass this short saves.
/// An elementwise result does not depend on the split, so this moves only time.
pub(crate) const INLINE: usize = 2 * CHUNK;

/// Fills a fresh vector of `n` elements chunk by chunk; `fill(start, chunk)` writes the output
/// elements `start..start + chunk.len()`. `fill` is a `&dyn`, so this is compiled once per
/// output type, not once per loop body.
pub fn build<U: Send>(n: usize, fill: &(dyn Fn(usize, &mut [MaybeUninit<U>]) + Sync)) -> Vec<U> {
    let mut out = Vec::with_capacity(n);
    advise_huge_pages(&mut out);
    let spare = &mut out.spare_capacity_mut()[..n];
    if n <= INLINE {
        fill(0, spare);
    } else {
        for_chunks_mut(spare, CHUNK, &|c, chunk| fill(c * CHUNK, chunk));
    }
    // SAFETY: every `fill` call writes each slot of its chunk (all callers below write
    // through an iterator that covers the whole chunk), and the chunks cover 0..n.
    unsafe { out.set_len(n) };
    out
}

/// Defines a contiguous loop three times, as an `#[inline(always)]` generic function and as
/// AVX2 and AVX-512 copies of it, plus a dispatcher that picks the widest copy the CPU runs
/// (std detects this once and caches it). The element function `f` must be
/// `#[inline(always)]` (or small) so that it is inlined into every copy: a closure called from
/// several places is not inlined when it is large, and the loop then does not vectorize. The
/// copies give the same bits: element functions use only operations that round the same way
/// at every vector width.
macro_rules! dispatched_loop {
    ($name:ident, $avx2:ident, $avx512:ident, $body:ident, <$($g:ident),*>, ($($arg:ident: $ty:ty),*)) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $avx2<$($g: Copy,)* U, F: Fn($($g),*) -> U>(out: &mut [MaybeUninit<U>], f: &F, $($arg: $ty),*) {
            $body(out, f, $($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f")]
        fn $avx512<$($g: Copy,)* U, F: Fn($($g),*) -> U>(out: &mut [MaybeUninit<U>], f: &F, $($arg: $ty),*) {
            $body(out, f, $($arg),*)
        }

        #[inline(always)]
        fn $name<$($g: Copy,)* U, F: Fn($($g),*) -> U>(out: &mut [MaybeUninit<U>], f: &F, $($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F, checked just above.
                return unsafe { $avx512(out, f, $($arg),*) };
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, checked just above.
                return unsafe { $avx2(out, f, $($arg),*) };
            }
            $body(out, f, $($arg),*)
        }
    };
}

/// `out[i] = f(a[i])`.
#[inline(always)]
fn map_body<A: Copy, U, F: Fn(A) -> U>(out: &mut [MaybeUninit<U>], f: &F, a: &[A]) {
    for (o, &x) in out.iter_mut().zip(a) {
        o.write(f(x));
    }
}
dispatched_loop!(map_slice, map_slice_avx2, map_slice_avx512, map_body, <A>, (a: &[A]));

/// `out[i] = f(a[i], b[i])`.
#[inline(always)]
fn zip_body<A: Copy, B: Copy, U, F: Fn(A, B) -> U>(
    out: &mut [MaybeUninit<U>],
    f: &F,
    a: &[A],
    b: &[B],
) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        o.write(f(x, y));
    }
}
dispatched_loop!(zip_slice, zip_slice_avx2, zip_slice_avx512, zip_body, <A, B>, (a: &[A], b: &[B]));

/// `out[i] = f(a[i], y)`: a scalar right-hand side.
#[inline(always)]
fn scalar_body<A: Copy, B: Copy, U, F: Fn(A, B) -> U>(
    out: &mut [MaybeUninit<U>],
    f: &F,
    a: &[A],
    y: B,
) {
    for (o, &x) in out.iter_mut().zip(a) {
        o.write(f(x, y));
    }
}
dispatched_loop!(scalar_slice, scalar_slice_avx2, scalar_slice_avx512, scalar_body, <A, B>, (a: &[A], y: B));

/// `x[i] = f(x[i])` in place, compiled for AVX-512 or AVX2 where the CPU has it (as the
/// loops above: `f` must inline, and gives the same bits at every width). It runs on the
/// calling thread: callers apply it to blocks they already own, such as a product's block of
/// rows while it is in cache.
pub(crate) fn update_in_place<U: Copy, F: Fn(U) -> U>(x: &mut [U], f: &F) {
    #[inline(always)]
    fn body<U: Copy, F: Fn(U) -> U>(x: &mut [U], f: &F) {
        for v in x.iter_mut() {
            *v = f(*v);
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Copy, F: Fn(U) -> U>(x: &mut [U], f: &F) {
        body(x, f)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn avx512<U: Copy, F: Fn(U) -> U>(x: &mut [U], f: &F) {
        body(x, f)
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F, checked just above.
        return unsafe { avx512(x, f) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { avx2(x, f) };
    }
    body(x, f)
}

/// Asks Linux to back the 2 MiB-aligned interior of a large fresh buffer with transparent huge
/// pages (`madvise(MADV_HUGEPAGE)`, which PyTorch does under `THP_MEM_ALLOC_ENABLE`). Writing
/// a new 64 MiB output otherwise takes 16384 page faults, about half the time of a simple
/// elementwise op; with huge pages it takes 32. Only the paging policy changes, never the
/// contents; where THP is disabled the call fails and is ignored.
pub(crate) fn advise_huge_pages<U>(buf: &mut Vec<U>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 1 << 21;
        let bytes = buf.capacity() * std::mem::size_of::<U>();
        if bytes >= 2 * HUGE {
            let start = buf.as_mut_ptr() as usize;
            let first = start.next_multiple_of(HUGE);
            let end = (start + bytes) / HUGE * HUGE;
            if end > first {
                // SAFETY: the range lies inside `buf`'s own allocation, and MADV_HUGEPAGE only
                // changes how untouched pages will be backed; it never changes memory contents.
                unsafe {
                    libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// `f` applied to every element of a strided input, in logical order.
pub fn map<A: Copy + Sync, U: Send>(src: &[A], l: &Layout, f: impl Fn(A) -> U + Sync) -> Vec<U> {
    let n = l.numel();
    if let Some(range) = l.contiguous_range() {
        let src = &src[range];
        return build(n, &|start, out| {
            let src = &src[start..start + out.len()];
            map_slice(out, &f, src)
        });
    }
    build(n, &|start, out| {
        for (o, off) in out.iter_mut().zip(l.offsets_from(start)) {
            o.write(f(src[off]));
        }
    })
}

/// `f` applied pairwise to two strided inputs of the same logical sizes (broadcast already
/// folded into their strides).
pub fn zip_map<A: Copy + Sync, B: Copy + Sync, U: Send>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    f: impl Fn(A, B) -> U + Sync,
) -> Vec<U> {
    debug_assert_eq!(la.dims(), lb.dims());
    let n = la.numel();
    match (la.contiguous_range(), lb.contiguous_range()) {
        (Some(ra), Some(rb)) => {
            let (a, b) = (&a[ra], &b[rb]);
            build(n, &|start, out| {
                let end = start + out.len();
                zip_slice(out, &f, &a[start..end], &b[start..end])
            })
        }
        (Some(ra), None) if lb.strides().iter().all(|&s| s == 0) => {
            // A scalar (or fully broadcast) right-hand side.
            let (a, y) = (&a[ra], b[lb.offset()]);
            build(n, &|start, out| {
                scalar_slice(out, &f, &a[start..start + out.len()], y)
            })
        }
        (Some(ra), None) if let Some(inner) = repeated_row(lb) => {
            // A row repeated over leading dims (a bias added to a batch): dense segments.
            let (a, row) = (&a[ra], &b[lb.offset()..][..inner]);
            build(n, &|start, out| {
                for_row_segments(start, out, inner, |pos, j, seg| {
                    zip_slice(seg, &f, &a[pos..pos + seg.len()], &row[j..j + seg.len()])
                })
            })
        }
        (None, Some(rb)) if let Some(inner) = repeated_row(la) => {
            let (row, b) = (&a[la.offset()..][..inner], &b[rb]);
            build(n, &|start, out| {
                for_row_segments(start, out, inner, |pos, j, seg| {
                    zip_slice(seg, &f, &row[j..j + seg.len()], &b[pos..pos + seg.len()])
                })
            })
        }
        _ => build(n, &|start, out| {
            let offs = la.offsets_from(start).zip(lb.offsets_from(start));
            for (o, (ia, ib)) in out.iter_mut().zip(offs) {
                o.write(f(a[ia], b[ib]));
            }
        }),
    }
}

/// The length of the dense row that a broadcast layout repeats: `Some(len)` when its trailing
/// dims are dense (row-major from its offset) and every leading dim has stride 0, with
/// `1 < len < numel` (a scalar or a dense layout has its own path).
fn repeated_row(l: &Layout) -> Option<usize> {
    let (dims, strides) = (l.dims(), l.strides());
    let mut split = dims.len();
    let mut inner = 1;
    while split > 0 {
        let (d, s) = (dims[split - 1], strides[split - 1]);
        if d != 1 && s != inner {
            break;
        }
        inner *= d;
        split -= 1;
    }
    let leading_repeat = dims[..split]
        .iter()
        .zip(&strides[..split])
        .all(|(&d, &s)| s == 0 || d == 1);
    (leading_repeat && inner > 1 && inner < l.numel()).then_some(inner)
}

/// Splits the output chunk starting at element `start` into segments that do not cross a row
/// of `inner` elements, calling `seg(position, column, segment)` on each.
#[inline(always)]
fn for_row_segments<U>(
    start: usize,
    mut out: &mut [MaybeUninit<U>],
    inner: usize,
    mut seg: impl FnMut(usize, usize, &mut [MaybeUninit<U>]),
) {
    let mut pos = start;
    while !out.is_empty() {
        let j = pos % inner;
        let len = (inner - j).min(out.len());
        let (head, tail) = out.split_at_mut(len);
        seg(pos, j, head);
        pos += len;
        out = tail;
    }
}

/// `f` applied to three strided inputs of the same logical sizes (used by `where`).
pub fn zip3_map<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, U: Send>(
    (a, la): (&[A], &Layout),
    (b, lb): (&[B], &Layout),
    (c, lc): (&[C], &Layout),
    f: impl Fn(A, B, C) -> U + Sync,
) -> Vec<U> {
    build(la.numel(), &|start, out| {
        let offs = la
            .offsets_from(start)
            .zip(lb.offsets_from(start))
            .zip(lc.offsets_from(start));
        for (o, ((ia, ib), ic)) in out.iter_mut().zip(offs) {
            o.write(f(a[ia], b[ib], c[ic]));
        }
    })
}

/// `f` applied to `N + EXTRA` strided inputs of the same logical sizes (a `#[kernel]` applied
/// through `rtx::kernel`: its `N` inputs, and for a derivative kernel `EXTRA = 1` more, the
/// upstream gradient): `f` gets one element of each input, in order. The count is a constant
/// so that the loop over a block is compiled for exactly that many inputs: a short loop that
/// `f` inlines into and that can vectorize. Walking the layouts and splitting the work across
/// threads is `zip_blocks`, compiled once per element type, not once per `f`.
///
/// # Panics
/// When `inputs` does not hold `N + EXTRA` inputs.
pub fn zip_n_map<const N: usize, const EXTRA: usize, A: Copy + Sync + Default, U: Send>(
    inputs: &[(&[A], &Layout)],
    f: impl Fn(&[A]) -> U + Sync,
) -> Vec<U> {
    let k = N + EXTRA;
    assert_eq!(inputs.len(), k, "an elementwise kernel of {k} inputs");
    let n = inputs.first().map_or(0, |(_, l)| l.numel());
    debug_assert!(inputs.iter().all(|(_, l)| l.numel() == n));
    // A constant, so only the arm for this count is compiled (rustc skips code under a
    // `match` on a constant when it instantiates a function).
    let block = |srcs: &[&[A]], out: &mut [MaybeUninit<U>]| match const { N + EXTRA } {
        1 => block_loop::<1, A, U>(srcs, out, &f),
        2 => block_loop::<2, A, U>(srcs, out, &f),
        3 => block_loop::<3, A, U>(srcs, out, &f),
        4 => block_loop::<4, A, U>(srcs, out, &f),
        5 => block_loop::<5, A, U>(srcs, out, &f),
        6 => block_loop::<6, A, U>(srcs, out, &f),
        7 => block_loop::<7, A, U>(srcs, out, &f),
        8 => block_loop::<8, A, U>(srcs, out, &f),
        _ => {
            let mut xs = Vec::with_capacity(k);
            for (i, o) in out.iter_mut().enumerate() {
                xs.clear();
                xs.extend(srcs.iter().map(|s| s[i]));
                o.write(f(&xs));
            }
        }
    };
    zip_blocks(inputs, n, &block)
}

/// `out[i] = f([srcs[0][i], .., srcs[K - 1][i]])` over one block. Every source is cut to the
/// block's length first, so no index is checked inside the loop, which then has no
/// per-element bookkeeping: the compiler inlines `f` and can vectorize.
#[inline(always)]
fn block_loop<const K: usize, A: Copy + Default, U>(
    srcs: &[&[A]],
    out: &mut [MaybeUninit<U>],
    f: &impl Fn(&[A]) -> U,
) {
    let n = out.len();
    let mut ins: [&[A]; K] = [&[]; K];
    for (j, s) in ins.iter_mut().enumerate() {
        *s = &srcs[j][..n];
    }
    for (i, o) in out.iter_mut().enumerate() {
        let mut xs = [A::default(); K];
        for (x, s) in xs.iter_mut().zip(&ins) {
            *x = s[i];
        }
        o.write(f(&xs));
    }
}

/// Elements per block of [`zip_blocks`]: the blocks of all inputs stay in L1.
const ZIP_BLOCK: usize = 256;

/// A kernel's loop over one block: its inputs' elements (one slice per input) in, the
/// block's outputs written.
type BlockFn<'a, A, U> = dyn Fn(&[&[A]], &mut [MaybeUninit<U>]) + Sync + 'a;

/// Runs `block` over the output in blocks of [`ZIP_BLOCK`] elements, in parallel by chunks:
/// a dense input is handed over in place, any other is first gathered into a block buffer (a
/// row at a time: broadcast runs filled, contiguous runs copied).
fn zip_blocks<A: Copy + Sync + Default, U: Send>(
    inputs: &[(&[A], &Layout)],
    n: usize,
    block: &BlockFn<'_, A, U>,
) -> Vec<U> {
    let dense: Vec<Option<&[A]>> = inputs
        .iter()
        .map(|(s, l)| l.contiguous_range().map(|r| &s[r]))
        .collect();
    build(n, &|start, out| {
        let mut bufs = vec![[A::default(); ZIP_BLOCK]; inputs.len()];
        for (b, chunk) in out.chunks_mut(ZIP_BLOCK).enumerate() {
            let (pos, len) = (start + b * ZIP_BLOCK, chunk.len());
            for (k, buf) in bufs.iter_mut().enumerate() {
                if dense[k].is_none() {
                    gather_block(inputs[k].0, inputs[k].1, pos, &mut buf[..len]);
                }
            }
            let bufs = &bufs;
            let src = |k: usize| match dense[k] {
                Some(d) => &d[pos..pos + len],
                None => &bufs[k][..len],
            };
            if inputs.len() <= 8 {
                // On the stack: a heap vector per block would cost about what a short block does.
                let mut srcs: [&[A]; 8] = [&[]; 8];
                for (k, s) in srcs[..inputs.len()].iter_mut().enumerate() {
                    *s = src(k);
                }
                block(&srcs[..inputs.len()], chunk);
            } else {
                let srcs: Vec<&[A]> = (0..inputs.len()).map(src).collect();
                block(&srcs, chunk);
            }
        }
    })
}

/// Copies logical elements `pos..pos + dst.len()` of the view `l` of `src` into `dst`, a row
/// (run along the last dim) at a time.
fn gather_block<A: Copy>(src: &[A], l: &Layout, pos: usize, dst: &mut [A]) {
    let row = l.dims().last().copied().unwrap_or(1).max(1);
    let stride = l.strides().last().copied().unwrap_or(0);
    let mut i = 0;
    while i < dst.len() {
        let p = pos + i;
        let run = (row - p % row).min(dst.len() - i);
        let base = l.offsets_from(p).next().unwrap_or(l.offset());
        let d = &mut dst[i..i + run];
        match stride {
            0 => d.fill(src[base]),
            1 => d.copy_from_slice(&src[base..base + run]),
            _ => {
                for (j, x) in d.iter_mut().enumerate() {
                    *x = src[base + j * stride];
                }
            }
        }
        i += run;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_and_contiguous_paths_agree() {
        let n = 3 * CHUNK + 17;
        let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let l = Layout::contiguous(&[n]);
        assert_eq!(map(&data, &l, |x| x * 2.0)[n - 1], (n - 1) as f32 * 2.0);
        let t = Layout::contiguous(&[n / 7, 7]).transpose(0, 1);
        let got = map(&data, &t, |x| x);
        let want: Vec<f32> = t.offsets_from(0).map(|o| o as f32).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn zip_n_walks_rows_of_a_broadcast_bias_across_chunks() {
        // Rows of 37 over several chunks, so rows straddle chunk boundaries.
        let (rows, cols) = (3 * CHUNK / 37 + 5, 37);
        let a: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..cols).map(|j| 1000.0 * j as f32).collect();
        let la = Layout::contiguous(&[rows, cols]);
        let lb = Layout::contiguous(&[cols])
            .broadcast_to(&[rows, cols])
            .unwrap();
        let got = zip_n_map::<2, 0, _, _>(&[(&a[..], &la), (&b[..], &lb)], |x| x[0] + x[1]);
        let want: Vec<f32> = (0..rows * cols)
            .map(|i| i as f32 + 1000.0 * (i % cols) as f32)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn zip_n_blocks_match_the_per_element_walk_for_every_input_count() {
        // A transposed view, a broadcast column and a broadcast row, over sizes that are not
        // a multiple of the block, for 1 to 17 inputs (over 8 pass their elements in a vector).
        let (rows, cols) = (53, 29);
        let a: Vec<f64> = (0..rows * cols).map(|i| (i % 17) as f64).collect();
        let col: Vec<f64> = (0..rows).map(|i| i as f64 * 0.5).collect();
        let row: Vec<f64> = (0..cols).map(|j| j as f64 * 3.0).collect();
        let views = [
            (&a[..], Layout::contiguous(&[cols, rows]).transpose(0, 1)),
            (&col[..], Layout::new(&[rows, cols], &[1, 0], 0)),
            (
                &row[..],
                Layout::contiguous(&[cols])
                    .broadcast_to(&[rows, cols])
                    .unwrap(),
            ),
            (&a[..], Layout::contiguous(&[rows, cols])),
        ];
        for k in [1, 2, 3, 9, 16, 17] {
            let ins: Vec<(&[f64], &Layout)> =
                (0..k).map(|i| (views[i % 4].0, &views[i % 4].1)).collect();
            let weigh = |x: &[f64]| x.iter().enumerate().map(|(i, v)| v * (i + 1) as f64).sum();
            let got: Vec<f64> = match k {
                1 => zip_n_map::<1, 0, _, _>(&ins, weigh),
                2 => zip_n_map::<1, 1, _, _>(&ins, weigh),
                3 => zip_n_map::<3, 0, _, _>(&ins, weigh),
                9 => zip_n_map::<8, 1, _, _>(&ins, weigh),
                16 => zip_n_map::<15, 1, _, _>(&ins, weigh),
                _ => zip_n_map::<17, 0, _, _>(&ins, weigh),
            };
            let mut offsets: Vec<_> = ins.iter().map(|(_, l)| l.offsets_from(0)).collect();
            let want: Vec<f64> = (0..rows * cols)
                .map(|_| {
                    let xs: Vec<f64> = ins
                        .iter()
                        .zip(offsets.iter_mut())
                        .map(|((s, _), o)| s[o.next().unwrap()])
                        .collect();
                    weigh(&xs)
                })
                .collect();
            assert_eq!(got, want, "{k} inputs");
        }
    }

    #[test]
    #[should_panic(expected = "an elementwise kernel of 3 inputs")]
    fn zip_n_refuses_a_count_other_than_its_own() {
        let a = [1.0f32, 2.0];
        let l = Layout::contiguous(&[2]);
        zip_n_map::<2, 1, _, _>(&[(&a[..], &l), (&a[..], &l)], |v| v[0]);
    }

    #[test]
    fn zip_n_matches_zip3_on_strided_and_broadcast_inputs() {
        let a: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let b = [10.0f32, 20.0, 30.0];
        let la = Layout::contiguous(&[4, 3]).transpose(0, 1).transpose(0, 1);
        let lt = Layout::contiguous(&[3, 4]).transpose(0, 1);
        let lb = Layout::contiguous(&[3]).broadcast_to(&[4, 3]).unwrap();
        let want = zip3_map((&a, &la), (&a, &lt), (&b[..], &lb), |x, y, z| {
            x * 100.0 + y + z
        });
        let got = zip_n_map::<2, 1, _, _>(&[(&a, &la), (&a, &lt), (&b[..], &lb)], |v| {
            v[0] * 100.0 + v[1] + v[2]
        });
        assert_eq!(got, want);
        let dense = zip_n_map::<1, 0, _, _>(&[(&a, &Layout::contiguous(&[12]))], |v| v[0] * 2.0);
        assert_eq!(dense[11], 22.0);
    }

    #[test]
    fn repeated_rows_take_the_segment_path_and_match_the_strided_one() {
        let (rows, cols) = (CHUNK / 7 + 3, 7);
        let a: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..cols).map(|i| 100.0 * i as f32).collect();
        let la = Layout::contiguous(&[rows, cols]);
        let lb = Layout::contiguous(&[cols])
            .broadcast_to(&[rows, cols])
            .unwrap();
        assert_eq!(repeated_row(&lb), Some(cols));
        assert_eq!(repeated_row(&la), None);
        let want: Vec<f32> = (0..rows * cols).map(|i| a[i] - b[i % cols]).collect();
        assert_eq!(zip_map(&a, &la, &b, &lb, |x, y| x - y), want);
        let swapped: Vec<f32> = want.iter().map(|v| -v).collect();
        assert_eq!(zip_map(&b, &lb, &a, &la, |x, y| x - y), swapped);
        // A column broadcast is not a repeated row.
        let lc = Layout::contiguous(&[rows, 1])
            .broadcast_to(&[rows, cols])
            .unwrap();
        assert_eq!(repeated_row(&lc), None);
    }

    #[test]
    fn zip_broadcasts_a_row() {
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [10.0f32, 20.0, 30.0];
        let la = Layout::contiguous(&[2, 3]);
        let lb = Layout::contiguous(&[3]).broadcast_to(&[2, 3]).unwrap();
        assert_eq!(
            zip_map(&a, &la, &b, &lb, |x, y| x + y),
            vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
        );
    }
}
