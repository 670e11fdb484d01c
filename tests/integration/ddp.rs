//! `rtx::dist::Ddp` with ranks as processes (launched by `dist.rs`'s helper, which re-runs
//! this binary as each rank): every rank trains its disjoint share of each global batch and
//! checks its parameters against single-process training on the whole batch, computed in the
//! same process. f64 throughout, tolerance 1e-12 relative: the ranks' gradients are the same
//! sums as the single process's, only grouped differently, so they differ by rounding alone.

use crate::dist::{Outcome, launch};
use rtx::Gradients;
use rtx::compile::TrainStep;
use rtx::dist::{self, Ddp, DdpOptions};
use rtx::nn::{TensorKind, Visitor};
use rtx::prelude::*;

type X = Tensor<(Dyn<'B'>, Const<4>), f64>;
type Y = Tensor<(Dyn<'B'>, Const<2>), f64>;

#[model]
struct Mlp {
    fc1: Linear<4, 8, f64>,
    fc2: Linear<8, 8, f64>,
    fc3: Linear<8, 2, f64>,
}

#[model]
impl Mlp {
    fn forward(&self, x: &X) -> Y {
        let h = self.fc1.forward(x);
        let h = h.tanh();
        let h = self.fc2.forward(&h);
        let h = h.tanh();
        self.fc3.forward(&h)
    }
}

/// Rows in each global batch: divisible by 2 and 4 ranks.
const GLOBAL: usize = 8;
const STEPS: u64 = 5;
const TOL: f64 = 1e-12;

/// Step `step`'s global batch, the same on every rank.
fn batch(step: u64) -> (X, Y) {
    let x: X = Tensor::randn((Dyn(GLOBAL), Const), 100 + step, Device::Cpu);
    let y: Y = Tensor::randn((Dyn(GLOBAL), Const), 200 + step, Device::Cpu);
    (x, y)
}

/// Rows `rank * n .. (rank + 1) * n` of `t` (`n` rows of `w` columns).
fn shard<const W: usize>(
    t: &Tensor<(Dyn<'B'>, Const<W>), f64>,
    rank: usize,
    world: usize,
) -> Tensor<(Dyn<'B'>, Const<W>), f64> {
    let n = GLOBAL / world;
    let v = t.to_vec()[rank * n * W..(rank + 1) * n * W].to_vec();
    Tensor::from_vec(v, (Dyn(n), Const), Device::Cpu)
}

fn mse(y: &Y, t: &Y) -> Tensor<(), f64> {
    let d = y - t;
    (&d * &d).mean_all()
}

fn model(seed: u64) -> Mlp {
    let mut m = Mlp::init(&Device::Cpu, seed);
    m.track_gradients();
    m
}

/// Every parameter's values, in registration order.
fn flat(m: &Mlp) -> Vec<f64> {
    struct All(Vec<f64>);
    impl Visitor for All {
        fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, _: TensorKind) {
            self.0.extend(t.to_vec().iter().map(|x| x.to_f64()));
        }
    }
    let mut a = All(Vec::new());
    m.visit("", &mut a);
    a.0
}

fn close(what: &str, got: &[f64], want: &[f64]) -> rtx::Result<()> {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if (g - w).abs() > TOL * (1.0 + w.abs()) {
            return Err(rtx::Error::BadArgument {
                op: "ddp test",
                msg: format!("{what}: element {i}: {g} against the single process's {w}"),
            });
        }
    }
    Ok(())
}

/// Single-process training on the whole batches from rank 0's initialization.
fn reference(opt: &mut impl Optimizer) -> Vec<f64> {
    let mut m = model(0);
    for step in 0..STEPS {
        let (x, y) = batch(step);
        let grads = mse(&m.forward(&x), &y).backward();
        opt.step(&mut m, &grads);
    }
    flat(&m)
}

/// Tape training under DDP with `cap`-byte buckets, each rank initialized with its own seed.
fn train_tape(
    pg: std::sync::Arc<dist::ProcessGroup>,
    opt: &mut impl Optimizer,
    cap: usize,
) -> rtx::Result<(Vec<f64>, usize, usize)> {
    let (rank, world) = (pg.rank(), pg.world_size());
    let options = DdpOptions::default().bucket_cap_bytes(cap);
    let mut ddp = Ddp::with_options(model(rank as u64), pg, options)?;
    close(
        "parameters after the broadcast",
        &flat(ddp.module()),
        &flat(&model(0)),
    )?;
    let buckets = ddp.buckets().len();
    let mut overlapped = usize::MAX;
    for step in 0..STEPS {
        let (x, y) = batch(step);
        let loss = mse(
            &ddp.module().forward(&shard(&x, rank, world)),
            &shard(&y, rank, world),
        );
        let grads = ddp.backward(&loss)?;
        overlapped = overlapped.min(ddp.overlapped_buckets());
        opt.try_step(ddp.module_mut(), &grads)?;
    }
    Ok((flat(ddp.module()), buckets, overlapped))
}

