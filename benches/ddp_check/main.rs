//! Checks of rtx's data parallelism that a benchmark's speed figures rest on (issue 24), one
//! rank per process under `rtx-run`, on the CPU (TCP) or one GPU per rank (NCCL, GPU
//! `LOCAL_RANK`); benches/ddp_multi_gpu.py runs them all and benches/README.md gives the
//! commands.
//!
//! - `train`: the equivalence run. A fixed seeded data set and global batch; with world size
//!   `W` each rank trains on its disjoint share (`G / W` items a step, `DistributedSampler`'s
//!   round-robin deal) for `--steps` steps with the compiled step, then rank 0 writes the final
//!   parameters and each step's global loss to `--out` (safetensors, atomically). `--optim`:
//!   the benchmark's Adam, or SGD (train.rs says why both). Models:
//!   `mlp` (benches/ddp_step's MLP) and `gpt-f32` (the GPT bench step in f32); `--size small`
//!   shrinks both for the CPU. A world of one is the reference: the whole global batch on one
//!   device (DDP over a group of one, whose averaging divides by one).
//! - `train --fail-rank K --fail-after M`: the fault run. Rank `K` dies after step `M`
//!   (SIGKILL by default) while the others enter the next step's collectives; with
//!   `--stall-others` they block there instead, as ranks waiting in NCCL for a dead peer may,
//!   so only the launcher can end them. The launcher must stop them and name rank `K`.
//! - `compare REFERENCE OTHER`: the verdict of two `train` results (compare.rs says what is
//!   measured and why the tolerance is what it is); exits 1 when it fails.
//!
//! Build with `tools/gpu-build --bench ddp_check --bin rtx-run -p rtx-workspace -p rtx-run`
//! (add `--bench ddp_step` for the scaling runs).

#[path = "../gpt_step/model.rs"]
mod model;

mod compare;
mod gpt;
mod mlp;
mod train;

use clap::{Args, Parser, Subcommand, ValueEnum};
use rtx::prelude::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use train::{Config, Death, Fault, Meta, OptimKind, Trained};

#[derive(Parser)]
#[command(
    name = "ddp_check",
    about = "Equivalence and fault checks of rtx's DDP"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Passed by `cargo bench`; this binary measures nothing on its own.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Subcommand)]
