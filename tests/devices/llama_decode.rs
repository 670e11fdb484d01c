//! A Llama decode step captured as a CUDA graph against the same step uncaptured, on every
//! GPU: a random-weight model of SmolLM2-135M's widths and types (4 of its 30 blocks),
//! prompts of different lengths prefilled into two caches alike, then 16 greedy decode steps
//! through `Llama::forward_batch` on one and `CapturedDecode::step` replays on the other, at
//! batch 1 and 4. The same kernels run on the same values, so the logits agree to within
//! 1e-6 of their largest magnitude (bit for bit, printed); a finished sequence (a `None`
//! row) leaves the others' results as they were. The GPU's uncaptured logits are also held
//! to the CPU's within the quantized products' difference (the CPU rounds activations to 8
//! bits), a decode step to the same tokens prefilled at once (within 1e-3), and `Generation`
//! on the GPU, through the captured step, greedily matches the
//! uncaptured one.

use super::*;
use rtx::quant::GgmlType;
use rtx_models::generate::{GenerateOptions, Generation, Sampling};
use rtx_models::llama::{Llama, LlamaConfig, WeightFormat};

fn model(device: Device) -> Llama {
    let mut config = LlamaConfig::smollm2_135m();
    config.block_count = 4;
    let (q4, q8) = (GgmlType::Q4_1, GgmlType::Q8_0);
    Llama::random(&config, q4, q8, 11, WeightFormat::Quantized, device).unwrap()
}

/// Prompts of `batch` different lengths.
fn prompts(batch: usize) -> Vec<Vec<u32>> {
    (0..batch)
        .map(|i| {
            (0..3 + 7 * i)
                .map(|t| ((t * 977 + i * 31) % 49152) as u32)
                .collect()
        })
        .collect()
}

fn argmax(row: &[f32]) -> u32 {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a)))
        .unwrap() as u32
}

/// The largest difference, over the largest magnitude of `want`.
fn relative(got: &[f32], want: &[f32]) -> f32 {
    let max = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    got.iter()
        .zip(want)
        .fold(0f32, |m, (g, w)| m.max((g - w).abs()))
        / max
}

/// 16 decode steps, uncaptured and captured, compared step by step. From step 8 on the last
/// sequence (when there are several) is finished: its row is left out.
fn captured_matches_uncaptured(model: &Llama, batch: usize) {
    let vocab = model.config().vocab_size;
    let prompts = prompts(batch);
    let lists: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
    let mut eager = model.new_batch_cache(batch, 64).unwrap();
    let mut replayed = model.new_batch_cache(batch, 64).unwrap();
    let first = model.forward_batch(&lists, &mut eager).unwrap().to_vec();
    model.forward_batch(&lists, &mut replayed).unwrap();
    let mut graph = model.capture_decode(&mut replayed).unwrap();
    let mut next: Vec<u32> = first.chunks(vocab).map(argmax).collect();
    let mut bitwise = true;
    for step in 0..16 {
        let done = batch > 1 && step >= 8;
        let tokens: Vec<Option<u32>> = (0..batch)
            .map(|s| (!(done && s == batch - 1)).then_some(next[s]))
            .collect();
        let ids: Vec<[u32; 1]> = next.iter().map(|&t| [t]).collect();
        let lists: Vec<&[u32]> = (0..batch)
            .map(|s| {
                if tokens[s].is_some() {
                    &ids[s][..]
                } else {
                    &[][..]
                }
            })
            .collect();
        let want = model.forward_batch(&lists, &mut eager).unwrap().to_vec();
        let got = graph.step(&tokens, &mut replayed).unwrap().to_vec();
        assert_eq!(eager.lens(), replayed.lens(), "step {step}");
        let mut row = 0;
        for s in 0..batch {
            if tokens[s].is_none() {
                continue;
            }
            let (w, g) = (
                &want[row * vocab..(row + 1) * vocab],
                &got[s * vocab..(s + 1) * vocab],
            );
            row += 1;
            bitwise &= w.iter().zip(g).all(|(a, b)| a.to_bits() == b.to_bits());
            let e = relative(g, w);
            assert!(
                e <= 1e-6,
                "batch {batch}, step {step}, sequence {s}: captured logits off by {e} of the \
                 largest"
            );
            next[s] = argmax(w);
        }
    }
    println!("llama decode graph, batch {batch}: 16 steps, bit for bit: {bitwise}");
}

#[test]
fn llama_decode_graph_replays_the_uncaptured_step() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("llama decode graph: skipped: no CUDA device: {why}");
            return;
        }
    };
    let cpu = model(Device::Cpu);
    for dev in gpus {
        let m = model(dev);
        for batch in [1, 4] {
            captured_matches_uncaptured(&m, batch);
        }
        // The GPU's prefill against the CPU's: the CPU quantizes activations to 8 bits.
        let p = prompts(3);
        let lists: Vec<&[u32]> = p.iter().map(Vec::as_slice).collect();
        let on = |m: &Llama| {
            let mut cache = m.new_batch_cache(3, 32).unwrap();
            m.forward_batch(&lists, &mut cache).unwrap().to_vec()
        };
        let e = relative(&on(&m), &on(&cpu));
        println!("llama prefill on {dev} against the CPU: {e:.4} of the largest logit");
        assert!(e < 0.1, "{e}");
        // A decode step (the cached-attention kernel, one row per sequence) against the same
        // tokens prefilled at once (the products of a prefill), on the GPU: the rows' values
        // differ only by the order of sums. And the decode step against the CPU's.
        let mut cache = m.new_batch_cache(3, 32).unwrap();
        let heads: Vec<&[u32]> = lists.iter().map(|l| &l[..l.len() - 1]).collect();
        let tails: Vec<&[u32]> = lists.iter().map(|l| &l[l.len() - 1..]).collect();
        m.forward_batch(&heads, &mut cache).unwrap();
        let decoded = m.forward_batch(&tails, &mut cache).unwrap().to_vec();
        let e = relative(&decoded, &on(&m));
        println!("llama decode step on {dev} against its prefill: {e:.2e} of the largest logit");
        assert!(e < 1e-3, "{e}");
        let mut cpu_cache = cpu.new_batch_cache(3, 32).unwrap();
        cpu.forward_batch(&heads, &mut cpu_cache).unwrap();
        let on_cpu = cpu.forward_batch(&tails, &mut cpu_cache).unwrap().to_vec();
        let e = relative(&decoded, &on_cpu);
        println!("llama decode step on {dev} against the CPU: {e:.4} of the largest logit");
        assert!(e < 0.1, "{e}");
        // Generation takes the captured step by default on a GPU; greedy, it matches the
        // uncaptured one token for token.
        let options = GenerateOptions {
            sampling: Sampling::greedy(),
            max_tokens: 12,
            ..GenerateOptions::default()
        };
        let run = |options: &GenerateOptions| {
            let mut g = Generation::new(&m, &p[1], options).unwrap();
            let ids: Vec<u32> = g.by_ref().map(|t| t.unwrap().id).collect();
            (ids, g.uses_cuda_graph())
        };
        let (captured, used) = run(&options);
        let (eager, unused) = run(&options.clone().with_cuda_graph(false));
        assert!(used && !unused);
        assert_eq!(captured, eager);
    }
}
