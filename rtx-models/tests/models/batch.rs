//! Batched generation: prompts of different lengths generated together give, token for
//! token, what each gives alone (SmolLM2-135M-Instruct's file where it can be had, and a
//! small random-weight Llama always), each sequence stops on its own, a mixed step (one
//! sequence prefilling while another decodes) gives each sequence its own results, and bad
//! input is an error naming the sizes.

use super::llama::{model, reference};
use rtx::prelude::*;
use rtx::quant::GgmlType;
use rtx_models::generate::{
    BatchGeneration, FinishReason, GenerateOptions, Sampling, generate_batch, generate_ids,
};
use rtx_models::llama::{Llama, LlamaConfig, WeightFormat};

/// A small Llama with random Q4_1 projections and a Q8_0 tied embedding, on the CPU.
fn small() -> Llama {
    let config = LlamaConfig {
        vocab_size: 512,
        context_length: 256,
        embedding_length: 64,
        feed_forward_length: 128,
        block_count: 2,
        head_count: 4,
        head_count_kv: 2,
        head_dim: 16,
        rope_freq_base: 10000.0,
        rms_eps: 1e-5,
    };
    Llama::random(
        &config,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        3,
        WeightFormat::Quantized,
        Device::Cpu,
    )
    .unwrap()
}

fn small_prompts() -> Vec<Vec<u32>> {
    vec![
        vec![5, 17, 300, 2, 9],
        vec![44],
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9],
    ]
}

/// Every prompt's tokens generated in one batch and alone, asserted equal.
fn assert_batch_equals_alone(model: &Llama, prompts: &[Vec<u32>], tokens: usize, stop: &[u32]) {
    let greedy = Sampling::greedy();
    let batch = generate_batch(model, prompts, tokens, &greedy, stop).unwrap();
    for (i, prompt) in prompts.iter().enumerate() {
        let alone = generate_ids(model, prompt, tokens, &greedy, stop).unwrap();
        println!("prompt {i} ({} tokens): {alone:?}", prompt.len());
        assert_eq!(batch[i], alone, "prompt {i} of {}", prompts.len());
    }
}

#[test]
fn a_random_llama_generates_in_a_batch_what_each_prompt_generates_alone() {
    let model = small();
    let prompts = small_prompts();
    assert_batch_equals_alone(&model, &prompts, 20, &[]);
    // A stop token that sequence 0 first samples after a few others: it stops there, the
    // others go on (or stop wherever they sample it alone).
    let alone = generate_ids(&model, &prompts[0], 20, &Sampling::greedy(), &[]).unwrap();
    let k = (1..alone.len())
        .find(|&k| !alone[..k].contains(&alone[k]))
        .expect("sequence 0 samples two different tokens");
    let stop = alone[k];
    assert_batch_equals_alone(&model, &prompts, 20, &[stop]);
    let options = GenerateOptions {
        sampling: Sampling::greedy(),
        max_tokens: 20,
        stop_tokens: vec![stop],
        ..GenerateOptions::default()
    };
    let mut run = BatchGeneration::new(&model, &prompts, &options).unwrap();
    let mut per_seq = vec![Vec::new(); prompts.len()];
    for t in run.by_ref() {
        let t = t.unwrap();
        per_seq[t.seq].push(t.id);
    }
    assert_eq!(per_seq[0], alone[..k]);
    let reasons = run.finish_reasons();
    assert_eq!(reasons[0], Some(&FinishReason::StopToken(stop)));
    for (i, r) in reasons.iter().enumerate().skip(1) {
        let expect = if per_seq[i].len() == 20 {
            FinishReason::MaxTokens
        } else {
            FinishReason::StopToken(stop)
        };
        assert_eq!(*r, Some(&expect), "sequence {i}");
    }
    assert!(run.is_finished());
    let stats = run.stats();
    assert_eq!(stats.prompt_tokens, 15);
    // Each sequence samples its tokens and its stop token, if any; the first comes from the
    // prefill, the rest from decode steps.
    let decoded: usize = per_seq
        .iter()
        .zip(&reasons)
        .map(|(t, r)| t.len() + usize::from(matches!(r, Some(FinishReason::StopToken(_)))) - 1)
        .sum();
    assert_eq!(stats.decoded_tokens, decoded);
}

