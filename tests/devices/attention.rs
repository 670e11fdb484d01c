//! Attention on GPUs in f16 and bf16, which runs fused (one launch forward, three backward),
//! against the composition computed in f32 on the CPU from the same rounded inputs: the output
//! and the gradients of q, k and v, causal or not, over sizes with partial tiles, fewer queries
//! than keys, and head dims 16, 64 and 128; with dense heads, with heads that are views of one
//! fused projection's output `[B, T, 3D]` and of three projections' `[B, T, D]` (read in
//! place: still one launch, and the merge of the heads after it a view); and
//! `CausalSelfAttention` the same way, eager and compiled, the compiled step launching nothing
//! for its heads beyond the four fused kernels (no split, merge or join copies).
//! Errors are the largest `|got - want|` over the largest `|want|`.

use super::*;
use rtx::Gradients;
use rtx::compile::StaticForward;
use rtx::nn::{CausalSelfAttention, Linear};
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
        // Past 256 keys at d 128 a Hopper GPU runs the `wgmma` backward.
        case::<E>((1, 2, 70, 300, 128), causal);
        case::<E>((1, 1, 1, 1, 64), causal);
    }
}

#[test]
fn fused_attention_matches_the_f32_composition() {
    sizes::<f16>();
    sizes::<bf16>();
}

/// Where the heads of [`views_case`] come from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    /// One fused projection `[B, T, 3 H Dh]`: q, k and v its three parts (self-attention).
    Fused,
    /// Three projections, `[B, T, H Dh]` for q and `[B, S, H Dh]` for k and v.
    Three,
}

/// A projection's output `[B, T, width]` with run-time dims.
type Seq<E> = Tensor<(usize, usize, usize), E>;

/// The heads of `x` `[B, T, n H Dh]` at columns `part H Dh..`, as a `[B, H, T, Dh]` view (the
/// reshape first, while `x` is contiguous: a reshape of a narrowed view would copy it).
fn head_view<E: Float>(x: &Seq<E>, part: usize, h: usize, d: usize) -> Heads<E> {
    let (b, t, width) = (x.dims()[0], x.dims()[1], x.dims()[2]);
    x.reshape((b, t, width / d, d))
        .permute::<Axes4<0, 2, 1, 3>>()
        .narrow::<1, usize>(part * h, h)
}

/// Attention over head views of projections (`source`) on every GPU, against the f32
/// composition over the same views on the CPU: exactly one launch forward (the heads read in
/// place), the heads' merge after it a view (no launch), and the output and the projections'
/// gradients within the half-precision tolerance.
fn views_case<E: Float>(
    (b, h, t, s, d): (usize, usize, usize, usize, usize),
    causal: bool,
    source: Source,
) {
    let name = format!(
        "attention {:?} over {source:?} head views [{b}, {h}, {t}, {d}], {s} keys, causal {causal}",
        E::DTYPE
    );
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("{name}: skipped: no CUDA device: {why}");
            return;
        }
    };
    let w = h * d;
    let seed = (t * 13 + s * 5 + d) as u64;
    // The projections' values and widths: one [B, T, 3w], or [B, T, w] and two [B, S, w].
    let shapes: Vec<(usize, usize)> = match source {
        Source::Fused => vec![(t, 3 * w)],
        Source::Three => vec![(t, w), (s, w), (s, w)],
    };
    let vals: Vec<Vec<E>> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(n, width))| values::<E>(b * n * width, seed + i as u64, -2.0, 2.0))
        .collect();
    let dy = values::<E>(b * t * w, seed + 7, -1.0, 1.0);
    let scale = 1.0 / (d as f64).sqrt();
    // The output merged to [B, T, w] and the projections' gradients for `Σ merged · dy`, the
    // launches of the attention itself and of the merge.
    let run = |dev: Device, x: Vec<Seq<E>>| {
        let x: Vec<Seq<E>> = x.into_iter().map(|x| x.requires_grad()).collect();
        let [q, k, v] = match source {
            Source::Fused => [0, 1, 2].map(|i| head_view(&x[0], i, h, d)),
            Source::Three => [0, 1, 2].map(|i| head_view(&x[i], 0, h, d)),
        };
        let before = launch_count(dev);
        let y = if causal {
            q.causal_attention(&k, &v, scale)
        } else {
            q.attention(&k, &v, None, scale)
        };
        let attend = launch_count(dev) - before;
        let merged = y.permute::<Axes4<0, 2, 1, 3>>().reshape((b, t, w));
        let merge = launch_count(dev) - before - attend;
        let dy: Seq<E> = Tensor::from_vec(dy.clone(), (b, t, w), dev);
        let grads = (&merged * &dy).sum_all().backward();
        let mut out = vec![f64s(&merged)];
        out.extend(x.iter().map(|x| f64s(&grads.get(x).expect("a gradient"))));
        (out, attend, merge)
    };
    let widen = |v: &[E]| v.iter().map(|e| e.to_f64() as f32).collect::<Vec<f32>>();
    let cpu: Vec<Seq<f32>> = shapes
        .iter()
        .zip(&vals)
        .map(|(&(n, width), v)| Tensor::from_vec(widen(v), (b, n, width), Device::Cpu))
        .collect();
    // The reference in f32: the same views, the composition (no fused path on the CPU).
    let reference = {
        let x: Vec<Seq<f32>> = cpu.into_iter().map(|x| x.requires_grad()).collect();
        let [q, k, v] = match source {
            Source::Fused => [0, 1, 2].map(|i| head_view(&x[0], i, h, d)),
            Source::Three => [0, 1, 2].map(|i| head_view(&x[i], 0, h, d)),
        };
        let y = if causal {
            q.causal_attention(&k, &v, scale)
        } else {
            q.attention(&k, &v, None, scale)
        };
        let merged = y.permute::<Axes4<0, 2, 1, 3>>().reshape((b, t, w));
        let dy: Seq<f32> = Tensor::from_vec(widen(&dy), (b, t, w), Device::Cpu);
        let grads = (&merged * &dy).sum_all().backward();
        let mut out = vec![f64s(&merged)];
        out.extend(x.iter().map(|x| f64s(&grads.get(x).expect("a gradient"))));
        out
    };
    for dev in gpus {
        let x: Vec<Seq<E>> = shapes
            .iter()
            .zip(&vals)
            .map(|(&(n, width), v)| Tensor::from_vec(v.clone(), (b, n, width), dev))
            .collect();
        let (got, attend, merge) = run(dev, x);
        assert_eq!(attend, 1, "{name} on {dev}: one fused launch, no copies");
        assert_eq!(merge, 0, "{name} on {dev}: the heads' merge is a view");
        let names = ["o", "d(projection 0)", "d(projection 1)", "d(projection 2)"];
        for (what, (g, w)) in names.iter().zip(got.iter().zip(&reference)) {
            let err = relative(g, w);
            assert!(
                err <= half_tolerance(E::DTYPE),
                "{name} on {dev}: {what} is {err:.2e} (relative) from the f32 composition"
            );
        }
    }
}

