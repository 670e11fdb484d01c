//! Data-parallel training with `rtx::dist::Ddp`: every rank trains the same model on its own
//! share of each epoch (`DistributedSampler`), the gradients are averaged over the ranks, and
//! at the end the ranks check that they hold the same parameters.
//!
//! `--model gpt` (the default) trains the GPT of the bench step (`benches/gpt_step/model.rs`)
//! on a synthetic token stream with the compiled, captured training step (`TrainStep`, whose
//! optimizer `Ddp::optimizer` averages the gradients: inside the step's CUDA graph on an NCCL
//! group); `--model mlp` trains an MLP through the tape (`Ddp::backward`, buckets averaged
//! while the backward runs). On the CPU by default, over TCP, with a small GPT; with
//! `--device cuda` (or `RTX_DEVICE=cuda`) each rank trains on GPU `LOCAL_RANK` over NCCL, with
//! the bench's GPT size.
//!
//! Run on 2 ranks with `cargo build --release --example ddp -p rtx-run` and then
//! `target/release/rtx-run --nproc-per-node 2 -- target/release/examples/ddp`; run directly
//! (`cargo run --release --example ddp`) it is a group of one. `--steps N` stops each epoch
//! after N steps.

#[path = "../benches/gpt_step/model.rs"]
mod gpt;

use gpt::Gpt;
use rtx::compile::TrainStep;
use rtx::data::DistributedSampler;
use rtx::dist::{self, Backend, Ddp, Env, InitOptions, ProcessGroup, ReduceOp};
use rtx::nn::{TensorKind, Visitor};
use rtx::prelude::*;

type X = Tensor<(Dyn<'B'>, Const<16>)>;
type Y = Tensor<(Dyn<'B'>, Const<1>)>;

#[model]
struct Mlp {
    fc1: Linear<16, 64>,
    fc2: Linear<64, 64>,
    fc3: Linear<64, 1>,
}

#[model]
impl Mlp {
    fn forward(&self, x: &X) -> Y {
        let h = self.fc1.forward(x);
        let h = h.gelu_tanh();
        let h = self.fc2.forward(&h);
        let h = h.gelu_tanh();
        self.fc3.forward(&h)
    }
}

/// Items in each synthetic data set (rows for the MLP, windows of tokens for the GPT), items
/// per rank in a batch, and epochs.
const ITEMS: usize = 1024;
const BATCH: usize = 32;
const GPT_ITEMS: usize = 256;
const GPT_BATCH: usize = 8;
const EPOCHS: u64 = 3;

/// The command line: which model, on which device, and at most how many steps an epoch.
struct Options {
    gpt: bool,
    cuda: bool,
    steps: usize,
}

fn options() -> Options {
    let mut o = Options {
        gpt: true,
        cuda: std::env::var("RTX_DEVICE").is_ok_and(|d| d.starts_with("cuda")),
        steps: usize::MAX,
    };
    let mut args = std::env::args().skip(1);
    let usage = |what: String| -> ! {
        eprintln!("usage: ddp [--model gpt|mlp] [--device cpu|cuda] [--steps N] ({what})");
        std::process::exit(2)
    };
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--model", Some(m)) if m == "gpt" || m == "mlp" => o.gpt = m == "gpt",
            ("--device", Some(d)) if d == "cpu" || d == "cuda" => o.cuda = d == "cuda",
            ("--steps", Some(n)) => o.steps = n.parse().unwrap_or_else(|_| usage(n)),
            (a, v) => usage(format!("{a} {}", v.unwrap_or_default())),
        }
    }
    o
}

/// The sum of every parameter, in f64: equal bits on every rank when the ranks agree.
fn checksum<M: Module>(m: &M) -> f64 {
    struct Sum(f64);
    impl Visitor for Sum {
        fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, _: TensorKind) {
            self.0 += t.to_vec().iter().map(|x| x.to_f64()).sum::<f64>();
        }
    }
    let mut s = Sum(0.0);
    m.visit("", &mut s);
    s.0
}

