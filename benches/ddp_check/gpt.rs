//! The GPT of the equivalence check: benches/gpt_step's decoder in f32 with the compiled step
//! and AdamW at 3e-4 (benches/ddp_step's `gpt-f32`) or SGD, on windows of a fixed token stream in
//! which each token follows from the one before, so the loss can fall.

use super::model::Gpt;
use super::train::{self, Config, Optim, Trained};
use rtx::compile::TrainStep;
use rtx::dist::ProcessGroup;
use rtx::prelude::*;

/// `items` windows of `T` tokens and one more (the last window's final target).
fn token_stream(items: usize, t: usize, vocab: usize, seed: u64) -> Vec<i64> {
    let mut x = seed as usize % vocab;
    (0..items * t + 1)
        .map(|i| {
            // A fresh start every 97 tokens, so that windows differ.
            x = if i % 97 == 0 {
                (i / 97 * 31 + seed as usize) % vocab
            } else {
                (5 * x + 3) % vocab
            };
            x as i64
        })
        .collect()
}

/// Trains the decoder (vocabulary `V`, context `T`, width `D`, `H` heads, MLP `F`, `L` blocks)
/// under `cfg` on this rank's share; an item is a window of `T` tokens.
pub fn run<
    const V: usize,
    const T: usize,
    const D: usize,
    const H: usize,
    const F: usize,
    const L: usize,
>(
    pg: ProcessGroup,
    dev: Device,
    cfg: &Config,
) -> rtx::Result<Trained<Gpt<V, T, D, H, F, L, f32>>> {
    let stream = token_stream(cfg.items(), T, V, cfg.seed);
    let pos: Tensor<(Const<T>,), i64> = Tensor::from_vec((0..T as i64).collect(), (Const,), dev);
    let mut model = Gpt::<V, T, D, H, F, L, f32>::init(&Device::Cpu, cfg.seed + pg.rank() as u64);
    model.move_to(dev);
    model.track_gradients();
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let opt = Optim::new(cfg.optim, Optim::AdamW(AdamW::new(3e-4)));
    train::train(pg, dev, cfg, model, opt, |m, opt, windows| {
        // Window `w` is tokens `w T .. w T + T`; each target is the token after.
        let (mut ids, mut next) = (Vec::new(), Vec::new());
        for &w in windows {
            ids.extend_from_slice(&stream[w * T..][..T]);
            next.extend_from_slice(&stream[w * T + 1..][..T]);
        }
        let n = ids.len();
        let ids: Tensor<(usize,), i64> = Tensor::from_vec(ids, (n,), dev);
        let next: Tensor<(usize,), i64> = Tensor::from_vec(next, (n,), dev);
        Ok(step.run(m, opt, (ids, pos.clone()), &next)?.item())
    })
}
