//! Checkpoints (`rtx::io`): bitwise round trips in every float type, casts, strict loading,
//! every kind of bad file named in its error, a process killed while saving, and training
//! resumed from a checkpoint matching uninterrupted training bit for bit.

use rtx::io::Checkpoint;
use rtx::nn::{TensorKind, Visitor};
use rtx::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("checkpoint")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every tensor of a model: name, dims, the bits of each value (widened to f64, which is
/// exact and one-to-one for every float type), and whether it tracks gradients.
type Snapshot = Vec<(String, Vec<usize>, Vec<u64>, bool)>;

fn snapshot(m: &impl Module) -> Snapshot {
    struct Snap(Snapshot);
    impl Visitor for Snap {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, _: TensorKind) {
            let bits = t.to_vec().iter().map(|x| x.to_f64().to_bits()).collect();
            self.0
                .push((name.to_string(), t.dims().to_vec(), bits, t.tracks_grad()));
        }
    }
    let mut s = Snap(Vec::new());
    m.visit("", &mut s);
    s.0
}

/// One of every layer, in any float type.
#[model]
struct Zoo<E: Float> {
    fc: Linear<6, 4, E>,
    conv: Conv2d<2, 3, 3, Conv<1, 1>, E>,
    bn: BatchNorm2d<3, E>,
    ln: LayerNorm<4, E>,
    emb: Embedding<7, 4, E>,
    attn: CausalSelfAttention<4, 2, E>,
}

impl<E: Float> Zoo<E> {
    fn new(seed: u64) -> Self {
        let dev = Device::Cpu;
        let mut zoo = Zoo {
            fc: Linear::init_named(&dev, seed, "fc."),
            conv: Conv2d::init_named(&dev, seed, "conv."),
            bn: BatchNorm2d::new(dev),
            ln: LayerNorm::new(dev),
            emb: Embedding::init_named(&dev, seed, "emb."),
            attn: CausalSelfAttention::init_named(&dev, seed, "attn."),
        };
        // Non-trivial values everywhere: norm scales, shifts and running statistics.
        let x: Tensor<Rank4<2, 3, 2, 2>> = Tensor::randn((Const, Const, Const, Const), seed, dev);
        zoo.bn.forward(&x.cast::<E>());
        zoo.ln.weight = Tensor::<Rank1<4>>::randn((Const,), seed + 1, dev).cast();
        zoo.ln.bias = Tensor::<Rank1<4>>::randn((Const,), seed + 2, dev).cast();
        zoo
    }
}

fn round_trip<E: Float>(tag: &str) {
    let d = dir(&format!("round-trip-{tag}"));
    let path = d.join("zoo.safetensors");
    let mut saved = Zoo::<E>::new(1);
    saved.track_gradients();
    saved.ln.freeze();
    saved.save(&path).unwrap();

    let mut loaded = Zoo::<E>::new(2);
    loaded.track_gradients();
    loaded.ln.freeze();
    assert_ne!(snapshot(&loaded), snapshot(&saved));
    loaded.load(&path).unwrap();
    // Values bit for bit, and gradient tracking as before the load (frozen `ln` included).
    assert_eq!(snapshot(&loaded), snapshot(&saved), "{tag}");
    assert_eq!(loaded.frozen_parameters(), ["ln.weight", "ln.bias"]);
    assert_eq!(loaded.bn.num_batches_tracked().item().to_f64(), 1.0);

    let ck = Checkpoint::open(&path).unwrap();
    assert_eq!(ck.dtype("fc.weight"), Some(E::DTYPE));
    assert_eq!(ck.dtype("bn.num_batches_tracked"), Some(DType::I64));
    assert_eq!(ck.dims("conv.weight"), Some(&[3, 2, 3, 3][..]));
    assert_eq!(ck.dims("attn.qkv.weight"), Some(&[12, 4][..]));
    // Saving the loaded model gives the same bytes.
    let again = d.join("again.safetensors");
    loaded.save(&again).unwrap();
    assert_eq!(
        std::fs::read(&again).unwrap(),
        std::fs::read(&path).unwrap()
    );
}

