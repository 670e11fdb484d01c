//! The book's "Your first model" chapter, as tests: the listings it shows beyond the `mnist`
//! example (parameter names, the summary, both batch types through one forward, typed
//! gradients, field attributes, saving and strict loading), on the example's own models and
//! on made-up inputs, so no data set is needed. The summary the chapter prints is
//! `tests/fixtures/mnist_mlp_summary.txt`, held equal to `summary()` here.

use crate::mnist_models::{Images, Lenet, Logits, Mlp};
use rtx::nn::TensorKind;
use rtx::prelude::*;

fn names(m: &impl Module) -> Vec<String> {
    m.tensor_names().into_iter().map(|(n, _)| n).collect()
}

/// A temporary path, unique to this process and test.
fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rtx-first-model-{}-{name}", std::process::id()))
}

#[test]
fn parameters_are_named_after_fields() {
    // ANCHOR: names
    let model = Mlp::init(&Device::Cpu, 0);
    assert_eq!(
        names(&model),
        ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    );
    assert_eq!(model.num_parameters(), 784 * 256 + 256 + 256 * 10 + 10);
    // ANCHOR_END: names
    assert_eq!(
        model.summary(),
        include_str!("../fixtures/mnist_mlp_summary.txt")
    );
}

#[test]
fn init_is_a_function_of_the_seed() {
    // ANCHOR: seeds
    let a = Mlp::init(&Device::Cpu, 7);
    let b = Mlp::init(&Device::Cpu, 7);
    let c = Mlp::init(&Device::Cpu, 8);
    let x: Images<Const<2>> =
        Tensor::rand_uniform((Const, Const, Const, Const), 0.0, 1.0, 1, Device::Cpu);
    assert_eq!(a.forward(&x).to_vec(), b.forward(&x).to_vec());
    assert_ne!(a.forward(&x).to_vec(), c.forward(&x).to_vec());
    // ANCHOR_END: seeds
}

#[test]
fn one_forward_serves_both_batch_types() {
    let model = Mlp::init(&Device::Cpu, 0);
    // ANCHOR: batch_types
    // A full batch: the batch size is part of the type.
    let full: Images<Const<128>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let logits: Logits<Const<128>> = model.forward(&full);
    // The last batch of an epoch: its size is known only at run time.
    let rest: Images<usize> = Tensor::zeros((16, Const, Const, Const), Device::Cpu);
    let rest_logits: Logits<usize> = model.forward(&rest);
    // ANCHOR_END: batch_types
    assert_eq!(logits.dims(), &[128, 10]);
    assert_eq!(rest_logits.dims(), &[16, 10]);
    let lenet = Lenet::init(&Device::Cpu, 0);
    assert_eq!(lenet.forward(&rest).dims(), &[16, 10]);
}

#[test]
fn the_compiled_forwards_hold_to_the_eager_ones_at_two_batch_sizes() {
    // The example trains through the compiled forward and static backward: both models',
    // against the eager forward and the tape, at a full and a partial batch size.
    for n in [3, 5] {
        let x: Images<usize> =
            Tensor::rand_uniform((n, Const, Const, Const), 0.0, 1.0, n as u64, Device::Cpu);
        rtx::compile::glue::check_model::<Mlp, _, _, f32>((x.clone(),), |m| m.forward(&x));
        rtx::compile::glue::check_model::<Lenet, _, _, f32>((x.clone(),), |m| m.forward(&x));
    }
}

#[test]
fn gradients_have_their_parameters_types() {
    // ANCHOR: grads
    let mut layer = Linear::<784, 256>::init(&Device::Cpu, 0);
    layer.track_gradients();
    let x: Tensor<(usize, Const<784>)> = Tensor::rand_uniform((8, Const), 0.0, 1.0, 1, Device::Cpu);
    let grads = layer.forward(&x).relu().sum_all().backward();
    // The gradient of a `[256, 784]` weight is a `[256, 784]` tensor, by type.
    let dw: Option<Tensor<Rank2<256, 784>>> = grads.get(&layer.weight);
    // ANCHOR_END: grads
    let dw = dw.expect("the loss depends on the weight");
    assert!(dw.to_vec().iter().any(|g| *g != 0.0));
    let unused: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu).requires_grad();
    assert!(grads.get(&unused).is_none());
}

