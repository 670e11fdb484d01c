//! Fused optimizer updates on every device: a few steps of Adam (with L2 decay), AdamW,
//! AMSGrad and SGD (momentum with dampening, Nesterov, weight decay) on a parameter whose
//! gradient changes with it, each GPU held to the CPU after every step.

use super::*;
use rtx::Gradients;

/// The parameter after each of three steps of `step`, with `loss = Σ w² * r` (so the gradient,
/// `2 w r`, follows the parameter), starting from a non-contiguous view.
fn run_steps<E: Float>(
    dev: Device,
    name: &str,
    mut step: impl FnMut(&mut Tensor<(usize, usize), E>, &Gradients),
) -> Outputs {
    let (rows, cols) = (37usize, 29usize);
    let w0 = Tensor::from_vec(values::<E>(rows * cols, 60, -1.0, 1.0), (cols, rows), dev);
    let r = Tensor::from_vec(values::<E>(rows * cols, 61, 0.5, 1.5), (rows, cols), dev);
    let mut w = w0.t().requires_grad();
    let mut out = Outputs::new();
    for i in 0..3 {
        let grads = (&w * &w * &r).sum_all().backward();
        step(&mut w, &grads);
        out.push((format!("{name} step {i}"), f64s(&w)));
    }
    out
}

fn optim_case<E: Float>() {
    on_every_device::<E>("optim", |dev| {
        let mut out = Outputs::new();
        let mut adam = Adam::new(0.05).weight_decay(0.1);
        out.extend(run_steps::<E>(dev, "adam l2", |w, g| adam.step(w, g)));
        let mut adamw = AdamW::new(0.05).weight_decay(0.1).betas(0.3, 0.9);
        out.extend(run_steps::<E>(dev, "adamw", |w, g| adamw.step(w, g)));
        let mut ams = Adam::new(0.05).amsgrad(true);
        out.extend(run_steps::<E>(dev, "amsgrad", |w, g| ams.step(w, g)));
        let mut sgd = Sgd::new(0.1)
            .momentum(0.9)
            .dampening(0.2)
            .weight_decay(0.01);
        out.extend(run_steps::<E>(dev, "sgd momentum", |w, g| sgd.step(w, g)));
        let mut nesterov = Sgd::new(0.1).momentum(0.9).nesterov(true);
        out.extend(run_steps::<E>(dev, "sgd nesterov", |w, g| {
            nesterov.step(w, g)
        }));
        let mut plain = Sgd::new(0.1);
        out.extend(run_steps::<E>(dev, "sgd", |w, g| plain.step(w, g)));
        out
    });
}

#[test]
fn optimizer_steps_match_the_cpu() {
    every_float!(optim_case);
}

/// Tensor sizes of the multi-tensor cases: one element, odd sizes, a million, and the sizes
/// of the frozen tensor (4) and of the clone of tensor 1 (5).
const MIXED: [usize; 6] = [1, 33, 4099, 1 << 20, 7, 33];

/// The mixed model: one tensor per `MIXED` size.
type Mixed<E> = Vec<Tensor<(usize,), E>>;

/// A model of tensors of `MIXED` sizes for the multi-tensor steps: tensor 4 is frozen (it
/// never gets a gradient), tensor 5 is a clone of tensor 1 (one tape node, used twice by the
/// loss, visited twice by the optimizer), and the returned tensor shares tensor 3's storage
/// (so the update must not write where it lies).
fn mixed_model<E: Float>(dev: Device) -> (Mixed<E>, Tensor<(usize,), E>) {
    let mut model: Mixed<E> = MIXED
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let t = Tensor::from_vec(values::<E>(n, 70 + i as u64, -1.0, 1.0), (n,), dev);
            if i == 4 { t } else { t.requires_grad() }
        })
        .collect();
    model[5] = model[1].clone();
    let kept = model[3].detach();
    (model, kept)
}

/// The gradients of `Σ w² r` over the model's tensors (tensor 2 left out of the first step,
/// so its step count, and with it Adam's bias corrections, lags the others').
fn mixed_grads<E: Float>(model: &[Tensor<(usize,), E>], step: usize) -> Gradients {
    let dev = model[0].device();
    let mut loss = Tensor::<(), E>::zeros((), dev);
    for (i, w) in model.iter().enumerate() {
        if i == 2 && step == 0 {
            continue;
        }
        let r = Tensor::from_vec(
            values::<E>(w.numel(), 90 + i as u64, 0.5, 1.5),
            (w.numel(),),
            dev,
        );
        loss = loss + (w * w * &r).sum_all();
    }
    loss.backward()
}

