//! `Conv2d`: a 2-d convolution layer with PyTorch's weight layout `[O, C/G, K, K]`, names and
//! default initialization; stride, padding, dilation and groups come from its settings type.

use super::init;
use super::init::Init;
use super::module::{Module, Visitor, VisitorMut, join};
use crate::error::ok;
use crate::shape::conv::ConvOptions;
use crate::shape::{Const, Dim, Shape};
use crate::tensor::{Conv, Tensor, conv_check};
use rtx_backends::Device;
use rtx_kernels::Float;
use std::marker::PhantomData;

/// The layer's const check: the convolution's, with the weight's shape spelled out here so
/// the `const` line in `forward` stays short.
#[track_caller]
const fn check<X: Shape, Y: Shape, const I: usize, const O: usize, const K: usize>(
    settings: (usize, usize, usize, usize),
) {
    conv_check::<X, (Const<O>, Const<I>, Const<K>, Const<K>), Y>(settings);
}

/// A 2-d convolution (PyTorch's `nn.Conv2d`) with `I` weight input channels (the input's
/// channels divided by the groups), `O` output channels, a `K x K` kernel and settings `Opt`
/// ([`Conv`] or [`GroupedConv`](crate::GroupedConv)).
///
/// ```
/// # use rtx::prelude::*;
/// let conv = Conv2d::<3, 8, 3, Conv<1, 1>>::new(Device::Cpu, 0); // stride 1, padding 1
/// let x: Tensor<(Dyn<'N'>, Const<3>, Const<8>, Const<8>)> =
///     Tensor::ones((Dyn(2), Const, Const, Const), Device::Cpu);
/// let y: Tensor<(Dyn<'N'>, Const<8>, Const<8>, Const<8>)> = conv.forward(&x);
/// assert_eq!(y.dims(), &[2, 8, 8, 8]);
/// ```
#[derive(Clone, Debug)]
pub struct Conv2d<const I: usize, const O: usize, const K: usize, Opt = Conv<1>, E: Float = f32> {
    /// The weight, `[O, I, K, K]`.
    pub weight: Tensor<(Const<O>, Const<I>, Const<K>, Const<K>), E>,
    /// The bias, `[O]`; `None` after [`Conv2d::without_bias`].
    pub bias: Option<Tensor<(Const<O>,), E>>,
    options: PhantomData<fn() -> Opt>,
}

impl<const I: usize, const O: usize, const K: usize, Opt, E: Float> Conv2d<I, O, K, Opt, E> {
    /// A layer initialized as PyTorch does (`U(-1/sqrt(I*K*K), 1/sqrt(I*K*K))` for weight and
    /// bias), seeded for the names `weight` and `bias`.
    pub fn new(device: Device, seed: u64) -> Self {
        Self::init_named(&device, seed, "")
    }

    /// The same layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(self) -> Self {
        Conv2d { bias: None, ..self }
    }

    /// Convolves a `[N, C, H, W]` input, giving `[N, O, HO, WO]` (output sizes from the
    /// result type, verified as [`Tensor::conv2d`] does).
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_conv2d`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut conv = Conv2d::<1, 1, 2, Conv<2>>::new(Device::Cpu, 0);
    /// conv.weight = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    /// conv.bias = Some(Tensor::from_array([1.0], Device::Cpu));
    /// let x: Tensor<Rank4<1, 1, 2, 4>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    /// let y: Tensor<Rank4<1, 1, 1, 2>> = conv.forward(&x);
    /// assert_eq!(y.to_vec(), vec![5.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn forward<N: Dim, C: Dim, H: Dim, W: Dim, HO: Dim, WO: Dim>(
        &self,
        x: &Tensor<(N, C, H, W), E>,
    ) -> Tensor<(N, Const<O>, HO, WO), E>
    where
        Opt: ConvOptions<C, Const<I>> + Default,
    {
        // The check sits here, not only in `conv2d`: rustc's note then names the caller's
        // line (see `crate::shape::checks`).
        const { check::<(N, C, H, W), (N, Const<O>, HO, WO), I, O, K>(Opt::SETTINGS) };
        ok(x.conv2d_run(&self.weight, self.bias.as_ref(), Opt::default()))
    }
}

impl<const I: usize, const O: usize, const K: usize, Opt, E: Float> Init
    for Conv2d<I, O, K, Opt, E>
{
    fn init_named(device: &Device, seed: u64, prefix: &str) -> Self {
        let device = *device;
        let (weight, bias) =
            init::default_weight_bias((Const, Const, Const, Const), (Const,), seed, prefix, device);
        Conv2d {
            weight,
            bias: Some(bias),
            options: PhantomData,
        }
    }
}

impl<const I: usize, const O: usize, const K: usize, Opt, E: Float> Module
    for Conv2d<I, O, K, Opt, E>
{
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
    fn grouped_depthwise_shapes_and_init_bound() {
        let conv = Conv2d::<1, 4, 3, GroupedConv<4, 1, 1>>::new(Device::Cpu, 2);
        let x: Tensor<Rank4<1, 4, 5, 5>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
        let y: Tensor<Rank4<1, 4, 5, 5>> = conv.forward(&x);
        assert_eq!(y.dims(), &[1, 4, 5, 5]);
        assert!(conv.weight.to_vec().iter().all(|w| w.abs() <= 1.0 / 3.0));
        assert_eq!(conv.num_parameters(), 4 * 9 + 4);
    }
}
