//! What ops cost on a GPU: launch counts and the bandwidth of the elementwise path against a
//! device copy (ops without kernels are tested with their op family, for example integer
//! `pow` in `integer.rs`).

use super::*;
use rtx::Gradients;
use rtx_backends::launch_count;

#[test]
fn each_op_is_one_launch() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("each_op_is_one_launch: skipped: no CUDA device: {why}");
            return;
        }
    };
    let dev = gpus[0];
    let x = Tensor::from_vec(
        values::<f32>(64 * 96, 12, -1.0, 1.0),
        (64usize, 96usize),
        dev,
    );
    let v = Tensor::from_vec(values::<f32>(96, 13, -1.0, 1.0), (96usize,), dev);
    let launches = |f: &dyn Fn()| {
        let before = launch_count(dev);
        f();
        launch_count(dev) - before
    };
    let idx = Tensor::from_vec(
        (0..64 * 8).map(|i| (i * 37 % 96) as i64).collect(),
        (64usize, 8usize),
        dev,
    );
    let src = Tensor::from_vec(values::<f32>(64 * 8, 14, -1.0, 1.0), (64usize, 8usize), dev);
    let rows = Tensor::from_vec((0..16).map(|i| i % 64).collect(), (16usize,), dev);
    let grads = Tensor::from_vec(
        values::<f32>(16 * 96, 15, -1.0, 1.0),
        (16usize, 96usize),
        dev,
    );
    let cases: [(&str, &dyn Fn(), u64); 20] = [
        ("cast f32 to bf16", &|| drop(x.cast::<bf16>()), 1),
        ("gelu_tanh (fused elementwise)", &|| drop(x.gelu_tanh()), 1),
        ("exp of a transposed view", &|| drop(x.t().exp()), 1),
        ("add with a broadcast row", &|| drop(&x + &v), 1),
        ("gt into bool", &|| drop(x.gt(&x.t().t())), 1),
        ("dense copy of a transpose", &|| drop(x.t().contiguous()), 1),
        ("sum along the last axis", &|| drop(x.sum::<1>()), 1),
        ("max along the first axis", &|| drop(x.max::<0>()), 1),
        ("softmax along the last axis", &|| drop(x.softmax::<1>()), 1),
        ("argmax along the last axis", &|| drop(x.argmax::<1>()), 1),
        (
            "gather along the last axis",
            &|| drop(x.gather::<1, _>(&idx)),
            1,
        ),
        // A device copy of the destination (no kernel), then the scatter.
        (
            "scatter_add along the last axis",
            &|| drop(x.scatter_add::<1>(&idx, &src)),
            1,
        ),
        // A memset of the sort's counters, then count, scan, place and sum.
        (
            "index_add of rows (broadcast index)",
            &|| drop(x.index_add::<0, _>(&rows, &grads)),
            5,
        ),
        // One launch per part.
        (
            "concat of two parts",
            &|| drop(x.concat::<0, usize>(&x.t().t())),
            2,
        ),
        ("tril of a transposed view", &|| drop(x.t().tril(0)), 1),
        (
            "rand (uniform f32)",
            &|| drop(Tensor::<(usize,), f32>::rand((4099,), 3, dev)),
            1,
        ),
        (
            "randn (f64)",
            &|| drop(Tensor::<(usize,), f64>::randn((4099,), 3, dev)),
            1,
        ),
        (
            "bernoulli_mask",
            &|| {
                drop(Tensor::<(usize,), bool>::bernoulli_mask(
                    (4099,),
                    0.5,
                    3,
                    dev,
                ))
            },
            1,
        ),
        (
            "randint (i64)",
            &|| drop(Tensor::<(usize,), i64>::randint((4099,), -9, 9, 3, dev)),
            1,
        ),
        (
            "rand_uniform (bf16)",
            &|| {
                drop(Tensor::<(usize,), bf16>::rand_uniform(
                    (77,),
                    -1.0,
                    1.0,
                    3,
                    dev,
                ))
            },
            1,
        ),
    ];
    for (name, f, want) in cases {
        // The first call compiles (or loads) the kernel; count the second.
        f();
        let got = launches(f);
        println!("{name}: {got} launch(es)");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn gelu_tanh_bandwidth_against_a_device_copy() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("bandwidth: skipped: no CUDA device: {why}");
            return;
        }
    };
    let n = 1usize << 28;
    let x = Tensor::from_vec(vec![0.5f32; n], (n,), dev);
    let ok = |r: rtx_backends::Result<()>| r.unwrap_or_else(|e| panic!("{e}"));
    let time = |f: &dyn Fn()| -> f64 {
        f();
        ok(cuda::synchronize(0));
        let (start, end) = match (cuda::Event::new(0), cuda::Event::new(0)) {
            (Ok(s), Ok(e)) => (s, e),
            (Err(e), _) | (_, Err(e)) => panic!("{e}"),
        };
        let reps = 10;
        ok(start.record());
        for _ in 0..reps {
            f();
        }
        ok(end.record());
        let ms = start.elapsed_ms(&end).unwrap_or_else(|e| panic!("{e}")) as f64;
        ms / 1e3 / reps as f64
    };
    let bytes = (2 * n * 4) as f64;
    let gelu = time(&|| drop(x.gelu_tanh()));
    let copy = time(&|| drop(x.to_device(dev)));
    println!(
        "2^28 f32: gelu_tanh {:.3} ms = {:.0} GB/s; device copy {:.3} ms = {:.0} GB/s; ratio {:.2}",
        gelu * 1e3,
        bytes / gelu / 1e9,
        copy * 1e3,
        bytes / copy / 1e9,
        copy / gelu
    );
    let side = 1usize << 14;
    let m = Tensor::from_vec(vec![0.5f32; n], (side, side), dev);
    let read = (n * 4) as f64;
    let sum = time(&|| drop(m.sum::<1>()));
    let softmax = time(&|| drop(m.softmax::<1>()));
    println!(
        "16384 x 16384 f32: row sums {:.3} ms = {:.0} GB/s read; softmax of rows {:.3} ms = {:.0} GB/s (read + write)",
        sum * 1e3,
        read / sum / 1e9,
        softmax * 1e3,
        2.0 * read / softmax / 1e9
    );
    let y = x.gelu_tanh().to_vec();
    assert!((y[n - 1] - 0.345_714).abs() < 1e-5, "{}", y[n - 1]);
}

