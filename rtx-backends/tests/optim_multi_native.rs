//! The multi-tensor optimizer and clipping kernels (`rtx_kernels::kernels::{adam_multi,
//! sgd_multi, sum_squares_multi, clip_coef, scale_multi}`), run natively on the block
//! emulation and held to the CPU backend's per-tensor updates (`rtx_backends::cpu::optim`) bit
//! for bit over several steps: tensors of mixed sizes (an empty one included), several chunks
//! per tensor, fewer blocks than chunks, and one gradient broadcast from a single value (step
//! 0). f32 and f64: the native kernels take `T` scalars, which for f16 and bf16 would round
//! them to 16 bits where the GPU entry takes them in f32.

use rtx_backends::cpu::optim;
use rtx_backends::{AdamScalars, SgdScalars};
use rtx_kernels::kernel::LaunchConfig;
use rtx_kernels::kernels::{adam_multi, clip_coef, scale_multi, sgd_multi, sum_squares_multi};
use rtx_kernels::{Element, Float};

/// Tensor sizes: one element, odd sizes, several chunks, and an empty tensor.
const LENS: [usize; 5] = [1, 33, 4099, 0, 3 * CHUNK + 5];
/// Elements per chunk (smaller than the GPU's, so that tensors span several).
const CHUNK: usize = 1024;
/// Tensor 2's gradient is broadcast from one value.
const BROADCAST: usize = 2;
/// Fewer blocks than chunks: the grid-stride loop over chunks is exercised.
fn launch() -> LaunchConfig {
    LaunchConfig::new(3, 64)
}

/// The chunk map of `LENS`: each chunk's tensor and first element.
fn chunks() -> (Vec<usize>, Vec<usize>) {
    let (mut rows, mut starts) = (Vec::new(), Vec::new());
    for (t, &n) in LENS.iter().enumerate() {
        for s in (0..n).step_by(CHUNK) {
            rows.push(t);
            starts.push(s);
        }
    }
    (rows, starts)
}

/// Reproducible values in [lo, hi) (xorshift64*), rounded to `E`.
fn values<E: Element>(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<E> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            E::from_f64(lo + (hi - lo) * r)
        })
        .collect()
}

/// Step `k`'s gradients: the kernels' rows (tensor `BROADCAST`'s is its one value) and the
/// full gradients the CPU reads.
fn grads<E: Float>(k: u64) -> (Vec<Vec<E>>, Vec<Vec<E>>) {
    let full: Vec<Vec<E>> = LENS
        .iter()
        .enumerate()
        .map(|(t, &n)| {
            let v = values::<E>(n, 100 * k + t as u64, -2.0, 2.0);
            match (t, v.first()) {
                (BROADCAST, Some(&x)) => vec![x; n],
                _ => v,
            }
        })
        .collect();
    let rows = full
        .iter()
        .enumerate()
        .map(|(t, g)| match t {
            BROADCAST => g[..1].to_vec(),
            _ => g.clone(),
        })
        .collect();
    (rows, full)
}

/// The gradient steps: 0 for the broadcast tensor, 1 otherwise.
fn gsteps() -> Vec<usize> {
    (0..LENS.len()).map(|t| (t != BROADCAST) as usize).collect()
}

fn zeros<E: Float>() -> Vec<Vec<E>> {
    LENS.iter().map(|&n| vec![E::from_f64(0.0); n]).collect()
}

fn muts<E>(v: &mut [Vec<E>]) -> Vec<&mut [E]> {
    v.iter_mut().map(|x| &mut x[..]).collect()
}

fn refs<E>(v: &[Vec<E>]) -> Vec<&[E]> {
    v.iter().map(|x| &x[..]).collect()
}