/// Tape training with SGD and Adam, one bucket and one per parameter, against the single
/// process.
fn train() -> rtx::Result<()> {
    let pg = std::sync::Arc::new(dist::init()?);
    for small in [false, true] {
        // 64 bytes hold no weight of this model: every parameter gets a bucket of its own.
        let cap = if small {
            64
        } else {
            DdpOptions::default().bucket_cap
        };
        let (got, buckets, overlapped) = train_tape(pg.clone(), &mut Sgd::new(0.1), cap)?;
        close(
            &format!("SGD, {buckets} buckets"),
            &got,
            &reference(&mut Sgd::new(0.1)),
        )?;
        let (got, _, _) = train_tape(pg.clone(), &mut Adam::new(0.01), cap)?;
        close(
            &format!("Adam, {buckets} buckets"),
            &got,
            &reference(&mut Adam::new(0.01)),
        )?;
        let want = if small { 6 } else { 1 };
        assert_eq!(buckets, want, "bucket count with a cap of {cap} bytes");
        // With a bucket per parameter, the last layer's go out while the first's gradients are
        // still being computed.
        if small {
            assert!(
                overlapped >= 2,
                "{overlapped} of 6 buckets overlapped the backward"
            );
        }
    }
    Ok(())
}

/// Two micro-batches, the first under `no_sync`: the synced gradients equal the single
/// process's sum of the two global micro-batches' gradients.
fn no_sync() -> rtx::Result<()> {
    let pg = dist::init()?;
    let (rank, world) = (pg.rank(), pg.world_size());
    let mut ddp = Ddp::new(model(rank as u64 + 7), pg)?;
    let reference = model(7);
    let mut want = Gradients::new();
    for step in 0..2 {
        let (x, y) = batch(step);
        let g = mse(&reference.forward(&x), &y).backward();
        want.add(&reference.fc1.weight, g.get(&reference.fc1.weight).unwrap());
        want.add(&reference.fc3.weight, g.get(&reference.fc3.weight).unwrap());
    }
    let micro = |ddp: &mut Ddp<Mlp>, step| -> rtx::Result<Gradients> {
        let (x, y) = batch(step);
        let out = ddp.module().forward(&shard(&x, rank, world));
        ddp.backward(&mse(&out, &shard(&y, rank, world)))
    };
    let local = ddp.no_sync(|ddp| micro(ddp, 0))?;
    let got = micro(&mut ddp, 1)?;
    let check = |name: &str, g: Vec<f64>, want: Vec<f64>, local: Vec<f64>| {
        // Inside no_sync nothing was averaged: the local gradient is not the global one.
        assert_ne!(local, g, "{name}");
        close(name, &g, &want)
    };
    let m = ddp.module();
    let get = |g: &Gradients, p| -> Vec<f64> { g.get(p).unwrap().to_vec() };
    check(
        "fc1.weight",
        get(&got, &m.fc1.weight),
        get(&want, &reference.fc1.weight),
        get(&local, &m.fc1.weight),
    )?;
    let get = |g: &Gradients, p| -> Vec<f64> { g.get(p).unwrap().to_vec() };
    check(
        "fc3.weight",
        get(&got, &m.fc3.weight),
        get(&want, &reference.fc3.weight),
        get(&local, &m.fc3.weight),
    )?;
    Ok(())
}

/// A layer the loss never uses: every rank fails naming its parameters.
fn unused() -> rtx::Result<()> {
    let pg = dist::init()?;
    let rank = pg.rank();
    let mut layers = [
        Linear::<4, 2, f64>::new(Device::Cpu, 0),
        Linear::new(Device::Cpu, 1),
    ];
    layers.track_gradients();
    let mut ddp = Ddp::new(layers, pg)?;
    let (x, y) = batch(0);
    let loss = mse(
        &ddp.module()[0].forward(&shard(&x, rank, 2)),
        &shard(&y, rank, 2),
    );
    ddp.backward(&loss).map(drop)
}

/// The compiled training step with `Ddp::optimizer`, against the single process's compiled
/// step.
fn compiled() -> rtx::Result<()> {
    let pg = dist::init()?;
    let (rank, world) = (pg.rank(), pg.world_size());
    let loss = |y: &Y, t: &Y| {
        let (l, back) = rtx::compile::loss::mse_loss(y, t);
        (l, move |g: &Tensor<(), f64>| {
            back(g, [true, false]).0.unwrap()
        })
    };
    let mut one = model(0);
    let mut opt = Adam::new(0.01);
    let mut step = TrainStep::new(loss);
    for s in 0..STEPS {
        let (x, y) = batch(s);
        step.run(&mut one, &mut opt, (x,), &y)?;
    }
    let mut ddp = Ddp::new(model(rank as u64), pg)?;
    let mut opt = ddp.optimizer(Adam::new(0.01));
    let mut step = TrainStep::new(loss);
    for s in 0..STEPS {
        let (x, y) = batch(s);
        let (x, y) = (shard(&x, rank, world), shard(&y, rank, world));
        step.run(ddp.module_mut(), &mut opt, (x,), &y)?;
    }
    close("compiled step", &flat(ddp.module()), &flat(&one))
}

