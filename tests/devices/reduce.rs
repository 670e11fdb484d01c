//! Reductions along an axis and the row kernels (softmax, log-softmax) on every device.

use super::*;

fn reduce_case<E: Float>() {
    let (r, c) = (23usize, 301usize);
    // Positive, near one: no cancellation in sums, no overflow in products.
    let data = values::<E>(r * c, 8, 0.9, 1.1);
    on_every_device::<E>("reduce", |dev| {
        let x = Tensor::from_vec(data.clone(), (r, c), dev);
        let t = x.t();
        vec![
            ("sum 0".into(), f64s(&x.sum::<0>())),
            ("sum 1".into(), f64s(&x.sum::<1>())),
            ("sum_keepdim 1".into(), f64s(&x.sum_keepdim::<1>())),
            ("sum transposed 1".into(), f64s(&t.sum::<1>())),
            ("prod 0".into(), f64s(&x.prod::<0>())),
            ("max 1".into(), f64s(&x.max::<1>())),
            ("max_keepdim 0".into(), f64s(&x.max_keepdim::<0>())),
            ("min 0".into(), f64s(&x.min::<0>())),
            ("min transposed 0".into(), f64s(&t.min::<0>())),
            ("mean 1".into(), f64s(&x.mean::<1>())),
            ("mean_keepdim 0".into(), f64s(&x.mean_keepdim::<0>())),
            ("sum_all".into(), f64s(&x.sum_all())),
            ("mean_all transposed".into(), f64s(&t.mean_all())),
            ("max_all".into(), f64s(&x.max_all())),
            ("min_all".into(), f64s(&t.min_all())),
            ("var 1".into(), f64s(&x.var::<1>(1))),
            ("var 0 population".into(), f64s(&x.var::<0>(0))),
            ("std transposed 1".into(), f64s(&t.std::<1>(1))),
            ("logsumexp 1".into(), f64s(&x.logsumexp::<1>())),
            ("logsumexp 0".into(), f64s(&x.logsumexp::<0>())),
        ]
    });
}

#[test]
fn reductions_match_the_cpu() {
    every_float!(reduce_case);
}

fn softmax_case<E: Float>() {
    let small = values::<E>(5 * 3, 9, -4.0, 4.0);
    let wide = values::<E>(7 * 2500, 10, -8.0, 8.0);
    on_every_device::<E>("softmax", |dev| {
        let s = Tensor::from_vec(small.clone(), (5usize, 3usize), dev);
        let w = Tensor::from_vec(wide.clone(), (7usize, 2500usize), dev);
        vec![
            ("softmax last".into(), f64s(&s.softmax::<1>())),
            ("softmax first".into(), f64s(&s.softmax::<0>())),
            ("softmax wide".into(), f64s(&w.softmax::<1>())),
            ("softmax transposed".into(), f64s(&s.t().softmax::<1>())),
            ("log_softmax last".into(), f64s(&s.log_softmax::<1>())),
            ("log_softmax first".into(), f64s(&s.log_softmax::<0>())),
            ("log_softmax wide".into(), f64s(&w.log_softmax::<1>())),
        ]
    });
}

#[test]
fn softmax_and_log_softmax_match_the_cpu() {
    every_float!(softmax_case);
}

fn long_reduce_case<E: Float>() {
    // Long rows take the two-stage path (partial results per chunk, then one block per row),
    // rows of an odd length start unaligned; a middle axis with a wide inner dim takes the
    // coalesced path. Values near one keep f16 sums of 50 000 in range.
    let rows = values::<E>(3 * 50_001, 11, 0.9, 1.1);
    let flat = values::<E>(40_000, 12, 0.9, 1.1);
    let cube = values::<E>(5 * 70 * 40, 13, -1.0, 1.0);
    on_every_device::<E>("long reductions", |dev| {
        let r = Tensor::from_vec(rows.clone(), (3usize, 50_001usize), dev);
        let f = Tensor::from_vec(flat.clone(), (40_000usize,), dev);
        let c = Tensor::from_vec(cube.clone(), (5usize, 70usize, 40usize), dev);
        vec![
            ("sum of long rows".into(), f64s(&r.sum::<1>())),
            ("mean of long rows".into(), f64s(&r.mean::<1>())),
            ("max of long rows".into(), f64s(&r.max::<1>())),
            ("sum_all".into(), f64s(&f.sum_all())),
            ("mean_all".into(), f64s(&f.mean_all())),
            ("min_all".into(), f64s(&f.min_all())),
            (
                "sum_all of a transposed view".into(),
                f64s(&r.t().sum_all()),
            ),
            ("sum over a middle axis".into(), f64s(&c.sum::<1>())),
            ("max over a middle axis".into(), f64s(&c.max::<1>())),
            ("mean over the first axis".into(), f64s(&c.mean::<0>())),
        ]
    });
}

#[test]
fn long_and_strided_reductions_match_the_cpu() {
    every_float!(long_reduce_case);
}
