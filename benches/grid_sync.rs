//! What `grid_sync()` costs on a GPU: a `#[kernel]` that passes each thread's value to the
//! thread a block ahead `rounds` times, two `grid_sync`s a round, launched cooperatively on
//! one block of 512 threads a multiprocessor (as the Llama decoding block is), timed at two
//! round counts; the difference over the extra barriers is one barrier's time. The result is
//! first checked against the host's (each value ends as the one `rounds` blocks ahead, doubled
//! each round).
//!
//! Each figure is the median of `--reps` launches (default 50) timed with CUDA events after 5
//! warm-up launches. Build with `tools/gpu-build --bench grid_sync`, run as
//! `.gpu/bin/grid_sync [--reps 50]`; without a GPU it prints a notice and exits.

use rtx::kernel::{self, Arg, LaunchConfig};
use rtx::prelude::*;
use rtx_backends::cuda::{self, Event};
use std::result::Result;

/// `rounds` times over: `a[i] = 2 a[(i + block_dim_x()) % n]`, a grid barrier before the read
/// and one before the write.
#[rtx::kernel]
fn pass_along<T: Float>(x: &[T], a: &mut [T], b: &mut [T], rounds: usize) {
    let n = grid_dim_x() * block_dim_x();
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    a[i] = x[i];
    let mut r = 0;
    while r < rounds {
        grid_sync();
        b[i] = 2.0 * a[(i + block_dim_x()) % n];
        grid_sync();
        a[i] = b[i];
        r += 1;
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Median milliseconds of `f` over `reps` runs after 5 warm-up runs, by CUDA events.
fn median_ms(reps: usize, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    for _ in 0..5 {
        f()?;
    }
    cuda::synchronize(0).map_err(err)?;
    let (start, end) = (Event::new(0).map_err(err)?, Event::new(0).map_err(err)?);
    let mut ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        start.record().map_err(err)?;
        f()?;
        end.record().map_err(err)?;
        end.synchronize().map_err(err)?;
        ms.push(f64::from(start.elapsed_ms(&end).map_err(err)?));
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

fn run(reps: usize) -> Result<(), String> {
    let info = cuda::gpu_info(0).map_err(err)?;
    let (blocks, threads) = (info.multiprocessors, 512usize);
    let n = blocks * threads;
    let dev = Device::Cuda(0);
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 - 500.0).collect();
    let x: Tensor<(usize,), f32> = Tensor::from_vec(host.clone(), (n,), dev);
    let mut a: Tensor<(usize,), f32> = Tensor::zeros((n,), dev);
    let mut b: Tensor<(usize,), f32> = Tensor::zeros((n,), dev);
    let launch = |rounds: usize,
                  a: &mut Tensor<(usize,), f32>,
                  b: &mut Tensor<(usize,), f32>|
     -> Result<(), String> {
        // SAFETY: thread `i < n` reads `x[i]` and `a[(i + threads) % n]` and writes `a[i]`
        // and `b[i]`, all of `n` elements.
        unsafe {
            kernel::launch(
                pass_along::Op,
                LaunchConfig::new(blocks as u32, threads as u32),
                &mut [
                    Arg::input(&x),
                    Arg::output(a),
                    Arg::output(b),
                    Arg::usize(rounds),
                ],
            )
        }
        .map_err(err)?;
        Ok(())
    };
    launch(3, &mut a, &mut b)?;
    let want: Vec<f32> = (0..n).map(|i| host[(i + 3 * threads) % n] * 8.0).collect();
    if a.to_vec() != want {
        return Err("pass_along: wrong values after 3 rounds".into());
    }
    let (few, many) = (1usize, 101usize);
    let t_few = median_ms(reps, || launch(few, &mut a, &mut b))?;
    let t_many = median_ms(reps, || launch(many, &mut a, &mut b))?;
    let per = (t_many - t_few) * 1e3 / (2 * (many - few)) as f64;
    println!(
        "grid_sync on {} ({blocks} blocks of {threads}): {few} round {:.1} us, {many} rounds {:.1} us, \
         {per:.2} us a barrier",
        info.name,
        t_few * 1e3,
        t_many * 1e3
    );
    Ok(())
}

fn main() {
    let reps = std::env::args()
        .skip_while(|a| a != "--reps")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    if !cuda::is_available() {
        println!("grid_sync: skipped: no CUDA device");
        return;
    }
    if let Err(e) = run(reps) {
        eprintln!("grid_sync: {e}");
        std::process::exit(1);
    }
}
