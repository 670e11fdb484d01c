//! The GPT-style decoder of benches/gpt_step (token and position embeddings, pre-norm causal
//! blocks looped over, an untied head) at a small size on the CPU: its compiled forward and
//! static backward against the eager forward and the tape (also at a token count known only
//! at run time), and a few mixed-precision AdamW steps that lower the loss, over batches of
//! two sizes through one step.

#[path = "../../benches/gpt_step/model.rs"]
pub(crate) mod model;

use model::Gpt;
use rtx::prelude::*;

/// Vocabulary 32, context 8, width 16, 2 heads, MLP 32, 2 blocks.
pub(crate) type Small<E> = Gpt<32, 8, 16, 2, 32, 2, E>;

/// 24 token ids or targets.
type Tokens = Tensor<(Const<24>,), i64>;

/// `n` token ids (`n / 8` rows), known only at run time, and each one's next token.
fn run_time_batch(n: usize) -> (Tensor<(usize,), i64>, Tensor<(usize,), i64>) {
    let ids: Vec<i64> = (0..n as i64).map(|i| (i * 5 + 1) % 32).collect();
    let next: Vec<i64> = (0..n as i64).map(|i| (i * 5 + 6) % 32).collect();
    (
        Tensor::from_vec(ids, (n,), Device::Cpu),
        Tensor::from_vec(next, (n,), Device::Cpu),
    )
}

/// Batch 3: 24 token ids, their positions, and each one's next token as the target.
fn batch() -> (Tokens, Tensor<(Const<8>,), i64>, Tokens) {
    let ids: Vec<i64> = (0..24).map(|i| (i * 7 + 3) % 32).collect();
    let next: Vec<i64> = (0..24).map(|i| (i * 7 + 10) % 32).collect();
    let pos: Vec<i64> = (0..8).collect();
    (
        Tensor::from_vec(ids, (Const,), Device::Cpu),
        Tensor::from_vec(pos, (Const,), Device::Cpu),
        Tensor::from_vec(next, (Const,), Device::Cpu),
    )
}

#[test]
fn the_compiled_gpt_matches_eager_and_the_tape() {
    let (ids, pos, _) = batch();
    let m = Small::<f64>::init(&Device::Cpu, 5);
    rtx::compile::glue::check_model::<Small<f64>, _, _, f64>((ids.clone(), pos.clone()), |m| {
        m.forward(&ids, &pos)
    });
    let fused = m.forward_fused(&ids, &pos).to_vec();
    let eager = m.forward(&ids, &pos).to_vec();
    assert!(fused.iter().zip(&eager).all(|(a, b)| (a - b).abs() < 1e-10));
    // The same forward with the token count known only at run time: batch 2.
    let (ids, _) = run_time_batch(16);
    rtx::compile::glue::check_model::<Small<f64>, _, _, f64>((ids.clone(), pos.clone()), |m| {
        m.forward(&ids, &pos)
    });
}

#[test]
fn mixed_precision_adamw_steps_lower_the_loss() {
    let (ids, pos, next) = batch();
    let mut master = Small::<f32>::init(&Device::Cpu, 5);
    master.track_gradients();
    let mut working = Small::<bf16>::init(&Device::Cpu, 5);
    working.track_gradients();
    let mut opt = AdamW::new(3e-3);
    let mut step = rtx::compile::MixedStep::new(rtx::compile::loss::cross_entropy);
    let losses: Vec<f32> = (0..8)
        .map(|_| {
            let loss = step
                .run(
                    &mut master,
                    &mut working,
                    &mut opt,
                    (ids.clone(), pos.clone()),
                    &next,
                )
                .unwrap_or_else(|e| panic!("{e}"));
            loss.item().to_f32()
        })
        .collect();
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(
        losses[7] < losses[0] - 0.05,
        "8 AdamW steps should lower the loss: {losses:?}"
    );
    // The master weights stay f32 and moved.
    let fresh = Small::<f32>::init(&Device::Cpu, 5);
    assert_eq!(master.head.weight.dtype(), DType::F32);
    assert_ne!(master.head.weight.to_vec(), fresh.head.weight.to_vec());
}

#[test]
fn one_mixed_step_trains_on_two_batch_sizes() {
    let (_, pos, _) = batch();
    let mut master = Small::<f32>::init(&Device::Cpu, 5);
    master.track_gradients();
    let mut working = Small::<bf16>::init(&Device::Cpu, 5);
    working.track_gradients();
    let mut opt = AdamW::new(3e-3);
    let mut step = rtx::compile::MixedStep::new(rtx::compile::loss::cross_entropy);
    let (long, long_next) = run_time_batch(24);
    let (short, short_next) = run_time_batch(8);
    let mut losses = Vec::new();
    for k in 0..6 {
        let (ids, next) = if k % 3 == 2 {
            (&short, &short_next)
        } else {
            (&long, &long_next)
        };
        let loss = step
            .run(
                &mut master,
                &mut working,
                &mut opt,
                (ids.clone(), pos.clone()),
                next,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        losses.push(loss.item().to_f32());
    }
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(
        losses[4] < losses[0],
        "the long batch's loss falls: {losses:?}"
    );
    // One entry per size: the ids' and positions' sizes, then the targets'.
    assert_eq!(step.sizes(), vec![vec![24, 8, 24], vec![8, 8, 8]]);
}
