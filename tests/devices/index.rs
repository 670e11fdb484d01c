//! Indexing and joining ops on every device: index_select, gather, scatter, scatter_add and
//! index_add, concat and cat, tril and triu, argmax and argmin; all but index_select in every
//! element type they exist for, through views, and compared exactly (they move, mask or sum
//! elements in a fixed order).

use super::*;

fn index_case<E: Float>() {
    let (r, c) = (10usize, 7usize);
    let table = values::<E>(r * c, 14, -1.0, 1.0);
    on_every_device::<E>("index_select", |dev| {
        let x = Tensor::from_vec(table.clone(), (r, c), dev);
        let rows = Tensor::from_vec(vec![9i64, 0, 3, 3, 9], (5usize,), dev);
        let cols = Tensor::from_vec(vec![6i64, 1], (2usize,), dev);
        let bad = Tensor::from_vec(vec![1i64, 10], (2usize,), dev);
        let err = x
            .try_index_select::<0, _>(&bad)
            .err()
            .map(|e| e.to_string());
        vec![
            (
                "embedding rows".into(),
                f64s(&x.index_select::<0, _>(&rows)),
            ),
            ("columns".into(), f64s(&x.index_select::<1, _>(&cols))),
            (
                "rows of a transpose".into(),
                f64s(&x.t().index_select::<0, _>(&cols)),
            ),
            // The error is the CPU's, word for word (compared by its length and bytes).
            (
                "bad index error".into(),
                err.unwrap_or_default().bytes().map(f64::from).collect(),
            ),
        ]
    });
}

#[test]
fn index_select_matches_the_cpu() {
    every_float!(index_case);
}

fn gather_case<E: Element>() {
    let (r, c) = (6usize, 5usize);
    let data = values::<E>(r * c, 21, 0.0, 100.0);
    let along_cols = indices(r * 3, 22, c);
    let along_rows = indices(4 * c, 23, r);
    same_on_every_device::<E>("gather", |dev| {
        let x = Tensor::from_vec(data.clone(), (r, c), dev);
        let i1 = Tensor::from_vec(along_cols.clone(), (r, 3usize), dev);
        let i0 = Tensor::from_vec(along_rows.clone(), (4usize, c), dev);
        // The index smaller than the input off the axis, and broadcast along a row.
        let small = Tensor::from_vec(along_cols[..6].to_vec(), (2usize, 3usize), dev);
        let row = Tensor::from_vec(along_rows[..c].to_vec(), (1usize, c), dev);
        let bcast: Tensor<(usize, usize), i64> = row.broadcast_to((3usize, c));
        let bad = Tensor::from_vec(vec![0i64, 4, 5, 1], (2usize, 2usize), dev);
        vec![
            ("gather 1".into(), bits(&x.gather::<1, _>(&i1))),
            ("gather 0".into(), bits(&x.gather::<0, _>(&i0))),
            (
                "gather of a transpose".into(),
                bits(&x.t().gather::<0, _>(&small)),
            ),
            (
                "gather with a smaller index".into(),
                bits(&x.gather::<1, _>(&small)),
            ),
            (
                "gather with a broadcast index".into(),
                bits(&x.gather::<0, _>(&bcast)),
            ),
            ("bad index".into(), err_text(x.try_gather::<1, _>(&bad))),
        ]
    });
}

#[test]
fn gather_matches_the_cpu_in_every_type() {
    every_element!(gather_case);
}

fn scatter_case<E: Element>() {
    let (r, c) = (5usize, 7usize);
    let dst = values::<E>(r * c, 31, 0.0, 50.0);
    let src = values::<E>(6 * 4, 32, 0.0, 50.0);
    // Repeats along each line, so the last write must win.
    let idx = indices(4 * 4, 33, c);
    same_on_every_device::<E>("scatter", |dev| {
        let x = Tensor::from_vec(dst.clone(), (r, c), dev);
        let s = Tensor::from_vec(src.clone(), (6usize, 4usize), dev);
        let i = Tensor::from_vec(idx.clone(), (4usize, 4usize), dev);
        let i0 = Tensor::from_vec(indices(2 * 4, 34, r), (2usize, 4usize), dev);
        let bad = Tensor::from_vec(vec![0i64, 7], (1usize, 2usize), dev);
        vec![
            ("scatter 1".into(), bits(&x.scatter::<1>(&i, &s))),
            ("scatter 0".into(), bits(&x.scatter::<0>(&i0, &s))),
            (
                "scatter into a transpose".into(),
                bits(&x.t().scatter::<0>(&i0, &s)),
            ),
            (
                "scatter from a transpose".into(),
                bits(&x.scatter::<1>(&i, &s.t())),
            ),
            ("bad index".into(), err_text(x.try_scatter::<1>(&bad, &s))),
        ]
    });
}

#[test]
fn scatter_keeps_the_last_write_in_every_type() {
    every_element!(scatter_case);
}

