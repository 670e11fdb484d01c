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
