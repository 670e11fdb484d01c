//! `#[model]` on structs: traversal names and order, parameter counts, summaries, training
//! mode, freezing, copying between element types, and gradients through a hand-written forward.

use rtx::nn::{TensorKind, Visitor, VisitorMut};
use rtx::prelude::*;
use rtx::{Gradients, bf16};

/// A fully connected layer generic over its sizes (const generics must pass through).
#[model]
struct Linear<const I: usize, const O: usize> {
    weight: Tensor<Rank2<I, O>>,
    bias: Tensor<Rank1<O>>,
}

impl<const I: usize, const O: usize> Linear<I, O> {
    fn new(seed: u64) -> Self {
        Linear {
            weight: Tensor::randn((Const, Const), seed, Device::Cpu),
            bias: Tensor::randn((Const,), seed + 1, Device::Cpu),
        }
    }

    fn forward(&self, x: &Tensor<(usize, Const<I>)>) -> Tensor<(usize, Const<O>)> {
        &x.matmul(&self.weight) + &self.bias
    }
}

/// A layer with no tensors, written by hand, that only cares about the training flag.
struct Dropout {
    training: bool,
}

impl Module for Dropout {
    fn visit<V: Visitor>(&self, _: &str, _: &mut V) {}
    fn visit_mut<V: VisitorMut>(&mut self, _: &str, _: &mut V) {}
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

#[model]
struct Block {
    /// Doc comments on fields stay.
    lin: Linear<4, 4>,
    #[buffer]
    running_mean: Tensor<Rank1<4>>,
    #[init(Dropout { training: true })]
    drop: Dropout,
    #[skip]
    #[init(0.1)]
    p: f64,
}

impl Block {
    fn new(seed: u64) -> Self {
        Block {
            lin: Linear::new(seed),
            running_mean: Tensor::zeros((Const,), Device::Cpu),
            drop: Dropout { training: true },
            p: 0.1,
        }
    }

    fn forward(&self, x: &Tensor<(usize, Const<4>)>) -> Tensor<(usize, Const<4>)> {
        self.lin.forward(x).relu()
    }
}

#[model]
struct Net {
    embed: Linear<3, 4>,
    blocks: [Block; 3],
    #[init(rtx::nn::init::init_vec(2, device, seed, prefix))]
    extra: Vec<Block>,
    head: Linear<4, 2>,
    scale: Tensor<Rank1<2>>,
    #[buffer]
    steps: Tensor<Rank1<1>>,
    #[skip]
    seed: u64,
}

impl Net {
    fn new(seed: u64) -> Self {
        Net {
            embed: Linear::new(seed),
            blocks: [
                Block::new(seed + 10),
                Block::new(seed + 20),
                Block::new(seed + 30),
            ],
            extra: vec![Block::new(seed + 40), Block::new(seed + 50)],
            head: Linear::new(seed + 60),
            scale: Tensor::ones((Const,), Device::Cpu),
            steps: Tensor::zeros((Const,), Device::Cpu),
            seed,
        }
    }

