//! Indexing and joining loops on the CPU: index_select, gather, scatter (set and add), concat
//! and the triangular masks of tril/triu.
//!
//! Every input may be strided: a layout is split at the indexed axis into the axes before it
//! (walked with an odometer) and the axes after it (a contiguous run where possible, so rows
//! copy as slices). Indices are validated before any work, and the first bad one in logical
//! order is reported, so the error is the same on every run. Scatter writes run in parallel
//! over *lines* (all positions that differ only along the scattered axis) and sequentially
//! along each line, so overlapping writes and float accumulation happen in one fixed order.

use super::CHUNK;
use super::elementwise::{build, map};
use crate::{BackendError, Layout, Result};

/// Formats a logical position as `[i, j, ...]` for error messages.
fn position(dims: &[usize], mut flat: usize) -> String {
    let mut idx = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        idx[i] = flat % d.max(1);
        flat /= d.max(1);
    }
    format!("{idx:?}")
}

/// Checks that every index value lies in `0..size`; the first bad one in logical order is
/// reported with its position, the axis and the axis size.
pub(crate) fn check_indices(
    op: &'static str,
    idx: &[i64],
    il: &Layout,
    axis: usize,
    size: usize,
) -> Result<()> {
    let bad = |k: i64| k < 0 || k as u64 >= size as u64;
    let first_bad = match il.contiguous_range() {
        Some(r) => idx[r].iter().position(|&k| bad(k)),
        None => il.offsets_from(0).position(|o| bad(idx[o])),
    };
    match first_bad {
        None => Ok(()),
        Some(p) => {
            let k = match il.contiguous_range() {
                Some(r) => idx[r.start + p],
                None => il.offsets_from(p).next().map_or(0, |o| idx[o]),
            };
            Err(BackendError::BadArgument {
                op,
                msg: format!(
                    "index {k} at {} is out of bounds for axis {axis} of size {size}",
                    position(il.dims(), p)
                ),
            })
        }
    }
}

/// Row-major strides of dense `dims`.
fn dense_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Selects the slices `indices` of axis `axis`: the output has the input's sizes with that axis
/// replaced by the number of indices.
pub fn index_select<E: Copy + Send + Sync>(
    src: &[E],
    l: &Layout,
    idx: &[i64],
    il: &Layout,
    axis: usize,
) -> Result<Vec<E>> {
    let size = l.dims()[axis];
    check_indices("index_select", idx, il, axis, size)?;
    let indices: Vec<usize> = il.offsets_from(0).map(|o| idx[o] as usize).collect();
    let outer: Vec<usize> = Layout::new(&l.dims()[..axis], &l.strides()[..axis], l.offset())
        .offsets_from(0)
        .collect();
    let inner_l = Layout::new(&l.dims()[axis + 1..], &l.strides()[axis + 1..], 0);
    let inner_n = inner_l.numel();
    // `None` means the trailing axes are dense, so a row is one slice of the source.
    let inner: Option<Vec<usize>> =
        (!inner_l.is_contiguous()).then(|| inner_l.offsets_from(0).collect());
    let stride = l.strides()[axis];
    let d = indices.len();
    let n = outer.len() * d * inner_n;
    Ok(build(n, &|start, out| {
        let end = start + out.len();
        let mut p = start;
        while p < end {
            let (row, i0) = (p / inner_n, p % inner_n);
            let base = outer[row / d] + indices[row % d] * stride;
            let len = (inner_n - i0).min(end - p);
            let dst = &mut out[p - start..p - start + len];
            match &inner {
                None => {
                    for (o, &v) in dst.iter_mut().zip(&src[base + i0..base + i0 + len]) {
                        o.write(v);
                    }
                }
                Some(offs) => {
                    for (o, &off) in dst.iter_mut().zip(&offs[i0..i0 + len]) {
                        o.write(src[base + off]);
                    }
                }
            }
            p += len;
        }
    }))
}

/// Checks that `small` fits inside `big` on every axis (but `skip`, when given).
pub(crate) fn check_fits(
    op: &'static str,
    what: &str,
    small: &[usize],
    big: &[usize],
    skip: Option<usize>,
) -> Result<()> {
    let ok = small.len() == big.len()
        && small
            .iter()
            .zip(big)
            .enumerate()
            .all(|(i, (s, b))| Some(i) == skip || s <= b);
    if ok {
        Ok(())
    } else {
        Err(BackendError::BadArgument {
            op,
            msg: format!("{what} sizes {small:?} do not fit in {big:?}"),
        })
    }
}

