//! Indexing ops on every device: index_select.

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
