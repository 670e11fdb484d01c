//! The IR executor against the compiled path: every test model's graph (`#[model]`'s `ir()`)
//! run by `Graph::run` gives bitwise the compiled training forward's output on the CPU, and
//! `Graph::backward` bitwise the static backward's gradients (every parameter's and the
//! input's), also from a `cross_entropy` node appended as the graph's loss; and the GPT test
//! model's graph, saved as JSON beside a checkpoint of its
//! weights, runs in a fresh process that has no model type and gives bitwise the same logits.

use crate::compiled::{Mlp, X};
use crate::compiled_models::{Block, Cnn, Img, Seq};
use crate::gpt::Small;
use rtx::Gradients;
use rtx::io::Checkpoint;
use rtx::ir::{Attrs, Backward, Composite, DynTensor, Graph, IrOp, Node, Params};
use rtx::nn::{Module, TensorKind, Visitor};
use rtx::prelude::*;
use std::path::{Path, PathBuf};

/// Asserts two results hold the same bits, naming the first element that differs.
#[track_caller]
fn same_bits(what: &str, got: &DynTensor, want: &DynTensor) {
    assert_eq!(got.dims(), want.dims(), "{what}: dims differ");
    assert_eq!(got.dtype(), want.dtype(), "{what}: element types differ");
    let (g, w) = (got.to_bits(), want.to_bits());
    if let Some(k) = g.iter().zip(&w).position(|(a, b)| a != b) {
        let (gv, wv) = (got.to_f64_vec()[k], want.to_f64_vec()[k]);
        panic!("{what}: element {k} is {gv} from the IR and {wv} compiled");
    }
}

#[test]
fn the_mlp_runs_bitwise_as_compiled() {
    let m = Mlp::init(&Device::Cpu, 3);
    let x: X = Tensor::randn((Dyn(5), Const), 1, Device::Cpu);
    let (y, _) = m.forward_train(&x);
    let out = m
        .ir()
        .run(&[("x", DynTensor::of(&x))], &Params::of_model(&m));
    same_bits("mlp", &out.unwrap()[0], &DynTensor::of(&y));
}

#[test]
fn the_cnn_runs_bitwise_as_compiled() {
    let m = Cnn::<f32>::init(&Device::Cpu, 0);
    let x: Img<f32> = Tensor::randn((Dyn(3), Const, Const, Const), 1, Device::Cpu);
    let (y, _) = m.forward_train(&x);
    let out = m
        .ir()
        .run(&[("x", DynTensor::of(&x))], &Params::of_model(&m));
    same_bits("cnn", &out.unwrap()[0], &DynTensor::of(&y));
}

/// The transformer block in `E`, its IR against its compiled forward.
fn block<E: Float>() {
    let m = Block::<E>::init(&Device::Cpu, 2);
    let x: Seq<E> = Tensor::<_, f32>::randn((Dyn(3), Const, Const), 4, Device::Cpu).cast();
    let (y, _) = m.forward_train(&x);
    let g = m.ir();
    g.validate().unwrap();
    assert!(
        g.nodes.iter().any(|n| n.op.name() == "causal_attention"),
        "attention is one node"
    );
    let out = g.run(&[("x", DynTensor::of(&x))], &Params::of_model(&m));
    same_bits("block", &out.unwrap()[0], &DynTensor::of(&y));
}

#[test]
fn the_transformer_block_runs_bitwise_as_compiled() {
    block::<f32>();
    // In bf16 the fused chains compute in f32 and round once: so does the executor.
    block::<bf16>();
}

/// GPT token ids and positions: batch 2 of context 8, known only at run time.
fn gpt_batch() -> (Tensor<(usize,), i64>, Tensor<(Const<8>,), i64>) {
    let ids: Vec<i64> = (0..16).map(|i| (i * 7 + 3) % 32).collect();
    let pos: Vec<i64> = (0..8).collect();
    (
        Tensor::from_vec(ids, (16,), Device::Cpu),
        Tensor::from_vec(pos, (Const,), Device::Cpu),
    )
}

