//! Gradient checks of the reductions over random shapes (ranks 1 to 3, dims 1 to 4) along a
//! random axis, with and without keepdim: sum, mean, max, min, prod, var, std, logsumexp, and
//! softmax / log-softmax along the axis; and the reductions over all axes.

use crate::grad::{check, shaped, shaped_distinct, with_axis, with_rank, wsum};
use proptest::prelude::*;
use rtx::prelude::*;

/// Rank, dims and an axis below the rank, with distinct values (no ties for max and min).
fn axis_case() -> impl Strategy<Value = (Vec<usize>, Vec<f64>, usize)> {
    shaped_distinct(1..=3, 4).prop_flat_map(|(d, v)| {
        let r = d.len();
        (Just(d), Just(v), 0..r)
    })
}

proptest! {
    #[test]
    fn reductions_along_an_axis((d, vals, axis) in axis_case()) {
        let len = d[axis];
        with_axis!(d, axis, s, A => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            check(&x, |t| wsum(&t.sum::<A>()));
            check(&x, |t| wsum(&t.sum_keepdim::<A>()));
            check(&x, |t| wsum(&t.mean::<A>()));
            check(&x, |t| wsum(&t.mean_keepdim::<A>()));
            check(&x, |t| wsum(&t.max::<A>()));
            check(&x, |t| wsum(&t.max_keepdim::<A>()));
            check(&x, |t| wsum(&t.min::<A>()));
            check(&x, |t| wsum(&t.min_keepdim::<A>()));
            check(&x, |t| wsum(&t.prod::<A>()));
            check(&x, |t| wsum(&t.prod_keepdim::<A>()));
            check(&x, |t| wsum(&t.logsumexp::<A>()));
            check(&x, |t| wsum(&t.logsumexp_keepdim::<A>()));
            check(&x, |t| wsum(&t.softmax::<A>()));
            check(&x, |t| wsum(&t.log_softmax::<A>()));
            // The keepdim result broadcast back against the input, as normalizations use it.
            check(&x, |t| wsum(&(t - t.mean_keepdim::<A>().broadcast_to(t.shape()))));
            // Variance needs two values per line (distinct ones keep std away from 0), and
            // one more than the correction.
            if len >= 2 {
                check(&x, |t| wsum(&t.var::<A>(0)));
                check(&x, |t| wsum(&t.var_keepdim::<A>(1)));
                check(&x, |t| wsum(&t.std::<A>(1)));
                check(&x, |t| wsum(&t.std_keepdim::<A>(0)));
            }
        });
    }

    #[test]
    fn reductions_over_all_axes((d, vals) in shaped_distinct(1..=3, 4)) {
        with_rank!(d, s => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            check(&x, |t| t.sum_all());
            check(&x, |t| wsum(&t.sin()) * t.mean_all());
            check(&x, |t| t.max_all() * 2.0 - t.min_all());
        });
    }

    #[test]
    fn prod_with_zeros(
        (d, vals, axis) in shaped(1..=3, 4, -2.0, 2.0).prop_flat_map(|(d, v)| {
            let r = d.len();
            (Just(d), Just(v), 0..r)
        }),
        zeros in prop::collection::vec(0usize..64, 0..3),
    ) {
        // The product is linear in each element, so finite differences are exact at zeros.
        let mut v = vals.clone();
        for &z in &zeros {
            let n = v.len();
            v[z % n] = 0.0;
        }
        with_axis!(d, axis, s, A => {
            let x = Tensor::from_vec(v.clone(), s, Device::Cpu);
            check(&x, |t| wsum(&t.prod::<A>()));
            check(&x, |t| wsum(&t.prod_keepdim::<A>()));
            if x.numel() <= 8 {
                check(&x, |t| t.prod_all());
            }
        });
    }
}
