//! The book's chapter "How #[model] compiles your model" (book/src/how-model-compiles.md):
//! the tutorial's MLP with `#[model]` on its impl, checked against the tutorial's own model.
//! Its IR summary, its DOT text and its dispatch counts are shown in the chapter from
//! `book/src/generated/mlp_ir.txt`, `mlp.dot` and `mlp_launches.txt`, held equal here to what
//! the code produces now; after an intended change, `RTX_BLESS=1 cargo test --test
//! integration book_compile::` rewrites them. The rendered `mlp.svg` is checked against `mlp.dot` (the same
//! nodes and edges), since CI has no Graphviz to render it again.

use crate::mnist_models as tutorial;

use rtx::compile::{Gradients, MixedStep, TrainStep};
use rtx::nn::TensorKind;
use rtx::prelude::*;
use std::path::PathBuf;

// ANCHOR: model
/// A batch of MNIST images, its size known at run time.
type Images = Tensor<(Dyn<'B'>, Const<1>, Const<28>, Const<28>)>;
/// A batch of logits over the ten digits.
type Logits = Tensor<(Dyn<'B'>, Const<10>)>;

/// The tutorial's MLP, 784 -> 256 (ReLU) -> 10, with its forward compiled.
#[model]
struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 10>,
}

#[model(check)]
impl Mlp {
    fn forward(&self, x: &Images) -> Logits {
        let x = (x - 0.1307) / 0.3081;
        let x = x.reshape((x.dim::<0>(), Const::<784>));
        let h = self.fc1.forward(&x);
        let h = h.relu();
        self.fc2.forward(&h)
    }
}
// ANCHOR_END: model

/// A batch of `n` random images with pixels in [0, 1].
fn images(n: usize, seed: u64) -> Images {
    Tensor::rand_uniform((Dyn(n), Const, Const, Const), 0.0, 1.0, seed, Device::Cpu)
}

/// `n` random digits.
fn labels(n: usize, seed: u64) -> Tensor<(Dyn<'B'>,), i64> {
    Tensor::randint((Dyn(n),), 0, 10, seed, Device::Cpu)
}

/// Asserts `a` and `b` agree within `tol`, relative to each value's size.
#[track_caller]
fn close(what: &str, a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}: element {i} is {x}, want {y}"
        );
    }
}

/// Each parameter's name and values, or with `grads`, the values of its gradient there.
fn by_name(m: &impl Module, grads: Option<&Gradients>) -> Vec<(String, Vec<f32>)> {
    struct Collect<'a>(Option<&'a Gradients>, Vec<(String, Vec<f32>)>);
    impl rtx::nn::Visitor for Collect<'_> {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, _: TensorKind) {
            let values = match self.0 {
                None => Some(t.cast::<f32>().to_vec()),
                Some(g) => g.get(t).map(|g| g.cast::<f32>().to_vec()),
            };
            let values = values.unwrap_or_else(|| panic!("{name} has no gradient"));
            self.1.push((name.to_string(), values));
        }
    }
    let mut c = Collect(grads, Vec::new());
    m.visit("", &mut c);
    c.1
}

/// Asserts two models' tensors, by name, agree within `tol`.
#[track_caller]
fn same(what: &str, a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)], tol: f32) {
    let names = |v: &[(String, Vec<f32>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "{what}: the names differ");
    assert_eq!(a.len(), 4, "{what}: fc1 and fc2, weight and bias");
    for ((name, x), (_, y)) in a.iter().zip(b) {
        close(&format!("{what} {name}"), x, y, tol);
    }
}

/// What `f` returns, and the CPU dispatches it made on this thread.
fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = rtx::launch_count(Device::Cpu);
    let r = f();
    (r, rtx::launch_count(Device::Cpu) - before)
}

/// `book/src/generated/NAME`.
fn generated(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("book/src/generated")
        .join(name)
}