#[test]
fn network_ops_take_a_fixed_number_of_launches() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("network op launches: skipped: no CUDA device: {why}");
            return;
        }
    };
    type D4 = (usize, usize, usize, usize);
    let t4 = |d: [usize; 4], seed| -> Tensor<D4> {
        let n = d.iter().product();
        Tensor::from_vec(values(n, seed, -1.0, 1.0), (d[0], d[1], d[2], d[3]), dev)
    };
    let x = t4([4, 8, 16, 16], 70);
    let w3 = t4([16, 8, 3, 3], 71);
    let w1 = t4([16, 8, 1, 1], 72);
    let b = Tensor::from_vec(values(16, 73, -1.0, 1.0), (16usize,), dev);
    let rows: Tensor<(usize, Const<96>)> =
        Tensor::from_vec(values(64 * 96, 74, -1.0, 1.0), (64, Const), dev);
    let ln = LayerNorm::<96>::new(dev);
    let rms = RMSNorm::<96>::new(dev);
    let launches = |f: &dyn Fn()| {
        let before = launch_count(dev);
        f();
        launch_count(dev) - before
    };
    let conv3 = || drop::<Tensor<D4>>(x.conv2d(&w3, Conv::<1, 1>));
    let cases: [(&str, &dyn Fn(), u64); 7] = [
        ("conv2d 3x3 (im2col, one GEMM)", &conv3, 2),
        (
            "conv2d 1x1 (one GEMM)",
            &|| drop::<Tensor<D4>>(x.conv2d(&w1, Conv::<1>)),
            1,
        ),
        (
            "conv2d 3x3 with bias (im2col, GEMM, add)",
            &|| drop::<Tensor<D4>>(x.conv2d_bias(&w3, &b, Conv::<1, 1>)),
            3,
        ),
        (
            "max_pool2d",
            &|| drop::<Tensor<D4>>(x.max_pool2d(Pool::<2, 2>)),
            1,
        ),
        (
            "avg_pool2d",
            &|| drop::<Tensor<D4>>(x.avg_pool2d(Pool::<3, 1, 1>)),
            1,
        ),
        ("layer_norm forward (fused)", &|| drop(ln.forward(&rows)), 1),
        ("rms_norm forward (fused)", &|| drop(rms.forward(&rows)), 1),
    ];
    for (name, f, want) in cases {
        // The first call compiles (or loads) the kernels; count the second.
        f();
        let got = launches(f);
        println!("{name}: {got} launch(es)");
        assert_eq!(got, want, "{name}");
    }

    // Backward and optimizer entry points, counted at the storage level.
    let ok = |r: rtx_backends::Result<()>| r.unwrap_or_else(|e| panic!("{e}"));
    let l = rtx_backends::Layout::contiguous(&[64, 96]);
    let p = rtx_backends::Layout::contiguous(&[96]);
    let s = |n: usize, seed| ok_s(Storage::from_vec(values::<f32>(n, seed, 0.5, 1.5), dev));
    let (xs, gs, ws) = (s(64 * 96, 75), s(64 * 96, 76), s(96, 77));
    let (_, stats) = xs
        .norm_rows(&l, Some((&ws, &p)), None, 1e-5, true)
        .unwrap_or_else(|e| panic!("{e}"));
    let backward = || {
        let r = gs.norm_rows_backward(&l, (&xs, &l), Some((&ws, &p)), &stats, (true, true));
        ok(r.map(drop));
    };
    let input_only = || {
        let r = gs.norm_rows_backward(&l, (&xs, &l), Some((&ws, &p)), &stats, (false, false));
        ok(r.map(drop));
    };
    let adam = || {
        let sc = rtx_backends::AdamScalars {
            decay: 0.99,
            l2: 0.0,
            beta1: 0.9,
            beta2: 0.999,
            bias_correction2_sqrt: 0.03,
            neg_step_size: -0.01,
            eps: 1e-8,
        };
        ok(xs.adam_update(&l, (&gs, &l), &xs, &gs, None, &sc).map(drop));
    };
    let sgd = || {
        let sc = rtx_backends::SgdScalars {
            lr: 0.1,
            momentum: 0.9,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            first: false,
        };
        ok(xs.sgd_update(&l, (&gs, &l), Some(&gs), &sc).map(drop));
    };
    let cases: [(&str, &dyn Fn(), u64); 4] = [
        ("norm backward with weight and bias gradients", &backward, 3),
        ("norm backward, input gradient only", &input_only, 1),
        ("adamw update", &adam, 1),
        ("sgd momentum update", &sgd, 1),
    ];
    for (name, f, want) in cases {
        f();
        let got = launches(f);
        println!("{name}: {got} launch(es)");
        assert_eq!(got, want, "{name}");
    }
}

