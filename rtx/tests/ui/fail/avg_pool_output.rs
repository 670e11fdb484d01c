// avg_pool2d with a 3x3 window, stride 1 and padding 1 keeps 10x10; 8x8 is wrong.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank4<1, 2, 10, 10>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let _y: Tensor<Rank4<1, 2, 8, 8>> = x.avg_pool2d(Pool::<3, 1, 1>);
}