#[test]
fn models_round_trip_bit_for_bit_in_every_float_type() {
    round_trip::<f32>("f32");
    round_trip::<f64>("f64");
    round_trip::<f16>("f16");
    round_trip::<bf16>("bf16");
}

#[test]
fn float_dtypes_are_cast_on_load_and_loaded_parameters_still_train() {
    let d = dir("cast");
    let path = d.join("wide.safetensors");
    let wide = Zoo::<f64>::new(3);
    wide.save(&path).unwrap();
    let mut narrow = Zoo::<bf16>::new(4);
    narrow.track_gradients();
    narrow.load(&path).unwrap();
    let want: Vec<bf16> = wide
        .fc
        .weight
        .to_vec()
        .into_iter()
        .map(bf16::from_f64)
        .collect();
    assert_eq!(narrow.fc.weight.to_vec(), want);
    let mut single = Zoo::<f32>::new(4);
    single.track_gradients();
    single.load(&path).unwrap();
    let want: Vec<f32> = wide.emb.weight.to_vec().iter().map(|&x| x as f32).collect();
    assert_eq!(single.emb.weight.to_vec(), want);

    // The loaded parameters are leaves that record gradients: a step moves them.
    assert!(single.fc.weight.tracks_grad());
    let x: Tensor<Rank2<2, 6>> = Tensor::ones((Const, Const), Device::Cpu);
    let grads = single.fc.forward(&x).sum_all().backward();
    let before = single.fc.weight.to_vec();
    Sgd::new(0.1).step(&mut single, &grads);
    assert_ne!(single.fc.weight.to_vec(), before);
}

/// A safetensors file from a hand-written header and data.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    h.resize(h.len().next_multiple_of(8), b' ');
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    out
}

/// Loads `bytes` (written to `name`) into a `Linear<2, 3>`, expecting an error that names
/// the file and contains every one of `parts`; the model must be unchanged.
fn bad(d: &Path, name: &str, bytes: &[u8], parts: &[&str]) {
    let path = d.join(name);
    std::fs::write(&path, bytes).unwrap();
    let mut m = Linear::<2, 3>::new(Device::Cpu, 0);
    let before = snapshot(&m);
    let msg = m.load(&path).unwrap_err().to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    for p in parts {
        assert!(msg.contains(p), "`{p}` not in: {msg}");
    }
    assert_eq!(snapshot(&m), before, "a failed load changed the model");
}