#[test]
fn a_mixed_step_gives_each_sequence_its_own_results() {
    let model = small();
    let vocab = model.config().vocab_size;
    // Sequence 0 decodes its sixth token while sequence 1 prefills four: each row's logits
    // are those of the same tokens given to a cache of its own.
    let mut batch = model.new_batch_cache(2, 16).unwrap();
    model
        .forward_batch(&[&[5, 17, 300, 2, 9], &[]], &mut batch)
        .unwrap();
    let mixed = model
        .forward_batch(&[&[11], &[7, 8, 9, 10]], &mut batch)
        .unwrap()
        .to_vec();
    assert_eq!(batch.lens(), &[6, 4]);
    let mut one = model.new_cache(16).unwrap();
    let a = model
        .forward_last(&[5, 17, 300, 2, 9, 11], 0, &mut one)
        .unwrap()
        .to_vec();
    let mut one = model.new_cache(16).unwrap();
    let b = model
        .forward_last(&[7, 8, 9, 10], 0, &mut one)
        .unwrap()
        .to_vec();
    let close = |got: &[f32], want: &[f32]| {
        let max = want.iter().fold(0f32, |m, x| m.max(x.abs()));
        got.iter()
            .zip(want)
            .all(|(g, w)| (g - w).abs() <= 1e-5 * max)
    };
    // Sequence 0's sixth token went through the cached-attention kernel in the batch and
    // through the prefill's products alone: equal to float rounding.
    assert!(close(&mixed[..vocab], &a), "sequence 0");
    assert_eq!(
        mixed[vocab..],
        b[..],
        "sequence 1: the same prefill, bit for bit"
    );
}

#[test]
fn batched_inputs_out_of_range_are_errors_naming_the_sizes() {
    let model = small();
    let mut cache = model.new_batch_cache(2, 4).unwrap();
    let msg = |r: rtx::Result<Tensor<(usize, usize)>>| r.unwrap_err().to_string();
    let e = msg(model.forward_batch(&[&[1]], &mut cache));
    assert!(
        e.contains("1 token lists for a cache of 2 sequences"),
        "{e}"
    );
    let e = msg(model.forward_batch(&[&[], &[]], &mut cache));
    assert!(e.contains("none of the 2 sequences"), "{e}");
    let e = msg(model.forward_batch(&[&[1], &[512]], &mut cache));
    assert!(
        e.contains("sequence 1: token id 512 is outside the vocabulary of 512"),
        "{e}"
    );
    let e = msg(model.forward_batch(&[&[1, 2, 3, 4, 5], &[1]], &mut cache));
    assert!(
        e.contains("sequence 0: 5 tokens at position 0 need 5 positions, but the cache holds 4"),
        "{e}"
    );
    // Nothing was written by the failed steps.
    assert_eq!(cache.lens(), &[0, 0]);
    let e = model.new_batch_cache(0, 4).unwrap_err().to_string();
    assert!(e.contains("0 sequences of 4 positions"), "{e}");
    let e = model.new_batch_cache(2, 257).unwrap_err().to_string();
    assert!(e.contains("context length of 256"), "{e}");
    let options = GenerateOptions::default();
    let e = BatchGeneration::new(&model, &[vec![1u32], vec![]], &options)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("prompt 1 of 2 has no tokens"), "{e}");
    let short = GenerateOptions {
        max_len: Some(3),
        ..options
    };
    let e = BatchGeneration::new(&model, &[vec![1u32], vec![1, 2, 3, 4]], &short)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("prompt 1: the prompt has 4 tokens"), "{e}");
    let e = model.capture_decode(&mut cache).unwrap_err().to_string();
    assert!(e.contains("needs a CUDA device; the model is on"), "{e}");
}

#[test]
fn smollm2_generates_in_a_batch_what_each_prompt_generates_alone() {
    let Some(model) = model(WeightFormat::Quantized) else {
        return;
    };
    let r = reference();
    // Four prompts of different lengths: the three of the logit checks and the chat prompt.
    let mut prompts: Vec<Vec<u32>> = r.logits.prompts.iter().map(|c| c.ids.clone()).collect();
    prompts.push(r.greedy.ids.clone());
    let lens: Vec<usize> = prompts.iter().map(Vec::len).collect();
    assert!(lens.windows(2).any(|w| w[0] != w[1]), "{lens:?}");
    assert_batch_equals_alone(model, &prompts, 12, &[]);
}
