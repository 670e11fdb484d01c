//! Backend entry points for random tensors: `n` draws of the Philox stream of a seed, element
//! `i` being draw `i`, so a seed gives the same tensor on any thread count and any device.
//!
//! Per element type: f64 uses the stream's f64 draws; f32 uses its f32 draws; f16 and bf16 use
//! the f32 draws, transformed in f64 and rounded once to the 16-bit type. A uniform draw is
//! `low + u * (high - low)` computed in f64 and rounded to `E`; when that rounding lands on
//! `high` as `E` represents it (easy in bf16, whose 8-bit mantissa rounds every f32 draw above
//! 1 - 2^-9 up to 1.0, and possible in any type for wide ranges), the value becomes the largest
//! `E` below `high`, so a uniform tensor never holds its upper bound. Normal draws are
//! `mean + std * z` computed in f64 and rounded once.
//!
//! On a GPU each call is one launch of a Philox kernel (`cuda::ops_random`) computing the same
//! formulas: uniform, Bernoulli and integer tensors are bitwise the CPU's for the same seed,
//! normal ones within a few ulps (the GPU's `logf`, `sinf` and `cosf` are not the CPU's).

use super::Storage;
use super::erased::AnyStorage;
use crate::cpu::random as cpu;
use crate::cuda::ops_random::{self as gpu, Draw};
use crate::{BackendError, Device, Result};
use half::{bf16, f16};
use rtx_kernels::op::RandomOp;
use rtx_kernels::{DType, Element, Op, Philox};

impl<E: Element> Storage<E> {
    /// `n` draws of the distribution `op` from the Philox stream of `seed`.
    ///
    /// `params` are `[low, high]` for [`RandomOp::Uniform`] (float types; the caller checks
    /// `low < high` in `E` and a finite span), `[mean, std]` for [`RandomOp::Normal`] (float
    /// types) and `[p, _]` for [`RandomOp::Bernoulli`] (every type: 1 with probability `p`,
    /// else 0; `true`/`false` for bool). Other pairings are an error naming the op and dtype.
    /// A registered backend gets the CPU's draws, uploaded.
    pub fn random(
        op: RandomOp,
        n: usize,
        seed: u64,
        params: [f64; 2],
        device: Device,
    ) -> Result<Self> {
        Ok(random_any(E::DTYPE, Draws::Random(op, params), n, seed, device)?.into_typed())
    }

    /// `n` integers uniform in `[low, high)` from the Philox stream of `seed`, two raw words
    /// each, by 64-bit multiply-shift (see [`crate::cpu::random::uniform_int`] for the method
    /// and its bias, below `(high - low) / 2^64`). Any element type but bool; the caller checks
    /// `low < high` and that both bounds fit `E`. A registered backend gets the CPU's draws,
    /// uploaded.
    pub fn randint(n: usize, seed: u64, low: i64, high: i64, device: Device) -> Result<Self> {
        Ok(random_any(E::DTYPE, Draws::Int(low, high), n, seed, device)?.into_typed())
    }

