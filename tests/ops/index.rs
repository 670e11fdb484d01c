//! Property tests of the indexing and joining ops (index_select, gather, scatter, scatter_add,
//! index_add, concat, cat, stack, split, chunk, split2, tril, triu) against naive references,
//! over random rank-3 shapes, every axis, strided inputs (permuted, narrowed, broadcast) and
//! every element type the op allows; plus exact error messages.
//!
//! Data movement is exact, so results are compared for equality. scatter_add promises a
//! fixed accumulation order (logical order of the index), so its reference sums in that order
//! in the element type itself and the comparison is bitwise too.

use proptest::prelude::*;
use rtx::prelude::*;

type S3 = (usize, usize, usize);

/// A rank-3 input of logical sizes `dims` whose layout depends on `kind`: dense, permuted,
/// narrowed inside a larger buffer, or broadcast from a size-1 leading axis (stride 0).
fn input<E: Element>(dims: [usize; 3], kind: u8, vals: &[f64]) -> Tensor<S3, E> {
    let [a, b, c] = dims;
    let v = |n: usize| -> Vec<E> { (0..n).map(|i| E::from_f64(vals[i % vals.len()])).collect() };
    let dev = Device::Cpu;
    match kind % 4 {
        0 => Tensor::from_vec(v(a * b * c), (a, b, c), dev),
        1 => Tensor::from_vec(v(a * b * c), (c, b, a), dev).permute::<Axes3<2, 1, 0>>(),
        2 => Tensor::from_vec(v(a * (b + 2) * (c + 1)), (a, b + 2, c + 1), dev)
            .slice::<1>(1..1 + b)
            .slice::<2>(1..1 + c),
        _ => Tensor::from_vec(v(b * c), (1, b, c), dev).broadcast_to((a, b, c)),
    }
}

fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut m = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        m[i] = flat % dims[i];
        flat /= dims[i];
    }
    m
}