/// Prints this epoch's mean loss here and over the ranks.
fn report(pg: &ProcessGroup, epoch: u64, losses: &[f64]) -> rtx::Result<()> {
    let local = losses.iter().sum::<f64>() / losses.len().max(1) as f64;
    let mut global: Tensor<Rank1<1>, f64> = Tensor::from_array([local], Device::Cpu);
    if pg.backend_name() == "nccl" {
        // An NCCL group reduces tensors on its GPU.
        global = global.to_device(pg_device(pg));
    }
    pg.all_reduce(&mut global, ReduceOp::Avg)?;
    println!(
        "rank {}/{} epoch {epoch}: loss {local:.5} (mean over ranks {:.5})",
        pg.rank(),
        pg.world_size(),
        global.to_vec()[0]
    );
    Ok(())
}

/// The device an NCCL group's tensors live on (GPU `LOCAL_RANK`).
fn pg_device(pg: &ProcessGroup) -> Device {
    match pg.backend_name() {
        "nccl" => Device::Cuda(Env::from_env().map_or(0, |e| e.local_rank)),
        _ => Device::Cpu,
    }
}

/// Rows `idx` of `t` (`W` columns) as a batch on `dev`.
fn rows<const W: usize>(t: &[f32], idx: &[usize], dev: Device) -> Tensor<(Dyn<'B'>, Const<W>)> {
    let v = idx
        .iter()
        .flat_map(|&i| t[i * W..][..W].iter().copied())
        .collect();
    Tensor::from_vec(v, (Dyn(idx.len()), Const), dev)
}

/// The MLP through the tape: `Ddp::backward` averages each bucket while the backward runs.
fn train_mlp(pg: ProcessGroup, dev: Device, steps: usize) -> rtx::Result<f64> {
    let rank = pg.rank();
    // Each rank starts from its own seed; Ddp::new broadcasts rank 0's parameters.
    let mut model = Mlp::init(&Device::Cpu, rank as u64);
    model.move_to(dev);
    model.track_gradients();
    let mut ddp = Ddp::new(model, pg)?;
    let mut opt = Adam::new(3e-3);
    let mut sampler = DistributedSampler::for_group(ITEMS, ddp.process_group()).seed(42);

    // The same data set on every rank: targets from a fixed random "teacher".
    let x: X = Tensor::randn((Dyn(ITEMS), Const), 1, Device::Cpu);
    let teacher: Tensor<Rank2<1, 16>> = Tensor::randn((Const, Const), 2, Device::Cpu);
    let y: Y = x.matmul(&teacher.t()).tanh();
    let (xs, ys) = (x.to_vec(), y.to_vec());
    // ANCHOR: mlp
    for epoch in 0..EPOCHS {
        sampler.set_epoch(epoch);
        let mut losses = Vec::new();
        for idx in sampler.indices().chunks(BATCH).take(steps) {
            let (xb, yb) = (rows::<16>(&xs, idx, dev), rows::<1>(&ys, idx, dev));
            let d = &ddp.module().forward(&xb) - &yb;
            let loss = (&d * &d).mean_all();
            // The backward, with each bucket of gradients averaged over the ranks as soon as
            // it is ready.
            let grads = ddp.backward(&loss)?;
            opt.try_step(ddp.module_mut(), &grads)?;
            losses.push(loss.item() as f64);
        }
        report(ddp.process_group(), epoch, &losses)?;
    }
    // ANCHOR_END: mlp
    agree(ddp.process_group(), checksum(ddp.module()))
}

/// The token stream every rank shares: each token follows from the one before, so a model
/// can learn it (the loss falls from ln V).
fn token_stream(len: usize, vocab: usize) -> Vec<i64> {
    let mut t = 1usize;
    (0..len)
        .map(|i| {
            // A new start every 97 tokens, so windows differ.
            t = if i % 97 == 0 {
                i % vocab
            } else {
                (5 * t + 3) % vocab
            };
            t as i64
        })
        .collect()
}

// ANCHOR: gpt
/// The bench's GPT (vocabulary `V`, context `T`, width `D`, `H` heads, MLP `F`, `L` blocks)
/// with the compiled training step: on an NCCL group the step's CUDA graph holds the
/// averaging, each bucket all-reduced while the static backward runs.
fn train_gpt<
    const V: usize,
    const T: usize,
    const D: usize,
    const H: usize,
    const F: usize,
    const L: usize,
