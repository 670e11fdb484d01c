//! `Conv1d`: a 1-d convolution layer with PyTorch's weight layout `[O, C/G, K]`, names and
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
    conv_check::<X, (Const<O>, Const<I>, Const<K>), Y>(settings);
}

/// A 1-d convolution (PyTorch's `nn.Conv1d`) with `I` weight input channels (the input's
/// channels divided by the groups), `O` output channels, a kernel of `K` taps and settings
/// `Opt` ([`Conv`] or [`GroupedConv`](crate::GroupedConv)).
///
/// ```
/// # use rtx::prelude::*;
/// let conv = Conv1d::<2, 4, 3>::new(Device::Cpu, 0);
/// let x: Tensor<(Dyn<'N'>, Const<2>, Const<10>)> = Tensor::ones((Dyn(3), Const, Const), Device::Cpu);
/// let y: Tensor<(Dyn<'N'>, Const<4>, Const<8>)> = conv.forward(&x);
/// assert_eq!(y.dims(), &[3, 4, 8]);
/// ```
#[derive(Clone, Debug)]
pub struct Conv1d<const I: usize, const O: usize, const K: usize, Opt = Conv<1>, E: Float = f32> {
    /// The weight, `[O, I, K]`.
    pub weight: Tensor<(Const<O>, Const<I>, Const<K>), E>,
    /// The bias, `[O]`; `None` after [`Conv1d::without_bias`].
    pub bias: Option<Tensor<(Const<O>,), E>>,
    options: PhantomData<fn() -> Opt>,
}

impl<const I: usize, const O: usize, const K: usize, Opt, E: Float> Conv1d<I, O, K, Opt, E> {
    /// A layer initialized as PyTorch does (`U(-1/sqrt(I*K), 1/sqrt(I*K))` for weight and
    /// bias), seeded for the names `weight` and `bias`.
    pub fn new(device: Device, seed: u64) -> Self {
        Self::init_named(&device, seed, "")
    }

    /// The same layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(self) -> Self {
        Conv1d { bias: None, ..self }
    }

    /// Convolves a `[N, C, L]` input, giving `[N, O, LO]` (output length from the result
    /// type, verified as [`Tensor::conv1d`] does).
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_conv1d`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut conv = Conv1d::<1, 1, 2>::new(Device::Cpu, 0);
    /// conv.weight = Tensor::from_array([[[1.0, -1.0]]], Device::Cpu);
    /// conv.bias = None;
    /// let x: Tensor<Rank3<1, 1, 3>> = Tensor::from_array([[[1.0, 4.0, 9.0]]], Device::Cpu);
    /// let y: Tensor<Rank3<1, 1, 2>> = conv.forward(&x);
    /// assert_eq!(y.to_vec(), vec![-3.0, -5.0]);
    /// ```
    #[track_caller]
    pub fn forward<N: Dim, C: Dim, L: Dim, LO: Dim>(
        &self,
        x: &Tensor<(N, C, L), E>,
    ) -> Tensor<(N, Const<O>, LO), E>
    where
        Opt: ConvOptions<C, Const<I>> + Default,
    {
        // The check sits here, not only in `conv1d`: rustc's note then names the caller's
        // line (see `crate::shape::checks`).
        const { check::<(N, C, L), (N, Const<O>, LO), I, O, K>(Opt::SETTINGS) };
        ok(x.conv1d_run(&self.weight, self.bias.as_ref(), Opt::default()))
    }
}

impl<const I: usize, const O: usize, const K: usize, Opt, E: Float> Init
    for Conv1d<I, O, K, Opt, E>
{
    fn init_named(device: &Device, seed: u64, prefix: &str) -> Self {
        let device = *device;
        let (weight, bias) =
            init::default_weight_bias((Const, Const, Const), (Const,), seed, prefix, device);
        Conv1d {
            weight,
            bias: Some(bias),
            options: PhantomData,
        }
    }
}

impl<const I: usize, const O: usize, const K: usize, Opt, E: Float> Module
    for Conv1d<I, O, K, Opt, E>
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
