//! Timing shared by the training-step benches on GPU 0: a per-step median over blocks of
//! consecutive steps, host clock after a device synchronize, as the PyTorch scripts beside
//! them measure.

use rtx_backends::cuda;
use std::time::Instant;

/// Waits for GPU 0, panicking with the driver's message if it failed.
pub fn sync() {
    cuda::synchronize(0).unwrap_or_else(|e| panic!("{e}"));
}

/// Per-step milliseconds of `f`: `warmup` steps, then the median over `blocks` blocks of
/// `steps` consecutive steps.
pub fn per_step_ms(warmup: usize, blocks: usize, steps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    sync();
    let mut times: Vec<f64> = (0..blocks)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..steps {
                f();
            }
            sync();
            t.elapsed().as_secs_f64() * 1e3 / steps as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
