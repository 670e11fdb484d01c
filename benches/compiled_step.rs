//! The compiled training step on a GPU (benches/README.md sets it beside PyTorch's, from
//! `benches/compiled_step_torch.py` run in the same call): the MLP 784-2048-2048-10 (GELU in
//! its tanh form, cross-entropy, Adam lr 1e-3) at batch 512 in f32, three ways: the tape
//! (eager forward, `backward()`), the compiled forward with its static backward, and the same
//! as a `TrainStep` replaying a captured CUDA graph; and in bf16 mixed precision (f32 master
//! weights and Adam state) as a captured `MixedStep`.
//!
//! Build with `tools/gpu-build --bench compiled_step` and run
//! `.gpu/bin/compiled_step --json FILE`; without a GPU it prints why and exits successfully.
//! `--profile` runs only uncaptured f32 static steps, the second inside the profiler's range,
//! for a kernel profiler: `ncu --profile-from-start off ... compiled_step --profile`.
//! Each figure is the median over 15 blocks of 20 consecutive steps, host clock after a
//! device synchronize, per step (as the PyTorch script measures).

use rtx::Gradients;
use rtx::compile::TrainStep;
use rtx::prelude::*;
use rtx_backends::cuda;
use serde_json::json;

/// The batch's rows.
type B = Const<512>;

#[model]
struct Mlp<E: Float> {
    fc1: Linear<784, 2048, E>,
    fc2: Linear<2048, 2048, E>,
    fc3: Linear<2048, 10, E>,
}

#[model]
impl<E: Float> Mlp<E> {
    fn forward(&self, x: &Tensor<(B, Const<784>), E>) -> Tensor<(B, Const<10>), E> {
        let h = self.fc1.forward(x);
        let h = h.gelu_tanh();
        let h = self.fc2.forward(&h);
        let h = h.gelu_tanh();
        self.fc3.forward(&h)
    }
}

#[path = "common/step_timing.rs"]
mod step_timing;

/// Per-step milliseconds: the median over 15 blocks of 20 steps, after 10 warm-up steps.
fn per_step_ms(f: impl FnMut()) -> f64 {
    step_timing::per_step_ms(10, 15, 20, f)
}

/// The launches one call of `f` makes on GPU 0.
fn launches(f: impl FnOnce()) -> u64 {
    let dev = Device::Cuda(0);
    let before = rtx::launch_count(dev);
    f();
    rtx::launch_count(dev) - before
}

fn main() {
    let mut json_out = None;
    let mut profile = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json_out = args.next(),
            "--profile" => profile = true,
            "--bench" => {}
            other => {
                eprintln!(
                    "usage: compiled_step [--json FILE] [--profile] (unknown argument {other})"
                );
                std::process::exit(2);
            }
        }
    }
    if !cuda::is_available() {
        println!("compiled_step: no CUDA GPU here; nothing to measure");
        return;
    }
    let dev = Device::Cuda(0);
    let x: Tensor<(B, Const<784>)> = Tensor::randn((Const, Const), 1, dev);
    let labels: Vec<i64> = (0..512).map(|i| (i * 7 % 10) as i64).collect();
    let y: Tensor<(B,), i64> = Tensor::from_vec(labels, (Const,), dev);
    let model = || {
        let mut m = Mlp::<f32>::init(&Device::Cpu, 0);
        m.move_to(dev);
        m.track_gradients();
        m
    };
    let mut out = serde_json::Map::new();

    // The tape.
    let mut m = model();
    let mut opt = Adam::new(1e-3);
    let mut tape_step = || {
        let loss = cross_entropy(&m.forward(&x), &y);
        let grads = loss.backward();
        opt.step(&mut m, &grads);
    };
    let tape = per_step_ms(&mut tape_step);
    let tape_launches = launches(&mut tape_step);

    // The compiled forward and static backward, uncaptured.
    let mut m = model();
    let mut opt = Adam::new(1e-3);
    let mut static_step = || {
        let mut grads = Gradients::new();
        {
            let (logits, backward) = m.forward_train(&x);
            let (_loss, loss_backward) = rtx::compile::loss::cross_entropy(&logits, &y);
            let seed = Tensor::full((), 1.0, dev);
            backward(loss_backward(&seed), &mut grads, false);
        }
        opt.step(&mut m, &grads);
    };
    if profile {
        static_step();
        step_timing::sync();
        // SAFETY: plain driver calls on the context rtx made current on this thread (the
        // synchronize above binds it); they only switch the profiler's collection.
        unsafe { cudarc::driver::sys::cuProfilerStart() };
        static_step();
        step_timing::sync();
        unsafe { cudarc::driver::sys::cuProfilerStop() };
        return;
    }
    let stat = per_step_ms(&mut static_step);
    let static_launches = launches(&mut static_step);

    // The captured step.
    let mut m = model();
    let mut opt = Adam::new(1e-3);
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let mut captured_step = || {
        step.run(&mut m, &mut opt, (x.clone(),), &y)
            .unwrap_or_else(|e| panic!("{e}"));
    };
    let captured = per_step_ms(&mut captured_step);
    let captured_launches = launches(&mut captured_step);
    let loss = step
        .run(&mut m, &mut opt, (x.clone(),), &y)
        .unwrap_or_else(|e| panic!("{e}"))
        .item();

    // Mixed precision: bf16 forward and backward, f32 master weights and Adam state.
    let mut master = model();
    let mut working = Mlp::<bf16>::init(&Device::Cpu, 0);
    working.move_to(dev);
    working.track_gradients();
    let mut opt = Adam::new(1e-3);
    let xb = x.cast::<bf16>();
    let mut mixed = rtx::compile::MixedStep::new(rtx::compile::loss::cross_entropy);
    let mut mixed_step = || {
        mixed
            .run(&mut master, &mut working, &mut opt, (xb.clone(),), &y)
            .unwrap_or_else(|e| panic!("{e}"));
    };
    let bf16_captured = per_step_ms(&mut mixed_step);
    let bf16_launches = launches(&mut mixed_step);
    out.insert("bf16_captured".into(), json!(bf16_captured));
    println!("bf16 mixed, captured: {bf16_captured:.3} ms ({bf16_launches} launches)");

    out.insert("f32_tape".into(), json!(tape));
    out.insert("f32_static".into(), json!(stat));
    out.insert("f32_captured".into(), json!(captured));
    out.insert(
        "launches".into(),
        json!({"tape": tape_launches, "static": static_launches, "captured": captured_launches,
               "bf16_captured": bf16_launches}),
    );
    out.insert("final_loss".into(), json!(loss));
    println!(
        "MLP 784-2048-2048-10, batch 512, f32, Adam: tape {tape:.3} ms ({tape_launches} \
         launches), static {stat:.3} ms ({static_launches}), captured {captured:.3} ms \
         ({captured_launches}); loss after training {loss:.4}"
    );
    if let Some(path) = json_out {
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(out))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
}