>(
    pg: ProcessGroup,
    dev: Device,
    steps: usize,
) -> rtx::Result<f64> {
    let rank = pg.rank();
    let mut model = Gpt::<V, T, D, H, F, L, f32>::init(&Device::Cpu, rank as u64);
    model.move_to(dev);
    model.track_gradients();
    let mut ddp = Ddp::new(model, pg)?;
    let mut opt = ddp.optimizer(AdamW::new(1e-3));
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let mut sampler = DistributedSampler::for_group(GPT_ITEMS, ddp.process_group()).seed(42);
    let stream = token_stream(GPT_ITEMS * T + 1, V);
    let pos: Tensor<(Const<T>,), i64> = Tensor::from_vec((0..T as i64).collect(), (Const,), dev);
    for epoch in 0..EPOCHS {
        sampler.set_epoch(epoch);
        let mut losses = Vec::new();
        for windows in sampler.indices().chunks(GPT_BATCH).take(steps) {
            // Window `w` is tokens `w T .. w T + T`; each target is the token after.
            let (mut ids, mut next) = (Vec::new(), Vec::new());
            for &w in windows {
                ids.extend_from_slice(&stream[w * T..][..T]);
                next.extend_from_slice(&stream[w * T + 1..][..T]);
            }
            let n = ids.len();
            let ids: Tensor<(usize,), i64> = Tensor::from_vec(ids, (n,), dev);
            let next: Tensor<(usize,), i64> = Tensor::from_vec(next, (n,), dev);
            let loss = step.run(ddp.module_mut(), &mut opt, (ids, pos.clone()), &next)?;
            losses.push(loss.item() as f64);
        }
        report(ddp.process_group(), epoch, &losses)?;
    }
    agree(ddp.process_group(), checksum(ddp.module()))
}
// ANCHOR_END: gpt

// ANCHOR: agree
/// Checks that every rank holds the same parameters (their checksums' bits agree).
fn agree(pg: &ProcessGroup, sum: f64) -> rtx::Result<f64> {
    let mine: Tensor<Rank1<1>, f64> = Tensor::from_array([sum], pg_device(pg));
    let all = pg.all_gather(&mine)?;
    let ok = all.iter().all(|t| t.to_vec()[0].to_bits() == sum.to_bits());
    println!(
        "rank {}: parameter checksum {sum:.12}; ranks agree: {ok}",
        pg.rank()
    );
    if !ok {
        return Err(rtx::Error::Dist {
            rank: Some(pg.rank()),
            msg: "the ranks' parameters differ after training".into(),
        });
    }
    Ok(sum)
}
// ANCHOR_END: agree

fn main() -> rtx::Result<()> {
    let o = options();
    // ANCHOR: setup
    // Under rtx-run or torchrun the environment names this rank; alone, a group of one. On
    // GPUs each rank takes GPU LOCAL_RANK and the group communicates through NCCL there.
    let local_rank = Env::from_env().map_or(0, |e| e.local_rank);
    let (dev, backend) = match o.cuda {
        true => (Device::Cuda(local_rank), Backend::Nccl(local_rank)),
        false => (Device::Cpu, Backend::Tcp),
    };
    let options = match std::env::var("RANK") {
        Ok(_) => InitOptions::from_env()?,
        Err(_) => InitOptions::new(0, 1, "127.0.0.1", 0),
    };
    let pg = dist::init_with(options.backend(backend))?;
    // ANCHOR_END: setup
    match (o.gpt, o.cuda) {
        // The bench step's size on a GPU; a small one on the CPU.
        (true, true) => train_gpt::<8192, 256, 512, 8, 2048, 6>(pg, dev, o.steps)?,
        (true, false) => train_gpt::<64, 16, 32, 2, 64, 2>(pg, dev, o.steps)?,
        (false, _) => train_mlp(pg, dev, o.steps)?,
    };
    Ok(())
}
