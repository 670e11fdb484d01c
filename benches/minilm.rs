//! all-MiniLM-L6-v2 throughput: sentences per second for batches of 64 sentences of 128
//! tokens (forward, mean pooling and normalization, from token ids to embeddings on the host),
//! on the CPU in f32 and on every GPU in f32 and bf16. Compared with sentence-transformers in
//! benches/README.md; `python3 benches/minilm_torch.py` measures it on the same machine.
//!
//! Run with `cargo bench --bench minilm [-- cpu|gpu]`. The weights are seeded, not the
//! pretrained ones: the time does not depend on their values, and the GPU machine has no
//! network to fetch them.

use rtx::prelude::*;
use rtx_models::bert::{Ids, MiniLmL6, mean_pool, normalize};
use std::time::Instant;

const BATCH: usize = 64;
const TOKENS: usize = 128;

/// Token ids as a tokenizer makes them: `[CLS]`, words, `[SEP]`; every token real.
fn inputs(device: Device) -> (Ids<usize, usize>, Ids<usize, usize>) {
    let mut ids = Vec::with_capacity(BATCH * TOKENS);
    let mut state = 12345u64;
    for _ in 0..BATCH {
        for t in 0..TOKENS {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ids.push(match t {
                0 => 101,
                t if t == TOKENS - 1 => 102,
                _ => 1000 + (state >> 33) as i64 % 29000,
            });
        }
    }
    let ids = Tensor::from_vec(ids, (BATCH, TOKENS), device);
    let mask = Tensor::ones((BATCH, TOKENS), device);
    (ids, mask)
}

/// The median seconds of `runs` timed calls after `warm` untimed ones.
fn median(warm: usize, runs: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warm {
        f();
    }
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

fn run<E: Float>(device: Device, label: &str, warm: usize, runs: usize) {
    let model = MiniLmL6::<E>::init(&device, 0);
    let (ids, mask) = inputs(device);
    let secs = median(warm, runs, || {
        let hidden = model.forward(&ids, None);
        let emb = normalize(&mean_pool(&hidden, &mask));
        // Embeddings on the host: the end of the work, and a synchronization on a GPU.
        std::hint::black_box(emb.to_vec());
    });
    println!(
        "minilm {label:<10} batch {BATCH} x {TOKENS} tokens: {:8.2} ms  {:9.1} sentences/s",
        secs * 1e3,
        BATCH as f64 / secs
    );
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    if which != "gpu" {
        run::<f32>(Device::Cpu, "cpu f32", 1, 5);
    }
    if which != "cpu" {
        if !rtx_backends::cuda::is_available() {
            println!("minilm gpu: skipped: no CUDA device");
            return;
        }
        run::<f32>(Device::Cuda(0), "cuda f32", 5, 50);
        run::<bf16>(Device::Cuda(0), "cuda bf16", 5, 50);
    }
}
