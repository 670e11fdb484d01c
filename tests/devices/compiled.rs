//! The compiled forward of `#[model]` (fused kernels, deferred bias, static backward) on every
//! device: outputs and gradients against the CPU, and what the fused layer costs in launches.

use super::*;
use rtx::Gradients;

/// Batch rows of the inputs.
const ROWS: usize = 6;

#[model]
struct Mlp<E: Float> {
    fc1: Linear<12, 32, E>,
    /// A parameter used directly in the forward.
    shift: Tensor<(Const<32>,), E>,
    fc2: Linear<32, 5, E>,
}

#[model]
impl<E: Float> Mlp<E> {
    fn forward(&self, x: &Tensor<(usize, Const<12>), E>) -> Tensor<(usize, Const<5>), E> {
        let h = self.fc1.forward(x);
        let h = (h - &self.shift).gelu_tanh();
        self.fc2.forward(&h)
    }
}

fn mlp<E: Float>(dev: Device) -> Mlp<E> {
    let mut m = Mlp::<E>::init(&Device::Cpu, 11);
    m.move_to(dev);
    m.track_gradients();
    m
}

/// A gradient's values, empty when there is none (so a missing one fails the comparison).
fn opt<S: Shape, E: Element>(t: Option<Tensor<S, E>>) -> Vec<f64> {
    t.map(|t| f64s(&t)).unwrap_or_default()
}

fn compiled_case<E: Float>() {
    on_every_device::<E>("compiled mlp", |dev| {
        let m = mlp::<E>(dev);
        let x = Tensor::from_vec(values::<E>(ROWS * 12, 3, -1.0, 1.0), (ROWS, Const), dev);
        let fused = m.forward_fused(&x);
        let (y, backward) = m.forward_train(&x);
        assert!(!y.tracks_grad());
        let dy = Tensor::from_vec(values::<E>(ROWS * 5, 4, -1.0, 1.0), (ROWS, Const), dev);
        let mut grads = Gradients::new();
        let (dx,) = backward(dy, &mut grads, true);
        vec![
            ("fused".into(), f64s(&fused)),
            ("train".into(), f64s(&y)),
            ("eager".into(), f64s(&m.forward(&x).detach())),
            ("dx".into(), opt(dx)),
            ("dw1".into(), opt(grads.get(&m.fc1.weight))),
            (
                "db1".into(),
                opt(m.fc1.bias.as_ref().and_then(|b| grads.get(b))),
            ),
            ("dshift".into(), opt(grads.get(&m.shift))),
            ("dw2".into(), opt(grads.get(&m.fc2.weight))),
        ]
    });
}

#[test]
fn compiled_forward_and_static_backward_match_the_cpu() {
    compiled_case::<f32>();
    compiled_case::<f64>();
    compiled_case::<bf16>();
}

/// `hardswish` and `mish` (which calls `softplus`'s kernel), ops added through the registry, in
/// one fused chain after a product.
#[model]
struct NewActivations<E: Float> {
    fc: Linear<12, 32, E>,
}

#[model]
impl<E: Float> NewActivations<E> {
    fn forward(&self, x: &Tensor<(usize, Const<12>), E>) -> Tensor<(usize, Const<32>), E> {
        let h = self.fc.forward(x);
        let h = h.hardswish();
        h.mish()
    }
}

fn registry_ops_case<E: Float>() {
    on_every_device::<E>("fused hardswish and mish", |dev| {
        let mut m = NewActivations::<E>::init(&Device::Cpu, 12);
        m.move_to(dev);
        m.track_gradients();
        let x = Tensor::from_vec(values::<E>(ROWS * 12, 5, -4.0, 4.0), (ROWS, Const), dev);
        let (y, backward) = m.forward_train(&x);
        let dy = Tensor::from_vec(values::<E>(ROWS * 32, 6, -1.0, 1.0), (ROWS, Const), dev);
        let mut grads = Gradients::new();
        let (dx,) = backward(dy, &mut grads, true);
        vec![
            ("fused".into(), f64s(&m.forward_fused(&x))),
            ("train".into(), f64s(&y)),
            ("eager".into(), f64s(&m.forward(&x).detach())),
            ("dx".into(), opt(dx)),
            ("dw".into(), opt(grads.get(&m.fc.weight))),
        ]
    });
}

