//! Attention on GPUs in f16 and bf16, which runs fused (one launch forward, three backward),
//! against the composition computed in f32 on the CPU from the same rounded inputs: the output
//! and the gradients of q, k and v, causal or not, over sizes with partial tiles, fewer queries
//! than keys, and head dims 16, 64 and 128; and `CausalSelfAttention` the same way, eager and
//! compiled. Errors are the largest `|got - want|` over the largest `|want|`.

use super::*;
use rtx::Gradients;
use rtx::compile::StaticForward;
use rtx::nn::CausalSelfAttention;
use rtx_backends::launch_count;

type Heads<E> = Tensor<(usize, usize, usize, usize), E>;

/// The largest `|got - want|` over the largest `|want|`; the largest `|got - want|` itself
/// when `want` is all zeros (a single key's query gradient is exactly 0, for one).
fn relative(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let err = got
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max((g - w).abs()));
    if scale == 0.0 { err } else { err / scale }
}

/// How far f16 and bf16 results may be from the f32 composition: the probabilities are
/// rounded to the type before they weight the values, as FlashAttention does.
fn half_tolerance(d: DType) -> f64 {
    if d == DType::F16 { 1e-2 } else { 2e-2 }
}

/// `y` and the gradients of `q`, `k` and `v` for `Σ y · w`, as f64s.
fn attend<E: Float>(
    [q, k, v]: [&Heads<E>; 3],
    w: &Heads<E>,
    causal: bool,
    scale: f64,
) -> [Vec<f64>; 4] {
    let y = if causal {
        q.causal_attention(k, v, scale)
    } else {
        q.attention(k, v, None, scale)
    };
    let grads = (&y * w).sum_all().backward();
    let g = |x: &Heads<E>| f64s(&grads.get(x).expect("a gradient reaches the input"));
    [f64s(&y), g(q), g(k), g(v)]
}

fn case<E: Float>((b, h, t, s, d): (usize, usize, usize, usize, usize), causal: bool) {
    let name = format!(
        "attention {:?} [{b}, {h}, {t}, {d}] over {s} keys, causal {causal}",
        E::DTYPE
    );
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("{name}: skipped: no CUDA device: {why}");
            return;
        }
    };
    let seed = (t * 31 + s * 7 + d) as u64;
    let q = values::<E>(b * h * t * d, seed, -2.0, 2.0);
    let k = values::<E>(b * h * s * d, seed + 1, -2.0, 2.0);
    let v = values::<E>(b * h * s * d, seed + 2, -1.0, 1.0);
    let w = values::<E>(b * h * t * d, seed + 3, -1.0, 1.0);
    let scale = 1.0 / (d as f64).sqrt();
    // The reference: the same (rounded) values in f32 through the composition on the CPU.
    let f32s = |x: &[E], n: usize| {
        let x: Vec<f32> = x.iter().map(|e| e.to_f64() as f32).collect();
        Tensor::from_vec(x, (b, h, n, d), Device::Cpu)
    };
    let (qr, kr, vr) = (f32s(&q, t), f32s(&k, s), f32s(&v, s));
    let [qr, kr, vr] = [qr, kr, vr].map(|x| x.requires_grad());
    let want = attend([&qr, &kr, &vr], &f32s(&w, t), causal, scale);
    for dev in gpus {
        let up = |x: &[E], n: usize| Tensor::from_vec(x.to_vec(), (b, h, n, d), dev);
        let [qg, kg, vg] = [up(&q, t), up(&k, s), up(&v, s)].map(|x| x.requires_grad());
        // Dense inputs: the fused forward is exactly one launch.
        let before = launch_count(dev);
        let y = if causal {
            qg.causal_attention(&kg, &vg, scale)
        } else {
            qg.attention(&kg, &vg, None, scale)
        };
        assert_eq!(
            launch_count(dev) - before,
            1,
            "{name} on {dev}: one fused launch"
        );
        drop(y);
        let got = attend([&qg, &kg, &vg], &up(&w, t), causal, scale);
        for (what, (g, w)) in ["o", "dq", "dk", "dv"].iter().zip(got.iter().zip(&want)) {
            let err = relative(g, w);
            assert!(
                err <= half_tolerance(E::DTYPE),
                "{name} on {dev}: {what} is {err:.2e} (relative) from the f32 composition"
            );
        }
    }
}