#[test]
fn the_gpt_runs_bitwise_as_compiled() {
    // ANCHOR: run
    let m = Small::<f32>::init(&Device::Cpu, 5);
    let (ids, pos) = gpt_batch();
    let (y, _) = m.forward_train(&ids, &pos);
    let g = m.ir::<usize>();
    g.validate().unwrap();
    let inputs = [("ids", DynTensor::of(&ids)), ("pos", DynTensor::of(&pos))];
    let out = g.run(&inputs, &Params::of_model(&m)).unwrap();
    same_bits("gpt", &out[0], &DynTensor::of(&y));
    // ANCHOR_END: run
}

/// Asserts the IR's backward gave every parameter bitwise the gradient the compiled static
/// backward left in `grads`, and no gradient the static backward did not give.
#[track_caller]
fn same_grads<M: Module>(what: &str, back: &Backward, m: &M, grads: &Gradients) {
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
    assert!(
        !c.1.is_empty(),
        "{what}: the static backward gave no gradient"
    );
    for (name, want) in &c.1 {
        let got = back.params.get(name);
        let got = got.unwrap_or_else(|| panic!("{what}: the IR gave {name} no gradient"));
        same_bits(&format!("{what} d{name}"), got, want);
    }
    assert_eq!(
        back.params.names().count(),
        c.1.len(),
        "{what}: the IR gave gradients the static backward did not"
    );
}

#[test]
fn the_mlp_backward_is_bitwise_as_compiled() {
    let mut m = Mlp::init(&Device::Cpu, 3);
    m.track_gradients();
    let x: X = Tensor::randn((Dyn(5), Const), 1, Device::Cpu);
    let (y, backward) = m.forward_train(&x);
    let seed = Tensor::randn(y.shape(), 7, Device::Cpu);
    let mut grads = Gradients::new();
    let (dx,) = backward(seed.clone(), &mut grads, true);
    let inputs = [("x", DynTensor::of(&x))];
    let params = Params::of_model(&m);
    let back = m.ir().backward(&inputs, &params, &[DynTensor::of(&seed)]);
    let back = back.unwrap();
    same_bits("mlp output", &back.outputs[0], &DynTensor::of(&y));
    same_grads("mlp", &back, &m, &grads);
    let dx = DynTensor::of(&dx.unwrap());
    same_bits("mlp dx", back.inputs.get("x").unwrap(), &dx);
}

#[test]
fn the_cnn_backward_is_bitwise_as_compiled() {
    let mut m = Cnn::<f32>::init(&Device::Cpu, 0);
    m.track_gradients();
    let x: Img<f32> = Tensor::randn((Dyn(3), Const, Const, Const), 1, Device::Cpu);
    let (y, backward) = m.forward_train(&x);
    let seed = Tensor::randn(y.shape(), 7, Device::Cpu);
    let mut grads = Gradients::new();
    let (dx,) = backward(seed.clone(), &mut grads, true);
    let inputs = [("x", DynTensor::of(&x))];
    let back = m
        .ir()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&seed)]);
    let back = back.unwrap();
    same_grads("cnn", &back, &m, &grads);
    let dx = DynTensor::of(&dx.unwrap());
    same_bits("cnn dx", back.inputs.get("x").unwrap(), &dx);
}

/// The transformer block in `E`: its IR's backward against its static backward.
fn block_backward<E: Float>() {
    let mut m = Block::<E>::init(&Device::Cpu, 2);
    m.track_gradients();
    let x: Seq<E> = Tensor::<_, f32>::randn((Dyn(3), Const, Const), 4, Device::Cpu).cast();
    let (y, backward) = m.forward_train(&x);
    let seed: Seq<E> = Tensor::<_, f32>::randn(y.shape(), 7, Device::Cpu).cast();
    let mut grads = Gradients::new();
    let (dx,) = backward(seed.clone(), &mut grads, true);
    let inputs = [("x", DynTensor::of(&x))];
    let back = m
        .ir()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&seed)]);
    let back = back.unwrap();
    let what = format!("block {:?}", E::DTYPE);
    same_grads(&what, &back, &m, &grads);
    let dx = DynTensor::of(&dx.unwrap());
    same_bits(&format!("{what} dx"), back.inputs.get("x").unwrap(), &dx);
}

#[test]
fn the_transformer_block_backward_is_bitwise_as_compiled() {
    block_backward::<f32>();
    // The chains' derivative kernels compute in f32 and round once: so does the IR.
    block_backward::<bf16>();
}

