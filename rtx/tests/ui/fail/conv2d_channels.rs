// conv2d: the weight expects 3 input channels, the input has 1.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<8, 1, 28, 28>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<6, 3, 5, 5>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<8, 6, 24, 24>> = x.conv2d(&w, Conv::<1>);
}
