//! `#[model]` on the impl holding `forward`: the compiled forward (fused kernels) against the
//! eager one, the static backward against the tape, and what each costs in dispatches.

use rtx::Gradients;
use rtx::prelude::*;

pub(crate) type X = Tensor<(Dyn<'B'>, Const<8>), f64>;

// ANCHOR: mlp
#[model]
pub(crate) struct Mlp {
    fc1: Linear<8, 16, f64>,
    fc2: Linear<16, 4, f64>,
}

#[model(check)]
impl Mlp {
    fn forward(&self, x: &X) -> Tensor<(Dyn<'B'>, Const<4>), f64> {
        let h = self.fc1.forward(x);
        let h = (h * 1.5 - 0.25).gelu_tanh();
        self.fc2.forward(&h)
    }
}
// ANCHOR_END: mlp

fn input(seed: u64) -> X {
    Tensor::randn((Dyn(5), Const), seed, Device::Cpu)
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "element {i}: {x} vs {y}"
        );
    }
}

#[test]
fn fused_forward_matches_eager() {
    let m = Mlp::init(&Device::Cpu, 3);
    let x = input(1);
    close(
        &m.forward_fused(&x).to_vec(),
        &m.forward(&x).to_vec(),
        1e-12,
    );
}

#[test]
fn static_backward_matches_tape() {
    let mut m = Mlp::init(&Device::Cpu, 3);
    m.track_gradients();
    let x = input(2).requires_grad();
    let tape = m.forward(&x).sum_all().backward();

    // ANCHOR: static_backward
    let (y, backward) = m.forward_train(&x);
    assert!(!y.tracks_grad(), "the static forward records nothing");
    let mut grads = Gradients::new();
    let (dx,) = backward(y.ones_like(), &mut grads, true);
    // ANCHOR_END: static_backward
    close(
        &dx.unwrap().to_vec(),
        &tape.get(&x).unwrap().to_vec(),
        1e-12,
    );
    let same = |s: Vec<f64>, t: Vec<f64>| close(&s, &t, 1e-12);
    let (w1, w2) = (&m.fc1.weight, &m.fc2.weight);
    same(
        grads.get(w1).unwrap().to_vec(),
        tape.get(w1).unwrap().to_vec(),
    );
    same(
        grads.get(w2).unwrap().to_vec(),
        tape.get(w2).unwrap().to_vec(),
    );
    let (b1, b2) = (m.fc1.bias.as_ref().unwrap(), m.fc2.bias.as_ref().unwrap());
    same(
        grads.get(b1).unwrap().to_vec(),
        tape.get(b1).unwrap().to_vec(),
    );
    same(
        grads.get(b2).unwrap().to_vec(),
        tape.get(b2).unwrap().to_vec(),
    );
}

#[test]
fn ir_has_the_forward() {
    let m = Mlp::init(&Device::Cpu, 3);
    let g = m.ir();
    assert!(!g.nodes.is_empty());
    assert!(
        std::sync::Arc::ptr_eq(&g, &m.ir()),
        "built once per model type"
    );
}

/// A Linear layer, its bias and a GELU: the shape of an MLP's hidden layer.
#[model]
struct Hidden {
    fc: Linear<8, 16, f64>,
}

#[model]
impl Hidden {
    fn forward(&self, x: &X) -> Tensor<(Dyn<'B'>, Const<16>), f64> {
        let h = self.fc.forward(x);
        h.gelu_tanh()
    }
}

/// The scale and shift of the GPU benchmark's kernel.
const A: f64 = 1.5;
const B: f64 = -0.25;

/// `gelu_tanh(a * x + b)` written as tensor ops.
#[model]
struct Affine {}

#[model]
impl Affine {
    fn forward(&self, x: &X) -> X {
        let z = x * A + B;
        z.gelu_tanh()
    }
}

/// The dispatches `f` makes on the CPU.
fn dispatches<R>(f: impl FnOnce() -> R) -> u64 {
    let before = rtx::launch_count(Device::Cpu);
    drop(f());
    rtx::launch_count(Device::Cpu) - before
}

#[test]
fn linear_bias_gelu_costs_one_product_and_one_kernel() {
    let m = Hidden::init(&Device::Cpu, 4);
    let x = input(3);
    // ANCHOR: launches
    assert_eq!(
        dispatches(|| m.forward(&x)),
        2,
        "eager: product with its bias (the GEMM's starting rows on the CPU), gelu"
    );
    assert_eq!(
        dispatches(|| m.forward_fused(&x)),
        2,
        "fused: product, bias + gelu"
    );
    // ANCHOR_END: launches
    close(
        &m.forward_fused(&x).to_vec(),
        &m.forward(&x).to_vec(),
        1e-12,
    );
}