#[test]
fn every_bad_file_is_an_error_naming_the_file_and_tensor() {
    let d = dir("bad");
    let good_path = d.join("good.safetensors");
    Linear::<2, 3>::new(Device::Cpu, 0)
        .save(&good_path)
        .unwrap();
    let good = std::fs::read(&good_path).unwrap();

    // Truncated: the last tensor (`weight`: the crate orders by dtype, then name) runs past
    // the end; cut inside the header, the header itself is short.
    bad(
        &d,
        "cut.safetensors",
        &good[..good.len() - 3],
        &["`weight`", "truncated"],
    );
    bad(&d, "cut-header.safetensors", &good[..20], &["truncated"]);
    bad(&d, "empty.safetensors", &[], &["0 bytes", "truncated"]);
    // Corrupt header: not JSON, or a length field of garbage.
    let mut json = good.clone();
    json[8] = b'#';
    bad(&d, "json.safetensors", &json, &["not valid JSON"]);
    let mut len = good.clone();
    len[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    bad(&d, "len.safetensors", &len, &["header length"]);
    // Offsets outside the data, and a byte length that does not match dtype and dims.
    let out = raw(
        r#"{"bias":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"weight":{"dtype":"F32","shape":[3,2],"data_offsets":[12,600]}}"#,
        &[0; 36],
    );
    bad(&d, "offsets.safetensors", &out, &["`weight`", "[12, 600]"]);
    let short = raw(
        r#"{"bias":{"dtype":"F32","shape":[3],"data_offsets":[0,8]},"weight":{"dtype":"F32","shape":[3,2],"data_offsets":[8,32]}}"#,
        &[0; 32],
    );
    bad(
        &d,
        "length.safetensors",
        &short,
        &["`bias`", "12 bytes", "span 8"],
    );
    // A non-float dtype for a float parameter.
    let ints = raw(
        r#"{"bias":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"weight":{"dtype":"I32","shape":[3,2],"data_offsets":[12,36]}}"#,
        &[0; 36],
    );
    bad(
        &d,
        "ints.safetensors",
        &ints,
        &[
            "`weight` is int32",
            "not a float type",
            "float32 [3, 2] in the model",
        ],
    );
    // A wrong shape names both shapes.
    Linear::<3, 3>::new(Device::Cpu, 0)
        .save(d.join("shape.safetensors"))
        .unwrap();
    let wide = std::fs::read(d.join("shape.safetensors")).unwrap();
    bad(
        &d,
        "shape.safetensors",
        &wide,
        &["`weight` is float32 [3, 3] in the file but float32 [3, 2] in the model"],
    );
    // Missing and unexpected keys are listed together.
    let mut ck = Checkpoint::new();
    ck.add_model("", &Linear::<2, 3>::new(Device::Cpu, 0).without_bias())
        .unwrap();
    ck.add_tensor(
        "extra.scale",
        &Tensor::<Rank1<1>>::ones((Const,), Device::Cpu),
    )
    .unwrap();
    ck.save(d.join("keys.safetensors")).unwrap();
    let keys = std::fs::read(d.join("keys.safetensors")).unwrap();
    bad(
        &d,
        "keys.safetensors",
        &keys,
        &["missing keys: `bias`", "unexpected keys: `extra.scale`"],
    );
    // A file that is not there.
    let gone = d.join("gone.safetensors");
    let msg = Linear::<2, 3>::new(Device::Cpu, 0)
        .load(&gone)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("gone.safetensors: cannot read"), "{msg}");
}

/// A hand-written norm layer that keeps no batch count.
#[model]
struct PlainNorm {
    weight: Tensor<Rank1<2>>,
    bias: Tensor<Rank1<2>>,
    #[buffer]
    running_mean: Tensor<Rank1<2>>,
    #[buffer]
    running_var: Tensor<Rank1<2>>,
}

#[test]
fn batch_counts_are_int64_in_the_file_and_lenient_as_in_pytorch() {
    let d = dir("count");
    let path = d.join("bn.safetensors");
    let bn = BatchNorm1d::<2>::new(Device::Cpu);
    for _ in 0..3 {
        bn.forward(&Tensor::<Rank2<4, 2>>::randn(
            (Const, Const),
            1,
            Device::Cpu,
        ));
    }
    bn.save(&path).unwrap();
    let ck = Checkpoint::open(&path).unwrap();
    let count: Tensor<(), i64> = ck.tensor("num_batches_tracked", Device::Cpu).unwrap();
    assert_eq!(count.item(), 3);
    let mut back = BatchNorm1d::<2, f64>::new(Device::Cpu);
    back.load(&path).unwrap();
    assert_eq!(back.num_batches_tracked().item(), 3.0);
    // As in PyTorch: a count missing from the file keeps the model's value, and a count the
    // model does not keep is skipped.
    let mut no_count = Checkpoint::new();
    no_count.add_tensor("weight", &bn.weight).unwrap();
    no_count.add_tensor("bias", &bn.bias).unwrap();
    no_count
        .add_tensor("running_mean", &bn.running_mean())
        .unwrap();
    no_count
        .add_tensor("running_var", &bn.running_var())
        .unwrap();
    no_count.load_model("", &mut back).unwrap();
    assert_eq!(back.num_batches_tracked().item(), 3.0);
    let mut plain = PlainNorm {
        weight: Tensor::zeros((Const,), Device::Cpu),
        bias: Tensor::zeros((Const,), Device::Cpu),
        running_mean: Tensor::zeros((Const,), Device::Cpu),
        running_var: Tensor::zeros((Const,), Device::Cpu),
    };
    plain.load(&path).unwrap();
    assert_eq!(plain.running_var.to_vec(), bn.running_var().to_vec());

    // An integer tensor anywhere else is still refused.
    let f: Tensor<Rank1<2>> = Tensor::ones((Const,), Device::Cpu);
    let i: Tensor<Rank1<2>, i64> = Tensor::zeros((Const,), Device::Cpu);
    let mut ints = Checkpoint::new();
    ints.add_tensor("weight", &f)
        .unwrap()
        .add_tensor("bias", &f)
        .unwrap();
    ints.add_tensor("running_mean", &i)
        .unwrap()
        .add_tensor("running_var", &f)
        .unwrap();
    ints.add_tensor("num_batches_tracked", &count).unwrap();
    let e = ints.load_model("", &mut back).unwrap_err().to_string();
    assert!(
        e.contains("`running_mean` is int64 in the file, not a float type"),
        "{e}"
    );
    assert!(!e.contains("num_batches_tracked"), "{e}");
}