#[test]
fn registry_ops_fuse_and_differentiate_on_every_device() {
    registry_ops_case::<f32>();
    registry_ops_case::<f64>();
    registry_ops_case::<bf16>();
}

#[model]
struct Hidden {
    fc: Linear<64, 256>,
}

#[model]
impl Hidden {
    fn forward(&self, x: &Tensor<(usize, Const<64>)>) -> Tensor<(usize, Const<256>)> {
        let h = self.fc.forward(x);
        h.gelu_tanh()
    }
}

#[test]
fn fused_linear_bias_gelu_is_one_product_and_one_kernel_on_a_gpu() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("fused linear: skipped: no CUDA device: {why}");
            return;
        }
    };
    for dev in gpus {
        let mut m = Hidden::init(&Device::Cpu, 2);
        m.move_to(dev);
        let x: Tensor<(usize, Const<64>)> =
            Tensor::from_vec(values(32 * 64, 5, -1.0, 1.0), (32usize, Const), dev);
        // Warm up: the first launches compile and load their kernels.
        drop(m.forward_fused(&x));
        drop(m.forward(&x));
        let before = rtx::launch_count(dev);
        let y = m.forward_fused(&x);
        let fused = rtx::launch_count(dev) - before;
        let before = rtx::launch_count(dev);
        let want = m.forward(&x);
        let eager = rtx::launch_count(dev) - before;
        println!("fused linear + bias + gelu on {dev}: {fused} launches (eager {eager})");
        assert_eq!(fused, 2, "one product and one kernel");
        // The eager Linear adds its bias in the product's epilogue too: a product and a GELU.
        assert_eq!(eager, 2);
        let (g, w) = (f64s(&y), f64s(&want));
        assert!(
            g.iter()
                .zip(&w)
                .all(|(a, b)| (a - b).abs() <= 1e-5 + 1e-5 * b.abs())
        );
    }
}

/// The MLP's output.
type Out = Tensor<(usize, Const<5>)>;

/// The squared error summed, with its static backward.
fn sse(y: &Out, t: &Out) -> (Tensor<()>, impl FnOnce(&Tensor<()>) -> Out + use<>) {
    let d = y - t;
    let loss = (&d * &d).sum_all();
    // No scalar operand: uploading one is not allowed while a graph is captured.
    (loss, move |g: &Tensor<()>| &(&d + &d) * g)
}

/// Six steps of a `TrainStep` on `dev` (captured from the second on a GPU), with fresh
/// inputs each step; the parameters after, the losses, and the launches of the last step.
fn train_steps(dev: Device) -> (Vec<f64>, Vec<f64>, u64, bool) {
    let mut m = mlp::<f32>(dev);
    let mut opt = Adam::new(1e-2);
    let mut step = rtx::compile::TrainStep::new(sse);
    let mut losses = Vec::new();
    let mut launches = 0;
    for k in 0..6u64 {
        let x = Tensor::from_vec(
            values::<f32>(ROWS * 12, 20 + k, -1.0, 1.0),
            (ROWS, Const),
            dev,
        );
        let t = Tensor::from_vec(
            values::<f32>(ROWS * 5, 40 + k, -1.0, 1.0),
            (ROWS, Const),
            dev,
        );
        let before = rtx::launch_count(dev);
        let loss = step.run(&mut m, &mut opt, (x,), &t).unwrap();
        launches = rtx::launch_count(dev) - before;
        losses.push(loss.item() as f64);
    }
    let mut params = f64s(&m.fc1.weight);
    params.extend(f64s(&m.fc2.weight));
    params.extend(f64s(&m.shift));
    (params, losses, launches, step.is_captured())
}

#[test]
fn a_captured_train_step_matches_the_cpu() {
    let (want, want_losses, _, captured) = train_steps(Device::Cpu);
    assert!(!captured);
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("captured train step: skipped: no CUDA device: {why}");
            return;
        }
    };
    for dev in gpus {
        let (got, losses, launches, captured) = train_steps(dev);
        println!("captured train step on {dev}: {launches} launches a step; losses {losses:?}");
        assert!(captured, "a GPU step is captured from its second run");
        for (i, (g, w)) in losses.iter().zip(&want_losses).enumerate() {
            assert!(
                (g - w).abs() <= 1e-3 * (1.0 + w.abs()),
                "loss {i}: {g} vs {w}"
            );
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "parameter {i}: {g} vs {w}"
            );
        }
        // Two input copies, the graph, the optimizer's update.
        assert!(launches <= 4, "{launches} launches");
    }
}