#[test]
fn affine_gelu_chain_is_one_kernel() {
    let m = Affine {};
    let x = input(4);
    assert_eq!(dispatches(|| m.forward(&x)), 3, "eager: mul, add, gelu");
    assert_eq!(dispatches(|| m.forward_fused(&x)), 1);
    close(
        &m.forward_fused(&x).to_vec(),
        &m.forward(&x).to_vec(),
        1e-12,
    );
    let want: Vec<f64> = x
        .to_vec()
        .iter()
        .map(|&v| {
            let z = A * v + B;
            0.5 * z * (1.0 + (0.7978845608028654 * (z + 0.044715 * z * z * z)).tanh())
        })
        .collect();
    close(&m.forward_fused(&x).to_vec(), &want, 1e-12);
}

/// `hardswish` and `mish` (which calls `softplus`'s kernel), ops added by a kernel function
/// and a line in the op registry, in one fused chain.
#[model]
struct NewActivations {}

#[model]
impl NewActivations {
    fn forward(&self, x: &X) -> X {
        let h = x.hardswish() * 0.5;
        h.mish()
    }
}

#[test]
fn registry_ops_fuse_and_differentiate_like_the_eager_ops() {
    let m = NewActivations {};
    // Spread over hardswish's three pieces (its kinks at -3 and 3).
    let x = input(6) * 2.5;
    assert_eq!(
        dispatches(|| m.forward(&x)),
        3,
        "eager: hardswish, mul, mish"
    );
    assert_eq!(dispatches(|| m.forward_fused(&x)), 1);
    close(
        &m.forward_fused(&x).to_vec(),
        &m.forward(&x).to_vec(),
        1e-12,
    );
    let want: Vec<f64> = x
        .to_vec()
        .iter()
        .map(|&v| {
            let hs = v * (v + 3.0).clamp(0.0, 6.0) / 6.0;
            let h = 0.5 * hs;
            h * (1.0 + h.exp()).ln().tanh()
        })
        .collect();
    close(&m.forward_fused(&x).to_vec(), &want, 1e-12);

    let x = x.requires_grad();
    let tape = m.forward(&x).sum_all().backward();
    let (y, backward) = m.forward_train(&x);
    let mut grads = Gradients::new();
    let (dx,) = backward(y.ones_like(), &mut grads, true);
    close(
        &dx.unwrap().to_vec(),
        &tape.get(&x).unwrap().to_vec(),
        1e-12,
    );
}

#[test]
fn static_backward_records_nothing_and_skips_unwanted_input_gradients() {
    let mut m = Hidden::init(&Device::Cpu, 5);
    m.track_gradients();
    let x = input(5);
    let (y, backward) = m.forward_train(&x);
    assert!(!y.tracks_grad());
    let mut grads = Gradients::new();
    let n = dispatches(|| backward(y.ones_like(), &mut grads, false));
    // The GELU's derivative kernel, the weight's product, the bias's sum: no product for
    // the input's gradient.
    assert_eq!(n, 3);
    assert_eq!(grads.len(), 2);
}

/// A residual block: `x + tanh(fc(x))`.
#[model]
struct Block {
    fc: Linear<8, 8, f64>,
}

#[model(check)]
impl Block {
    fn forward(&self, x: &X) -> X {
        let h = self.fc.forward(x);
        let h = h.tanh();
        h + x
    }
}

/// Residual blocks looped over, then a head.
#[model]
struct Stack {
    blocks: [Block; 3],
    head: Linear<8, 4, f64>,
}

// ANCHOR: stack
#[model(check)]
impl Stack {
    fn forward(&self, x: &X) -> Tensor<(Dyn<'B'>, Const<4>), f64> {
        let mut h = x * 0.5;
        for block in &self.blocks {
            h = block.forward(&h);
        }
        self.head.forward(&h)
    }
}
// ANCHOR_END: stack

