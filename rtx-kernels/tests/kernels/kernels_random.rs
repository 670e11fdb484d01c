//! The native side of the Philox kernels against the scalar definitions in
//! `rtx_kernels::Philox`, mapped as the CPU backend maps them: raw-word draws (uniform,
//! Bernoulli, integers) bit for bit in every element type, normal draws in f64 bit for bit and
//! in f32 within a few ulps (the kernel's f32 `ln` is the fast one of `FloatMath`).

use rtx_kernels::kernel::LaunchConfig;
use rtx_kernels::kernels::{random_bernoulli, random_int, random_normal, random_uniform};
use rtx_kernels::{Element, Float, Num, Philox, bf16, f16};

const SEEDS: [u64; 3] = [0, 42, 0x1234_5678_9abc_def0];

/// Launch shapes: one small block, and several blocks that each loop.
fn grids() -> [LaunchConfig; 2] {
    [LaunchConfig::new(1, 32), LaunchConfig::new(3, 64)]
}

fn uniform_case<E: Float>(n: usize, low: f64, high: f64) {
    let wide = E::DTYPE == rtx_kernels::DType::F64;
    let high_e = E::from_f64(high);
    // The largest E below high, found by stepping the draw down until it rounds below.
    let below = {
        let mut v = high_e.to_f64();
        let mut step = v.abs().max(1e-30) * 1e-7;
        while E::from_f64(v) >= high_e {
            v -= step;
            step *= 2.0;
        }
        E::from_f64(v)
    };
    for seed in SEEDS {
        let g = Philox::new(seed);
        let want: Vec<E> = (0..n as u64)
            .map(|i| {
                let u = if wide {
                    g.uniform_f64(i)
                } else {
                    g.uniform_f32(i) as f64
                };
                let r = E::from_f64(low + u * (high - low));
                if r >= high_e { below } else { r }
            })
            .collect();
        for grid in grids() {
            let mut out = vec![E::default(); n];
            random_uniform(
                grid,
                &mut out,
                n,
                seed,
                wide as u32,
                low,
                high - low,
                high_e.to_f64(),
                below,
            )
            .unwrap();
            let same = out
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_f64().to_bits() == b.to_f64().to_bits());
            assert!(same, "{:?} seed {seed}", E::DTYPE);
        }
    }
}

#[test]
fn uniform_draws_are_the_cpu_streams_bit_for_bit() {
    uniform_case::<f32>(1003, -3.0, 5.5);
    uniform_case::<f64>(1001, -1.0, 1e-3);
    uniform_case::<f16>(999, 0.0, 1.0);
    // bf16 rounds many draws up to 1.0: they must come back as the value below it.
    uniform_case::<bf16>(4001, 0.0, 1.0);
    uniform_case::<bf16>(998, -7.25, 100.0);
}

fn normal_case<E: Float>(n: usize, mean: f64, std: f64, exact: bool) {
    let wide = E::DTYPE == rtx_kernels::DType::F64;
    for seed in SEEDS {
        let g = Philox::new(seed);
        for grid in grids() {
            let mut out = vec![E::default(); n];
            random_normal(grid, &mut out, n, seed, wide as u32, mean, std).unwrap();
            for (i, o) in out.iter().enumerate() {
                let z = if wide {
                    g.normal_f64(i as u64)
                } else {
                    g.normal_f32(i as u64) as f64
                };
                let want = E::from_f64(mean + std * z).to_f64();
                let got = o.to_f64();
                if exact {
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{:?} seed {seed} at {i}",
                        E::DTYPE
                    );
                } else {
                    let tol = 4.0 * f32::EPSILON as f64 * (std * z.abs() + mean.abs()).max(1.0);
                    assert!(
                        (got - want).abs() <= tol,
                        "{:?} seed {seed} at {i}: {got} vs {want}",
                        E::DTYPE
                    );
                }
            }
        }
    }
}

#[test]
fn normal_draws_follow_box_muller_on_the_same_words() {
    normal_case::<f64>(1001, 0.5, 2.0, true);
    normal_case::<f32>(1003, 0.0, 1.0, false);
    normal_case::<f32>(10, -3.0, 0.25, false);
}

fn bernoulli_case<E: Element>(n: usize, p: f64) {
    let t = Philox::bernoulli_threshold(p);
    for seed in SEEDS {
        let g = Philox::new(seed);
        let want: Vec<E> = (0..n as u64)
            .map(|i| E::from_i64(g.bernoulli(i, t) as i64))
            .collect();
        for grid in grids() {
            let mut out = vec![E::default(); n];
            random_bernoulli(grid, &mut out, n, seed, t).unwrap();
            assert_eq!(out, want, "{:?} seed {seed} p {p}", E::DTYPE);
        }
    }
}

#[test]
fn bernoulli_draws_compare_raw_words_with_the_threshold() {
    bernoulli_case::<f32>(1001, 0.3);
    bernoulli_case::<bf16>(17, 0.9);
    bernoulli_case::<i64>(999, 0.5);
    bernoulli_case::<u8>(6, 1.0);
    bernoulli_case::<bool>(1002, 0.0);
    bernoulli_case::<bool>(1003, 0.5);
}

fn int_case<E: Num>(n: usize, low: i64, range: u64) {
    for seed in SEEDS {
        let g = Philox::new(seed);
        let want: Vec<E> = (0..n as u64)
            .map(|i| {
                let w = ((g.word(2 * i) as u64) << 32) | g.word(2 * i + 1) as u64;
                let r = if range == 0 {
                    w
                } else {
                    ((w as u128 * range as u128) >> 64) as u64
                };
                E::from_i64(low.wrapping_add(r as i64))
            })
            .collect();
        for grid in grids() {
            let mut out = vec![E::default(); n];
            random_int(grid, &mut out, n, seed, low, range).unwrap();
            assert_eq!(out, want, "{:?} seed {seed}", E::DTYPE);
        }
    }
}

#[test]
fn integer_draws_multiply_and_shift_two_words() {
    int_case::<i64>(1001, -5, 10);
    int_case::<i64>(100, i64::MIN, 0);
    int_case::<i32>(333, -100_000, 300_000);
    int_case::<u8>(64, 0, 256);
    int_case::<f32>(99, -1 << 40, 1 << 41);
    int_case::<f16>(99, -20, 40);
}
