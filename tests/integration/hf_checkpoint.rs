//! Hugging Face checkpoints: single files and shards behind an index, loaded through a key
//! map, with dtype casts and strict errors that name both keys and both shapes.

use rtx::io::{Checkpoint, HfCheckpoint, KeyMap};
use rtx::prelude::*;
use std::path::{Path, PathBuf};

/// A model whose names differ from the checkpoint's (`enc.*` here, `encoder.layer.*` there).
#[model]
struct Small<E: Float = f32> {
    enc: [Linear<4, 3, E>; 2],
    norm: LayerNorm<3, E>,
}

fn map() -> KeyMap {
    KeyMap::new()
        .rename("encoder.layer", "enc")
        .rename("final_norm", "norm")
        .ignore("pooler")
}

/// Adds `t` to `ck` under `key`, as f64 when `f64_file`.
fn put<S: Shape>(ck: &mut Checkpoint, key: &str, t: &Tensor<S>, f64_file: bool) {
    if f64_file {
        ck.add_tensor(key, &t.cast::<f64>()).unwrap();
    } else {
        ck.add_tensor(key, t).unwrap();
    }
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtx-hf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes the tensors of a seeded `Small` under Hugging Face-style names in two shards (plus
/// a pooler the model lacks), in f32 or f64, and the index that lists them; returns the
/// source model.
fn write_sharded(dir: &Path, f64_file: bool) -> Small {
    let src = Small::<f32>::init(&Device::Cpu, 7);
    let one = "model-00001-of-00002.safetensors";
    let two = "model-00002-of-00002.safetensors";
    let mut shards = [Checkpoint::new(), Checkpoint::new()];
    let mut weight_map = serde_json::Map::new();
    for (i, layer) in src.enc.iter().enumerate() {
        let k = format!("encoder.layer.{i}");
        put(
            &mut shards[i],
            &format!("{k}.weight"),
            &layer.weight,
            f64_file,
        );
        let bias = layer.bias.as_ref().expect("Linear has a bias");
        put(&mut shards[i], &format!("{k}.bias"), bias, f64_file);
    }
    put(
        &mut shards[1],
        "final_norm.weight",
        &src.norm.weight,
        f64_file,
    );
    put(&mut shards[1], "final_norm.bias", &src.norm.bias, f64_file);
    let pooler = Tensor::<Rank2<2, 2>>::ones((Const, Const), Device::Cpu);
    put(&mut shards[1], "pooler.dense.weight", &pooler, f64_file);
    for (i, ck) in shards.iter().enumerate() {
        for name in ck.names() {
            weight_map.insert(name.into(), [one, two][i].into());
        }
    }
    let [a, b] = shards;
    a.save(dir.join(one)).unwrap();
    b.save(dir.join(two)).unwrap();
    let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_string_pretty(&index).unwrap(),
    )
    .unwrap();
    src
}

#[test]
fn a_sharded_checkpoint_loads_through_the_key_map() {
    let dir = scratch("sharded");
    let src = write_sharded(&dir, false);
    let (w0, w1) = (src.enc[0].weight.to_vec(), src.enc[1].weight.to_vec());
    let ck = HfCheckpoint::open(&dir).unwrap();
    assert_eq!(ck.names().count(), 7);
    assert_eq!(ck.dims("encoder.layer.1.weight"), Some(&[3usize, 4][..]));
    let mut m = Small::<f32>::init(&Device::Cpu, 99);
    ck.load_model(&mut m, &map()).unwrap();
    assert_eq!(m.enc[0].weight.to_vec(), w0);
    assert_eq!(m.enc[1].weight.to_vec(), w1);
    // The same file opened by its index path, into bf16: every value rounded once.
    let ck = HfCheckpoint::open(dir.join("model.safetensors.index.json")).unwrap();
    let mut half = Small::<bf16>::init(&Device::Cpu, 0);
    ck.load_model(&mut half, &map()).unwrap();
    let want: Vec<bf16> = w0.iter().map(|&x| bf16::from_f32(x)).collect();
    assert_eq!(half.enc[0].weight.to_vec(), want);
}

#[test]
fn f64_weights_are_cast_on_load() {
    let dir = scratch("f64");
    let w0 = write_sharded(&dir, true).enc[0].weight.to_vec();
    let ck = HfCheckpoint::open(&dir).unwrap();
    assert_eq!(ck.dtype("encoder.layer.0.weight"), Some(DType::F64));
    let mut m = Small::<f32>::init(&Device::Cpu, 99);
    ck.load_model(&mut m, &map()).unwrap();
    assert_eq!(m.enc[0].weight.to_vec(), w0);
}

#[test]
fn errors_name_both_keys_and_both_shapes() {
    let dir = scratch("errors");
    write_sharded(&dir, false);
    let ck = HfCheckpoint::open(&dir).unwrap();
    // Without the pooler ignored, it is unexpected, under the file's name.
    let strict = KeyMap::new()
        .rename("encoder.layer", "enc")
        .rename("final_norm", "norm");
    let mut m = Small::<f32>::init(&Device::Cpu, 0);
    let before = m.enc[0].weight.to_vec();
    let e = ck.load_model(&mut m, &strict).unwrap_err().to_string();
    assert!(e.contains("unexpected keys: `pooler.dense.weight`"), "{e}");
    assert_eq!(
        m.enc[0].weight.to_vec(),
        before,
        "a failed load changes nothing"
    );
    // A model whose first layer is wider: both names and both shapes.
    #[model]
    struct Wider {
        enc: [Linear<4, 5>; 2],
        norm: LayerNorm<3>,
    }
    let mut w = Wider::init(&Device::Cpu, 0);
    let e = ck.load_model(&mut w, &map()).unwrap_err().to_string();
    assert!(
        e.contains(
            "`enc.0.weight` (`encoder.layer.0.weight` in the file) is float32 [3, 4] in the \
             file but float32 [5, 4] in the model"
        ),
        "{e}"
    );
    assert!(e.contains("model.safetensors.index.json"), "{e}");
    // Nothing maps to the norm: missing.
    let e = ck
        .load_model(
            &mut Small::<f32>::init(&Device::Cpu, 0),
            &KeyMap::new()
                .rename("encoder.layer", "enc")
                .ignore("pooler"),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("missing keys: `norm.weight`, `norm.bias`"),
        "{e}"
    );
    assert!(e.contains("unexpected keys: `final_norm.bias`"), "{e}");
    // Two keys sent to one name.
    let clash = KeyMap::new()
        .rename("encoder.layer", "enc")
        .rename("final_norm", "norm")
        .rename("pooler.dense", "norm");
    let e = ck
        .load_model(&mut Small::<f32>::init(&Device::Cpu, 0), &clash)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sends both `final_norm.weight` and `pooler.dense.weight` to `norm.weight`"),
        "{e}"
    );
}