fn ok_s<T>(r: rtx_backends::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn layer_norm_8192_by_4096_against_a_device_copy() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("layer_norm bandwidth: skipped: no CUDA device: {why}");
            return;
        }
    };
    const D: usize = 4096;
    let rows = 8192usize;
    let x: Tensor<(usize, Const<D>)> =
        Tensor::from_vec(values(rows * D, 80, -2.0, 2.0), (rows, Const), dev);
    let ln = LayerNorm::<D>::new(dev);
    let ok = |r: rtx_backends::Result<()>| r.unwrap_or_else(|e| panic!("{e}"));
    let time = |f: &dyn Fn()| -> f64 {
        f();
        ok(cuda::synchronize(0));
        let (start, end) = match (cuda::Event::new(0), cuda::Event::new(0)) {
            (Ok(s), Ok(e)) => (s, e),
            (Err(e), _) | (_, Err(e)) => panic!("{e}"),
        };
        let reps = 20;
        ok(start.record());
        for _ in 0..reps {
            f();
        }
        ok(end.record());
        let ms = start.elapsed_ms(&end).unwrap_or_else(|e| panic!("{e}")) as f64;
        ms / 1e3 / reps as f64
    };
    // LayerNorm::forward on a GPU tensor is the fused kernel: one launch (checked above).
    let norm = time(&|| drop(ln.forward(&x)));
    let copy = time(&|| drop(x.to_device(dev)));
    let bytes = (2 * rows * D * 4) as f64;
    println!(
        "layer_norm 8192 x 4096 f32: {:.3} ms = {:.0} GB/s (read + write); device copy {:.3} ms = {:.0} GB/s; copy / norm {:.2}",
        norm * 1e3,
        bytes / norm / 1e9,
        copy * 1e3,
        bytes / copy / 1e9,
        copy / norm
    );
    // Each row of the output has mean 0 and variance 1 (weight 1, bias 0).
    let y = ln.forward(&x).to_vec();
    let row = &y[..D];
    let mean = row.iter().map(|&v| v as f64).sum::<f64>() / D as f64;
    let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / D as f64;
    assert!(
        mean.abs() < 1e-4 && (var - 1.0).abs() < 1e-3,
        "{mean} {var}"
    );
}