/// Picks `src[.., index[p], ..]` along `axis` for every position `p` of the index; the output
/// has the index's sizes.
pub fn gather<E: Copy + Send + Sync>(
    src: &[E],
    l: &Layout,
    idx: &[i64],
    il: &Layout,
    axis: usize,
) -> Result<Vec<E>> {
    check_fits("gather", "index", il.dims(), l.dims(), Some(axis))?;
    check_indices("gather", idx, il, axis, l.dims()[axis])?;
    // Walking the source with the index's sizes and a zero stride on `axis` gives each output
    // position's base offset; the index value then adds the step along `axis`.
    let mut strides = l.strides().to_vec();
    strides[axis] = 0;
    let base = Layout::new(il.dims(), &strides, l.offset());
    let step = l.strides()[axis];
    Ok(build(
        il.numel(),
        &|start, out| match il.contiguous_range() {
            Some(r) => {
                let ks = &idx[r.start + start..r.start + start + out.len()];
                for ((o, b), &k) in out.iter_mut().zip(base.offsets_from(start)).zip(ks) {
                    o.write(src[b + k as usize * step]);
                }
            }
            None => {
                let offs = base.offsets_from(start).zip(il.offsets_from(start));
                for (o, (b, ko)) in out.iter_mut().zip(offs) {
                    o.write(src[b + idx[ko] as usize * step]);
                }
            }
        },
    ))
}

/// A dense copy of `dst` in which, for every position `p` of the index,
/// `out[.., index[p], ..] = combine(out[.., index[p], ..], src[p])` along `axis`.
///
/// Lines (positions that differ only along `axis`) are spread over tasks in fixed groups; each
/// line is walked in order, so a repeated index sees its writes in logical order (the last one
/// wins for a plain scatter) and float sums do not depend on the thread count.
#[allow(clippy::too_many_arguments)]
pub fn scatter<E: Copy + Send + Sync>(
    (dst, l): (&[E], &Layout),
    (idx, il): (&[i64], &Layout),
    (src, sl): (&[E], &Layout),
    axis: usize,
    op: &'static str,
    combine: impl Fn(E, E) -> E + Sync,
) -> Result<Vec<E>> {
    check_fits(op, "index", il.dims(), l.dims(), Some(axis))?;
    check_fits(op, "index", il.dims(), sl.dims(), None)?;
    check_indices(op, idx, il, axis, l.dims()[axis])?;
    let mut out = map(dst, l, |x| x);
    let len = il.dims()[axis];
    if il.numel() == 0 {
        return Ok(out);
    }
    let out_strides = dense_strides(l.dims());
    let mut line_dims = il.dims().to_vec();
    line_dims[axis] = 1;
    let idx_lines = Layout::new(&line_dims, il.strides(), il.offset());
    let src_lines = Layout::new(&line_dims, sl.strides(), sl.offset());
    let out_lines = Layout::new(&line_dims, &out_strides, 0);
    let (istep, sstep, ostep) = (il.strides()[axis], sl.strides()[axis], out_strides[axis]);
    let n_lines = idx_lines.numel();
    let per_task = (CHUNK / len).max(1);
    let total = out.len();
    // Tasks write disjoint positions of `out` (see above), which outlives the loop.
    let shared = super::SharedMut(out.as_mut_ptr());
    super::parallel_for(n_lines.div_ceil(per_task), &|t| {
        let first = t * per_task;
        let count = per_task.min(n_lines - first);
        let bases = idx_lines
            .offsets_from(first)
            .zip(src_lines.offsets_from(first))
            .zip(out_lines.offsets_from(first))
            .take(count);
        for ((ib, sb), ob) in bases {
            for j in 0..len {
                let k = idx[ib + j * istep] as usize;
                let v = src[sb + j * sstep];
                let o = ob + k * ostep;
                assert!(o < total);
                // SAFETY: `o` is in bounds (checked above). Line coordinates off `axis` are
                // below the output's sizes (check_fits) and `k` below its size on `axis`
                // (check_indices), so `o` is the dense offset of a position whose coordinates
                // off `axis` are this line's own; lines differ there, so no two tasks write
                // the same element, and nothing reads `out` during the loop.
                unsafe {
                    let p = shared.ptr().add(o);
                    *p = combine(*p, v);
                }
            }
        }
    });
    Ok(out)
}

