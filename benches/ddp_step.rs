//! One rank of a data-parallel training benchmark: rtx's DDP over NCCL, each rank on its own
//! GPU (`LOCAL_RANK`), started by `rtx-run --nproc-per-node N` (benches/ddp_scaling.py does,
//! beside PyTorch DDP under torchrun on the same models and batches; benches/README.md).
//!
//! Models (`--model`):
//! - `gpt`: the GPT bench step (benches/gpt_step: 6 blocks, d_model 512, 8 heads, sequence
//!   256, vocabulary 8192) at 32 sequences per rank, bf16 mixed precision with AdamW as a
//!   captured `MixedStep`. Its f32 gradients exist only after its graph, so DDP all-reduces
//!   them after the backward (on the GPU, through NCCL, no overlap).
//! - `gpt-f32`: the same model in f32 as a captured `TrainStep`, whose graph holds the
//!   all-reduces, overlapped with the static backward.
//! - `mlp`: the compiled-step MLP (784-2048-2048-10, GELU, cross-entropy, Adam) at 512 rows per
//!   rank in f32 as a captured `TrainStep`, all-reduces inside the graph.
//!
//! Every rank runs the same number of steps; rank 0 prints the per-step time (median over
//! blocks of consecutive steps, host clock after a device synchronize), the throughput of the
//! whole group and every rank's peak memory, and writes them to `--json FILE`.
//!
//! Build with `tools/gpu-build --bench ddp_step --bin rtx-run -p rtx-workspace -p rtx-run`
//! and run `.gpu/bin/rtx-run --nproc-per-node 1 -- .gpu/bin/ddp_step --model mlp`; run alone
//! it is a group of one. Without a GPU it prints why and exits successfully.

#[path = "gpt_step/model.rs"]
mod model;
// Shared with the single-GPU benches, whose GPU-0 helpers this bench does not call.
#[allow(dead_code)]
#[path = "common/step_timing.rs"]
mod step_timing;

use model::Gpt;
use rtx::compile::{MixedStep, TrainStep};
use rtx::dist::{self, Backend, Ddp, Env, InitOptions, ProcessGroup};
use rtx::prelude::*;
use rtx_backends::cuda;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Sequences per rank, their length and the vocabulary of the GPT bench step.
const SEQS: usize = 32;
const SEQ: usize = 256;
const VOCAB: usize = 8192;
/// Rows per rank of the MLP step.
const ROWS: usize = 512;

type Bench<E> = Gpt<VOCAB, SEQ, 512, 8, 2048, 6, E>;
type Tokens = Tensor<(Const<{ SEQS * SEQ }>,), i64>;

#[model]
struct Mlp<E: Float> {
    fc1: Linear<784, 2048, E>,
    fc2: Linear<2048, 2048, E>,
    fc3: Linear<2048, 10, E>,
}

#[model]
impl<E: Float> Mlp<E> {
    fn forward(
        &self,
        x: &Tensor<(Const<ROWS>, Const<784>), E>,
    ) -> Tensor<(Const<ROWS>, Const<10>), E> {
        let h = self.fc1.forward(x);
        let h = h.gelu_tanh();
        let h = self.fc2.forward(&h);
        let h = h.gelu_tanh();
        self.fc3.forward(&h)
    }
}

/// The command line.
struct Args {
    model: String,
    warmup: usize,
    blocks: usize,
    steps: usize,
    json: Option<String>,
}

