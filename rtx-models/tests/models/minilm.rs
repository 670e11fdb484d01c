//! all-MiniLM-L6-v2 against sentence-transformers on 32 texts (mixed lengths, punctuation,
//! scripts, emoji, an empty text and one past the 256-token limit): the same token ids, and
//! embeddings with a cosine of at least 0.99999 each, from the reference ids through the
//! model alone and from the raw texts through `SentenceEncoder`. The reference is
//! `tests/fixtures/minilm_reference.safetensors`, made by the script beside it.

use rtx::io::Checkpoint;
use rtx::prelude::*;
use rtx_models::SentenceEncoder;
use rtx_models::bert::{MiniLmL6, mean_pool, normalize};
use rtx_models::sentence::cosine;

fn reference() -> Checkpoint {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/minilm_reference.safetensors"
    );
    Checkpoint::open(path).unwrap()
}

fn sentences() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sentences.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The smallest cosine between corresponding rows of 384.
fn worst_cosine(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.chunks(384)
        .zip(want.chunks(384))
        .map(|(g, w)| cosine(g, w))
        .fold(1.0f64, f64::min)
}

#[test]
fn the_model_matches_sentence_transformers_from_the_same_ids() {
    let r = reference();
    let ids: Tensor<(usize, usize), i64> = r.tensor("ids", Device::Cpu).unwrap();
    let mask: Tensor<(usize, usize), i64> = r.tensor("mask", Device::Cpu).unwrap();
    let want: Tensor<(usize, Const<384>)> = r.tensor("embeddings", Device::Cpu).unwrap();
    let files = rtx_models::pretrained::all_minilm_l6_v2().unwrap();
    let dir = files.model.parent().unwrap();
    let model = MiniLmL6::<f32>::from_pretrained(dir, Device::Cpu).unwrap();
    let got = normalize(&mean_pool(&model.forward(&ids, Some(&mask)), &mask));
    let worst = worst_cosine(&got.to_vec(), &want.to_vec());
    println!("worst cosine from the reference ids: {worst}");
    assert!(worst >= 0.99999, "worst cosine {worst}");
}

#[test]
fn sentence_encoder_matches_sentence_transformers_from_text() {
    let r = reference();
    let want_ids: Tensor<(usize, usize), i64> = r.tensor("ids", Device::Cpu).unwrap();
    let want: Tensor<(usize, Const<384>)> = r.tensor("embeddings", Device::Cpu).unwrap();
    let encoder = SentenceEncoder::<f32>::all_minilm_l6_v2(Device::Cpu).unwrap();
    let texts = sentences();
    let batch = encoder.tokenizer().encode_batch(&texts).unwrap();
    assert_eq!(
        (batch.len, batch.seq_len),
        (want_ids.dims()[0], want_ids.dims()[1])
    );
    assert_eq!(batch.ids_i64(), want_ids.to_vec(), "token ids");
    let got = encoder.encode(&texts).unwrap();
    let worst = worst_cosine(&got.to_vec(), &want.to_vec());
    println!("worst cosine from text: {worst}");
    assert!(worst >= 0.99999, "worst cosine {worst}");
    // One text alone (no padding, so no mask) gives the same embedding as in the batch.
    let one = encoder.encode(&texts[2..3]).unwrap().to_vec();
    let c = cosine(&one, &got.to_vec()[2 * 384..3 * 384]);
    assert!(c >= 0.999_999, "unpadded against padded: cosine {c}");
}

#[test]
fn a_config_of_another_size_is_refused_before_loading() {
    let files = rtx_models::pretrained::all_minilm_l6_v2().unwrap();
    let dir = files.model.parent().unwrap();
    type Wider = rtx_models::bert::Bert<30522, 512, 768, 3072, 12, 6>;
    let e = match Wider::from_pretrained(dir, Device::Cpu) {
        Ok(_) => panic!("a 384-wide checkpoint loaded into a 768-wide model"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("hidden_size is 384 in the file but 768 in the model type"),
        "{e}"
    );
    assert!(
        e.contains("intermediate_size is 1536 in the file but 3072"),
        "{e}"
    );
}