    fn forward(&self, x: &Tensor<(usize, Const<3>)>) -> Tensor<(usize, Const<2>)> {
        let mut h = self.embed.forward(x).relu();
        for b in self.blocks.iter().chain(&self.extra) {
            h = b.forward(&h);
        }
        &self.head.forward(&h) * &self.scale
    }
}

/// Generic over the element type and a wrapped module, with a where clause.
#[model]
struct Wrap<E: Float, M>
where
    M: Module,
{
    inner: M,
    gain: Tensor<Rank1<2>, E>,
}

fn names(m: &impl Module) -> Vec<String> {
    m.tensor_names().into_iter().map(|(n, _)| n).collect()
}

#[test]
fn names_are_dotted_and_in_field_order() {
    let net = Net::new(1);
    let block = |p: &str| {
        vec![
            format!("{p}.lin.weight"),
            format!("{p}.lin.bias"),
            format!("{p}.running_mean"),
        ]
    };
    let mut expected = vec!["embed.weight".to_string(), "embed.bias".to_string()];
    for p in ["blocks.0", "blocks.1", "blocks.2", "extra.0", "extra.1"] {
        expected.extend(block(p));
    }
    expected.extend(["head.weight", "head.bias", "scale", "steps"].map(String::from));
    assert_eq!(names(&net), expected);

    let kinds = net.tensor_names();
    assert_eq!(
        kinds[4],
        ("blocks.0.running_mean".into(), TensorKind::Buffer)
    );
    assert_eq!(kinds[0].1, TensorKind::Parameter);
    assert_eq!(net.seed, 1);
    assert_eq!(net.blocks[0].p, 0.1);
}

#[test]
fn parameters_are_counted_without_buffers() {
    let net = Net::new(1);
    // embed 3*4+4, five blocks of 4*4+4, head 4*2+2, scale 2; buffers not counted.
    assert_eq!(net.num_parameters(), 16 + 5 * 20 + 10 + 2);
    assert_eq!(Block::new(0).num_parameters(), 20);
}

#[test]
fn generic_structs_and_where_clauses_work() {
    let w = Wrap::<f64, Linear<2, 2>> {
        inner: Linear::new(3),
        gain: Tensor::ones((Const,), Device::Cpu),
    };
    assert_eq!(names(&w), ["inner.weight", "inner.bias", "gain"]);
    assert_eq!(w.num_parameters(), 8);
}

#[test]
fn summary_is_a_readable_tree() {
    let b = Block::new(0);
    assert_eq!(
        b.summary(),
        "Block (20 parameters) {
  lin: Linear<4, 4> (20 parameters) {
    weight: [4, 4] float32
    bias: [4] float32
  }
  running_mean: [4] float32 (buffer)
}
"
    );
    let w = Wrap::<f64, [Linear<1, 1>; 2]> {
        inner: [Linear::new(0), Linear::new(1)],
        gain: Tensor::ones((Const,), Device::Cpu),
    };
    assert_eq!(
        w.summary(),
        "Wrap<f64, [Linear<1, 1>; 2]> (6 parameters) {
  inner: [Linear<1, 1>; 2] (4 parameters) {
    0: Linear<1, 1> (2 parameters) {
      weight: [1, 1] float32
      bias: [1] float32
    }
    1: Linear<1, 1> (2 parameters) {
      weight: [1, 1] float32
      bias: [1] float32
    }
  }
  gain: [2] float64
}
"
    );
    let s = Net::new(0).summary();
    assert!(s.starts_with("Net (128 parameters) {\n  embed: Linear<3, 4> (16 parameters) {\n"));
    assert!(
        s.contains("\n  extra: Vec<Block> (40 parameters) {\n    0: Block (20 parameters) {\n")
    );
    assert!(s.ends_with("  scale: [2] float32\n  steps: [1] float32 (buffer)\n}\n"));
}

#[test]
fn train_and_eval_reach_every_layer() {
    let mut net = Net::new(0);
    net.eval();
    assert!(
        net.blocks
            .iter()
            .chain(&net.extra)
            .all(|b| !b.drop.training)
    );
    net.train();
    assert!(net.blocks.iter().chain(&net.extra).all(|b| b.drop.training));
}

/// The names of parameters that got no gradient.
fn without_gradient(net: &Net, grads: &Gradients) -> Vec<String> {
    struct Check<'a>(&'a Gradients, Vec<String>);
    impl Visitor for Check<'_> {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, k: TensorKind) {
            if k == TensorKind::Parameter && self.0.get(t).is_none() {
                self.1.push(name.to_string());
            }
        }
    }
    let mut c = Check(grads, Vec::new());
    net.visit("", &mut c);
    c.1
}

#[test]
fn gradients_reach_every_parameter() {
    let mut net = Net::new(2);
    net.track_gradients();
    let x: Tensor<(usize, Const<3>)> = Tensor::randn((5, Const), 9, Device::Cpu);
    let grads = net.forward(&x).sum_all().backward();
    assert_eq!(without_gradient(&net, &grads), Vec::<String>::new());
    assert_eq!(grads.len(), 2 + 5 * 2 + 2 + 1);
}

#[test]
fn frozen_parameters_get_no_gradient() {
    let mut net = Net::new(2);
    assert_eq!(
        net.frozen_parameters().len(),
        15,
        "nothing tracks before training"
    );
    net.unfreeze();
    net.embed.freeze();
    net.blocks[1].freeze();
    let frozen = [
        "embed.weight",
        "embed.bias",
        "blocks.1.lin.weight",
        "blocks.1.lin.bias",
    ];
    assert_eq!(net.frozen_parameters(), frozen);
    let x: Tensor<(usize, Const<3>)> = Tensor::randn((5, Const), 9, Device::Cpu);
    let grads = net.forward(&x).sum_all().backward();
    assert_eq!(without_gradient(&net, &grads), frozen);
    // Moving keeps both the frozen and the tracking parameters as they were.
    net.move_to(Device::Cpu);
    assert_eq!(net.frozen_parameters(), frozen);
}