fn parse() -> Args {
    let mut a = Args {
        model: "gpt".into(),
        warmup: 5,
        blocks: 10,
        steps: 10,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    let usage = |what: &str| -> ! {
        eprintln!(
            "usage: ddp_step [--model gpt|gpt-f32|mlp] [--warmup N] [--blocks N] [--steps N] \
             [--json FILE] ({what})"
        );
        std::process::exit(2)
    };
    let number = |it: &mut dyn Iterator<Item = String>, name: &str| -> usize {
        it.next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| usage(&format!("{name} takes a number")))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--model" => a.model = it.next().unwrap_or_else(|| usage("--model takes a name")),
            "--warmup" => a.warmup = number(&mut it, "--warmup"),
            "--blocks" => a.blocks = number(&mut it, "--blocks").max(1),
            "--steps" => a.steps = number(&mut it, "--steps").max(1),
            "--json" => a.json = it.next(),
            "--bench" => {}
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if !["gpt", "gpt-f32", "mlp"].contains(&a.model.as_str()) {
        usage(&format!("unknown model {}", a.model));
    }
    a
}

/// This rank's NCCL group on GPU `LOCAL_RANK` (a group of one outside a launcher).
fn group() -> rtx::Result<(ProcessGroup, usize)> {
    let options = match std::env::var("RANK") {
        Ok(_) => InitOptions::from_env()?,
        Err(_) => InitOptions::new(0, 1, "127.0.0.1", 0),
    };
    let gpu = Env::from_env().map(|e| e.local_rank).unwrap_or(0);
    Ok((dist::init_with(options.backend(Backend::Nccl(gpu)))?, gpu))
}

/// Per-step milliseconds of `step` on GPU `gpu` and each block's (as benches/ddp_scaling.py's
/// PyTorch ranks measure: the host clock after a synchronize).
fn per_step_ms(gpu: usize, a: &Args, step: impl FnMut()) -> (f64, Vec<f64>) {
    step_timing::per_step_ms_on(gpu, a.warmup, a.blocks, a.steps, step)
}

/// This rank's share of a fixed pseudo-random token stream: its ids and next-token targets.
fn tokens(rank: usize, dev: Device) -> (Tokens, Tokens) {
    let n = SEQS * SEQ;
    let stream: Vec<i64> = (0..n + 1)
        .map(|i| (((rank * n + i) as u64).wrapping_mul(2654435761) % VOCAB as u64) as i64)
        .collect();
    (
        Tensor::from_vec(stream[..n].to_vec(), (Const,), dev),
        Tensor::from_vec(stream[1..].to_vec(), (Const,), dev),
    )
}

/// The measured run of one model: per-step ms, the step times of every block, the samples
/// (sequences or rows) per rank per step, tokens per sample, parameters, and the last loss.
struct Run {
    ms: f64,
    blocks_ms: Vec<f64>,
    samples: usize,
    tokens_per_sample: usize,
    params: usize,
    loss: f32,
    overlapped: usize,
}

fn gpt_mixed(pg: Arc<ProcessGroup>, gpu: usize, a: &Args) -> rtx::Result<Run> {
    let dev = Device::Cuda(gpu);
    let rank = pg.rank();
    let (ids, next) = tokens(rank, dev);
    let pos: Tensor<(Const<SEQ>,), i64> =
        Tensor::from_vec((0..SEQ as i64).collect(), (Const,), dev);
    let mut master = Bench::<f32>::init(&Device::Cpu, 0);
    master.move_to(dev);
    master.track_gradients();
    let mut working = Bench::<bf16>::init(&Device::Cpu, 0);
    working.move_to(dev);
    working.track_gradients();
    let params = master.num_parameters();
    let mut ddp = Ddp::new(master, pg)?;
    let mut opt = ddp.optimizer(AdamW::new(3e-4));
    let mut step = MixedStep::new(rtx::compile::loss::cross_entropy);
    let mut last = None;
    let (ms, blocks_ms) = per_step_ms(gpu, a, || {
        let loss = step
            .run(
                ddp.module_mut(),
                &mut working,
                &mut opt,
                (ids.clone(), pos.clone()),
                &next,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        last = Some(loss);
    });
    Ok(Run {
        ms,
        blocks_ms,
        samples: SEQS,
        tokens_per_sample: SEQ,
        params,
        loss: last.map_or(f32::NAN, |l| l.item().to_f32()),
        overlapped: opt.overlapped_buckets(),
    })
}

fn gpt_f32(pg: Arc<ProcessGroup>, gpu: usize, a: &Args) -> rtx::Result<Run> {
    let dev = Device::Cuda(gpu);
    let (ids, next) = tokens(pg.rank(), dev);
    let pos: Tensor<(Const<SEQ>,), i64> =
        Tensor::from_vec((0..SEQ as i64).collect(), (Const,), dev);
    let mut model = Bench::<f32>::init(&Device::Cpu, 0);
    model.move_to(dev);
    model.track_gradients();
    let params = model.num_parameters();
    let mut ddp = Ddp::new(model, pg)?;
    let mut opt = ddp.optimizer(AdamW::new(3e-4));
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let mut last = None;
    let (ms, blocks_ms) = per_step_ms(gpu, a, || {
        let loss = step
            .run(
                ddp.module_mut(),
                &mut opt,
                (ids.clone(), pos.clone()),
                &next,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        last = Some(loss);
    });
    Ok(Run {
        ms,
        blocks_ms,
        samples: SEQS,
        tokens_per_sample: SEQ,
        params,
        loss: last.map_or(f32::NAN, |l| l.item()),
        overlapped: opt.overlapped_buckets(),
    })
}

fn mlp(pg: Arc<ProcessGroup>, gpu: usize, a: &Args) -> rtx::Result<Run> {
    let dev = Device::Cuda(gpu);
    let rank = pg.rank() as u64;
    let x: Tensor<(Const<ROWS>, Const<784>)> = Tensor::randn((Const, Const), 1 + rank, dev);
    let labels: Vec<i64> = (0..ROWS)
        .map(|i| ((i * 7 + rank as usize) % 10) as i64)
        .collect();
    let y: Tensor<(Const<ROWS>,), i64> = Tensor::from_vec(labels, (Const,), dev);
    let mut model = Mlp::<f32>::init(&Device::Cpu, 0);
    model.move_to(dev);
    model.track_gradients();
    let params = model.num_parameters();
    let mut ddp = Ddp::new(model, pg)?;
    let mut opt = ddp.optimizer(Adam::new(1e-3));
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let mut last = None;
    let (ms, blocks_ms) = per_step_ms(gpu, a, || {
        let loss = step
            .run(ddp.module_mut(), &mut opt, (x.clone(),), &y)
            .unwrap_or_else(|e| panic!("{e}"));
        last = Some(loss);
    });
    Ok(Run {
        ms,
        blocks_ms,
        samples: ROWS,
        tokens_per_sample: 1,
        params,
        loss: last.map_or(f32::NAN, |l| l.item()),
        overlapped: opt.overlapped_buckets(),
    })
}

fn main() -> rtx::Result<()> {
    let a = parse();
    if !cuda::is_available() {
        println!("ddp_step: no CUDA GPU here; nothing to measure");
        return Ok(());
    }
    let (pg, gpu) = group()?;
    let (rank, world) = (pg.rank(), pg.world_size());
    let dev = Device::Cuda(gpu);
    cuda::reset_peak_stats(gpu)?;
    let started = Instant::now();
    let pg = Arc::new(pg);
    let run = match a.model.as_str() {
        "gpt" => gpt_mixed(pg.clone(), gpu, &a)?,
        "gpt-f32" => gpt_f32(pg.clone(), gpu, &a)?,
        _ => mlp(pg.clone(), gpu, &a)?,
    };
    let stats = cuda::memory_stats(gpu)?;
    // Every rank's peak memory, gathered to all (rank order).
    let mine: Tensor<Rank1<2>, f64> = Tensor::from_array(
        [stats.peak_allocated as f64, stats.peak_reserved as f64],
        dev,
    );
    let all = pg.all_gather(&mine)?;
    let peaks: Vec<Vec<f64>> = all
        .iter()
        .map(|t| t.to_vec().iter().map(|b| b / (1 << 20) as f64).collect())
        .collect();
    if rank != 0 {
        return Ok(());
    }
    let samples = (run.samples * world) as f64 / (run.ms / 1e3);
    let tokens = samples * run.tokens_per_sample as f64;
    println!(
        "rtx DDP {} on {world} GPU(s): {:.3} ms per step, {samples:.0} samples/s, {tokens:.0} \
         tokens/s; {} parameters; {} buckets launched during the backward; last loss {:.4}; \
         peak MiB per rank (allocated, reserved) {peaks:?}; {:.1} s in all",
        a.model,
        run.ms,
        run.params,
        run.overlapped,
        run.loss,
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &a.json {
        let out = json!({
            "framework": "rtx",
            "mode": "ddp",
            "model": a.model,
            "world_size": world,
            "backend": pg.backend_name(),
            "ms_per_step": run.ms,
            "blocks_ms": run.blocks_ms,
            "samples_per_rank": run.samples,
            "samples_per_s": samples,
            "tokens_per_s": tokens,
            "params": run.params,
            "last_loss": run.loss,
            "overlapped_buckets": run.overlapped,
            "peak_allocated_mib": peaks.iter().map(|p| p[0]).collect::<Vec<_>>(),
            "peak_reserved_mib": peaks.iter().map(|p| p[1]).collect::<Vec<_>>(),
            "device": cuda::gpu_info(gpu).map(|i| i.name).unwrap_or_default(),
        });
        let text = serde_json::to_string_pretty(&out).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
    Ok(())
}