fn ravel(m: &[usize], dims: &[usize]) -> usize {
    m.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// Runs `$body` with the const axis `$i` bound to the run-time value `$axis` (0, 1 or 2).
macro_rules! with_axis {
    ($axis:expr, $i:ident => $body:expr) => {
        match $axis {
            0 => {
                const $i: usize = 0;
                $body
            }
            1 => {
                const $i: usize = 1;
                $body
            }
            _ => {
                const $i: usize = 2;
                $body
            }
        }
    };
}

/// Runs a generic check once per listed element type.
macro_rules! for_types {
    ($f:ident $args:tt; $($t:ty),*) => {
        $($f::<$t> $args;)*
    };
}

macro_rules! all_types {
    ($f:ident $args:tt) => {
        for_types!($f $args; f32, f64, f16, bf16, i32, i64, u8, bool)
    };
}

macro_rules! num_types {
    ($f:ident $args:tt) => {
        for_types!($f $args; f32, f64, f16, bf16, i32, i64, u8)
    };
}

fn index_select_case<E: Element>(
    dims: [usize; 3],
    kind: u8,
    vals: &[f64],
    axis: usize,
    raw: &[usize],
) {
    let x = input::<E>(dims, kind, vals);
    let n = dims[axis];
    let idx_vals: Vec<i64> = raw.iter().map(|&r| (r % n) as i64).collect();
    // A strided index vector too: every other element of a longer one.
    let doubled: Vec<i64> = idx_vals.iter().flat_map(|&k| [k, -7]).collect();
    let idx = Tensor::from_vec(doubled, (raw.len(), 2usize), Device::Cpu);
    let idx = idx.slice::<1>(0..1).squeeze::<1>();
    let idx: Tensor<(usize,), i64> = if kind.is_multiple_of(2) {
        Tensor::from_vec(idx_vals.clone(), (raw.len(),), Device::Cpu)
    } else {
        idx
    };
    let got = with_axis!(axis, I => x.index_select::<I, usize>(&idx).to_vec());
    let xv = x.to_vec();
    let mut od = dims;
    od[axis] = raw.len();
    let want: Vec<E> = (0..od.iter().product())
        .map(|p| {
            let mut m = unravel(p, &od);
            m[axis] = idx_vals[m[axis]] as usize;
            xv[ravel(&m, &dims)]
        })
        .collect();
    assert_eq!(
        got,
        want,
        "index_select {} axis {axis} dims {dims:?} kind {kind}",
        E::DTYPE
    );
}

fn gather_case<E: Element>(
    dims: [usize; 3],
    kind: u8,
    vals: &[f64],
    axis: usize,
    g: [usize; 3],
    raw: &[usize],
) {
    let x = input::<E>(dims, kind, vals);
    let mut gd = g;
    for k in 0..3 {
        if k != axis {
            gd[k] = gd[k].min(dims[k]);
        }
    }
    let idx_f: Vec<f64> = raw.iter().map(|&r| (r % dims[axis]) as f64).collect();
    let idx = input::<i64>(gd, kind / 4, &idx_f);
    let iv = idx.to_vec();
    let got = with_axis!(axis, I => x.gather::<I, _>(&idx).to_vec());
    let xv = x.to_vec();
    let want: Vec<E> = (0..iv.len())
        .map(|p| {
            let mut m = unravel(p, &gd);
            m[axis] = iv[p] as usize;
            xv[ravel(&m, &dims)]
        })
        .collect();
    assert_eq!(
        got,
        want,
        "gather {} axis {axis} dims {dims:?} index {gd:?}",
        E::DTYPE
    );
}

/// The scatter reference: a copy of `x` with `combine(old, src)` at each index position, in
/// logical order of the index.
fn scatter_reference<E: Element>(
    (xv, dims): (&[E], [usize; 3]),
    (iv, gd): (&[i64], [usize; 3]),
    (sv, sd): (&[E], [usize; 3]),
    axis: usize,
    combine: impl Fn(E, E) -> E,
) -> Vec<E> {
    let mut out = xv.to_vec();
    for (p, &k) in iv.iter().enumerate() {
        let m = unravel(p, &gd);
        let mut t = m.clone();
        t[axis] = k as usize;
        let o = ravel(&t, &dims);
        out[o] = combine(out[o], sv[ravel(&m, &sd)]);
    }
    out
}

/// Shapes for a scatter case: the index fits inside the input off `axis` and inside the
/// source everywhere (which is up to one larger per axis).
fn scatter_shapes(
    dims: [usize; 3],
    axis: usize,
    g: [usize; 3],
    extra: [usize; 3],
) -> ([usize; 3], [usize; 3]) {
    let mut gd = g;
    for k in 0..3 {
        if k != axis {
            gd[k] = gd[k].min(dims[k]);
        }
    }
    let sd = [gd[0] + extra[0], gd[1] + extra[1], gd[2] + extra[2]];
    (gd, sd)
}

#[allow(clippy::too_many_arguments)]
fn scatter_case<E: Element>(
    dims: [usize; 3],
    kind: u8,
    vals: &[f64],
    axis: usize,
    g: [usize; 3],
    extra: [usize; 3],
    raw: &[usize],
) {
    let (gd, sd) = scatter_shapes(dims, axis, g, extra);
    let x = input::<E>(dims, kind, vals);
    let idx_f: Vec<f64> = raw.iter().map(|&r| (r % dims[axis]) as f64).collect();
    let idx = input::<i64>(gd, kind / 4, &idx_f);
    let src = input::<E>(sd, kind / 2, &vals[7..]);
    let got = with_axis!(axis, I => x.scatter::<I>(&idx, &src).to_vec());
    let want = scatter_reference(
        (&x.to_vec(), dims),
        (&idx.to_vec(), gd),
        (&src.to_vec(), sd),
        axis,
        |_, s| s,
    );
    assert_eq!(
        got,
        want,
        "scatter {} axis {axis} dims {dims:?} index {gd:?}",
        E::DTYPE
    );
}

#[allow(clippy::too_many_arguments)]
fn scatter_add_case<E: Num>(
    dims: [usize; 3],
    kind: u8,
    vals: &[f64],
    axis: usize,
    g: [usize; 3],
    extra: [usize; 3],
    raw: &[usize],
) {
    let (gd, sd) = scatter_shapes(dims, axis, g, extra);
    let x = input::<E>(dims, kind, vals);
    let idx_f: Vec<f64> = raw.iter().map(|&r| (r % dims[axis]) as f64).collect();
    let idx = input::<i64>(gd, kind / 4, &idx_f);
    let src = input::<E>(sd, kind / 2, &vals[3..]);
    let got = with_axis!(axis, I => x.scatter_add::<I>(&idx, &src).to_vec());
    let want = scatter_reference(
        (&x.to_vec(), dims),
        (&idx.to_vec(), gd),
        (&src.to_vec(), sd),
        axis,
        Num::add,
    );
    assert_eq!(
        got,
        want,
        "scatter_add {} axis {axis} dims {dims:?} index {gd:?}",
        E::DTYPE
    );
}

fn index_add_case<E: Num>(dims: [usize; 3], kind: u8, vals: &[f64], axis: usize, raw: &[usize]) {
    let x = input::<E>(dims, kind, vals);
    let idx_vals: Vec<i64> = raw.iter().map(|&r| (r % dims[axis]) as i64).collect();
    let idx = Tensor::from_vec(idx_vals.clone(), (raw.len(),), Device::Cpu);
    let mut sd = dims;
    sd[axis] = raw.len();
    let src = input::<E>(sd, kind + 1, &vals[5..]);
    let got = with_axis!(axis, I => x.index_add::<I, usize>(&idx, &src).to_vec());
    let mut out = x.to_vec();
    let sv = src.to_vec();
    for (p, &s) in sv.iter().enumerate() {
        let mut m = unravel(p, &sd);
        m[axis] = idx_vals[m[axis]] as usize;
        let o = ravel(&m, &dims);
        out[o] = Num::add(out[o], s);
    }
    assert_eq!(got, out, "index_add {} axis {axis} dims {dims:?}", E::DTYPE);
}

fn concat_case<E: Element>(
    dims: [usize; 3],
    kind: u8,
    vals: &[f64],
    axis: usize,
    sizes: [usize; 3],
) {
    let parts: Vec<Tensor<S3, E>> = (0..3)
        .map(|k| {
            let mut d = dims;
            d[axis] = sizes[k];
            input::<E>(d, kind + k as u8, &vals[k..])
        })
        .collect();
    let pv: Vec<Vec<E>> = parts.iter().map(|p| p.to_vec()).collect();
    let reference = |n: usize| -> Vec<E> {
        let mut od = dims;
        od[axis] = sizes[..n].iter().sum();
        (0..od.iter().product())
            .map(|p| {
                let mut m = unravel(p, &od);
                let mut k = 0;
                while m[axis] >= sizes[k] {
                    m[axis] -= sizes[k];
                    k += 1;
                }
                let mut d = dims;
                d[axis] = sizes[k];
                pv[k][ravel(&m, &d)]
            })
            .collect()
    };
    let two = with_axis!(axis, I => parts[0].concat::<I, usize>(&parts[1]).to_vec());
    assert_eq!(two, reference(2), "concat {} axis {axis}", E::DTYPE);
    let refs: Vec<&Tensor<S3, E>> = parts.iter().collect();
    let all = with_axis!(axis, I => Tensor::cat::<I, usize>(&refs).to_vec());
    assert_eq!(all, reference(3), "cat {} axis {axis}", E::DTYPE);
}

fn stack_case<E: Element>(dims: [usize; 3], kind: u8, vals: &[f64], axis: usize) {
    let parts: Vec<Tensor<S3, E>> = (0..3)
        .map(|k| input::<E>(dims, kind + k, &vals[k as usize..]))
        .collect();
    let [a, b, c] = [&parts[0], &parts[1], &parts[2]];
    let got = match axis {
        0 => Tensor::stack::<0, 3>([a, b, c]).to_vec(),
        1 => Tensor::stack::<1, 3>([a, b, c]).to_vec(),
        2 => Tensor::stack::<2, 3>([a, b, c]).to_vec(),
        _ => Tensor::stack::<3, 3>([a, b, c]).to_vec(),
    };
    let pv: Vec<Vec<E>> = parts.iter().map(|p| p.to_vec()).collect();
    let mut od = dims.to_vec();
    od.insert(axis, 3);
    let want: Vec<E> = (0..od.iter().product())
        .map(|p| {
            let mut m = unravel(p, &od);
            let k = m.remove(axis);
            pv[k][ravel(&m, &dims)]
        })
        .collect();
    assert_eq!(got, want, "stack {} axis {axis}", E::DTYPE);
}

fn split_case<E: Element>(
    dims: [usize; 3],
    kind: u8,
    vals: &[f64],
    axis: usize,
    size: usize,
    chunks: usize,
) {
    let x = input::<E>(dims, kind, vals);
    let n = dims[axis];
    let (splits, chunked) = with_axis!(axis, I => (x.split::<I>(size), x.chunk::<I>(chunks)));
    let want_sizes: Vec<usize> = (0..n).step_by(size).map(|s| size.min(n - s)).collect();
    let per = n.div_ceil(chunks);
    let want_chunks: Vec<usize> = (0..n).step_by(per).map(|s| per.min(n - s)).collect();
    for (parts, want) in [(&splits, want_sizes), (&chunked, want_chunks)] {
        assert_eq!(
            parts.iter().map(|p| p.dims()[axis]).collect::<Vec<_>>(),
            want
        );
        assert!(parts.iter().all(|p| p.shares_storage_with(&x)));
        let refs: Vec<&Tensor<S3, E>> = parts.iter().collect();
        let back = with_axis!(axis, I => Tensor::cat::<I, usize>(&refs));
        assert_eq!(back.to_vec(), x.to_vec());
    }
}

fn triangle_case<E: Element>(dims: [usize; 3], kind: u8, vals: &[f64], k: i64) {
    let x = input::<E>(dims, kind, vals);
    let xv = x.to_vec();
    for upper in [false, true] {
        let got = if upper { x.triu(k) } else { x.tril(k) };
        let want: Vec<E> = xv
            .iter()
            .enumerate()
            .map(|(p, &v)| {
                let m = unravel(p, &dims);
                let d = m[2] as i64 - m[1] as i64;
                if (upper && d >= k) || (!upper && d <= k) {
                    v
                } else {
                    E::default()
                }
            })
            .collect();
        assert_eq!(
            got.to_vec(),
            want,
            "tri upper={upper} k={k} {} dims {dims:?}",
            E::DTYPE
        );
    }
}

fn vals() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec((-40i32..40).prop_map(|v| v as f64 / 2.0), 120)
}

