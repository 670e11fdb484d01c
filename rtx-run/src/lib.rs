//! `rtx-run`, the launcher of rtx's distributed training: rtx's counterpart of `torchrun`.
//!
//! ```text
//! rtx-run --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]
//!         [--grace-seconds S] [--prefix-output] -- PROGRAM ARGS...
//! ```
//!
//! For example `rtx-run --nproc-per-node 2 -- cargo run --release --example ddp` trains on two
//! GPUs of one machine. On several nodes, run it once per node with the same `--nnodes`,
//! `--master-addr` and `--master-port` and each node's own `--node-rank`. torchrun's spellings
//! (`--nproc_per_node`, `--node_rank`, ...) are accepted too.
//!
//! # What a rank sees
//!
//! rtx-run starts `N` processes of `PROGRAM` with torchrun's environment, which
//! `rtx::dist`'s rendezvous reads:
//!
//! | variable | value |
//! |---|---|
//! | `RANK` | `node_rank * N + LOCAL_RANK`, the rank in the whole job |
//! | `WORLD_SIZE` | `N * M`, ranks in the whole job |
//! | `LOCAL_RANK` | `0..N`, the rank on this node (the GPU to use) |
//! | `LOCAL_WORLD_SIZE` | `N` |
//! | `GROUP_RANK` | the node rank `R` |
//! | `MASTER_ADDR` | `A`, default `127.0.0.1` |
//! | `MASTER_PORT` | `P`; on one node a free port by default, on several nodes required |
//!
//! # Failures and signals
//!
//! When a rank exits with a non-zero code or is killed by a signal, rtx-run says which
//! (`rtx-run: rank 2 exited with code 3`), sends SIGTERM to the other ranks, SIGKILL to those
//! still running after `--grace-seconds` (default 5), and exits with the failing rank's code,
//! or 128 + N for a rank killed by signal N. When every rank exits 0, so does rtx-run.
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to rtx-run are forwarded to every rank, which then
//! get the same grace period; rtx-run exits with the first failing rank's code, or 128 + the
//! signal it received when every rank exited 0. A signal that was ignored when rtx-run
//! started (SIGHUP under `nohup`) stays ignored, by rtx-run and by the ranks. A program that
//! cannot be started is named in the error, and rtx-run exits 127 (not found) or 126 (any
//! other reason).
//!
//! Each rank leads its own session and process group, so signals reach the processes a rank
//! starts as well (`cargo run` and the example it runs), and what a rank leaves running in its
//! group when it exits is SIGKILLed. No rank outlives rtx-run: every way
//! out kills and reaps the ranks still running, and a rank is SIGKILLed by the kernel when
//! rtx-run itself is killed. `--prefix-output` puts `[rank N] ` before each line a rank prints.
//!
//! rtx-run is for Linux only: it relies on `prctl(PR_SET_PDEATHSIG)` and `sigtimedwait`.

#[cfg(not(target_os = "linux"))]
compile_error!("rtx-run supports Linux only: it uses prctl(PR_SET_PDEATHSIG) and sigtimedwait");

pub mod cli;
pub mod output;
pub mod signals;
pub mod supervise;

pub use cli::{Args, Config};
pub use supervise::run;