#[test]
fn the_gpt_backward_is_bitwise_as_compiled() {
    // ANCHOR: backward
    let mut m = Small::<f32>::init(&Device::Cpu, 5);
    m.track_gradients();
    let (ids, pos) = gpt_batch();
    let (y, backward) = m.forward_train(&ids, &pos);
    let seed = Tensor::randn(y.shape(), 7, Device::Cpu);
    let mut grads = Gradients::new();
    backward(seed.clone(), &mut grads, false);
    let inputs = [("ids", DynTensor::of(&ids)), ("pos", DynTensor::of(&pos))];
    let back = m
        .ir::<usize>()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&seed)]);
    let back = back.unwrap();
    // Every parameter's gradient, by its dotted name.
    let dwte = back.params.get("wte.weight").unwrap();
    assert_eq!(dwte.dims(), &[32, 16]);
    // ANCHOR_END: backward
    same_grads("gpt", &back, &m, &grads);
    assert_eq!(back.inputs.names().count(), 0, "token ids take no gradient");
}

#[test]
fn the_gpt_differentiates_from_its_loss_node_as_the_static_step() {
    // The model's graph with a `targets` input and a `cross_entropy` node as its output: its
    // backward, seeded with the loss's gradient, gives every parameter bitwise the gradient of
    // the static loss's backward followed by the model's static backward, as a training step
    // runs them.
    let mut m = Small::<f32>::init(&Device::Cpu, 5);
    m.track_gradients();
    let (ids, pos) = gpt_batch();
    let t: Vec<i64> = (0..16).map(|i| (i * 5 + 1) % 32).collect();
    let targets: Tensor<(usize,), i64> = Tensor::from_vec(t, (16,), Device::Cpu);
    let (y, backward) = m.forward_train(&ids, &pos);
    let (loss, loss_back) = rtx::compile::loss::cross_entropy(&y, &targets);
    let one = loss.ones_like();
    let mut grads = Gradients::new();
    backward(loss_back(&one), &mut grads, false);

    let mut g = Graph::clone(&m.ir::<usize>());
    let logits = g.outputs[0];
    let rows = g.nodes[logits].shape[0].clone();
    let node = |op, inputs, dtype, shape| Node {
        op,
        attrs: Attrs::default(),
        inputs,
        dtype,
        shape,
        scope: String::new(),
        kernel: None,
    };
    g.nodes.push(node(
        IrOp::Input("targets".into()),
        vec![],
        DType::I64,
        vec![rows],
    ));
    let ce = Composite::CrossEntropy {
        ignore_index: None,
        label_smoothing: 0.0,
    };
    let t_id = g.nodes.len() - 1;
    g.nodes.push(node(
        IrOp::Composite(ce),
        vec![logits, t_id],
        DType::F32,
        vec![],
    ));
    g.outputs = vec![t_id + 1];
    g.validate().unwrap();
    let inputs = [
        ("ids", DynTensor::of(&ids)),
        ("pos", DynTensor::of(&pos)),
        ("targets", DynTensor::of(&targets)),
    ];
    let back = g
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&one)])
        .unwrap();
    same_bits("the loss", &back.outputs[0], &DynTensor::of(&loss));
    same_grads("gpt from its loss", &back, &m, &grads);
}

#[test]
fn a_seed_that_does_not_fit_is_named() {
    let m = Cnn::<f32>::init(&Device::Cpu, 0);
    let x: Img<f32> = Tensor::randn((Dyn(2), Const, Const, Const), 1, Device::Cpu);
    let inputs = [("x", DynTensor::of(&x))];
    let wrong: Tensor<(usize, Const<4>)> = Tensor::zeros((2, Const), Device::Cpu);
    let err = m
        .ir()
        .backward(&inputs, &Params::of_model(&m), &[DynTensor::of(&wrong)]);
    let msg = err.unwrap_err().to_string();
    assert!(
        msg.contains("node 9 (linear): the seed DynTensor([2, 4] "),
        "{msg}"
    );
    assert!(
        msg.contains("does not fit the output DynTensor([2, 5] "),
        "{msg}"
    );
    let err = m.ir().backward(&inputs, &Params::of_model(&m), &[]);
    let msg = err.unwrap_err().to_string();
    assert!(msg.contains("was given 0 seeds for its 1 outputs"), "{msg}");
}