/// Checks that `book/src/generated/NAME` holds `text` (writing it under `RTX_BLESS=1`).
#[track_caller]
fn golden(name: &str, text: &str) {
    let path = generated(name);
    if std::env::var_os("RTX_BLESS").is_some() {
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let shown = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with RTX_BLESS=1 to write it)", path.display()));
    assert!(
        shown == text,
        "{} differs from what the code gives now (RTX_BLESS=1 rewrites it; review the \
         diff):\n{text}",
        path.display()
    );
}

#[test]
fn the_compiled_mlp_is_the_tutorials() {
    // The same field names give the same parameters from the same seed.
    let compiled = Mlp::init(&Device::Cpu, 1);
    let eager = tutorial::Mlp::init(&Device::Cpu, 1);
    let x = images(4, 2);
    close(
        "compiled against the tutorial's forward",
        &compiled.forward_fused(&x).to_vec(),
        &eager.forward(&x).to_vec(),
        1e-5,
    );
}

#[test]
fn the_ir_shows_two_fused_kernels_between_the_products() {
    let m = Mlp::init(&Device::Cpu, 1);
    let g = m.ir();
    golden("mlp_ir.txt", &g.to_string());
    let in_kernel = |op: &str| {
        g.nodes
            .iter()
            .filter(|n| n.op.name() == op)
            .map(|n| n.kernel.clone())
            .collect::<Vec<_>>()
    };
    // The normalization is one kernel, the ReLU another; the products and fc2's bias are
    // no kernel's.
    let norm = in_kernel("sub");
    assert_eq!(norm.len(), 1);
    assert!(norm[0].is_some());
    assert_eq!(in_kernel("div"), norm, "sub and div share a kernel");
    let relu = in_kernel("relu");
    assert!(relu[0].is_some() && relu[0] != norm[0], "{relu:?}");
    assert_eq!(in_kernel("linear"), [None, None]);
    let mut kernels: Vec<_> = g.nodes.iter().filter_map(|n| n.kernel.clone()).collect();
    kernels.sort();
    kernels.dedup();
    assert_eq!(kernels.len(), 2, "{kernels:?}");
}

/// The node ids (`n3`) and edges (`n3->n5`) a DOT text declares, sorted.
fn dot_items(dot: &str) -> Vec<String> {
    let mut items: Vec<String> = dot
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            let head = l.split([' ', ';']).next()?;
            if let Some((a, b)) = l.trim_end_matches(';').split_once(" -> ") {
                return Some(format!("{a}->{b}"));
            }
            let id = head.strip_prefix('n')?;
            (id.parse::<usize>().is_ok() && l.contains("[label=")).then(|| head.to_string())
        })
        .collect();
    items.sort();
    items
}

/// The node ids and edges of an SVG rendered from DOT, sorted: Graphviz writes each node's
/// and edge's DOT name as its `<title>` (the outputs' `out0` nodes included).
fn svg_items(svg: &str) -> Vec<String> {
    let mut items: Vec<String> = svg
        .split("<title>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</title>"))
        .map(|(t, _)| t.replace("&#45;&gt;", "->"))
        .filter(|t| t.starts_with('n') || t.starts_with("out"))
        .collect();
    items.sort();
    items
}

#[test]
fn the_picture_is_the_dot_rendered() {
    let m = Mlp::init(&Device::Cpu, 1);
    let dot = m.ir().to_dot();
    golden("mlp.dot", &dot);
    let path = generated("mlp.svg");
    let svg = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut want = dot_items(&dot);
    want.extend((0..m.ir().outputs.len()).map(|k| format!("out{k}")));
    want.sort();
    assert!(want.len() > 20, "{want:?}");
    assert_eq!(
        svg_items(&svg),
        want,
        "{} is not mlp.dot rendered: run `dot -Tsvg book/src/generated/mlp.dot -o \
         book/src/generated/mlp.svg`",
        path.display()
    );
}