#[test]
fn copy_from_casts_between_element_types() {
    let src = Wrap::<f32, Linear<2, 2>> {
        inner: Linear::new(5),
        gain: Tensor::from_array([0.5, 2.0], Device::Cpu),
    };
    let mut dst = Wrap::<bf16, Linear<2, 2>> {
        inner: Linear::new(6),
        gain: Tensor::zeros((Const,), Device::Cpu),
    };
    dst.copy_from(&src);
    assert_eq!(
        dst.gain.to_vec(),
        [bf16::from_f32(0.5), bf16::from_f32(2.0)]
    );
    // Same element type: the tensors share storage, so values are equal exactly.
    assert_eq!(dst.inner.weight.to_vec(), src.inner.weight.to_vec());

    let err = Block::new(0).try_copy_from(&src).unwrap_err();
    assert_eq!(
        err.to_string(),
        "copy_from: the source has no tensor `lin.weight` ([4, 4])"
    );
    let mut small = Linear::<1, 2>::new(0);
    let err = small.try_copy_from(&src.inner).unwrap_err();
    assert_eq!(
        err.to_string(),
        "copy_from: `weight` is [2, 2] in the source but [1, 2] here"
    );
    let mut lin = Linear::<2, 2>::new(0);
    let err = lin.try_copy_from(&src).unwrap_err();
    assert_eq!(
        err.to_string(),
        "copy_from: the source has no tensor `weight` ([2, 2])"
    );
}

/// A model of `nn` layers, for seeded initialization.
#[model]
struct Seeded {
    layers: [rtx::nn::Linear<4, 4>; 2],
    #[init(rtx::nn::init::init_vec(2, device, seed, prefix))]
    extra: Vec<rtx::nn::Linear<4, 4>>,
    norm: rtx::nn::LayerNorm<4>,
}

#[test]
fn init_builds_every_field_seeded_by_its_name() {
    let net = Net::init(&Device::Cpu, 5);
    assert_eq!(names(&net), names(&Net::new(1)));
    assert_eq!(net.extra.len(), 2);
    assert_eq!(net.blocks[0].p, 0.1);
    assert_eq!(net.seed, 0, "a skipped field without #[init] is Default");
    assert_eq!(
        net.scale.to_vec(),
        vec![0.0, 0.0],
        "bare tensors start at zeros"
    );

    let a = Seeded::init(&Device::Cpu, 5);
    let b = Seeded::init(&Device::Cpu, 5);
    let c = Seeded::init(&Device::Cpu, 6);
    let w = |m: &rtx::nn::Linear<4, 4>| m.weight.to_vec();
    // Same seed, same values; another seed, other values; each layer seeded by its own name.
    assert_eq!(w(&a.layers[1]), w(&b.layers[1]));
    assert_ne!(w(&a.layers[1]), w(&c.layers[1]));
    assert_ne!(w(&a.layers[0]), w(&a.layers[1]));
    assert_ne!(w(&a.extra[0]), w(&a.layers[0]));
    let alone = rtx::nn::Linear::<4, 4>::init_named(&Device::Cpu, 5, "extra.1.");
    assert_eq!(w(&a.extra[1]), w(&alone));
    assert_eq!(a.norm.weight.to_vec(), vec![1.0; 4]);
    // A generic model is `Init` exactly when its type parameters are.
    let g = Wrap::<f64, Linear<2, 2>>::init(&Device::Cpu, 1);
    assert_eq!(names(&g), ["inner.weight", "inner.bias", "gain"]);
}

/// A model of `nn` layers of every kind, for the summary.
#[model]
struct Lenet {
    conv: rtx::nn::Conv2d<1, 2, 3>,
    act: ReLU,
    pool: MaxPool2d<2, 2>,
    norm: BatchNorm2d<2>,
    fc: rtx::nn::Linear<8, 3>,
}

#[test]
fn summary_shows_library_layers_as_nodes() {
    let s = Lenet::init(&Device::Cpu, 0).summary();
    assert_eq!(
        s,
        "Lenet (51 parameters) {
  conv: Conv2d<1, 2, 3> (20 parameters) {
    weight: [2, 1, 3, 3] float32
    bias: [2] float32
  }
  act: ReLU
  pool: MaxPool2d<2, 2>
  norm: BatchNorm<2> (4 parameters) {
    weight: [2] float32
    bias: [2] float32
    running_mean: [2] float32 (buffer)
    running_var: [2] float32 (buffer)
    num_batches_tracked: [] float32 (buffer)
  }
  fc: Linear<8, 3> (27 parameters) {
    weight: [3, 8] float32
    bias: [3] float32
  }
}
"
    );
}
