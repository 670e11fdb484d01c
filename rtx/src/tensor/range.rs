//! Ranges and identity matrices: `arange`, `arange_step`, `linspace` and `eye`.
//!
//! The length is a dimension (`Const<N>`, `usize` or `Dyn<'B'>`), so it lands in the type like
//! any other size. These tensors are small and cheap to compute, so they are built on the host
//! and moved to the device, as `from_vec` does. Float values are computed in f64 and rounded
//! once to the element type; integer values are exact, and a range that would overflow the
//! element type is an error rather than a silent wrap.

use super::Tensor;
use crate::error::{Result, bail, ok};
use crate::shape::Dim;
use rtx_backends::{Device, Storage};
use rtx_kernels::{Element, Float, Num};

impl<D: Dim, E: Element> Tensor<(D,), E> {
    /// The values `0, 1, ..., len - 1`.
    ///
    /// # Panics
    /// When `len - 1` does not fit an integer `E` (see [`Tensor::try_arange`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<4>, i64> = Tensor::arange(Const, Device::Cpu);
    /// assert_eq!(t.to_vec(), vec![0, 1, 2, 3]);
    /// let f: Tensor<(usize,)> = Tensor::arange(3, Device::Cpu);
    /// assert_eq!(f.to_vec(), vec![0.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn arange(len: D, device: Device) -> Self
    where
        E: Num,
    {
        ok(Self::try_arange(len, device))
    }

    /// [`Tensor::arange`], returning an error that names the length.
    pub fn try_arange(len: D, device: Device) -> Result<Self>
    where
        E: Num,
    {
        Self::build_arange("arange", E::ZERO, E::ONE, len, device)
    }

    /// The values `start + i * step` for `i` in `0..len` (floats computed in f64, then rounded).
    ///
    /// # Panics
    /// When the last value does not fit an integer `E` (see [`Tensor::try_arange_step`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<4>, i32> = Tensor::arange_step(10, -3, Const, Device::Cpu);
    /// assert_eq!(t.to_vec(), vec![10, 7, 4, 1]);
    /// let f: Tensor<Rank1<3>> = Tensor::arange_step(0.5, 0.25, Const, Device::Cpu);
    /// assert_eq!(f.to_vec(), vec![0.5, 0.75, 1.0]);
    /// ```
    #[track_caller]
    pub fn arange_step(start: E, step: E, len: D, device: Device) -> Self
    where
        E: Num,
    {
        ok(Self::try_arange_step(start, step, len, device))
    }

    /// [`Tensor::arange_step`], returning an error that names the range.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let e = Tensor::<(usize,), u8>::try_arange_step(200, 20, 5, Device::Cpu);
    /// assert_eq!(
    ///     e.err().unwrap().to_string(),
    ///     "arange_step: 200 + 4 * 20 = 280 does not fit uint8"
    /// );
    /// ```
    pub fn try_arange_step(start: E, step: E, len: D, device: Device) -> Result<Self>
    where
        E: Num,
    {
        Self::build_arange("arange_step", start, step, len, device)
    }

