//! The IR executor on every device: each test model's graph run by `Graph::run` against the
//! model's compiled training forward on the same device, bit for bit (the executor runs the
//! compiled path's own kernels: the product with its bias epilogue, the fused norm, fused
//! attention in bf16 on a GPU, the chains in their compute type); and `Graph::backward`
//! against the static backward, every parameter's and the input's gradient bit for bit (the
//! same rules: the product's, the norm's, fused attention's, the chains' derivative kernels).

use super::*;
use rtx::Gradients;
use rtx::ir::{Backward, DynTensor, Params};
use rtx::nn::{TensorKind, Visitor};

#[path = "../../benches/gpt_step/model.rs"]
mod gpt_model;

#[model]
struct IrMlp<E: Float> {
    fc1: Linear<12, 32, E>,
    fc2: Linear<32, 5, E>,
}

#[model]
impl<E: Float> IrMlp<E> {
    fn forward(&self, x: &Tensor<(usize, Const<12>), E>) -> Tensor<(usize, Const<5>), E> {
        let h = self.fc1.forward(x).gelu_tanh();
        self.fc2.forward(&h)
    }
}

#[model]
struct IrCnn<E: Float> {
    conv: Conv2d<1, 4, 3, Conv<1, 1>, E>,
    pool: MaxPool2d<2, 2>,
    fc: Linear<64, 5, E>,
}

#[model]
impl<E: Float> IrCnn<E> {
    fn forward(
        &self,
        x: &Tensor<(usize, Const<1>, Const<8>, Const<8>), E>,
    ) -> Tensor<(usize, Const<5>), E> {
        let c: Tensor<(usize, Const<4>, Const<8>, Const<8>), E> = self.conv.forward(x);
        let c = c.relu();
        let p: Tensor<(usize, Const<4>, Const<4>, Const<4>), E> = self.pool.forward(&c);
        let flat = p.reshape((p.dim::<0>(), Const::<64>));
        self.fc.forward(&flat)
    }
}

/// The GPT test model's size: vocabulary 32, context 8, width 64 (heads of 32, which the
/// fused attention kernels take), 2 heads, MLP 64, 2 blocks.
type Gpt<E> = gpt_model::Gpt<32, 8, 64, 2, 64, 2, E>;

/// A block as in the GPT, at the same sizes.
type Block<E> = gpt_model::GptBlock<8, 64, 2, 64, E>;

/// Asserts the executor's output has the compiled output's bits, naming the first that
/// differs.
#[track_caller]
fn same_bits(what: &str, dev: Device, got: &DynTensor, want: &DynTensor) {
    assert_eq!(got.dims(), want.dims(), "{what} on {dev:?}: dims differ");
    let (g, w) = (got.to_bits(), want.to_bits());
    if let Some(k) = g.iter().zip(&w).position(|(a, b)| a != b) {
        let (gv, wv) = (got.to_f64_vec()[k], want.to_f64_vec()[k]);
        panic!(
            "{what} ({:?}) on {dev:?}: element {k} is {gv} from the IR, {wv} compiled",
            got.dtype()
        );
    }
}

/// A model initialized on the CPU and moved to `dev`.
fn on<M: Init + Module>(dev: Device, seed: u64) -> M {
    let mut m = M::init(&Device::Cpu, seed);
    m.move_to(dev);
    m
}

/// Runs every test model on `dev` in `E` through the executor and the compiled forward.
fn models_on<E: Float>(dev: Device) {
    let x = Tensor::from_vec(values::<E>(6 * 12, 1, -1.0, 1.0), (6, Const), dev);
    let m: IrMlp<E> = on(dev, 1);
    let (y, _) = m.forward_train(&x);
    let out = m
        .ir()
        .run(&[("x", DynTensor::of(&x))], &Params::of_model(&m));
    same_bits("mlp", dev, &out.unwrap()[0], &DynTensor::of(&y));

    let img = Tensor::from_vec(
        values::<E>(3 * 64, 2, -1.0, 1.0),
        (3, Const, Const, Const),
        dev,
    );
    let m: IrCnn<E> = on(dev, 2);
    let (y, _) = m.forward_train(&img);
    let out = m
        .ir()
        .run(&[("x", DynTensor::of(&img))], &Params::of_model(&m));
    same_bits("cnn", dev, &out.unwrap()[0], &DynTensor::of(&y));

    let seq = Tensor::from_vec(
        values::<E>(2 * 8 * 64, 3, -1.0, 1.0),
        (2, Const, Const),
        dev,
    );
    let m: Block<E> = on(dev, 3);
    let (y, _) = m.forward_train(&seq);
    let out = m
        .ir::<usize>()
        .run(&[("x", DynTensor::of(&seq))], &Params::of_model(&m));
    same_bits("block", dev, &out.unwrap()[0], &DynTensor::of(&y));

    let ids: Vec<i64> = (0..16).map(|i| (i * 7 + 3) % 32).collect();
    let ids = Tensor::from_vec(ids, (16,), dev);
    let pos = Tensor::from_vec((0..8).collect::<Vec<i64>>(), (Const::<8>,), dev);
    let m: Gpt<E> = on(dev, 4);
    let (y, _) = m.forward_train(&ids, &pos);
    let inputs = [("ids", DynTensor::of(&ids)), ("pos", DynTensor::of(&pos))];
    let out = m.ir::<usize>().run(&inputs, &Params::of_model(&m));
    same_bits("gpt", dev, &out.unwrap()[0], &DynTensor::of(&y));
}