#[test]
fn the_static_backward_gives_the_tapes_gradients() {
    let x = images(8, 3);
    let t = labels(8, 4);
    let mut tutorial = tutorial::Mlp::init(&Device::Cpu, 5);
    tutorial.track_gradients();
    let tape = cross_entropy(&tutorial.forward(&x), &t).backward();

    let mut model = Mlp::init(&Device::Cpu, 5);
    model.track_gradients();
    // ANCHOR: static_backward
    let (logits, backward) = model.forward_train(&x);
    let (loss, loss_backward) = rtx::compile::loss::cross_entropy(&logits, &t);
    let mut grads = Gradients::new();
    let (dx,) = backward(loss_backward(&loss.ones_like()), &mut grads, false);
    assert!(dx.is_none(), "no gradient for the images was asked for");
    // ANCHOR_END: static_backward
    same(
        "gradient",
        &by_name(&model, Some(&grads)),
        &by_name(&tutorial, Some(&tape)),
        1e-4,
    );
}

/// The dispatches of one training step, part by part.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Costs {
    forward: u64,
    loss: u64,
    backward: u64,
    update: u64,
}

impl Costs {
    fn step(&self) -> u64 {
        self.forward + self.loss + self.backward + self.update
    }
}

/// The tutorial's step: eager forward, loss, the tape's backward, Adam.
fn tape_costs(x: &Images, t: &Tensor<(Dyn<'B'>,), i64>) -> Costs {
    let mut m = tutorial::Mlp::init(&Device::Cpu, 6);
    m.track_gradients();
    let mut opt = Adam::new(1e-3);
    let (y, forward) = counted(|| m.forward(x));
    let (loss, loss_cost) = counted(|| cross_entropy(&y, t));
    let (grads, backward) = counted(|| loss.backward());
    // The graph goes before the update, as the compiled step's does: a parameter it still
    // held would be copied before Adam writes it in place.
    drop((y, loss));
    let ((), update) = counted(|| opt.step(&mut m, &grads));
    Costs {
        forward,
        loss: loss_cost,
        backward,
        update,
    }
}

/// The compiled step's parts: compiled forward, static loss and backward, Adam; and the
/// whole of `TrainStep::run`.
fn compiled_costs(x: &Images, t: &Tensor<(Dyn<'B'>,), i64>) -> (Costs, u64) {
    let mut m = Mlp::init(&Device::Cpu, 6);
    m.track_gradients();
    let mut opt = Adam::new(1e-3);
    let ((y, backward), forward) = counted(|| m.forward_train(x));
    let ((loss, loss_backward), loss_cost) = counted(|| rtx::compile::loss::cross_entropy(&y, t));
    let mut grads = Gradients::new();
    let (_, backward) = counted(|| backward(loss_backward(&loss.ones_like()), &mut grads, false));
    let ((), update) = counted(|| opt.step(&mut m, &grads));
    let parts = Costs {
        forward,
        loss: loss_cost,
        backward,
        update,
    };
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let (_, whole) = counted(|| step.run(&mut m, &mut opt, (x.clone(),), t));
    (parts, whole)
}

#[test]
fn what_fusion_saves() {
    let (x, t) = (images(8, 7), labels(8, 8));
    let tape = tape_costs(&x, &t);
    let (compiled, whole) = compiled_costs(&x, &t);
    // The normalization's two ops are one kernel. (A Linear's bias is the GEMM's starting
    // rows on the CPU in both forms, so it costs no dispatch of its own in either.)
    assert_eq!(compiled.forward, tape.forward - 1, "{compiled:?} {tape:?}");
    assert!(compiled.backward <= tape.backward, "{compiled:?} {tape:?}");
    assert_eq!(compiled.update, tape.update, "the same optimizer");
    assert_eq!(
        whole,
        compiled.step(),
        "`TrainStep::run` is these parts on the CPU"
    );
    // A Markdown table, included as it is in the chapter.
    let row = |what: &str, a: u64, b: u64| format!("| {what} | {a} | {b} |\n");
    let mut text = String::from("| dispatches | tutorial (eager, tape) | compiled |\n");
    text += "|---|---:|---:|\n";
    text += &row("forward", tape.forward, compiled.forward);
    text += &row("loss", tape.loss, compiled.loss);
    text += &row("backward", tape.backward, compiled.backward);
    text += &row("Adam's update", tape.update, compiled.update);
    text += &row("training step", tape.step(), compiled.step());
    golden("mlp_launches.txt", &text);
}