fn view_sizes<E: Float>() {
    for causal in [true, false] {
        views_case::<E>((2, 3, 70, 70, 64), causal, Source::Fused);
        views_case::<E>((1, 2, 130, 130, 128), causal, Source::Fused);
        views_case::<E>((2, 2, 37, 37, 16), causal, Source::Fused);
        views_case::<E>((2, 2, 37, 130, 64), causal, Source::Three);
    }
}

#[test]
fn fused_attention_reads_projection_head_views_in_place() {
    view_sizes::<f16>();
    view_sizes::<bf16>();
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
        let before = launch_count(dev);
        let (yc, back) = layer.forward_train((xg.clone(),));
        let forward = launch_count(dev) - before;
        let err = relative(&f64s(&yc), &want_y);
        assert!(
            err <= half_tolerance(E::DTYPE),
            "{name} compiled y on {dev}: {err:.2e}"
        );
        let before = launch_count(dev);
        let (dx,) = back(wg.clone(), &mut Gradients::new(), true);
        let backward = launch_count(dev) - before;
        let err = relative(&f64s(&dx.unwrap()), &want_dx);
        assert!(
            err <= half_tolerance(E::DTYPE),
            "{name} compiled dx on {dev}: {err:.2e}"
        );
        // Nothing is launched for the heads but the fused kernels (no split of the projection,
        // merge of the heads or join of their gradients): the step costs its two projections,
        // as `Linear`s of their sizes cost, one launch forward and three backward.
        let [(qkv_fwd, qkv_bwd), (proj_fwd, proj_bwd)] = projection_launches::<E>(dev, b);
        assert_eq!(
            (forward, backward),
            (qkv_fwd + 1 + proj_fwd, proj_bwd + 3 + qkv_bwd),
            "{name} compiled on {dev}: launches forward and backward, against the projections' \
             [{qkv_fwd}, {qkv_bwd}] and [{proj_fwd}, {proj_bwd}]"
        );
    }
}

/// The launches of the static forward and backward (with the input's gradient) of a
/// `Linear<128, 384>` and a `Linear<128, 128>` over `[b, 70, 128]` inputs on `dev`: what
/// `CausalSelfAttention<128, 2>`'s fused and output projections cost.
fn projection_launches<E: Float>(dev: Device, b: usize) -> [(u64, u64); 2] {
    type In<E> = Tensor<(usize, Const<70>, Const<128>), E>;
    let x: In<E> = Tensor::from_vec(
        values::<E>(b * 70 * 128, 11, -1.0, 1.0),
        (b, Const, Const),
        dev,
    );
    let qkv = Linear::<128, 384, E>::new(dev, 5);
    let before = launch_count(dev);
    let (_, back) = qkv.forward_train((x.clone(),));
    let qkv_fwd = launch_count(dev) - before;
    let g = Tensor::from_vec(
        values::<E>(b * 70 * 384, 12, -1.0, 1.0),
        (b, Const, Const),
        dev,
    );
    let before = launch_count(dev);
    back(g, &mut Gradients::new(), true);
    let qkv_bwd = launch_count(dev) - before;
    let proj = Linear::<128, 128, E>::new(dev, 6);
    let before = launch_count(dev);
    let (_, back) = proj.forward_train((x.clone(),));
    let proj_fwd = launch_count(dev) - before;
    let before = launch_count(dev);
    back(x, &mut Gradients::new(), true);
    let proj_bwd = launch_count(dev) - before;
    [(qkv_fwd, qkv_bwd), (proj_fwd, proj_bwd)]
}

#[test]
fn causal_self_attention_runs_fused_eager_and_compiled() {
    layer_case::<f16>();
    layer_case::<bf16>();
}
