//! The equivalence run's training loop, shared by every model: the same global batches, each
//! rank training on its round-robin share, a rank made to die for the fault check, and rank 0's
//! result file.
//!
//! Invariant: for any world size `W` dividing the global batch `G`, step `s` trains on the same
//! `G` items: the `s`-th block of `G` positions in the epoch's seeded order. Rank `r` takes
//! positions `r, r + W, ...` of it, which is exactly the `s`-th chunk of `G / W` of its
//! `DistributedSampler` share (the sampler deals the order out round-robin), so the ranks'
//! shares are disjoint and together are the block. With the loss a mean over the rank's rows
//! and DDP averaging the gradients over the ranks, every step's update is the mean over the
//! `G` items, as on one device; only the order of the float sums differs.

use rtx::data::DistributedSampler;
use rtx::dist::{Backend, Ddp, DdpOptimizer, Env, InitOptions, ProcessGroup};
use rtx::io::Checkpoint;
use rtx::nn::{TensorKind, Visitor};
use rtx::optim::OptimState;
use rtx::prelude::*;
use rtx::{Gradients, Result};
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What one equivalence run trains: identical on every rank, and between the two runs
/// compared, except for the world size.
#[derive(Clone, Debug)]
pub struct Config {
    /// Optimizer steps.
    pub steps: usize,
    /// Items per step over all ranks together.
    pub global_batch: usize,
    /// Global batches in the data set (one epoch); later epochs reshuffle it.
    pub batches_per_epoch: usize,
    /// The data set's, the shuffle's and rank 0's initialization seed.
    pub seed: u64,
    /// The optimizer family.
    pub optim: OptimKind,
    /// A rank to make die, for the fault check.
    pub fault: Option<Fault>,
}

/// Which optimizer trains: the benchmark's, or plain SGD. Adam divides each update by the
/// gradient's running scale, so it hides a gradient scaled wrongly (summed over the ranks
/// instead of averaged) and magnifies rounding where a gradient is near zero; SGD shows the
/// first and does not magnify the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimKind {
    /// Adam at 1e-3 for the MLP, AdamW at 3e-4 for the GPT (benches/ddp_step's).
    Adam,
    /// SGD at 0.05 with momentum 0.9.
    Sgd,
}

impl OptimKind {
    /// The flag's and the result file's name.
    pub fn name(self) -> &'static str {
        match self {
            OptimKind::Adam => "adam",
            OptimKind::Sgd => "sgd",
        }
    }
}

/// One of the optimizers a run may use, as one type, so each model's step is compiled once.
pub enum Optim {
    /// The MLP's benchmark optimizer.
    Adam(Adam),
    /// The GPT's benchmark optimizer.
    AdamW(AdamW),
    /// The optimizer that shows a wrongly scaled gradient.
    Sgd(Sgd),
}

impl Optim {
    /// SGD at 0.05 with momentum 0.9 for `Sgd`; `bench` otherwise.
    pub fn new(kind: OptimKind, bench: Optim) -> Optim {
        match kind {
            OptimKind::Adam => bench,
            OptimKind::Sgd => Optim::Sgd(Sgd::new(0.05).momentum(0.9)),
        }
    }
}

/// Calls `$f` on whichever optimizer `$o` holds.
macro_rules! each {
    ($o:expr, $x:ident => $f:expr) => {
        match $o {
            Optim::Adam($x) => $f,
            Optim::AdamW($x) => $f,
            Optim::Sgd($x) => $f,
        }
    };
}

impl Optimizer for Optim {
    fn try_step(&mut self, model: &mut impl Module, grads: &Gradients) -> Result<()> {
        each!(self, o => o.try_step(model, grads))
    }

    fn lr(&self) -> f64 {
        each!(self, o => o.lr())
    }

    fn set_lr(&mut self, lr: f64) {
        each!(self, o => o.set_lr(lr))
    }

    fn state_dict(&self) -> OptimState {
        each!(self, o => o.state_dict())
    }

    fn try_load_state(&mut self, state: OptimState) -> Result<()> {
        each!(self, o => o.try_load_state(state))
    }
}

impl Config {
    /// Items in the data set: whole global batches, so no rank ever gets padding.
    pub fn items(&self) -> usize {
        self.global_batch * self.batches_per_epoch
    }
}

/// How the failing rank of a fault check ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Death {
    /// SIGKILL on itself, as the kernel's OOM killer ends a process: no unwinding, no output.
    Kill,
    /// `std::process::abort` (SIGABRT).
    Abort,
    /// `std::process::exit(3)`: a clean exit with a failing code.
    Exit,
}