#[test]
fn a_train_step_trains_as_the_tutorials_loop_does() -> rtx::Result<()> {
    let batches: Vec<_> = (0..3)
        .map(|i| (images(8, 10 + i), labels(8, 20 + i)))
        .collect();
    // The tutorial's loop: eager forward, loss, the tape's backward, Adam.
    let mut want = tutorial::Mlp::init(&Device::Cpu, 9);
    want.track_gradients();
    let mut opt = Adam::new(1e-3);
    for (images, labels) in &batches {
        let loss = cross_entropy(&want.forward(images), labels);
        opt.step(&mut want, &loss.backward());
    }

    let mut model = Mlp::init(&Device::Cpu, 9);
    model.track_gradients();
    let mut opt = Adam::new(1e-3);
    let mut losses = Vec::new();
    // ANCHOR: train_step
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    for (images, labels) in &batches {
        let loss = step.run(&mut model, &mut opt, (images.clone(),), labels)?;
        losses.push(loss.item());
    }
    // ANCHOR_END: train_step
    assert!(!step.is_captured(), "nothing is captured on the CPU");
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    same(
        "parameter after three steps",
        &by_name(&model, None),
        &by_name(&want, None),
        1e-5,
    );
    Ok(())
}

// ANCHOR: generic_model
/// The same MLP for any float type, on images normalized beforehand.
#[model]
struct MlpOf<E: Float> {
    fc1: Linear<784, 256, E>,
    fc2: Linear<256, 10, E>,
}

#[model(check)]
impl<E: Float> MlpOf<E> {
    fn forward(
        &self,
        x: &Tensor<(Dyn<'B'>, Const<1>, Const<28>, Const<28>), E>,
    ) -> Tensor<(Dyn<'B'>, Const<10>), E> {
        let x = x.reshape((x.dim::<0>(), Const::<784>));
        let h = self.fc1.forward(&x);
        let h = h.relu();
        self.fc2.forward(&h)
    }
}
// ANCHOR_END: generic_model

/// The distance between two models' fc1 weights.
fn distance(a: &Linear<784, 256>, b: &Linear<784, 256>) -> f32 {
    let (a, b) = (a.weight.to_vec(), b.weight.to_vec());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f32>()
        .sqrt()
}

#[test]
fn a_mixed_step_follows_the_f32_step() -> rtx::Result<()> {
    let batches: Vec<_> = (0..4)
        .map(|i| ((images(8, 30 + i) - 0.1307) / 0.3081, labels(8, 40 + i)))
        .collect();
    let start = MlpOf::<f32>::init(&Device::Cpu, 11);
    // The same four steps in f32 throughout.
    let mut full = MlpOf::<f32>::init(&Device::Cpu, 11);
    full.track_gradients();
    let mut opt = Adam::new(1e-3);
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    for (images, labels) in &batches {
        step.run(&mut full, &mut opt, (images.clone(),), labels)?;
    }

    let mut losses = Vec::new();
    // ANCHOR: mixed_step
    let mut master = MlpOf::<f32>::init(&Device::Cpu, 11);
    master.track_gradients();
    let mut working = MlpOf::<bf16>::init(&Device::Cpu, 11);
    working.track_gradients();
    let mut opt = Adam::new(1e-3);
    let mut step = MixedStep::new(rtx::compile::loss::cross_entropy);
    for (images, labels) in &batches {
        let images = images.cast::<bf16>();
        let loss = step.run(&mut master, &mut working, &mut opt, (images,), labels)?;
        losses.push(loss.item());
    }
    // ANCHOR_END: mixed_step
    assert_eq!(
        master.fc1.weight.dtype(),
        DType::F32,
        "the master stays f32"
    );
    assert!(losses.iter().all(|l| l.to_f32().is_finite()), "{losses:?}");
    // bf16 rounds the forward and backward, but the updates go where f32's go.
    let moved = distance(&full.fc1, &start.fc1);
    let apart = distance(&master.fc1, &full.fc1);
    println!("f32 moved fc1 by {moved}; mixed ended {apart} from f32");
    assert!(apart < 0.1 * moved, "moved {moved}, apart {apart}");
    Ok(())
}