/// Three multi-tensor steps of `step` over the mixed model, every tensor after each.
fn run_mixed<E: Float>(
    dev: Device,
    name: &str,
    mut step: impl FnMut(&mut Mixed<E>, &Gradients),
) -> Outputs {
    let (mut model, kept) = mixed_model::<E>(dev);
    let (frozen, kept0) = (model[4].to_vec(), kept.to_vec());
    let mut out = Outputs::new();
    for i in 0..3 {
        let grads = mixed_grads(&model, i);
        step(&mut model, &grads);
        for (t, w) in model.iter().enumerate() {
            out.push((format!("{name} step {i} tensor {t}"), f64s(w)));
        }
    }
    assert_eq!(
        model[4].to_vec(),
        frozen,
        "{name} on {dev}: a frozen tensor changed"
    );
    assert_eq!(
        kept.to_vec(),
        kept0,
        "{name} on {dev}: a tensor sharing a parameter changed"
    );
    out
}

fn multi_tensor_case<E: Float>() {
    on_every_device::<E>("optim multi-tensor", |dev| {
        let mut out = Outputs::new();
        let mut adam = Adam::new(0.05).weight_decay(0.1);
        out.extend(run_mixed::<E>(dev, "adam l2", |m, g| adam.step(m, g)));
        let mut adamw = AdamW::new(0.05).weight_decay(0.1).betas(0.3, 0.9);
        out.extend(run_mixed::<E>(dev, "adamw", |m, g| adamw.step(m, g)));
        let mut ams = AdamW::new(0.05).amsgrad(true);
        out.extend(run_mixed::<E>(dev, "amsgrad", |m, g| ams.step(m, g)));
        let mut sgd = Sgd::new(0.1)
            .momentum(0.9)
            .dampening(0.2)
            .weight_decay(0.01);
        out.extend(run_mixed::<E>(dev, "sgd momentum", |m, g| sgd.step(m, g)));
        let mut nesterov = Sgd::new(0.1)
            .momentum(0.9)
            .nesterov(true)
            .weight_decay(0.01);
        out.extend(run_mixed::<E>(dev, "sgd nesterov", |m, g| {
            nesterov.step(m, g)
        }));
        let mut plain = Sgd::new(0.1);
        out.extend(run_mixed::<E>(dev, "sgd", |m, g| plain.step(m, g)));
        out
    });
}

#[test]
fn multi_tensor_steps_match_the_cpu() {
    every_float!(multi_tensor_case);
}

fn clip_case<E: Float>() {
    on_every_device::<E>("clip_grad_norm", |dev| {
        let mut out = Outputs::new();
        // The norm is over a thousand: the first clips, the second does not.
        for max_norm in [1.0, 1e9] {
            let (model, _) = mixed_model::<E>(dev);
            let mut grads = mixed_grads(&model, 1);
            let norm = clip_grad_norm(&mut grads, &model, max_norm);
            out.push((format!("norm (max {max_norm})"), vec![norm]));
            for (t, w) in model.iter().enumerate() {
                if let Some(g) = grads.get(w) {
                    out.push((format!("max {max_norm}: gradient {t}"), f64s(&g)));
                }
            }
        }
        out
    });
}

#[test]
fn clip_grad_norm_matches_the_cpu() {
    every_float!(clip_case);
}