impl Death {
    /// The flag's value: `kill`, `abort` or `exit`.
    pub fn parse(s: &str) -> Option<Death> {
        match s {
            "kill" => Some(Death::Kill),
            "abort" => Some(Death::Abort),
            "exit" => Some(Death::Exit),
            _ => None,
        }
    }

    /// What it does, for the message the rank prints before.
    fn describe(self) -> &'static str {
        match self {
            Death::Kill => "kills itself with SIGKILL",
            Death::Abort => "aborts (SIGABRT)",
            Death::Exit => "exits with code 3",
        }
    }

    fn happen(self) -> ! {
        match self {
            Death::Kill => {
                // SAFETY: a plain system call on this process.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
                unreachable!("SIGKILL cannot be caught")
            }
            Death::Abort => std::process::abort(),
            Death::Exit => std::process::exit(3),
        }
    }
}

/// The fault check: rank `rank` dies after `after` steps, while the others go on into the next
/// step's collectives (or, with `stall_others`, block there for good, as ranks waiting in an
/// NCCL collective for a dead peer may: then only the launcher can end them).
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// The rank that dies.
    pub rank: usize,
    /// Steps it completes first.
    pub after: usize,
    /// How it dies.
    pub death: Death,
    /// Whether the other ranks block after the same step.
    pub stall_others: bool,
}

impl Fault {
    /// Called by every rank after `done` steps.
    fn check(&self, rank: usize, done: usize) {
        if done != self.after {
            return;
        }
        if rank == self.rank {
            // The driver times the launcher's exit from this line's clock.
            say(&format!(
                "ddp_check: rank {rank} {} after step {done} at unix time {:.6}",
                self.death.describe(),
                unix_now()
            ));
            self.death.happen();
        }
        if self.stall_others {
            say(&format!(
                "ddp_check: rank {rank} stalls after step {done}, as if in a collective"
            ));
            loop {
                std::thread::park();
            }
        }
    }
}

/// Prints `line` on stderr in one write, so that the ranks' lines, which share the launcher's
/// stderr, never interleave (`eprintln!` writes its pieces one by one).
fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Seconds since the Unix epoch, a clock the driver's process shares.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// This rank's process group and device: TCP on the CPU, or NCCL on GPU `LOCAL_RANK`; a group
/// of one when no launcher set the environment.
pub fn group(cuda: bool) -> Result<(ProcessGroup, Device)> {
    let options = match std::env::var("RANK") {
        Ok(_) => InitOptions::from_env()?,
        Err(_) => InitOptions::new(0, 1, "127.0.0.1", 0),
    };
    let local = Env::from_env().map_or(0, |e| e.local_rank);
    let (backend, dev) = match cuda {
        true => (Backend::Nccl(local), Device::Cuda(local)),
        false => (Backend::Tcp, Device::Cpu),
    };
    Ok((rtx::dist::init_with(options.backend(backend))?, dev))
}

/// A finished run, on every rank.
pub struct Trained<M> {
    /// The trained model (the same on every rank when `ranks_agree`).
    pub model: M,
    /// Ranks in the run.
    pub world_size: usize,
    /// The process group's backend: `tcp` or `nccl`.
    pub backend: &'static str,
    /// Each step's loss over the global batch: the mean of the ranks' losses (equal shares).
    pub losses: Vec<f64>,
    /// Whether every rank ended with the same parameters, bit for bit.
    pub ranks_agree: bool,
    /// Wall time from wrapping the model to the last step.
    pub seconds: f64,
}