// ANCHOR: attributes
/// The MLP with a learned temperature, a count of the images it has seen, and class names.
#[model]
struct Calibrated {
    /// A nested model: its tensors are `body.fc1.weight`, `body.fc1.bias`, ...
    body: Mlp,
    /// A bare tensor is a parameter; `#[init]` starts it at 1 rather than 0.
    #[init(Tensor::ones((Const,), *device))]
    temperature: Tensor<Rank1<1>>,
    /// Saved with the model, never trained.
    #[buffer]
    seen: Tensor<Rank1<1>>,
    /// Not part of the model: neither visited nor saved (built with `Default`).
    #[skip]
    classes: Vec<String>,
}
// ANCHOR_END: attributes

#[test]
fn field_attributes_choose_what_is_a_parameter() {
    let m = Calibrated::init(&Device::Cpu, 0);
    let kinds: Vec<(String, TensorKind)> = m.tensor_names().into_iter().skip(4).collect();
    assert_eq!(
        kinds,
        [
            ("temperature".to_string(), TensorKind::Parameter),
            ("seen".to_string(), TensorKind::Buffer)
        ]
    );
    assert_eq!(names(&m)[0], "body.fc1.weight");
    assert_eq!(m.temperature.to_vec(), [1.0]);
    assert_eq!(m.seen.to_vec(), [0.0]);
    assert!(m.classes.is_empty());
    assert_eq!(
        m.num_parameters(),
        Mlp::init(&Device::Cpu, 0).num_parameters() + 1
    );
}

#[test]
fn save_and_load_round_trip() -> rtx::Result<()> {
    let path = temp("mlp.safetensors");
    let x: Images<Const<4>> =
        Tensor::rand_uniform((Const, Const, Const, Const), 0.0, 1.0, 3, Device::Cpu);
    // ANCHOR: save_load
    let model = Mlp::init(&Device::Cpu, 0);
    model.save(&path)?; // fc1.weight, fc1.bias, ...: the twin's state_dict
    let mut restored = Mlp::init(&Device::Cpu, 1);
    restored.load(&path)?; // every key present, every shape right, or an error
    assert_eq!(restored.forward(&x).to_vec(), model.forward(&x).to_vec());
    // ANCHOR_END: save_load

    // Strict: the CNN has none of these keys, and loading leaves it as it was.
    let mut cnn = Lenet::init(&Device::Cpu, 0);
    let before = cnn.forward(&x).to_vec();
    let err = cnn.load(&path).unwrap_err().to_string();
    assert!(err.contains("conv1.weight"), "{err}");
    assert_eq!(cnn.forward(&x).to_vec(), before);
    std::fs::remove_file(&path).ok();
    Ok(())
}

#[test]
fn training_runs_on_the_best_device() -> rtx::Result<()> {
    // ANCHOR: gpu_step
    // The GPU when there is one (it says so and picks the CPU otherwise).
    let device = Device::best();
    // Initialized on the CPU, then moved: one seed gives one model on every device.
    let mut model = Mlp::init(&Device::Cpu, 0);
    model.move_to(device);
    model.track_gradients();
    let mut opt = Adam::new(1e-3);
    let images: Images<Const<64>> =
        Tensor::rand_uniform((Const, Const, Const, Const), 0.0, 1.0, 1, device);
    let labels: Tensor<(Const<64>,), i64> = Tensor::randint((Const,), 0, 10, 2, device);
    let mut losses = Vec::new();
    for _ in 0..20 {
        let loss = cross_entropy(&model.forward(&images), &labels);
        let grads = loss.backward();
        opt.step(&mut model, &grads);
        losses.push(loss.item());
    }
    if let Device::Cuda(gpu) = device {
        let mem = rtx::cuda::memory_stats(gpu)?;
        println!(
            "{} kernel launches; {} bytes allocated, {} reserved, {} at most",
            rtx::launch_count(device),
            mem.allocated,
            mem.reserved,
            mem.peak_allocated
        );
    }
    // ANCHOR_END: gpu_step
    // Twenty steps on one batch: the model learns it.
    assert!(losses[19] < 0.5 * losses[0], "losses {losses:?}");
    assert_eq!(model.forward(&images).device(), device);
    Ok(())
}
