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

fn bias_gradient_case<E: Float>() {
    // Sums over the first axis of [8192, N], as a Linear's bias gradient: few blocks of 32
    // columns for a long axis, so the axis is split into chunks over more blocks and the
    // chunks combined by a second launch. [1024, 8192] and [1000, 96] end in a shorter chunk;
    // [4, 2048, 64] splits with several `outer` indices. Values in [0.5, 1.5): a chunk lost
    // or counted twice moves a sum by hundreds.
    let tall = values::<E>(8192 * 1536, 40, 0.5, 1.5);
    let wide = values::<E>(1024 * 8192, 41, 0.5, 1.5);
    let odd = values::<E>(1000 * 96, 42, -1.0, 1.0);
    let cube = values::<E>(4 * 2048 * 64, 43, 0.5, 1.5);
    on_every_device::<E>("bias gradient sums", |dev| {
        let t = Tensor::from_vec(tall.clone(), (8192usize, 1536usize), dev);
        let n512 = Tensor::from_vec(tall[..8192 * 512].to_vec(), (8192usize, 512usize), dev);
        let w = Tensor::from_vec(wide.clone(), (1024usize, 8192usize), dev);
        let o = Tensor::from_vec(odd.clone(), (1000usize, 96usize), dev);
        let c = Tensor::from_vec(cube.clone(), (4usize, 2048usize, 64usize), dev);
        vec![
            ("sum 0 of [8192, 1536]".into(), f64s(&t.sum::<0>())),
            ("sum 0 of [8192, 512]".into(), f64s(&n512.sum::<0>())),
            ("mean 0 of [8192, 512]".into(), f64s(&n512.mean::<0>())),
            ("max 0 of [8192, 512]".into(), f64s(&n512.max::<0>())),
            ("min 0 of [8192, 512]".into(), f64s(&n512.min::<0>())),
            ("sum 0 of [1024, 8192]".into(), f64s(&w.sum::<0>())),
            ("mean 0 of [1024, 8192]".into(), f64s(&w.mean::<0>())),
            ("sum 0 of [1000, 96]".into(), f64s(&o.sum::<0>())),
            ("max 0 of [1000, 96]".into(), f64s(&o.max::<0>())),
            ("sum 1 of [4, 2048, 64]".into(), f64s(&c.sum::<1>())),
            ("mean 1 of [4, 2048, 64]".into(), f64s(&c.mean::<1>())),
        ]
    });
}

#[test]
fn split_column_reductions_match_the_cpu() {
    every_float!(bias_gradient_case);
}

fn short_rows_case<E: Float>() {
    // Many short rows take a warp each: rows of 256 (one 16-byte vector a lane in 16-bit
    // types), of 1000 (every other row unaligned in 16-bit types: scalar loads), of 1024, of
    // 20 (fewer values than lanes) and of 1.
    let r256 = values::<E>(4096 * 256, 44, 0.5, 1.5);
    // Positive values keep the sums well conditioned: two summation orders of values in
    // [-1, 1) differ by more than f32's tolerance where a row sums to near zero.
    let r1000 = values::<E>(1500 * 1000, 45, 0.5, 1.5);
    let r20 = values::<E>(3000 * 20, 46, -4.0, 4.0);
    on_every_device::<E>("short rows", |dev| {
        let a = Tensor::from_vec(r256.clone(), (4096usize, 256usize), dev);
        let b = Tensor::from_vec(r1000.clone(), (1500usize, 1000usize), dev);
        let k = Tensor::from_vec(r256[..1024 * 1024].to_vec(), (1024usize, 1024usize), dev);
        let s = Tensor::from_vec(r20.clone(), (3000usize, 20usize), dev);
        let one = Tensor::from_vec(r20[..2048].to_vec(), (2048usize, 1usize), dev);
        vec![
            ("sum of rows of 256".into(), f64s(&a.sum::<1>())),
            ("mean of rows of 256".into(), f64s(&a.mean::<1>())),
            ("max of rows of 256".into(), f64s(&a.max::<1>())),
            ("sum of rows of 1000".into(), f64s(&b.sum::<1>())),
            ("min of rows of 1000".into(), f64s(&b.min::<1>())),
            ("sum of rows of 1024".into(), f64s(&k.sum::<1>())),
            ("sum of rows of 20".into(), f64s(&s.sum::<1>())),
            ("max of rows of 20".into(), f64s(&s.max::<1>())),
            ("sum of rows of 1".into(), f64s(&one.sum::<1>())),
            ("logsumexp of rows of 20".into(), f64s(&s.logsumexp::<1>())),
            (
                "logsumexp of rows of 1000".into(),
                f64s(&b.logsumexp::<1>()),
            ),
        ]
    });
}

#[test]
fn warp_per_row_reductions_match_the_cpu() {
    every_float!(short_rows_case);
}
