//! Gradient checks of the indexing ops over random shapes (ranks 1 to 3, dims 1 to 4) along a
//! random axis, with random indices: index_select and index_add (repeated indices), gather,
//! scatter_add (repeated targets; source larger than the index), scatter (distinct targets
//! per line, so which source wins is defined), and tril / triu with a random diagonal.

use crate::grad::{check, same_rank, shaped, with_axis, wsum};
use proptest::prelude::*;
use rtx::prelude::*;

/// Dims, values, an axis below the rank and random numbers for index shapes and entries.
fn axis_case() -> impl Strategy<Value = (Vec<usize>, Vec<f64>, usize, Vec<usize>)> {
    shaped(1..=3, 4, -2.0, 2.0).prop_flat_map(|(d, v)| {
        let r = d.len();
        (
            Just(d),
            Just(v),
            0..r,
            prop::collection::vec(0usize..1000, 64),
        )
    })
}

/// The entries of an index tensor of `dims`, `f` of each position's coordinates, row-major.
fn index_entries(dims: &[usize], f: impl Fn(&[usize]) -> usize) -> Vec<i64> {
    let n: usize = dims.iter().product();
    let mut coords = vec![0; dims.len()];
    (0..n)
        .map(|mut flat| {
            for a in (0..dims.len()).rev() {
                coords[a] = flat % dims[a];
                flat /= dims[a];
            }
            f(&coords) as i64
        })
        .collect()
}

proptest! {
    #[test]
    fn index_select_and_index_add((d, vals, axis, r) in axis_case(), more in prop::collection::vec(-2.0f64..2.0, 64)) {
        let len = d[axis];
        let picks = 1 + r[0] % 4;
        let idx: Vec<i64> = (0..picks).map(|i| (r[1 + i] % len) as i64).collect();
        let mut ds = d.clone();
        ds[axis] = picks;
        with_axis!(d, axis, s, A => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            let idx: Tensor<(usize,), i64> = Tensor::from_vec(idx.clone(), (picks,), Device::Cpu);
            check(&x, |t| wsum(&t.index_select::<A, usize>(&idx).exp()));
            let ss = same_rank(s, &ds);
            let src = Tensor::from_vec(more[..ss.numel()].to_vec(), ss, Device::Cpu);
            check(&x, |t| wsum(&t.index_add::<A, usize>(&idx, &src).sin()));
            check(&src, |u| wsum(&x.index_add::<A, usize>(&idx, u).sin()));
        });
    }

    #[test]
    fn gather_and_scatter_add((d, vals, axis, r) in axis_case(), more in prop::collection::vec(-2.0f64..2.0, 128)) {
        let len = d[axis];
        // The index: any length along the axis, no longer than the input elsewhere.
        let di: Vec<usize> = d.iter().enumerate()
            .map(|(a, &n)| if a == axis { 1 + r[a] % 4 } else { 1 + r[a] % n })
            .collect();
        let entries = index_entries(&di, |c| {
            r[(c.iter().fold(7, |h, &v| h * 5 + v)) % r.len()] % len
        });
        // The source: at least the index's size on every axis.
        let dsrc: Vec<usize> = di.iter().enumerate().map(|(a, &n)| n + r[10 + a] % 2).collect();
        with_axis!(d, axis, s, A => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            let si = same_rank(s, &di);
            let index = Tensor::from_vec(entries.clone(), si, Device::Cpu);
            check(&x, |t| wsum(&t.gather::<A, _>(&index).exp()));
            let ss = same_rank(s, &dsrc);
            let src = Tensor::from_vec(more[..ss.numel()].to_vec(), ss, Device::Cpu);
            check(&x, |t| wsum(&t.scatter_add::<A>(&index, &src).sin()));
            check(&src, |u| wsum(&x.scatter_add::<A>(&index, u).sin()));
        });
    }

    #[test]
    fn scatter_with_distinct_targets((d, vals, axis, r) in axis_case(), more in prop::collection::vec(-2.0f64..2.0, 128)) {
        let len = d[axis];
        let di: Vec<usize> = d.iter().enumerate()
            .map(|(a, &n)| 1 + r[a] % n)
            .collect();
        // Along each line the targets are a rotation of 0..len, cut short: all distinct.
        let entries = index_entries(&di, |c| {
            let line = c.iter().enumerate().filter(|&(a, _)| a != axis).fold(3, |h, (_, &v)| h * 5 + v);
            (c[axis] + r[line % r.len()]) % len
        });
        let dsrc: Vec<usize> = di.iter().enumerate().map(|(a, &n)| n + r[10 + a] % 2).collect();
        with_axis!(d, axis, s, A => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            let si = same_rank(s, &di);
            let index = Tensor::from_vec(entries.clone(), si, Device::Cpu);
            let ss = same_rank(s, &dsrc);
            let src = Tensor::from_vec(more[..ss.numel()].to_vec(), ss, Device::Cpu);
            check(&x, |t| wsum(&t.scatter::<A>(&index, &src).exp()));
            check(&src, |u| wsum(&x.scatter::<A>(&index, u).exp()));
        });
    }

    #[test]
    fn triangles((d, vals) in shaped(2..=3, 4, -2.0, 2.0), k in -2i64..=2) {
        if let [a, b] = d[..] {
            let x: Tensor<(usize, usize), f64> = Tensor::from_vec(vals.clone(), (a, b), Device::Cpu);
            check(&x, |t| wsum(&t.tril(k).exp()));
            check(&x, |t| wsum(&t.triu(k).exp()));
            check(&x, |t| wsum(&t.t().tril(k).sin()));
        } else {
            let x: Tensor<(usize, usize, usize), f64> =
                Tensor::from_vec(vals.clone(), (d[0], d[1], d[2]), Device::Cpu);
            check(&x, |t| wsum(&t.tril(k).exp()));
            check(&x, |t| wsum(&t.triu(k).exp()));
        }
    }
}