fn scatter_add_case<E: Num>() {
    let (r, c) = (5usize, 7usize);
    let dst = values::<E>(r * c, 41, 0.0, 20.0);
    let src = values::<E>(40 * 6, 42, 0.0, 20.0);
    let long = indices(40 * 6, 43, r);
    let table = values::<E>(9 * 6, 44, 0.0, 20.0);
    let rows = indices(40, 45, 9);
    let into_t = indices(40 * 5, 46, c);
    same_on_every_device::<E>("scatter_add", |dev| {
        let x = Tensor::from_vec(dst.clone(), (r, c), dev);
        // 40 contributions along axis 0 into 5 rows: float sums depend on their order.
        let s = Tensor::from_vec(src.clone(), (40usize, 6usize), dev);
        let i = Tensor::from_vec(long.clone(), (40usize, 6usize), dev);
        let t = Tensor::from_vec(table.clone(), (9usize, 6usize), dev);
        let ix = Tensor::from_vec(rows.clone(), (40usize,), dev);
        let it = Tensor::from_vec(into_t.clone(), (40usize, 5usize), dev);
        let zeros: Tensor<(usize, usize), E> = Tensor::zeros((9usize, 6usize), dev);
        vec![
            ("scatter_add 0".into(), bits(&x.scatter_add::<0>(&i, &s))),
            (
                "scatter_add into a transpose".into(),
                bits(&x.t().scatter_add::<0>(&it, &s)),
            ),
            // index_add reads its index vector broadcast across the other axes.
            ("index_add 0".into(), bits(&t.index_add::<0, _>(&ix, &s))),
            (
                "index_add into zeros".into(),
                bits(&zeros.index_add::<0, _>(&ix, &s)),
            ),
        ]
    });
}

#[test]
fn scatter_add_sums_in_the_cpu_order_in_every_numeric_type() {
    every_num!(scatter_add_case);
}

fn join_case<E: Element>() {
    let a = values::<E>(3 * 4, 51, 0.0, 9.0);
    let b = values::<E>(3 * 2, 52, 0.0, 9.0);
    let m = values::<E>(2 * 4 * 5, 53, 1.0, 9.0);
    same_on_every_device::<E>("concat", |dev| {
        let x = Tensor::from_vec(a.clone(), (3usize, 4usize), dev);
        let y = Tensor::from_vec(b.clone(), (3usize, 2usize), dev);
        let z: Tensor<(usize, usize), E> = Tensor::from_vec(vec![], (3usize, 0usize), dev);
        let batch = Tensor::from_vec(m.clone(), (2usize, 4usize, 5usize), dev);
        let cols: Tensor<(usize, usize), E> = x.concat::<1, usize>(&y);
        let left = x.narrow::<1, usize>(1, 3);
        let right = y.narrow::<1, usize>(0, 1);
        let inner: Tensor<(usize, usize), E> = left.concat::<1, usize>(&right);
        let rows: Tensor<(usize, usize), E> = x.concat::<0, usize>(&inner);
        let three: Tensor<(usize, usize), E> = Tensor::cat::<1, usize>(&[&x, &z, &y, &x]);
        let transposed: Tensor<(usize, usize), E> = x.t().concat::<0, usize>(&y.t());
        vec![
            ("concat 1".into(), bits(&cols)),
            ("concat 0 of views".into(), bits(&rows)),
            ("cat with an empty part".into(), bits(&three)),
            ("concat of transposes".into(), bits(&transposed)),
            ("tril 0".into(), bits(&x.tril(0))),
            ("tril -1".into(), bits(&x.tril(-1))),
            ("triu 1".into(), bits(&x.triu(1))),
            ("triu of a transpose".into(), bits(&x.t().triu(-1))),
            ("tril of a batch".into(), bits(&batch.tril(2))),
            (
                "triu of a permuted batch".into(),
                bits(&batch.transpose::<1, 2>().triu(0)),
            ),
        ]
    });
}

#[test]
fn concat_and_triangles_match_the_cpu_in_every_type() {
    every_element!(join_case);
}

fn arg_case<E: Num>() {
    let (r, c) = (9usize, 300usize);
    // Few distinct values, so ties are common and the first one must win.
    let mut data: Vec<E> = values::<f64>(r * c, 61, 0.0, 5.0)
        .into_iter()
        .map(|v| E::from_f64(v.floor()))
        .collect();
    if E::DTYPE.is_float() {
        data[3 * c + 17] = E::from_f64(f64::NAN);
        data[5 * c + 299] = E::from_f64(f64::NAN);
        data[8] = E::from_f64(f64::NAN);
    }
    same_on_every_device::<E>("argmax", |dev| {
        let x = Tensor::from_vec(data.clone(), (r, c), dev);
        vec![
            ("argmax 1".into(), bits(&x.argmax::<1>())),
            ("argmin 1".into(), bits(&x.argmin::<1>())),
            ("argmax 0".into(), bits(&x.argmax::<0>())),
            ("argmin 0".into(), bits(&x.argmin::<0>())),
            (
                "argmax_keepdim of a transpose".into(),
                bits(&x.t().argmax_keepdim::<0>()),
            ),
            ("argmin of a transpose".into(), bits(&x.t().argmin::<1>())),
        ]
    });
}

#[test]
fn argmax_and_argmin_match_the_cpu_in_every_numeric_type() {
    every_num!(arg_case);
}
