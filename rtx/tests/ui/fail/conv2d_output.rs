// conv2d: a 5x5 kernel over 28x28 without padding gives 24x24, not 28x28.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<8, 1, 28, 28>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<6, 1, 5, 5>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<8, 6, 28, 28>> = x.conv2d(&w, Conv::<1>);
}
