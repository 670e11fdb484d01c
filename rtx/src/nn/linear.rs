//! `Linear`: the affine layer `y = x Wᵀ + b`, with PyTorch's layout (`weight` `[O, I]`,
//! `bias` `[O]`), names and default initialization.

use super::init;
use super::init::Init;
use super::module::{Module, Visitor, VisitorMut, join};
use crate::error::ok;
use crate::shape::Const;
use crate::tensor::{MatmulShapes, Tensor};
use rtx_backends::Device;
use rtx_kernels::Float;
use rtx_kernels::op::UnaryOp;

/// The output shape of [`Linear::forward`] on an input of shape `S`: `S` with its last dim
/// (`I`) replaced by `O`.
pub type LinearOut<S, const I: usize, const O: usize> =
    <S as MatmulShapes<(Const<I>, Const<O>)>>::Output;

/// A fully connected layer from `I` to `O` features (PyTorch's `nn.Linear`).
///
/// ```
/// # use rtx::prelude::*;
/// let fc = Linear::<4, 2>::new(Device::Cpu, 0);
/// let x: Tensor<(Dyn<'B'>, Const<4>)> = Tensor::ones((Dyn(3), Const), Device::Cpu);
/// let y = fc.forward(&x);
/// assert_eq!(y.dims(), &[3, 2]);
/// ```
#[derive(Clone, Debug)]
pub struct Linear<const I: usize, const O: usize, E: Float = f32> {
    /// The weight, `[O, I]`.
    pub weight: Tensor<(Const<O>, Const<I>), E>,
    /// The bias, `[O]`; `None` for a layer built [`Linear::without_bias`].
    pub bias: Option<Tensor<(Const<O>,), E>>,
}

impl<const I: usize, const O: usize, E: Float> Linear<I, O, E> {
    /// A layer initialized as PyTorch does (`U(-1/sqrt(I), 1/sqrt(I))` for weight and bias),
    /// seeded for the parameter names `weight` and `bias`; use [`Linear::init`] inside a
    /// model so each layer's seeds follow its own names.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let fc = Linear::<16, 3>::new(Device::Cpu, 1);
    /// assert!(fc.weight.to_vec().iter().all(|w| w.abs() <= 0.25));
    /// ```
    pub fn new(device: Device, seed: u64) -> Self {
        Self::init_named(&device, seed, "")
    }

    /// The same layer without its bias (PyTorch's `bias=False`).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let fc = Linear::<4, 2>::new(Device::Cpu, 0).without_bias();
    /// assert_eq!(fc.num_parameters(), 8);
    /// ```
    pub fn without_bias(self) -> Self {
        Linear {
            weight: self.weight,
            bias: None,
        }
    }

    /// `x Wᵀ + b` over the last axis of any `[.., I]` input (ranks 1 to 4).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut fc = Linear::<2, 1>::new(Device::Cpu, 0);
    /// fc.weight = Tensor::from_array([[1.0, -1.0]], Device::Cpu);
    /// fc.bias = Some(Tensor::from_array([0.5], Device::Cpu));
    /// let x: Tensor<Rank3<1, 2, 2>> = Tensor::from_array([[[3.0, 1.0], [0.0, 2.0]]], Device::Cpu);
    /// assert_eq!(fc.forward(&x).to_vec(), vec![2.5, -1.5]);
    /// ```
    pub fn forward<S>(&self, x: &Tensor<S, E>) -> Tensor<LinearOut<S, I, O>, E>
    where
        S: MatmulShapes<(Const<I>, Const<O>)>,
    {
        // With a bias, one product that adds it (in the GEMM's epilogue on a GPU), as the
        // compiled forward computes it, so the two agree bit for bit.
        match &self.bias {
            Some(b) => ok(x.try_matmul_bias(&self.weight.t(), b)),
            None => x.matmul(&self.weight.t()),
        }
    }

    /// `act(x Wᵀ + b)`: the layer and an elementwise activation, with the bits of
    /// [`Linear::forward`] followed by the activation's own method. At inference on the CPU
    /// the activation runs on each block of output rows right after its product, while the
    /// block is in cache, which spares a second pass over the output and its allocation; with
    /// a tape to record, without a bias or on a GPU it is the two ops.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// use rtx::op::UnaryOp;
    /// let fc = Linear::<3, 2>::new(Device::Cpu, 0);
    /// let x: Tensor<Rank2<2, 3>> =
    ///     Tensor::from_array([[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]], Device::Cpu);
    /// let y = fc.forward_act(&x, UnaryOp::Gelu);
    /// assert_eq!(y.to_vec(), fc.forward(&x).gelu().to_vec());
    /// ```
    pub fn forward_act<S>(&self, x: &Tensor<S, E>, act: UnaryOp) -> Tensor<LinearOut<S, I, O>, E>
    where
        S: MatmulShapes<(Const<I>, Const<O>)>,
    {
        match &self.bias {
            Some(b) => ok(x.try_matmul_bias_act(&self.weight.t(), b, act)),
            None => ok(x.matmul(&self.weight.t()).try_unary_op(act)),
        }
    }
}

impl<const I: usize, const O: usize, E: Float> Init for Linear<I, O, E> {
    fn init_named(device: &Device, seed: u64, prefix: &str) -> Self {
        let device = *device;
        let (weight, bias) =
            init::default_weight_bias((Const, Const), (Const,), seed, prefix, device);
        Linear {
            weight,
            bias: Some(bias),
        }
    }
}

impl<const I: usize, const O: usize, E: Float> Module for Linear<I, O, E> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        self.weight.visit(&join(prefix, "weight."), v);
        if let Some(b) = &self.bias {
            b.visit(&join(prefix, "bias."), v);
        }
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.weight.visit_mut(&join(prefix, "weight."), v);
        if let Some(b) = &mut self.bias {
            b.visit_mut(&join(prefix, "bias."), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn names_shapes_and_seeds() {
        let fc = Linear::<3, 2>::new(Device::Cpu, 9);
        let names: Vec<String> = fc.tensor_names().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight", "bias"]);
        assert_eq!(fc.num_parameters(), 8);
        let again = Linear::<3, 2>::new(Device::Cpu, 9);
        assert_eq!(fc.weight.to_vec(), again.weight.to_vec());
        let bound = 1.0 / 3f32.sqrt();
        assert!(fc.weight.to_vec().iter().all(|w| w.abs() <= bound));
        let x: Tensor<Rank1<3>> = Tensor::ones((Const,), Device::Cpu);
        assert_eq!(fc.forward(&x).dims(), &[2]);
    }
}