    fn build_arange(op: &'static str, start: E, step: E, len: D, device: Device) -> Result<Self>
    where
        E: Num,
    {
        let n = len.size();
        let data: Vec<E> = if E::DTYPE.is_float() {
            let (a, d) = (start.to_f64(), step.to_f64());
            (0..n).map(|i| E::from_f64(a + i as f64 * d)).collect()
        } else {
            let (a, d) = (start.to_i64() as i128, step.to_i64() as i128);
            // The values are monotonic, so the ends decide whether all fit.
            if n > 0 {
                let last = a + (n as i128 - 1) * d;
                let fits = i64::try_from(last).is_ok_and(|v| E::from_i64(v).to_i64() == v);
                if !fits {
                    bail!(
                        op,
                        "{a} + {} * {d} = {last} does not fit {}",
                        n - 1,
                        E::DTYPE
                    );
                }
            }
            (0..n)
                .map(|i| E::from_i64((a + i as i128 * d) as i64))
                .collect()
        };
        Ok(Tensor::from_storage(
            Storage::from_vec(data, device)?,
            (len,),
        ))
    }
}

impl<D: Dim, E: Element> Tensor<(D,), E> {
    /// `len` evenly spaced values from `start` to `end`, both included.
    ///
    /// Computed as PyTorch does, but in f64 and rounded once to `E`: with
    /// `step = (end - start) / (len - 1)`, the first half is `start + i * step` and the second
    /// half `end - (len - 1 - i) * step`, so the ends are exact and the values are symmetric.
    /// PyTorch computes in the element type itself, so an f32 value may differ from its in the
    /// last bit. A length of 1 gives `[start]`.
    ///
    /// # Panics
    /// When the device fails (see [`Tensor::try_linspace`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<5>> = Tensor::linspace(0.0, 1.0, Const, Device::Cpu);
    /// assert_eq!(t.to_vec(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// ```
    #[track_caller]
    pub fn linspace(start: f64, end: f64, len: D, device: Device) -> Self
    where
        E: Float,
    {
        ok(Self::try_linspace(start, end, len, device))
    }

    /// [`Tensor::linspace`], returning device errors.
    pub fn try_linspace(start: f64, end: f64, len: D, device: Device) -> Result<Self>
    where
        E: Float,
    {
        let n = len.size();
        let step = if n > 1 {
            (end - start) / (n - 1) as f64
        } else {
            0.0
        };
        let half = n / 2;
        let data: Vec<E> = (0..n)
            .map(|i| {
                let v = if i < half {
                    start + step * i as f64
                } else {
                    end - step * (n - 1 - i) as f64
                };
                E::from_f64(if n == 1 { start } else { v })
            })
            .collect();
        Ok(Tensor::from_storage(
            Storage::from_vec(data, device)?,
            (len,),
        ))
    }
}

impl<D: Dim, E: Element> Tensor<(D, D), E> {
    /// The `n x n` identity: ones (or `true`) on the diagonal, zeros (`false`) elsewhere.
    ///
    /// # Panics
    /// When the device fails (see [`Tensor::try_eye`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let i: Tensor<Rank2<2, 2>> = Tensor::eye(Const, Device::Cpu);
    /// assert_eq!(i.to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
    /// let m: Tensor<(usize, usize), bool> = Tensor::eye(2, Device::Cpu);
    /// assert_eq!(m.to_vec(), vec![true, false, false, true]);
    /// ```
    #[track_caller]
    pub fn eye(n: D, device: Device) -> Self {
        ok(Self::try_eye(n, device))
    }

    /// [`Tensor::eye`], returning device errors.
    pub fn try_eye(n: D, device: Device) -> Result<Self> {
        let size = n.size();
        let mut data = vec![E::from_i64(0); size * size];
        for i in 0..size {
            data[i * size + i] = E::from_i64(1);
        }
        Ok(Tensor::from_storage(
            Storage::from_vec(data, device)?,
            (n, n),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn linspace_is_symmetric_and_exact_at_the_ends() {
        let t: Tensor<(usize,), f64> = Tensor::linspace(-1.0, 0.3, 7, Device::Cpu);
        let v = t.to_vec();
        assert_eq!((v[0], v[6]), (-1.0, 0.3));
        let one: Tensor<(usize,)> = Tensor::linspace(2.0, 5.0, 1, Device::Cpu);
        assert_eq!(one.to_vec(), vec![2.0]);
        let none: Tensor<(usize,)> = Tensor::linspace(2.0, 5.0, 0, Device::Cpu);
        assert!(none.to_vec().is_empty());
    }

    #[test]
    fn integer_ranges_refuse_to_overflow() {
        let e = Tensor::<(usize,), i32>::try_arange(1 << 33, Device::Cpu);
        assert_eq!(
            e.err().map(|e| e.to_string()),
            Some("arange: 0 + 8589934591 * 1 = 8589934591 does not fit int32".into())
        );
        let t: Tensor<(usize,), u8> = Tensor::arange(256, Device::Cpu);
        assert_eq!(t.to_vec()[255], 255);
    }
}
