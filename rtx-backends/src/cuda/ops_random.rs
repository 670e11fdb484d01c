//! The GPU side of the random entry points: uniform, normal, Bernoulli and integer draws from
//! the Philox stream of a seed, one launch each, with the same per-element formulas as the
//! CPU backend (see `storage/random.rs` for the mapping to each element type).
//!
//! Invariant: element `i` is draw `i` of the seed's stream whatever the launch shape, so a
//! seed gives the CPU's tensor: bitwise for uniform, Bernoulli and integer draws, within a
//! few ulps for normal draws.

use super::kernels::{Arg, kernel_entry, launch_entry};
use super::launch::{DevicePtr, LaunchConfig};
use super::storage::CudaStorage;
use crate::Result;
use rtx_kernels::kernel::{KernelSource, Variant};
use rtx_kernels::{DType, Element, kernels};

/// What to draw, with the kernel arguments after the element count and seed.
pub(crate) enum Draw {
    /// `low + u * span`, rounded once, pulled below `high` (the bound as the element type
    /// holds it) to `below`.
    Uniform {
        low: f64,
        span: f64,
        high: f64,
        below: f64,
    },
    /// `mean + std * z`.
    Normal { mean: f64, std: f64 },
    /// 1 when a raw word is below `threshold`.
    Bernoulli { threshold: u64 },
    /// `low + (w * range) >> 64` of a 64-bit word `w` (`range` 0 is 2^64).
    Int { low: i64, range: u64 },
}

/// `n` draws of the stream of `seed` into fresh storage on GPU `ordinal`.
pub(crate) fn random<E: Element>(
    ordinal: usize,
    draw: Draw,
    n: usize,
    seed: u64,
) -> Result<CudaStorage<E>> {
    let (src, per) = kernel_of(&draw, E::DTYPE);
    let entry = kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)?;
    let out = CudaStorage::<E>::uninit(ordinal, n)?;
    if n == 0 {
        return Ok(out);
    }
    let args = draw_args(out.device_ptr(), n, seed, &draw, E::DTYPE);
    // One thread per Philox block; grid-stride loops cover the rest.
    let config = LaunchConfig::for_elements(n.div_ceil(per).min(1 << 22), 256);
    // SAFETY: the kernel writes elements 0..n of `out`, which holds `n`.
    unsafe { launch_entry(ordinal, src, entry, config, &args)? };
    Ok(out)
}

/// The kernel of a draw for `dtype`, and how many draws one Philox block (one thread step)
/// gives.
fn kernel_of(draw: &Draw, dtype: DType) -> (&'static KernelSource, usize) {
    let wide = dtype == DType::F64;
    match draw {
        Draw::Uniform { .. } => (&kernels::random_uniform::KERNEL, if wide { 2 } else { 4 }),
        Draw::Normal { .. } => (&kernels::random_normal::KERNEL, if wide { 2 } else { 4 }),
        Draw::Bernoulli { .. } => (&kernels::random_bernoulli::KERNEL, 4),
        Draw::Int { .. } => (&kernels::random_int::KERNEL, 2),
    }
}

/// The kernel arguments of a draw of `n` elements into `out`.
fn draw_args(out: DevicePtr, n: usize, seed: u64, draw: &Draw, dtype: DType) -> Vec<Arg> {
    let wide = Arg::U32((dtype == DType::F64) as u32);
    let mut args = vec![Arg::Ptr(out), Arg::U64(n as u64), Arg::U64(seed)];
    match *draw {
        Draw::Uniform {
            low,
            span,
            high,
            below,
        } => args.extend([
            wide,
            Arg::F64(low),
            Arg::F64(span),
            Arg::F64(high),
            Arg::Acc(below),
        ]),
        Draw::Normal { mean, std } => args.extend([wide, Arg::F64(mean), Arg::F64(std)]),
        Draw::Bernoulli { threshold } => args.push(Arg::U64(threshold)),
        Draw::Int { low, range } => args.extend([Arg::I64(low), Arg::U64(range)]),
    }
    args
}

#[cfg(test)]
mod tests {
    use super::super::kernels::marshal;
    use super::*;

    #[test]
    fn draw_arguments_fit_every_entry() {
        let draws = [
            Draw::Uniform {
                low: -1.0,
                span: 2.0,
                high: 1.0,
                below: 0.99,
            },
            Draw::Normal {
                mean: 0.0,
                std: 1.0,
            },
            Draw::Bernoulli { threshold: 7 },
            Draw::Int { low: -3, range: 6 },
        ];
        for draw in &draws {
            let (src, _) = kernel_of(draw, DType::F32);
            for e in src.entries {
                let args = draw_args(DevicePtr(512), 10, 42, draw, e.dtype);
                if let Err(err) = marshal(e, e.dtype, &args) {
                    panic!("{}: {err}", e.symbol);
                }
            }
        }
        // Uniform and normal draws are float-only; Bernoulli has every type, integers all but
        // bool.
        assert_eq!(kernels::random_uniform::KERNEL.entries.len(), 4);
        assert_eq!(kernels::random_bernoulli::KERNEL.entries.len(), 8);
        assert_eq!(kernels::random_int::KERNEL.entries.len(), 7);
    }
}
