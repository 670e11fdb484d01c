//! The BERT encoder of `rtx-models` on every GPU against the CPU: a small seeded `Bert`
//! (2 layers, width 64, 4 heads) over a padded batch, its pooled, normalized embeddings in f32
//! and bf16 held to the CPU's f32 ones. The whole network runs (embeddings, masked attention,
//! GELU, layer norms, pooling), so the tolerance is on the result, not per op.

use super::*;
use rtx_models::bert::{Bert, Ids, mean_pool, normalize};

type Small<E> = Bert<1000, 64, 64, 128, 4, 2, E>;

/// Ids and mask of 3 texts of 9, 5 and 1 tokens, padded to 9.
fn batch(dev: Device) -> (Ids<usize, usize>, Ids<usize, usize>) {
    let lens = [9usize, 5, 1];
    let ids = indices(27, 90, 1000);
    let mask: Vec<i64> = lens
        .iter()
        .flat_map(|&n| (0..9).map(move |t| i64::from(t < n)))
        .collect();
    (
        Tensor::from_vec(ids, (3usize, 9usize), dev),
        Tensor::from_vec(mask, (3usize, 9usize), dev),
    )
}

/// Embeddings of the batch as f64s, from the f32 model seeded on the CPU, cast to `E` and
/// moved to `dev`.
fn embed<E: Float>(dev: Device) -> Vec<f64> {
    let mut model = Small::<E>::init(&Device::Cpu, 0);
    model.copy_from(&Small::<f32>::init(&Device::Cpu, 3));
    model.move_to(dev);
    let (ids, mask) = batch(dev);
    let hidden = model.forward(&ids, Some(&mask));
    f64s(&normalize(&mean_pool(&hidden, &mask)))
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (n(a) * n(b))
}

#[test]
fn bert_encoder_on_every_device() {
    let want = embed::<f32>(Device::Cpu);
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("bert encoder: skipped: no CUDA device: {why}");
            return;
        }
    };
    for dev in gpus {
        for (label, got, min_cos) in [
            ("f32", embed::<f32>(dev), 0.999_999),
            ("bf16", embed::<bf16>(dev), 0.999),
        ] {
            for (row, (g, w)) in got.chunks(64).zip(want.chunks(64)).enumerate() {
                let c = cosine(g, w);
                println!("bert encoder {label} on {dev}, text {row}: cosine {c}");
                assert!(
                    c >= min_cos,
                    "bert {label} on {dev}, text {row}: cosine {c}"
                );
            }
        }
    }
}
