// Grouped convolution: 2 groups do not divide 5 output channels.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 4, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<5, 2, 3, 3>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 5, 6, 6>> = x.conv2d(&w, GroupedConv::<2>);
}
