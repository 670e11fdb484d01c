// A convolution's stride must be at least 1.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 1, 8, 8>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<1, 1, 3, 3>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 1, 6, 6>> = x.conv2d(&w, Conv::<0>);
}