#[model]
struct Dropped<E: Float> {
    fc: Linear<12, 5, E>,
    drop: Dropout,
}

#[model]
impl<E: Float> Dropped<E> {
    fn forward(&self, x: &Tensor<(usize, Const<12>), E>) -> Tensor<(usize, Const<5>), E> {
        let h = self.fc.forward(x);
        self.drop.forward(&h)
    }
}

/// Dropout's seed is a launch argument, so a captured step would repeat one mask: the capture
/// fails with an error naming dropout, and in eval mode the same model captures.
#[test]
fn dropout_in_training_refuses_capture_and_eval_captures() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("dropout under capture: skipped: no CUDA device: {why}");
            return;
        }
    };
    for dev in gpus {
        let mut m = Dropped::<f32>::init(&Device::Cpu, 3);
        m.move_to(dev);
        m.track_gradients();
        let mut opt = Adam::new(1e-2);
        let x = Tensor::from_vec(values::<f32>(ROWS * 12, 1, -1.0, 1.0), (ROWS, Const), dev);
        let t = Tensor::from_vec(values::<f32>(ROWS * 5, 2, -1.0, 1.0), (ROWS, Const), dev);
        let mut step = rtx::compile::TrainStep::new(sse);
        step.run(&mut m, &mut opt, (x.clone(),), &t)
            .expect("the first run is eager");
        let err = step
            .run(&mut m, &mut opt, (x.clone(),), &t)
            .expect_err("a dropout mask cannot be captured");
        assert!(err.to_string().contains("dropout"), "{err}");
        // The GPU is still usable, and without dropout the step captures.
        m.eval();
        let mut step = rtx::compile::TrainStep::new(sse);
        for _ in 0..3 {
            step.run(&mut m, &mut opt, (x.clone(),), &t).unwrap();
        }
        assert!(step.is_captured());
    }
}

/// Steps of one `TrainStep` keeping at most 2 sizes on `dev`, over batches of the given row
/// counts: the parameters after, the losses, and the captured graphs kept at the end.
fn train_sizes(dev: Device, rows: &[usize]) -> (Vec<f64>, Vec<f64>, usize) {
    let mut m = mlp::<f32>(dev);
    let mut opt = Adam::new(1e-2);
    let mut step = rtx::compile::TrainStep::new(sse).max_sizes(2);
    let mut losses = Vec::new();
    for (k, &n) in rows.iter().enumerate() {
        let k = k as u64;
        let x = Tensor::from_vec(values::<f32>(n * 12, 60 + k, -1.0, 1.0), (n, Const), dev);
        let t = Tensor::from_vec(values::<f32>(n * 5, 80 + k, -1.0, 1.0), (n, Const), dev);
        let loss = step.run(&mut m, &mut opt, (x,), &t).unwrap();
        losses.push(loss.item() as f64);
        assert!(step.sizes().len() <= 2, "{:?}", step.sizes());
    }
    let mut params = f64s(&m.fc1.weight);
    params.extend(f64s(&m.fc2.weight));
    (params, losses, step.captured_graphs())
}

/// A step keeps one captured graph per batch size, at most as many as it is told, and every
/// size's replays match the CPU's steps.
#[test]
fn a_captured_step_is_kept_per_batch_size() {
    // 6 and 4 are each run, captured and replayed; 3 then drops 4, the least recently used,
    // and is captured; 4, back, drops 6 and runs uncaptured again.
    let rows = [6, 6, 4, 6, 4, 4, 6, 3, 3, 3, 4];
    let (want, want_losses, graphs) = train_sizes(Device::Cpu, &rows);
    assert_eq!(graphs, 0);
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("per-size captured step: skipped: no CUDA device: {why}");
            return;
        }
    };
    for dev in gpus {
        let (got, losses, graphs) = train_sizes(dev, &rows);
        assert_eq!(
            graphs, 1,
            "3 keeps its graph; 4 is new again, 6 was dropped"
        );
        for (i, (g, w)) in losses.iter().zip(&want_losses).enumerate() {
            assert!(
                (g - w).abs() <= 1e-3 * (1.0 + w.abs()),
                "loss {i}: {g} vs {w}"
            );
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "parameter {i}: {g} vs {w}"
            );
        }
    }
}
