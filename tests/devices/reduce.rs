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

fn held_rows_case<E: Float>() {
    // Rows of 8192 (held in registers, 32 values a thread), of 9001 (longer than 256 threads
    // hold: streamed), of 1027 (not a multiple of 4, ragged last values) and of 20 (fewer
    // than 32), odd row counts; row sums take 16-byte loads on aligned rows and scalar loads
    // on the others (a row of 1027 f32 starts unaligned every other row).
    let full = values::<E>(3 * 8192, 14, -8.0, 8.0);
    let long = values::<E>(3 * 9001, 15, -8.0, 8.0);
    let ragged = values::<E>(5 * 1027, 16, -8.0, 8.0);
    let short = values::<E>(7 * 20, 17, -8.0, 8.0);
    let near_one = values::<E>(5 * 8192, 18, 0.9, 1.1);
    on_every_device::<E>("held rows", |dev| {
        let f = Tensor::from_vec(full.clone(), (3usize, 8192usize), dev);
        let l = Tensor::from_vec(long.clone(), (3usize, 9001usize), dev);
        let r = Tensor::from_vec(ragged.clone(), (5usize, 1027usize), dev);
        let s = Tensor::from_vec(short.clone(), (7usize, 20usize), dev);
        let n = Tensor::from_vec(near_one.clone(), (5usize, 8192usize), dev);
        let rn = Tensor::from_vec(near_one[..5 * 1027].to_vec(), (5usize, 1027usize), dev);
        let sn = Tensor::from_vec(near_one[..7 * 20].to_vec(), (7usize, 20usize), dev);
        vec![
            ("softmax 8192".into(), f64s(&f.softmax::<1>())),
            ("softmax 9001".into(), f64s(&l.softmax::<1>())),
            ("softmax 1027".into(), f64s(&r.softmax::<1>())),
            ("softmax 20".into(), f64s(&s.softmax::<1>())),
            ("log_softmax 8192".into(), f64s(&f.log_softmax::<1>())),
            ("log_softmax 9001".into(), f64s(&l.log_softmax::<1>())),
            ("log_softmax 1027".into(), f64s(&r.log_softmax::<1>())),
            ("log_softmax 20".into(), f64s(&s.log_softmax::<1>())),
            ("logsumexp 8192".into(), f64s(&f.logsumexp::<1>())),
            ("logsumexp 9001".into(), f64s(&l.logsumexp::<1>())),
            ("logsumexp 1027".into(), f64s(&r.logsumexp::<1>())),
            ("logsumexp 20".into(), f64s(&s.logsumexp::<1>())),
            ("sum 8192".into(), f64s(&n.sum::<1>())),
            ("sum 1027".into(), f64s(&rn.sum::<1>())),
            ("max 1027".into(), f64s(&r.max::<1>())),
            ("mean 8192".into(), f64s(&n.mean::<1>())),
            ("sum 20".into(), f64s(&sn.sum::<1>())),
            ("sum 8192 axis 0".into(), f64s(&n.sum::<0>())),
        ]
    });
}

#[test]
fn held_rows_and_vector_row_sums_match_the_cpu() {
    every_float!(held_rows_case);
}
