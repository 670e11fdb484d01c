//! Seeded parameter initializers (PyTorch's `torch.nn.init`), drawn from the Philox stream,
//! and [`Init`], the trait of modules built from a device and a seed.
//!
//! Determinism: a layer built with model seed `seed` draws its parameter named `name` (the
//! dotted PyTorch name, `fc1.weight`) from the stream of [`param_seed`]`(seed, name)`: the
//! FNV-1a hash of the name, xored with the seed and passed through the SplitMix64 finalizer.
//! Each parameter's values therefore depend only on the model seed and its own name, so adding,
//! removing or reordering other layers never changes them.

use crate::shape::{ConstShape, Shape};
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;

/// A module that can build itself from a device and a seed: every layer in `nn`, arrays of
/// them, tensors with compile-time shapes (zeros) and every `#[model]` struct, whose derived
/// impl builds each field under its own name.
///
/// Seeds follow names: each parameter is drawn from [`param_seed`]`(seed, name)` with its
/// full dotted name, so a layer's values depend on the model seed and where the layer sits,
/// never on the other layers.
///
/// ```
/// use rtx::prelude::*;
///
/// #[model]
/// struct Mlp {
///     fc1: Linear<4, 8>,
///     fc2: Linear<8, 2>,
/// }
///
/// let a = Mlp::init(&Device::Cpu, 7);
/// let b = Mlp::init(&Device::Cpu, 7);
/// assert_eq!(a.fc2.weight.to_vec(), b.fc2.weight.to_vec());
/// // The same layer at the same name draws the same values in any model.
/// assert_eq!(a.fc1.weight.to_vec(), Linear::<4, 8>::init_named(&Device::Cpu, 7, "fc1.").weight.to_vec());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be built from a device and a seed alone",
    label = "no `Init` for this field's type",
    note = "give the field `#[init(expr)]`, where `device: &Device`, `seed: u64` and the \
            field's `prefix: &str` are in scope (for a `Vec` of `n` modules: \
            `#[init(rtx::nn::init::init_vec(n, device, seed, prefix))]`), or implement \
            `rtx::nn::Init` for the type"
)]
pub trait Init: Sized {
    /// Builds the module with its tensors named `prefix` + their path (`prefix` is empty at
    /// the root, else ends in `.`), each seeded from `seed` and its full name.
    fn init_named(device: &Device, seed: u64, prefix: &str) -> Self;

    /// Builds the module as the root of a model, seeded with `seed`.
    fn init(device: &Device, seed: u64) -> Self {
        Self::init_named(device, seed, "")
    }
}

/// `n` modules named `prefix` + `0.` .. `prefix` + `{n-1}.`, for a `Vec` field of a
/// `#[model]` (`#[init(rtx::nn::init::init_vec(4, device, seed, prefix))]`).
///
/// ```
/// # use rtx::prelude::*;
/// let layers: Vec<Linear<2, 2>> = rtx::nn::init::init_vec(3, &Device::Cpu, 1, "layers.");
/// assert_eq!(layers.len(), 3);
/// assert_ne!(layers[0].weight.to_vec(), layers[1].weight.to_vec());
/// ```
pub fn init_vec<M: Init>(n: usize, device: &Device, seed: u64, prefix: &str) -> Vec<M> {
    (0..n)
        .map(|i| M::init_named(device, seed, &format!("{prefix}{i}.")))
        .collect()
}

/// A bare tensor field starts at zeros (as `nn.Parameter(torch.zeros(..))`); give the field
/// `#[init(..)]` for anything else.
impl<S: ConstShape, E: Float> Init for Tensor<S, E> {
    fn init_named(device: &Device, _seed: u64, _prefix: &str) -> Self {
        Tensor::zeros(S::default(), *device)
    }
}

impl<M: Init, const N: usize> Init for [M; N] {
    fn init_named(device: &Device, seed: u64, prefix: &str) -> Self {
        std::array::from_fn(|i| M::init_named(device, seed, &format!("{prefix}{i}.")))
    }
}