/// Three Adam steps through `adam_multi` and through the CPU backend, compared bit for bit.
fn adam_case<E: Float>(weight_decay: f64, decoupled: bool, amsgrad: bool, betas: (f64, f64)) {
    let lr = 0.05;
    let init: Vec<Vec<E>> = LENS
        .iter()
        .enumerate()
        .map(|(t, &n)| values::<E>(n, t as u64, -1.0, 1.0))
        .collect();
    let (mut p, mut m, mut v, mut x) = (init.clone(), zeros::<E>(), zeros::<E>(), zeros::<E>());
    let (mut cp, mut cm, mut cv, mut cx) = (init, zeros::<E>(), zeros::<E>(), zeros::<E>());
    let (rows, starts) = chunks();
    let (b1, b2) = betas;
    for k in 1..=3 {
        let (g, full) = grads::<E>(k);
        let step = k as f64;
        let (decay, l2) = match decoupled {
            true => (1.0 - lr * weight_decay, 0.0),
            false => (1.0, weight_decay),
        };
        let s = AdamScalars {
            decay,
            l2,
            beta1: b1,
            beta2: b2,
            bias_correction2_sqrt: (1.0 - b2.powf(step)).powf(0.5),
            neg_step_size: -(lr / (1.0 - b1.powf(step))),
            eps: 1e-8,
        };
        for t in 0..LENS.len() {
            let xt = amsgrad.then_some(&mut cx[t][..]);
            optim::adam(&mut cp[t], &full[t], &mut cm[t], &mut cv[t], xt, &s);
        }
        let c = |x: f64| E::from_f64(x);
        let w1 = 1.0 - b1;
        let mut xs = if amsgrad { muts(&mut x) } else { Vec::new() };
        adam_multi(
            launch(),
            &mut muts(&mut p),
            &refs(&g),
            &gsteps(),
            &mut muts(&mut m),
            &mut muts(&mut v),
            &mut xs,
            &rows,
            &starts,
            &LENS,
            rows.len(),
            CHUNK,
            c(s.decay),
            c(s.l2),
            c(w1),
            c(b2),
            c(1.0 - b2),
            c(s.bias_correction2_sqrt),
            c(s.neg_step_size),
            c(s.eps),
            (s.decay != 1.0) as u32,
            (s.l2 != 0.0) as u32,
            (w1.abs() < 0.5) as u32,
            amsgrad as u32,
        )
        .unwrap();
        let what = format!(
            "adam {:?} wd {weight_decay} decoupled {decoupled} amsgrad {amsgrad} betas {betas:?} step {k}",
            E::DTYPE
        );
        assert_eq!(p, cp, "{what}: parameters");
        assert_eq!(m, cm, "{what}: exp_avg");
        assert_eq!(v, cv, "{what}: exp_avg_sq");
        if amsgrad {
            assert_eq!(x, cx, "{what}: max_exp_avg_sq");
        }
    }
}

/// Three SGD steps through `sgd_multi` and through the CPU backend, compared bit for bit.
fn sgd_case<E: Float>(momentum: f64, dampening: f64, weight_decay: f64, nesterov: bool) {
    let init: Vec<Vec<E>> = LENS
        .iter()
        .enumerate()
        .map(|(t, &n)| values::<E>(n, 50 + t as u64, -1.0, 1.0))
        .collect();
    let (mut p, mut b, mut cp, mut cb) = (init.clone(), zeros::<E>(), init, zeros::<E>());
    let (rows, starts) = chunks();
    let has_buf = momentum != 0.0;
    for k in 1..=3 {
        let (g, full) = grads::<E>(k);
        let s = SgdScalars {
            lr: 0.1,
            momentum,
            dampening,
            weight_decay,
            nesterov,
            first: k == 1,
        };
        for t in 0..LENS.len() {
            let bt = has_buf.then_some(&mut cb[t][..]);
            optim::sgd(&mut cp[t], &full[t], bt, &s);
        }
        let c = |x: f64| E::from_f64(x);
        let mut bs = if has_buf { muts(&mut b) } else { Vec::new() };
        sgd_multi(
            launch(),
            &mut muts(&mut p),
            &refs(&g),
            &gsteps(),
            &mut bs,
            &rows,
            &starts,
            &LENS,
            rows.len(),
            CHUNK,
            c(-s.lr),
            c(s.momentum),
            c(1.0 - s.dampening),
            c(s.weight_decay),
            (s.weight_decay != 0.0) as u32,
            has_buf as u32,
            s.first as u32,
            s.nesterov as u32,
        )
        .unwrap();
        let what = format!(
            "sgd {:?} momentum {momentum} dampening {dampening} wd {weight_decay} nesterov {nesterov} step {k}",
            E::DTYPE
        );
        assert_eq!(p, cp, "{what}: parameters");
        if has_buf {
            assert_eq!(b, cb, "{what}: momentum buffers");
        }
    }
}