#[test]
fn a_corrupt_index_is_named() {
    let dir = scratch("index");
    write_sharded(&dir, false);
    let index = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&index).unwrap();
    let open = |t: &str| {
        std::fs::write(&index, t).unwrap();
        HfCheckpoint::open(&dir).unwrap_err().to_string()
    };
    let e = open(&text.replace("model-00001-of-00002", "../model-00001-of-00002"));
    assert!(e.contains("not a file beside the index"), "{e}");
    let e = open(&text.replace("\"encoder.layer.0.bias\"", "\"encoder.layer.0.other\""));
    assert!(
        e.contains("holds `encoder.layer.0.bias`, which the index does not list"),
        "{e}"
    );
    let e = open(&text.replace("model-00001-of-00002", "model-00003-of-00002"));
    assert!(e.contains("model-00003-of-00002.safetensors"), "{e}");
    let e = open("{\"weight_map\": 3}");
    assert!(e.contains("no `weight_map` object"), "{e}");
    // A key the index puts in the wrong shard.
    let moved = text.replacen(
        "\"encoder.layer.1.bias\": \"model-00002-of-00002.safetensors\"",
        "\"encoder.layer.1.bias\": \"model-00001-of-00002.safetensors\"",
        1,
    );
    let e = open(&moved);
    assert!(e.contains("`encoder.layer.1.bias` is in"), "{e}");
    let empty = scratch("empty");
    let e = HfCheckpoint::open(&empty).unwrap_err().to_string();
    assert!(e.contains("neither model.safetensors nor"), "{e}");
}