/// The seed of the parameter `name` in a model seeded with `seed` (see the module docs).
///
/// ```
/// # use rtx::nn::init::param_seed;
/// assert_eq!(param_seed(7, "fc1.weight"), param_seed(7, "fc1.weight"));
/// assert_ne!(param_seed(7, "fc1.weight"), param_seed(7, "fc2.weight"));
/// assert_ne!(param_seed(7, "fc1.weight"), param_seed(8, "fc1.weight"));
/// ```
pub fn param_seed(seed: u64, name: &str) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = name.bytes().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    });
    // SplitMix64's finalizer, so nearby seeds and names give unrelated streams.
    let mut z = (hash ^ seed).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The nonlinearity that follows a layer, for its recommended gain
/// (PyTorch's `calculate_gain`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nonlinearity {
    /// No nonlinearity (or a linear / convolution / sigmoid layer): gain 1.
    Linear,
    /// ReLU: gain sqrt(2).
    Relu,
    /// Leaky ReLU with this negative slope: gain sqrt(2 / (1 + slope²)).
    LeakyRelu(f64),
    /// Tanh: gain 5/3.
    Tanh,
}

impl Nonlinearity {
    /// The gain PyTorch recommends for this nonlinearity.
    ///
    /// ```
    /// # use rtx::nn::init::Nonlinearity;
    /// assert_eq!(Nonlinearity::Relu.gain(), 2f64.sqrt());
    /// ```
    pub fn gain(self) -> f64 {
        match self {
            Nonlinearity::Linear => 1.0,
            Nonlinearity::Relu => 2f64.sqrt(),
            Nonlinearity::LeakyRelu(a) => (2.0 / (1.0 + a * a)).sqrt(),
            Nonlinearity::Tanh => 5.0 / 3.0,
        }
    }
}

/// PyTorch's `(fan_in, fan_out)` of a weight of these dims: `dims[1]` and `dims[0]` times the
/// receptive field (the product of the remaining dims); a 1-d tensor has both equal to its size.
///
/// ```
/// # use rtx::nn::init::fans;
/// assert_eq!(fans(&[8, 3, 5, 5]), (75, 200));
/// ```
pub fn fans(dims: &[usize]) -> (usize, usize) {
    match dims {
        [] => (1, 1),
        [n] => (*n, *n),
        [o, i, rest @ ..] => {
            let field: usize = rest.iter().product();
            (i * field, o * field)
        }
    }
}

/// Uniform draws in `[-bound, bound)`.
///
/// ```
/// # use rtx::prelude::*;
/// let t: Tensor<Rank1<100>> = rtx::nn::init::uniform((Const,), 0.5, 1, Device::Cpu);
/// assert!(t.to_vec().iter().all(|x| x.abs() <= 0.5));
/// ```
pub fn uniform<S: Shape, E: Float>(
    shape: S,
    bound: f64,
    seed: u64,
    device: Device,
) -> Tensor<S, E> {
    if bound == 0.0 {
        return Tensor::zeros(shape, device);
    }
    Tensor::rand_uniform(shape, -bound, bound, seed, device)
}

/// Kaiming (He) uniform: `U(-b, b)` with `b = gain * sqrt(3 / fan_in)` (PyTorch's
/// `kaiming_uniform_`, mode `fan_in`).
///
/// ```
/// # use rtx::prelude::*;
/// # use rtx::nn::init::*;
/// let w: Tensor<Rank2<16, 6>> = kaiming_uniform((Const, Const), Nonlinearity::Relu, 3, Device::Cpu);
/// assert!(w.to_vec().iter().all(|x| x.abs() <= 1.0)); // b = sqrt(2) * sqrt(3 / 6) = 1
/// ```
pub fn kaiming_uniform<S: Shape, E: Float>(
    shape: S,
    nonlinearity: Nonlinearity,
    seed: u64,
    device: Device,
) -> Tensor<S, E> {
    let (fan_in, _) = fans(&shape.dims());
    let bound = nonlinearity.gain() * (3.0 / fan_in.max(1) as f64).sqrt();
    uniform(shape, bound, seed, device)
}