#[test]
fn a_missing_parameter_or_input_is_named() {
    let m = Cnn::<f32>::init(&Device::Cpu, 0);
    let x: Img<f32> = Tensor::randn((Dyn(2), Const, Const, Const), 1, Device::Cpu);
    let g = m.ir();
    let mut params = Params::new();
    for name in Params::of_model(&m).names().filter(|n| *n != "fc.bias") {
        params.insert(name, Params::of_model(&m).get(name).unwrap().clone());
    }
    let err = g.run(&[("x", DynTensor::of(&x))], &params).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("the parameter `fc.bias` ([5] f32) is missing"),
        "{msg}"
    );
    let err = g.run(&[("y", DynTensor::of(&x))], &Params::of_model(&m));
    assert!(err.unwrap_err().to_string().contains("no input `x`"));
    // An input whose static dims do not fit the graph's.
    let wrong: Tensor<(usize, Const<1>, Const<4>, Const<4>)> =
        Tensor::zeros((2, Const, Const, Const), Device::Cpu);
    let err = g.run(&[("x", DynTensor::of(&wrong))], &Params::of_model(&m));
    let msg = err.unwrap_err().to_string();
    assert!(
        msg.contains("node 0 (input): dims [2, 1, 4, 4] do not fit its shape [B, 1, 8, 8]"),
        "{msg}"
    );
}

/// Where the JSON test's parent leaves the graph, the weights and the inputs for the child.
const RELOAD_DIR: &str = "RTX_IR_RELOAD_DIR";

#[test]
fn a_saved_gpt_graph_runs_in_a_fresh_process_without_its_type() {
    let dir = std::env::temp_dir().join(format!("rtx-ir-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = Small::<f32>::init(&Device::Cpu, 11);
    let (ids, pos) = gpt_batch();
    m.ir::<usize>().save(dir.join("gpt.json")).unwrap();
    let mut weights = Checkpoint::new();
    weights.add_model("", &m).unwrap();
    weights.save(dir.join("gpt.safetensors")).unwrap();
    let mut inputs = Checkpoint::new();
    inputs.add_tensor("ids", &ids).unwrap();
    inputs.add_tensor("pos", &pos).unwrap();
    inputs.save(dir.join("inputs.safetensors")).unwrap();

    // This test binary again, running only the child below, which knows no model type.
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "ir_exec::reload_child",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env(RELOAD_DIR, &dir)
        .status()
        .unwrap();
    assert!(status.success(), "the child process failed: {status}");
    let logits: Tensor<(usize, Const<32>)> = Checkpoint::open(dir.join("logits.safetensors"))
        .unwrap()
        .tensor("logits", Device::Cpu)
        .unwrap();
    let (want, _) = m.forward_train(&ids, &pos);
    same_bits(
        "reloaded gpt",
        &DynTensor::of(&logits),
        &DynTensor::of(&want),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The child of the test above: reads the graph, the weights and the inputs from the
/// directory it is given and writes the logits beside them, with no model type in sight.
#[test]
#[ignore = "run by a_saved_gpt_graph_runs_in_a_fresh_process_without_its_type"]
fn reload_child() {
    let dir = PathBuf::from(std::env::var_os(RELOAD_DIR).expect("run by the parent test"));
    let logits = run_saved(&dir);
    let logits: Tensor<(usize, usize)> = logits.to_tensor().unwrap();
    let mut ck = Checkpoint::new();
    ck.add_tensor("logits", &logits).unwrap();
    ck.save(dir.join("logits.safetensors")).unwrap();
}

/// A saved graph run on its saved weights and inputs, by name only.
fn run_saved(dir: &Path) -> DynTensor {
    let graph = Graph::load(dir.join("gpt.json")).unwrap();
    let weights = Checkpoint::open(dir.join("gpt.safetensors")).unwrap();
    let params = Params::from_checkpoint(&weights, Device::Cpu).unwrap();
    let given = Checkpoint::open(dir.join("inputs.safetensors")).unwrap();
    let given = Params::from_checkpoint(&given, Device::Cpu).unwrap();
    let inputs: Vec<(&str, DynTensor)> = graph
        .inputs()
        .into_iter()
        .map(|(_, name)| (name, given.get(name).unwrap().clone()))
        .collect();
    graph.run(&inputs, &params).unwrap().remove(0)
}
