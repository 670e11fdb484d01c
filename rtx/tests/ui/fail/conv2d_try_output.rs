// try_conv2d with stride 2 and padding 1 over 28x28 gives 14x14, not 28x28.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 3, 28, 28>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let w: Tensor<Rank4<8, 3, 3, 3>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Result<Tensor<Rank4<1, 8, 28, 28>>> = x.try_conv2d(&w, Conv::<2, 1>);
}