/// Kaiming (He) normal: `N(0, std²)` with `std = gain / sqrt(fan_in)` (PyTorch's
/// `kaiming_normal_`, mode `fan_in`).
///
/// ```
/// # use rtx::prelude::*;
/// # use rtx::nn::init::*;
/// let w: Tensor<Rank2<64, 50>> = kaiming_normal((Const, Const), Nonlinearity::Relu, 3, Device::Cpu);
/// let v = w.to_vec();
/// let var = v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32;
/// assert!((var - 2.0 / 50.0).abs() < 0.01);
/// ```
pub fn kaiming_normal<S: Shape, E: Float>(
    shape: S,
    nonlinearity: Nonlinearity,
    seed: u64,
    device: Device,
) -> Tensor<S, E> {
    let (fan_in, _) = fans(&shape.dims());
    let std = nonlinearity.gain() / (fan_in.max(1) as f64).sqrt();
    Tensor::randn_with(shape, 0.0, std, seed, device)
}

/// Xavier (Glorot) uniform: `U(-b, b)` with `b = gain * sqrt(6 / (fan_in + fan_out))`.
///
/// ```
/// # use rtx::prelude::*;
/// let w: Tensor<Rank2<3, 3>> = rtx::nn::init::xavier_uniform((Const, Const), 1.0, 0, Device::Cpu);
/// assert!(w.to_vec().iter().all(|x| x.abs() <= 1.0));
/// ```
pub fn xavier_uniform<S: Shape, E: Float>(
    shape: S,
    gain: f64,
    seed: u64,
    device: Device,
) -> Tensor<S, E> {
    let (fan_in, fan_out) = fans(&shape.dims());
    let bound = gain * (6.0 / (fan_in + fan_out).max(1) as f64).sqrt();
    uniform(shape, bound, seed, device)
}

/// Xavier (Glorot) normal: `N(0, std²)` with `std = gain * sqrt(2 / (fan_in + fan_out))`.
///
/// ```
/// # use rtx::prelude::*;
/// let w: Tensor<Rank2<3, 3>> = rtx::nn::init::xavier_normal((Const, Const), 1.0, 0, Device::Cpu);
/// assert_eq!(w.dims(), &[3, 3]);
/// ```
pub fn xavier_normal<S: Shape, E: Float>(
    shape: S,
    gain: f64,
    seed: u64,
    device: Device,
) -> Tensor<S, E> {
    let (fan_in, fan_out) = fans(&shape.dims());
    let std = gain * (2.0 / (fan_in + fan_out).max(1) as f64).sqrt();
    Tensor::randn_with(shape, 0.0, std, seed, device)
}

/// The bound of PyTorch's default `Linear`/`Conv` init, `1 / sqrt(fan_in)`: what
/// `kaiming_uniform_(a = sqrt(5))` gives for the weight, and the bias's own bound.
///
/// ```
/// assert_eq!(rtx::nn::init::default_bound(16), 0.25);
/// ```
pub fn default_bound(fan_in: usize) -> f64 {
    if fan_in == 0 {
        0.0
    } else {
        1.0 / (fan_in as f64).sqrt()
    }
}

/// The weight and bias of a `Linear` or `Conv` layer as PyTorch initializes them:
/// both `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`, with `fan_in` taken from the weight's dims and
/// seeds derived from `prefix + "weight"` and `prefix + "bias"`.
///
/// ```
/// # use rtx::prelude::*;
/// let (w, b): (Tensor<Rank2<2, 4>>, Tensor<Rank1<2>>) =
///     rtx::nn::init::default_weight_bias((Const, Const), (Const,), 1, "fc.", Device::Cpu);
/// assert!(w.to_vec().iter().chain(b.to_vec().iter()).all(|x| x.abs() <= 0.5));
/// ```
pub fn default_weight_bias<SW: Shape, SB: Shape, E: Float>(
    weight: SW,
    bias: SB,
    seed: u64,
    prefix: &str,
    device: Device,
) -> (Tensor<SW, E>, Tensor<SB, E>) {
    let (fan_in, _) = fans(&weight.dims());
    let bound = default_bound(fan_in);
    let w = uniform(
        weight,
        bound,
        param_seed(seed, &format!("{prefix}weight")),
        device,
    );
    let b = uniform(
        bias,
        bound,
        param_seed(seed, &format!("{prefix}bias")),
        device,
    );
    (w, b)
}
