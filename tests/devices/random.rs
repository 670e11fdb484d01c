//! Random tensors on every device: the same seed gives the CPU's tensor, bitwise for uniform,
//! Bernoulli and integer draws (exact arithmetic on the Philox words), within the stated ulps
//! for normal draws (`ln`, `sin` and `cos` differ in their last bits between libraries).

use super::*;

/// Seeds whose high half is zero, small, and large (the Philox key uses both halves).
const SEEDS: [u64; 3] = [0, 7, 0xfeed_beef_dead_c0de];

/// Element counts that end inside a Philox block, and several launch blocks' worth.
const N: usize = 100_003;

fn uniform_case<E: Float>() {
    same_on_every_device::<E>("rand", |dev| {
        let mut out = Vec::new();
        for seed in SEEDS {
            let u: Tensor<(usize,), E> = Tensor::rand((N,), seed, dev);
            let wide: Tensor<(usize, usize), E> =
                Tensor::rand_uniform((31, 17), -3.5, 1e3, seed, dev);
            let b: Tensor<(usize,), E> = Tensor::bernoulli((N,), 0.37, seed, dev);
            out.push((format!("rand seed {seed}"), bits(&u)));
            out.push((format!("rand_uniform seed {seed}"), bits(&wide)));
            out.push((format!("bernoulli seed {seed}"), bits(&b)));
        }
        out
    });
}

#[test]
fn uniform_and_bernoulli_draws_are_bitwise_the_cpus() {
    every_float!(uniform_case);
    same_on_every_device::<bool>("bernoulli_mask", |dev| {
        let m: Tensor<(usize, usize), bool> = Tensor::bernoulli_mask((301, 7), 0.5, 3, dev);
        vec![("mask".into(), bits(&m))]
    });
}

fn randint_case<E: Num>(low: i64, high: i64) {
    same_on_every_device::<E>("randint", |dev| {
        SEEDS
            .iter()
            .map(|&seed| {
                let t: Tensor<(usize,), E> = Tensor::randint((N,), low, high, seed, dev);
                (format!("randint seed {seed}"), bits(&t))
            })
            .collect()
    });
}

#[test]
fn integer_draws_are_bitwise_the_cpus() {
    randint_case::<i64>(i64::MIN, i64::MAX);
    randint_case::<i64>(-5, 5);
    randint_case::<i32>(-100_000, 1 << 30);
    randint_case::<u8>(0, 256);
    randint_case::<f32>(-1000, 1000);
    randint_case::<f64>(-(1 << 52), 1 << 52);
    randint_case::<bf16>(0, 10);
}

fn normal_case<E: Float>() {
    on_every_device::<E>("randn", |dev| {
        let mut out = Vec::new();
        for seed in SEEDS {
            let z: Tensor<(usize,), E> = Tensor::randn((N,), seed, dev);
            let w: Tensor<(usize, usize), E> = Tensor::randn_with((33, 9), 2.5, 0.1, seed, dev);
            out.push((format!("randn seed {seed}"), f64s(&z)));
            out.push((format!("randn_with seed {seed}"), f64s(&w)));
        }
        out
    });
}

#[test]
fn normal_draws_match_the_cpu_within_ulps() {
    every_float!(normal_case);
}

/// Dropout in training: one launch whose mask is the Bernoulli stream of the layer's seed,
/// bitwise the CPU's output and gradient, over a strided input.
fn dropout_case<E: Float>() {
    same_on_every_device::<E>("dropout", |dev| {
        let mut out = Exact::new();
        for p in [0.1, 0.5, 0.9] {
            let drop = Dropout::new(p, 11);
            let cols = N / 3 + 1;
            let stored =
                Tensor::from_vec(values::<E>(3 * cols, 45, -3.0, 3.0), (3usize, cols), dev);
            let x = stored.t().requires_grad();
            let y = drop.forward(&x);
            out.push((format!("p {p} output"), bits(&y)));
            let w = Tensor::from_vec(values::<E>(3 * cols, 46, -1.0, 1.0), (cols, 3usize), dev);
            let g = (&y * &w).sum_all().backward();
            let dx = g.get(&x).map(|t| bits(&t)).unwrap_or_default();
            out.push((format!("p {p} gradient"), dx));
        }
        out
    });
}

#[test]
fn dropout_is_bitwise_the_cpus() {
    every_float!(dropout_case);
    if let Ok(gpus) = gpus() {
        for dev in gpus {
            let x: Tensor<(usize,), f32> = Tensor::ones((N,), dev);
            let drop = Dropout::new(0.3, 5);
            let _ = drop.forward(&x);
            let before = rtx_backends::launch_count(dev);
            let _ = drop.forward(&x);
            let launches = rtx_backends::launch_count(dev) - before;
            println!("dropout forward on {dev}: {launches} launch(es)");
            assert_eq!(launches, 1);
        }
    }
}