/// Runs DDP scenario `name` as one rank (called by `dist.rs`'s child).
pub(crate) fn scenario(name: &str) -> rtx::Result<()> {
    match name {
        "ddp_train" => train(),
        "ddp_no_sync" => no_sync(),
        "ddp_unused" => unused(),
        "ddp_compiled" => compiled(),
        "ddp_equivalence" => crate::ddp_check::rank(),
        other => panic!("unknown DDP scenario {other}"),
    }
}

fn all_ok(out: &Outcome, world: usize) {
    for rank in 0..world {
        assert_eq!(
            out.report(rank),
            "ok",
            "rank {rank}; log:\n{}",
            out.logs[rank]
        );
    }
}

#[test]
fn ddp_training_equals_one_process_with_sgd_and_adam_on_2_and_4_ranks() {
    for world in [2, 4] {
        all_ok(
            &launch(&format!("ddp_train{world}"), world, "ddp_train", None, &[]),
            world,
        );
    }
}

#[test]
fn no_sync_accumulates_and_the_next_backward_averages_the_sum() {
    all_ok(&launch("ddp_no_sync", 2, "ddp_no_sync", None, &[]), 2);
}

#[test]
fn the_compiled_step_averages_through_the_ddp_optimizer() {
    all_ok(&launch("ddp_compiled", 2, "ddp_compiled", None, &[]), 2);
}

#[test]
fn a_parameter_without_gradient_is_named_on_every_rank() {
    let out = launch("ddp_unused", 2, "ddp_unused", None, &[]);
    for rank in 0..2 {
        let report = out.report(rank);
        assert!(
            report.starts_with(&format!("dist Some({rank})")),
            "{report}"
        );
        for name in ["`1.weight` (on 2 of 2 ranks)", "`1.bias` (on 2 of 2 ranks)"] {
            assert!(
                report.contains(name),
                "rank {rank} does not name {name}: {report}"
            );
        }
        assert!(!report.contains("`0.weight`"), "{report}");
    }
}

#[test]
fn buckets_follow_reverse_registration_with_a_small_first_bucket() {
    // Weights of 2 MiB (512² f64) and biases of 4 KiB.
    let bucket_names = |cap: usize| {
        let pg = dist::init_with(dist::InitOptions::new(0, 1, "127.0.0.1", 0)).unwrap();
        let mut layers: [Linear<512, 512, f64>; 3] =
            std::array::from_fn(|i| Linear::new(Device::Cpu, i as u64));
        layers.track_gradients();
        let options = DdpOptions::default().bucket_cap_bytes(cap);
        Ddp::with_options(layers, pg, options).unwrap().buckets()
    };
    let names = |v: &[&[&str]]| -> Vec<Vec<String>> {
        v.iter()
            .map(|b| b.iter().map(|s| s.to_string()).collect())
            .collect()
    };
    // The first bucket stops at 1 MiB (PyTorch's first bucket), the next holds up to 25 MiB.
    assert_eq!(
        bucket_names(DdpOptions::default().bucket_cap),
        names(&[
            &["2.bias"],
            &["2.weight", "1.bias", "1.weight", "0.bias", "0.weight"]
        ])
    );
    assert_eq!(
        bucket_names(3 << 20),
        names(&[
            &["2.bias"],
            &["2.weight", "1.bias"],
            &["1.weight", "0.bias"],
            &["0.weight"]
        ])
    );
}

/// `examples/ddp.rs` (the GPT through the compiled step, on the CPU over TCP) under the
/// launcher, as the book runs it: `rtx-run --nproc-per-node 2 -- examples/ddp --steps 8`. Both
/// binaries are the ones `cargo test` builds beside this one (target/<profile>/rtx-run and
/// examples/ddp); a run that built only this test binary skips with a notice.
#[test]
fn the_ddp_example_trains_the_gpt_on_two_ranks_under_rtx_run() {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/integration-<hash>
    let profile = exe.parent().and_then(|d| d.parent()).unwrap();
    let launcher = profile.join("rtx-run");
    let example = profile.join("examples").join("ddp");
    if !launcher.exists() || !example.exists() {
        println!(
            "skipped: {} or {} is not built (cargo test --workspace builds both; or run \
             cargo build -p rtx-run and cargo build --example ddp)",
            launcher.display(),
            example.display()
        );
        return;
    }
    let out = std::process::Command::new(&launcher)
        .args(["--nproc-per-node", "2", "--"])
        .arg(&example)
        .args(["--steps", "8"])
        .env_remove("RTX_DEVICE")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the example failed:\n{text}");
    for rank in 0..2 {
        assert!(
            text.contains(&format!("rank {rank}: parameter checksum"))
                && text.contains("ranks agree: true"),
            "rank {rank} did not finish in agreement:\n{text}"
        );
    }
    // Rank 0's mean over the ranks, first and last epoch: training lowers it.
    let means: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("rank 0/2 epoch"))
        .filter_map(|l| {
            l.rsplit("mean over ranks ")
                .next()?
                .trim_end_matches(')')
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(means.len(), 3, "three epochs:\n{text}");
    assert!(
        means[2] < means[0],
        "the loss did not fall: {means:?}\n{text}"
    );
}
