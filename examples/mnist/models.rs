//! The two MNIST models of the `mnist` example (and of `benches/training.rs`): an MLP
//! 784-256-10 with ReLU, and a LeNet-5-style CNN (widened). Both take a batch of `[B, 1, 28, 28]`
//! images, with the batch dim `B` either static (full batches) or known at run time (the
//! final partial batch), and give `[B, 10]` logits. `#[model]` compiles each forward, for
//! every batch type at once, into fused kernels and a static backward.

use rtx::prelude::*;

// ANCHOR: types
/// A batch of MNIST images.
pub type Images<B> = Tensor<(B, Const<1>, Const<28>, Const<28>)>;
/// A batch of logits over the ten digits.
pub type Logits<B> = Tensor<(B, Const<10>)>;
// ANCHOR_END: types

// ANCHOR: normalize
/// The training set's pixel mean: the forwards shift the pixels (in [0, 1]) by it and scale
/// them by [`STD`], as the usual PyTorch recipe does (`Normalize((0.1307,), (0.3081,))`).
pub const MEAN: f32 = 0.1307;
/// The training set's pixel standard deviation.
pub const STD: f32 = 0.3081;
// ANCHOR_END: normalize

// ANCHOR: mlp
/// A two-layer perceptron: 784 -> 256 (ReLU) -> 10.
#[model]
pub struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 10>,
}
// ANCHOR_END: mlp

// ANCHOR: mlp_forward
#[model]
impl Mlp {
    /// Logits for a batch of images (normalized, then flattened to 784 features).
    pub fn forward<B: Dim>(&self, x: &Images<B>) -> Logits<B> {
        let x = (x - MEAN) / STD;
        let x = x.reshape((x.dim::<0>(), Const::<784>));
        let h = self.fc1.forward(&x).relu();
        self.fc2.forward(&h)
    }
}
// ANCHOR_END: mlp_forward

/// LeNet-5's layout, widened: two 5x5 convolutions (16 and 32 channels where LeNet-5 has 6
/// and 16; the first padded to keep 28x28), each followed by ReLU and 2x2 max pooling, then
/// 800 -> 120 -> 84 -> 10. The wider convolutions reach 98.5% test accuracy within 3 epochs,
/// which LeNet-5's do not reliably (98.2-98.5% with rtx and PyTorch alike).
// ANCHOR: lenet
#[model]
pub struct Lenet {
    conv1: Conv2d<1, 16, 5, Conv<1, 2>>,
    conv2: Conv2d<16, 32, 5>,
    pool: MaxPool2d<2, 2>,
    fc1: Linear<800, 120>,
    fc2: Linear<120, 84>,
    fc3: Linear<84, 10>,
}
// ANCHOR_END: lenet

#[model]
impl Lenet {
    // ANCHOR: lenet_forward
    /// Logits for a batch of images.
    pub fn forward<B: Dim>(&self, x: &Images<B>) -> Logits<B> {
        let x = (x - MEAN) / STD;
        let c1: Tensor<(B, Const<16>, Const<28>, Const<28>)> = self.conv1.forward(&x).relu();
        let p1: Tensor<(B, Const<16>, Const<14>, Const<14>)> = self.pool.forward(&c1);
        let c2: Tensor<(B, Const<32>, Const<10>, Const<10>)> = self.conv2.forward(&p1).relu();
        let p2: Tensor<(B, Const<32>, Const<5>, Const<5>)> = self.pool.forward(&c2);
        let flat = p2.reshape((x.dim::<0>(), Const::<800>));
        let h1 = self.fc1.forward(&flat).relu();
        let h2 = self.fc2.forward(&h1).relu();
        self.fc3.forward(&h2)
    }
    // ANCHOR_END: lenet_forward
}
