//! Indexing and joining ops on every device: index_select, gather, scatter, scatter_add and
//! index_add, concat and cat, tril and triu, argmax and argmin; all but index_select in every
//! element type they exist for, through views, and compared exactly (they move, mask or sum
//! elements in a fixed order). At the sizes of a GPT-style training step too: the embedding
//! gradients (index_add's sorting path) and the join of the attention's q, k and v gradients.

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

/// The embedding gradients of a GPT-style step (batch 32, sequence 256, width 512, vocabulary
/// 8192): 8192 rows of the output gradient added into the table at their tokens (index_add
/// into zeros, as index_select's backward does) with random tokens, with one token
/// everywhere (a bucket of 8192 terms), and into a 256-row position table (each position 32
/// times); then along axis 1 into a nonzero table from a transposed source. Exact: the GPU
/// sums each element in index order, as the CPU does.
fn embedding_gradient_case<E: Float>() {
    let (v, d, n) = (8192usize, 512usize, 8192usize);
    let grads = values::<E>(n * d, 81, -1.0, 1.0);
    let start = values::<E>(d * v, 82, -4.0, 4.0);
    let tokens = indices(n, 83, v);
    let one = vec![4321i64; n];
    let positions: Vec<i64> = (0..n).map(|k| (k % 256) as i64).collect();
    same_on_every_device::<E>("embedding gradient", |dev| {
        let g = Tensor::from_vec(grads.clone(), (n, d), dev);
        let ids = |ix: &[i64]| Tensor::from_vec(ix.to_vec(), (n,), dev);
        let table: Tensor<(usize, usize), E> = Tensor::zeros((v, d), dev);
        let pos_table: Tensor<(usize, usize), E> = Tensor::zeros((256usize, d), dev);
        let columns = Tensor::from_vec(start.clone(), (d, v), dev);
        vec![
            (
                "tokens".into(),
                bits(&table.index_add::<0, _>(&ids(&tokens), &g)),
            ),
            (
                "one token".into(),
                bits(&table.index_add::<0, _>(&ids(&one), &g)),
            ),
            (
                "positions".into(),
                bits(&pos_table.index_add::<0, _>(&ids(&positions), &g)),
            ),
            (
                "along axis 1 from a transpose".into(),
                bits(&columns.index_add::<1, _>(&ids(&tokens), &g.t())),
            ),
        ]
    });
}

#[test]
fn embedding_gradients_match_the_cpu_at_gpt_sizes() {
    embedding_gradient_case::<f32>();
    embedding_gradient_case::<bf16>();
}

#[test]
fn embedding_gradients_are_the_same_on_every_run() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("embedding gradient determinism: skipped: no CUDA device: {why}");
            return;
        }
    };
    let (v, d, n) = (8192usize, 512usize, 8192usize);
    // Few distinct tokens, so most rows sum many terms.
    let tokens = indices(n, 91, 64);
    for dev in gpus {
        let run = |seed| {
            let g = Tensor::from_vec(values::<bf16>(n * d, seed, -1.0, 1.0), (n, d), dev);
            let ids = Tensor::from_vec(tokens.clone(), (n,), dev);
            let table: Tensor<(usize, usize), bf16> = Tensor::zeros((v, d), dev);
            bits(&table.index_add::<0, _>(&ids, &g))
        };
        let first = run(92);
        assert!(first.iter().any(|&b| b != 0), "a nonzero gradient");
        for _ in 0..3 {
            assert!(
                run(92) == first,
                "the embedding gradient changed between runs on {dev}"
            );
        }
    }
}

/// The attention backward's join: three [32, 256, 512] gradients, each read through a
/// permuted view ([B, T, H, hd] of [B, H, T, hd] storage), joined along the heads into
/// [32, 256, 24, 64] (the [32, 256, 1536] gradient of the fused projection), and the same
/// parts made dense and joined along their last axis.
fn attention_join_case<E: Element>() {
    let (b, h, t, hd) = (32usize, 8usize, 256usize, 64usize);
    let n = b * h * t * hd;
    let data: Vec<Vec<E>> = (0..3).map(|i| values::<E>(n, 101 + i, -2.0, 2.0)).collect();
    same_on_every_device::<E>("attention join", |dev| {
        type D4 = (usize, usize, usize, usize);
        let heads: Vec<Tensor<D4, E>> = data
            .iter()
            .map(|x| Tensor::from_vec(x.clone(), (b, h, t, hd), dev).permute::<Axes4<0, 2, 1, 3>>())
            .collect();
        let joined: Tensor<D4, E> = Tensor::cat::<2, usize>(&[&heads[0], &heads[1], &heads[2]]);
        let flat: Vec<Tensor<(usize, usize, usize), E>> = heads
            .iter()
            .map(|x| x.contiguous().reshape((b, t, h * hd)))
            .collect();
        let rows: Tensor<(usize, usize, usize), E> =
            Tensor::cat::<2, usize>(&[&flat[0], &flat[1], &flat[2]]);
        vec![
            ("q, k, v heads".into(), bits(&joined)),
            ("q, k, v rows".into(), bits(&rows)),
        ]
    });
}

#[test]
fn attention_gradients_join_as_on_the_cpu() {
    attention_join_case::<bf16>();
    attention_join_case::<f32>();
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