#[test]
fn a_loop_over_blocks_compiles_and_its_ir_names_each_block() {
    let mut m = Stack::init(&Device::Cpu, 6);
    let x = input(6);
    close(
        &m.forward_fused(&x).to_vec(),
        &m.forward(&x).to_vec(),
        1e-12,
    );
    m.track_gradients();
    let (y, backward) = m.forward_train(&x);
    let mut grads = Gradients::new();
    backward(y.ones_like(), &mut grads, false);
    assert_eq!(
        grads.len(),
        8,
        "three blocks' weights and biases, the head's two"
    );
    let params: Vec<String> = m
        .ir()
        .nodes
        .iter()
        .filter_map(|n| match &n.op {
            rtx::ir::IrOp::Param(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert!(
        params.contains(&"blocks.2.fc.weight".to_string()),
        "{params:?}"
    );
    assert!(params.contains(&"head.bias".to_string()), "{params:?}");
}

/// The MLP's output.
type Y = Tensor<(Dyn<'B'>, Const<4>), f64>;

/// The loss `sum((y - t)²)` and its static backward.
fn sse(y: &Y, t: &Y) -> (Tensor<(), f64>, impl FnOnce(&Tensor<(), f64>) -> Y + use<>) {
    let d = y - t;
    let loss = (&d * &d).sum_all();
    (loss, move |g: &Tensor<(), f64>| &(&d * 2.0) * g)
}

#[test]
fn train_step_equals_forward_backward_and_update() {
    let x = input(7);
    let t: Tensor<(Dyn<'B'>, Const<4>), f64> = Tensor::randn((Dyn(5), Const), 8, Device::Cpu);
    // By hand: the tape's gradients and an optimizer step, three times.
    let mut want = Mlp::init(&Device::Cpu, 9);
    want.track_gradients();
    let mut opt = Adam::new(1e-2);
    for _ in 0..3 {
        let d = &want.forward(&x) - &t;
        let grads = (&d * &d).sum_all().backward();
        opt.step(&mut want, &grads);
    }
    // The same through a TrainStep.
    let mut got = Mlp::init(&Device::Cpu, 9);
    got.track_gradients();
    let mut opt = Adam::new(1e-2);
    // ANCHOR: train_step
    let mut step = rtx::compile::TrainStep::new(sse);
    let mut losses = Vec::new();
    for _ in 0..3 {
        let loss = step.run(&mut got, &mut opt, (x.clone(),), &t).unwrap();
        losses.push(loss.item());
    }
    // ANCHOR_END: train_step
    assert!(!step.is_captured(), "nothing is captured on the CPU");
    assert!(losses[2] < losses[0], "the loss goes down: {losses:?}");
    close(&got.fc1.weight.to_vec(), &want.fc1.weight.to_vec(), 1e-10);
    close(&got.fc2.weight.to_vec(), &want.fc2.weight.to_vec(), 1e-10);
}

#[model]
struct Wide {
    fc1: Linear<8, 16, f64>,
    fc2: Linear<16, 4, f64>,
}

/// [`Mlp`]'s forward, generic over the batch dim.
#[model(check)]
impl Wide {
    fn forward<B: Dim>(&self, x: &Tensor<(B, Const<8>), f64>) -> Tensor<(B, Const<4>), f64> {
        let h = self.fc1.forward(x);
        let h = (h * 1.5 - 0.25).gelu_tanh();
        self.fc2.forward(&h)
    }
}

/// A batch of any size of [`Wide`]'s outputs.
type Outs = Tensor<(usize, Const<4>), f64>;

/// `sum((y - t)²)` and its static backward, for a batch of any size.
fn sse_any(
    y: &Outs,
    t: &Outs,
) -> (
    Tensor<(), f64>,
    impl FnOnce(&Tensor<(), f64>) -> Outs + use<>,
) {
    let d = y - t;
    let loss = (&d * &d).sum_all();
    (loss, move |g: &Tensor<(), f64>| &(&d * 2.0) * g)
}

#[test]
fn one_train_step_runs_batches_of_several_sizes_and_keeps_a_bounded_few() {
    let batch = |n: usize, seed: u64| {
        let x: Tensor<(usize, Const<8>), f64> = Tensor::randn((n, Const), seed, Device::Cpu);
        let t: Tensor<(usize, Const<4>), f64> = Tensor::randn((n, Const), seed + 1, Device::Cpu);
        (x, t)
    };
    let sizes = [5, 3, 5, 3, 2, 7, 5];
    // By hand, with the tape.
    let mut want = Wide::init(&Device::Cpu, 9);
    want.track_gradients();
    let mut opt = Adam::new(1e-2);
    for (k, &n) in sizes.iter().enumerate() {
        let (x, t) = batch(n, k as u64);
        let d = &want.forward(&x) - &t;
        let grads = (&d * &d).sum_all().backward();
        opt.step(&mut want, &grads);
    }
    // The same batches through one step that keeps at most two sizes.
    let mut got = Wide::init(&Device::Cpu, 9);
    got.track_gradients();
    let mut opt = Adam::new(1e-2);
    let mut step = rtx::compile::TrainStep::new(sse_any).max_sizes(2);
    for (k, &n) in sizes.iter().enumerate() {
        let (x, t) = batch(n, k as u64);
        step.run(&mut got, &mut opt, (x,), &t).unwrap();
        assert!(step.sizes().len() <= 2, "{:?}", step.sizes());
    }
    // The two most recently used sizes, each the input's sizes then the target's.
    assert_eq!(step.sizes(), vec![vec![7, 8, 7, 4], vec![5, 8, 5, 4]]);
    assert_eq!(step.captured_graphs(), 0, "nothing is captured on the CPU");
    close(&got.fc1.weight.to_vec(), &want.fc1.weight.to_vec(), 1e-10);
    close(&got.fc2.weight.to_vec(), &want.fc2.weight.to_vec(), 1e-10);
}