#[test]
fn adam_multi_matches_the_cpu_updates() {
    for betas in [(0.9, 0.999), (0.3, 0.9)] {
        adam_case::<f32>(0.0, false, false, betas);
        adam_case::<f32>(0.1, false, false, betas);
        adam_case::<f32>(0.1, true, false, betas);
        adam_case::<f32>(0.0, false, true, betas);
        adam_case::<f64>(0.1, false, true, betas);
        adam_case::<f64>(0.1, true, false, betas);
    }
}

#[test]
fn sgd_multi_matches_the_cpu_updates() {
    sgd_case::<f32>(0.0, 0.0, 0.0, false);
    sgd_case::<f32>(0.0, 0.0, 0.01, false);
    sgd_case::<f32>(0.9, 0.2, 0.01, false);
    sgd_case::<f32>(0.9, 0.0, 0.0, true);
    sgd_case::<f64>(0.9, 0.0, 0.01, true);
    sgd_case::<f64>(0.5, 0.1, 0.0, false);
}

/// The device clipping pipeline: the norm from the partial sums (within f64 rounding of the
/// sum in another order), and each gradient scaled by the coefficient rounded to `E`, exactly,
/// or copied when the coefficient is not below 1.
fn clip_case<E: Float>(max_norm: f64) {
    let (g, full) = grads::<E>(7);
    let (rows, starts) = chunks();
    let mut partial = vec![f64::NAN; rows.len()];
    sum_squares_multi(
        LaunchConfig::new(3, 256),
        &refs(&g),
        &gsteps(),
        &rows,
        &starts,
        &LENS,
        rows.len(),
        CHUNK,
        &mut partial,
    )
    .unwrap();
    let mut out = vec![0.0f64; 2];
    clip_coef::<E>(
        LaunchConfig::new(1, 256),
        &partial,
        rows.len(),
        max_norm,
        &mut out,
    )
    .unwrap();
    let want: f64 = full.iter().flatten().map(|x| x.to_f64() * x.to_f64()).sum();
    let want = want.sqrt();
    assert!(
        (out[0] - want).abs() <= 1e-13 * want,
        "{:?}: norm {} against {want}",
        E::DTYPE,
        out[0]
    );
    assert_eq!(out[1], max_norm / (out[0] + 1e-6));
    let mut scaled = zeros::<E>();
    scale_multi(
        launch(),
        &refs(&g),
        &gsteps(),
        &mut muts(&mut scaled),
        &rows,
        &starts,
        &LENS,
        rows.len(),
        CHUNK,
        &out,
    )
    .unwrap();
    let coef = out[1];
    let expect: Vec<Vec<E>> = full
        .iter()
        .map(|g| {
            g.iter()
                .map(|&x| match coef < 1.0 {
                    true => E::from_acc(x.to_acc() * E::from_f64(coef).to_acc()),
                    false => x,
                })
                .collect()
        })
        .collect();
    assert_eq!(scaled, expect, "{:?}: max_norm {max_norm}", E::DTYPE);
}

#[test]
fn clipping_kernels_match_the_host_norm() {
    for max_norm in [0.5, 1e9] {
        clip_case::<f32>(max_norm);
        clip_case::<f64>(max_norm);
    }
}