fn dims3() -> impl Strategy<Value = [usize; 3]> {
    prop::array::uniform3(1usize..=4)
}

proptest! {
    #[test]
    fn index_select_matches_reference(
        dims in dims3(), kind in 0u8..8, vals in vals(), axis in 0usize..3,
        raw in prop::collection::vec(0usize..100, 0..6),
    ) {
        all_types!(index_select_case(dims, kind, &vals, axis, &raw));
    }

    #[test]
    fn gather_matches_reference(
        dims in dims3(), kind in 0u8..16, vals in vals(), axis in 0usize..3,
        g in prop::array::uniform3(1usize..=4), raw in prop::collection::vec(0usize..100, 64),
    ) {
        all_types!(gather_case(dims, kind, &vals, axis, g, &raw));
    }

    #[test]
    fn scatter_matches_reference(
        dims in dims3(), kind in 0u8..16, vals in vals(), axis in 0usize..3,
        g in prop::array::uniform3(1usize..=4), extra in prop::array::uniform3(0usize..=1),
        raw in prop::collection::vec(0usize..100, 64),
    ) {
        all_types!(scatter_case(dims, kind, &vals, axis, g, extra, &raw));
        num_types!(scatter_add_case(dims, kind, &vals, axis, g, extra, &raw));
    }

    #[test]
    fn index_add_matches_reference(
        dims in dims3(), kind in 0u8..8, vals in vals(), axis in 0usize..3,
        raw in prop::collection::vec(0usize..100, 0..6),
    ) {
        num_types!(index_add_case(dims, kind, &vals, axis, &raw));
    }

    #[test]
    fn concat_cat_and_stack_match_reference(
        dims in dims3(), kind in 0u8..8, vals in vals(), axis in 0usize..3,
        sizes in prop::array::uniform3(0usize..=3), stack_axis in 0usize..4,
    ) {
        all_types!(concat_case(dims, kind, &vals, axis, sizes));
        all_types!(stack_case(dims, kind, &vals, stack_axis));
    }

    #[test]
    fn split_and_chunk_cover_the_axis(
        dims in dims3(), kind in 0u8..8, vals in vals(), axis in 0usize..3,
        size in 1usize..=5, chunks in 1usize..=5,
    ) {
        for_types!(split_case(dims, kind, &vals, axis, size, chunks); f32, bf16, i64, bool);
    }

    #[test]
    fn tril_and_triu_match_reference(dims in dims3(), kind in 0u8..8, vals in vals(), k in -4i64..=4) {
        all_types!(triangle_case(dims, kind, &vals, k));
    }
}