/// Joins strided parts along `axis`; all parts have the same sizes off `axis`.
pub fn concat<E: Copy + Send + Sync>(parts: &[(&[E], &Layout)], axis: usize) -> Vec<E> {
    let Some(&(_, first)) = parts.first() else {
        return Vec::new();
    };
    let dims = first.dims();
    let outer_n: usize = dims[..axis].iter().product();
    let inner_n: usize = dims[axis + 1..].iter().product();
    // cum[k]..cum[k + 1] is part k's run within one output row of `row` elements.
    let mut cum = vec![0usize];
    for (_, pl) in parts {
        cum.push(cum[cum.len() - 1] + pl.dims()[axis] * inner_n);
    }
    let row = cum[parts.len()];
    build(outer_n * row, &|start, out| {
        let end = start + out.len();
        let mut p = start;
        while p < end {
            let (o, r) = (p / row, p % row);
            let k = cum.partition_point(|&c| c <= r) - 1;
            let (part, pl) = parts[k];
            let part_row = cum[k + 1] - cum[k];
            let len = (cum[k + 1] - r).min(end - p);
            let logical = o * part_row + (r - cum[k]);
            let dst = &mut out[p - start..p - start + len];
            match pl.contiguous_range() {
                Some(range) => {
                    let from = range.start + logical;
                    for (d, &v) in dst.iter_mut().zip(&part[from..from + len]) {
                        d.write(v);
                    }
                }
                None => {
                    for (d, off) in dst.iter_mut().zip(pl.offsets_from(logical)) {
                        d.write(part[off]);
                    }
                }
            }
            p += len;
        }
    })
}

/// Keeps the elements on and below (`upper == false`) or on and above (`upper == true`)
/// diagonal `k` of the last two axes, and writes `zero` elsewhere.
pub fn triangle<E: Copy + Send + Sync>(
    src: &[E],
    l: &Layout,
    k: i64,
    upper: bool,
    zero: E,
) -> Vec<E> {
    let r = l.rank();
    let (rows, cols) = (l.dims()[r - 2], l.dims()[r - 1]);
    let keep = move |p: usize| {
        let col = (p % cols) as i64;
        let row = ((p / cols) % rows) as i64;
        if upper {
            col - row >= k
        } else {
            col - row <= k
        }
    };
    build(l.numel(), &|start, out| match l.contiguous_range() {
        Some(range) => {
            let src = &src[range.start + start..range.start + start + out.len()];
            for (i, (o, &v)) in out.iter_mut().zip(src).enumerate() {
                o.write(if keep(start + i) { v } else { zero });
            }
        }
        None => {
            for (i, (o, off)) in out.iter_mut().zip(l.offsets_from(start)).enumerate() {
                o.write(if keep(start + i) { src[off] } else { zero });
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_select_copies_rows_of_a_transposed_input() {
        let data: Vec<i32> = (0..6).collect();
        let l = Layout::contiguous(&[2, 3]).transpose(0, 1); // [[0, 3], [1, 4], [2, 5]]
        let idx = [2i64, 0];
        let got = index_select(&data, &l, &idx, &Layout::contiguous(&[2]), 0).unwrap();
        assert_eq!(got, vec![2, 5, 0, 3]);
        let got = index_select(&data, &l, &[1], &Layout::contiguous(&[1]), 1).unwrap();
        assert_eq!(got, vec![3, 4, 5]);
        let err = index_select(&data, &l, &[0, -1], &Layout::contiguous(&[2]), 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "index_select: index -1 at [1] is out of bounds for axis 1 of size 2"
        );
    }

    #[test]
    fn scatter_add_is_the_same_for_any_task_split() {
        let n = 3 * CHUNK + 5;
        let dst = vec![0.0f32; 4];
        let idx: Vec<i64> = (0..n as i64).map(|i| i % 4).collect();
        let src: Vec<f32> = (0..n).map(|i| 1.0 / (1.0 + i as f32)).collect();
        let got = scatter(
            (&dst, &Layout::contiguous(&[4])),
            (&idx, &Layout::contiguous(&[n])),
            (&src, &Layout::contiguous(&[n])),
            0,
            "scatter_add",
            |a, b| a + b,
        )
        .unwrap();
        let mut want = [0.0f32; 4];
        for i in 0..n {
            want[i % 4] += src[i];
        }
        assert_eq!(got, want);
    }

    #[test]
    fn concat_handles_empty_parts() {
        let a = [1, 2, 3, 4];
        let b: [i32; 0] = [];
        let c = [5, 6];
        let (la, lb, lc) = (
            Layout::contiguous(&[2, 2]),
            Layout::contiguous(&[2, 0]),
            Layout::contiguous(&[2, 1]),
        );
        let got = concat(&[(&a[..], &la), (&b[..], &lb), (&c[..], &lc)], 1);
        assert_eq!(got, vec![1, 2, 5, 3, 4, 6]);
    }
}
