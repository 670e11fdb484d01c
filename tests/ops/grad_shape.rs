//! Gradient checks of the shape ops over random shapes (ranks 1 to 3, dims 1 to 4): views
//! (reshape, permute, transpose, narrow, slice, squeeze / unsqueeze, explicit broadcasts with
//! random patterns, contiguous copies of strided views) and joins and splits (concat, cat,
//! stack, split, chunk, split2) along a random axis.

use crate::grad::{
    broadcast_source, check, dims, same_rank, shaped, with_axis, with_new_axis, with_ranks_le, wsum,
};
use proptest::prelude::*;
use rtx::prelude::*;

/// Dims, values, an axis below the rank and a few random numbers for sizes and offsets.
fn axis_case() -> impl Strategy<Value = (Vec<usize>, Vec<f64>, usize, Vec<usize>)> {
    shaped(1..=3, 4, -2.0, 2.0).prop_flat_map(|(d, v)| {
        let r = d.len();
        (
            Just(d),
            Just(v),
            0..r,
            prop::collection::vec(0usize..1000, 4),
        )
    })
}

/// Checks `permute::<P>` (then a copy and a nonlinearity) of `x`.
macro_rules! check_permute {
    ($x:expr, $p:ty) => {
        check(&$x, |t| {
            let y = t.permute::<$p>();
            wsum(&y.tanh()) + wsum(&y.contiguous().reshape((y.numel(),)).exp())
        })
    };
}

proptest! {
    #[test]
    fn views_along_an_axis((d, vals, axis, r) in axis_case(), perm in Just(vec![0usize, 1, 2]).prop_shuffle()) {
        let len = d[axis];
        let start = r[0] % len;
        let width = 1 + r[1] % (len - start);
        let shuffled: Vec<usize> = perm.iter().filter(|&&p| p < d.len()).map(|&p| d[p]).collect();
        with_axis!(d, axis, s, A => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            let n = x.numel();
            check(&x, |t| wsum(&t.narrow::<A, usize>(start, width).exp()));
            check(&x, |t| wsum(&t.slice::<A>(start..start + width).sin()));
            check(&x, |t| wsum(&t.unsqueeze::<A>().tanh().squeeze::<A>()));
            check(&x, |t| wsum(&t.reshape((n,)).exp()));
            check(&x, |t| wsum(&t.reshape(same_rank(s, &shuffled)).sin()));
            check(&x, |t| wsum(&t.reshape((n / len, len)).tanh()));
            // A size-1 slice broadcast back along the axis (an explicit expand).
            check(&x, |t| wsum(&(t.narrow::<A, usize>(start, 1).expand(t.shape()) * t)));
        });
    }

    #[test]
    fn permutes_and_transposes((d, vals) in shaped(2..=3, 4, -2.0, 2.0), p in 0usize..6) {
        if let [a, b] = d[..] {
            let x: Tensor<(usize, usize), f64> = Tensor::from_vec(vals.clone(), (a, b), Device::Cpu);
            check_permute!(x, Axes2<1, 0>);
            check(&x, |t| wsum(&t.t().exp()));
            check(&x, |t| wsum(&t.t().contiguous().reshape((b, a)).sin()));
        } else {
            let x: Tensor<(usize, usize, usize), f64> =
                Tensor::from_vec(vals.clone(), (d[0], d[1], d[2]), Device::Cpu);
            match p {
                0 => check_permute!(x, Axes3<0, 2, 1>),
                1 => check_permute!(x, Axes3<1, 0, 2>),
                2 => check_permute!(x, Axes3<1, 2, 0>),
                3 => check_permute!(x, Axes3<2, 0, 1>),
                4 => check_permute!(x, Axes3<2, 1, 0>),
                _ => check_permute!(x, Axes3<0, 1, 2>),
            }
            check(&x, |t| wsum(&t.transpose::<0, 1>().exp()));
            check(&x, |t| wsum(&t.transpose::<0, 2>().sin()));
            check(&x, |t| wsum(&t.transpose::<1, 2>().contiguous().tanh()));
        }
    }

    #[test]
    fn broadcasts_with_random_patterns(
        out in dims(1..=3, 4),
        rank in 1usize..=3,
        ones in prop::collection::vec(prop::bool::weighted(0.4), 3),
        vals in prop::collection::vec(-2.0f64..2.0, 64),
    ) {
        let src = broadcast_source(&out, rank, &ones);
        with_ranks_le!(src, out, ss, so => {
            let x = Tensor::from_vec(vals[..ss.numel()].to_vec(), ss, Device::Cpu);
            check(&x, |t| wsum(&t.broadcast_to(so).exp()));
            check(&x, |t| wsum(&t.expand(so).sin()));
        });
    }

    #[test]
    fn joins_and_splits((d, vals, axis, r) in axis_case(), more in prop::collection::vec(-2.0f64..2.0, 64)) {
        let len = d[axis];
        let mut db = d.clone();
        db[axis] = 1 + r[0] % 3;
        let (size, chunks, left) = (1 + r[1] % len, 1 + r[2] % len, 1 + r[3] % len.max(2).saturating_sub(1));
        with_axis!(d, axis, s, A => {
            let a = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            let sb = same_rank(s, &db);
            let b = Tensor::from_vec(more[..sb.numel()].to_vec(), sb, Device::Cpu);
            check(&a, |t| wsum(&t.concat::<A, usize>(&b).exp()));
            check(&b, |t| wsum(&a.concat::<A, usize>(t).exp()));
            check(&a, |t| wsum(&Tensor::cat::<A, usize>(&[&b, t, &b, t]).tanh()));
            check(&b, |t| wsum(&Tensor::cat::<A, usize>(&[t, &a, t]).sin()));
            check(&a, |t| {
                let parts = t.split::<A>(size);
                parts.iter().enumerate().fold(t.sum_all() * 0.0, |acc, (i, p)| acc + wsum(&p.exp()) * (i + 1) as f64)
            });
            check(&a, |t| {
                let parts = t.chunk::<A>(chunks);
                parts.iter().enumerate().fold(t.sum_all() * 0.0, |acc, (i, p)| acc + wsum(&p.sin()) * (i + 1) as f64)
            });
            if len >= 2 {
                check(&a, |t| {
                    let (l, r) = t.split2::<A, usize, usize>(left, len - left);
                    wsum(&l.exp()) + wsum(&r) * 2.0
                });
            }
        });
    }

    #[test]
    fn stacks_along_a_new_axis(
        (d, vals) in shaped(1..=3, 3, -2.0, 2.0),
        axis in 0usize..4,
        more in prop::collection::vec(-2.0f64..2.0, 27),
    ) {
        let axis = axis % (d.len() + 1);
        with_new_axis!(d, axis, s, A => {
            let a = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            let b = Tensor::from_vec(more[..a.numel()].to_vec(), s, Device::Cpu);
            check(&a, |t| wsum(&Tensor::stack::<A, 2>([t, &b]).exp()));
            check(&a, |t| wsum(&Tensor::stack::<A, 3>([&b, t, t]).sin()));
        });
    }
}
