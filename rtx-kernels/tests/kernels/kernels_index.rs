//! The native side of the indexing, joining and argmax kernels against plain reference loops:
//! gather and scatter through strided and broadcast layouts, scatter-add's summation order,
//! the sorting scatter-add of a shared index vector (its counting sort and its sums), and
//! concatenation into slots (64- and 32-bit index arithmetic), triangular masks, and
//! first-extreme argmax/argmin with ties and NaNs, in several element types and launch shapes.

use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
use rtx_kernels::kernels::{
    ScatterSortPlan, arg_reduce_axis, concat_into, concat_rows_into, gather_strided,
    scatter_add_lines, scatter_add_sorted, scatter_lines, scatter_sort_count, scatter_sort_place,
    scatter_sort_scan, triangle,
};
use rtx_kernels::{Element, bf16, f16};

/// Deterministic integers in `0..m`.
fn ints(n: usize, seed: u64, m: u64) -> Vec<u64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % m
        })
        .collect()
}

/// A strided view for the kernels and the reference: sizes, strides and offset in elements.
#[derive(Clone)]
struct View {
    dims: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

impl View {
    fn dense(dims: &[usize]) -> View {
        let mut strides = vec![1; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        View {
            dims: dims.to_vec(),
            strides,
            offset: 0,
        }
    }

    fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The storage offset of the logical position `flat`.
    fn at(&self, mut flat: usize) -> usize {
        let mut o = self.offset;
        for d in (0..self.dims.len()).rev() {
            o += (flat % self.dims[d]) * self.strides[d];
            flat /= self.dims[d];
        }
        o
    }

    /// The coordinates of the logical position `flat`.
    fn coords(&self, mut flat: usize) -> Vec<usize> {
        let mut c = vec![0; self.dims.len()];
        for d in (0..self.dims.len()).rev() {
            c[d] = flat % self.dims[d];
            flat /= self.dims[d];
        }
        c
    }

    fn kernel(&self) -> (KernelShape, KernelStrides) {
        let st: Vec<isize> = self.strides.iter().map(|&s| s as isize).collect();
        (
            KernelShape::new(&self.dims).unwrap(),
            KernelStrides::new(self.offset, &st).unwrap(),
        )
    }
}

/// `x` (dims [3, 4, 5]) transposed to [5, 4, 3] with an offset: a view no kernel can read
/// as dense.
fn transposed_input() -> View {
    View {
        dims: vec![5, 4, 3],
        strides: vec![1, 5, 20],
        offset: 2,
    }
}

fn gather_case<E: Element>(conv: impl Fn(u64) -> E) {
    let x_view = transposed_input();
    let storage: Vec<E> = (0..62u64).map(|v| conv(v * 7 % 61)).collect();
    let axis = 1;
    // The index is smaller than x off the axis ([4, 6, 2] vs [5, 4, 3]) and broadcast along
    // the last dim (stride 0).
    let idx_view = View {
        dims: vec![4, 6, 2],
        strides: vec![6, 1, 0],
        offset: 1,
    };
    let idx: Vec<i64> = ints(30, 3, 4).into_iter().map(|v| v as i64).collect();
    let n = idx_view.numel();
    let mut want = Vec::with_capacity(n);
    for p in 0..n {
        let mut c = idx_view.coords(p);
        c[axis] = idx[idx_view.at(p)] as usize;
        let o: usize = x_view.offset
            + c.iter()
                .zip(&x_view.strides)
                .map(|(c, s)| c * s)
                .sum::<usize>();
        want.push(storage[o]);
    }
    let (_, xs) = x_view.kernel();
    let (ishape, is) = idx_view.kernel();
    for grid in [LaunchConfig::new(1, 32), LaunchConfig::new(3, 64)] {
        let mut out = vec![E::default(); n];
        gather_strided(grid, &storage, xs, &idx, is, &mut out, ishape, axis, n).unwrap();
        assert_eq!(out, want, "{:?}", E::DTYPE);
    }
}

#[test]
fn gather_reads_strided_and_broadcast_operands() {
    gather_case(|v| v as f32 - 20.0);
    gather_case(|v| f16::from_f64(v as f64 * 0.5));
    gather_case(|v| v as i64 - 30);
    gather_case(|v| v as u8);
    gather_case(|v| v % 3 == 0);
}

/// Scatter `src` (view) into a dense copy of `dst` (dims) along `axis` at `idx` (view),
/// combining in logical order of the index.
fn scatter_ref<E: Copy>(
    dst: &[E],
    dims: &[usize],
    (idx, iv): (&[i64], &View),
    (src, sv): (&[E], &View),
    axis: usize,
    combine: impl Fn(E, E) -> E,
) -> Vec<E> {
    let out_view = View::dense(dims);
    let mut out = dst.to_vec();
    for p in 0..iv.numel() {
        let mut c = iv.coords(p);
        let s = sv.offset + c.iter().zip(&sv.strides).map(|(c, s)| c * s).sum::<usize>();
        c[axis] = idx[iv.at(p)] as usize;
        let o: usize = c.iter().zip(&out_view.strides).map(|(c, s)| c * s).sum();
        out[o] = combine(out[o], src[s]);
    }
    out
}

fn scatter_case<E: Element>(conv: impl Fn(u64) -> E) {
    let dims = [4usize, 5, 3];
    let axis = 1;
    let dst: Vec<E> = (0..60u64).map(|v| conv(v % 11)).collect();
    // An index with repeats along the axis, smaller than the output off the axis ([3, 7, 2]
    // against [4, _, 3]), read through a transposing view.
    let iv = View {
        dims: vec![3, 7, 2],
        strides: vec![1, 6, 3],
        offset: 0,
    };
    let idx: Vec<i64> = ints(42, 9, 5).into_iter().map(|v| v as i64).collect();
    // The source is larger than the index and strided.
    let sv = View {
        dims: vec![3, 8, 2],
        strides: vec![40, 5, 2],
        offset: 1,
    };
    let src: Vec<E> = (0..130u64).map(|v| conv(v * 13 % 17)).collect();
    let want = scatter_ref(&dst, &dims, (&idx, &iv), (&src, &sv), axis, |_, s| s);
    let (_, os) = View::dense(&dims).kernel();
    let (ishape, is) = iv.kernel();
    let (_, ss) = sv.kernel();
    let lines = iv.numel() / iv.dims[axis];
    for grid in [LaunchConfig::new(1, 32), LaunchConfig::new(2, 4)] {
        let mut out = dst.clone();
        scatter_lines(grid, &mut out, os, &idx, is, &src, ss, ishape, axis, lines).unwrap();
        assert_eq!(out, want, "{:?}", E::DTYPE);
    }
}

#[test]
fn scatter_keeps_the_last_write_and_scatter_add_sums_in_order() {
    scatter_case(|v| v as f32 * 0.25);
    scatter_case(|v| v as i32 - 5);
    scatter_case(|v| v & 1 == 1);
    // Sums of float values with different exponents: any other order would round differently.
    let vals = |v: u64| 1.0f32 / (1.0 + v as f32) + (v as f32) * 1e3;
    scatter_add_case(vals, |a, b| a + b);
    scatter_add_case(
        |v| v as i64 * 1_000_000_007 - 3,
        |a: i64, b| a.wrapping_add(b),
    );
    scatter_add_case(|v| (v * 37) as u8, |a: u8, b| a.wrapping_add(b));
    scatter_add_case(|v| bf16::from_f64(v as f64 / 3.0), |a, b| a + b);
}

fn scatter_add_case<E: rtx_kernels::Num>(conv: impl Fn(u64) -> E, add: fn(E, E) -> E) {
    let dims = [4usize, 5, 3];
    let axis = 1;
    let dst: Vec<E> = (0..60u64).map(|v| conv(v % 11)).collect();
    let iv = View {
        dims: vec![3, 7, 2],
        strides: vec![1, 6, 3],
        offset: 0,
    };
    let idx: Vec<i64> = ints(42, 9, 5).into_iter().map(|v| v as i64).collect();
    let sv = View {
        dims: vec![3, 8, 2],
        strides: vec![40, 5, 2],
        offset: 1,
    };
    let src: Vec<E> = (0..130u64).map(|v| conv(v * 13 % 17)).collect();
    let want = scatter_ref(&dst, &dims, (&idx, &iv), (&src, &sv), axis, add);
    let (_, os) = View::dense(&dims).kernel();
    let (ishape, is) = iv.kernel();
    let (_, ss) = sv.kernel();
    let lines = iv.numel() / iv.dims[axis];
    // Any split of the rows into parts sums each element in the same order.
    for (grid, parts) in [(LaunchConfig::new(1, 32), 1), (LaunchConfig::new(2, 4), 3)] {
        let mut out = dst.clone();
        let size = dims[axis];
        scatter_add_lines(
            grid, &mut out, os, &idx, is, &src, ss, ishape, axis, lines, size, parts,
        )
        .unwrap();
        assert_eq!(out, want, "{:?} in {parts} parts", E::DTYPE);
    }
    // An index outside the axis (only possible under capture) is skipped.
    let mut bad = idx.clone();
    bad[0] = 99;
    let mut out = dst.clone();
    scatter_add_lines(
        LaunchConfig::new(1, 32),
        &mut out,
        os,
        &bad,
        is,
        &src,
        ss,
        ishape,
        axis,
        lines,
        5,
        2,
    )
    .unwrap();
    assert_ne!(
        out,
        want,
        "{:?}: the bad index's term is left out",
        E::DTYPE
    );
}

/// The four launches of the sorting scatter-add, natively: `out` (dense, sizes `dims`) plus,
/// along `axis`, `src` (view `sv`) at the shared index vector `idx[istart + k * istep]`
/// (`ishape` the index's sizes), with the given plan, block size and rows per block.
#[allow(clippy::too_many_arguments)]
fn sorted_scatter_add<E: rtx_kernels::Num>(
    out: &mut [E],
    dims: &[usize],
    (idx, istart, istep): (&[i64], usize, usize),
    (src, sv): (&[E], &View),
    ishape: &[usize],
    axis: usize,
    plan: ScatterSortPlan,
    (block, rows): (u32, usize),
) {
    let (len, size, parts, chunk) = (plan.len, plan.size, plan.parts, plan.chunk);
    let mut counts = vec![0u32; plan.counters()];
    let mut order = vec![u32::MAX; len];
    let grid = |blocks: usize| LaunchConfig::new(blocks as u32, block);
    let (ix, sh) = ((idx, istart, istep), plan.shift);
    scatter_sort_count::<E>(
        grid(parts),
        ix.0,
        ix.1,
        ix.2,
        len,
        size,
        chunk,
        parts,
        sh,
        &mut counts,
    )
    .unwrap();
    scatter_sort_scan::<E>(grid(plan.groups), &mut counts, size * parts, sh).unwrap();
    scatter_sort_place::<E>(
        grid(parts),
        ix.0,
        ix.1,
        ix.2,
        len,
        size,
        chunk,
        parts,
        &mut counts,
        &mut order,
    )
    .unwrap();
    let lines = ishape.iter().product::<usize>() / len;
    let (_, os) = View::dense(dims).kernel();
    let (_, ss) = sv.kernel();
    let shape = KernelShape::new(ishape).unwrap();
    let config = LaunchConfig::new((size.div_ceil(rows) as u32, 2), block);
    scatter_add_sorted(
        config, out, os, src, ss, shape, axis, lines, size, parts, &counts, &order, rows,
    )
    .unwrap();
}

/// A plan with chosen chunks (the kernels take any split the plan's invariants allow).
fn plan_with(len: usize, size: usize, chunk: usize, shift: u32) -> ScatterSortPlan {
    let parts = len.div_ceil(chunk);
    ScatterSortPlan {
        len,
        size,
        parts,
        chunk,
        groups: (size * parts).div_ceil(1 << shift),
        shift,
    }
}

fn sorted_scatter_add_case<E: rtx_kernels::Num>(conv: impl Fn(u64) -> E, add: fn(E, E) -> E) {
    // Output [4, 5, 3] along axis 1; the index vector (75 entries, heavy repeats, read at an
    // offset with stride 2) is broadcast over an index shape smaller than the output off the
    // axis, [3, 75, 2]; the source is a larger strided view.
    let dims = [4usize, 5, 3];
    let axis = 1;
    let len = 75;
    let dst: Vec<E> = (0..60u64).map(|v| conv(v % 11)).collect();
    let storage: Vec<i64> = ints(2 * len + 1, 17, 5)
        .into_iter()
        .map(|v| v as i64)
        .collect();
    let iv = View {
        dims: vec![3, len, 2],
        strides: vec![0, 2, 0],
        offset: 1,
    };
    let sv = View {
        dims: vec![3, 77, 2],
        strides: vec![1, 6, 3],
        offset: 2,
    };
    let src: Vec<E> = (0..470u64).map(|v| conv(v * 13 % 17)).collect();
    let run = |idx: &[i64], plan: ScatterSortPlan, launch: (u32, usize)| {
        let mut out = dst.clone();
        let ishape = &iv.dims;
        sorted_scatter_add(
            &mut out,
            &dims,
            (idx, 1, 2),
            (&src, &sv),
            ishape,
            axis,
            plan,
            launch,
        );
        out
    };
    let want = scatter_ref(&dst, &dims, (&storage, &iv), (&src, &sv), axis, add);
    let planned = ScatterSortPlan::new(len, 5).unwrap();
    assert_eq!(planned.parts, 1);
    for (plan, launch) in [
        (planned, (32, 1)),
        (planned, (64, 2)),
        // Chunks of 8 entries, tiles of 32 threads; segments of 4 counters.
        (plan_with(len, 5, 8, 2), (32, 3)),
        (plan_with(len, 5, 20, 3), (32, 5)),
    ] {
        let got = run(&storage, plan, launch);
        assert_eq!(got, want, "{:?} {plan:?} {launch:?}", E::DTYPE);
    }

    // One row takes every entry: 75 terms in one bucket (4 batches of 16, then a tail).
    let same = vec![3i64; storage.len()];
    let want = scatter_ref(&dst, &dims, (&same, &iv), (&src, &sv), axis, add);
    for plan in [planned, plan_with(len, 5, 8, 2)] {
        assert_eq!(run(&same, plan, (32, 2)), want, "{:?} one row", E::DTYPE);
    }

    // Out-of-range entries (only possible under capture) are left out, nothing else changes.
    let mut bad = storage.clone();
    let (b1, b2) = (1 + 2 * 3, 1 + 2 * 40);
    bad[b1] = 5;
    bad[b2] = -1;
    let skip: Vec<usize> = (0..iv.numel())
        .filter(|&p| {
            let at = iv.at(p);
            at == b1 || at == b2
        })
        .collect();
    let mut want = dst.clone();
    let out_view = View::dense(&dims);
    for p in (0..iv.numel()).filter(|p| !skip.contains(p)) {
        let mut c = iv.coords(p);
        let s = sv.offset + c.iter().zip(&sv.strides).map(|(c, s)| c * s).sum::<usize>();
        c[axis] = bad[iv.at(p)] as usize;
        let o: usize = c.iter().zip(&out_view.strides).map(|(c, s)| c * s).sum();
        want[o] = add(want[o], src[s]);
    }
    for plan in [planned, plan_with(len, 5, 8, 2)] {
        assert_eq!(run(&bad, plan, (32, 1)), want, "{:?} bad", E::DTYPE);
    }
}

#[test]
fn sorted_scatter_add_sums_each_element_in_index_order() {
    // Terms of different magnitudes: any other order would round differently.
    let vals = |v: u64| 1.0f32 / (1.0 + v as f32) + (v as f32) * 1e3;
    sorted_scatter_add_case(vals, |a, b| a + b);
    sorted_scatter_add_case(|v| bf16::from_f64(v as f64 / 3.0), |a, b| a + b);
    sorted_scatter_add_case(|v| f16::from_f64(v as f64 * 1.7), |a, b| a + b);
    sorted_scatter_add_case(|v| v as f64 / 7.0, |a, b| a + b);
    sorted_scatter_add_case(
        |v| v as i64 * 1_000_000_007 - 3,
        |a: i64, b| a.wrapping_add(b),
    );
    sorted_scatter_add_case(|v| (v * 37) as u8, |a: u8, b| a.wrapping_add(b));
}

#[test]
fn counting_sort_orders_each_rows_entries_by_position() {
    // 700 entries into 13 rows, one row much more frequent, in chunks that do not divide the
    // length, tiles of 64 threads, and 4 scan segments of 32 counters (2 blocks striding
    // over them); then the plan's own split, also with 256-thread tiles.
    let (len, size) = (700usize, 13usize);
    let idx: Vec<i64> = ints(len, 5, 20)
        .into_iter()
        .map(|v| if v >= size as u64 { 4 } else { v as i64 })
        .collect();
    for (plan, block) in [
        (plan_with(len, size, 96, 5), 64),
        (plan_with(len, size, 700, 7), 64),
        (ScatterSortPlan::new(len, size).unwrap(), 64),
        (ScatterSortPlan::new(len, size).unwrap(), 256),
    ] {
        let (parts, chunk) = (plan.parts, plan.chunk);
        let mut counts = vec![0u32; plan.counters()];
        let mut order = vec![u32::MAX; len];
        let grid = LaunchConfig::new(parts as u32, block);
        scatter_sort_count::<f32>(
            grid,
            &idx,
            0,
            1,
            len,
            size,
            chunk,
            parts,
            plan.shift,
            &mut counts,
        )
        .unwrap();
        let config = LaunchConfig::new(2, block);
        scatter_sort_scan::<f32>(config, &mut counts, size * parts, plan.shift).unwrap();
        scatter_sort_place::<f32>(
            grid,
            &idx,
            0,
            1,
            len,
            size,
            chunk,
            parts,
            &mut counts,
            &mut order,
        )
        .unwrap();
        let mut want: Vec<u32> = (0..len as u32).collect();
        want.sort_by_key(|&k| idx[k as usize]);
        assert_eq!(order, want, "{plan:?} block {block}");
        let mut end = 0;
        for r in 0..size {
            end += idx.iter().filter(|&&x| x == r as i64).count() as u32;
            assert_eq!(counts[r * parts + parts - 1], end, "row {r} ends, {plan:?}");
        }
    }
}

#[test]
fn sorting_plans_bound_their_counters() {
    for (len, size) in [
        (1, 1),
        (8192, 8192),
        (8192, 256),
        (255, 3),
        (100_000, 50_000),
    ] {
        let p = ScatterSortPlan::new(len, size).unwrap();
        assert!(p.chunk.is_multiple_of(ScatterSortPlan::BLOCK), "{p:?}");
        assert!(
            p.parts * p.chunk >= len && (p.parts - 1) * p.chunk < len,
            "{p:?}"
        );
        assert!(
            p.groups <= 1024 && p.groups << p.shift >= size * p.parts,
            "{p:?}"
        );
        assert!(size * p.parts <= (1 << 22).max(size), "{p:?}");
    }
    assert!(ScatterSortPlan::new(1 << 20, 1 << 31).is_none());
    assert!(ScatterSortPlan::new(5, 0).is_none());
}

#[test]
fn concat_writes_each_part_into_its_slot() {
    // Three parts along axis 1 of [2, _, 3]: dense, transposed, and empty.
    let a: Vec<i32> = (0..12).collect(); // [2, 2, 3]
    let b: Vec<i32> = (100..118).collect(); // stored [3, 3, 2] and viewed as [2, 3, 3]
    let parts = [
        (a.clone(), View::dense(&[2, 2, 3])),
        (
            b.clone(),
            View {
                dims: vec![2, 3, 3],
                strides: vec![1, 2, 6],
                offset: 0,
            },
        ),
        (vec![], View::dense(&[2, 0, 3])),
    ];
    let total = 5;
    let mut want = vec![0i32; 2 * total * 3];
    let mut start = 0;
    for (data, v) in &parts {
        for p in 0..v.numel() {
            let c = v.coords(p);
            want[(c[0] * total + start + c[1]) * 3 + c[2]] = data[v.at(p)];
        }
        start += v.dims[1];
    }
    let mut out = vec![-1i32; 2 * total * 3];
    let mut start = 0;
    for (data, v) in &parts {
        let (shape, ps) = v.kernel();
        concat_into(
            LaunchConfig::new(2, 32),
            data,
            ps,
            &mut out,
            shape,
            1,
            start,
            total,
            v.numel(),
        )
        .unwrap();
        start += v.dims[1];
    }
    assert_eq!(out, want);
}

/// Joins `parts` along `axis` with both concatenation kernels, in several launch shapes,
/// and checks each against a reference loop.
fn concat_both_ways(parts: &[(Vec<i32>, View)], axis: usize) {
    let total: usize = parts.iter().map(|(_, v)| v.dims[axis]).sum();
    let mut dims = parts[0].1.dims.clone();
    dims[axis] = total;
    let out_view = View::dense(&dims);
    let mut want = vec![-1i32; out_view.numel()];
    let mut start = 0;
    for (data, v) in parts {
        for p in 0..v.numel() {
            let mut c = v.coords(p);
            c[axis] += start;
            let o: usize = c.iter().zip(&out_view.strides).map(|(c, s)| c * s).sum();
            want[o] = data[v.at(p)];
        }
        start += v.dims[axis];
    }
    for grid in [
        LaunchConfig::new(1, 32),
        LaunchConfig::new(3, 64),
        LaunchConfig::new(2, 256),
    ] {
        for rows in [false, true] {
            let mut out = vec![-1i32; want.len()];
            let mut start = 0;
            for (data, v) in parts {
                let (shape, ps) = v.kernel();
                let n = v.numel();
                let run = if rows { concat_rows_into } else { concat_into };
                run(grid, data, ps, &mut out, shape, axis, start, total, n).unwrap();
                start += v.dims[axis];
            }
            assert_eq!(out, want, "dims {dims:?} axis {axis} rows {rows} {grid:?}");
        }
    }
}

#[test]
fn concat_rows_into_matches_the_general_kernel() {
    let data = |n: i32| (0..n).map(|v| v * 3 + 1).collect::<Vec<i32>>();
    // A long innermost axis (warp segments of 96 elements), with a transposed and an empty
    // part, joined along the middle axis.
    concat_both_ways(
        &[
            (data(280), View::dense(&[2, 2, 70])),
            (
                data(420),
                View {
                    dims: vec![2, 3, 70],
                    strides: vec![1, 2, 6],
                    offset: 0,
                },
            ),
            (vec![], View::dense(&[2, 0, 70])),
        ],
        1,
    );
    // Joined along the innermost axis: segments of 256 + 44 (300), 64 (40), and one element
    // per thread (5).
    concat_both_ways(
        &[
            (data(3 * 4 * 300), View::dense(&[3, 4, 300])),
            (
                data(3 * 4 * 40 + 2),
                View {
                    dims: vec![3, 4, 40],
                    strides: vec![1, 3, 12],
                    offset: 2,
                },
            ),
            (data(60), View::dense(&[3, 4, 5])),
        ],
        2,
    );
    // A short innermost axis along the outer one, and rank 1.
    let small = View {
        dims: vec![2, 3, 2],
        strides: vec![1, 4, 2],
        offset: 1,
    };
    concat_both_ways(&[(data(13), small), (data(6), View::dense(&[1, 3, 2]))], 0);
    concat_both_ways(
        &[
            (data(100), View::dense(&[100])),
            (data(7), View::dense(&[7])),
        ],
        0,
    );
}

#[test]
fn triangle_keeps_the_diagonal_band_of_every_matrix() {
    // A batch of two 3 x 4 matrices, read transposed from [2, 4, 3] storage.
    let v = View {
        dims: vec![2, 3, 4],
        strides: vec![12, 1, 3],
        offset: 0,
    };
    let x: Vec<f64> = (0..24).map(|i| i as f64 + 0.5).collect();
    let (shape, xs) = v.kernel();
    for k in -3..=4i64 {
        for upper in [0u32, 1] {
            let mut out = vec![f64::NAN; 24];
            triangle(
                LaunchConfig::new(1, 64),
                &x,
                xs,
                &mut out,
                shape,
                k,
                upper,
                24,
            )
            .unwrap();
            for p in 0..24 {
                let c = v.coords(p);
                let diff = c[2] as i64 - c[1] as i64;
                let keep = if upper == 1 { diff >= k } else { diff <= k };
                let want = if keep { x[v.at(p)] } else { 0.0 };
                assert_eq!(
                    out[p].to_bits(),
                    want.to_bits(),
                    "k {k} upper {upper} at {p}"
                );
            }
        }
    }
    let mask = vec![true; 6];
    let (shape, xs) = View::dense(&[2, 3]).kernel();
    let mut out = vec![true; 6];
    triangle(
        LaunchConfig::new(1, 32),
        &mask,
        xs,
        &mut out,
        shape,
        1,
        1,
        6,
    )
    .unwrap();
    assert_eq!(out, vec![false, true, true, false, false, true]);
}

/// The first extreme of a lane, NaN counting as the extreme both ways.
fn arg_ref(lane: &[f64], max: bool) -> i64 {
    let mut best = 0;
    for (k, &v) in lane.iter().enumerate() {
        let b = lane[best];
        if b.is_nan() {
            break;
        }
        if v.is_nan() || (max && v > b) || (!max && v < b) {
            best = k;
        }
    }
    best as i64
}

fn arg_case<E: rtx_kernels::Num>(conv: impl Fn(u64) -> E, with_nan: bool) {
    for (outer, len, inner) in [
        (3, 70, 2),
        (1, 1000, 1),
        (1, 5000, 1),
        (4, 5, 3),
        (2, 33, 1),
    ] {
        // Few distinct values: many ties.
        let raw = ints(outer * len * inner, (outer * len) as u64, 6);
        let mut x: Vec<E> = raw.iter().map(|&v| conv(v)).collect();
        if with_nan {
            x[len / 2 * inner] = E::from_f64(f64::NAN);
            let last = x.len() - 1;
            x[last] = E::from_f64(f64::NAN);
        }
        for max in [0u32, 1] {
            let mut want = Vec::new();
            for o in 0..outer {
                for i in 0..inner {
                    let lane: Vec<f64> = (0..len)
                        .map(|k| x[(o * len + k) * inner + i].to_f64())
                        .collect();
                    want.push(arg_ref(&lane, max == 1));
                }
            }
            for block in [32, 64, 256, 1024] {
                let mut out = vec![-7i64; outer * inner];
                let grid = LaunchConfig::new(2, block);
                arg_reduce_axis(grid, &x, &mut out, outer, len, inner, max).unwrap();
                assert_eq!(
                    out,
                    want,
                    "{:?} [{outer}, {len}, {inner}] max {max} block {block}",
                    E::DTYPE
                );
            }
        }
    }
}

#[test]
fn argmax_and_argmin_find_the_first_extreme() {
    arg_case(|v| v as f32 - 2.0, false);
    arg_case(|v| v as f32 - 2.0, true);
    arg_case(|v| f16::from_f64(v as f64), true);
    arg_case(|v| v as f64 * -1.5, true);
    arg_case(|v| v as i32 - 3, false);
    arg_case(|v| v as i64 * 1_000_000_000_000, false);
    arg_case(|v| v as u8 * 40, false);
}
