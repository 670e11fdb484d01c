//! Random tensors: uniform, normal, Bernoulli and integer draws from a seed.
//!
//! Every random tensor is a slice of the counter-based Philox 4x32-10 stream of its seed
//! ([`Philox`]): element `i` (in row-major order) is draw `i`, so a seed gives bitwise the same
//! tensor on any number of threads, and the same raw words on every device. f32 tensors use the
//! stream's f32 draws, f64 its f64 draws, and f16/bf16 the f32 draws rounded once (a uniform
//! that rounds up to `high` becomes the largest value below it, so `[low, high)` holds in every
//! type). Uniform, Bernoulli and integer draws are exact integer arithmetic and agree bitwise
//! across devices; normal draws go through `ln`, `sin` and `cos`, and agree within a few ulps.
//! There is no global generator: pass a seed, and derive new seeds for new tensors.

use super::Tensor;
use crate::error::{Result, bail, ok};
use crate::shape::Shape;
use rtx_backends::{Device, Storage};
use rtx_kernels::op::RandomOp;
use rtx_kernels::{Element, Float, Num};

pub use rtx_kernels::Philox;

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Uniform draws in [0, 1).
    ///
    /// # Panics
    /// When the device fails (see [`Tensor::try_rand`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank2<2, 3>> = Tensor::rand((Const, Const), 42, Device::Cpu);
    /// assert!(t.to_vec().iter().all(|&x| (0.0..1.0).contains(&x)));
    /// assert_eq!(t.to_vec()[4], Philox::new(42).uniform_f32(4));
    /// ```
    #[track_caller]
    pub fn rand(shape: S, seed: u64, device: Device) -> Self
    where
        E: Float,
    {
        ok(Self::try_rand(shape, seed, device))
    }

    /// [`Tensor::rand`], returning device errors.
    pub fn try_rand(shape: S, seed: u64, device: Device) -> Result<Self>
    where
        E: Float,
    {
        Self::try_rand_uniform(shape, 0.0, 1.0, seed, device)
    }

    /// Uniform draws in `[low, high)`: `low + u * (high - low)` computed in f64 from the
    /// stream's uniform `u` and rounded to `E`, never reaching `high`.
    ///
    /// # Panics
    /// When the bounds are not finite or `[low, high)` holds no value of `E` (see
    /// [`Tensor::try_rand_uniform`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<(usize,), bf16> = Tensor::rand_uniform((1000,), -1.0, 1.0, 7, Device::Cpu);
    /// assert!(t.to_vec().iter().all(|x| x.to_f64() >= -1.0 && x.to_f64() < 1.0));
    /// ```
    #[track_caller]
    pub fn rand_uniform(shape: S, low: f64, high: f64, seed: u64, device: Device) -> Self
    where
        E: Float,
    {
        ok(Self::try_rand_uniform(shape, low, high, seed, device))
    }

    /// [`Tensor::rand_uniform`], returning an error that names the bounds.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let e = Tensor::<(usize,), f32>::try_rand_uniform((3,), 1.0, 0.0, 0, Device::Cpu);
    /// assert_eq!(e.err().unwrap().to_string(), "rand_uniform: low 1 must be below high 0");
    /// ```
    pub fn try_rand_uniform(
        shape: S,
        low: f64,
        high: f64,
        seed: u64,
        device: Device,
    ) -> Result<Self>
    where
        E: Float,
    {
        // The body needs the element count only: a function of `E` alone, so a model with
        // many parameter shapes compiles it once (see ARCHITECTURE.md, "Build time").
        let storage = uniform_storage::<E>(shape.numel(), low, high, seed, device)?;
        Ok(Tensor::from_storage(storage, shape))
    }

    /// Standard normal draws (mean 0, std 1), by Box-Muller on pairs of uniforms.
    ///
    /// # Panics
    /// When the device fails (see [`Tensor::try_randn`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<(usize,), f64> = Tensor::randn((4,), 1, Device::Cpu);
    /// assert_eq!(t.to_vec()[3], Philox::new(1).normal_f64(3));
    /// ```
    #[track_caller]
    pub fn randn(shape: S, seed: u64, device: Device) -> Self
    where
        E: Float,
    {
        ok(Self::try_randn(shape, seed, device))
    }

    /// [`Tensor::randn`], returning device errors.
    pub fn try_randn(shape: S, seed: u64, device: Device) -> Result<Self>
    where
        E: Float,
    {
        Self::try_randn_with(shape, 0.0, 1.0, seed, device)
    }

    /// Normal draws with the given mean and standard deviation: `mean + std * z` computed in
    /// f64 from the stream's standard normal `z` and rounded to `E`.
    ///
    /// # Panics
    /// When `mean` is not finite or `std` is negative or not finite (see
    /// [`Tensor::try_randn_with`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<3>> = Tensor::randn_with((Const,), 10.0, 0.0, 5, Device::Cpu);
    /// assert_eq!(t.to_vec(), vec![10.0; 3]);
    /// ```
    #[track_caller]
    pub fn randn_with(shape: S, mean: f64, std: f64, seed: u64, device: Device) -> Self
    where
        E: Float,
    {
        ok(Self::try_randn_with(shape, mean, std, seed, device))
    }

    /// [`Tensor::randn_with`], returning an error that names the bad parameter.
    pub fn try_randn_with(shape: S, mean: f64, std: f64, seed: u64, device: Device) -> Result<Self>
    where
        E: Float,
    {
        if !mean.is_finite() {
            bail!("randn_with", "mean must be finite, got {mean}");
        }
        if !(std.is_finite() && std >= 0.0) {
            bail!(
                "randn_with",
                "std must be finite and non-negative, got {std}"
            );
        }
        let storage = Storage::random(RandomOp::Normal, shape.numel(), seed, [mean, std], device)?;
        Ok(Tensor::from_storage(storage, shape))
    }

    /// Bernoulli draws: 1 with probability `p`, else 0. Element `i` is 1 exactly when raw word
    /// `i` of the stream is below `round(p * 2^32)`, so `p` 0 and 1 are exact.
    ///
    /// # Panics
    /// When `p` is outside [0, 1] (see [`Tensor::try_bernoulli`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<(usize,)> = Tensor::bernoulli((10_000,), 0.25, 3, Device::Cpu);
    /// let ones = t.to_vec().iter().filter(|&&x| x == 1.0).count();
    /// assert!((2300..2700).contains(&ones));
    /// ```
    #[track_caller]
    pub fn bernoulli(shape: S, p: f64, seed: u64, device: Device) -> Self
    where
        E: Float,
    {
        ok(Self::try_bernoulli(shape, p, seed, device))
    }

    /// [`Tensor::bernoulli`], returning an error that names `p`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let e = Tensor::<(usize,), f32>::try_bernoulli((3,), 1.5, 0, Device::Cpu);
    /// assert_eq!(e.err().unwrap().to_string(), "bernoulli: p must be in [0, 1], got 1.5");
    /// ```
    pub fn try_bernoulli(shape: S, p: f64, seed: u64, device: Device) -> Result<Self>
    where
        E: Float,
    {
        bernoulli_storage("bernoulli", shape, p, seed, device)
    }
}

