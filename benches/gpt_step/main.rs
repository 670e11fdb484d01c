//! A GPT-style training step on a GPU in bf16 mixed precision with AdamW (benches/README.md
//! sets it beside PyTorch's, from `benches/gpt_step_torch.py` run in the same call): 6
//! pre-norm causal blocks, d_model 512, 8 heads, sequence 256, batch 32, vocabulary 8192,
//! GELU in its tanh form, untied head, cross-entropy over the 8192 tokens; bf16 forward and
//! backward, f32 master weights and AdamW state, the step captured as a CUDA graph by
//! `MixedStep`.
//!
//! Build with `tools/gpu-build --bench gpt_step` and run
//! `.gpu/bin/gpt_step --json FILE`; without a GPU it prints why and exits successfully.
//! `--phases-only` runs only uncaptured steps, with the second inside the profiler's range,
//! for a kernel profiler: `ncu --profile-from-start off ... gpt_step --phases-only`.
//! The figure is the median over 10 blocks of 10 consecutive steps, host clock after a device
//! synchronize, per step (as the PyTorch script measures).

mod model;

use model::Gpt;
use rtx::Gradients;
use rtx::compile::MixedStep;
use rtx::prelude::*;
use rtx_backends::cuda;
use serde_json::json;
use std::time::Instant;

const BATCH: usize = 32;
const SEQ: usize = 256;
const VOCAB: usize = 8192;

/// The size: vocabulary 8192, context 256, width 512, 8 heads, MLP 2048, 6 blocks,
/// batch 32 (8192 tokens).
type Bench<E> = Gpt<VOCAB, SEQ, 512, 8, 2048, 6, E>;

#[path = "../common/step_timing.rs"]
mod step_timing;
use step_timing::sync;

/// Per-step milliseconds: the median over 10 blocks of 10 steps, after 5 warm-up steps.
fn per_step_ms(f: impl FnMut()) -> f64 {
    step_timing::per_step_ms(5, 10, 10, f)
}