#[test]
fn ir_executor_matches_the_compiled_forward_bitwise() {
    let mut devices = vec![Device::Cpu];
    match gpus() {
        Ok(g) => devices.extend(g),
        Err(why) => println!("ir executor: GPUs skipped: no CUDA device: {why}"),
    }
    for dev in devices {
        models_on::<f32>(dev);
        models_on::<bf16>(dev);
    }
}

/// Asserts the IR's backward gave every parameter bitwise the gradient the static backward
/// left in `grads` on `dev`, and no other.
#[track_caller]
fn same_grads<M: Module>(what: &str, dev: Device, back: &Backward, m: &M, grads: &Gradients) {
    struct Collect<'g>(&'g Gradients, Vec<(String, DynTensor)>);
    impl Visitor for Collect<'_> {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
            if let (TensorKind::Parameter, Some(g)) = (kind, self.0.get(t)) {
                self.1.push((name.to_string(), DynTensor::of(&g)));
            }
        }
    }
    let mut c = Collect(grads, Vec::new());
    m.visit("", &mut c);
    assert!(!c.1.is_empty(), "{what}: no static gradient");
    for (name, want) in &c.1 {
        let got = back.params.get(name);
        let got = got.unwrap_or_else(|| panic!("{what} on {dev:?}: no IR gradient for {name}"));
        same_bits(&format!("{what} d{name}"), dev, got, want);
    }
    assert_eq!(
        back.params.names().count(),
        c.1.len(),
        "{what}: extra IR gradients"
    );
}

/// Runs every test model's backward on `dev` in `E` through the IR and the static backward.
fn backwards_on<E: Float>(dev: Device) {
    let x = Tensor::from_vec(values::<E>(6 * 12, 1, -1.0, 1.0), (6, Const), dev);
    let mut m: IrMlp<E> = on(dev, 1);
    m.track_gradients();
    let (y, backward) = m.forward_train(&x);
    let dy = Tensor::from_vec(values::<E>(6 * 5, 11, -1.0, 1.0), y.shape(), dev);
    let mut grads = Gradients::new();
    let (dx,) = backward(dy.clone(), &mut grads, true);
    let inputs = [("x", DynTensor::of(&x))];
    let back = m
        .ir()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&dy)]);
    let back = back.unwrap();
    same_grads("mlp", dev, &back, &m, &grads);
    same_bits(
        "mlp dx",
        dev,
        back.inputs.get("x").unwrap(),
        &DynTensor::of(&dx.unwrap()),
    );

    let img = Tensor::from_vec(
        values::<E>(3 * 64, 2, -1.0, 1.0),
        (3, Const, Const, Const),
        dev,
    );
    let mut m: IrCnn<E> = on(dev, 2);
    m.track_gradients();
    let (y, backward) = m.forward_train(&img);
    let dy = Tensor::from_vec(values::<E>(3 * 5, 12, -1.0, 1.0), y.shape(), dev);
    let mut grads = Gradients::new();
    let (dx,) = backward(dy.clone(), &mut grads, true);
    let inputs = [("x", DynTensor::of(&img))];
    let back = m
        .ir()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&dy)]);
    let back = back.unwrap();
    same_grads("cnn", dev, &back, &m, &grads);
    same_bits(
        "cnn dx",
        dev,
        back.inputs.get("x").unwrap(),
        &DynTensor::of(&dx.unwrap()),
    );

    let seq = Tensor::from_vec(
        values::<E>(2 * 8 * 64, 3, -1.0, 1.0),
        (2, Const, Const),
        dev,
    );
    let mut m: Block<E> = on(dev, 3);
    m.track_gradients();
    let (y, backward) = m.forward_train(&seq);
    let dy = Tensor::from_vec(values::<E>(2 * 8 * 64, 13, -1.0, 1.0), y.shape(), dev);
    let mut grads = Gradients::new();
    let (dx,) = backward(dy.clone(), &mut grads, true);
    let inputs = [("x", DynTensor::of(&seq))];
    let back = m
        .ir::<usize>()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&dy)]);
    let back = back.unwrap();
    same_grads("block", dev, &back, &m, &grads);
    same_bits(
        "block dx",
        dev,
        back.inputs.get("x").unwrap(),
        &DynTensor::of(&dx.unwrap()),
    );

    let ids: Vec<i64> = (0..16).map(|i| (i * 7 + 3) % 32).collect();
    let ids = Tensor::from_vec(ids, (16,), dev);
    let pos = Tensor::from_vec((0..8).collect::<Vec<i64>>(), (Const::<8>,), dev);
    let mut m: Gpt<E> = on(dev, 4);
    m.track_gradients();
    let (y, backward) = m.forward_train(&ids, &pos);
    let dy = Tensor::from_vec(values::<E>(16 * 32, 14, -1.0, 1.0), y.shape(), dev);
    let mut grads = Gradients::new();
    backward(dy.clone(), &mut grads, false);
    let inputs = [("ids", DynTensor::of(&ids)), ("pos", DynTensor::of(&pos))];
    let back = m
        .ir::<usize>()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&dy)]);
    same_grads("gpt", dev, &back.unwrap(), &m, &grads);
}

#[test]
fn ir_backward_matches_the_static_backward_bitwise() {
    let mut devices = vec![Device::Cpu];
    match gpus() {
        Ok(g) => devices.extend(g),
        Err(why) => println!("ir backward: GPUs skipped: no CUDA device: {why}"),
    }
    for dev in devices {
        backwards_on::<f32>(dev);
        backwards_on::<bf16>(dev);
    }
}