impl<S: Shape> Tensor<S, bool> {
    /// A Bernoulli mask: `true` with probability `p`. Same draws as [`Tensor::bernoulli`], so
    /// with one seed the mask is exactly where that tensor is 1.
    ///
    /// # Panics
    /// When `p` is outside [0, 1] (see [`Tensor::try_bernoulli_mask`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let keep: Tensor<Rank2<4, 8>, bool> = Tensor::bernoulli_mask((Const, Const), 0.9, 11, Device::Cpu);
    /// let ones: Tensor<Rank2<4, 8>> = Tensor::bernoulli((Const, Const), 0.9, 11, Device::Cpu);
    /// assert_eq!(keep.to_vec(), ones.cast::<bool>().to_vec());
    /// ```
    #[track_caller]
    pub fn bernoulli_mask(shape: S, p: f64, seed: u64, device: Device) -> Self {
        ok(Self::try_bernoulli_mask(shape, p, seed, device))
    }

    /// [`Tensor::bernoulli_mask`], returning an error that names `p`.
    pub fn try_bernoulli_mask(shape: S, p: f64, seed: u64, device: Device) -> Result<Self> {
        bernoulli_storage("bernoulli_mask", shape, p, seed, device)
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Integers uniform in `[low, high)`, as PyTorch's `randint` (float types get integral
    /// values). Element `i` takes the 64-bit word made of raw words `2i` and `2i + 1` and is
    /// `low + (word * (high - low)) >> 64` (multiply-shift): deterministic and exact on every
    /// device, with a bias below `(high - low) / 2^64` (under 2^-32 for any 32-bit range).
    ///
    /// # Panics
    /// When `low >= high` or a bound does not fit `E` (see [`Tensor::try_randint`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<(usize,), i64> = Tensor::randint((1000,), -3, 3, 9, Device::Cpu);
    /// assert!(t.to_vec().iter().all(|x| (-3..3).contains(x)));
    /// ```
    #[track_caller]
    pub fn randint(shape: S, low: i64, high: i64, seed: u64, device: Device) -> Self
    where
        E: Num,
    {
        ok(Self::try_randint(shape, low, high, seed, device))
    }

    /// [`Tensor::randint`], returning an error that names the bounds.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let e = Tensor::<(usize,), u8>::try_randint((3,), 0, 300, 0, Device::Cpu);
    /// assert_eq!(e.err().unwrap().to_string(), "randint: [0, 300) does not fit uint8");
    /// ```
    pub fn try_randint(shape: S, low: i64, high: i64, seed: u64, device: Device) -> Result<Self>
    where
        E: Num,
    {
        if low >= high {
            bail!("randint", "low {low} must be below high {high}");
        }
        let fits = |v: i64| E::from_i64(v).to_i64() == v;
        if !fits(low) || !fits(high - 1) {
            bail!("randint", "[{low}, {high}) does not fit {}", E::DTYPE);
        }
        let storage = Storage::randint(shape.numel(), seed, low, high, device)?;
        Ok(Tensor::from_storage(storage, shape))
    }
}

/// Checks `p` and draws the Bernoulli storage shared by `bernoulli` and `bernoulli_mask`.
fn bernoulli_storage<S: Shape, E: Element>(
    op: &'static str,
    shape: S,
    p: f64,
    seed: u64,
    device: Device,
) -> Result<Tensor<S, E>> {
    if !(0.0..=1.0).contains(&p) {
        bail!(op, "p must be in [0, 1], got {p}");
    }
    let storage = Storage::random(RandomOp::Bernoulli, shape.numel(), seed, [p, 0.0], device)?;
    Ok(Tensor::from_storage(storage, shape))
}

/// `n` uniform draws in `[low, high)` of the float type `E`, the bounds checked.
fn uniform_storage<E: Float>(
    n: usize,
    low: f64,
    high: f64,
    seed: u64,
    device: Device,
) -> Result<Storage<E>> {
    const OP: &str = "rand_uniform";
    if !low.is_finite() || !high.is_finite() || !(high - low).is_finite() {
        bail!(
            OP,
            "low {low} and high {high} must be finite and less than f64::MAX apart"
        );
    }
    if low >= high {
        bail!(OP, "low {low} must be below high {high}");
    }
    let (lo_e, hi_e) = (E::from_f64(low), E::from_f64(high));
    if lo_e >= hi_e {
        bail!(
            OP,
            "[{low}, {high}) holds no {} value (the bounds round to {} and {})",
            E::DTYPE,
            lo_e.to_f64(),
            hi_e.to_f64()
        );
    }
    Ok(Storage::random(
        RandomOp::Uniform,
        n,
        seed,
        [low, high],
        device,
    )?)
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn error_messages_name_the_arguments() {
        let msg = |r: Result<Tensor<(usize,), f16>>| r.err().map(|e| e.to_string());
        assert_eq!(
            msg(Tensor::try_rand_uniform((2,), 1.0, 1.0001, 0, Device::Cpu)),
            Some(
                "rand_uniform: [1, 1.0001) holds no float16 value (the bounds round to 1 and 1)"
                    .into()
            )
        );
        assert_eq!(
            msg(Tensor::try_rand_uniform(
                (2,),
                f64::NEG_INFINITY,
                0.0,
                0,
                Device::Cpu
            )),
            Some(
                "rand_uniform: low -inf and high 0 must be finite and less than f64::MAX apart"
                    .into()
            )
        );
        assert_eq!(
            msg(Tensor::try_randn_with((2,), 0.0, -1.0, 0, Device::Cpu)),
            Some("randn_with: std must be finite and non-negative, got -1".into())
        );
        assert_eq!(
            msg(Tensor::try_bernoulli((2,), f64::NAN, 0, Device::Cpu)),
            Some("bernoulli: p must be in [0, 1], got NaN".into())
        );
        let e = Tensor::<(usize,), i32>::try_randint((2,), 4, 4, 0, Device::Cpu);
        assert_eq!(
            e.err().map(|e| e.to_string()),
            Some("randint: low 4 must be below high 4".into())
        );
        let e = Tensor::<(usize,), i32>::try_randint((2,), 0, 1 << 40, 0, Device::Cpu);
        assert_eq!(
            e.err().map(|e| e.to_string()),
            Some("randint: [0, 1099511627776) does not fit int32".into())
        );
    }

    #[test]
    fn randint_covers_the_whole_i64_range() {
        let t: Tensor<(usize,), i64> = Tensor::randint((64,), i64::MIN, i64::MAX, 0, Device::Cpu);
        let v = t.to_vec();
        assert!(v.iter().any(|&x| x < 0) && v.iter().any(|&x| x > 0));
        assert!(v.iter().all(|&x| x < i64::MAX));
    }
}
