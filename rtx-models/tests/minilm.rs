//! all-MiniLM-L6-v2 against sentence-transformers: the embeddings of 30 sentences (mixed
//! lengths, punctuation, non-ASCII) from the same token ids, cosine at least 0.99999 each.
//! The reference is `tests/fixtures/minilm_reference.safetensors`, made by the script beside it.

use rtx::io::Checkpoint;
use rtx::prelude::*;
use rtx_models::bert::{MiniLmL6, mean_pool, normalize};

fn model_dir() -> std::path::PathBuf {
    std::env::var_os("RTX_MINILM_DIR").expect("RTX_MINILM_DIR").into()
}

fn reference() -> Checkpoint {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/minilm_reference.safetensors");
    Checkpoint::open(path).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn embeddings_match_sentence_transformers() {
    let r = reference();
    let ids: Tensor<(usize, usize), i64> = r.tensor("ids", Device::Cpu).unwrap();
    let mask: Tensor<(usize, usize), i64> = r.tensor("mask", Device::Cpu).unwrap();
    let want: Tensor<(usize, Const<384>), f32> = r.tensor("embeddings", Device::Cpu).unwrap();
    let model = MiniLmL6::<f32>::from_pretrained(model_dir(), Device::Cpu).unwrap();
    let hidden = model.forward(&ids, Some(&mask));
    let got = normalize(&mean_pool(&hidden, &mask)).to_vec();
    let want = want.to_vec();
    let worst = got
        .chunks(384)
        .zip(want.chunks(384))
        .map(|(g, w)| cosine(g, w))
        .fold(1.0f64, f64::min);
    println!("worst cosine {worst}");
    assert!(worst >= 0.99999, "worst cosine {worst}");
}