fn sizes<E: Float>() {
    for causal in [true, false] {
        case::<E>((2, 3, 64, 64, 64), causal);
        case::<E>((1, 2, 100, 100, 128), causal);
        case::<E>((2, 2, 37, 130, 16), causal);
        case::<E>((1, 1, 1, 1, 64), causal);
    }
}

#[test]
fn fused_attention_matches_the_f32_composition() {
    sizes::<f16>();
    sizes::<bf16>();
}

/// `CausalSelfAttention` in `E`, eager and compiled, on a GPU against the same weights in f32
/// on the CPU: the output and the gradients of the input and of every weight.
fn layer_case<E: Float>() {
    let name = format!("CausalSelfAttention {:?}", E::DTYPE);
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("{name}: skipped: no CUDA device: {why}");
            return;
        }
    };
    let (b, t) = (3usize, 70usize);
    let x = values::<E>(b * t * 128, 9, -1.0, 1.0);
    let w = values::<E>(b * t * 128, 10, -1.0, 1.0);
    // The reference's weights are the half-precision ones, widened (a checkpoint loads into
    // a model of another float type by casting).
    let half = CausalSelfAttention::<128, 2, E>::new(Device::Cpu, 4);
    let path = std::env::temp_dir().join(format!(
        "rtx-attention-{}-{:?}.safetensors",
        std::process::id(),
        E::DTYPE
    ));
    half.save(&path).unwrap();
    let mut reference = CausalSelfAttention::<128, 2, f32>::new(Device::Cpu, 0);
    reference.load(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let widen = |v: Vec<E>| {
        v.into_iter()
            .map(|e| e.to_f64() as f32)
            .collect::<Vec<f32>>()
    };
    type Seq<E> = Tensor<(usize, Const<70>, Const<128>), E>;
    let xr: Seq<f32> = Tensor::from_vec(widen(x.clone()), (b, Const, Const), Device::Cpu);
    let wr: Seq<f32> = Tensor::from_vec(widen(w.clone()), (b, Const, Const), Device::Cpu);
    let xr = xr.requires_grad();
    let grads = (&reference.forward(&xr) * &wr).sum_all().backward();
    let want_dx = f64s(&grads.get(&xr).unwrap());
    let want_y = f64s(&reference.forward(&xr));
    for dev in gpus {
        let mut layer = CausalSelfAttention::<128, 2, E>::new(Device::Cpu, 4);
        layer.move_to(dev);
        let xg: Seq<E> = Tensor::from_vec(x.clone(), (b, Const, Const), dev);
        let wg: Seq<E> = Tensor::from_vec(w.clone(), (b, Const, Const), dev);
        let xg = xg.requires_grad();
        let y = layer.forward(&xg);
        let err = relative(&f64s(&y), &want_y);
        assert!(
            err <= half_tolerance(E::DTYPE),
            "{name} eager y on {dev}: {err:.2e}"
        );
        let g = (&y * &wg).sum_all().backward();
        let err = relative(&f64s(&g.get(&xg).unwrap()), &want_dx);
        assert!(
            err <= half_tolerance(E::DTYPE),
            "{name} eager dx on {dev}: {err:.2e}"
        );
        // The compiled step: the same output, and the input's gradient.
        let (yc, back) = layer.forward_train((xg.clone(),));
        let err = relative(&f64s(&yc), &want_y);
        assert!(
            err <= half_tolerance(E::DTYPE),
            "{name} compiled y on {dev}: {err:.2e}"
        );
        let (dx,) = back(wg.clone(), &mut Gradients::new(), true);
        let err = relative(&f64s(&dx.unwrap()), &want_dx);
        assert!(
            err <= half_tolerance(E::DTYPE),
            "{name} compiled dx on {dev}: {err:.2e}"
        );
    }
}

#[test]
fn causal_self_attention_runs_fused_eager_and_compiled() {
    layer_case::<f16>();
    layer_case::<bf16>();
}