enum Command {
    /// One rank of an equivalence or fault run (under rtx-run, or alone as a group of one).
    Train(TrainArgs),
    /// Compares a run's result against the reference's.
    Compare(CompareArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Model {
    Mlp,
    #[value(name = "gpt-f32")]
    GptF32,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Size {
    /// benches/ddp_step's sizes: MLP 784-2048-2048-10, the GPT bench step.
    Full,
    /// For the CPU: MLP 64-128-128-10, GPT of 2 blocks of width 32 over 16 tokens.
    Small,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Opt {
    Adam,
    Sgd,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum On {
    Cpu,
    Cuda,
}

#[derive(Args)]
struct TrainArgs {
    #[arg(long, value_enum, default_value = "mlp")]
    model: Model,
    /// cpu: ranks on the CPU over TCP; cuda: rank r on GPU LOCAL_RANK over NCCL.
    #[arg(long, value_enum, default_value = "cpu")]
    device: On,
    /// [default: full on cuda, small on cpu]
    #[arg(long, value_enum)]
    size: Option<Size>,
    #[arg(long, default_value_t = 50)]
    steps: usize,
    /// Items per step over all ranks [default: mlp 512 rows (small 64), gpt-f32 32 sequences
    /// (small 16)].
    #[arg(long)]
    global_batch: Option<usize>,
    /// Global batches in the data set; later epochs reshuffle it.
    #[arg(long, default_value_t = 8)]
    batches_per_epoch: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// adam: the benchmark's (Adam 1e-3 for mlp, AdamW 3e-4 for gpt-f32); sgd: SGD 0.05 with
    /// momentum 0.9, which shows a wrongly scaled gradient that Adam hides.
    #[arg(long, value_enum, default_value = "adam")]
    optim: Opt,
    /// Where rank 0 writes the parameters and losses (safetensors).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where rank 0 writes a summary of the run (JSON).
    #[arg(long)]
    json: Option<PathBuf>,
    /// The rank that dies, for the fault check.
    #[arg(long)]
    fail_rank: Option<usize>,
    /// Steps the failing rank completes before it dies.
    #[arg(long, default_value_t = 3)]
    fail_after: usize,
    /// kill (SIGKILL), abort (SIGABRT) or exit (code 3).
    #[arg(long, default_value = "kill", value_parser = parse_death)]
    fail_how: Death,
    /// The other ranks block after the same step instead of going on.
    #[arg(long)]
    stall_others: bool,
}

#[derive(Args)]
struct CompareArgs {
    /// The reference run's result (usually one device).
    reference: PathBuf,
    /// The run held to it.
    other: PathBuf,
    /// The largest relative difference allowed [default: the model's, see compare.rs].
    #[arg(long)]
    tol: Option<f64>,
    /// Where to write the verdict (JSON).
    #[arg(long)]
    json: Option<PathBuf>,
}

fn parse_death(s: &str) -> std::result::Result<Death, String> {
    Death::parse(s).ok_or_else(|| format!("`{s}` is not one of kill, abort, exit"))
}

fn main() {
    // The error's message, not its Debug form, and a failing code for the launcher.
    if let Err(e) = run(Cli::parse()) {
        eprintln!("ddp_check: {e}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> rtx::Result<()> {
    match cli.command {
        Some(Command::Train(a)) => train_rank(a),
        Some(Command::Compare(a)) => {
            let v = compare::compare(&a.reference, &a.other, a.tol)?;
            println!("{}", v.summary());
            if let Some(path) = &a.json {
                write_json(path, &v.to_json());
            }
            if !v.pass() {
                std::process::exit(1);
            }
            Ok(())
        }
        None => {
            println!("ddp_check: nothing to do; run `ddp_check train` or `ddp_check compare`");
            Ok(())
        }
    }
}

fn write_json(path: &Path, value: &serde_json::Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

fn train_rank(a: TrainArgs) -> rtx::Result<()> {
    let cuda = a.device == On::Cuda;
    if cuda && !rtx_backends::cuda::is_available() {
        return Err(rtx::Error::BadArgument {
            op: "--device cuda",
            msg: "there is no usable CUDA GPU here".into(),
        });
    }
    let size = a
        .size
        .unwrap_or(if cuda { Size::Full } else { Size::Small });
    let global_batch = a.global_batch.unwrap_or(match (a.model, size) {
        (Model::Mlp, Size::Full) => 512,
        (Model::Mlp, Size::Small) => 64,
        (Model::GptF32, Size::Full) => 32,
        (Model::GptF32, Size::Small) => 16,
    });
    if a.steps == 0 {
        return Err(rtx::Error::BadArgument {
            op: "--steps 0",
            msg: "nothing to train or compare".into(),
        });
    }
    let (pg, dev) = train::group(cuda)?;
    if let Some(k) = a.fail_rank.filter(|&k| k >= pg.world_size()) {
        return Err(rtx::Error::BadArgument {
            op: "--fail-rank",
            msg: format!("rank {k} is not in a world of {} rank(s)", pg.world_size()),
        });
    }
    let cfg = Config {
        steps: a.steps,
        global_batch,
        batches_per_epoch: a.batches_per_epoch.max(1),
        seed: a.seed,
        optim: match a.optim {
            Opt::Adam => OptimKind::Adam,
            Opt::Sgd => OptimKind::Sgd,
        },
        fault: a.fail_rank.map(|rank| Fault {
            rank,
            after: a.fail_after,
            death: a.fail_how,
            stall_others: a.stall_others,
        }),
    };
    let rank = pg.rank();
    let meta = Meta {
        model: match a.model {
            Model::Mlp => "mlp",
            Model::GptF32 => "gpt-f32",
        },
        size: match size {
            Size::Full => "full",
            Size::Small => "small",
        },
        device: if cuda { "cuda" } else { "cpu" },
    };
    match (a.model, size) {
        (Model::Mlp, Size::Full) => report(
            &mlp::run::<784, 2048, 10>(pg, dev, &cfg)?,
            rank,
            &cfg,
            &meta,
            &a,
        ),
        (Model::Mlp, Size::Small) => report(
            &mlp::run::<64, 128, 10>(pg, dev, &cfg)?,
            rank,
            &cfg,
            &meta,
            &a,
        ),
        (Model::GptF32, Size::Full) => {
            let t = gpt::run::<8192, 256, 512, 8, 2048, 6>(pg, dev, &cfg)?;
            report(&t, rank, &cfg, &meta, &a)
        }
        (Model::GptF32, Size::Small) => {
            let t = gpt::run::<64, 16, 32, 2, 64, 2>(pg, dev, &cfg)?;
            report(&t, rank, &cfg, &meta, &a)
        }
    }
}

/// Rank 0's line, result file and summary (the other ranks have nothing to add).
fn report<M: Module>(
    t: &Trained<M>,
    rank: usize,
    cfg: &Config,
    meta: &Meta,
    a: &TrainArgs,
) -> rtx::Result<()> {
    if rank != 0 {
        return Ok(());
    }
    let (first, last) = (t.losses[0], t.losses[t.losses.len() - 1]);
    println!(
        "ddp_check: {} ({}, {}) on {} {} rank(s) over {}: {} steps of {} items ({} per rank), \
         loss {first:.5} -> {last:.5}, ranks agree: {}, {:.1} s",
        meta.model,
        meta.size,
        cfg.optim.name(),
        t.world_size,
        meta.device,
        t.backend,
        cfg.steps,
        cfg.global_batch,
        cfg.global_batch / t.world_size,
        t.ranks_agree,
        t.seconds
    );
    if let Some(path) = &a.out {
        train::save(path, t, cfg, meta)?;
    }
    if let Some(path) = &a.json {
        write_json(
            path,
            &json!({
                "model": meta.model,
                "size": meta.size,
                "device": meta.device,
                "backend": t.backend,
                "world_size": t.world_size,
                "steps": cfg.steps,
                "global_batch": cfg.global_batch,
                "optim": cfg.optim.name(),
                "losses": t.losses,
                "ranks_agree": t.ranks_agree,
                "seconds": t.seconds,
                "out": a.out,
            }),
        );
    }
    Ok(())
}