/// The multi-tensor update kernels against the per-tensor ones on each GPU, bit for bit: the
/// same formulas in the same order, so the same roundings.
fn multi_equals_per_tensor<E: Float>(dev: Device) {
    use rtx_backends::storage::{AdamSlot, SgdSlot, TableCache};
    use rtx_backends::{AdamScalars, SgdScalars};
    use rtx_backends::{Layout, Storage};
    let ok = |r: rtx_backends::Result<Storage<E>>| r.unwrap_or_else(|e| panic!("{e}"));
    let sizes = [1usize, 33, 4099, 1 << 20];
    let data = |seed: u64, lo, hi| -> Vec<Vec<E>> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| values::<E>(n, seed + i as u64, lo, hi))
            .collect()
    };
    let on_dev = |d: &[Vec<E>]| -> Vec<Storage<E>> {
        d.iter()
            .map(|v| ok(Storage::from_vec(v.clone(), dev)))
            .collect()
    };
    let bits = |s: &Storage<E>, n: usize| -> Vec<u64> {
        s.to_vec(&Layout::contiguous(&[n]))
            .iter()
            .map(|x| x.to_f64().to_bits())
            .collect()
    };
    let (p, g, m, v) = (
        data(300, -1.0, 1.0),
        data(310, -2.0, 2.0),
        data(320, -0.5, 0.5),
        data(330, 0.0, 0.5),
    );
    let adam = [
        (1.0, 0.1, 0.9, false),
        (0.995, 0.0, 0.3, true),
        (1.0, 0.0, 0.9, true),
    ];
    for (decay, l2, beta1, amsgrad) in adam {
        let s = AdamScalars {
            decay,
            l2,
            beta1,
            beta2: 0.999,
            bias_correction2_sqrt: (1.0f64 - 0.999f64.powi(3)).sqrt(),
            neg_step_size: -0.05 / (1.0 - beta1.powi(3)),
            eps: 1e-8,
        };
        let (gs, ps, ms, vs, xs) = (on_dev(&g), on_dev(&p), on_dev(&m), on_dev(&v), on_dev(&v));
        let mut want = Vec::new();
        for t in 0..sizes.len() {
            let l = Layout::contiguous(&[sizes[t]]);
            let x = amsgrad.then_some(&xs[t]);
            let (np, nm, nv, nx) = ps[t]
                .adam_update(&l, (&gs[t], &l), &ms[t], &vs[t], x, &s)
                .unwrap_or_else(|e| panic!("{e}"));
            want.push((
                bits(&np, sizes[t]),
                bits(&nm, sizes[t]),
                bits(&nv, sizes[t]),
            ));
            if let Some(nx) = nx {
                want.push((bits(&nx, sizes[t]), Vec::new(), Vec::new()));
            }
        }
        let layouts: Vec<Layout> = sizes.iter().map(|&n| Layout::contiguous(&[n])).collect();
        let slots: Vec<AdamSlot<'_, E>> = (0..sizes.len())
            .map(|t| AdamSlot {
                param: &ps[t],
                grad: (&gs[t], &layouts[t]),
                m: &ms[t],
                v: &vs[t],
                vmax: amsgrad.then_some(&xs[t]),
            })
            .collect();
        Storage::adam_update_multi(&slots, &s, &mut TableCache::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut got = Vec::new();
        for t in 0..sizes.len() {
            let n = sizes[t];
            got.push((bits(&ps[t], n), bits(&ms[t], n), bits(&vs[t], n)));
            if amsgrad {
                got.push((bits(&xs[t], n), Vec::new(), Vec::new()));
            }
        }
        assert!(
            got == want,
            "adam_multi on {dev} ({:?}, decay {decay}, l2 {l2}, beta1 {beta1}, amsgrad {amsgrad}) differs from adam_step",
            E::DTYPE
        );
    }
    for (momentum, dampening, nesterov, first) in [
        (0.0, 0.0, false, false),
        (0.9, 0.2, false, false),
        (0.9, 0.0, true, false),
        (0.9, 0.0, true, true),
    ] {
        let s = SgdScalars {
            lr: 0.1,
            momentum,
            dampening,
            weight_decay: 0.01,
            nesterov,
            first,
        };
        let (gs, ps, bs) = (on_dev(&g), on_dev(&p), on_dev(&m));
        let has_buf = momentum != 0.0;
        let mut want = Vec::new();
        for t in 0..sizes.len() {
            let l = Layout::contiguous(&[sizes[t]]);
            let (np, nb) = ps[t]
                .sgd_update(&l, (&gs[t], &l), has_buf.then_some(&bs[t]), &s)
                .unwrap_or_else(|e| panic!("{e}"));
            want.push((bits(&np, sizes[t]), nb.map(|b| bits(&b, sizes[t]))));
        }
        let layouts: Vec<Layout> = sizes.iter().map(|&n| Layout::contiguous(&[n])).collect();
        let slots: Vec<SgdSlot<'_, E>> = (0..sizes.len())
            .map(|t| SgdSlot {
                param: &ps[t],
                grad: (&gs[t], &layouts[t]),
                buf: has_buf.then_some(&bs[t]),
            })
            .collect();
        Storage::sgd_update_multi(&slots, &s, &mut TableCache::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<_> = (0..sizes.len())
            .map(|t| {
                (
                    bits(&ps[t], sizes[t]),
                    has_buf.then(|| bits(&bs[t], sizes[t])),
                )
            })
            .collect();
        assert!(
            got == want,
            "sgd_multi on {dev} ({:?}, momentum {momentum}, dampening {dampening}, nesterov {nesterov}, first {first}) differs from sgd_step",
            E::DTYPE
        );
    }
}

#[test]
fn multi_tensor_kernels_equal_the_per_tensor_kernels() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("multi-tensor against per-tensor kernels: skipped: no CUDA device: {why}");
            return;
        }
    };
    for dev in gpus {
        multi_equals_per_tensor::<f32>(dev);
        multi_equals_per_tensor::<f64>(dev);
        multi_equals_per_tensor::<f16>(dev);
        multi_equals_per_tensor::<bf16>(dev);
    }
}
