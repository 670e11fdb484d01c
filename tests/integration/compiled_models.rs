//! Compiled forwards of a CNN and of a transformer block with causal attention: each is
//! checked by the test `#[model(check)]` generates (fused against eager forward, static
//! backward against the tape, in f64), and in f32 here; their IR is held to checked-in
//! goldens (`RTX_BLESS=1` rewrites them) and reloads to the same graph.

use rtx::ir::Graph;
use rtx::prelude::*;
use std::path::PathBuf;

pub(crate) type Img<E> = Tensor<(Dyn<'B'>, Const<1>, Const<8>, Const<8>), E>;

// ANCHOR: cnn
#[model]
pub(crate) struct Cnn<E: Float> {
    conv: Conv2d<1, 4, 3, Conv<1, 1>, E>,
    pool: MaxPool2d<2, 2>,
    fc: Linear<64, 5, E>,
}

#[model(check)]
impl<E: Float> Cnn<E> {
    fn forward(&self, x: &Img<E>) -> Tensor<(Dyn<'B'>, Const<5>), E> {
        let c: Tensor<(Dyn<'B'>, Const<4>, Const<8>, Const<8>), E> = self.conv.forward(x);
        let c = c.relu();
        let p: Tensor<(Dyn<'B'>, Const<4>, Const<4>, Const<4>), E> = self.pool.forward(&c);
        let flat = p.reshape((p.dim::<0>(), Const::<64>));
        self.fc.forward(&flat)
    }
}
// ANCHOR_END: cnn

pub(crate) type Seq<E> = Tensor<(Dyn<'B'>, Const<4>, Const<16>), E>;

// ANCHOR: block
/// A pre-norm transformer block: causal self-attention and an MLP, each added back.
#[model]
pub(crate) struct Block<E: Float> {
    ln1: LayerNorm<16, E>,
    attn: CausalSelfAttention<16, 2, E>,
    ln2: LayerNorm<16, E>,
    fc1: Linear<16, 32, E>,
    fc2: Linear<32, 16, E>,
}

#[model(check)]
impl<E: Float> Block<E> {
    fn forward(&self, x: &Seq<E>) -> Seq<E> {
        let h = self.ln1.forward(x);
        let a = self.attn.forward(&h);
        let x1 = x + &a;
        let h2 = self.ln2.forward(&x1);
        let f = self.fc1.forward(&h2);
        let f = f.gelu_tanh();
        let f = self.fc2.forward(&f);
        x1 + f
    }
}
// ANCHOR_END: block

/// A batch of 8x8 images whose batch dim is the caller's: `Const<N>`, `Dyn<'B'>` or `usize`.
type Images<B, E> = Tensor<(B, Const<1>, Const<8>, Const<8>), E>;

// ANCHOR: generic_cnn
/// [`Cnn`] with a forward generic over the batch dim: one compiled forward and static
/// backward for every batch type, the sizes read at run time.
#[model]
struct GenericCnn<E: Float> {
    conv: Conv2d<1, 4, 3, Conv<1, 1>, E>,
    pool: MaxPool2d<2, 2>,
    fc1: Linear<64, 16, E>,
    fc2: Linear<16, 5, E>,
}

#[model(check)]
impl<E: Float> GenericCnn<E> {
    fn forward<B: Dim>(&self, x: &Images<B, E>) -> Tensor<(B, Const<5>), E> {
        let c: Tensor<(B, Const<4>, Const<8>, Const<8>), E> = self.conv.forward(x);
        let c = c.relu();
        let p: Tensor<(B, Const<4>, Const<4>, Const<4>), E> = self.pool.forward(&c);
        let flat = p.reshape((x.dim::<0>(), Const::<64>));
        let h = self.fc1.forward(&flat).relu();
        self.fc2.forward(&h)
    }
}
// ANCHOR_END: generic_cnn

/// A block generic over the batch whose tokens are flattened for its MLP: the token count
/// `B * T` is a run-time `usize` computed in the body, declared nowhere.
#[model]
struct FlatBlock<E: Float> {
    ln: LayerNorm<16, E>,
    attn: CausalSelfAttention<16, 2, E>,
    fc: Linear<16, 16, E>,
}

#[model(check)]
impl<E: Float> FlatBlock<E> {
    fn forward<B: Dim>(
        &self,
        x: &Tensor<(B, Const<4>, Const<16>), E>,
    ) -> Tensor<(B, Const<4>, Const<16>), E> {
        let h = self.ln.forward(x);
        let a = self.attn.forward(&h);
        let x1 = x + &a;
        let tokens = x1.reshape((x.dim::<0>().size() * 4, Const::<16>));
        let f = self.fc.forward(&tokens).gelu_tanh();
        let f = f.reshape((x.dim::<0>(), Const::<4>, Const::<16>));
        x1 + f
    }
}

