//! Data-parallel training with `rtx::dist::Ddp`: every rank trains an MLP on its own share of
//! each epoch (`DistributedSampler`), the gradients are averaged over the ranks during the
//! backward, and at the end the ranks check that they hold the same parameters.
//!
//! Run on 2 ranks with `cargo build --release --example ddp` and then
//! `cargo run --release -p rtx-run -- --nproc-per-node 2 -- target/release/examples/ddp`;
//! run directly (`cargo run --release --example ddp`) it is a group of one.

use rtx::data::DistributedSampler;
use rtx::dist::{self, Ddp, InitOptions, ReduceOp};
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

/// Items in the synthetic data set, and rows per rank in a batch.
const ITEMS: usize = 1024;
const BATCH: usize = 32;
const EPOCHS: u64 = 5;

/// Rows `idx` of `t` (`W` columns) as a batch.
fn rows<const W: usize>(t: &[f32], idx: &[usize]) -> Tensor<(Dyn<'B'>, Const<W>)> {
    let v = idx
        .iter()
        .flat_map(|&i| t[i * W..][..W].iter().copied())
        .collect();
    Tensor::from_vec(v, (Dyn(idx.len()), Const), Device::Cpu)
}

/// The sum of every parameter, in f64: equal bits on every rank when the ranks agree.
fn checksum(m: &Mlp) -> f64 {
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

fn main() -> rtx::Result<()> {
    // ANCHOR: setup
    // Under rtx-run or torchrun the environment names this rank; alone, a group of one.
    let pg = match std::env::var("RANK") {
        Ok(_) => dist::init()?,
        Err(_) => dist::init_with(InitOptions::new(0, 1, "127.0.0.1", 0))?,
    };
    let (rank, world) = (pg.rank(), pg.world_size());
    // Each rank starts from its own seed; Ddp::new broadcasts rank 0's parameters.
    let mut model = Mlp::init(&Device::Cpu, rank as u64);
    model.track_gradients();
    let mut ddp = Ddp::new(model, pg)?;
    let mut opt = Adam::new(3e-3);
    let sampler = DistributedSampler::for_group(ITEMS, ddp.process_group()).seed(42);
    // ANCHOR_END: setup

    // The same data set on every rank: targets from a fixed random "teacher".
    let x: X = Tensor::randn((Dyn(ITEMS), Const), 1, Device::Cpu);
    let teacher: Tensor<Rank2<1, 16>> = Tensor::randn((Const, Const), 2, Device::Cpu);
    let y: Y = x.matmul(&teacher.t()).tanh();
    let (xs, ys) = (x.to_vec(), y.to_vec());

    // ANCHOR: train
    let mut sampler = sampler;
    for epoch in 0..EPOCHS {
        sampler.set_epoch(epoch);
        let mut sum = 0.0;
        let batches = sampler
            .indices()
            .chunks(BATCH)
            .map(<[usize]>::to_vec)
            .collect::<Vec<_>>();
        for idx in &batches {
            let (xb, yb) = (rows::<16>(&xs, idx), rows::<1>(&ys, idx));
            let d = &ddp.module().forward(&xb) - &yb;
            let loss = (&d * &d).mean_all();
            // The backward, with each bucket of gradients averaged over the ranks as soon as
            // it is ready.
            let grads = ddp.backward(&loss)?;
            opt.try_step(ddp.module_mut(), &grads)?;
            sum += loss.item() as f64;
        }
        let local = sum / batches.len() as f64;
        let mut global: Tensor<Rank1<1>, f64> = Tensor::from_array([local], Device::Cpu);
        ddp.process_group().all_reduce(&mut global, ReduceOp::Avg)?;
        println!(
            "rank {rank}/{world} epoch {epoch}: loss {local:.5} (mean over ranks {:.5})",
            global.to_vec()[0]
        );
    }
    // ANCHOR_END: train

    // ANCHOR: agree
    let mine: Tensor<Rank1<1>, f64> = Tensor::from_array([checksum(ddp.module())], Device::Cpu);
    let all = ddp.process_group().all_gather(&mine)?;
    let agree = all
        .iter()
        .all(|t| t.to_vec()[0].to_bits() == mine.to_vec()[0].to_bits());
    println!(
        "rank {rank}: parameter checksum {:.12}; ranks agree: {agree}",
        mine.to_vec()[0]
    );
    if !agree {
        return Err(rtx::Error::Dist {
            rank: Some(rank),
            msg: "the ranks' parameters differ after training".into(),
        });
    }
    // ANCHOR_END: agree
    Ok(())
}