#[test]
fn scatter_add_is_the_fixed_order_sum_across_many_tasks() {
    // 5000 lines of 8 along axis 0: several parallel tasks, each summing its lines in order.
    let (rows, cols, n) = (3usize, 5000usize, 8usize);
    let x: Tensor<(usize, usize)> = Tensor::zeros((rows, cols), Device::Cpu);
    let iv: Vec<i64> = (0..n * cols)
        .map(|p| ((p * 7 + p / 3) % rows) as i64)
        .collect();
    let sv: Vec<f32> = (0..n * cols)
        .map(|p| 1.0 / (1.0 + p as f32).sqrt())
        .collect();
    let idx = Tensor::from_vec(iv.clone(), (n, cols), Device::Cpu);
    let src = Tensor::from_vec(sv.clone(), (n, cols), Device::Cpu);
    let got = x.scatter_add::<0>(&idx, &src).to_vec();
    let mut want = vec![0.0f32; rows * cols];
    for p in 0..n * cols {
        let o = iv[p] as usize * cols + p % cols;
        want[o] += sv[p];
    }
    assert_eq!(got, want);
    assert_eq!(x.scatter_add::<0>(&idx, &src).to_vec(), got);
}

#[test]
fn large_inputs_cross_chunk_boundaries() {
    // Rows of 65 and 33 elements never line up with the 16384-element parallel chunks.
    let vals: Vec<f64> = (0..997).map(|i| (i % 101) as f64 - 50.0).collect();
    let dims = [20, 33, 65];
    let raw: Vec<usize> = (0..1009).map(|i| i * 31 + i / 7).collect();
    for kind in [1, 2] {
        index_select_case::<f32>(dims, kind, &vals, 1, &raw[..45]);
        gather_case::<i32>(dims, kind, &vals, 2, [20, 33, 80], &raw);
        scatter_case::<f64>(dims, kind, &vals, 0, [25, 33, 65], [0, 1, 0], &raw);
        concat_case::<u8>(dims, kind, &vals, 2, [65, 3, 40]);
        triangle_case::<bf16>(dims, kind, &vals, 5);
    }
}