/// Trains `model` (each rank's own initialization; DDP broadcasts rank 0's) with `opt` for
/// `cfg.steps` steps. `step` runs one training step on the items it is given (this rank's
/// share of the step's global batch) and returns this rank's loss.
pub fn train<M: Module>(
    pg: ProcessGroup,
    dev: Device,
    cfg: &Config,
    model: M,
    opt: Optim,
    mut step: impl FnMut(&mut M, &mut DdpOptimizer<Optim>, &[usize]) -> Result<f32>,
) -> Result<Trained<M>> {
    let (rank, world) = (pg.rank(), pg.world_size());
    if !cfg.global_batch.is_multiple_of(world) || cfg.global_batch == 0 {
        return Err(rtx::Error::BadArgument {
            op: "--global-batch",
            msg: format!(
                "the global batch {} does not split into {world} equal shares: pick a multiple \
                 of the world size",
                cfg.global_batch
            ),
        });
    }
    let started = Instant::now();
    let per_rank = cfg.global_batch / world;
    let mut ddp = Ddp::new(model, pg)?;
    let mut opt = ddp.optimizer(opt);
    let mut sampler = DistributedSampler::for_group(cfg.items(), ddp.process_group())
        .seed(cfg.seed)
        .drop_last(true);
    let mut share = Vec::new();
    let mut losses = Vec::with_capacity(cfg.steps);
    for s in 0..cfg.steps {
        let (epoch, k) = (s / cfg.batches_per_epoch, s % cfg.batches_per_epoch);
        if k == 0 {
            sampler.set_epoch(epoch as u64);
            share = sampler.indices();
        }
        let items = &share[k * per_rank..(k + 1) * per_rank];
        losses.push(step(ddp.module_mut(), &mut opt, items)? as f64);
        if let Some(f) = &cfg.fault {
            f.check(rank, s + 1);
        }
    }
    let pg = ddp.process_group();
    let losses = mean_over_ranks(pg, dev, &losses)?;
    let ranks_agree = agree(pg, dev, ddp.module())?;
    let backend = pg.backend_name();
    Ok(Trained {
        model: ddp.into_inner(),
        world_size: world,
        backend,
        losses,
        ranks_agree,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Each step's loss averaged over the ranks, summed in rank order in f64.
fn mean_over_ranks(pg: &ProcessGroup, dev: Device, mine: &[f64]) -> Result<Vec<f64>> {
    // An NCCL group takes only tensors on its GPU.
    let t: Tensor<(usize,), f64> = Tensor::from_vec(mine.to_vec(), (mine.len(),), dev);
    let all = pg.all_gather(&t)?;
    let mut sum = vec![0.0; mine.len()];
    for r in &all {
        for (s, x) in sum.iter_mut().zip(r.to_vec()) {
            *s += x;
        }
    }
    Ok(sum.iter().map(|s| s / all.len() as f64).collect())
}

/// Whether every rank holds the same parameters: each parameter's bits, hashed in order.
fn agree<M: Module>(pg: &ProcessGroup, dev: Device, m: &M) -> Result<bool> {
    struct Hash(u64);
    impl Visitor for Hash {
        fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, _: TensorKind) {
            for x in t.to_vec() {
                // FNV-1a over each value's f64 bits: any differing bit changes it.
                self.0 = (self.0 ^ x.to_f64().to_bits()).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    let mut h = Hash(0xcbf2_9ce4_8422_2325);
    m.visit("", &mut h);
    let mine = [h.0 as i64];
    let all = pg.all_gather(&Tensor::<Rank1<1>, i64>::from_array(mine, dev))?;
    Ok(all.iter().all(|t| t.to_vec() == mine))
}

/// What a run was, written beside its parameters so that a comparison can check that the two
/// runs differ only in the world size.
pub struct Meta<'a> {
    /// `mlp` or `gpt-f32`.
    pub model: &'a str,
    /// `full` or `small`.
    pub size: &'a str,
    /// `cpu` or `cuda`.
    pub device: &'a str,
}

/// Writes rank 0's result to `path`, atomically: the parameters under `model.`, the losses as
/// `losses` (f64), and the run's settings as metadata.
pub fn save<M: Module>(path: &Path, trained: &Trained<M>, cfg: &Config, meta: &Meta) -> Result<()> {
    let mut ck = Checkpoint::new();
    ck.add_model("model", &trained.model)?;
    let n = trained.losses.len();
    let losses: Tensor<(usize,), f64> = Tensor::from_vec(trained.losses.clone(), (n,), Device::Cpu);
    ck.add_tensor("losses", &losses)?;
    for (k, v) in [
        ("model", meta.model.to_string()),
        ("size", meta.size.to_string()),
        ("device", meta.device.to_string()),
        ("backend", trained.backend.to_string()),
        ("world_size", trained.world_size.to_string()),
        ("steps", cfg.steps.to_string()),
        ("global_batch", cfg.global_batch.to_string()),
        ("batches_per_epoch", cfg.batches_per_epoch.to_string()),
        ("seed", cfg.seed.to_string()),
        ("optim", cfg.optim.name().to_string()),
        ("ranks_agree", trained.ranks_agree.to_string()),
    ] {
        ck.set_metadata(k, v);
    }
    ck.save(path)
}