#[test]
fn optimizer_steps_over_100_tensors_take_one_launch() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("multi-tensor optimizer launches: skipped: no CUDA device: {why}");
            return;
        }
    };
    // 100 f32 tensors of mixed sizes, as in `benches/gpu_training.rs`.
    let sizes = [1usize, 33, 4099, 1 << 16, 257];
    let init = || -> Vec<Tensor<(usize,)>> {
        (0..100)
            .map(|i| {
                let n = sizes[i % sizes.len()];
                Tensor::from_vec(values(n, 200 + i as u64, -1.0, 1.0), (n,), dev).requires_grad()
            })
            .collect()
    };
    let grads = |model: &Vec<Tensor<(usize,)>>| {
        let mut loss = Tensor::<(), f32>::zeros((), dev);
        for w in model {
            loss = loss + (w * w).sum_all();
        }
        loss.backward()
    };
    type Step<'a> = &'a mut dyn FnMut(&mut Vec<Tensor<(usize,)>>, &mut Gradients);
    let launches = |model: &mut Vec<Tensor<(usize,)>>, step: &mut Step<'_>| {
        let mut g = grads(model);
        let before = launch_count(dev);
        step(model, &mut g);
        launch_count(dev) - before
    };
    let mut adam = Adam::new(1e-3);
    let mut adamw = AdamW::new(1e-3).amsgrad(true);
    let mut sgd = Sgd::new(0.1).momentum(0.9).nesterov(true);
    let mut clip = |m: &mut Vec<Tensor<(usize,)>>, g: &mut Gradients| {
        let norm = clip_grad_norm(g, m, 1.0);
        assert!(norm > 1.0, "the gradients were to be clipped, norm {norm}");
    };
    let cases: [(&str, Step<'_>, u64); 4] = [
        ("adam step over 100 tensors", &mut |m, g| adam.step(m, g), 1),
        (
            "adamw amsgrad step over 100 tensors",
            &mut |m, g| adamw.step(m, g),
            1,
        ),
        (
            "sgd nesterov step over 100 tensors",
            &mut |m, g| sgd.step(m, g),
            1,
        ),
        // Sums of squares, norm and coefficient, scale.
        ("clip_grad_norm over 100 gradients", &mut clip, 3),
    ];
    for (name, mut step, want) in cases {
        let mut model = init();
        // The first steps create the state and compile the kernels; count the third.
        launches(&mut model, &mut step);
        launches(&mut model, &mut step);
        let got = launches(&mut model, &mut step);
        println!("{name}: {got} launch(es)");
        assert_eq!(got, want, "{name}");
    }
}

/// The embedding gradients and the attention join of a GPT-style bf16 step (batch 32,
/// sequence 256, width 512, vocabulary 8192), timed; their launch counts do not depend on
/// the index values (random tokens, one token everywhere, positions).
#[test]
fn gpt_embedding_gradients_and_attention_join_times() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("gpt index op times: skipped: no CUDA device: {why}");
            return;
        }
    };
    let (v, d, n) = (8192usize, 512usize, 8192usize);
    let g = Tensor::from_vec(values::<bf16>(n * d, 111, -1.0, 1.0), (n, d), dev);
    let ids = |ix: Vec<i64>| Tensor::from_vec(ix, (n,), dev);
    let tokens = ids(indices(n, 112, v));
    let one = ids(vec![7; n]);
    let positions = ids((0..n).map(|k| (k % 256) as i64).collect());
    let table: Tensor<(usize, usize), bf16> = Tensor::zeros((v, d), dev);
    let pos_table: Tensor<(usize, usize), bf16> = Tensor::zeros((256usize, d), dev);
    type D4 = (usize, usize, usize, usize);
    let heads: Vec<Tensor<D4, bf16>> = (0..3)
        .map(|i| {
            let x = values::<bf16>(n * d, 113 + i, -1.0, 1.0);
            Tensor::from_vec(x, (32usize, 8usize, 256usize, 64usize), dev)
                .permute::<Axes4<0, 2, 1, 3>>()
        })
        .collect();
    let join = || {
        let j: Tensor<D4, bf16> = Tensor::cat::<2, usize>(&[&heads[0], &heads[1], &heads[2]]);
        drop(j)
    };
    let time = |f: &dyn Fn()| -> (f64, u64) {
        f();
        ok_s(cuda::synchronize(0));
        let before = launch_count(dev);
        f();
        let launches = launch_count(dev) - before;
        let (start, end) = (ok_s(cuda::Event::new(0)), ok_s(cuda::Event::new(0)));
        let reps = 20;
        ok_s(start.record());
        for _ in 0..reps {
            f();
        }
        ok_s(end.record());
        let ms = ok_s(start.elapsed_ms(&end)) as f64;
        (ms * 1e3 / reps as f64, launches)
    };
    let cases: [(&str, &dyn Fn(), u64); 4] = [
        (
            "embedding gradient, 8192 random tokens into [8192, 512] bf16",
            &|| drop(table.index_add::<0, _>(&tokens, &g)),
            5,
        ),
        (
            "embedding gradient, one token 8192 times",
            &|| drop(table.index_add::<0, _>(&one, &g)),
            5,
        ),
        (
            "position gradient, 256 positions 32 times each into [256, 512]",
            &|| drop(pos_table.index_add::<0, _>(&positions, &g)),
            5,
        ),
        (
            "attention join, 3 x [32, 256, 8, 64] bf16 permuted views",
            &join,
            3,
        ),
    ];
    for (name, f, want) in cases {
        let (us, launches) = time(f);
        println!("{name}: {us:.1} us per call ({launches} launch(es), memsets included)");
        assert_eq!(launches, want, "{name}");
    }
}

