//! Timing shared by the training-step benches (on GPU 0 unless told): a per-step median over blocks of
//! consecutive steps, host clock after a device synchronize, as the PyTorch scripts beside
//! them measure.

use rtx_backends::cuda;
use std::time::Instant;

/// Waits for GPU 0, panicking with the driver's message if it failed.
pub fn sync() {
    sync_on(0);
}

/// Waits for GPU `gpu`, panicking with the driver's message if it failed.
pub fn sync_on(gpu: usize) {
    cuda::synchronize(gpu).unwrap_or_else(|e| panic!("{e}"));
}

/// Per-step milliseconds of `f` on GPU 0: `warmup` steps, then the median over `blocks` blocks
/// of `steps` consecutive steps.
pub fn per_step_ms(warmup: usize, blocks: usize, steps: usize, f: impl FnMut()) -> f64 {
    per_step_ms_on(0, warmup, blocks, steps, f).0
}

/// [`per_step_ms`] on GPU `gpu`, with every block's per-step time beside the median.
pub fn per_step_ms_on(
    gpu: usize,
    warmup: usize,
    blocks: usize,
    steps: usize,
    mut f: impl FnMut(),
) -> (f64, Vec<f64>) {
    for _ in 0..warmup {
        f();
    }
    sync_on(gpu);
    let all: Vec<f64> = (0..blocks)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..steps {
                f();
            }
            sync_on(gpu);
            t.elapsed().as_secs_f64() * 1e3 / steps as f64
        })
        .collect();
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    (sorted[sorted.len() / 2], all)
}
