//! The native side of the indexing, joining and argmax kernels against plain reference loops:
//! gather and scatter through strided and broadcast layouts, scatter-add's summation order,
//! concatenation into slots, triangular masks, and first-extreme argmax/argmin with ties and
//! NaNs, in several element types and launch shapes.

use rtx_kernels::kernel::{KernelShape, KernelStrides, LaunchConfig};
use rtx_kernels::kernels::{
    arg_reduce_axis, concat_into, gather_strided, scatter_add_lines, scatter_lines, triangle,
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
    for (outer, len, inner) in [(3, 70, 2), (1, 1000, 1), (4, 5, 3), (2, 33, 1)] {
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
            for block in [32, 64, 256] {
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