#[test]
fn empty_axes_and_empty_index() {
    let x: Tensor<(usize, usize), i32> = Tensor::from_vec(vec![1, 2, 3, 4], (2, 2), Device::Cpu);
    let none: Tensor<(usize,), i64> = Tensor::from_vec(vec![], (0,), Device::Cpu);
    assert_eq!(x.index_select::<1, usize>(&none).dims(), &[2, 0]);
    let empty: Tensor<(usize, usize), i32> = Tensor::from_vec(vec![], (2, 0), Device::Cpu);
    let c: Tensor<(usize, usize), i32> = empty.concat::<1, usize>(&x);
    assert_eq!(c.to_vec(), x.to_vec());
    assert_eq!(empty.split::<1>(3).len(), 1);
    assert_eq!(empty.chunk::<1>(3).len(), 3);
    assert_eq!(empty.tril(0).dims(), &[2, 0]);
    let idx: Tensor<(usize, usize), i64> = Tensor::from_vec(vec![], (2, 0), Device::Cpu);
    assert_eq!(
        x.scatter_add::<1>(&idx, &idx.cast::<i32>()).to_vec(),
        x.to_vec()
    );
    assert_eq!(x.gather::<1, _>(&idx).dims(), &[2, 0]);
}

#[test]
fn static_shapes_join_and_split() {
    let a: Tensor<Rank2<2, 3>> =
        Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu);
    let b: Tensor<(Const<2>, usize)> = Tensor::from_vec(vec![7.0, 8.0], (Const, 1), Device::Cpu);
    let c: Tensor<Rank2<2, 4>> = a.concat::<1, _>(&b);
    assert_eq!(c.to_vec(), vec![1.0, 2.0, 3.0, 7.0, 4.0, 5.0, 6.0, 8.0]);
    let (l, r): (Tensor<Rank2<2, 1>>, Tensor<Rank2<2, 3>>) = c.split2::<1, _, _>(Const, Const);
    assert_eq!(l.to_vec(), vec![1.0, 4.0]);
    assert_eq!(r.to_vec(), vec![2.0, 3.0, 7.0, 5.0, 6.0, 8.0]);
    let s: Tensor<Rank3<2, 2, 3>> = Tensor::stack::<1, _>([&a, &a.neg()]);
    assert_eq!(s.dims(), &[2, 2, 3]);
    let causal: Tensor<Rank2<3, 3>, bool> = Tensor::full((Const, Const), true, Device::Cpu);
    assert_eq!(
        causal.tril(0).to_vec(),
        vec![true, false, false, true, true, false, true, true, true]
    );
}