    /// The body of [`Storage::random`] for one element type and a built-in device.
    fn random_body(
        op: RandomOp,
        n: usize,
        seed: u64,
        params: [f64; 2],
        device: Device,
    ) -> Result<Self> {
        if let Device::Cuda(ordinal) = device {
            let draw = match op {
                RandomOp::Uniform => {
                    unsupported_unless::<E>(op, E::DTYPE.is_float())?;
                    let [low, high] = params;
                    let high_e = E::from_f64(high).to_f64();
                    let below = E::from_f64(next_below(E::DTYPE, high_e)).to_f64();
                    Draw::Uniform {
                        low,
                        span: high - low,
                        high: high_e,
                        below,
                    }
                }
                RandomOp::Normal => {
                    unsupported_unless::<E>(op, E::DTYPE.is_float())?;
                    let [mean, std] = params;
                    Draw::Normal { mean, std }
                }
                RandomOp::Bernoulli => Draw::Bernoulli {
                    threshold: Philox::bernoulli_threshold(params[0]),
                },
            };
            return Ok(Storage::Cuda(gpu::random(ordinal, draw, n, seed)?));
        }
        let wide = E::DTYPE == DType::F64;
        let data = match op {
            RandomOp::Uniform => {
                unsupported_unless::<E>(op, E::DTYPE.is_float())?;
                let [low, high] = params;
                let span = high - low;
                let high_e = E::from_f64(high).to_f64();
                let below = E::from_f64(next_below(E::DTYPE, high_e));
                let f = move |u: f64| {
                    let r = E::from_f64(low + u * span);
                    if r.to_f64() >= high_e { below } else { r }
                };
                if wide {
                    cpu::uniform_f64(n, seed, f)
                } else {
                    cpu::uniform_f32(n, seed, move |u| f(u as f64))
                }
            }
            RandomOp::Normal => {
                unsupported_unless::<E>(op, E::DTYPE.is_float())?;
                let [mean, std] = params;
                let f = move |z: f64| E::from_f64(mean + std * z);
                if wide {
                    cpu::normal_f64(n, seed, f)
                } else {
                    cpu::normal_f32(n, seed, move |z| f(z as f64))
                }
            }
            RandomOp::Bernoulli => {
                let threshold = Philox::bernoulli_threshold(params[0]);
                cpu::bernoulli(n, seed, threshold, |b| E::from_i64(b as i64))
            }
        };
        crate::dispatch::on_cpu(device);
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
            _ => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::randint`] for one element type and a built-in device.
    fn randint_body(n: usize, seed: u64, low: i64, high: i64, device: Device) -> Result<Self> {
        unsupported_unless::<E>(RandomOp::Uniform, E::DTYPE != DType::Bool)?;
        if low >= high {
            return Err(BackendError::BadArgument {
                op: "randint",
                msg: format!("low {low} must be below high {high}"),
            });
        }
        let range = (high as i128 - low as i128) as u64;
        if let Device::Cuda(ordinal) = device {
            let draw = Draw::Int { low, range };
            return Ok(Storage::Cuda(gpu::random(ordinal, draw, n, seed)?));
        }
        let data = cpu::uniform_int(n, seed, low, range, E::from_i64);
        crate::dispatch::on_cpu(device);
        match device {
            Device::Cpu => Ok(Storage::Cpu(data)),
            _ => unreachable!("{}", super::ROUTED),
        }
    }
}

// The entry point with the element type erased: not generic, so compiled once, here (see
// `erased.rs`).

/// What a random tensor draws.
#[derive(Clone, Copy)]
enum Draws {
    /// [`Storage::random`] of the distribution and its two parameters.
    Random(RandomOp, [f64; 2]),
    /// [`Storage::randint`] in `[low, high)`.
    Int(i64, i64),
}

/// `n` draws of element type `dtype` on `device`, erased: compiled once, here. A registered
/// backend gets the CPU's draws for the same seed, uploaded (no backend draws natively, and
/// this keeps its tensors equal to the CPU's).
fn random_any(dtype: DType, d: Draws, n: usize, seed: u64, device: Device) -> Result<AnyStorage> {
    if let Device::Backend(_) = device {
        let host = random_any(dtype, d, n, seed, Device::Cpu)?;
        return super::upload(host, device);
    }
    /// The draws as `E`.
    fn run<E: Element>(d: Draws, n: usize, seed: u64, device: Device) -> Result<AnyStorage> {
        match d {
            Draws::Random(op, params) => Storage::<E>::random_body(op, n, seed, params, device),
            Draws::Int(low, high) => Storage::<E>::randint_body(n, seed, low, high, device),
        }
        .map(AnyStorage::from_typed)
    }
    match dtype {
        DType::F32 => run::<f32>(d, n, seed, device),
        DType::F64 => run::<f64>(d, n, seed, device),
        DType::F16 => run::<f16>(d, n, seed, device),
        DType::BF16 => run::<bf16>(d, n, seed, device),
        DType::I32 => run::<i32>(d, n, seed, device),
        DType::I64 => run::<i64>(d, n, seed, device),
        DType::U8 => run::<u8>(d, n, seed, device),
        DType::Bool => run::<bool>(d, n, seed, device),
    }
}

/// An error naming the op and element type unless `ok`.
fn unsupported_unless<E: Element>(op: RandomOp, ok: bool) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(BackendError::BadArgument {
            op: Op::Random(op).name(),
            msg: format!("not defined for {} tensors", E::DTYPE),
        })
    }
}

/// The largest value of `dtype` strictly below `x`, where `x` is a value of `dtype` (infinity
/// included); for integer types `x - 1`.
pub(crate) fn next_below(dtype: DType, x: f64) -> f64 {
    // IEEE formats order like sign-magnitude integers, so the neighbour below a positive value
    // is one bit pattern down, below a negative one is one up, and below either zero is the
    // smallest negative subnormal.
    fn step16(bits: u16, positive: bool, zero: bool) -> u16 {
        if zero {
            0x8001
        } else if positive {
            bits - 1
        } else {
            bits + 1
        }
    }
    match dtype {
        DType::F64 => x.next_down(),
        DType::F32 => (x as f32).next_down() as f64,
        DType::F16 => {
            let h = f16::from_f64(x);
            f16::from_bits(step16(h.to_bits(), x > 0.0, x == 0.0)).to_f64()
        }
        DType::BF16 => {
            let h = bf16::from_f64(x);
            bf16::from_bits(step16(h.to_bits(), x > 0.0, x == 0.0)).to_f64()
        }
        _ => x - 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_below_steps_one_value_down() {
        assert_eq!(next_below(DType::BF16, 1.0), 1.0 - 2f64.powi(-8));
        assert_eq!(next_below(DType::F16, 1.0), 1.0 - 2f64.powi(-11));
        assert_eq!(next_below(DType::F32, 1.0), 1.0 - 2f64.powi(-24));
        assert_eq!(next_below(DType::F64, 1.0), 1.0 - 2f64.powi(-53));
        assert_eq!(next_below(DType::F16, -1.0), -1.0 - 2f64.powi(-10));
        assert_eq!(next_below(DType::F16, 0.0), -(2f64.powi(-24)));
        assert_eq!(next_below(DType::F16, f64::INFINITY), 65504.0);
        assert_eq!(next_below(DType::BF16, f64::INFINITY), bf16::MAX.to_f64());
    }

    #[test]
    fn bf16_uniforms_never_reach_high() {
        let s = Storage::<bf16>::random(RandomOp::Uniform, 100_000, 3, [0.0, 1.0], Device::Cpu)
            .unwrap_or_else(|e| panic!("{e}"));
        let v = s.as_cpu_slice().unwrap_or_else(|| panic!("cpu storage"));
        let top = bf16::from_f64(1.0 - 2f64.powi(-8));
        assert!(v.iter().all(|&x| x < bf16::ONE));
        // About 2^-9 of the f32 draws round up to 1.0 and are pulled back to the value below.
        assert!(v.iter().filter(|&&x| x == top).count() > 100);
    }

    #[test]
    fn unsupported_pairings_name_the_op() {
        let e = Storage::<i32>::random(RandomOp::Normal, 4, 0, [0.0, 1.0], Device::Cpu);
        assert_eq!(
            e.err().map(|e| e.to_string()),
            Some("normal: not defined for int32 tensors".into())
        );
        let e = Storage::<bool>::randint(4, 0, 0, 2, Device::Cpu);
        assert_eq!(
            e.err().map(|e| e.to_string()),
            Some("uniform: not defined for bool tensors".into())
        );
    }
}
