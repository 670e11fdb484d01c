// conv2d_bias checks the output size like conv2d: a 3x3 kernel over 8x8 gives 6x6.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 2, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<4, 2, 3, 3>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let b: Tensor<Rank1<4>> = Tensor::zeros((Const,), Device::Cpu);
    let _y: Tensor<Rank4<1, 4, 8, 8>> = x.conv2d_bias(&w, &b, Conv::<1>);
}