#[test]
fn a_generic_forward_runs_every_batch_type() {
    let m = GenericCnn::<f32>::init(&Device::Cpu, 5);
    // A static batch, a named run-time batch and a plain run-time one, of different sizes.
    let a: Images<Const<2>, f32> = Tensor::randn((Const, Const, Const, Const), 1, Device::Cpu);
    let b: Images<Dyn<'B'>, f32> = Tensor::randn((Dyn(3), Const, Const, Const), 2, Device::Cpu);
    let c: Images<usize, f32> = Tensor::randn((7, Const, Const, Const), 3, Device::Cpu);
    assert_close(&m.forward_fused(&a).to_vec(), &m.forward(&a).to_vec());
    assert_close(&m.forward_fused(&b).to_vec(), &m.forward(&b).to_vec());
    assert_close(&m.forward_fused(&c).to_vec(), &m.forward(&c).to_vec());
    f32_check::<GenericCnn<f32>, _, _>(c.clone(), |m| m.forward(&c));
    let seq: Tensor<(usize, Const<4>, Const<16>)> =
        Tensor::randn((6, Const, Const), 4, Device::Cpu);
    f32_check::<FlatBlock<f32>, _, _>(seq.clone(), |m| m.forward(&seq));
    // One graph per instance of the generic forward.
    assert_eq!(m.ir::<usize>().outputs.len(), 1);
    assert!(!std::sync::Arc::ptr_eq(
        &m.ir::<usize>(),
        &m.ir::<Const<2>>()
    ));
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} against {w}");
    }
}

/// Compares a model's compiled forward and static backward with the eager forward and the
/// tape in f32, as the generated check does in f64.
fn f32_check<M, X, S>(x: X, eager: impl Fn(&M) -> Tensor<S>)
where
    M: Init + Module + rtx::compile::StaticForward<(X,), Output = Tensor<S>>,
    X: Clone,
    (X,): rtx::ir::IrArgs,
    S: rtx::shape::rules::BroadcastShapes<S, Output = S>,
{
    rtx::compile::glue::check_model::<M, (X,), S, f32>((x,), eager);
}

#[test]
fn cnn_and_block_hold_in_f32() {
    let img: Img<f32> = Tensor::randn((Dyn(3), Const, Const, Const), 1, Device::Cpu);
    f32_check::<Cnn<f32>, _, _>(img.clone(), |m| m.forward(&img));
    let seq: Seq<f32> = Tensor::randn((Dyn(3), Const, Const), 2, Device::Cpu);
    f32_check::<Block<f32>, _, _>(seq.clone(), |m| m.forward(&seq));
}

#[test]
fn the_block_fuses_its_residuals_and_its_mlp() {
    let m = Block::<f32>::init(&Device::Cpu, 3);
    let x: Seq<f32> = Tensor::randn((Dyn(2), Const, Const), 4, Device::Cpu);
    let before = rtx::launch_count(Device::Cpu);
    let y = m.forward_fused(&x);
    let fused = rtx::launch_count(Device::Cpu) - before;
    let before = rtx::launch_count(Device::Cpu);
    let want = m.forward(&x);
    let eager = rtx::launch_count(Device::Cpu) - before;
    // fc1's bias add joins the GELU and fc2's joins the residual add, the attention's heads
    // are views of its projection (no copy to split them), and the causal attention itself is
    // one pass on the CPU (no mask, softmax and products as separate ops): 11 dispatches. The
    // eager forward also costs 11 on the CPU, where a Linear adds its bias inside its GEMM;
    // the fused chains' gain there is the passes over memory they save, not dispatches.
    assert_eq!(fused, 11, "fused {fused} launches, eager {eager}");
    assert!(fused <= eager, "fused {fused} launches, eager {eager}");
    let (g, w) = (y.to_vec(), want.to_vec());
    assert!(
        g.iter()
            .zip(&w)
            .all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs()))
    );
}

/// Checks `graph` against the golden `tests/fixtures/ir/NAME.json` byte for byte (writing it
/// under `RTX_BLESS=1`), and that the golden reloads to the same graph.
fn golden(name: &str, graph: &Graph) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/ir/{name}.json"));
    let json = graph.to_json();
    if std::env::var_os("RTX_BLESS").is_some() {
        std::fs::write(&path, &json).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with RTX_BLESS=1 to write it)", path.display()));
    assert_eq!(
        json, want,
        "the IR of {name} changed (RTX_BLESS=1 rewrites the golden)"
    );
    let reloaded = Graph::from_json(&want).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&reloaded, graph, "{name}'s IR reloads to the same graph");
}

#[test]
fn ir_goldens() {
    let cnn = Cnn::<f32>::init(&Device::Cpu, 0).ir();
    golden("cnn", &cnn);
    let block = Block::<f32>::init(&Device::Cpu, 0).ir();
    golden("block", &block);
    // The primitive op counts, worth watching as the IR grows.
    println!(
        "cnn: {} nodes, {} primitive ops",
        cnn.nodes.len(),
        cnn.op_count()
    );
    println!(
        "block: {} nodes, {} primitive ops",
        block.nodes.len(),
        block.op_count()
    );
    assert!(block.nodes.iter().any(|n| n.scope.starts_with("attn")));
    assert!(
        block.nodes.iter().any(|n| n.kernel.is_some()),
        "the fused chains show"
    );
}
