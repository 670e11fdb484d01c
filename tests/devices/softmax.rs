//! Softmax and log-softmax at a GPT-style model's shapes on every device, forward and the
//! fused gradient along the last axis: attention rows of 256 (a warp per row on a GPU), rows
//! of 600 and 1000 (held by a warp in the forward; read in chunks by a warp, or held by a
//! block, in the backward), a row of 40 000 (a block per row, read in chunks), a gradient
//! that is a broadcast view, and a timing of the kernels the profile of a training step
//! showed (GPU only: bias-gradient sums, attention softmax and its gradient).

use super::*;
use rtx_backends::launch_count;

/// The gradient with respect to `x` of `Σ f(x) * w`, as f64s.
macro_rules! weighted_grad {
    ($x:expr, $y:expr, $w:expr) => {{
        let grads = ($y * $w).sum_all().backward();
        f64s(&grads.get(&$x).expect("a gradient reaches the input"))
    }};
}

fn attention_case<E: Float>() {
    let (b, h, t) = (64usize, 8usize, 256usize);
    let scores = values::<E>(b * h * t, 50, -6.0, 6.0);
    let weights = values::<E>(b * h * t, 51, -1.0, 1.0);
    let r600 = values::<E>(9 * 600, 52, -6.0, 6.0);
    let w600 = values::<E>(9 * 600, 53, -1.0, 1.0);
    let r1000 = values::<E>(7 * 1000, 54, -6.0, 6.0);
    let w1000 = values::<E>(7 * 1000, 55, -1.0, 1.0);
    let long = values::<E>(40_000, 56, -8.0, 8.0);
    let wlong = values::<E>(40_000, 57, -1.0, 1.0);
    on_every_device::<E>("softmax at training shapes", |dev| {
        let mut out = Outputs::new();
        let x = || Tensor::from_vec(scores.clone(), (b, h, t), dev).requires_grad();
        let w = Tensor::from_vec(weights.clone(), (b, h, t), dev);
        let s = x();
        let y = s.softmax::<2>();
        out.push(("softmax [64, 8, 256]".into(), f64s(&y)));
        out.push(("d softmax [64, 8, 256]".into(), weighted_grad!(s, &y, &w)));
        let s = x();
        let y = s.log_softmax::<2>();
        out.push(("log_softmax [64, 8, 256]".into(), f64s(&y)));
        out.push((
            "d log_softmax [64, 8, 256]".into(),
            weighted_grad!(s, &y, &w),
        ));
        // `Σ softmax(x)`: the gradient reaching softmax is a broadcast view of one value.
        let s = x();
        let g = s.softmax::<2>().sum_all().backward();
        out.push((
            "d Σ softmax (broadcast gradient)".into(),
            f64s(&g.get(&s).expect("a gradient reaches the input")),
        ));
        for (name, data, wd, rows, cols) in [
            ("600", &r600, &w600, 9usize, 600usize),
            ("1000", &r1000, &w1000, 7, 1000),
            ("40000", &long, &wlong, 1, 40_000),
        ] {
            let w = Tensor::from_vec(wd.clone(), (rows, cols), dev);
            let s = Tensor::from_vec(data.clone(), (rows, cols), dev).requires_grad();
            let y = s.softmax::<1>();
            out.push((format!("softmax rows of {name}"), f64s(&y)));
            out.push((
                format!("d softmax rows of {name}"),
                weighted_grad!(s, &y, &w),
            ));
            let s = Tensor::from_vec(data.clone(), (rows, cols), dev).requires_grad();
            let y = s.log_softmax::<1>();
            out.push((format!("log_softmax rows of {name}"), f64s(&y)));
            out.push((
                format!("d log_softmax rows of {name}"),
                weighted_grad!(s, &y, &w),
            ));
        }
        out
    });
}

#[test]
fn softmax_and_its_fused_gradient_match_the_cpu_at_training_shapes() {
    every_float!(attention_case);
}

/// Seconds per call of `f` on GPU 0, over 20 calls after a warm-up.
fn time(f: &dyn Fn()) -> f64 {
    let ok = |r: rtx_backends::Result<()>| r.unwrap_or_else(|e| panic!("{e}"));
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
}

#[test]
fn training_step_row_kernels_launches_and_bandwidth() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("row kernel bandwidth: skipped: no CUDA device: {why}");
            return;
        }
    };
    let launches = |f: &dyn Fn()| {
        let before = launch_count(dev);
        f();
        launch_count(dev) - before
    };
    let gbs = |bytes: usize, s: f64| bytes as f64 / s / 1e9;
    for n in [512usize, 1536, 2048] {
        let x = Tensor::from_vec(values::<bf16>(8192 * n, 60, -1.0, 1.0), (8192usize, n), dev);
        // The column blocks are few: a split over chunks of the axis, then the combine.
        assert_eq!(launches(&|| drop(x.sum::<0>())), 2, "sum 0 of [8192, {n}]");
        let s = time(&|| drop(x.sum::<0>()));
        println!(
            "bf16 sum over axis 0 of [8192, {n}]: {:.1} us = {:.0} GB/s read",
            s * 1e6,
            gbs(8192 * n * 2, s)
        );
    }
    let (rows, cols) = (32 * 8 * 256usize, 256usize);
    let x = Tensor::from_vec(
        values::<bf16>(rows * cols, 61, -6.0, 6.0),
        (rows, cols),
        dev,
    );
    let g = Tensor::from_vec(
        values::<bf16>(rows * cols, 62, -1.0, 1.0),
        (rows, cols),
        dev,
    );
    assert_eq!(launches(&|| drop(x.softmax::<1>())), 1, "softmax");
    assert_eq!(launches(&|| drop(x.sum::<1>())), 1, "row sums");
    let bytes = rows * cols * 2;
    let soft = time(&|| drop(x.softmax::<1>()));
    let sums = time(&|| drop(x.sum::<1>()));
    println!(
        "bf16 [65536, 256]: softmax {:.1} us = {:.0} GB/s (read + write); row sums {:.1} us = {:.0} GB/s read",
        soft * 1e6,
        gbs(2 * bytes, soft),
        sums * 1e6,
        gbs(bytes, sums)
    );
    // The backward of `Σ softmax(x) * g` is the product's gradient (a multiply) and the fused
    // softmax gradient: a mul launch and one row-kernel launch.
    let xg = x.clone().requires_grad();
    let back = || {
        let loss = (xg.softmax::<1>() * &g).sum_all();
        drop(loss.backward());
    };
    let total = time(&back);
    let forward = time(&|| drop((xg.softmax::<1>() * &g).sum_all()));
    println!(
        "bf16 [65536, 256]: softmax forward and backward of Σ softmax(x) g {:.1} us ({:.1} us of it backward, {} launches)",
        total * 1e6,
        (total - forward) * 1e6,
        launches(&back)
    );
}