/// The test harness's name of [`crash_child`], which the crash test runs in a child process.
const CRASH_CHILD: &str = "checkpoint::crash_child";

/// Saves two alternating models to the file named by `RTX_CRASH_CHILD` until killed.
#[test]
fn crash_child() {
    let Some(path) = std::env::var_os("RTX_CRASH_CHILD") else {
        return;
    };
    let models = [
        Linear::<512, 512>::new(Device::Cpu, 1),
        Linear::<512, 512>::new(Device::Cpu, 2),
    ];
    for i in 0.. {
        models[i % 2].save(&path).unwrap();
    }
}

/// The names of the temporary files in `d`.
fn temporaries(d: &Path) -> Vec<String> {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".model.safetensors.tmp-"))
        .collect()
}

#[test]
fn a_process_killed_while_saving_leaves_a_whole_checkpoint() {
    let d = dir("crash");
    let path = d.join("model.safetensors");
    let models = [
        Linear::<512, 512>::new(Device::Cpu, 1),
        Linear::<512, 512>::new(Device::Cpu, 2),
    ];
    models[0].save(&path).unwrap();
    let versions = models.map(|m| snapshot(&m));
    let exe = std::env::current_exe().unwrap();
    let mut killed_mid_save = 0;
    for round in 0..3 {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", CRASH_CHILD, "--test-threads=1"])
            .env("RTX_CRASH_CHILD", &path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Kill it (SIGKILL: no destructors, no cleanup) while a save is writing its
        // temporary file, the moment one is seen.
        let seen_before = temporaries(&d).len();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while temporaries(&d).len() == seen_before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if temporaries(&d).len() > seen_before {
            killed_mid_save += 1;
        }
        let mut m = Linear::<512, 512>::new(Device::Cpu, 3);
        m.load(&path).unwrap();
        let got = snapshot(&m);
        let whole = got == versions[0] || got == versions[1];
        assert!(whole, "a partial checkpoint after kill {round}");
    }
    // The kills left the hidden temporary files of the interrupted saves (at least one
    // landed before its rename), and the target was whole every time.
    assert!(killed_mid_save > 0, "no kill landed during a save");
}

// ---- Resuming training from a checkpoint ----

#[model]
struct Net<E: Float> {
    fc1: Linear<4, 8, E>,
    bn: BatchNorm1d<8, E>,
    fc2: Linear<8, 3, E>,
}

impl<E: Float> Net<E> {
    fn new(seed: u64) -> Self {
        Net {
            fc1: Linear::init_named(&Device::Cpu, seed, "fc1."),
            bn: BatchNorm1d::new(Device::Cpu),
            fc2: Linear::init_named(&Device::Cpu, seed, "fc2."),
        }
    }

    fn forward(&self, x: &Tensor<(usize, Const<4>), E>) -> Tensor<(usize, Const<3>), E> {
        self.fc2
            .forward(&self.bn.forward(&self.fc1.forward(x)).relu())
    }
}

/// A batch of inputs and class labels.
type Batch<E> = (Tensor<(usize, Const<4>), E>, Tensor<(usize,), i64>);

/// Step `step`'s batch: fixed by the step number alone.
fn batch<E: Float>(step: usize) -> Batch<E> {
    let x: Tensor<(usize, Const<4>)> = Tensor::randn((16, Const), 100 + step as u64, Device::Cpu);
    let labels = (0..16).map(|i| ((i * 7 + step) % 3) as i64).collect();
    (x.cast(), Tensor::from_vec(labels, (16,), Device::Cpu))
}

fn train<E: Float, O: Optimizer>(model: &mut Net<E>, opt: &mut O, steps: std::ops::Range<usize>) {
    for s in steps {
        let (x, y) = batch::<E>(s);
        let grads = cross_entropy(&model.forward(&x), &y).backward();
        opt.step(model, &grads);
    }
}

fn state_bits(s: &OptimState) -> Vec<(String, Vec<u64>)> {
    let t = s.tensors.iter().map(|(k, t)| {
        let mut v: Vec<u64> = t.values.iter().map(|x| x.to_bits()).collect();
        v.extend(t.dims.iter().map(|&d| d as u64));
        (k.clone(), v)
    });
    let sc = s
        .scalars
        .iter()
        .map(|(k, v)| (k.clone(), vec![v.to_bits()]));
    t.chain(sc).collect()
}

/// Trains `n + m` steps straight, and `n` steps, a checkpoint, a fresh model and optimizer
/// (other seed, other learning rate: both must come from the file) and `m` more steps.
fn resume<E: Float, O: Optimizer>(tag: &str, make: impl Fn(f64) -> O, lr: f64) {
    let (n, m) = (4, 3);
    let mut straight = Net::<E>::new(1);
    straight.track_gradients();
    let mut opt = make(lr);
    train(&mut straight, &mut opt, 0..n + m);

    let mut first = Net::<E>::new(1);
    first.track_gradients();
    let mut opt1 = make(lr);
    train(&mut first, &mut opt1, 0..n);
    let halfway = snapshot(&first);
    let path = dir(&format!("resume-{tag}")).join("ck.safetensors");
    let mut ck = Checkpoint::new();
    ck.add_model("model", &first)
        .unwrap()
        .add_optimizer("optim", &opt1)
        .unwrap();
    ck.set_metadata("step", n.to_string());
    ck.save(&path).unwrap();
    drop((first, opt1, ck));

    let mut resumed = Net::<E>::new(99);
    resumed.track_gradients();
    let mut opt2 = make(lr * 3.0);
    let ck = Checkpoint::open(&path).unwrap();
    ck.load_model("model", &mut resumed).unwrap();
    ck.load_optimizer("optim", &mut opt2).unwrap();
    assert_eq!(ck.metadata("step"), Some("4"));
    assert_eq!(opt2.lr(), lr);
    let start: usize = ck.metadata("step").unwrap().parse().unwrap();
    train(&mut resumed, &mut opt2, start..n + m);

    let end = snapshot(&straight);
    assert_ne!(end, halfway, "{tag}: training did not move the model");
    assert_eq!(
        snapshot(&resumed),
        end,
        "{tag}: parameters or buffers differ"
    );
    assert_eq!(
        state_bits(&opt2.state_dict()),
        state_bits(&opt.state_dict()),
        "{tag}: optimizer state differs"
    );
}

#[test]
fn resumed_training_matches_uninterrupted_training_bit_for_bit() {
    resume::<f32, _>(
        "adam",
        |lr| Adam::new(lr).amsgrad(true).weight_decay(0.01),
        0.01,
    );
    resume::<bf16, _>("adam-bf16", Adam::new, 0.01);
    resume::<f32, _>("adamw", |lr| AdamW::new(lr).weight_decay(0.1), 0.01);
    resume::<f32, _>("sgd", |lr| Sgd::new(lr).momentum(0.9).nesterov(true), 0.05);
    resume::<f64, _>(
        "sgd-f64",
        |lr| Sgd::new(lr).momentum(0.9).dampening(0.1),
        0.05,
    );
}
