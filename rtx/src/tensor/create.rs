//! Creating tensors: constants, host data and array literals. Random tensors, ranges and
//! identity matrices live in `random.rs` and `range.rs`.

use super::Tensor;
use crate::error::{Error, Result, ok};
use crate::shape::{ArrayLiteral, ConstShape, Shape, describe_dims};
use rtx_backends::{Device, Storage};
use rtx_kernels::{Element, Num};

impl<S: Shape, E: Element> Tensor<S, E> {
    /// A tensor of `shape` with every element `value`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::full((Dyn(2), Const), 0.5, Device::Cpu);
    /// assert_eq!(t.to_vec(), vec![0.5; 6]);
    /// ```
    pub fn full(shape: S, value: E, device: Device) -> Self {
        ok(Self::try_full(shape, value, device))
    }

    /// [`Tensor::full`], returning device errors.
    pub fn try_full(shape: S, value: E, device: Device) -> Result<Self> {
        Ok(Tensor::from_storage(
            Storage::full(value, shape.numel(), device)?,
            shape,
        ))
    }

    /// A tensor of `shape` holding `data` in row-major order.
    ///
    /// # Panics
    /// When `data.len()` is not the shape's element count (see [`Tensor::try_from_vec`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6], (2usize, Const::<3>), Device::Cpu);
    /// assert_eq!(t.dims(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn from_vec(data: Vec<E>, shape: S, device: Device) -> Self {
        ok(Self::try_from_vec(data, shape, device))
    }

    /// [`Tensor::from_vec`], returning an error that names the shape and the length.
    pub fn try_from_vec(data: Vec<E>, shape: S, device: Device) -> Result<Self> {
        check_len(data.len(), &shape.dims(), &S::NAMES)?;
        Ok(Tensor::from_storage(
            Storage::from_vec(data, device)?,
            shape,
        ))
    }
}

/// The error of `from_vec` when `len` elements do not fill `dims` (named by `names`); not
/// generic, so the message is compiled once, not once per shape.
fn check_len(len: usize, dims: &[usize], names: &[Option<char>]) -> Result<()> {
    let numel: usize = dims.iter().product();
    if len != numel {
        return Err(Error::BadArgument {
            op: "from_vec",
            msg: format!(
                "{len} elements given for shape {}, which holds {numel}",
                describe_dims(dims, names),
            ),
        });
    }
    Ok(())
}

impl<S: Shape, E: Num> Tensor<S, E> {
    /// A tensor of zeros.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank2<2, 2>, i64> = Tensor::zeros((Const, Const), Device::Cpu);
    /// assert_eq!(t.to_vec(), vec![0; 4]);
    /// ```
    pub fn zeros(shape: S, device: Device) -> Self {
        Self::full(shape, E::ZERO, device)
    }

    /// A tensor of ones.
    pub fn ones(shape: S, device: Device) -> Self {
        Self::full(shape, E::ONE, device)
    }

    /// Zeros of the same shape and device as `self`.
    pub fn zeros_like(&self) -> Self {
        Self::zeros(self.shape(), self.device())
    }

    /// Ones of the same shape and device as `self`.
    pub fn ones_like(&self) -> Self {
        Self::ones(self.shape(), self.device())
    }

    /// [`Tensor::ones_like`], returning device errors.
    pub(crate) fn try_ones_like(&self) -> Result<Self> {
        Self::try_full(self.shape(), E::ONE, self.device())
    }
}

impl<S: Shape, E: rtx_kernels::Float> Tensor<S, E> {
    /// A tensor whose every element the caller is about to overwrite (PyTorch's
    /// `torch.empty`), such as the output of a SIMT kernel that writes all of it: zeros on the
    /// CPU, left as the allocator gives it on a GPU, which saves the launch that zeroing takes
    /// (and may be called while a CUDA graph is captured).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<(usize, usize)> = Tensor::empty((2, 3), Device::Cpu);
    /// assert_eq!(t.dims(), &[2, 3]);
    /// ```
    ///
    /// # Panics
    /// When the device cannot allocate it.
    #[track_caller]
    pub fn empty(shape: S, device: Device) -> Self {
        let n = shape.dims().iter().product();
        Self::from_storage(ok(Storage::uninit(device, n).map_err(Error::from)), shape)
    }
}

impl<S: ConstShape, E: Element> Tensor<S, E> {
    /// A tensor from a nested array literal whose lengths the compiler checks against `S`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu);
    /// assert_eq!(t.to_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// ```
    pub fn from_array<A: ArrayLiteral<S, E>>(data: A, device: Device) -> Self {
        Self::from_vec(data.flatten(), S::default(), device)
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn from_vec_names_shape_and_length() {
        let err = Tensor::try_from_vec(vec![1.0f32; 5], (2usize, Const::<3>), Device::Cpu)
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "from_vec: 5 elements given for shape [2, 3], which holds 6"
        );
    }

    #[test]
    fn literals_of_every_rank() {
        let t: Tensor<Rank3<2, 1, 2>, u8> = Tensor::from_array([[[1, 2]], [[3, 4]]], Device::Cpu);
        assert_eq!(t.to_vec(), vec![1, 2, 3, 4]);
        let s: Tensor<Rank0, bool> = Tensor::from_array(true, Device::Cpu);
        assert!(s.item());
    }
}
