// A 5x5 kernel does not fit a 3x3 input without padding.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 1, 3, 3>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<1, 1, 5, 5>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 1, 1, 1>> = x.conv2d(&w, Conv::<1>);
}
