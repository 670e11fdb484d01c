//! benches/ddp_check's equivalence run on the CPU: the MLP for a few steps on 2 ranks (processes,
//! launched by `dist.rs`'s helper) against the whole global batch in one process, judged by the
//! bench's own comparison, so the check benches/ddp_multi_gpu.py runs on GPUs is tested here.

// The bench's command-line pieces (the fault flags, the JSON verdict) are not used here.
#[allow(dead_code)]
#[path = "../../benches/ddp_check/compare.rs"]
mod compare;
#[allow(dead_code)]
#[path = "../../benches/ddp_check/mlp.rs"]
mod mlp;
#[allow(dead_code)]
#[path = "../../benches/ddp_check/train.rs"]
mod train;

use crate::dist::launch;
use rtx::dist::{self, InitOptions};
use std::path::{Path, PathBuf};

/// Four steps of 16 rows over two epochs of two batches, so a reshuffle is crossed; SGD, which
/// would show a gradient summed over the ranks instead of averaged.
fn config() -> train::Config {
    train::Config {
        steps: 4,
        global_batch: 16,
        batches_per_epoch: 2,
        seed: 3,
        optim: train::OptimKind::Sgd,
        fault: None,
    }
}

const META: train::Meta = train::Meta {
    model: "mlp",
    size: "small",
    device: "cpu",
};

/// Trains the small MLP on this process's group and has rank 0 write the result to `out`.
fn run(pg: dist::ProcessGroup, out: &Path) -> rtx::Result<()> {
    let rank = pg.rank();
    let trained = mlp::run::<64, 128, 10>(pg, rtx::Device::Cpu, &config())?;
    match rank {
        0 => train::save(out, &trained, &config(), &META),
        _ => Ok(()),
    }
}

/// One rank of the two-rank run (called by `dist.rs`'s child through `ddp.rs`).
pub(crate) fn rank() -> rtx::Result<()> {
    let out = PathBuf::from(std::env::var("RTX_DDP_CHECK_OUT").unwrap());
    run(dist::init()?, &out)
}

#[test]
fn two_ranks_train_the_mlp_as_one_device_does() {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ddp_check");
    std::fs::create_dir_all(&d).unwrap();
    let (one, two) = (d.join("w1.safetensors"), d.join("w2.safetensors"));
    let _ = std::fs::remove_file(&two);
    let path = two.to_str().unwrap();
    let out = launch(
        "ddp_equivalence",
        2,
        "ddp_equivalence",
        None,
        &[("RTX_DDP_CHECK_OUT", Some(path))],
    );
    for rank in 0..2 {
        assert_eq!(out.report(rank), "ok", "rank {rank}:\n{}", out.logs[rank]);
    }
    let pg = dist::init_with(InitOptions::new(0, 1, "127.0.0.1", 0)).unwrap();
    run(pg, &one).unwrap();
    let v = compare::compare(&one, &two, None).unwrap();
    println!("{}", v.summary());
    assert_eq!(v.worlds, (1, 2));
    assert!(v.pass(), "{}", v.summary());
}