fn main() {
    let mut json_out = None;
    let mut phases_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json_out = args.next(),
            "--bench" => {}
            "--phases-only" => phases_only = true,
            other => {
                eprintln!(
                    "usage: gpt_step [--json FILE] [--phases-only] (unknown argument {other})"
                );
                std::process::exit(2);
            }
        }
    }
    if !cuda::is_available() {
        println!("gpt_step: no CUDA GPU here; nothing to measure");
        return;
    }
    let dev = Device::Cuda(0);
    // Token ids from a fixed pseudo-random sequence; each target is the next id.
    let stream: Vec<i64> = (0..BATCH * SEQ + 1)
        .map(|i| ((i as u64).wrapping_mul(2654435761) % VOCAB as u64) as i64)
        .collect();
    let ids: Tensor<(Const<{ BATCH * SEQ }>,), i64> =
        Tensor::from_vec(stream[..BATCH * SEQ].to_vec(), (Const,), dev);
    let next: Tensor<(Const<{ BATCH * SEQ }>,), i64> =
        Tensor::from_vec(stream[1..].to_vec(), (Const,), dev);
    let pos: Tensor<(Const<SEQ>,), i64> =
        Tensor::from_vec((0..SEQ as i64).collect(), (Const,), dev);

    let t = Instant::now();
    let mut master = Bench::<f32>::init(&Device::Cpu, 0);
    master.move_to(dev);
    master.track_gradients();
    let mut working = Bench::<bf16>::init(&Device::Cpu, 0);
    working.move_to(dev);
    working.track_gradients();
    println!(
        "GPT: {} parameters, initialized in {:.1} s",
        master.num_parameters(),
        t.elapsed().as_secs_f64()
    );
    if phases_only {
        // For a profiler started with its collection off (`ncu --profile-from-start off`):
        // one warm-up step, one step inside the profiler's range, then the timed phases.
        let step = || {
            let (logits, backward) = working.forward_train(&ids, &pos);
            let (_loss, loss_backward) = rtx::compile::loss::cross_entropy(&logits, &next);
            let seed = Tensor::full((), bf16::from_f32(1.0), dev);
            backward(loss_backward(&seed), &mut Gradients::new(), false);
            sync();
        };
        step();
        // SAFETY: plain driver calls on the context rtx made current on this thread (the
        // synchronize above binds it); they only switch the profiler's collection.
        unsafe { cudarc::driver::sys::cuProfilerStart() };
        step();
        unsafe { cudarc::driver::sys::cuProfilerStop() };
        phases(&working, &ids, &pos, &next);
        return;
    }
    let mut opt = AdamW::new(3e-4);
    let mut step = MixedStep::new(rtx::compile::loss::cross_entropy);
    let mut run = || {
        step.run(
            &mut master,
            &mut working,
            &mut opt,
            (ids.clone(), pos.clone()),
            &next,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    // The first run is eager and the second captures: timed apart from the replays.
    let mut losses = Vec::new();
    for i in 1..=2 {
        let t = Instant::now();
        losses.push(run().item().to_f32());
        println!("  run {i}: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    }
    // Only the last loss is read back, after the timing.
    let ms = per_step_ms(|| drop(run()));
    let launches = {
        let before = rtx::launch_count(dev);
        losses.push(run().item().to_f32());
        rtx::launch_count(dev) - before
    };
    let phases = phases(&working, &ids, &pos, &next);
    // Training costs about 6 FLOPs per parameter per token (2 forward, 4 backward), plus
    // the attention's products.
    let flops = 6.0 * master.num_parameters() as f64 * (BATCH * SEQ) as f64 + attention_flops();
    println!(
        "GPT 6x512, seq 256, batch 32, vocab 8192, bf16 mixed AdamW, captured: {ms:.3} ms per \
         step ({launches} launches), about {:.0} TFLOP/s of model math; losses {:?} -> {:?}",
        flops / ms / 1e9,
        losses.first(),
        losses.last()
    );
    if let Some(path) = json_out {
        let out = json!({
            "bf16_captured": ms,
            "launches": launches,
            "params": master.num_parameters(),
            "first_loss": losses.first(),
            "last_loss": losses.last(),
            "tflop_per_step": flops / 1e12,
            "uncaptured_phases_ms": phases,
        });
        let text = serde_json::to_string_pretty(&out).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
}

/// The attention's own products per step: `q kᵀ` and `att v` over the full (unmasked)
/// `T x T`, forward (2 products) and backward (4), 2 FLOPs a multiply-add, 6 blocks.
fn attention_flops() -> f64 {
    let per_product = 2.0 * (BATCH * SEQ * SEQ * 512) as f64;
    6.0 * 6.0 * per_product
}

/// Where an uncaptured step of the working model spends its time: the compiled forward, the
/// loss, the static backward, each timed alone after a synchronize (median of 5, after one warm-up step), in ms.
fn phases(
    working: &Bench<bf16>,
    ids: &Tensor<(Const<{ BATCH * SEQ }>,), i64>,
    pos: &Tensor<(Const<SEQ>,), i64>,
    next: &Tensor<(Const<{ BATCH * SEQ }>,), i64>,
) -> serde_json::Value {
    let dev = Device::Cuda(0);
    let (mut fwd, mut loss_t, mut bwd) = (Vec::new(), Vec::new(), Vec::new());
    let time = |t: Instant| {
        sync();
        t.elapsed().as_secs_f64() * 1e3
    };
    for _ in 0..6 {
        sync();
        let t = Instant::now();
        let (logits, backward) = working.forward_train(ids, pos);
        fwd.push(time(t));
        let t = Instant::now();
        let (_loss, loss_backward) = rtx::compile::loss::cross_entropy(&logits, next);
        loss_t.push(time(t));
        let seed = Tensor::full((), bf16::from_f32(1.0), dev);
        sync();
        let t = Instant::now();
        let mut grads = Gradients::new();
        backward(loss_backward(&seed), &mut grads, false);
        bwd.push(time(t));
    }
    // The first of the six steps warms up (kernels compiled, memory pooled).
    let median = |mut v: Vec<f64>| {
        v.remove(0);
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (f, l, b) = (median(fwd), median(loss_t), median(bwd));
    println!("  uncaptured phases: forward {f:.3} ms, loss {l:.3} ms, backward {b:.3} ms");
    json!({"forward": f, "loss": l, "backward": b})
}
