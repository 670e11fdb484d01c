//! PyTorch interop both ways, against tests/fixtures/torch_twins.py: a state dict saved by
//! PyTorch loads into the rtx twin and computes PyTorch's outputs; what rtx writes (the
//! fixture round-tripped, and a checkpoint of its own) goes to `$CARGO_TARGET_TMPDIR/interop/`
//! for the script's `check` mode, which reads it with safetensors (and torch, when present).

use rtx::io::Checkpoint;
use rtx::prelude::*;
use std::path::{Path, PathBuf};

/// The sizes of torch_twins.py.
const IN_CH: usize = 3;
const CH: usize = 4;
const SIDE: usize = 6;
const VOCAB: usize = 10;
const D: usize = 8;
const HEADS: usize = 2;
const OUT: usize = 5;

type Image = Tensor<(usize, Const<IN_CH>, Const<SIDE>, Const<SIDE>)>;
type Features = Tensor<(usize, Const<CH>, Const<SIDE>, Const<SIDE>)>;
type Ids = Tensor<(usize, usize), i64>;
type Seq = Tensor<(usize, usize, Const<OUT>)>;

/// The rtx half of the naming contract: field names and order are torch_twins.py's `Twin`.
#[model]
struct Twin {
    conv: Conv2d<IN_CH, CH, 3, Conv<1, 1>>,
    bn: BatchNorm2d<CH>,
    embed: Embedding<VOCAB, D>,
    ln: LayerNorm<D>,
    attn: CausalSelfAttention<D, HEADS>,
    head: Linear<D, OUT>,
}

impl Twin {
    fn new(seed: u64) -> Self {
        let dev = Device::Cpu;
        Twin {
            conv: Conv2d::init_named(&dev, seed, "conv."),
            bn: BatchNorm2d::new(dev),
            embed: Embedding::init_named(&dev, seed, "embed."),
            ln: LayerNorm::new(dev),
            attn: CausalSelfAttention::init_named(&dev, seed, "attn."),
            head: Linear::init_named(&dev, seed, "head."),
        }
    }

    fn forward(&self, x: &Image, ids: &Ids) -> (Features, Seq) {
        let img = self.bn.forward(&self.conv.forward(x)).relu();
        let h = self.ln.forward(&self.embed.forward_seq(ids));
        let seq = self.head.forward(&self.attn.forward(&h));
        (img, seq)
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Where the files for `torch_twins.py check` go.
fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn a_torch_state_dict_loads_and_computes_torchs_outputs() {
    let io = Checkpoint::open(fixture("torch_twins_io.safetensors")).unwrap();
    let mut twin = Twin::new(0);
    let names: Vec<String> = twin.tensor_names().into_iter().map(|(n, _)| n).collect();
    let torch_order = io.metadata("state_dict_keys").unwrap();
    assert_eq!(names.join(","), torch_order, "state_dict() order differs");

    twin.load(fixture("torch_twins.safetensors")).unwrap();
    assert_eq!(twin.bn.num_batches_tracked().item(), 7.0);
    twin.eval();
    let x: Image = io.tensor("x", Device::Cpu).unwrap();
    let ids: Ids = io.tensor("ids", Device::Cpu).unwrap();
    let (img, seq) = twin.forward(&x, &ids);
    let want_img: Features = io.tensor("img", Device::Cpu).unwrap();
    let want_seq: Seq = io.tensor("seq", Device::Cpu).unwrap();
    let (di, ds) = (
        max_diff(&img.to_vec(), &want_img.to_vec()),
        max_diff(&seq.to_vec(), &want_seq.to_vec()),
    );
    println!("max |rtx - torch|: img {di:.2e}, seq {ds:.2e}");
    assert!(di <= 1e-5, "image branch differs from torch by {di}");
    assert!(ds <= 1e-5, "sequence branch differs from torch by {ds}");

    // The fixture, round-tripped through rtx: bitwise the same tensors (checked here and by
    // the script).
    let dir = out_dir();
    let roundtrip = dir.join("roundtrip.safetensors");
    twin.save(&roundtrip).unwrap();
    let ours = Checkpoint::open(&roundtrip).unwrap();
    let theirs = Checkpoint::open(fixture("torch_twins.safetensors")).unwrap();
    assert!(ours.names().eq(theirs.names()));
    let (ours, theirs) = (
        std::fs::read(&roundtrip).unwrap(),
        std::fs::read(fixture("torch_twins.safetensors")).unwrap(),
    );
    assert!(
        ours == theirs,
        "the round trip is not byte-identical to torch's file"
    );
}

#[test]
fn an_rtx_checkpoint_is_written_for_torch_to_check() {
    let mut twin = Twin::new(42);
    // Training-mode forwards give the batch norm running statistics of its own.
    let warm: Image = Tensor::randn((3, Const, Const, Const), 5, Device::Cpu);
    for scale in [1.0, 2.0] {
        let features: Features = twin.conv.forward(&(&warm * scale));
        twin.bn.forward(&features);
    }
    twin.eval();
    let x: Image = Tensor::randn((2, Const, Const, Const), 6, Device::Cpu);
    let ids: Ids = Tensor::from_vec(vec![0, 3, 9, 3, 1, 7, 7, 2, 0, 5], (2, 5), Device::Cpu);
    let (img, seq) = twin.forward(&x, &ids);

    let dir = out_dir();
    twin.save(dir.join("rtx_init.safetensors")).unwrap();
    let mut io = Checkpoint::new();
    io.add_tensor("x", &x).unwrap();
    io.add_tensor("ids", &ids).unwrap();
    io.add_tensor("img", &img).unwrap();
    io.add_tensor("seq", &seq).unwrap();
    io.save(dir.join("rtx_init_io.safetensors")).unwrap();
    println!("wrote {}", dir.display());

    // Same keys, dtypes and dims as PyTorch's state dict.
    let ours = Checkpoint::open(dir.join("rtx_init.safetensors")).unwrap();
    let theirs = Checkpoint::open(fixture("torch_twins.safetensors")).unwrap();
    assert!(ours.names().eq(theirs.names()));
    let mut reloaded = Twin::new(0);
    reloaded.load(dir.join("rtx_init.safetensors")).unwrap();
    assert_eq!(reloaded.bn.num_batches_tracked().item(), 2.0);
    assert_eq!(
        reloaded.bn.running_var().to_vec(),
        twin.bn.running_var().to_vec()
    );
}