fn err<T>(r: rtx::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn index_errors_name_the_index_axis_and_size() {
    let x: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::zeros((Dyn(2), Const), Device::Cpu);
    let idx: Tensor<Rank1<3>, i64> = Tensor::from_array([0, -1, 5], Device::Cpu);
    assert_eq!(
        err(x.try_index_select::<1, _>(&idx)),
        "index_select: index -1 at [1] is out of bounds for axis 1 of size 3"
    );
    let idx2: Tensor<Rank2<2, 2>, i64> = Tensor::from_array([[0, 1], [2, 3]], Device::Cpu);
    assert_eq!(
        err(x.try_gather::<1, _>(&idx2)),
        "gather: index 3 at [1, 1] is out of bounds for axis 1 of size 3"
    );
    let tall: Tensor<Rank2<3, 1>, i64> = Tensor::zeros((Const, Const), Device::Cpu);
    assert_eq!(
        err(x.try_gather::<1, _>(&tall)),
        "gather: index shape [3, 1] is larger than input shape [B=2, 3] at axis 0 (3 > 2)"
    );
    let src: Tensor<Rank2<2, 1>> = Tensor::zeros((Const, Const), Device::Cpu);
    assert_eq!(
        err(x.try_scatter::<1>(&idx2, &src)),
        "scatter: index shape [2, 2] is larger than source shape [2, 1] at axis 1 (2 > 1)"
    );
    let src2: Tensor<Rank2<2, 2>> = Tensor::zeros((Const, Const), Device::Cpu);
    assert_eq!(
        err(x.try_scatter_add::<1>(&idx2, &src2)),
        "scatter_add: index 3 at [1, 1] is out of bounds for axis 1 of size 3"
    );
    let rows: Tensor<(usize,), i64> = Tensor::from_vec(vec![0, 2], (2,), Device::Cpu);
    let add: Tensor<(usize, Const<3>)> = Tensor::zeros((3, Const), Device::Cpu);
    let xr: Tensor<(usize, Const<3>)> = Tensor::zeros((2, Const), Device::Cpu);
    assert_eq!(
        err(xr.try_index_add::<0, usize>(&rows, &add)),
        "index_add: source shape [3, 3] does not match input shape [2, 3] with 2 indices along axis 0"
    );
}

#[test]
#[should_panic(expected = "index_select: index 4 at [0] is out of bounds for axis 0 of size 2")]
fn plain_index_select_panics_with_the_message() {
    let x: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let idx: Tensor<Rank1<1>, i64> = Tensor::from_array([4], Device::Cpu);
    let _ = x.index_select::<0, _>(&idx);
}

#[test]
fn join_errors_name_the_shapes_and_sizes() {
    let a: Tensor<(usize, usize)> = Tensor::zeros((2, 3), Device::Cpu);
    let b: Tensor<(usize, usize)> = Tensor::zeros((3, 3), Device::Cpu);
    assert_eq!(
        err(a.try_concat::<1, usize>(&b)),
        "concat: shapes [2, 3] and [3, 3] differ outside axis 1"
    );
    assert_eq!(
        err(a.try_concat::<0, Const<6>>(&b)),
        "concat: 2 + 3 elements along axis 0 cannot become 6"
    );
    assert_eq!(
        err(Tensor::try_cat::<0, Const<9>>(&[&a, &b, &a])),
        "cat: 2 + 3 + 2 elements along axis 0 cannot become 9"
    );
    assert_eq!(
        err(Tensor::<(usize, usize)>::try_cat::<0, usize>(&[])),
        "cat: no tensors given; at least one is needed"
    );
    assert_eq!(
        err(Tensor::try_stack::<0, 3>([&a, &a, &b])),
        "stack: shape mismatch: [2, 3] vs [3, 3]: every tensor stacked must have the same shape"
    );
    assert_eq!(
        err(a.try_split::<1>(0)),
        "split: a chunk size of 0 cannot split axis 1 of size 3"
    );
    assert_eq!(
        err(a.try_chunk::<0>(0)),
        "chunk: the number of chunks must be at least 1, not 0"
    );
    assert_eq!(
        err(b.try_split2::<0, Const<1>, usize>(Const, 1)),
        "split2: 3 elements along axis 0 cannot become 1 + 1"
    );
}

#[test]
#[should_panic(expected = "concat: 2 + 3 elements along axis 0 cannot become 4")]
fn plain_concat_panics_with_the_message() {
    let a: Tensor<(usize, Const<2>)> = Tensor::zeros((2, Const), Device::Cpu);
    let b: Tensor<(usize, Const<2>)> = Tensor::zeros((3, Const), Device::Cpu);
    let _: Tensor<Rank2<4, 2>> = a.concat::<0, _>(&b);
}