/// Layer norm of a GPT-style bf16 activation (8192 rows of 512, a warp per row), timed
/// against a device copy of the same tensor: the forward, the input gradient alone, and the
/// backward with the weight and bias gradients; each a fixed number of launches.
#[test]
fn gpt_layer_norm_times() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("gpt layer norm times: skipped: no CUDA device: {why}");
            return;
        }
    };
    let (rows, d) = (8192usize, 512usize);
    let l = rtx_backends::Layout::contiguous(&[rows, d]);
    let p = rtx_backends::Layout::contiguous(&[d]);
    let s = |n: usize, seed, lo, hi| ok_s(Storage::from_vec(values::<bf16>(n, seed, lo, hi), dev));
    let (xs, gs) = (s(rows * d, 120, -2.0, 2.0), s(rows * d, 121, -1.0, 1.0));
    let (ws, bs) = (s(d, 122, 0.5, 1.5), s(d, 123, -0.5, 0.5));
    let (_, stats) = ok_s(xs.norm_rows(&l, Some((&ws, &p)), Some((&bs, &p)), 1e-5, true));
    let forward = || {
        let r = xs.norm_rows(&l, Some((&ws, &p)), Some((&bs, &p)), 1e-5, true);
        drop(ok_s(r));
    };
    let input_only = || {
        let r = gs.norm_rows_backward(&l, (&xs, &l), Some((&ws, &p)), &stats, (false, false));
        drop(ok_s(r));
    };
    let backward = || {
        let r = gs.norm_rows_backward(&l, (&xs, &l), Some((&ws, &p)), &stats, (true, true));
        drop(ok_s(r));
    };
    let copy = || drop(ok_s(xs.to_device(&l, dev)));
    let time = |f: &dyn Fn()| -> (f64, u64) {
        f();
        ok_s(cuda::synchronize(0));
        let before = launch_count(dev);
        f();
        let launches = launch_count(dev) - before;
        let (start, end) = (ok_s(cuda::Event::new(0)), ok_s(cuda::Event::new(0)));
        let reps = 50;
        ok_s(start.record());
        for _ in 0..reps {
            f();
        }
        ok_s(end.record());
        let ms = ok_s(start.elapsed_ms(&end)) as f64;
        (ms * 1e3 / reps as f64, launches)
    };
    // Bytes each must move at least, 2 a bf16 value: the copy and the forward read and write
    // the tensor; the input gradient reads dy and x and writes dx; the full backward reads dy
    // and x once more for the parameter gradients.
    let n = (rows * d) as f64;
    let (copy_us, _) = time(&copy);
    println!(
        "device copy, 8192 x 512 bf16: {copy_us:.1} us per call = {:.0} GB/s",
        4.0 * n / copy_us / 1e3
    );
    let cases: [(&str, &dyn Fn(), f64, u64); 3] = [
        ("layer_norm forward", &forward, 4.0 * n, 1),
        ("layer_norm input gradient", &input_only, 6.0 * n, 1),
        (
            "layer_norm backward with weight and bias",
            &backward,
            10.0 * n,
            3,
        ),
    ];
    for (name, f, bytes, want) in cases {
        let (us, launches) = time(f);
        println!(
            "{name}, 8192 x 512 bf16: {us:.1} us per call = {:.0} GB/s, {:.2}x the copy's time ({launches} launch(es))",
            bytes / us / 1e3,
            us / copy_us
        );
        assert_eq!(launches, want, "{name}");
    }
}
